"""LigBench's Elo update of an idea's score against scored reference papers (0–5 scale).

One step, for one dimension, against a reference with score s_R and judged outcome
S ∈ {0, ½, 1} (loss, tie, win of the target idea):

    E     = 1 / (1 + 10^((s_R − s)/d))
    K_t   = K_max · γ^t
    s_new = C(s + K_t·(S − E)),   C(x) = 2.5 + 2.5·tanh((x − 2.5)/2.5)

with d = 1.5, K_max = 0.5, γ = 0.95 (the paper's grid-search optimum). Steps stop when
|s_new − s| < ε, when `max_steps` steps were taken, or when the references run out. The
paper's algorithm returns the score from before the final, sub-ε step; we keep the final
step's score instead, which differs by less than ε and keeps the history and the result
consistent (the last history entry is the result).

Each dimension (rating, contribution, soundness) runs its own chain with its own t and its
own stopping point; a single judge call answers all of them, so a dimension that has
converged simply ignores later answers.

`debias_by_venue` is the paper's mean shift ŝ = s − μ_venue + μ_all for the reference
papers' own review scores.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace

__all__ = [
    "D",
    "EPSILON",
    "GAMMA",
    "K_MAX",
    "MAX_STEPS",
    "EloChain",
    "EloStep",
    "VenueDebias",
    "debias_by_venue",
    "elo_step",
    "expected_score",
    "k_factor",
    "run_elo",
    "run_elo_dimensions",
    "soft_clamp",
]

D = 1.5
K_MAX = 0.5
GAMMA = 0.95
EPSILON = 1e-3
MAX_STEPS = 50
"""The paper does not state T_max; its tables report ~22 steps to converge at these values."""
INITIAL_SCORE = 2.5


def soft_clamp(x: float) -> float:
    """C(x) = 2.5 + 2.5·tanh((x − 2.5)/2.5): increasing, C(2.5) = 2.5, range (0, 5)."""
    return 2.5 + 2.5 * math.tanh((x - 2.5) / 2.5)


def expected_score(s: float, s_ref: float, d: float = D) -> float:
    """E = 1/(1 + 10^((s_R − s)/d)), the expected outcome of the idea against the reference."""
    return 1.0 / (1.0 + 10.0 ** ((s_ref - s) / d))


def k_factor(t: int, k_max: float = K_MAX, gamma: float = GAMMA) -> float:
    return k_max * gamma**t


@dataclass(frozen=True)
class EloStep:
    t: int
    reference: Hashable
    reference_score: float
    outcome: float
    score_before: float
    expected: float
    k: float
    raw: float
    """s + K_t(S − E) before clamping."""
    score_after: float

    @property
    def delta(self) -> float:
        return self.score_after - self.score_before


def elo_step(
    s: float,
    s_ref: float,
    outcome: float,
    t: int,
    *,
    reference: Hashable = None,
    d: float = D,
    k_max: float = K_MAX,
    gamma: float = GAMMA,
) -> EloStep:
    if outcome not in (0.0, 0.5, 1.0):
        raise ValueError(f"outcome must be 0, 0.5 or 1, got {outcome!r}")
    e = expected_score(s, s_ref, d)
    k = k_factor(t, k_max, gamma)
    raw = s + k * (outcome - e)
    return EloStep(
        t=t,
        reference=reference,
        reference_score=s_ref,
        outcome=float(outcome),
        score_before=s,
        expected=e,
        k=k,
        raw=raw,
        score_after=soft_clamp(raw),
    )


@dataclass(frozen=True)
class EloChain:
    """One dimension's run: its score, its steps and whether (and why) it stopped."""

    initial: float
    score: float
    steps: tuple[EloStep, ...] = ()
    stopped: str | None = None
    """None while running; "converged", "max_steps" or "exhausted" once stopped."""
    skipped: int = 0
    """Answers for this dimension that were unparseable and therefore not applied."""

    @classmethod
    def start(cls, initial: float = INITIAL_SCORE) -> EloChain:
        return cls(initial=initial, score=initial)

    @property
    def converged(self) -> bool:
        return self.stopped == "converged"

    def advance(
        self,
        reference: Hashable,
        reference_score: float,
        outcome: float | None,
        *,
        epsilon: float = EPSILON,
        max_steps: int = MAX_STEPS,
        d: float = D,
        k_max: float = K_MAX,
        gamma: float = GAMMA,
    ) -> EloChain:
        """Apply one judged comparison; a stopped chain is returned unchanged.

        `outcome` None means the judge's answer was unparseable: the step is skipped (t does
        not advance) and counted, because a missing verdict is not a tie.
        """
        if self.stopped is not None:
            return self
        if outcome is None:
            return replace(self, skipped=self.skipped + 1)
        step = elo_step(
            self.score,
            reference_score,
            outcome,
            len(self.steps),
            reference=reference,
            d=d,
            k_max=k_max,
            gamma=gamma,
        )
        steps = (*self.steps, step)
        stopped = None
        if abs(step.delta) < epsilon:
            stopped = "converged"
        elif len(steps) >= max_steps:
            stopped = "max_steps"
        return replace(self, score=step.score_after, steps=steps, stopped=stopped)

    def finish(self) -> EloChain:
        """Mark a still-running chain as stopped because the references ran out."""
        return self if self.stopped is not None else replace(self, stopped="exhausted")


def run_elo(
    comparisons: Iterable[tuple[Hashable, float, float | None]],
    *,
    initial: float = INITIAL_SCORE,
    epsilon: float = EPSILON,
    max_steps: int = MAX_STEPS,
    d: float = D,
    k_max: float = K_MAX,
    gamma: float = GAMMA,
) -> EloChain:
    """One dimension from (reference id, reference score, outcome) triples, consumed lazily.

    The iterable is read only until the chain stops, so it may call the judge as it goes.
    """
    chain = EloChain.start(initial)
    for reference, s_ref, outcome in comparisons:
        chain = chain.advance(
            reference,
            s_ref,
            outcome,
            epsilon=epsilon,
            max_steps=max_steps,
            d=d,
            k_max=k_max,
            gamma=gamma,
        )
        if chain.stopped is not None:
            return chain
    return chain.finish()


def run_elo_dimensions(
    comparisons: Iterable[tuple[Hashable, Mapping[str, float], Mapping[str, float | None]]],
    initial: Mapping[str, float],
    *,
    epsilon: float = EPSILON,
    max_steps: int = MAX_STEPS,
    d: float = D,
    k_max: float = K_MAX,
    gamma: float = GAMMA,
) -> dict[str, EloChain]:
    """Several dimensions at once from (reference id, reference scores, outcomes) triples.

    `initial` names the dimensions. A missing or None outcome for a dimension counts as
    unparseable for that dimension. Reading stops once every dimension has stopped.
    """
    chains = {dim: EloChain.start(s0) for dim, s0 in initial.items()}
    for reference, ref_scores, outcomes in comparisons:
        for dim, chain in chains.items():
            chains[dim] = chain.advance(
                reference,
                ref_scores[dim],
                outcomes.get(dim),
                epsilon=epsilon,
                max_steps=max_steps,
                d=d,
                k_max=k_max,
                gamma=gamma,
            )
        if all(c.stopped is not None for c in chains.values()):
            return chains
    return {dim: c.finish() for dim, c in chains.items()}


@dataclass(frozen=True)
class VenueDebias:
    adjusted: dict[Hashable, float | None]
    venue_means: dict[str, float]
    overall_mean: float
    counts: dict[str, int] = field(default_factory=dict)


def debias_by_venue(
    scores: Mapping[Hashable, float | None], venues: Mapping[Hashable, str]
) -> VenueDebias:
    """ŝ = s − μ_venue + μ_all for one dimension's scores.

    μ_all is the mean over all papers (not the mean of venue means), as in the paper's
    table where the "all" row is paper-weighted. Missing scores (None or NaN) are left out
    of every mean and stay None.
    """
    present = {k: float(v) for k, v in scores.items() if v is not None and not math.isnan(float(v))}
    if not present:
        raise ValueError("no scores to debias")
    missing_venue = [k for k in present if k not in venues]
    if missing_venue:
        raise ValueError(f"no venue for {len(missing_venue)} papers, e.g. {missing_venue[0]!r}")
    by_venue: dict[str, list[float]] = defaultdict(list)
    for k, v in present.items():
        by_venue[venues[k]].append(v)
    venue_means = {v: math.fsum(xs) / len(xs) for v, xs in by_venue.items()}
    overall = math.fsum(present.values()) / len(present)
    adjusted: dict[Hashable, float | None] = {
        k: (present[k] - venue_means[venues[k]] + overall) if k in present else None for k in scores
    }
    return VenueDebias(
        adjusted=adjusted,
        venue_means=venue_means,
        overall_mean=overall,
        counts={v: len(xs) for v, xs in by_venue.items()},
    )
