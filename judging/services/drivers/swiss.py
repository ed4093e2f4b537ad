"""Swiss tournaments: each round's pairing is rebuilt from the stored outcomes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from typing import Any, cast

from llm.models import LLMCall

from ...methods import prompts
from ...methods.pairwise import PairCall
from ...methods.swiss import (
    SwissRound,
    SwissState,
    apply_round,
    calls_for_round,
    pair_round,
    resolve_game,
    total_calls,
)
from ...models import IdeaRating, JudgeRun, PairwiseOutcome
from ..base import (
    Driver,
    Unit,
    pair_call,
    store_pair_verdict,
)
from .pairwise import bt_ratings

Method = JudgeRun.Method
Verdict = PairwiseOutcome.Verdict


class SwissDriver(Driver):
    """Swiss rounds per group; each round's pairing is rebuilt from the stored outcomes."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        p = self.params
        self.both = bool(p["both_orders"])
        self.seed = int(p["seed"])
        self.rounds: dict[Hashable, int] = {}
        for g, members in self.groups().items():
            if len(members) < 2:
                continue
            n = int(p["rounds"])
            # An odd field allows at most K rounds before someone needs a second bye.
            self.rounds[g] = min(n, len(members)) if len(members) % 2 else n
        self.members = {g: m for g, m in self.groups().items() if g in self.rounds}
        self.total = sum(
            total_calls(len(self.members[g]), r, self.both) for g, r in self.rounds.items()
        )
        self.calls: dict[tuple[int, Hashable, Hashable], PairCall] = {}
        self.state: dict[Hashable, SwissState] = {}
        self.current: dict[Hashable, SwissRound | None] = {}
        self.history: dict[Hashable, list[dict[str, Any]]] = defaultdict(list)
        self.group_of: dict[int, Hashable] = {}

    def load(self) -> list[Unit]:
        self.calls = {}
        for o in PairwiseOutcome.objects.filter(run=self.run):
            self.calls[(o.round, o.first_shown_id, o.second_shown_id)] = pair_call(o)
        self.done = len(self.calls)
        self.unparseable = sum(c.winner is None for c in self.calls.values())
        units: list[Unit] = []
        for g, members in self.members.items():
            self.state[g] = SwissState.start(members)
            for i in members:
                self.group_of[i] = g
            units += self._advance(g)
        return units

    def _advance(self, g: Hashable) -> list[Unit]:
        """Play every round whose calls are all stored; return the next round's missing calls."""
        while True:
            state = self.state[g]
            if state.rounds_played >= self.rounds[g]:
                self.current[g] = None
                return []
            rnd = pair_round(state, seed=self.seed)
            self.current[g] = rnd
            wanted = calls_for_round(rnd, self.both)
            missing = [(a, b) for a, b in wanted if (rnd.number, a, b) not in self.calls]
            if missing:
                return [self._unit(rnd, cast(int, a), cast(int, b)) for a, b in missing]
            per = 2 if self.both else 1
            games = [
                resolve_game(
                    pair,
                    [self.calls[(rnd.number, a, b)] for a, b in wanted[k * per : (k + 1) * per]],
                )
                for k, pair in enumerate(rnd.pairs)
            ]
            self.state[g] = apply_round(state, rnd, games)
            self.history[g].append(
                {
                    "round": rnd.number,
                    "bye": rnd.bye,
                    "rematches": rnd.rematches,
                    "points": {str(k): v for k, v in self.state[g].points.items()},
                }
            )

    def _unit(self, rnd: SwissRound, first: int, second: int) -> Unit:
        pair = next(p for p in rnd.pairs if set(p) == {first, second})
        msgs = prompts.swiss_messages(self.text[first], self.text[second])
        return Unit(("swiss", rnd.number, pair[0], pair[1], first), msgs, prompts.SWISS.id)

    def store(self, unit: Unit, call: LLMCall | None) -> bool:
        _, number, a, b, first = unit.key
        second = b if first == a else a
        assert call is not None
        shown = store_pair_verdict(self.run, call, a, b, first, number)
        self.calls[(number, first, second)] = PairCall(first, second, shown)  # type: ignore[arg-type]
        return shown is None

    def after(self, unit: Unit) -> list[Unit]:
        _, number, a, _b, _first = unit.key
        g = self.group_of[a]
        rnd = self.current.get(g)
        if rnd is None or rnd.number != number:
            return []
        if all((number, x, y) in self.calls for x, y in calls_for_round(rnd, self.both)):
            return self._advance(g)
        return []

    def finish(self) -> dict[str, Any]:
        IdeaRating.objects.filter(run=self.run).delete()
        ratings = []
        void = rematches = 0
        for g, state in self.state.items():
            void += state.void_games
            rematches += sum(h["rematches"] for h in self.history[g])
            complete = state.rounds_played >= self.rounds[g]
            for idea in self.members[g]:
                ratings.append(
                    IdeaRating(
                        run=self.run,
                        idea_id=idea,
                        dimension="swiss",
                        score=state.points[idea] if complete else None,
                        history=[
                            {
                                "round": h["round"],
                                "points": h["points"][str(idea)],
                                "bye": h["bye"] == idea,
                            }
                            for h in self.history[g]
                        ],
                    )
                )
        ratings += bt_ratings(self.run, self.calls.values(), self.members, self.params)
        IdeaRating.objects.bulk_create(ratings)
        return {
            "rounds": dict((str(g), r) for g, r in self.rounds.items()),
            "both_orders": self.both,
            "void_games": void,
            "rematches": rematches,
            "groups_skipped": len(self.groups()) - len(self.members),
        }
