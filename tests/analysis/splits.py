"""A plain reference for the random half-split of each unit's reviews, shared by the tests
that check the consistency and agreement fast paths against it."""

from __future__ import annotations

import numpy as np


def plain_half_means(P: np.ndarray, rng: np.random.Generator):
    """Split each (replicate, unit)'s reviews at random into halves A and B, with integer
    counters and the module's random draws in the same order. P is (slots, reps, units)
    with NaN for no review; returns the means of A and of B."""
    _, reps, units = P.shape
    valid = ~np.isnan(P)
    n = valid.sum(0)
    h = n // 2 + ((n % 2 == 1) & (rng.random((reps, units)) < 0.5))
    need, left = h.copy(), n.copy()
    sum_a, total = np.zeros((reps, units)), np.zeros((reps, units))
    for slot, ok in zip(P, valid, strict=True):
        x = np.where(ok, slot, 0.0)
        take = ok & (rng.random((reps, units)) * left < need)
        sum_a, total = sum_a + x * take, total + x
        need, left = need - take, left - ok
    return sum_a / h, (total - sum_a) / (n - h)
