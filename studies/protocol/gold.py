"""Gold items: ideas whose owner expects a score range per metric.

A gold idea is reviewed like any idea (the reviewer cannot tell it apart) but stays out
of the analysis, of the assignment program's topic balance and of the per-idea review
counts: `gold_assign` hands each reviewer their gold items after the program has drawn
the analysed assignment. A review of a gold idea with a score outside the expected range
is a gold miss (`studies.analysis.quality.gold_flags`).

Pure module: no Django imports.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .institutions import institution_keys

__all__ = ["GoldError", "GoldIdea", "GoldReviewer", "gold_assign", "gold_ranges_parse"]


class GoldError(ValueError):
    """Expected ranges that cannot be used; `problems` name the metric of each."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


def gold_ranges_parse(
    raw: Any, scales: Mapping[str, tuple[int, int]]
) -> dict[str, tuple[float, float]]:
    """``{"metric": [low, high], ...}`` checked against the form's scales (metric ->
    (minimum, maximum)); at least one metric, low ≤ high, both within the scale."""
    if not isinstance(raw, dict) or not raw:
        raise GoldError(["expected ranges: an object of metric -> [low, high], at least one"])
    problems: list[str] = []
    out: dict[str, tuple[float, float]] = {}
    for metric, pair in raw.items():
        if metric not in scales:
            problems.append(f"{metric!r} is not a metric of the study's form")
            continue
        lo_s, hi_s = scales[metric]
        ok = (
            isinstance(pair, list | tuple)
            and len(pair) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in pair)
        )
        if not ok:
            problems.append(f"{metric}: the range must be two numbers [low, high]")
        elif not lo_s <= pair[0] <= pair[1] <= hi_s:
            problems.append(
                f"{metric}: the range {pair[0]:g}–{pair[1]:g} must have low ≤ high within "
                f"the scale {lo_s}–{hi_s}"
            )
        else:
            out[metric] = (float(pair[0]), float(pair[1]))
    if problems:
        raise GoldError(problems)
    return out


@dataclass(frozen=True)
class GoldIdea:
    id: str
    topic: str
    institutions: tuple[str, ...] = ()


@dataclass(frozen=True)
class GoldReviewer:
    id: str
    topics: tuple[str, ...]
    institution: str = ""
    has: tuple[str, ...] = ()  # gold ideas already assigned to this reviewer


def gold_assign(
    reviewers: Sequence[GoldReviewer],
    ideas: Sequence[GoldIdea],
    *,
    per_reviewer: int,
    seed: int,
) -> list[tuple[str, str]]:
    """New (reviewer, gold idea) pairs so each reviewer has ``per_reviewer`` gold items.

    A reviewer gets gold ideas from their own topics first, then from any topic, never
    one written at their institution or one they already have; among those, the gold
    idea with the fewest reviewers so far (ties broken by ``seed``), so the gold items'
    reviews spread evenly. A reviewer for whom no gold idea is left gets fewer.
    """
    rng = random.Random(seed)
    counts: Counter[str] = Counter(i for r in reviewers for i in r.has)
    keys = {i.id: institution_keys(list(i.institutions)) for i in ideas}
    tie = {i.id: rng.random() for i in ideas}
    pairs: list[tuple[str, str]] = []
    for r in sorted(reviewers, key=lambda r: r.id):
        own = institution_keys([r.institution]) if r.institution else frozenset()
        need = per_reviewer - len(r.has)
        taken = set(r.has)
        for _ in range(max(0, need)):
            options = [i for i in ideas if i.id not in taken and not (keys[i.id] & own)]
            if not options:
                break
            best = min(options, key=lambda i: (i.topic not in r.topics, counts[i.id], tie[i.id]))
            pairs.append((r.id, best.id))
            taken.add(best.id)
            counts[best.id] += 1
    return pairs
