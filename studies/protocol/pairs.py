"""Choosing a reviewer's pair-rating tasks so they spread evenly over condition pairs
(Human–AI, Human–AI_Rerank, AI–AI_Rerank, …), as review assignments spread over
conditions. Pure Python: the caller passes candidate pairs with their ideas' conditions.

A pair of ideas compares condition c with condition d when c is one of the first idea's
conditions but not the second's, and d the other way round. An idea in both AI and
AI_Rerank set against a Human idea therefore compares Human with both; two ideas with the
same conditions compare nothing and are never offered.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)


def condition_pairs(a: Iterable[str], b: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """The (sorted) condition pairs two ideas compare; () when they compare none."""
    only_a = set(a) - set(b)
    only_b = set(b) - set(a)
    return tuple(sorted({tuple(sorted((c, d))) for c in only_a for d in only_b}))  # type: ignore[misc]


@dataclass(frozen=True)
class Candidate(Generic[T]):
    first: T
    second: T
    pairs: tuple[tuple[str, str], ...]


def pick_balanced(
    candidates: Sequence[Candidate[T]],
    k: int,
    rng: random.Random,
    earlier: Counter[tuple[str, str]] | None = None,
) -> list[Candidate[T]]:
    """Up to k candidates whose condition pairs are as even as the candidates allow.

    Greedy: each step takes a candidate whose least-used condition pair has been used
    least so far (then one whose ideas were used least, so one idea is not in every
    pair), drawing among equals in the seeded order. `earlier` counts condition pairs
    the reviewer already has. Condition pairs that no candidate offers are not counted."""
    pool = list(candidates)
    rng.shuffle(pool)
    used_pairs: Counter[tuple[str, str]] = Counter(earlier or {})
    used_ideas: Counter[T] = Counter()
    chosen: list[Candidate[T]] = []
    while pool and len(chosen) < k:
        best = min(
            range(len(pool)),
            key=lambda j: (
                min(used_pairs[p] for p in pool[j].pairs),
                max(used_pairs[p] for p in pool[j].pairs),
                used_ideas[pool[j].first] + used_ideas[pool[j].second],
            ),
        )
        pick = pool.pop(best)
        chosen.append(pick)
        used_pairs.update(pick.pairs)
        used_ideas.update([pick.first, pick.second])
    return chosen
