"""LigBench's comparison schedule: which reference an idea meets next, and when it stops;
and which scored related references its initial-scoring call shows.

The paper's Algorithm 1 compares the idea with one reference at a time, sampled from the
related references, updating the score by the Elo rule (`judging.methods.elo`) until a
step moves it by less than ε or T_max steps were taken. Here the schedule is a pure
function of what was already judged, so a run calls the judge only while a chain still
runs, and a resumed run picks up exactly where it stopped.

Four rules choose the next reference:

- `"paper"` (for reproductions): the related references in a seeded random order, each
  met once (sampling without replacement: a judge asked the same pair again would mostly
  repeat itself);
- `"probe"` (the service's default): the paper's Elo chain, update and ε-stop, with the
  references chosen for what their verdicts tell. While the posterior over the score
  (given the initial score and the chain's verdicts, `posterior_of`) is wider than
  `probe_sd` in some running dimension, the next reference is the one whose verdict is
  expected to tell most about the score (as `"information"` chooses). Once every running
  dimension's posterior sd is below `probe_sd`, the next reference is a *probe*: one
  whose expected verdict would move the chain by less than ε (|C(s + K_t(Ŝ − E)) − s| <
  ε, Ŝ the verdict the chain expects), so that the paper's stop rule ends the chain if
  the judge confirms it; the probe that could stop the most running dimensions, the most
  informative among those. A surprising verdict moves the chain and the posterior, and
  probing goes on. Under the paper's random order an ε-stop comes from the same place (a
  far reference meeting its expected verdict once K_t has decayed), by chance; here the
  evidence is gathered first and the stop is then sought;
- `"nearest"`: the not yet met reference whose score is nearest the idea's current score
  (mean distance over the dimensions still running; ties broken by a seeded coin). An
  outcome against a reference of about the idea's own score is the least predictable, so
  it moves the estimate most where it is still uncertain. It runs up to `max_steps` (the
  registry's default for this rule is lower), usually without an ε-stop: near references
  keep |S − E| near ½;
- `"information"`: a posterior over the idea's score instead of the Elo chain
  (`judging.methods.ligbench_posterior`): the next reference is the one whose verdict is
  expected to tell most about the score, the judge's errors are modelled (a lapse rate
  and a logistic slope), and the reported score is the posterior mean. Runs up to
  `max_steps`, or until the posterior sd falls below `sd_stop`.

Several dimensions share one judge call per reference; a dimension that has stopped
ignores later answers, and the schedule ends once every dimension has stopped.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from judging.methods.elo import (
    GAMMA,
    K_MAX,
    MAX_STEPS,
    D,
    EloChain,
    expected_score,
    k_factor,
    soft_clamp,
)
from judging.methods.ligbench_posterior import (
    LAPSE,
    PRIOR_SD,
    SD_STOP,
    SLOPE,
    PosteriorChain,
    most_informative,
)

__all__ = [
    "ESTIMATES",
    "PROBE_SD",
    "EXAMPLE_CHOICES",
    "SELECTIONS",
    "Chain",
    "Schedule",
    "advance",
    "calibration_examples",
    "finish",
    "next_reference",
    "paper_order",
    "posterior_of",
    "replay",
    "reported",
    "start",
]

SELECTIONS = ("paper", "probe", "nearest", "information")
PROBE_SD = 0.25
"""The posterior sd (0–5 scale) at which the "probe" rule starts seeking the ε-stop: tuned
in `bench/elo_convergence.py` on seeds apart from those it is reported on
(docs/ligbench.md)."""
EXAMPLE_CHOICES = ("spread", "related")
ESTIMATES = ("chain", "posterior")


def calibration_examples(
    related: Sequence[Hashable], scores: Mapping[Hashable, float], n: int, choice: str = "spread"
) -> list[Hashable]:
    """The scored examples the initial-scoring call shows, drawn from the related set.

    `related` is in retrieval order. `"related"`: its first `n`. `"spread"` (the
    default): `n` of them evenly spaced over their score range (the midpoints of `n`
    equal slices of the set sorted by score, ties in retrieval order), lowest first, so
    the judge can place the idea between neighbours on the scale wherever it falls.
    """
    if choice not in EXAMPLE_CHOICES:
        raise ValueError(f"calibration choice must be one of {', '.join(EXAMPLE_CHOICES)}")
    n = max(1, min(n, len(related)))
    if choice == "related":
        return list(related[:n])
    ranked = sorted(related, key=lambda ref: scores[ref])  # stable: ties keep retrieval order
    m = len(ranked)
    return [ranked[min(m - 1, int((i + 0.5) * m / n))] for i in range(n)]


@dataclass(frozen=True)
class Schedule:
    """The stopping rule and the choice of references for one run."""

    selection: str = "paper"
    epsilon: float = 0.01
    max_steps: int = MAX_STEPS
    d: float = D
    k_max: float = K_MAX
    gamma: float = GAMMA
    seed: int | str = 0
    prior_sd: float = PRIOR_SD
    """"information" only: the prior's sd around the initial score, the judge model's
    logistic slope and lapse rate, and the posterior sd below which a dimension stops."""
    slope: float = SLOPE
    lapse: float = LAPSE
    sd_stop: float = SD_STOP
    probe_sd: float = PROBE_SD
    """"probe" only: the posterior sd below which references that could stop the chain
    are sought."""
    estimate: str = "chain"
    """What an Elo rule ("paper", "probe", "nearest") reports: "chain", the chain's final score
    (the paper's), or "posterior", the posterior mean given the same initial score and
    verdicts (with `prior_sd`, `slope`, `lapse`); the chain still decides when to stop."""

    def __post_init__(self) -> None:
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}")
        if self.estimate not in ESTIMATES:
            raise ValueError(f"estimate must be one of {', '.join(ESTIMATES)}")
        if self.max_steps < 1 or self.epsilon < 0:
            raise ValueError("max_steps must be at least 1 and epsilon not negative")
        if self.prior_sd <= 0 or self.slope <= 0 or not 0 <= self.lapse < 1 or self.sd_stop < 0:
            raise ValueError(
                "prior_sd and slope must be positive, lapse in [0, 1), sd_stop not negative"
            )
        if self.probe_sd <= 0:
            raise ValueError("probe_sd must be positive")

    @property
    def posterior(self) -> bool:
        return self.selection == "information"


Outcomes = Mapping[str, float | None]
Pool = Mapping[Hashable, Mapping[str, float]]
Chain = EloChain | PosteriorChain


def paper_order(pool: Sequence[Hashable], seed: int | str, key: Hashable) -> list[Hashable]:
    """The related references in the seeded random order of the paper rule."""
    order = list(pool)
    random.Random(f"ligbench-order:{seed}:{key}").shuffle(order)
    return order


def start(initial: Mapping[str, float], schedule: Schedule) -> dict[str, Chain]:
    """Every dimension's chain (or posterior) before any comparison."""
    if schedule.posterior:
        return {dim: PosteriorChain.start(s0, schedule.prior_sd) for dim, s0 in initial.items()}
    return {dim: EloChain.start(s0) for dim, s0 in initial.items()}


def _advance(
    chain: Chain, ref: Hashable, s_ref: float, outcome: float | None, schedule: Schedule
) -> Chain:
    if isinstance(chain, PosteriorChain):
        return chain.advance(
            ref,
            s_ref,
            outcome,
            sd_stop=schedule.sd_stop,
            max_steps=schedule.max_steps,
            slope=schedule.slope,
            lapse=schedule.lapse,
        )
    return chain.advance(
        ref,
        s_ref,
        outcome,
        epsilon=schedule.epsilon,
        max_steps=schedule.max_steps,
        d=schedule.d,
        k_max=schedule.k_max,
        gamma=schedule.gamma,
    )


def advance(
    chains: Mapping[str, Chain], ref: Hashable, pool: Pool, outcomes: Outcomes, schedule: Schedule
) -> dict[str, Chain]:
    """Every dimension's chain after one more judged comparison (a missing or None
    outcome is an unparseable answer for that dimension)."""
    return {
        dim: _advance(chain, ref, pool[ref][dim], outcomes.get(dim), schedule)
        for dim, chain in chains.items()
    }


def replay(
    initial: Mapping[str, float],
    pool: Pool,
    played: Sequence[tuple[Hashable, Outcomes]],
    schedule: Schedule,
) -> dict[str, Chain]:
    """Every dimension's chain (or posterior) after the comparisons already judged, in
    their order."""
    chains = start(initial, schedule)
    for ref, outcomes in played:
        chains = advance(chains, ref, pool, outcomes, schedule)
    return chains


def posterior_of(chain: Chain, schedule: Schedule) -> PosteriorChain:
    """The posterior over the score given the chain's initial score and every verdict it
    applied (an Elo chain's steps replayed through the posterior, which never stops)."""
    if isinstance(chain, PosteriorChain):
        return chain
    post = PosteriorChain.start(chain.initial, schedule.prior_sd)
    for step in chain.steps:
        post = post.advance(
            step.reference,
            step.reference_score,
            step.outcome,
            max_steps=len(chain.steps) + 1,
            slope=schedule.slope,
            lapse=schedule.lapse,
        )
    return post


def reported(chain: Chain, schedule: Schedule) -> float:
    """The score a run reports for one dimension: the Elo chain's final score (estimate
    "chain", the paper's), or the posterior mean given the same verdicts ("posterior";
    always for the "information" rule)."""
    if schedule.estimate == "chain" and isinstance(chain, EloChain):
        return chain.score
    return posterior_of(chain, schedule).score


def next_reference(
    chains: Mapping[str, Chain],
    pool: Pool,
    played: Sequence[Hashable],
    schedule: Schedule,
    key: Hashable,
) -> Hashable | None:
    """The reference to judge next, or None when every chain has stopped or the related
    references are used up (the caller then marks the running chains exhausted)."""
    running = [dim for dim, chain in chains.items() if chain.stopped is None]
    if not running:
        return None
    seen = set(played)
    left = [ref for ref in pool if ref not in seen]
    if not left:
        return None
    if schedule.selection == "paper":
        return next(r for r in paper_order(list(pool), schedule.seed, key) if r not in seen)
    coin = random.Random(f"ligbench-tie:{schedule.seed}:{key}:{len(played)}")
    if schedule.posterior:
        running_chains = {dim: cast(PosteriorChain, chains[dim]) for dim in running}
        return coin.choice(
            most_informative(running_chains, pool, left, schedule.slope, schedule.lapse)
        )
    if schedule.selection == "probe":
        return coin.choice(_probe_candidates(chains, running, pool, left, schedule))

    def distance(ref: Hashable) -> float:
        return sum(abs(pool[ref][dim] - chains[dim].score) for dim in running) / len(running)

    best = min(distance(ref) for ref in left)
    tied = [ref for ref in left if distance(ref) - best <= 1e-12]
    return coin.choice(tied)


def _could_stop(chain: EloChain, s_ref: float, schedule: Schedule) -> bool:
    """Whether the verdict the chain expects against `s_ref` would stop it on ε."""
    e = expected_score(chain.score, s_ref, schedule.d)
    if e == 0.5:
        return False
    likely = 1.0 if e > 0.5 else 0.0
    k = k_factor(len(chain.steps), schedule.k_max, schedule.gamma)
    return abs(soft_clamp(chain.score + k * (likely - e)) - chain.score) < schedule.epsilon


def _probe_candidates(
    chains: Mapping[str, Chain],
    running: Sequence[str],
    pool: Pool,
    left: Sequence[Hashable],
    schedule: Schedule,
) -> list[Hashable]:
    """The "probe" rule's best references (several when tied)."""
    elo = {dim: cast(EloChain, chains[dim]) for dim in running}
    posteriors = {dim: posterior_of(elo[dim], schedule) for dim in running}
    if max(p.sd for p in posteriors.values()) >= schedule.probe_sd:
        return most_informative(posteriors, pool, left, schedule.slope, schedule.lapse)
    stops = [
        sum(_could_stop(elo[dim], pool[ref][dim], schedule) for dim in running) for ref in left
    ]
    most = max(stops)
    candidates = [ref for ref, n in zip(left, stops, strict=True) if n == most]
    return most_informative(posteriors, pool, candidates, schedule.slope, schedule.lapse)


def finish(chains: Mapping[str, Chain]) -> dict[str, Chain]:
    """Chains that still run when the references ran out are marked exhausted."""
    return {dim: chain.finish() for dim, chain in chains.items()}
