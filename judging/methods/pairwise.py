"""Round-robin pairwise judging in both orders, summed per idea and mapped onto 1–5.

The protocol (as in the scientific-ideation-eval benchmark): within a group, every
unordered pair {x, y} is judged twice, once as (A=x, B=y) and once as (A=y, B=x). Each
call gives +1 to the preferred idea, −1 to the other, and 0 to both on a tie. An idea's
sum over its 2(n−1) calls lies in [−2(n−1), +2(n−1)] and is mapped linearly onto [1, 5].

Unparseable calls are excluded and counted. The range then shrinks per idea to
[−m, +m], where m is the number of that idea's calls that parsed, so the map becomes
`1 + 4·(sum + m)/(2m)` = `3 + 2·sum/m`. With every call parsed this is exactly the seed's
map; an idea with no parsed call has no score (None), never a middle score. Sampling k
pairs instead of all of them is handled the same way: m counts the calls an idea took
part in.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from judging.methods.parsing import PairwiseVerdict, Unparseable, Winner

__all__ = [
    "PairCall",
    "PairwiseSummary",
    "ScheduledCall",
    "linear_map",
    "possible_range",
    "round_robin_pairs",
    "schedule_round_robin",
    "summarise_pairwise",
    "verdict_counts",
]

Id = Hashable


@dataclass(frozen=True)
class ScheduledCall:
    """One judge call to make: `first` is shown as A, `second` as B."""

    group: Hashable
    first: Id
    second: Id


@dataclass(frozen=True)
class PairCall:
    """One judge call that was made. `winner` is None when the answer was unparseable."""

    first: Id
    second: Id
    winner: Winner | None

    @classmethod
    def from_verdict(
        cls, first: Id, second: Id, verdict: PairwiseVerdict | Unparseable
    ) -> PairCall:
        return cls(first, second, verdict.winner if isinstance(verdict, PairwiseVerdict) else None)

    def points(self) -> tuple[int, int] | None:
        """(points of first, points of second), or None when unparseable."""
        if self.winner is None:
            return None
        return {"A": (1, -1), "B": (-1, 1), "tie": (0, 0)}[self.winner]


def round_robin_pairs(
    ideas: Sequence[Id], sample: int | None = None, seed: int = 0
) -> list[tuple[Id, Id]]:
    """Every unordered pair of `ideas` (in input order), or a seeded sample of `sample` of them."""
    if len(set(ideas)) != len(ideas):
        raise ValueError("idea ids must be unique")
    pairs = list(itertools.combinations(ideas, 2))
    if sample is None or sample >= len(pairs):
        return pairs
    if sample < 0:
        raise ValueError("sample must be non-negative")
    chosen = sorted(random.Random(seed).sample(range(len(pairs)), sample))
    return [pairs[i] for i in chosen]


def schedule_round_robin(
    groups: Mapping[Hashable, Sequence[Id]],
    *,
    sample: int | None = None,
    seed: int = 0,
    both_orders: bool = True,
) -> list[ScheduledCall]:
    """The calls for a round robin within each group, both orders by default.

    `sample` caps the number of unordered pairs per group; each group draws its sample from
    its own stream derived from `seed` and the group's position, so adding a group does
    not reshuffle the others.
    """
    calls: list[ScheduledCall] = []
    for index, (group, ideas) in enumerate(groups.items()):
        for x, y in round_robin_pairs(ideas, sample=sample, seed=seed * 1_000_003 + index):
            calls.append(ScheduledCall(group, x, y))
            if both_orders:
                calls.append(ScheduledCall(group, y, x))
    return calls


def possible_range(n_ideas: int, both_orders: bool = True) -> tuple[int, int]:
    """The range of an idea's sum in a full round robin of `n_ideas` with every call parsed."""
    m = (2 if both_orders else 1) * (n_ideas - 1)
    return (-m, m)


def linear_map(
    value: float, low: float, high: float, new_low: float = 1.0, new_high: float = 5.0
) -> float:
    """Map `value` from [low, high] onto [new_low, new_high] linearly."""
    if high <= low:
        raise ValueError("high must exceed low")
    return new_low + (new_high - new_low) * (value - low) / (high - low)


@dataclass(frozen=True)
class PairwiseSummary:
    sums: dict[Id, int]
    """Summed +1/−1/0 over each idea's parsed calls."""
    parsed_calls: dict[Id, int]
    """m: the number of parsed calls each idea took part in; its sum lies in [−m, m]."""
    scores: dict[Id, float | None]
    """The sum mapped from [−m, m] onto [1, 5]; None when m = 0."""
    n_calls: int
    n_unparseable: int
    unparseable_by_idea: dict[Id, int]
    position_consistency: float | None
    """Share of pairs judged in both orders (both parsed) whose verdicts agree once un-swapped."""
    n_consistency_pairs: int
    first_position_win_rate: float | None
    """Share of decisive parsed calls won by the idea shown first; 0.5 means no position bias."""
    tie_rate: float | None
    """Share of parsed calls that were ties."""
    wins: dict[Id, float] = field(default_factory=dict)
    """Calls won (ties as half), handy for Bradley–Terry."""


def _winner_id(call: PairCall) -> Id | None:
    """The idea the call preferred, whatever side it was on; None for a tie."""
    return {"A": call.first, "B": call.second}.get(call.winner or "")


def summarise_pairwise(calls: Iterable[PairCall], ideas: Iterable[Id] = ()) -> PairwiseSummary:
    """Aggregate judged calls. `ideas` lists ideas to report even if they had no call."""
    calls = list(calls)
    sums: dict[Id, int] = {i: 0 for i in ideas}
    parsed: dict[Id, int] = {i: 0 for i in sums}
    wins: dict[Id, float] = {i: 0.0 for i in sums}
    unparseable: dict[Id, int] = {i: 0 for i in sums}
    n_unparseable = 0
    first_wins = second_wins = ties = 0
    by_pair: dict[frozenset[Id], list[tuple[Id, Id | None]]] = defaultdict(list)
    for call in calls:
        if call.first == call.second:
            raise ValueError(f"an idea cannot be compared with itself: {call.first!r}")
        for i in (call.first, call.second):
            sums.setdefault(i, 0)
            parsed.setdefault(i, 0)
            wins.setdefault(i, 0.0)
            unparseable.setdefault(i, 0)
        points = call.points()
        if points is None:
            n_unparseable += 1
            unparseable[call.first] += 1
            unparseable[call.second] += 1
            continue
        sums[call.first] += points[0]
        sums[call.second] += points[1]
        parsed[call.first] += 1
        parsed[call.second] += 1
        if call.winner == "A":
            first_wins += 1
            wins[call.first] += 1
        elif call.winner == "B":
            second_wins += 1
            wins[call.second] += 1
        else:
            ties += 1
            wins[call.first] += 0.5
            wins[call.second] += 0.5
        by_pair[frozenset((call.first, call.second))].append((call.first, _winner_id(call)))

    agree = checked = 0
    for verdicts in by_pair.values():
        # Compare the two orders only: the first verdict shown each way round.
        firsts: dict[Id, Id | None] = {}
        for shown_first, winner in verdicts:
            firsts.setdefault(shown_first, winner)
        if len(firsts) == 2:
            checked += 1
            a, b = firsts.values()
            agree += a == b

    n_parsed = first_wins + second_wins + ties
    decisive = first_wins + second_wins
    scores = {i: (3.0 + 2.0 * sums[i] / parsed[i]) if parsed[i] else None for i in sums}
    return PairwiseSummary(
        sums=sums,
        parsed_calls=parsed,
        scores=scores,
        n_calls=len(calls),
        n_unparseable=n_unparseable,
        unparseable_by_idea=unparseable,
        position_consistency=agree / checked if checked else None,
        n_consistency_pairs=checked,
        first_position_win_rate=first_wins / decisive if decisive else None,
        tie_rate=ties / n_parsed if n_parsed else None,
        wins=wins,
    )


def verdict_counts(calls: Iterable[PairCall]) -> Counter[str]:
    """How many calls ended A, B, tie or unparseable (for progress displays)."""
    return Counter("unparseable" if c.winner is None else c.winner for c in calls)
