"""Judge validation: pairwise accuracy against known scores, per dimension (LigBench Table 2).

A trial is one judged comparison of papers a and b on one dimension, with the gap
g = score(a) − score(b) of their (venue-debiased) review scores as the truth:

- g = 0 (to 1e-9): no truth, the trial is left out and counted as a truth tie;
- an unparseable answer is left out and counted, never a hit or a miss;
- the judge saying "tie" when the truth has an order is a miss (counted too): a judge
  that always says tie must not look like a coin.

Accuracy is hits / scored trials with a Wilson score interval (95 % by default), which
behaves at 0 and 1 where the normal approximation does not. Trials of one pair in both
orders are not independent; the interval treats them as if they were, so with both
orders it is somewhat too narrow, and the page says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass

__all__ = ["DimensionAccuracy", "Trial", "pairwise_accuracy", "wilson_interval"]

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Trial:
    dimension: str
    gap: float | None
    """score(a) − score(b); None when either score is missing."""
    verdict: str | None
    """"A" (a better), "B", "tie", or None when unparseable."""


@dataclass(frozen=True)
class DimensionAccuracy:
    dimension: str
    trials: int
    scored: int
    correct: int
    accuracy: float | None
    ci_low: float | None
    ci_high: float | None
    judge_ties: int
    truth_ties: int
    unparseable: int
    mean_gap_wrong: float | None
    """Mean |gap| of the missed trials (LigBench Table 3): small means near-misses."""
    mean_gap_right: float | None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def wilson_interval(hits: int, n: int, z: float = Z95) -> tuple[float, float]:
    if n <= 0:
        raise ValueError("no trials")
    if not 0 <= hits <= n:
        raise ValueError("hits must lie between 0 and n")
    p = hits / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def pairwise_accuracy(trials: Iterable[Trial], z: float = Z95) -> dict[str, DimensionAccuracy]:
    groups: dict[str, list[Trial]] = defaultdict(list)
    for t in trials:
        groups[t.dimension].append(t)
    out = {}
    for dim, items in groups.items():
        right: list[float] = []
        wrong: list[float] = []
        judge_ties = truth_ties = unparseable = 0
        for t in items:
            if t.verdict is None:
                unparseable += 1
                continue
            if t.gap is None or abs(t.gap) < 1e-9:
                truth_ties += 1
                continue
            if t.verdict == "tie":
                judge_ties += 1
                wrong.append(abs(t.gap))
            elif (t.verdict == "A") == (t.gap > 0):
                right.append(abs(t.gap))
            else:
                wrong.append(abs(t.gap))
        scored = len(right) + len(wrong)
        low = high = acc = None
        if scored:
            acc = len(right) / scored
            low, high = wilson_interval(len(right), scored, z)
        out[dim] = DimensionAccuracy(
            dimension=dim,
            trials=len(items),
            scored=scored,
            correct=len(right),
            accuracy=acc,
            ci_low=low,
            ci_high=high,
            judge_ties=judge_ties,
            truth_ties=truth_ties,
            unparseable=unparseable,
            mean_gap_wrong=math.fsum(wrong) / len(wrong) if wrong else None,
            mean_gap_right=math.fsum(right) / len(right) if right else None,
        )
    return out
