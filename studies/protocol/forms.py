"""Review-form definitions: metrics, their ranges and one anchor text per level.

A form is plain data (JSON-serialisable) so it can be versioned in the database, shown
to reviewers, given to LLM judges and shipped in a reproducibility package unchanged.
The default form follows the structure of the Si et al. study (five 1-10 scores with a
rationale each, familiarity and confidence 1-5); its anchor wording is our own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Scale:
    key: str
    label: str
    question: str
    minimum: int
    maximum: int
    anchors: dict[int, str]
    rationale: bool = True

    def __post_init__(self) -> None:
        if self.minimum >= self.maximum:
            raise ValueError(f"scale {self.key}: minimum must be below maximum")
        missing = [v for v in range(self.minimum, self.maximum + 1) if v not in self.anchors]
        if missing:
            raise ValueError(f"scale {self.key}: no anchor text for level(s) {missing}")

    def contains(self, value: float) -> bool:
        return self.minimum <= value <= self.maximum


@dataclass(frozen=True)
class FormDefinition:
    key: str
    version: int
    title: str
    metrics: tuple[Scale, ...]
    familiarity: Scale
    confidence: Scale
    min_rationale_words: int = 25
    honor_code: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def metric_keys(self) -> list[str]:
        return [m.key for m in self.metrics]

    def metric(self, key: str) -> Scale:
        for m in self.metrics:
            if m.key == key:
                return m
        raise KeyError(f"form {self.key} v{self.version} has no metric {key!r}")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for scale in [*data["metrics"], data["familiarity"], data["confidence"]]:
            scale["anchors"] = {str(k): v for k, v in scale["anchors"].items()}
        data["metrics"] = list(data["metrics"])
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FormDefinition:
        def scale(d: dict[str, Any]) -> Scale:
            return Scale(
                key=d["key"],
                label=d["label"],
                question=d.get("question", ""),
                minimum=int(d["minimum"]),
                maximum=int(d["maximum"]),
                anchors={int(k): v for k, v in d["anchors"].items()},
                rationale=bool(d.get("rationale", True)),
            )

        return cls(
            key=data["key"],
            version=int(data["version"]),
            title=data["title"],
            metrics=tuple(scale(m) for m in data["metrics"]),
            familiarity=scale(data["familiarity"]),
            confidence=scale(data["confidence"]),
            min_rationale_words=int(data.get("min_rationale_words", 25)),
            honor_code=data.get("honor_code", ""),
            extra=dict(data.get("extra", {})),
        )


def _scale(key: str, label: str, question: str, anchors: list[str], lo: int = 1) -> Scale:
    return Scale(
        key=key,
        label=label,
        question=question,
        minimum=lo,
        maximum=lo + len(anchors) - 1,
        anchors={lo + i: text for i, text in enumerate(anchors)},
    )


NOVELTY = _scale(
    "novelty",
    "Novelty",
    "How original is the idea compared with existing work on this topic, and does it offer "
    "a new perspective?",
    [
        "Not original: many existing papers already propose essentially this idea.",
        "Barely original: a minor variant of well-known work.",
        "Slightly original: small twists on existing ideas, easy to anticipate.",
        "Modestly original: some new elements, but the core is familiar.",
        "Somewhat original: it differs from prior work, though not enough for a paper of its own.",
        "Reasonably original: clear differences from prior work, likely enough for a new paper.",
        "Original: a fresh angle that most researchers in the area have not tried.",
        "Very original: a distinctive contribution with a clever core insight.",
        "Highly original: departs sharply from existing approaches in a compelling way.",
        "Exceptionally original: unlike anything in the literature, and strikingly clever.",
    ],
)

FEASIBILITY = _scale(
    "feasibility",
    "Feasibility",
    "Could a typical CS PhD student carry out this project within one to two months, "
    "with ample access to commercial LLM APIs but limited GPU compute?",
    [
        "Impossible: the plan cannot be executed as written, or depends on unavailable resources.",
        "Nearly impossible: several essential parts are infeasible within the constraints.",
        "Very hard: major obstacles; success would need far more time or compute.",
        "Hard: substantial redesign or resources beyond the constraints would be needed.",
        "Challenging: doable with significant effort, but parts are risky or underspecified.",
        "Moderately feasible: achievable in the time frame with careful planning.",
        "Feasible: a competent student could execute it with some engineering effort.",
        "Quite feasible: the steps are clear and the resources are readily available.",
        "Straightforward: can be done well within the time frame with routine skills.",
        "Easy: the whole project could be run within a few days without advanced skills.",
    ],
)

EFFECTIVENESS = _scale(
    "effectiveness",
    "Expected effectiveness",
    "How likely is the proposed method to work well, for instance to beat strong existing "
    "baselines?",
    [
        "Extremely unlikely: fundamental flaws; it will almost certainly not work.",
        "Very unlikely: serious weaknesses make success improbable.",
        "Unlikely: it may work in narrow cases but probably not in general.",
        "Somewhat unlikely: more reasons to expect failure than success.",
        "Uncertain: roughly even odds of matching existing baselines.",
        "Somewhat likely: a reasonable chance of small gains over baselines.",
        "Likely: probably better than baselines on the targeted benchmarks.",
        "Very likely: solid gains on several benchmarks are expected.",
        "Highly likely: strong, consistent improvements are expected.",
        "Almost certain: you are confident it will beat existing methods by wide margins "
        "on many benchmarks.",
    ],
)

EXCITEMENT = _scale(
    "excitement",
    "Excitement",
    "If carried out as a full project, how exciting and influential would this idea be for "
    "the field?",
    [
        "Poor: no identifiable contribution; you would argue for rejection at any major venue.",
        "Weak: the contribution is marginal and of little interest.",
        "Limited: interesting to a few, with little impact beyond them.",
        "Below average: some merit, but incremental and unlikely to be accepted at a major venue.",
        "Borderline: has merit, but its weaknesses weigh about as much as its strengths.",
        "Leaning positive: exciting enough for a major AI venue, although somewhat incremental.",
        "Exciting: a clear, valuable contribution that others would build on.",
        "Very exciting: likely to influence how people work on this problem.",
        "Highly exciting: could open a new line of research.",
        "Transformative: would reshape the field; worthy of a best-paper award.",
    ],
)

OVERALL = _scale(
    "overall",
    "Overall",
    "Your overall judgement of the idea, read against the acceptance bar of a major AI conference.",
    [
        "Critically flawed, trivial or wrong; would be harmful to publish.",
        "Strong rejection: well below the bar of a major venue.",
        "Clear rejection: does not meet the bar.",
        "Rejection: below the bar, though not without merit.",
        "Marginally below the acceptance bar of a major AI conference.",
        "Marginally above the acceptance bar of a major AI conference.",
        "Good idea: would be accepted at a major AI conference.",
        "Top 50% of ideas accepted at a major AI conference.",
        "Top 15% of ideas accepted at a major AI conference.",
        "Top 5% of accepted ideas: a seminal contribution.",
    ],
)

FAMILIARITY = Scale(
    key="familiarity",
    label="Familiarity with the topic",
    question="How familiar are you with the topic of this idea?",
    minimum=1,
    maximum=5,
    anchors={
        1: "I have never read about this topic.",
        2: "I have read at least one paper on this topic.",
        3: "I have read several papers on this topic but published none on it.",
        4: "I have co-authored at least one paper on this topic.",
        5: "I have co-authored several papers, or a first-author paper, on this topic.",
    },
    rationale=False,
)

CONFIDENCE = Scale(
    key="confidence",
    label="Confidence in your review",
    question="How confident are you in the assessment you gave?",
    minimum=1,
    maximum=5,
    anchors={
        1: "An educated guess: the idea is outside my area or hard to follow.",
        2: "Willing to defend, but parts may be beyond my expertise.",
        3: "Fairly confident; I may have missed related work or details.",
        4: "Confident, though not absolutely certain; I checked the key points.",
        5: "Absolutely certain; I know the related work and checked carefully.",
    },
    rationale=False,
)

SI2024_FORM = FormDefinition(
    key="si2024",
    version=1,
    title="Research idea review (Si et al. 2024 structure)",
    metrics=(NOVELTY, EXCITEMENT, FEASIBILITY, EFFECTIVENESS, OVERALL),
    familiarity=FAMILIARITY,
    confidence=CONFIDENCE,
    min_rationale_words=25,
    honor_code=(
        "I will write this review myself, without ChatGPT, Claude, Gemini or any other AI tool."
    ),
)

DEFAULT_FORM = SI2024_FORM
