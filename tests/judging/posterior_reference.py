"""An independent computation of the LigBench posterior, for the tests: plain Python on a
fine midpoint grid (the module uses NumPy on a coarser one), from the formulas alone."""

from __future__ import annotations

import math
from collections.abc import Sequence

N = 5000


def _p_win(s: float, s_ref: float, slope: float, lapse: float) -> float:
    return lapse / 2 + (1 - lapse) / (1 + math.exp(-slope * (s - s_ref)))


def density(
    initial: float,
    verdicts: Sequence[tuple[float, float]],
    prior_sd: float,
    slope: float,
    lapse: float,
    n: int = N,
) -> list[tuple[float, float]]:
    """(s, normalised weight) on [0, 5] given (reference score, outcome) verdicts, on n
    midpoints."""
    points = []
    for i in range(n):
        s = 5 * (i + 0.5) / n
        w = math.exp(-0.5 * ((s - initial) / prior_sd) ** 2)
        for s_ref, outcome in verdicts:
            p = _p_win(s, s_ref, slope, lapse)
            w *= p**outcome * (1 - p) ** (1 - outcome)
        points.append((s, w))
    total = math.fsum(w for _, w in points)
    return [(s, w / total) for s, w in points]


def mean_sd(points: list[tuple[float, float]]) -> tuple[float, float]:
    m = math.fsum(s * w for s, w in points)
    return m, math.sqrt(math.fsum((s - m) ** 2 * w for s, w in points))


def mutual_information(
    points: list[tuple[float, float]], s_ref: float, slope: float, lapse: float
) -> float:
    """I(verdict; s) = Σ_s Σ_y p(s) p(y|s) log(p(y|s) / p(y)), y ∈ {win, loss}."""
    p_y = math.fsum(w * _p_win(s, s_ref, slope, lapse) for s, w in points)
    total = 0.0
    for s, w in points:
        p = _p_win(s, s_ref, slope, lapse)
        total += w * (p * math.log(p / p_y) + (1 - p) * math.log((1 - p) / (1 - p_y)))
    return total


def posterior_mean(
    initial: float,
    verdicts: Sequence[tuple[float, float]],
    prior_sd: float,
    slope: float,
    lapse: float,
) -> float:
    return mean_sd(density(initial, verdicts, prior_sd, slope, lapse))[0]
