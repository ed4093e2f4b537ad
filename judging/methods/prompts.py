"""Our prompt templates for the LLM judges, versioned and hashable.

Each template is a `PromptTemplate` with a name and a version; bump the version whenever
the wording changes, so stored runs keep saying which wording they used. `prompt_hash`
fingerprints the rendered messages (SHA-256 of canonical JSON), which is what a run stores
next to its calls and what the call cache can key on.

Templates use `string.Template` ($name) rather than str.format so the JSON braces in the
instructions need no escaping and braces inside idea texts are left alone. Each asks for
exactly the grammar that `judging.methods.parsing` accepts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from string import Template
from typing import Any

from judging.methods.parsing import FORMALISATION_KEYS, FormalisedParts
from llm.wire import METHOD_HEADER, prompt_hash

__all__ = [
    "ABSOLUTE",
    "DIRECT_SCORING",
    "LIGBENCH_COMPARISON",
    "LIGBENCH_DIMENSIONS",
    "LIGBENCH_FORMALISATION",
    "LIGBENCH_GUIDANCE",
    "LIGBENCH_INITIAL",
    "METHOD_HEADER",
    "PAIRWISE",
    "SWISS",
    "PROMPT_TEMPLATES",
    "MetricSpec",
    "PromptTemplate",
    "absolute_messages",
    "direct_scoring_messages",
    "form_ranges",
    "formalisation_messages",
    "ligbench_comparison_messages",
    "ligbench_initial_messages",
    "ligbench_novelty_messages",
    "pairwise_messages",
    "prompt_hash",
    "swiss_messages",
]

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    version: str
    system: str
    user: str

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"

    def render(self, **values: object) -> Messages:
        """Messages with every $placeholder filled; a missing value is an error."""
        text = {k: str(v) for k, v in values.items()}
        return [
            {"role": "system", "content": Template(self.system).substitute(text)},
            {"role": "user", "content": Template(self.user).substitute(text)},
        ]


_REVIEWER = (
    "You are an experienced reviewer of research proposals in machine learning and NLP. "
    "You judge the substance of an idea, not its length, polish or formatting."
)

DIRECT_SCORING = PromptTemplate(
    name="direct_scoring",
    version="1",
    system=_REVIEWER,
    user="""\
Review the research idea below on every metric of this review form. The anchors describe \
what a score means; a score between two anchors is fine.

$form

Research idea:
<<<
$idea
>>>

Answer with one JSON object and nothing else. Its keys are exactly: $keys. Each key maps \
to {"score": <integer in the metric's range>, "rationale": "<two or three sentences>"}.""",
)

ABSOLUTE = PromptTemplate(
    name="absolute",
    version="1",
    system=_REVIEWER,
    user="""\
Rate the $criterion of the research idea below on a whole-number scale from $low \
(lowest) to $high (highest).$description

Research idea:
<<<
$idea
>>>

Answer with one JSON object and nothing else: {"score": <integer from $low to $high>, \
"rationale": "<one or two sentences>"}.""",
)

PAIRWISE = PromptTemplate(
    name="pairwise",
    version="1",
    system=_REVIEWER,
    user="""\
Two research ideas follow, labelled A and B. Decide which one is better in $criterion.\
$description The order in which they appear says nothing about their quality.

Idea A:
<<<
$idea_a
>>>

Idea B:
<<<
$idea_b
>>>

Reply with exactly one tag and nothing else: [[A]] if A is better, [[B]] if B is better, \
[[TIE]] if neither is better.""",
)

SWISS = PromptTemplate(
    name="swiss",
    version="1",
    system=_REVIEWER,
    user="""\
Two project proposals on the same topic follow, labelled A and B. Expert reviewers at a \
top AI venue will score both. Which one will they rate higher overall, weighing novelty, \
excitement, feasibility and expected effectiveness? The order of the proposals is random.

Proposal A:
<<<
$idea_a
>>>

Proposal B:
<<<
$idea_b
>>>

You must choose one. Reply with exactly one tag and nothing else: [[A]] or [[B]].""",
)

LIGBENCH_FORMALISATION = PromptTemplate(
    name="ligbench_formalisation",
    version="1",
    system=(
        "You restate research ideas in a fixed four-part structure so that ideas written "
        "in different styles can be compared fairly. You never add content the idea lacks."
    ),
    user="""\
Restate the research idea below in four parts:
- main_target: one sentence naming the task and the goal.
- core_breakthrough: what the idea claims is new compared with prior work, in one or two \
sentences.
- innovative_methods: the concrete techniques it proposes, as a list of short items.
- experimental_design: how it would be tested (data, baselines, metrics, experiments).

Research idea:
<<<
$idea
>>>

Answer with one JSON object and nothing else, with exactly the keys main_target, \
core_breakthrough, innovative_methods (a list of strings) and experimental_design.""",
)

LIGBENCH_DIMENSIONS: dict[str, str] = {
    "rating": "overall quality, weighing strengths against weaknesses",
    "contribution": "how useful the outcome would be to future research",
    "soundness": "whether the reasoning and methods are solid and free of major flaws",
}

LIGBENCH_GUIDANCE: dict[str, str] = {
    "rating": (
        "Weigh the whole idea as a reviewer deciding on acceptance would: is the problem "
        "worth solving, is the proposed step a real advance, would the plan convince you? "
        "A long list of components is not a strength in itself."
    ),
    "contribution": (
        "Ask what others could build on if the idea worked: a new capability, method, "
        "dataset or insight that changes how the field proceeds, against an incremental "
        "gain on one benchmark."
    ),
    "soundness": (
        "Check whether the method could plausibly achieve the target, whether the "
        "experiments would actually test the claim (baselines, metrics, ablations) and "
        "whether anything essential is missing or contradictory."
    ),
    "novelty": (
        "Judge how far the idea departs from what is already done: an unusual method, a "
        "new angle on the problem, or a direction others have not opened, against a "
        "familiar technique applied to a familiar task."
    ),
}
"""What to look at on each dimension, given to the judge beside the dimension's name."""

LIGBENCH_COMPARISON = PromptTemplate(
    name="ligbench_comparison",
    version="2",
    system=_REVIEWER,
    user="""Two research ideas follow, each in four parts, labelled A and B. One of them may be a published paper; that is not a reason to prefer it. Compare them on each dimension \
separately, using the guidance given for it:
$dimensions

Idea A:
$idea_a

Idea B:
$idea_b

First reason: for each dimension in turn, say in two or three sentences what A does \
better, what B does better, and which weighs more on that dimension. Then end with one \
last line and nothing after it:
VERDICT: {$example}
with exactly the keys $keys, each "A" if A is better on that dimension, "B" if B is \
better, or "tie".""",
)

LIGBENCH_INITIAL = PromptTemplate(
    name="ligbench_initial",
    version="1",
    system=_REVIEWER,
    user="""Below are $n published research ideas related to a new one, each in four parts, with the \
scores their reviewers gave them on a 0–5 scale (adjusted for how strictly each venue \
scores). Use them to calibrate your scale, then score the new idea on the same scale.

$examples

New idea:
$idea

Dimensions:
$dimensions

First reason: compare the new idea with the examples on each dimension in a few \
sentences. Then end with one last line and nothing after it:
SCORES: {$example}
with exactly the keys $keys, each a number from 0 to 5 (one decimal place is enough).""",
)


@dataclass(frozen=True)
class MetricSpec:
    """One metric of a review form as the prompt needs it."""

    key: str
    low: int
    high: int
    label: str = ""
    description: str = ""
    anchors: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def coerce(cls, metric: Any) -> MetricSpec:
        """Accept a MetricSpec, a mapping, or any object with the same attribute names."""
        if isinstance(metric, MetricSpec):
            return metric

        def get(name: str, default: Any = None) -> Any:
            if isinstance(metric, Mapping):
                return metric.get(name, default)
            return getattr(metric, name, default)

        anchors = get("anchors") or {}
        return cls(
            key=str(get("key")),
            low=int(get("low")),
            high=int(get("high")),
            label=str(get("label") or ""),
            description=str(get("description") or ""),
            anchors={int(k): str(v) for k, v in dict(anchors).items()},
        )


def form_ranges(metrics: Sequence[Any]) -> dict[str, tuple[int, int]]:
    """The `ranges` argument of `parse_form_scores` for a form's metrics."""
    specs = [MetricSpec.coerce(m) for m in metrics]
    return {m.key: (m.low, m.high) for m in specs}


def _form_block(specs: Sequence[MetricSpec]) -> str:
    parts = []
    for m in specs:
        head = f"## {m.key}" + (f" ({m.label})" if m.label and m.label != m.key else "")
        lines = [f"{head}: integer from {m.low} to {m.high}"]
        if m.description:
            lines.append(m.description)
        lines += [f"  {score}: {text}" for score, text in sorted(m.anchors.items())]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def direct_scoring_messages(idea: str, metrics: Sequence[Any]) -> Messages:
    specs = [MetricSpec.coerce(m) for m in metrics]
    if not specs:
        raise ValueError("the form has no metrics")
    return DIRECT_SCORING.render(
        idea=idea, form=_form_block(specs), keys=", ".join(m.key for m in specs)
    )


def _sentence(description: str) -> str:
    return f" {description.strip()}" if description.strip() else ""


def absolute_messages(
    idea: str,
    criterion: str = "overall quality",
    description: str = "",
    low: int = 1,
    high: int = 5,
) -> Messages:
    return ABSOLUTE.render(
        idea=idea, criterion=criterion, description=_sentence(description), low=low, high=high
    )


def pairwise_messages(
    idea_a: str, idea_b: str, criterion: str = "overall quality", description: str = ""
) -> Messages:
    return PAIRWISE.render(
        idea_a=idea_a, idea_b=idea_b, criterion=criterion, description=_sentence(description)
    )


def swiss_messages(idea_a: str, idea_b: str) -> Messages:
    return SWISS.render(idea_a=idea_a, idea_b=idea_b)


def formalisation_messages(idea: str) -> Messages:
    return LIGBENCH_FORMALISATION.render(idea=idea)


_PART_LABELS = {
    "main_target": "Main target",
    "core_breakthrough": "Core breakthrough",
    "innovative_methods": "Innovative methods",
    "experimental_design": "Experimental design",
}


def _formalised(idea: FormalisedParts | Mapping[str, str]) -> str:
    parts = idea.as_dict() if isinstance(idea, FormalisedParts) else idea
    return "\n".join(f"- {_PART_LABELS[k]}: {parts[k]}" for k in FORMALISATION_KEYS)


def _dimension_block(dimensions: Mapping[str, str]) -> str:
    return "\n".join(
        f"- {k} ({v}): {LIGBENCH_GUIDANCE[k]}" if k in LIGBENCH_GUIDANCE else f"- {k}: {v}"
        for k, v in dimensions.items()
    )


def ligbench_comparison_messages(
    idea_a: FormalisedParts | Mapping[str, str],
    idea_b: FormalisedParts | Mapping[str, str],
    dimensions: Mapping[str, str] = LIGBENCH_DIMENSIONS,
) -> Messages:
    return LIGBENCH_COMPARISON.render(
        idea_a=_formalised(idea_a),
        idea_b=_formalised(idea_b),
        dimensions=_dimension_block(dimensions),
        keys=", ".join(dimensions),
        example=", ".join(f'"{k}": "A"' for k in dimensions),
    )


LIGBENCH_NOVELTY_DIMENSION = "novelty"
"""The key of the judge's own novelty estimate (s_LLM) in the initial-scoring answer."""


def ligbench_initial_messages(
    idea: FormalisedParts | Mapping[str, str],
    examples: Sequence[tuple[Mapping[str, str], Mapping[str, float]]],
    dimensions: Mapping[str, str] = LIGBENCH_DIMENSIONS,
    novelty: bool = True,
) -> Messages:
    """LigBench's initial scoring: scored examples from the corpus, then the new idea.

    `examples` are (four parts, debiased score per dimension) of the related references;
    with `novelty` the judge also gives its own 0–5 novelty estimate.
    """
    dims = dict(dimensions)
    if novelty:
        dims[LIGBENCH_NOVELTY_DIMENSION] = "how far the idea departs from existing work"
    shown = []
    for n, (parts, scores) in enumerate(examples, 1):
        marks = ", ".join(f"{k} {scores[k]:.1f}" for k in dimensions)
        shown.append(f"Example {n} (scores: {marks}):\n{_formalised(parts)}")
    return LIGBENCH_INITIAL.render(
        n=len(examples),
        examples="\n\n".join(shown),
        idea=_formalised(idea),
        dimensions=_dimension_block(dims),
        keys=", ".join(dims),
        example=", ".join(f'"{k}": 2.5' for k in dims),
    )


def ligbench_novelty_messages(idea: FormalisedParts | Mapping[str, str]) -> Messages:
    """The judge's own 0–5 novelty estimate s_LLM for the LigBench novelty fusion."""
    return absolute_messages(
        _formalised(idea),
        criterion="novelty",
        description=(
            "Novelty means departing from existing approaches: unusual methods, a new angle "
            "on the problem, or the potential to open a research direction."
        ),
        low=0,
        high=5,
    )


PROMPT_TEMPLATES: dict[str, PromptTemplate] = {
    t.name: t
    for t in (
        DIRECT_SCORING,
        ABSOLUTE,
        PAIRWISE,
        SWISS,
        LIGBENCH_FORMALISATION,
        LIGBENCH_COMPARISON,
        LIGBENCH_INITIAL,
    )
}
