"""The analysis plan as data: what a study tests, how, and how p-values are corrected.

A plan is a small JSON document (docs/analysis-plan.md) that a paper can pre-register:
the metrics (primary and secondary), which tests enter the confirmatory families, the
direction of each hypothesis (two-sided, or e.g. ``"AI < Human"``), the multiple-testing
method and its families, alpha, the consistency and agreement settings and the seed.

:func:`parse_plan` turns JSON text or a dict into a :class:`AnalysisPlan` with errors that
name the field; :meth:`AnalysisPlan.check` checks it against a study's metrics and
conditions; :func:`apply_plan` adds each comparison's planned p-value and its adjusted
value to the report's test results and returns the families.  The default plan (an empty
document) is today's analysis: two-sided tests and Bonferroni over the metrics within each
test and each comparison with the baseline, so ``p_adjusted`` equals
``p_two_sided_bonferroni``.

Pure module: no Django imports.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from ..protocol import jsonsafe
from .options import chance_rankings_problem
from .quality_rules import FLAG_KINDS, UNITS, ExclusionRule, QualityRules

__all__ = [
    "CORRECTIONS",
    "HYPOTHESIS_TESTS",
    "PLAN_SCHEMA",
    "TESTS",
    "AnalysisPlan",
    "ComparisonLevel",
    "Family",
    "Hypothesis",
    "PlanError",
    "adjust",
    "apply_plan",
    "comparison_level",
    "mixed_comparisons",
    "parse_plan",
    "plan_document",
    "plan_hash",
    "sided_p",
]

PLAN_SCHEMA = "ideareview.plan/1"
#: Multiple-testing methods: name -> label.
CORRECTIONS = {
    "none": "no correction",
    "bonferroni": "Bonferroni",
    "holm": "Holm",
    "bh": "Benjamini–Hochberg",
    "by": "Benjamini–Yekutieli",
}
#: Tests that can enter a family: the three t-tests and the mixed model's Wald z.
TESTS = ("by_review", "by_idea", "by_reviewer", "mixed")
#: The names a hypothesis's ``test`` may take: the tests above and the comparison of two
#: linked phases (``phases``; it corrects over its own metrics, not in the families above).
HYPOTHESIS_TESTS = (*TESTS, "phases")
ALTERNATIVES = ("two-sided", "less", "greater")
_DIRECTION = re.compile(r"^\s*([^<>\s][^<>]*?)\s*([<>])\s*([^<>\s][^<>]*?)\s*$")


class PlanError(ValueError):
    """A plan that cannot be used; each problem names its field. `partial` is the plan
    made of the fields that did parse (so a caller can check those against the study too
    and report everything at once)."""

    def __init__(self, *problems: str, partial: AnalysisPlan | None = None):
        super().__init__("; ".join(problems))
        self.problems = list(problems)
        self.partial = partial


@dataclass(frozen=True)
class Hypothesis:
    """The direction of one or more comparisons (``"*"`` matches any)."""

    direction: str = ""  # "AI < Human" (as written), or empty for two-sided
    metric: str = "*"
    test: str = "*"

    def sides(self) -> tuple[str, str, str] | None:
        """(left, sign, right) of the direction, or None when two-sided."""
        if not self.direction:
            return None
        m = _DIRECTION.match(self.direction)
        assert m is not None  # parse_plan checked it
        return m.group(1), m.group(2), m.group(3)

    def alternative_for(self, condition: str, baseline: str) -> str | None:
        """The alternative for ``condition`` vs ``baseline`` (None: not about them)."""
        sides = self.sides()
        if sides is None:
            return "two-sided"
        left, sign, right = sides
        if (left, right) == (condition, baseline):
            return "less" if sign == "<" else "greater"
        if (left, right) == (baseline, condition):
            return "greater" if sign == "<" else "less"
        return None


@dataclass(frozen=True)
class Family:
    """Comparisons corrected together: tests x metrics x conditions (empty = all)."""

    name: str
    tests: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()


@dataclass(frozen=True)
class PrimaryTest:
    """The one comparison a study is sized for (and a pre-registration leads with):
    ``condition`` against the baseline on ``metric`` with ``test``, in the direction the
    plan's hypotheses give it. ``effect`` is the smallest difference worth detecting, in
    the metric's points (None: the pilot's estimate), and ``power`` the power wanted."""

    metric: str
    test: str
    condition: str
    effect: float | None = None
    power: float = 0.8


@dataclass(frozen=True)
class AnalysisPlan:
    primary_metrics: tuple[str, ...] = ()
    secondary_metrics: tuple[str, ...] = ()
    tests: tuple[str, ...] = ("by_review", "by_idea", "by_reviewer")
    covariates: tuple[str, ...] = ()
    topic: str = "random"  # the mixed model's topic term: "random" intercept or "fixed" effect
    hypotheses: tuple[Hypothesis, ...] = ()
    method: str = "bonferroni"
    # "per_comparison": one family per test and per condition, over the plan's metrics
    # (the published analysis); "per_test": one per test over metrics x conditions;
    # "all": one family; "custom": the families listed.
    family_scope: str = "per_comparison"
    families: tuple[Family, ...] = ()
    alpha: float = 0.05
    # Resampling settings and the seed: None leaves the report's configured value.
    consistency_metric: str = ""
    consistency_splits: int | None = None
    consistency_bootstrap: int | None = None
    consistency_permutations: int | None = None
    agreement_splits: int | None = None
    agreement_bootstrap: int | None = None
    agreement_permutations: int | None = None
    chance_rankings: int | None = None
    seed: int | None = None
    primary: PrimaryTest | None = None
    # The comparison with the earlier phase (a study linked to one): the metrics compared
    # (empty: every metric both forms share), the direction of the change tests ("AI <
    # Human": AI's change below Human's; empty: the hypotheses decide) and the idea ids
    # left out of the comparison.
    phase_metrics: tuple[str, ...] = ()
    phase_direction: str = ""
    phase_leave_out: tuple[str, ...] = ()
    # The quality flags' thresholds and the pre-registered exclusion rules.
    quality: QualityRules = QualityRules()

    def option_overrides(self) -> dict[str, Any]:
        """The report options this plan sets (names as in ``ReportOptions``)."""
        keys = (
            "consistency_splits", "consistency_bootstrap", "consistency_permutations",
            "agreement_splits", "agreement_bootstrap", "agreement_permutations",
            "chance_rankings", "seed",
        )  # fmt: skip
        out: dict[str, Any] = {k: getattr(self, k) for k in keys if getattr(self, k) is not None}
        if self.consistency_metric:
            out["consistency_metric"] = self.consistency_metric
        return out

    def metrics(self, available: Sequence[str]) -> list[str]:
        """The plan's metrics in order; every available metric when the plan names none."""
        named = [*self.primary_metrics, *self.secondary_metrics]
        return named or list(available)

    def is_default(self) -> bool:
        return self == AnalysisPlan()

    def check(self, *, metrics: Sequence[str], conditions: Sequence[str], baseline: str) -> None:
        """Raise :class:`PlanError` when the plan names metrics or conditions the study
        does not have, or a direction that is not about a condition and the baseline."""
        known_m, known_c = set(metrics), set(conditions)
        problems: list[str] = []
        for key in ("primary_metrics", "secondary_metrics"):
            for m in getattr(self, key):
                if m not in known_m:
                    problems.append(
                        f"{key}: {m!r} is not a metric of the study's form "
                        f"(metrics: {', '.join(metrics)})"
                    )
        if self.consistency_metric and self.consistency_metric not in known_m:
            problems.append(f"consistency.metric: {self.consistency_metric!r} is not a metric")
        for i, h in enumerate(self.hypotheses):
            where = f"hypotheses[{i}]"
            if h.metric != "*" and h.metric not in known_m:
                problems.append(f"{where}.metric: {h.metric!r} is not a metric")
            problems += _direction_problems(h, f"{where}.direction", conditions, baseline)
        for m in self.phase_metrics:
            if m not in known_m:
                problems.append(f"phases.metrics: {m!r} is not a metric of the study's form")
        problems += _direction_problems(
            Hypothesis(direction=self.phase_direction), "phases.direction", conditions, baseline
        )
        if self.primary is not None:
            if self.primary.metric not in known_m:
                problems.append(
                    f"primary.metric: {self.primary.metric!r} is not a metric of the study's "
                    f"form (metrics: {', '.join(metrics)})"
                )
            if self.primary.condition not in known_c or self.primary.condition == baseline:
                others = [c for c in conditions if c != baseline]
                problems.append(
                    f"primary.condition: {self.primary.condition!r} is not a condition compared "
                    f"with the baseline {baseline!r} (conditions: {', '.join(others)})"
                )
        for fam in self.families:
            for m in fam.metrics:
                if m not in known_m:
                    problems.append(f"families[{fam.name}].metrics: {m!r} is not a metric")
            for c in fam.conditions:
                if c not in known_c or c == baseline:
                    problems.append(
                        f"families[{fam.name}].conditions: {c!r} is not a non-baseline condition"
                    )
        if problems:
            raise PlanError(*problems)

    def alternative(self, *, test: str, metric: str, condition: str, baseline: str) -> str:
        """The planned alternative of one comparison (the last matching hypothesis wins;
        for the phase comparison, ``phases.direction`` wins over every hypothesis)."""
        out = "two-sided"
        for h in self.hypotheses:
            if h.metric not in ("*", metric) or h.test not in ("*", test):
                continue
            alt = h.alternative_for(condition, baseline)
            if alt is not None:
                out = alt
        if test == "phases" and self.phase_direction:
            alt = Hypothesis(direction=self.phase_direction).alternative_for(condition, baseline)
            if alt is not None:
                out = alt
        return out


def _direction_problems(
    h: Hypothesis, where: str, conditions: Sequence[str], baseline: str
) -> list[str]:
    """What is wrong with a direction for a study with these conditions and baseline."""
    sides = h.sides()
    if sides is None:
        return []
    problems = []
    left, _, right = sides
    for side in (left, right):
        if side not in set(conditions):
            problems.append(
                f"{where}: {side!r} is not a condition (conditions: {', '.join(conditions)})"
            )
    if baseline not in (left, right) or left == right:
        problems.append(
            f"{where}: {h.direction!r} must compare a condition with the baseline {baseline!r}"
        )
    return problems


# ------------------------------------------------------------------ parsing

_TOP_KEYS = {
    "schema", "primary_metrics", "secondary_metrics", "tests", "mixed_model", "hypotheses",
    "multiple_testing", "alpha", "consistency", "agreement", "seed", "primary", "phases",
    "quality",
}  # fmt: skip


def parse_plan(source: str | bytes | Mapping[str, Any] | None) -> AnalysisPlan:
    """A plan from JSON text or a dict (``None`` or ``{}``: the default plan).

    Unknown keys are errors (a misspelt key would otherwise silently leave the default
    in force); every message names the field.
    """
    if source is None:
        return AnalysisPlan()
    if isinstance(source, str | bytes):
        try:
            data = jsonsafe.loads(source) if source.strip() else {}
        except json.JSONDecodeError as exc:
            raise PlanError(f"the plan is not valid JSON: {exc}") from None
    else:
        data = dict(source)
    if not isinstance(data, dict):
        raise PlanError("the plan must be a JSON object")
    problems: list[str] = []
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        problems.append(f"unknown plan field(s): {', '.join(unknown)}")
    if data.get("schema", PLAN_SCHEMA) != PLAN_SCHEMA:
        problems.append(f"schema: expected {PLAN_SCHEMA!r}, got {data['schema']!r}")
    kwargs: dict[str, Any] = {}

    def field(step: Any) -> None:
        # Each field is read on its own, so one message names every field that is wrong.
        try:
            step()
        except PlanError as exc:
            problems.extend(exc.problems)

    for key in ("primary_metrics", "secondary_metrics"):
        if key in data:
            field(lambda key=key: kwargs.__setitem__(key, _names(data[key], key)))
    both = set(kwargs.get("primary_metrics", ())) & set(kwargs.get("secondary_metrics", ()))
    if both:
        problems.append(f"metric(s) both primary and secondary: {', '.join(sorted(both))}")
        kwargs.pop("secondary_metrics")
    if "tests" in data:
        field(lambda: kwargs.__setitem__("tests", _choices(data["tests"], "tests", TESTS)))
    if "mixed_model" in data:
        field(
            lambda: kwargs.update(
                zip(("covariates", "topic"), _mixed_model(data["mixed_model"]), strict=True)
            )
        )
    if "hypotheses" in data:
        field(lambda: kwargs.__setitem__("hypotheses", _hypotheses(data["hypotheses"])))
    if "multiple_testing" in data:
        field(lambda: kwargs.update(_multiple_testing(data["multiple_testing"])))
    if "alpha" in data:
        field(lambda: kwargs.__setitem__("alpha", _alpha(data["alpha"])))
    field(lambda: kwargs.update(_resampling(data.get("consistency"), "consistency", metric=True)))
    field(lambda: kwargs.update(_resampling(data.get("agreement"), "agreement", metric=False)))
    if "seed" in data:
        field(lambda: kwargs.__setitem__("seed", _int(data["seed"], "seed", low=0)))
    if "primary" in data:
        field(lambda: kwargs.__setitem__("primary", _primary(data["primary"])))
    if "phases" in data:
        field(lambda: kwargs.update(_phases(data["phases"])))
    if "quality" in data:
        field(lambda: kwargs.__setitem__("quality", _quality(data["quality"])))
    if problems:
        raise PlanError(*problems, partial=AnalysisPlan(**kwargs))
    return AnalysisPlan(**kwargs)


def _primary(value: Any) -> PrimaryTest:
    data = _object(value, "primary", {"metric", "test", "condition", "effect", "power"})
    problems: list[str] = []
    for key in ("metric", "condition"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            problems.append(f"primary.{key}: required, a name (got {data.get(key)!r})")
    test = data.get("test", "by_idea")
    if test not in TESTS:
        problems.append(f"primary.test: {test!r} is not one of {', '.join(TESTS)}")
    effect = data.get("effect")
    if effect is not None and (
        isinstance(effect, bool) or not isinstance(effect, int | float) or not effect > 0
    ):
        problems.append(
            f"primary.effect: the smallest difference worth detecting, a positive number of "
            f"points (got {effect!r})"
        )
    power = data.get("power", 0.8)
    if isinstance(power, bool) or not isinstance(power, int | float) or not 0 < power < 1:
        problems.append(f"primary.power: must be a number between 0 and 1, got {power!r}")
    if problems:
        raise PlanError(*problems)
    return PrimaryTest(
        metric=data["metric"].strip(),
        test=test,
        condition=data["condition"].strip(),
        effect=None if effect is None else float(effect),
        power=float(power),
    )


def _quality(value: Any) -> QualityRules:
    """The ``quality`` object: the flags' thresholds and the exclusion rules."""
    data = _object(
        value,
        "quality",
        {
            "min_minutes",
            "straight_line_items",
            "duplicate_cosine",
            "duplicate_min_words",
            "exclude",
        },
    )
    problems: list[str] = []
    default = QualityRules()
    minutes = data.get("min_minutes", default.min_minutes)
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not minutes >= 0:
        problems.append(f"quality.min_minutes: minutes, a number of at least 0 (got {minutes!r})")
    cos = data.get("duplicate_cosine", default.duplicate_cosine)
    if isinstance(cos, bool) or not isinstance(cos, int | float) or not 0 < cos <= 1:
        problems.append(f"quality.duplicate_cosine: a number above 0 and at most 1 (got {cos!r})")
    ints = {}
    for key in ("straight_line_items", "duplicate_min_words"):
        try:
            ints[key] = _int(data.get(key, getattr(default, key)), f"quality.{key}", low=1)
        except PlanError as exc:
            problems.extend(exc.problems)
    rules = []
    raw = data.get("exclude", [])
    if not isinstance(raw, list):
        problems.append("quality.exclude: a list of flag names or {flag, unit} objects")
        raw = []
    for i, item in enumerate(raw):
        where = f"quality.exclude[{i}]"
        rule = item if isinstance(item, dict) else {"flag": item}
        unknown = sorted(set(rule) - {"flag", "unit"})
        flag = rule.get("flag")
        unit = rule.get("unit", "reviewer" if flag == "gold" else "review")
        if unknown:
            problems.append(f"{where}: unknown field(s) {', '.join(unknown)}")
        elif flag not in FLAG_KINDS:
            problems.append(f"{where}: {flag!r} is not a flag ({', '.join(FLAG_KINDS)})")
        elif unit not in UNITS:
            problems.append(f"{where}.unit: 'review' or 'reviewer', got {unit!r}")
        elif flag == "gold" and unit != "reviewer":
            problems.append(
                f"{where}: a gold review is never analysed; a gold miss can only remove the "
                "reviewer's reviews (unit 'reviewer')"
            )
        elif ExclusionRule(flag, unit) in rules:
            problems.append(f"{where}: the rule {flag!r} ({unit}) is listed twice")
        else:
            rules.append(ExclusionRule(flag, unit))
    if problems:
        raise PlanError(*problems)
    return QualityRules(
        min_minutes=float(minutes),
        straight_line_items=ints["straight_line_items"],
        duplicate_cosine=float(cos),
        duplicate_min_words=ints["duplicate_min_words"],
        exclude=tuple(rules),
    )


def _alpha(alpha: Any) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise PlanError(f"alpha: must be a number between 0 and 1, got {alpha!r}")
    return float(alpha)


def _names(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PlanError(f"{where}: must be a list of names")
    if len(set(value)) != len(value):
        raise PlanError(f"{where}: a name is listed twice")
    return tuple(value)


def _choices(value: Any, where: str, allowed: Sequence[str]) -> tuple[str, ...]:
    names = _names(value, where)
    for v in names:
        if v not in allowed:
            raise PlanError(f"{where}: {v!r} is not one of {', '.join(allowed)}")
    return names


def _int(value: Any, where: str, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise PlanError(f"{where}: must be a whole number >= {low}, got {value!r}")
    return int(value)


def _object(value: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PlanError(f"{where}: must be an object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise PlanError(f"{where}: unknown field(s) {', '.join(unknown)}")
    return value


def _mixed_model(value: Any) -> tuple[tuple[str, ...], str]:
    obj = _object(value, "mixed_model", {"covariates", "topic"})
    topic = obj.get("topic", "random")
    if topic not in ("random", "fixed"):
        raise PlanError(
            f"mixed_model.topic: 'random' (a random intercept) or 'fixed' (one fixed effect "
            f"per topic), got {topic!r}"
        )
    covariates = _names(obj.get("covariates", []), "mixed_model.covariates")
    if any(c.startswith("topic[") for c in covariates):
        raise PlanError("mixed_model.covariates: names starting 'topic[' are reserved")
    return covariates, topic


def _hypotheses(value: Any) -> tuple[Hypothesis, ...]:
    if not isinstance(value, list):
        raise PlanError("hypotheses: must be a list of objects")
    out = []
    for i, item in enumerate(value):
        where = f"hypotheses[{i}]"
        obj = _object(item, where, {"direction", "metric", "test"})
        direction = obj.get("direction", "two-sided")
        if not isinstance(direction, str):
            raise PlanError(f"{where}.direction: must be text such as 'AI < Human'")
        if direction == "two-sided":
            direction = ""
        elif not _DIRECTION.match(direction):
            raise PlanError(
                f"{where}.direction: {direction!r} is neither 'two-sided' nor of the form "
                "'Condition < Baseline' or 'Condition > Baseline'"
            )
        test = obj.get("test", "*")
        if test != "*" and test not in HYPOTHESIS_TESTS:
            raise PlanError(
                f"{where}.test: {test!r} is not one of *, {', '.join(HYPOTHESIS_TESTS)}"
            )
        metric = obj.get("metric", "*")
        if not isinstance(metric, str) or not metric:
            raise PlanError(f"{where}.metric: must be a metric name or '*'")
        out.append(Hypothesis(direction=direction, metric=metric, test=test))
    return tuple(out)


def _direction(value: Any, where: str) -> str:
    """A direction as written ('AI < Human'), or '' for 'two-sided'."""
    if not isinstance(value, str):
        raise PlanError(f"{where}: must be text such as 'AI < Human'")
    if value == "two-sided":
        return ""
    if not _DIRECTION.match(value):
        raise PlanError(
            f"{where}: {value!r} is neither 'two-sided' nor of the form "
            "'Condition < Baseline' or 'Condition > Baseline'"
        )
    return value


def _phases(value: Any) -> dict[str, Any]:
    """The ``phases`` object: metrics, direction and the ideas left out of the comparison."""
    obj = _object(value, "phases", {"metrics", "direction", "leave_out"})
    out: dict[str, Any] = {}
    if "metrics" in obj:
        out["phase_metrics"] = _names(obj["metrics"], "phases.metrics")
    if "direction" in obj:
        out["phase_direction"] = _direction(obj["direction"], "phases.direction")
    if "leave_out" in obj:
        ids = obj["leave_out"]
        if not isinstance(ids, list) or not all(isinstance(v, str) and v.strip() for v in ids):
            raise PlanError("phases.leave_out: must be a list of idea ids (text)")
        stripped = tuple(v.strip() for v in ids)
        if len(set(stripped)) != len(stripped):
            raise PlanError("phases.leave_out: an idea id is listed twice")
        out["phase_leave_out"] = stripped
    return out


def _multiple_testing(value: Any) -> dict[str, Any]:
    obj = _object(value, "multiple_testing", {"method", "families"})
    out: dict[str, Any] = {}
    method = obj.get("method", "bonferroni")
    if method not in CORRECTIONS:
        raise PlanError(
            f"multiple_testing.method: {method!r} is not one of {', '.join(CORRECTIONS)}"
        )
    out["method"] = method
    fams = obj.get("families", "per_comparison")
    if isinstance(fams, str):
        if fams not in ("per_comparison", "per_test", "all"):
            raise PlanError(
                "multiple_testing.families: a list of families or one of "
                f"per_comparison, per_test, all; got {fams!r}"
            )
        out["family_scope"] = fams
        return out
    if not isinstance(fams, list) or not fams:
        raise PlanError("multiple_testing.families: must be a non-empty list or a scope name")
    families = []
    for i, item in enumerate(fams):
        where = f"multiple_testing.families[{i}]"
        f = _object(item, where, {"name", "tests", "metrics", "conditions"})
        name = f.get("name", f"family {i + 1}")
        if not isinstance(name, str) or not name:
            raise PlanError(f"{where}.name: must be text")
        families.append(
            Family(
                name=name,
                tests=_choices(f.get("tests", []), f"{where}.tests", TESTS),
                metrics=_names(f.get("metrics", []), f"{where}.metrics"),
                conditions=_names(f.get("conditions", []), f"{where}.conditions"),
            )
        )
    if len({f.name for f in families}) != len(families):
        raise PlanError("multiple_testing.families: two families have the same name")
    out.update(family_scope="custom", families=tuple(families))
    return out


def _resampling(value: Any, where: str, *, metric: bool) -> dict[str, Any]:
    if value is None:
        return {}
    allowed = {"splits", "bootstrap", "permutations"}
    allowed |= {"metric"} if metric else {"chance_rankings"}
    obj = _object(value, where, allowed)
    out: dict[str, Any] = {}
    for key in ("splits", "bootstrap", "permutations"):
        if key in obj:
            out[f"{where}_{key}"] = _int(
                obj[key], f"{where}.{key}", low=1 if key == "splits" else 0
            )
    if metric and "metric" in obj:
        if not isinstance(obj["metric"], str):
            raise PlanError(f"{where}.metric: must be a metric name")
        out["consistency_metric"] = obj["metric"]
    if "chance_rankings" in obj:
        problem = chance_rankings_problem(obj["chance_rankings"], f"{where}.chance_rankings")
        if problem is not None:
            raise PlanError(problem)
        out["chance_rankings"] = obj["chance_rankings"]
    return out


def plan_document(plan: AnalysisPlan) -> dict[str, Any]:
    """The plan as the JSON document :func:`parse_plan` reads (round-trips).

    Parameters
    ----------
    plan
        The analysis plan.

    Returns
    -------
    dict
        The plan document, JSON-ready by design: what a study stores, the report shows
        and :func:`plan_hash` hashes (keys added since the first schema appear only when
        set, so older plans keep their hash).
    """
    doc: dict[str, Any] = {
        "schema": PLAN_SCHEMA,
        "primary_metrics": list(plan.primary_metrics),
        "secondary_metrics": list(plan.secondary_metrics),
        "tests": list(plan.tests),
        "mixed_model": {"covariates": list(plan.covariates), "topic": plan.topic},
        "hypotheses": [
            {"direction": h.direction or "two-sided", "metric": h.metric, "test": h.test}
            for h in plan.hypotheses
        ],
        "multiple_testing": {
            "method": plan.method,
            "families": plan.family_scope
            if plan.family_scope != "custom"
            else [
                {
                    "name": f.name,
                    "tests": list(f.tests),
                    "metrics": list(f.metrics),
                    "conditions": list(f.conditions),
                }
                for f in plan.families
            ],
        },
        "alpha": plan.alpha,
    }
    for section in ("consistency", "agreement"):
        values = {
            key: getattr(plan, f"{section}_{key}")
            for key in ("splits", "bootstrap", "permutations")
            if getattr(plan, f"{section}_{key}") is not None
        }
        if values:
            doc[section] = values
    if plan.chance_rankings is not None:
        # Only when set: a plan without it keeps its document and hash.
        doc.setdefault("agreement", {})["chance_rankings"] = plan.chance_rankings
    if plan.seed is not None:
        doc["seed"] = plan.seed
    if plan.consistency_metric:
        doc.setdefault("consistency", {})["metric"] = plan.consistency_metric
    if plan.primary is not None:
        # Only when set: the hash of a plan without a primary test is what it always was.
        doc["primary"] = {
            "metric": plan.primary.metric,
            "test": plan.primary.test,
            "condition": plan.primary.condition,
            "power": plan.primary.power,
        }
        if plan.primary.effect is not None:
            doc["primary"]["effect"] = plan.primary.effect
    # Only a plan that says something about the phases has the key: every other plan keeps
    # the document, and so the hash, it had before the key existed.
    if plan.phase_metrics or plan.phase_direction or plan.phase_leave_out:
        doc["phases"] = {
            "metrics": list(plan.phase_metrics),
            "direction": plan.phase_direction or "two-sided",
            "leave_out": list(plan.phase_leave_out),
        }
    if plan.quality != QualityRules():
        # Only when set, as above: older plans keep their hash.
        q = plan.quality
        doc["quality"] = {
            "min_minutes": q.min_minutes,
            "straight_line_items": q.straight_line_items,
            "duplicate_cosine": q.duplicate_cosine,
            "duplicate_min_words": q.duplicate_min_words,
            "exclude": [{"flag": r.flag, "unit": r.unit} for r in q.exclude],
        }
    return doc


def plan_hash(plan: AnalysisPlan) -> str:
    """SHA-256 of the plan's canonical JSON document: equal plans, equal hashes."""
    text = json.dumps(plan_document(plan), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------ multiplicity


def adjust(p: Sequence[float], method: str) -> np.ndarray:
    """Adjusted p-values of one family (NaN entries stay NaN and do not count)."""
    if method not in CORRECTIONS:
        raise PlanError(f"unknown multiple-testing method {method!r}")
    arr = np.asarray(p, dtype=float)
    out = np.full(arr.shape, np.nan)
    ok = np.isfinite(arr)
    q = arr[ok]
    m = len(q)
    if m == 0:
        return out
    if method == "none":
        adj = q.copy()
    elif method == "bonferroni":
        adj = np.minimum(1.0, q * m)
    elif method == "holm":
        order = np.argsort(q, kind="stable")
        steps = (m - np.arange(m)) * q[order]
        adj = np.empty(m)
        adj[order] = np.minimum(1.0, np.maximum.accumulate(steps))
    else:
        order = np.argsort(q, kind="stable")[::-1]  # largest first
        c = 1.0 if method == "bh" else float(np.sum(1.0 / np.arange(1, m + 1)))
        ranks = np.arange(m, 0, -1)
        steps = q[order] * m * c / ranks
        adj = np.empty(m)
        adj[order] = np.minimum(1.0, np.minimum.accumulate(steps))
    out[ok] = adj
    return out


def sided_p(*, t: float | None, df: float | None, alternative: str, normal: bool) -> float:
    """The p-value of a t (or, ``normal``, z) statistic for the planned alternative."""
    if t is None or not math.isfinite(t) or (not normal and (df is None or not df > 0)):
        return math.nan
    dist = stats.norm if normal else stats.t(df)
    if alternative == "less":
        return float(dist.cdf(t))
    if alternative == "greater":
        return float(dist.sf(t))
    return float(2 * dist.sf(abs(t)))


@dataclass
class _Member:
    test: str
    metric: str
    condition: str
    row: dict[str, Any]
    family: str = ""


def _members(
    tests: Mapping[str, dict[str, Any]], plan: AnalysisPlan, metrics: Sequence[str]
) -> list[_Member]:
    planned = set(plan.metrics(metrics))
    out = []
    for test in plan.tests:
        result = tests.get(test)
        if not result or not result.get("available", True):
            continue
        for row in result.get("comparisons", []):
            if row["metric"] in planned:
                out.append(_Member(test, row["metric"], row["condition"], row))
    return out


def _family_of(m: _Member, plan: AnalysisPlan) -> str:
    if plan.family_scope == "per_comparison":
        return f"{m.test}: {m.condition} vs baseline"
    if plan.family_scope == "per_test":
        return m.test
    if plan.family_scope == "all":
        return "all"
    for fam in plan.families:
        if (
            (not fam.tests or m.test in fam.tests)
            and (not fam.metrics or m.metric in fam.metrics)
            and (not fam.conditions or m.condition in fam.conditions)
        ):
            return fam.name
    return ""


def apply_plan(
    tests: Mapping[str, dict[str, Any]],
    plan: AnalysisPlan,
    *,
    metrics: Sequence[str],
    write: bool = True,
) -> dict[str, Any]:
    """Planned and adjusted p-values of every comparison the plan's families hold.

    ``tests`` maps a test name to its result (Tests 1-3 as :mod:`hypothesis` returns them;
    ``mixed`` as comparisons built by :func:`mixed_comparisons`).  With ``write`` each
    comparison row gets ``alternative``, ``p_unadjusted`` (the planned p), ``p_adjusted``,
    ``family``, ``adjustment`` and ``reject`` (``p_adjusted`` ≤ alpha); comparisons outside
    every family get ``family: ""``, ``p_adjusted: None`` and ``reject: None``
    (exploratory).

    Parameters
    ----------
    tests
        Test name → its report section; its comparison rows are updated in place when
        ``write``.
    plan
        The analysis plan.
    metrics
        The report's metrics.
    write
        Whether to write the planned columns into the comparison rows.

    Returns
    -------
    dict
        The report's multiplicity section, JSON-ready by design: method, method_label,
        alpha, family_scope and each family's members with both p-values and the
        decision.
    """
    members = _members(tests, plan, metrics)
    for m in members:
        m.family = _family_of(m, plan)
    families: dict[str, list[_Member]] = {}
    for m in members:
        if m.family:
            families.setdefault(m.family, []).append(m)
    section: dict[str, Any] = {
        "method": plan.method,
        "method_label": CORRECTIONS[plan.method],
        "alpha": plan.alpha,
        "family_scope": plan.family_scope,
        "families": [],
    }
    for name, group in families.items():
        alts = [
            plan.alternative(
                test=m.test, metric=m.metric, condition=m.condition, baseline=m.row["baseline"]
            )
            for m in group
        ]
        ps = [_planned_p(m, alt) for m, alt in zip(group, alts, strict=True)]
        adj = adjust(ps, plan.method)
        rows = []
        for m, alt, p, a in zip(group, alts, ps, adj, strict=True):
            entry = {
                "test": m.test,
                "metric": m.metric,
                "condition": m.condition,
                "alternative": alt,
                "p_unadjusted": _f(p),
                "p_adjusted": _f(a),
                "reject": bool(np.isfinite(a) and a <= plan.alpha),
            }
            rows.append(entry)
            if write:
                m.row.update(
                    alternative=alt,
                    p_unadjusted=entry["p_unadjusted"],
                    p_adjusted=entry["p_adjusted"],
                    family=name,
                    adjustment=plan.method,
                    reject=entry["reject"],
                )
        section["families"].append({"name": name, "size": len(group), "members": rows})
    if write:
        for result in tests.values():
            for row in (result or {}).get("comparisons", []):
                row.setdefault("alternative", "two-sided")
                row.setdefault("p_unadjusted", row.get("p_two_sided"))
                row.setdefault("p_adjusted", None)
                row.setdefault("family", "")
                row.setdefault("adjustment", "")
                row.setdefault("reject", None)
    return section


@dataclass(frozen=True)
class ComparisonLevel:
    """How the plan tests one comparison: its family, the correction and the raw p-value
    at or below which it is rejected whatever the other members of its family show."""

    family: str  # "" when the comparison is in no family (exploratory, not adjusted)
    family_size: int
    method: str
    alpha: float
    level: float
    alternative: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "family_size": self.family_size,
            "method": self.method,
            "method_label": CORRECTIONS[self.method],
            "alpha": self.alpha,
            "level": self.level,
            "alternative": self.alternative,
        }


def comparison_level(
    plan: AnalysisPlan,
    *,
    test: str,
    metric: str,
    condition: str,
    baseline: str,
    metrics: Sequence[str],
    conditions: Sequence[str],
) -> ComparisonLevel:
    """The level one comparison is tested at under ``plan`` (for sizing a study).

    The family is the one :func:`apply_plan` would put the comparison in, its members
    counted over the plan's tests, the plan's metrics and the non-baseline
    ``conditions``. The level is ``alpha / m`` for Bonferroni over ``m`` members, and also
    for Holm and Benjamini-Hochberg, whose first step compares the smallest p with
    ``alpha / m`` (they can reject at a larger p, depending on the other comparisons,
    so a design sized at this level is on the safe side); ``alpha / (m * (1 + 1/2 + ...
    + 1/m))`` for Benjamini-Yekutieli; ``alpha`` without correction or outside every
    family.
    """
    members = [
        _Member(t, m, c, {})
        for t in plan.tests
        for m in plan.metrics(metrics)
        for c in conditions
        if c != baseline
    ]
    own = _Member(test, metric, condition, {})
    family = _family_of(own, plan) if own in members else ""
    size = sum(1 for m in members if _family_of(m, plan) == family) if family else 1
    level = plan.alpha
    if family and plan.method in ("bonferroni", "holm", "bh"):
        level = plan.alpha / size
    elif family and plan.method == "by":
        level = plan.alpha / (size * float(np.sum(1.0 / np.arange(1, size + 1))))
    alternative = plan.alternative(test=test, metric=metric, condition=condition, baseline=baseline)
    return ComparisonLevel(family, size, plan.method, plan.alpha, level, alternative)


def _planned_p(m: _Member, alternative: str) -> float:
    """The test's own two-sided p (so the default plan reproduces it exactly), or the
    one-sided p of its t (z for the mixed model) in the planned direction."""
    if alternative == "two-sided" and m.row.get("p_two_sided") is not None:
        return float(m.row["p_two_sided"])
    return sided_p(
        t=m.row.get("t"), df=m.row.get("df"), alternative=alternative, normal=m.test == "mixed"
    )


def _f(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def mixed_comparisons(fits: Mapping[str, dict[str, Any]], *, baseline: str) -> dict[str, Any]:
    """The mixed model's condition effects as comparisons (z as t, no df) for the plan.

    Parameters
    ----------
    fits
        Metric → the mixed-model fit's dict (fits with an error left out by the caller).
    baseline
        The baseline condition.

    Returns
    -------
    dict
        ``{"available": True, "comparisons": [...]}``, the shape of a :mod:`hypothesis`
        test section, so :func:`apply_plan` corrects both alike.
    """
    rows = []
    for metric, fit in fits.items():
        for row in fit.get("fixed") or []:
            term = str(row["term"])
            if not term.startswith("condition["):
                continue
            rows.append(
                {
                    "metric": metric,
                    "condition": term[len("condition[") : -1],
                    "baseline": baseline,
                    "t": row.get("z"),
                    "df": None,
                    "p_two_sided": row.get("p"),
                    "diff": row.get("coef"),
                }
            )
    return {"available": True, "comparisons": rows}
