"""Review-form definitions: metrics, their scales, anchors and rationale rules, as data.

A form is plain data (JSON-serialisable) so it can be versioned in the database, shown
to reviewers, given to LLM judges and shipped in a reproducibility package unchanged.
`form_validate` turns a form file's object into a `FormDefinition`, or raises
`FormFileError` listing every problem with the field and metric it concerns; the file
format is documented in docs/forms.md and `FormDefinition.to_dict` writes it.

Anchors may be sparse: a scale of 1-10 may describe only some of its levels, as the
protocol's own form does. The built-in forms are at the end of this module.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from . import jsonsafe

RATIONALE_CHOICES = ("required", "optional", "none")
# The generic review file's own columns, in the order the import documents them; a form's
# metric may not take one of these names.
IMPORT_FIELDS = (
    "idea_id",
    "condition",
    "topic",
    "reviewer_id",
    "review_id",
    "title",
    "institution",
    "familiarity",
    "confidence",
    "minutes",
    "consent",
    "honor_code",
    "timestamp",
)
RESERVED_KEYS = frozenset(IMPORT_FIELDS)
METRIC_KEY = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
FORM_KEY = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
MAX_LEVELS = 101
MAX_TEXT = 2000
DEFAULT_MIN_RATIONALE_WORDS = 25


@dataclass(frozen=True)
class Scale:
    """One question answered on an integer scale; `anchors` describe some of its levels."""

    key: str
    label: str
    question: str
    minimum: int
    maximum: int
    anchors: dict[int, str]
    rationale: bool = True  # the reviewer is asked for a rationale
    rationale_required: bool = True
    min_rationale_words: int | None = None  # None: the form's minimum

    def __post_init__(self) -> None:
        if self.minimum >= self.maximum:
            raise ValueError(f"scale {self.key}: minimum must be below maximum")
        outside = [v for v in self.anchors if not self.minimum <= v <= self.maximum]
        if outside:
            raise ValueError(f"scale {self.key}: anchors for level(s) {outside} outside the scale")

    @property
    def levels(self) -> list[int]:
        return list(range(self.minimum, self.maximum + 1))

    @property
    def rationale_mode(self) -> str:
        if not self.rationale:
            return "none"
        return "required" if self.rationale_required else "optional"

    def anchor(self, level: int) -> str:
        return self.anchors.get(level, "")

    def contains(self, value: float) -> bool:
        return self.minimum <= value <= self.maximum

    def range_text(self) -> str:
        return f"{self.minimum}–{self.maximum}"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "key": self.key,
            "label": self.label,
            "question": self.question,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "anchors": {str(k): v for k, v in sorted(self.anchors.items())},
            "rationale": self.rationale_mode,
        }
        if self.min_rationale_words is not None:
            data["min_rationale_words"] = self.min_rationale_words
        return data


@dataclass(frozen=True)
class AttentionCheck:
    """An instructed-response item: asked on a scale like any metric ("to show you read
    this, choose 3"), answered without a rationale, and scored only as passed or failed
    against `expected`. It is never a metric: no table, test or judge sees it. `after`
    is the metric it follows on the page ("" after the last one)."""

    scale: Scale
    expected: int
    after: str = ""

    def __post_init__(self) -> None:
        if not self.scale.contains(self.expected):
            raise ValueError(f"attention check {self.scale.key}: expected answer outside the scale")

    @property
    def key(self) -> str:
        return self.scale.key

    def passed(self, answer: Any) -> bool:
        try:
            return int(answer) == self.expected
        except (TypeError, ValueError):
            return False

    def to_dict(self) -> dict[str, Any]:
        data = self.scale.to_dict()
        del data["rationale"]
        data["expected"] = self.expected
        if self.after:
            data["after"] = self.after
        return data


@dataclass(frozen=True)
class FormDefinition:
    key: str
    version: int
    title: str
    metrics: tuple[Scale, ...]
    familiarity: Scale
    confidence: Scale
    min_rationale_words: int = DEFAULT_MIN_RATIONALE_WORDS
    honor_code: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    # The metrics reviewers compare idea pairs on, in order; empty: the study's default
    # (the usual ones this form has, see studies.services.reviews.pair_dimensions).
    pair_metrics: tuple[str, ...] = ()
    attention_checks: tuple[AttentionCheck, ...] = ()

    def __post_init__(self) -> None:
        unknown = [k for k in self.pair_metrics if k not in self.metric_keys]
        if unknown:
            raise ValueError(f"form {self.key}: pair metric(s) {unknown} are not metrics")
        clash = [c.key for c in self.attention_checks if c.key in self.metric_keys]
        if clash:
            raise ValueError(f"form {self.key}: attention check(s) {clash} share a metric's key")

    def items(self) -> list[Scale | AttentionCheck]:
        """What the reviewer answers, in page order: the metrics with each attention check
        after the metric it names (or after the last)."""
        out: list[Scale | AttentionCheck] = []
        for m in self.metrics:
            out.append(m)
            out.extend(c for c in self.attention_checks if c.after == m.key)
        out.extend(c for c in self.attention_checks if c.after not in self.metric_keys)
        return out

    @property
    def metric_keys(self) -> list[str]:
        return [m.key for m in self.metrics]

    @property
    def questions(self) -> tuple[Scale, Scale]:
        """The questions after the metrics: familiarity and confidence."""
        return (self.familiarity, self.confidence)

    def metric(self, key: str) -> Scale:
        for m in self.metrics:
            if m.key == key:
                return m
        raise KeyError(f"form {self.key} v{self.version} has no metric {key!r}")

    def rationale_words(self, scale: Scale) -> int:
        """Minimum words of `scale`'s rationale (0 when it is not required)."""
        if not scale.rationale_required or not scale.rationale:
            return 0
        if scale.min_rationale_words is not None:
            return scale.min_rationale_words
        return self.min_rationale_words

    def scales(self) -> dict[str, tuple[int, int]]:
        """Metric key -> (minimum, maximum), in the form's order."""
        return {m.key: (m.minimum, m.maximum) for m in self.metrics}

    def labels(self) -> dict[str, str]:
        return {m.key: m.label for m in self.metrics}

    def to_dict(self) -> dict[str, Any]:
        """The form-file object (docs/forms.md); `form_validate` reads it back."""
        data: dict[str, Any] = {
            "key": self.key,
            "version": self.version,
            "title": self.title,
        }
        if self.description:
            data["description"] = self.description
        data.update(
            {
                "metrics": [m.to_dict() for m in self.metrics],
                "familiarity": self.familiarity.to_dict(),
                "confidence": self.confidence.to_dict(),
                "min_rationale_words": self.min_rationale_words,
                "honor_code": self.honor_code,
            }
        )
        if self.extra:
            data["extra"] = dict(self.extra)
        if self.pair_metrics:
            data["pair_metrics"] = list(self.pair_metrics)
        if self.attention_checks:
            # Only when there are some: a form without them writes what it always wrote.
            data["attention_checks"] = [c.to_dict() for c in self.attention_checks]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FormDefinition:
        """A stored definition (checked when it was stored); older rows wrote the rationale
        as a boolean."""
        return cls(
            key=data["key"],
            version=int(data["version"]),
            title=data["title"],
            metrics=tuple(_stored_scale(m) for m in data["metrics"]),
            familiarity=_stored_scale(data["familiarity"]),
            confidence=_stored_scale(data["confidence"]),
            min_rationale_words=int(data.get("min_rationale_words", DEFAULT_MIN_RATIONALE_WORDS)),
            honor_code=data.get("honor_code", ""),
            extra=dict(data.get("extra", {})),
            description=data.get("description", ""),
            pair_metrics=tuple(data.get("pair_metrics", ())),
            attention_checks=tuple(
                AttentionCheck(
                    scale=_stored_scale({**c, "rationale": "none"}),
                    expected=int(c["expected"]),
                    after=c.get("after", ""),
                )
                for c in data.get("attention_checks", ())
            ),
        )


def _rationale_flags(value: Any) -> tuple[bool, bool]:
    """(asked, required) from a file's `rationale`: a choice name or a boolean."""
    if value is True or value is None:
        return True, True
    if value is False:
        return False, False
    return value != "none", value == "required"


def _stored_scale(d: dict[str, Any]) -> Scale:
    asked, required = _rationale_flags(d.get("rationale", True))
    words = d.get("min_rationale_words")
    return Scale(
        key=d["key"],
        label=d["label"],
        question=d.get("question", ""),
        minimum=int(d["minimum"]),
        maximum=int(d["maximum"]),
        anchors={int(k): v for k, v in d.get("anchors", {}).items()},
        rationale=asked,
        rationale_required=required,
        min_rationale_words=None if words is None else int(words),
    )


# --- reading a form file ---------------------------------------------------------------


class FormFileError(ValueError):
    """A form file that cannot be used; `problems` name the field (and metric) of each."""

    def __init__(self, problems: list[str], source: str = "form"):
        self.problems = list(problems)
        self.source = source
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} problem(s):\n{lines}")


FORM_FIELDS = {
    "key",
    "version",
    "title",
    "description",
    "metrics",
    "familiarity",
    "confidence",
    "min_rationale_words",
    "honor_code",
    "extra",
    "pair_metrics",
    "attention_checks",
}
SCALE_FIELDS = {
    "key",
    "label",
    "question",
    "minimum",
    "maximum",
    "anchors",
    "rationale",
    "min_rationale_words",
}


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(data: dict[str, Any], name: str, where: str, problems: list[str], *, needed: bool) -> str:
    value = data.get(name, "")
    if not isinstance(value, str):
        problems.append(f"{where}: '{name}' must be text")
        return ""
    if needed and not value.strip():
        problems.append(f"{where}: '{name}' is missing or empty")
    elif len(value) > MAX_TEXT:
        problems.append(f"{where}: '{name}' is longer than {MAX_TEXT} characters")
    return value.strip()


def _anchors(raw: Any, lo: int, hi: int, where: str, problems: list[str]) -> dict[int, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(f"{where}: 'anchors' must be an object of level → text")
        return {}
    anchors: dict[int, str] = {}
    for level, text in raw.items():
        try:
            value = int(str(level).strip())
        except ValueError:
            problems.append(f"{where}: anchor level {level!r} is not a whole number")
            continue
        if not lo <= value <= hi:
            problems.append(f"{where}: anchor level {value} is outside the scale {lo}–{hi}")
        elif not isinstance(text, str) or not text.strip():
            problems.append(f"{where}: the anchor of level {value} must be non-empty text")
        elif len(text) > MAX_TEXT:
            problems.append(f"{where}: the anchor of level {value} is too long")
        else:
            anchors[value] = text.strip()
    return anchors


def _scale(d: Any, where: str, problems: list[str], *, metric: bool) -> Scale | None:
    if not isinstance(d, dict):
        problems.append(f"{where}: must be an object")
        return None
    before = len(problems)
    unknown = sorted(set(d) - SCALE_FIELDS)
    if unknown:
        problems.append(f"{where}: unknown field(s) {', '.join(unknown)}")
    label = _text(d, "label", where, problems, needed=True)
    question = _text(d, "question", where, problems, needed=False)
    lo, hi = d.get("minimum"), d.get("maximum")
    if not _is_int(lo) or not _is_int(hi):
        problems.append(f"{where}: 'minimum' and 'maximum' must be whole numbers")
        return None
    if lo >= hi:
        problems.append(f"{where}: 'minimum' ({lo}) must be below 'maximum' ({hi})")
        return None
    if hi - lo + 1 > MAX_LEVELS:
        problems.append(f"{where}: a scale may have at most {MAX_LEVELS} levels")
    anchors = _anchors(d.get("anchors"), lo, hi, where, problems)
    mode = d.get("rationale", "required" if metric else "none")
    if not isinstance(mode, bool) and mode not in RATIONALE_CHOICES:
        problems.append(f"{where}: 'rationale' must be one of {', '.join(RATIONALE_CHOICES)}")
    asked, required = _rationale_flags(mode)
    if not metric and asked:
        problems.append(f'{where}: this question takes no rationale; use "rationale": "none"')
    words = d.get("min_rationale_words")
    if words is not None and (not _is_int(words) or not 0 <= words <= 1000):
        problems.append(f"{where}: 'min_rationale_words' must be a whole number from 0 to 1000")
    if len(problems) > before:
        return None
    return Scale(
        key=d["key"],
        label=label,
        question=question,
        minimum=lo,
        maximum=hi,
        anchors=anchors,
        rationale=asked,
        rationale_required=required,
        min_rationale_words=words,
    )


def _metrics(raw: Any, problems: list[str]) -> list[Scale]:
    if not isinstance(raw, list) or not raw:
        problems.append("'metrics' must be a non-empty list of metric objects")
        return []
    metrics: list[Scale] = []
    seen: set[str] = set()
    for i, d in enumerate(raw, start=1):
        key = d.get("key") if isinstance(d, dict) else None
        where = f"metric {key!r} (metrics[{i}])" if isinstance(key, str) else f"metrics[{i}]"
        if not isinstance(key, str) or not METRIC_KEY.match(key):
            problems.append(
                f"{where}: 'key' must be lower-case letters, digits or _ (starting with a "
                "letter, at most 40)"
            )
            continue
        if key in RESERVED_KEYS or key.endswith("_rationale") or key.endswith("_score"):
            problems.append(f"{where}: the key {key!r} is reserved for another answer or column")
            continue
        if key in seen:
            problems.append(f"{where}: the key {key!r} appears twice")
            continue
        seen.add(key)
        scale = _scale(d, where, problems, metric=True)
        if scale is not None:
            metrics.append(scale)
    return metrics


def _question(data: dict[str, Any], name: str, problems: list[str]) -> Scale | None:
    raw = data.get(name)
    if raw is None:
        return STANDARD_QUESTIONS[name]
    if isinstance(raw, dict):
        raw = {**raw, "key": name}
    return _scale(raw, f"question {name!r}", problems, metric=False)


def form_validate(data: Any, *, source: str = "form") -> FormDefinition:
    """A form file's object as a FormDefinition, or FormFileError naming every problem."""
    if not isinstance(data, dict):
        raise FormFileError(["the file must hold one JSON object"], source)
    problems: list[str] = []
    unknown = sorted(set(data) - FORM_FIELDS)
    if unknown:
        problems.append(f"unknown top-level field(s) {', '.join(unknown)}")
    key = data.get("key")
    if not isinstance(key, str) or not FORM_KEY.match(key):
        problems.append("'key' must be lower-case letters, digits, - or _ (at most 64)")
    version = data.get("version")
    if not _is_int(version) or version < 1:
        problems.append("'version' must be a whole number of at least 1")
    title = _text(data, "title", "form", problems, needed=True)
    description = _text(data, "description", "form", problems, needed=False)
    honor_code = _text(data, "honor_code", "form", problems, needed=False)
    words = data.get("min_rationale_words", DEFAULT_MIN_RATIONALE_WORDS)
    if not _is_int(words) or not 0 <= words <= 1000:
        problems.append("'min_rationale_words' must be a whole number from 0 to 1000")
    extra = data.get("extra", {})
    if not isinstance(extra, dict):
        problems.append("'extra' must be an object")
    metrics = _metrics(data.get("metrics"), problems)
    pairs = _pair_metrics(data.get("pair_metrics", []), [m.key for m in metrics], problems)
    familiarity = _question(data, "familiarity", problems)
    confidence = _question(data, "confidence", problems)
    checks = _attention_checks(data.get("attention_checks", []), metrics, problems)
    if problems:
        raise FormFileError(problems, source)
    assert familiarity is not None and confidence is not None
    return FormDefinition(
        key=str(key),
        version=int(version),  # type: ignore[arg-type]
        title=title,
        metrics=tuple(metrics),
        familiarity=familiarity,
        confidence=confidence,
        min_rationale_words=int(words),
        honor_code=honor_code,
        extra=dict(extra),
        description=description,
        pair_metrics=pairs,
        attention_checks=checks,
    )


def _attention_checks(
    raw: Any, metrics: list[Scale], problems: list[str]
) -> tuple[AttentionCheck, ...]:
    """The form file's `attention_checks`: scales without a rationale, each with the
    answer the question instructs (`expected`) and the metric it follows (`after`)."""
    if not isinstance(raw, list):
        problems.append("'attention_checks' must be a list of objects")
        return ()
    taken = {m.key for m in metrics} | set(STANDARD_QUESTIONS)
    out: list[AttentionCheck] = []
    for i, d in enumerate(raw, start=1):
        key = d.get("key") if isinstance(d, dict) else None
        where = (
            f"attention check {key!r} (attention_checks[{i}])"
            if isinstance(key, str)
            else f"attention_checks[{i}]"
        )
        if not isinstance(d, dict) or not isinstance(key, str) or not METRIC_KEY.match(key):
            problems.append(f"{where}: 'key' must be lower-case letters, digits or _")
            continue
        if key in RESERVED_KEYS or key in taken or key.endswith(("_rationale", "_score")):
            problems.append(f"{where}: the key {key!r} is taken by a metric, question or column")
            continue
        taken.add(key)
        before = len(problems)
        rest = {k: v for k, v in d.items() if k not in ("expected", "after")}
        if "rationale" in rest:
            problems.append(f"{where}: an attention check takes no rationale")
        scale = _scale({**rest, "rationale": "none"}, where, problems, metric=False)
        expected, after = d.get("expected"), d.get("after", "")
        if scale is not None and (not _is_int(expected) or not scale.contains(expected)):
            problems.append(
                f"{where}: 'expected' must be the instructed answer, a whole number within "
                f"{scale.range_text()}"
            )
        if not isinstance(after, str) or (after and after not in {m.key for m in metrics}):
            problems.append(f"{where}: 'after' must name a metric of this form (or be left out)")
        if scale is not None and _is_int(expected) and len(problems) == before:
            out.append(AttentionCheck(scale=scale, expected=expected, after=after))
    return tuple(out)


def _pair_metrics(raw: Any, keys: list[str], problems: list[str]) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(k, str) for k in raw):
        problems.append("'pair_metrics' must be a list of metric keys")
        return ()
    if len(set(raw)) != len(raw):
        problems.append("'pair_metrics' names a metric twice")
    unknown = [k for k in raw if k not in keys]
    if unknown and keys:
        problems.append(f"'pair_metrics': {', '.join(unknown)} is not a metric of this form")
    return tuple(raw) if not unknown else ()


def form_parse_json(text: str | bytes, *, source: str = "form") -> FormDefinition:
    """A form file's text (JSON) as a FormDefinition, or FormFileError."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise FormFileError([f"not UTF-8 text (byte {exc.start})"], source) from exc
    try:
        data = jsonsafe.loads(text)
    except json.JSONDecodeError as exc:
        raise FormFileError(
            [f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"], source
        ) from exc
    return form_validate(data, source=source)


# --- built-in forms ----------------------------------------------------------------
# The first si2024 version: the protocol's structure, one anchor per level in our words.
# Studies created with it keep it; new studies get version 2 below.


def _dense_scale(key: str, label: str, question: str, anchors: list[str], lo: int = 1) -> Scale:
    return Scale(
        key=key,
        label=label,
        question=question,
        minimum=lo,
        maximum=lo + len(anchors) - 1,
        anchors={lo + i: text for i, text in enumerate(anchors)},
    )


V1_NOVELTY = _dense_scale(
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

V1_FEASIBILITY = _dense_scale(
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

V1_EFFECTIVENESS = _dense_scale(
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

V1_EXCITEMENT = _dense_scale(
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

V1_OVERALL = _dense_scale(
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
    rationale_required=False,
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
    rationale_required=False,
)

SI2024_V1_FORM = FormDefinition(
    key="si2024",
    version=1,
    title="Research idea review (Si et al. 2024 structure)",
    metrics=(V1_NOVELTY, V1_EXCITEMENT, V1_FEASIBILITY, V1_EFFECTIVENESS, V1_OVERALL),
    familiarity=FAMILIARITY,
    confidence=CONFIDENCE,
    min_rationale_words=25,
    honor_code=(
        "I will write this review myself, without ChatGPT, Claude, Gemini or any other AI tool."
    ),
)


# The second si2024 version: the protocol's review form in its own order (novelty,
# feasibility, expected effectiveness, excitement, overall), anchored at the levels the
# protocol anchors, each anchor keeping every fact of the protocol's description of that
# level, worded our own way.

SI2024_NOVELTY = Scale(
    key="novelty",
    label="Novelty",
    question="Is the idea creative and different from existing work on the topic, and does it "
    "bring new insight?",
    minimum=1,
    maximum=10,
    anchors={
        1: "Not novel at all: plenty of existing ideas are the same as this one.",
        5: "Somewhat novel: it differs from existing ideas, but not enough to make a new paper "
        "out of it.",
        6: "Reasonably novel: it differs from existing ideas in notable ways, probably enough to "
        "make a new paper out of it.",
        10: "Very novel: it differs from all existing ideas, in a very interesting and clever way.",
    },
)

SI2024_FEASIBILITY = Scale(
    key="feasibility",
    label="Feasibility",
    question="How feasible is it to carry out this idea as a research project? Picture a "
    "typical CS PhD student with 1–2 months of time, abundant OpenAI/Anthropic API access "
    "but limited GPU compute.",
    minimum=1,
    maximum=10,
    anchors={
        1: "Impossible: the project cannot be executed.",
        10: "Easy: the whole proposed project can be executed quickly, within a few days, "
        "without advanced technical skills.",
    },
)

SI2024_EFFECTIVENESS = Scale(
    key="effectiveness",
    label="Expected effectiveness",
    question="How likely is the proposed idea to work well, for example to do better than "
    "existing baselines?",
    minimum=1,
    maximum=10,
    anchors={
        1: "Extremely unlikely: the idea has major flaws and definitely will not work well.",
        10: "Definitely effective: you are very confident that the idea will outperform "
        "existing methods by significant margins on many benchmarks.",
    },
)

SI2024_EXCITEMENT = Scale(
    key="excitement",
    label="Excitement",
    question="If it were executed as a full project, how exciting and impactful would this idea "
    "be? Would it change the field and be very influential?",
    minimum=1,
    maximum=10,
    anchors={
        1: "Poor: you cannot identify a contribution of this idea, or it is not interesting at "
        "all, and you would fight to have it rejected at any major AI conference.",
        6: "Leaning positive: exciting enough to be accepted at a major AI conference, but it "
        "still has some weaknesses or is somewhat incremental.",
        10: "Transformative: it would change the research field profoundly and deserve a best "
        "paper award at major AI conferences.",
    },
)

SI2024_OVERALL = Scale(
    key="overall",
    label="Overall",
    question="Your overall judgement of the idea, measured against the acceptance threshold of "
    "major AI conferences.",
    minimum=1,
    maximum=10,
    anchors={
        5: "Decent idea, but it has some weaknesses or is not exciting enough: marginally below "
        "the acceptance threshold of major AI conferences.",
        6: "Marginally above the acceptance threshold of major AI conferences.",
        7: "Good idea: it would be accepted by major AI conferences.",
        8: "Among the top 50% of all published ideas on this topic at major AI conferences: "
        "a clear accept.",
        9: "Among the top 15% of all published ideas on this topic at major AI conferences: "
        "a strong accept.",
        10: "Among the top 5% of all published ideas on this topic at major AI conferences: "
        "it will be a seminal paper.",
    },
)

SI2024_FORM = FormDefinition(
    key="si2024",
    version=2,
    title="Research idea review (Si et al. 2024 review form)",
    description="Score each aspect on its scale and justify each score in two or three "
    "sentences (at least 25 words). Levels without a description lie between their "
    "described neighbours.",
    metrics=(
        SI2024_NOVELTY,
        SI2024_FEASIBILITY,
        SI2024_EFFECTIVENESS,
        SI2024_EXCITEMENT,
        SI2024_OVERALL,
    ),
    familiarity=FAMILIARITY,
    confidence=CONFIDENCE,
    min_rationale_words=25,
    honor_code="I confirm that I will write my reviews myself, without ChatGPT, Claude, Gemini "
    "or any other AI tool.",
)


def _execution_metric(key: str, label: str, question: str, anchors: dict[int, str]) -> Scale:
    return Scale(key=key, label=label, question=question, minimum=1, maximum=10, anchors=anchors)


# An execution study reviews a project carried out from an idea (code, results, write-up):
# the idea's metrics on the executed project, plus soundness, faithfulness to the idea and
# the quality of the code (1-5, no rationale).
EXECUTION_FORM = FormDefinition(
    key="execution",
    version=1,
    title="Executed project review",
    description="You are reviewing a project carried out from a research idea: its write-up, "
    "results and code. Justify each 1–10 score in a few sentences.",
    metrics=(
        _execution_metric(
            "novelty",
            "Novelty",
            "How new are the idea and its findings compared with existing work on the topic?",
            {
                1: "Not novel: the same idea and findings already exist.",
                5: "Somewhat novel: differences from existing work, not enough for a paper alone.",
                6: "Reasonably novel: notable differences, probably enough for a new paper.",
                10: "Very novel: unlike existing work in an interesting and clever way.",
            },
        ),
        _execution_metric(
            "excitement",
            "Excitement",
            "How exciting and influential are the project's results for the field?",
            {
                1: "Poor: no identifiable contribution; you would argue for rejection anywhere.",
                6: "Leaning positive: could be accepted at a major AI conference, with weaknesses.",
                10: "Transformative: would change the field; worth a best paper award.",
            },
        ),
        _execution_metric(
            "soundness",
            "Soundness",
            "Are the experiments well designed, the baselines fair and the conclusions "
            "supported by the evidence?",
            {
                1: "Unsound: the conclusions do not follow from the experiments.",
                5: "Partly sound: the main claim has some support, with serious gaps.",
                8: "Sound: claims are supported; only minor issues remain.",
                10: "Exemplary: rigorous design, fair baselines, every claim supported.",
            },
        ),
        _execution_metric(
            "effectiveness",
            "Effectiveness",
            "How well did the method work compared with the baselines it was run against?",
            {
                1: "Clearly worse than the baselines.",
                5: "About as good as the baselines.",
                10: "Better than strong baselines by wide margins on several benchmarks.",
            },
        ),
        _execution_metric(
            "overall",
            "Overall",
            "Your overall judgement of the executed project, against the acceptance threshold "
            "of major AI conferences.",
            {
                5: "Marginally below the acceptance threshold of major AI conferences.",
                6: "Marginally above the acceptance threshold of major AI conferences.",
                8: "A clear accept at a major AI conference.",
                10: "Among the best papers of a major AI conference.",
            },
        ),
        _execution_metric(
            "faithfulness",
            "Faithfulness to the idea",
            "How faithfully does the executed project follow the idea it was given?",
            {
                1: "Unrelated: the project does something else.",
                5: "Partly faithful: the core idea is there, major parts were changed or dropped.",
                10: "Fully faithful: every essential step of the idea was carried out as proposed.",
            },
        ),
        Scale(
            key="code_quality",
            label="Code quality",
            question="How clear, correct and reusable is the project's code?",
            minimum=1,
            maximum=5,
            anchors={
                1: "Does not run, or cannot be followed.",
                3: "Runs with effort; readable in parts.",
                5: "Runs as documented; clear and easy to reuse.",
            },
            rationale=False,
            rationale_required=False,
        ),
    ),
    familiarity=FAMILIARITY,
    confidence=CONFIDENCE,
    min_rationale_words=25,
    honor_code="I confirm that I will write my reviews myself, without ChatGPT, Claude, Gemini "
    "or any other AI tool.",
)

STANDARD_QUESTIONS = {"familiarity": FAMILIARITY, "confidence": CONFIDENCE}
BUILTIN_FORMS: tuple[FormDefinition, ...] = (SI2024_FORM, SI2024_V1_FORM, EXECUTION_FORM)
DEFAULT_FORM = SI2024_FORM


def builtin_form_names() -> list[str]:
    """Every name `builtin_form` accepts: `KEY` (the newest version) and `KEY@VERSION`."""
    keys = sorted({f.key for f in BUILTIN_FORMS})
    return keys + sorted(f"{f.key}@{f.version}" for f in BUILTIN_FORMS)


def builtin_form(name: str) -> FormDefinition:
    """The built-in form `KEY` (its newest version) or `KEY@VERSION`; KeyError otherwise."""
    key, _, version = name.strip().partition("@")
    found = [f for f in BUILTIN_FORMS if f.key == key]
    if version:
        found = [f for f in found if str(f.version) == version.strip()]
    if not found:
        raise KeyError(
            f"no built-in review form {name!r}; built-ins: {', '.join(builtin_form_names())}"
        )
    return max(found, key=lambda f: f.version)
