"""A Swiss-system tournament over ideas (the ranker of Si et al., N = 5 rounds by default).

Each round pairs ideas with neighbours of equal or nearest score; the judge picks the
better of each pair; a win is worth one point, so after N rounds every score lies in
[0, N]. A full round robin would need K(K−1)/2 calls; a Swiss round needs ⌊K/2⌋ (twice
that when both orders are judged), so ⌈log₂ K⌉ rounds cost O(K log K) calls.

Choices, stated once:
- **Pairing.** Ideas are ranked by points, ties broken by a seeded shuffle that changes
  every round (round 1 is therefore a random pairing). The highest unpaired idea meets
  the nearest-ranked idea it has not met yet; a depth-first search backs up when that
  leaves someone without a fresh opponent, so a rematch happens only when no
  rematch-free pairing exists (or the search budget runs out on very large fields, in
  which case a greedy pairing with the fewest rematches it can find is used).
- **Byes.** With an odd count, the lowest-ranked idea that has not had a bye sits out and
  gets one point, the usual Swiss convention: a bye is not the idea's fault, and a zero
  would push it to the bottom on scheduling luck alone. No idea gets two byes; asking for
  more rounds than that allows (more rounds than ideas, odd K) is an error.
- **Sides.** Which idea is shown first is drawn from the seeded stream, so the
  higher-ranked idea is not systematically shown as A.
- **Both orders.** When a pair is judged in both orders and the two verdicts disagree
  (or either is a tie), the game is a draw worth half a point to each: the judge did not
  prefer either idea once position is factored out, and halves keep the total number of
  points equal to the number of games.
- **Unparseable answers** never decide a game. A game is decided by the verdicts that
  parsed; with none, it is void (no points to either) and counted.

Everything here is pure: `pair_round(state)` gives the next round, `apply_round(state,
round, games)` gives the next state, so a Celery task can drive one round at a time.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from judging.methods.pairwise import PairCall
from judging.methods.parsing import PairwiseVerdict, Unparseable, Winner

__all__ = [
    "DEFAULT_ROUNDS",
    "GameResult",
    "SwissResult",
    "SwissRound",
    "SwissState",
    "apply_round",
    "calls_for_round",
    "calls_per_round",
    "pair_round",
    "resolve_game",
    "run_swiss",
    "suggested_rounds",
    "total_calls",
]

Id = Hashable
DEFAULT_ROUNDS = 5
_SEARCH_BUDGET = 200_000


@dataclass(frozen=True)
class SwissState:
    """Everything the next pairing depends on."""

    ideas: tuple[Id, ...]
    points: Mapping[Id, float]
    played: frozenset[frozenset[Id]] = frozenset()
    byes: frozenset[Id] = frozenset()
    rounds_played: int = 0
    void_games: int = 0

    @classmethod
    def start(cls, ideas: Iterable[Id]) -> SwissState:
        ideas = tuple(ideas)
        if len(set(ideas)) != len(ideas):
            raise ValueError("idea ids must be unique")
        return cls(ideas=ideas, points={i: 0.0 for i in ideas})

    def standings(self) -> list[tuple[Id, float]]:
        """Ideas by points, highest first; equal points keep their input order."""
        position = {i: n for n, i in enumerate(self.ideas)}
        return sorted(self.points.items(), key=lambda kv: (-kv[1], position[kv[0]]))


@dataclass(frozen=True)
class SwissRound:
    number: int
    """1-based round number."""
    pairs: tuple[tuple[Id, Id], ...]
    """(shown first, shown second) for each game."""
    bye: Id | None
    rematches: int
    """Pairs that met before; 0 unless no rematch-free pairing was found."""


@dataclass(frozen=True)
class GameResult:
    first: Id
    second: Id
    points_first: float
    points_second: float
    void: bool = False
    agreed: bool | None = None
    """With both orders: did the two parsed verdicts agree? None when fewer than two parsed."""


def calls_per_round(n_ideas: int, both_orders: bool = False) -> int:
    return (n_ideas // 2) * (2 if both_orders else 1)


def total_calls(n_ideas: int, rounds: int = DEFAULT_ROUNDS, both_orders: bool = False) -> int:
    return rounds * calls_per_round(n_ideas, both_orders)


def suggested_rounds(n_ideas: int) -> int:
    """⌈log₂ K⌉, enough rounds for a single undefeated idea to emerge."""
    return max(1, math.ceil(math.log2(n_ideas))) if n_ideas > 1 else 0


def _rng(seed: int, round_number: int) -> random.Random:
    # A string seed is hashed with SHA-512 by `random`, so this is stable across runs.
    return random.Random(f"swiss:{seed}:{round_number}")


def _search(
    order: Sequence[Id], played: frozenset[frozenset[Id]], budget: list[int]
) -> list[tuple[Id, Id]] | None:
    """Rematch-free pairing of `order` (an even-length ranking), nearest-ranked first.

    Iterative depth-first search so 1,000+ ideas do not hit the recursion limit. Returns
    the pairs, or None when none exists or the shared `budget` is spent.
    """
    n = len(order)
    used = [False] * n
    frames: list[tuple[int, int]] = []
    x, start = 0, 1
    while n:
        budget[0] -= 1
        if budget[0] < 0:
            return None
        j = start
        while j < n and (used[j] or frozenset((order[x], order[j])) in played):
            j += 1
        if j < n:
            used[x] = used[j] = True
            frames.append((x, j))
            nxt = next((k for k in range(x + 1, n) if not used[k]), None)
            if nxt is None:
                break
            x, start = nxt, nxt + 1
        else:
            if not frames:
                return None
            x, j = frames.pop()
            used[x] = used[j] = False
            start = j + 1
    return [(order[a], order[b]) for a, b in frames]


def _greedy(order: Sequence[Id], played: frozenset[frozenset[Id]]) -> list[tuple[Id, Id]]:
    rest = list(order)
    pairs = []
    while rest:
        x = rest.pop(0)
        j = next((k for k, y in enumerate(rest) if frozenset((x, y)) not in played), 0)
        pairs.append((x, rest.pop(j)))
    return pairs


def pair_round(state: SwissState, *, seed: int = 0) -> SwissRound:
    """The pairing for round `state.rounds_played + 1`."""
    number = state.rounds_played + 1
    rng = _rng(seed, number)
    shuffle_key = {i: rng.random() for i in state.ideas}
    ranking = sorted(state.ideas, key=lambda i: (-state.points[i], shuffle_key[i]))

    bye_candidates: list[Id | None] = [None]
    if len(ranking) % 2:
        bye_candidates = [i for i in reversed(ranking) if i not in state.byes]
        if not bye_candidates:
            raise ValueError(
                f"every idea has had a bye; {len(ranking)} ideas allow at most "
                f"{len(ranking)} rounds without a second bye"
            )

    budget = [_SEARCH_BUDGET]
    chosen: tuple[Id | None, list[tuple[Id, Id]]] | None = None
    for bye in bye_candidates:
        order = [i for i in ranking if i != bye]
        pairs = _search(order, state.played, budget)
        if pairs is not None:
            chosen = (bye, pairs)
            break
        if budget[0] < 0:
            break
    if chosen is None:
        bye = bye_candidates[0]
        chosen = (bye, _greedy([i for i in ranking if i != bye], state.played))

    bye, pairs = chosen
    shown = tuple((a, b) if rng.random() < 0.5 else (b, a) for a, b in pairs)
    rematches = sum(frozenset(p) in state.played for p in shown)
    return SwissRound(number=number, pairs=shown, bye=bye, rematches=rematches)


def calls_for_round(rnd: SwissRound, both_orders: bool = False) -> list[tuple[Id, Id]]:
    """The (A, B) calls to make for a round."""
    calls = []
    for a, b in rnd.pairs:
        calls.append((a, b))
        if both_orders:
            calls.append((b, a))
    return calls


def resolve_game(pair: tuple[Id, Id], calls: Sequence[PairCall]) -> GameResult:
    """Points for one game from its calls (one, or two with both orders)."""
    first, second = pair
    winners: list[Id | None] = []
    for call in calls:
        if {call.first, call.second} != {first, second}:
            raise ValueError(f"call {call!r} is not about the pair {pair!r}")
        if call.winner is not None:
            winners.append({"A": call.first, "B": call.second}.get(call.winner))
    agreed = (len(set(winners)) == 1) if len(winners) >= 2 else None
    if not winners:
        return GameResult(first, second, 0.0, 0.0, void=True, agreed=None)
    if len(set(winners)) == 1 and winners[0] is not None:
        won_first = winners[0] == first
        return GameResult(first, second, float(won_first), float(not won_first), agreed=agreed)
    return GameResult(first, second, 0.5, 0.5, agreed=agreed)


def apply_round(state: SwissState, rnd: SwissRound, games: Iterable[GameResult]) -> SwissState:
    """The state after a round: points added, pairs marked as played, the bye recorded."""
    if rnd.number != state.rounds_played + 1:
        raise ValueError(f"round {rnd.number} does not follow round {state.rounds_played}")
    by_pair = {frozenset((g.first, g.second)): g for g in games}
    expected = {frozenset(p) for p in rnd.pairs}
    if set(by_pair) != expected or len(by_pair) != len(rnd.pairs):
        raise ValueError("games do not match the round's pairs one to one")
    points = dict(state.points)
    voids = 0
    for g in by_pair.values():
        points[g.first] += g.points_first
        points[g.second] += g.points_second
        voids += g.void
    byes = state.byes
    if rnd.bye is not None:
        points[rnd.bye] += 1.0
        byes = byes | {rnd.bye}
    return replace(
        state,
        points=points,
        played=state.played | expected,
        byes=byes,
        rounds_played=rnd.number,
        void_games=state.void_games + voids,
    )


Judge = Callable[[Id, Id], "PairwiseVerdict | Unparseable | Winner | None"]


@dataclass(frozen=True)
class SwissResult:
    state: SwissState
    rounds: list[SwissRound] = field(default_factory=list)
    games: list[list[GameResult]] = field(default_factory=list)
    calls: list[PairCall] = field(default_factory=list)

    @property
    def scores(self) -> dict[Id, float]:
        return dict(self.state.points)


def _as_call(a: Id, b: Id, answer: PairwiseVerdict | Unparseable | Winner | None) -> PairCall:
    if isinstance(answer, PairwiseVerdict | Unparseable):
        return PairCall.from_verdict(a, b, answer)
    return PairCall(a, b, answer)


def run_swiss(
    ideas: Iterable[Id],
    judge: Judge,
    *,
    rounds: int = DEFAULT_ROUNDS,
    both_orders: bool = False,
    seed: int = 0,
) -> SwissResult:
    """Play a whole tournament synchronously (offline runs, simulations, tests).

    `judge(a, b)` sees `a` as A and `b` as B and returns a parsed verdict, an
    `Unparseable`, a bare "A"/"B"/"tie", or None.
    """
    state = SwissState.start(ideas)
    result = SwissResult(state=state)
    for _ in range(rounds):
        rnd = pair_round(state, seed=seed)
        calls = [_as_call(a, b, judge(a, b)) for a, b in calls_for_round(rnd, both_orders)]
        per_game = 2 if both_orders else 1
        games = [
            resolve_game(pair, calls[k * per_game : (k + 1) * per_game])
            for k, pair in enumerate(rnd.pairs)
        ]
        state = apply_round(state, rnd, games)
        result.rounds.append(rnd)
        result.games.append(games)
        result.calls.extend(calls)
    return replace(result, state=state)
