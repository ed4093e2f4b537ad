"""Active Bradley–Terry pairs: each batch is chosen from the stored outcomes of the ones
before it, to shrink the ideas' rating intervals most (`judging.methods.active_pairs`).

Per group, batch r (1, 2, …) is `select_pairs` over the outcomes of batches 1 … r − 1,
with the prior λ that `estimate_ridge` reads from those outcomes (1 before any game), as
`bench/active_pairs.py` measures it. A batch's calls are sent together; the next batch is
chosen once every call of this one is stored. Each outcome row carries its batch number
in `round`, so a resumed run rebuilds the batch it was in from the rows alone and asks
only its missing calls, then goes on with the batch the stored outcomes choose next.
The run's calls are known up front: each group's pair budget, spent in full.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from typing import Any

from llm.models import LLMCall

from ...methods import prompts
from ...methods.active_pairs import (
    CRITERIA,
    MAX_PER_PAIR,
    mean_interval_width,
    pair_budget,
    select_pairs,
    shown_order,
)
from ...methods.bradley_terry import comparisons_from_calls, estimate_ridge, fit_bradley_terry
from ...methods.pairwise import PairCall
from ...methods.registry import AUTO
from ...models import IdeaRating, PairwiseOutcome
from ..base import Driver, JudgeRunRefused, Unit, pair_call, store_pair_verdict
from .pairwise import bt_ratings

Ordered = tuple[int, int]
"""(shown first, shown second)."""
MAX_BATCHES = 32767
"""A batch's number is stored in `PairwiseOutcome.round`, a small integer."""


def _positive_int(params: dict[str, Any], name: str) -> int:
    value = params[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise JudgeRunRefused(f"{name} must be a whole number of at least 1, not {value!r}")
    return value


class ActiveDriver(Driver):
    """Batches of Bradley–Terry pairs per group, each chosen from the outcomes so far."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        p = self.params
        self.seed = p["seed"]
        self.batch_size = _positive_int(p, "batch_size")
        self.selection = str(p["selection"])
        if self.selection not in CRITERIA:
            raise JudgeRunRefused(f"selection must be one of {', '.join(CRITERIA)}")
        pairs = None if p["pairs"] == AUTO else _positive_int(p, "pairs")
        self.members = {g: m for g, m in self.groups().items() if len(m) >= 2}
        self.budget = {g: pair_budget(len(m), pairs) for g, m in self.members.items()}
        self.total = sum(self.budget.values())
        most = max(self.budget.values(), default=0)
        if -(-most // self.batch_size) > MAX_BATCHES:
            raise JudgeRunRefused(
                f"{most} pairs in batches of {self.batch_size} would take more than "
                f"{MAX_BATCHES} batches; choose a larger batch_size"
            )
        self.group_of = {i: g for g, members in self.members.items() for i in members}
        # Per group, per batch: (first, second) → the stored call.
        self.calls: dict[Hashable, dict[int, dict[Ordered, PairCall]]] = defaultdict(
            lambda: defaultdict(dict)
        )
        self.current: dict[Hashable, tuple[int, list[Ordered]] | None] = {}

    def load(self) -> list[Unit]:
        self.calls.clear()
        done = unparseable = 0
        for o in PairwiseOutcome.objects.filter(run=self.run):
            g = self.group_of.get(o.first_shown_id)
            if g is None:  # an idea no longer in the run's selection
                continue
            call = pair_call(o)
            self.calls[g][o.round][(o.first_shown_id, o.second_shown_id)] = call
            done += 1
            unparseable += call.winner is None
        self.done, self.unparseable = done, unparseable
        units: list[Unit] = []
        for g in self.members:
            # A batch is chosen only once the one before it is stored in full, so every
            # batch before the last one with rows is complete.
            units += self._advance(g, max(self.calls[g], default=1))
        return units

    def batch_for(self, g: Hashable, number: int) -> list[Ordered]:
        """Batch `number` of group `g`, as the outcomes of the batches before it choose it
        (empty once the group's budget is spent)."""
        before = [c for r, calls in self.calls[g].items() if r < number for c in calls.values()]
        left = self.budget[g] - len(before)
        if left <= 0:
            return []
        games = comparisons_from_calls(before)
        asked = [(c.first, c.second) for c in before if c.winner is None]
        members = self.members[g]
        ridge = estimate_ridge(games, members)
        pairs = select_pairs(
            games,
            members,
            min(self.batch_size, left),
            max_per_pair=MAX_PER_PAIR,
            ridge=ridge,
            seed=f"{self.seed}:{g}",
            criterion=self.selection,
            asked=asked,
        )
        # A batch may hold a pair twice: its second game is the other order.
        ordered: list[tuple[Hashable, Hashable]] = [(c.first, c.second) for c in before]
        for pair in pairs:
            ordered.append(shown_order(pair, ordered, f"{self.seed}:{g}"))
        return [(int(first), int(second)) for first, second in ordered[len(before) :]]  # type: ignore[call-overload]

    def _advance(self, g: Hashable, number: int) -> list[Unit]:
        """From batch `number` on, skip the batches stored in full; return the missing
        calls of the first one that is not (none once the budget is spent)."""
        while True:
            wanted = self.batch_for(g, number)
            if not wanted:
                self.current[g] = None
                return []
            self.current[g] = (number, wanted)
            stored = self.calls[g].get(number, {})
            missing = [pair for pair in wanted if pair not in stored]
            if missing:
                return [self._unit(number, first, second) for first, second in missing]
            number += 1

    def _unit(self, number: int, first: int, second: int) -> Unit:
        msgs = prompts.pairwise_messages(
            self.text[first],
            self.text[second],
            self.params["criterion"],
            self.params["description"],
        )
        return Unit(("active", number, first, second), msgs, prompts.PAIRWISE.id)

    def store(self, unit: Unit, call: LLMCall | None) -> bool:
        _, number, first, second = unit.key
        assert call is not None
        a, b = sorted((first, second))
        shown = store_pair_verdict(self.run, call, a, b, first, number)
        self.calls[self.group_of[first]][number][(first, second)] = PairCall(first, second, shown)
        return shown is None

    def after(self, unit: Unit) -> list[Unit]:
        _, number, first, _second = unit.key
        g = self.group_of[first]
        current = self.current.get(g)
        if current is None or current[0] != number:
            return []
        stored = self.calls[g][number]
        if all(pair in stored for pair in current[1]):
            return self._advance(g, number + 1)
        return []

    def finish(self) -> dict[str, Any]:
        calls = [c for batches in self.calls.values() for b in batches.values() for c in b.values()]
        IdeaRating.objects.filter(run=self.run).delete()
        IdeaRating.objects.bulk_create(
            bt_ratings(self.run, calls, self.members, self.params, estimate_prior=True)
        )
        groups: dict[str, Any] = {}
        for g, members in self.members.items():
            games = comparisons_from_calls([c for b in self.calls[g].values() for c in b.values()])
            ridge = estimate_ridge(games, members)
            fit = fit_bradley_terry(games, members, ridge=ridge)
            groups[str(g)] = {
                "ideas": len(members),
                "pairs": self.budget[g],
                "asked": sum(len(b) for b in self.calls[g].values()),
                "batches": len(self.calls[g]),
                "ridge": ridge,
                "mean_interval_width": mean_interval_width(fit) if games else None,
            }
        return {
            "batch_size": self.batch_size,
            "selection": self.selection,
            "groups": groups,
            "groups_skipped": len(self.groups()) - len(self.members),
        }
