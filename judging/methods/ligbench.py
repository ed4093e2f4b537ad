"""LigBench's comparison schedule: which reference an idea meets next, and when it stops;
and which scored related references its initial-scoring call shows.

The paper's Algorithm 1 compares the idea with one reference at a time, sampled from the
related references, updating the score by the Elo rule (`judging.methods.elo`) until a
step moves it by less than ε or T_max steps were taken. Here the schedule is a pure
function of what was already judged, so a run calls the judge only while a chain still
runs, and a resumed run picks up exactly where it stopped.

Two rules choose the next reference:

- `"paper"` (the default, for reproductions): the related references in a seeded random
  order, each met once (sampling without replacement: a judge asked the same pair again
  would mostly repeat itself);
- `"nearest"`: the not yet met reference whose score is nearest the idea's current score
  (mean distance over the dimensions still running; ties broken by a seeded coin). An
  outcome against a reference of about the idea's own score is the least predictable, so
  it moves the estimate most where it is still uncertain. It runs up to `max_steps` (the
  registry's default for this rule is lower), usually without an ε-stop: near references
  keep |S − E| near ½.

Several dimensions share one judge call per reference; a dimension that has stopped
ignores later answers, and the schedule ends once every dimension has stopped.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from judging.methods.elo import GAMMA, K_MAX, MAX_STEPS, D, EloChain

__all__ = [
    "EXAMPLE_CHOICES",
    "SELECTIONS",
    "Schedule",
    "calibration_examples",
    "finish",
    "next_reference",
    "paper_order",
    "replay",
]

SELECTIONS = ("paper", "nearest")
EXAMPLE_CHOICES = ("spread", "related")


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

    def __post_init__(self) -> None:
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}")
        if self.max_steps < 1 or self.epsilon < 0:
            raise ValueError("max_steps must be at least 1 and epsilon not negative")


Outcomes = Mapping[str, float | None]
Pool = Mapping[Hashable, Mapping[str, float]]


def paper_order(pool: Sequence[Hashable], seed: int | str, key: Hashable) -> list[Hashable]:
    """The related references in the seeded random order of the paper rule."""
    order = list(pool)
    random.Random(f"ligbench-order:{seed}:{key}").shuffle(order)
    return order


def replay(
    initial: Mapping[str, float],
    pool: Pool,
    played: Sequence[tuple[Hashable, Outcomes]],
    schedule: Schedule,
) -> dict[str, EloChain]:
    """Every dimension's chain after the comparisons already judged, in their order."""
    chains = {dim: EloChain.start(s0) for dim, s0 in initial.items()}
    for ref, outcomes in played:
        for dim, chain in chains.items():
            chains[dim] = chain.advance(
                ref,
                pool[ref][dim],
                outcomes.get(dim),
                epsilon=schedule.epsilon,
                max_steps=schedule.max_steps,
                d=schedule.d,
                k_max=schedule.k_max,
                gamma=schedule.gamma,
            )
    return chains


def next_reference(
    chains: Mapping[str, EloChain],
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

    def distance(ref: Hashable) -> float:
        return sum(abs(pool[ref][dim] - chains[dim].score) for dim in running) / len(running)

    best = min(distance(ref) for ref in left)
    tied = [ref for ref in left if distance(ref) - best <= 1e-12]
    return random.Random(f"ligbench-tie:{schedule.seed}:{key}:{len(played)}").choice(tied)


def finish(chains: Mapping[str, EloChain]) -> dict[str, EloChain]:
    """Chains that still run when the references ran out are marked exhausted."""
    return {dim: chain.finish() for dim, chain in chains.items()}
