"""A posterior over an idea's score from comparisons with references of known score: the
variance-aware alternative to LigBench's Elo chain (the `"information"` selection rule).

The idea's score s (0–5) is kept as a distribution on a grid. It starts from a normal
prior centred on the judge's initial score (sd `prior_sd`, cut to [0, 5]). A comparison
with a reference of score s_R, judged a win (S = 1), loss (0) or tie (½), multiplies it by

    P(win | s) = λ/2 + (1 − λ) · σ(c · (s − s_R)),   σ(x) = 1 / (1 + e^(−x))

raised to S (and 1 − P to 1 − S; a tie is half of each): a logistic in the gap with slope
c, and a lapse rate λ, the share of verdicts that are a coin toss whatever the gap. The
lapse keeps one wrong verdict against a far reference from pinning the posterior, and the
slope keeps wrong verdicts on close pairs cheap, so the estimate tolerates both kinds of
judge error. The reported score is the posterior mean.

The next reference is the one not yet met whose verdict is expected to tell most about
s: the largest expected information gain H(P̄) − E[H(P(win | s))] (the mutual information
of the binary verdict and s under the current posterior, summed over the dimensions still
running; ties broken by a seeded coin). A dimension stops when its posterior sd falls
below `sd_stop` ("converged"), after `max_steps` comparisons, or when the references run
out ("exhausted"), like the Elo chain.

Pure and deterministic: the same initial score and the same verdicts in the same order
give the same posterior, so a resumed run continues where it stopped.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

__all__ = [
    "GRID",
    "LAPSE",
    "PRIOR_SD",
    "SD_STOP",
    "SLOPE",
    "PosteriorChain",
    "PosteriorStep",
    "information",
    "win_probability",
]

GRID = (np.arange(250) + 0.5) * 0.02
"""Score grid: the midpoints of 250 cells of width 0.02 covering [0, 5]."""
PRIOR_SD = 0.5
"""The prior's sd around the judge's initial score (0–5 scale)."""
SLOPE = 3.0
"""The judge model's logistic slope per score point (Elo's d = 1.5 is ln 10 / 1.5 ≈ 1.5)."""
LAPSE = 0.3
"""The judge model's share of coin-toss verdicts (an 80 % judge that errs regardless of the
gap has λ = 0.4; one whose errors sit on close pairs has λ near 0)."""
SD_STOP = 0.0
"""0: no sd-stop, the posterior runs to T_max. The values above are the measured defaults
(`bench/elo_convergence.py`, docs/ligbench.md)."""


def win_probability(s: Any, s_ref: Any, slope: float = SLOPE, lapse: float = LAPSE) -> Any:
    """P(the idea wins | its score s) against a reference of score s_ref (s may be an array)."""
    return lapse / 2.0 + (1.0 - lapse) / (1.0 + np.exp(-slope * (np.asarray(s) - s_ref)))


def _entropy(p: Any) -> Any:
    p = np.clip(p, 1e-12, 1.0 - 1e-12)
    return -(p * np.log(p) + (1.0 - p) * np.log1p(-p))


def information(weights: Any, s_ref: float, slope: float = SLOPE, lapse: float = LAPSE) -> float:
    """Expected information gain (nats) of one verdict against s_ref under `weights`
    (posterior probabilities on GRID)."""
    p = win_probability(GRID, s_ref, slope, lapse)
    return float(_entropy(np.dot(weights, p)) - np.dot(weights, _entropy(p)))


@dataclass(frozen=True)
class PosteriorStep:
    t: int
    reference: Hashable
    reference_score: float
    outcome: float
    expected: float
    """The predictive P(win) before the verdict."""
    score_after: float
    """Posterior mean after the verdict."""
    sd_after: float


@dataclass(frozen=True)
class PosteriorChain:
    """One dimension's posterior, its steps and whether (and why) it stopped."""

    initial: float
    log_density: Any = field(repr=False, compare=False)
    steps: tuple[PosteriorStep, ...] = ()
    stopped: str | None = None
    skipped: int = 0

    @classmethod
    def start(cls, initial: float, prior_sd: float = PRIOR_SD) -> PosteriorChain:
        if prior_sd <= 0:
            raise ValueError("prior_sd must be positive")
        return cls(initial=initial, log_density=-0.5 * ((GRID - initial) / prior_sd) ** 2)

    @property
    def weights(self) -> Any:
        w = np.exp(self.log_density - self.log_density.max())
        return w / w.sum()

    @property
    def score(self) -> float:
        return float(np.dot(self.weights, GRID))

    @property
    def sd(self) -> float:
        w = self.weights
        m = float(np.dot(w, GRID))
        return math.sqrt(max(0.0, float(np.dot(w, (GRID - m) ** 2))))

    @property
    def converged(self) -> bool:
        return self.stopped == "converged"

    def advance(
        self,
        reference: Hashable,
        reference_score: float,
        outcome: float | None,
        *,
        sd_stop: float = SD_STOP,
        max_steps: int = 12,
        slope: float = SLOPE,
        lapse: float = LAPSE,
    ) -> PosteriorChain:
        """Apply one verdict; a stopped chain is returned unchanged, an unparseable one
        (None) is counted and skipped."""
        if self.stopped is not None:
            return self
        if outcome is None:
            return replace(self, skipped=self.skipped + 1)
        if outcome not in (0.0, 0.5, 1.0):
            raise ValueError(f"outcome must be 0, 0.5 or 1, got {outcome!r}")
        p = win_probability(GRID, reference_score, slope, lapse)
        expected = float(np.dot(self.weights, p))
        log_density = self.log_density + outcome * np.log(p) + (1.0 - outcome) * np.log1p(-p)
        after = replace(self, log_density=log_density)
        step = PosteriorStep(
            t=len(self.steps),
            reference=reference,
            reference_score=reference_score,
            outcome=float(outcome),
            expected=expected,
            score_after=after.score,
            sd_after=after.sd,
        )
        steps = (*self.steps, step)
        stopped = None
        if step.sd_after < sd_stop:
            stopped = "converged"
        elif len(steps) >= max_steps:
            stopped = "max_steps"
        return replace(after, steps=steps, stopped=stopped)

    def finish(self) -> PosteriorChain:
        return self if self.stopped is not None else replace(self, stopped="exhausted")


def most_informative(
    chains: Mapping[str, PosteriorChain],
    pool: Mapping[Hashable, Mapping[str, float]],
    left: Sequence[Hashable],
    slope: float = SLOPE,
    lapse: float = LAPSE,
) -> list[Hashable]:
    """The unmet references of the largest information summed over the running
    dimensions (all of them when tied to 1e-12)."""
    running = [dim for dim, c in chains.items() if c.stopped is None]
    total = np.zeros(len(left))
    for dim in running:
        w = chains[dim].weights
        p = win_probability(
            GRID[None, :], np.array([pool[r][dim] for r in left])[:, None], slope, lapse
        )
        total += _entropy(p @ w) - _entropy(p) @ w
    best = float(total.max())
    return [ref for ref, g in zip(left, total, strict=True) if best - g <= 1e-12]
