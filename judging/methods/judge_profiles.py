"""Behaviour profiles of a simulated judge: how its verdicts and scores depart from the
ideas' quality, by effects of known size, so the reliability panel can be shown to
recover them.

A profile is a handful of numbers. A pairwise verdict (idea A shown first, B second) is
"A" with probability

    P(A) = σ(discrimination·(q_A − q_B) + position + length_preference·d_len
             + self_preference·(own_A − own_B))

where q is the idea's quality, d_len = (L_A − L_B)/(L_A + L_B) the normalised difference
of their lengths in words (the covariate of the Bradley–Terry style control in
`judging.methods.reliability`, so `length_preference` is the β it should recover), and
own = 1 for an idea written by a model of the judge's own family. A direct score is

    round(score_intercept + score_slope·q + score_self·own + idea_noise·z_idea
          + repeat_sd·z_call), cut to the scale,

with z_idea a standard normal fixed per prompt (the judge's stable misreading of that
idea) and z_call one drawn afresh per call (the noise a repeated call shows).

Repetition: the first answer to a prompt is drawn from the probabilities above; asked
again, the judge answers afresh with probability `repetition_noise` and repeats its
first answer otherwise (0: a temperature-0 judge; 1: every call an independent draw).
Direct scores repeat through `repeat_sd`.

The functions take their random numbers as arguments (`uniform`, `normal`: derived from
hashes of the parts that name a call), so the local test server can answer a request the
way this simulator does, from the request alone: `traits_from_text` gives an idea's
traits from its text (quality a standard normal fixed by the text, length its word
count), and the uniforms of a call come from `uniform(prompt, "first")` and
`uniform(prompt, "again", k)` for its k-th repeat. `simulate` builds a whole synthetic
study (ideas, reviewers' scores and pair ratings, the judge's calls with repeats) with a
seeded numpy generator.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.stats import norm

__all__ = [
    "PROFILES",
    "CONDITIONS",
    "BehaviourProfile",
    "SimulatedCondition",
    "DirectCall",
    "IdeaTraits",
    "PairCallRecord",
    "SyntheticStudy",
    "direct_score",
    "normal",
    "pairwise_answer",
    "pairwise_probability",
    "simulate",
    "traits_from_text",
    "uniform",
]


@dataclass(frozen=True)
class BehaviourProfile:
    """The size of each injected effect (0: absent)."""

    discrimination: float = 1.5
    """Log-odds per unit of quality difference (quality has sd 1 in `simulate`)."""
    position: float = 0.0
    """Log-odds toward the idea shown first."""
    length_preference: float = 0.0
    """Log-odds per unit of the normalised length difference d_len ∈ [−1, 1]."""
    self_preference: float = 0.0
    """Log-odds toward an idea of the judge's own model family against another."""
    repetition_noise: float = 0.0
    """Probability that a repeated pairwise prompt is answered afresh."""
    score_intercept: float = 5.5
    score_slope: float = 1.2
    score_self: float = 0.0
    """Points added to the direct score of an own-family idea."""
    idea_noise: float = 0.8
    repeat_sd: float = 0.0
    """SD of the fresh noise on each direct-scoring call."""
    scale: tuple[int, int] = (1, 10)

    def __post_init__(self) -> None:
        if not 0.0 <= self.repetition_noise <= 1.0:
            raise ValueError("repetition_noise must be in [0, 1]")
        if self.repeat_sd < 0 or self.idea_noise < 0:
            raise ValueError("repeat_sd and idea_noise must not be negative")
        if self.scale[0] >= self.scale[1]:
            raise ValueError("scale must be (lowest, highest) with lowest < highest")


PROFILES: dict[str, BehaviourProfile] = {
    "neutral": BehaviourProfile(),
    "length": BehaviourProfile(length_preference=2.0),
    "self": BehaviourProfile(self_preference=0.8, score_self=0.8),
    "noisy": BehaviourProfile(repetition_noise=0.6, repeat_sd=0.9),
    "all": BehaviourProfile(
        position=0.4,
        length_preference=2.0,
        self_preference=0.8,
        score_self=0.8,
        repetition_noise=0.6,
        repeat_sd=0.9,
    ),
}
"""Named profiles, shared by the recovery tests and the local test server."""


@dataclass(frozen=True)
class IdeaTraits:
    quality: float
    length: float
    """Words."""
    own_family: bool = False
    condition: str = ""
    markdown_density: float = 0.0
    """Markdown marks per 100 words; no profile acts on it (its style β should be 0)."""
    list_items: float = 0.0


def uniform(*parts: object) -> float:
    """A number in (0, 1) fixed by `parts` (SHA-256), for answers that must be the same
    whoever computes them."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2**64


def normal(*parts: object) -> float:
    """A standard normal fixed by `parts`."""
    return float(norm.ppf(uniform(*parts)))


def traits_from_text(text: str, *, own_family: bool = False) -> IdeaTraits:
    """An idea's traits as the test server sees them: quality fixed by the text (standard
    normal), length in words; markdown and lists are not acted on by any profile."""
    return IdeaTraits(
        quality=normal("quality", text), length=float(len(text.split())), own_family=own_family
    )


def _length_difference(a: IdeaTraits, b: IdeaTraits) -> float:
    total = a.length + b.length
    return (a.length - b.length) / total if total else 0.0


def pairwise_probability(profile: BehaviourProfile, a: IdeaTraits, b: IdeaTraits) -> float:
    """P(the judge answers "A") with `a` shown first."""
    eta = (
        profile.discrimination * (a.quality - b.quality)
        + profile.position
        + profile.length_preference * _length_difference(a, b)
        + profile.self_preference * (int(a.own_family) - int(b.own_family))
    )
    return 1.0 / (1.0 + math.exp(-eta))


def pairwise_answer(
    profile: BehaviourProfile,
    a: IdeaTraits,
    b: IdeaTraits,
    first: float,
    again: tuple[float, float] | None = None,
) -> str:
    """ "A" or "B". `first` is the uniform of the prompt's first answer; a repeated call
    passes `again` = (uniform deciding whether it answers afresh, uniform of the fresh
    answer)."""
    p = pairwise_probability(profile, a, b)
    if again is not None and again[0] < profile.repetition_noise:
        return "A" if again[1] < p else "B"
    return "A" if first < p else "B"


def direct_score(profile: BehaviourProfile, idea: IdeaTraits, z_idea: float, z_call: float) -> int:
    """The direct score of one call: `z_idea` fixed per prompt, `z_call` fresh per call."""
    raw = (
        profile.score_intercept
        + profile.score_slope * idea.quality
        + profile.score_self * int(idea.own_family)
        + profile.idea_noise * z_idea
        + profile.repeat_sd * z_call
    )
    lo, hi = profile.scale
    return int(min(max(round(raw), lo), hi))


@dataclass(frozen=True)
class PairCallRecord:
    first: int
    second: int
    answer: str
    """"A" or "B"."""
    repeat: int
    """0 for the first call of the prompt, 1 for the repeat."""


@dataclass(frozen=True)
class DirectCall:
    idea: int
    score: int
    repeat: int


@dataclass(frozen=True)
class SyntheticStudy:
    profile: BehaviourProfile
    ideas: tuple[IdeaTraits, ...]
    pair_calls: tuple[PairCallRecord, ...]
    direct_calls: tuple[DirectCall, ...]
    human_scores: dict[int, list[int]]
    """Idea → the reviewers' overall scores."""
    human_pairs: dict[tuple[int, int], list[float]] = field(default_factory=dict)
    """(first, second) of a judged pair → each reviewer's result for `first` (1 or 0)."""
    z_idea: tuple[float, ...] = ()
    human_discrimination: float = 1.5
    human_intercept: float = 5.0
    human_slope: float = 1.2


@dataclass(frozen=True)
class SimulatedCondition:
    """A group of ideas in `simulate`: who wrote them, how good and how long they are."""

    name: str
    quality: float
    """Mean quality (each idea adds a N(0, 1) deviation)."""
    words: float
    """Median length in words."""
    own_family: bool = False
    spread: float = 0.45
    """Each idea's length is `words`·e^N(0, spread²), independently of its quality: the
    assumption under which style control separates style from substance."""


CONDITIONS = (
    SimulatedCondition("ai_own", 0.0, 380.0, own_family=True),
    SimulatedCondition("ai_other", 0.0, 380.0),
    SimulatedCondition("human", 0.4, 260.0),
)
"""Two AI conditions (one by the judge's own model family) that write longer, and a
human condition that writes shorter but better ideas."""


def _ideas(
    rng: np.random.Generator, n: int, conditions: Sequence[SimulatedCondition]
) -> list[IdeaTraits]:
    which = rng.integers(0, len(conditions), n)
    deviation = rng.standard_normal(n)
    spread = rng.standard_normal(n)
    markdown = rng.gamma(2.0, 1.5, n)
    items = rng.poisson(4.0, n)
    ideas = []
    for k in range(n):
        c = conditions[int(which[k])]
        ideas.append(
            IdeaTraits(
                quality=c.quality + float(deviation[k]),
                length=float(round(c.words * math.exp(c.spread * float(spread[k])))),
                own_family=c.own_family,
                condition=c.name,
                markdown_density=float(markdown[k]),
                list_items=float(items[k]),
            )
        )
    return ideas


def _judge_pairs(
    rng: np.random.Generator,
    profile: BehaviourProfile,
    ideas: Sequence[IdeaTraits],
    n_pairs: int,
    repeat_share: float,
) -> list[PairCallRecord]:
    n = len(ideas)
    i_up, j_up = np.triu_indices(n, 1)
    chosen = rng.choice(len(i_up), size=min(n_pairs, len(i_up)), replace=False)
    calls = []
    for c in chosen:
        a, b = (int(i_up[c]), int(j_up[c]))
        if rng.random() < 0.5:
            a, b = b, a
        first_u = float(rng.random())
        calls.append(PairCallRecord(a, b, pairwise_answer(profile, ideas[a], ideas[b], first_u), 0))
        if rng.random() < repeat_share:
            again = (float(rng.random()), float(rng.random()))
            answer = pairwise_answer(profile, ideas[a], ideas[b], first_u, again)
            calls.append(PairCallRecord(a, b, answer, 1))
    return calls


def simulate(
    profile: BehaviourProfile,
    *,
    seed: int = 0,
    n_ideas: int = 120,
    n_pairs: int = 800,
    conditions: Sequence[SimulatedCondition] = CONDITIONS,
    repeat_share: float = 0.3,
    reviewers: int = 3,
    pair_reviewers: int = 2,
    human_noise: float = 1.3,
) -> SyntheticStudy:
    """A synthetic study judged by `profile`: ideas drawn evenly from `conditions` (quality
    the condition's mean + N(0, 1)); each idea scored once by
    the judge (a `repeat_share` of prompts asked again) and by `reviewers` reviewers
    (round(5 + 1.2·q + N(0, human_noise²)), cut to 1–10); `n_pairs` random pairs judged
    once in a random order (a `repeat_share` asked again); every judged pair of one
    own-family and one other idea also rated by `pair_reviewers` reviewers, who prefer by
    quality alone (P = σ(1.5·Δq))."""
    rng = np.random.default_rng(seed)
    ideas = _ideas(rng, n_ideas, conditions)
    pair_calls = _judge_pairs(rng, profile, ideas, n_pairs, repeat_share)
    z_idea = rng.standard_normal(n_ideas)
    direct = []
    for i, idea in enumerate(ideas):
        direct.append(
            DirectCall(
                i, direct_score(profile, idea, float(z_idea[i]), float(rng.standard_normal())), 0
            )
        )
        if rng.random() < repeat_share:
            z = float(rng.standard_normal())
            direct.append(DirectCall(i, direct_score(profile, idea, float(z_idea[i]), z), 1))
    study = SyntheticStudy(
        profile=profile,
        ideas=tuple(ideas),
        pair_calls=tuple(pair_calls),
        direct_calls=tuple(direct),
        human_scores={},
        z_idea=tuple(float(z) for z in z_idea),
    )
    human_scores = {
        i: [
            int(
                min(
                    max(
                        round(
                            study.human_intercept
                            + study.human_slope * idea.quality
                            + human_noise * float(rng.standard_normal())
                        ),
                        1,
                    ),
                    10,
                )
            )
            for _ in range(reviewers)
        ]
        for i, idea in enumerate(ideas)
    }
    human_pairs: dict[tuple[int, int], list[float]] = {}
    for call in pair_calls:
        a, b = ideas[call.first], ideas[call.second]
        if call.repeat or a.own_family == b.own_family:
            continue
        p = 1.0 / (1.0 + math.exp(-study.human_discrimination * (a.quality - b.quality)))
        human_pairs[(call.first, call.second)] = [
            float(rng.random() < p) for _ in range(pair_reviewers)
        ]
    return replace(study, human_scores=human_scores, human_pairs=human_pairs)
