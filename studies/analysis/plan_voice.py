"""What the report says about its tests, in the analysis plan's words.

The report's sentences, captions and stars about Tests 1-3 follow the plan the report was
built with: its sidedness, multiple-testing method, families and alpha, with stars from
the plan's adjusted p. The paper's convention (two-sided p, Bonferroni over the metrics)
stays in the report as its own labelled columns; under a plan other than the default it
is never the report's voice. Under the default plan the two coincide and the report keeps
its published wording.

:func:`plan_voice` returns the words (a dict stored as ``report["plan"]["voice"]``) and
:func:`planned_summary` the per-test summary (a `PlannedSummary`, whose ``as_dict()`` is
stored as each test's ``planned`` block).

Pure module: no Django imports.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from .plan import CORRECTIONS, AnalysisPlan

__all__ = [
    "STAR_STEPS",
    "TEST_NAMES",
    "PlannedSummary",
    "plan_voice",
    "stars_for",
    "planned_summary",
]

TEST_NAMES = {
    "by_review": "Test 1",
    "by_idea": "Test 2",
    "by_reviewer": "Test 3",
    "mixed": "the mixed model",
}
#: Stars at alpha, alpha/5 and alpha/50: at alpha = 0.05 the usual 0.05, 0.01 and 0.001.
STAR_STEPS = (("***", 50), ("**", 5), ("*", 1))


def stars_for(p_adjusted: float | None, alpha: float) -> str:
    """The stars of one adjusted p under the plan's alpha ("" outside every family)."""
    if p_adjusted is None:
        return ""
    for mark, divisor in STAR_STEPS:
        if p_adjusted <= alpha / divisor:
            return mark
    return ""


def _num(x: float) -> str:
    return f"{x:.6g}"


def _alternative_label(alternative: str, condition: str, baseline: str) -> str:
    if alternative == "less":
        return f"one-sided ({condition} < {baseline})"
    if alternative == "greater":
        return f"one-sided ({condition} > {baseline})"
    return "two-sided"


def _sidedness(members: Sequence[Mapping[str, Any]], baseline: str) -> tuple[str, str]:
    """("one-sided" | "two-sided" | "mixed", the words) over the plan's comparisons."""
    labels = Counter(
        _alternative_label(m["alternative"], m["condition"], baseline) for m in members
    )
    if not labels:
        return "two-sided", "two-sided"
    kinds = {"two-sided" if label == "two-sided" else "one-sided" for label in labels}
    kind = kinds.pop() if len(kinds) == 1 else "mixed"
    if len(labels) == 1:
        return kind, next(iter(labels))
    words = ", ".join(
        f"{label} for {n} comparison{'s' if n != 1 else ''}" for label, n in labels.most_common()
    )
    return kind, words


def _families_words(plan: AnalysisPlan, multiplicity: Mapping[str, Any], baseline: str) -> str:
    families = multiplicity.get("families") or []
    n = len(families)
    count = f"{n} famil{'y' if n == 1 else 'ies'}"
    if plan.family_scope == "per_comparison":
        return (
            f"within each test and each comparison with {baseline}, over the plan's metrics "
            f"({count})"
        )
    if plan.family_scope == "per_test":
        return f"within each test, over the plan's metrics and conditions ({count})"
    if plan.family_scope == "all":
        size = families[0]["size"] if families else 0
        return f"in one family of every planned test, metric and condition ({size} comparisons)"
    names = ", ".join(f["name"] for f in families)
    return f"within the plan's named families ({names})"


def _exploratory_words(plan: AnalysisPlan, metrics: Sequence[str], tests: Sequence[str]) -> str:
    outside_tests = [TEST_NAMES[t] for t in tests if t not in plan.tests]
    planned = set(plan.metrics(metrics))
    outside_metrics = [m for m in metrics if m not in planned]
    parts = []
    if outside_tests:
        parts.append(
            f"{' and '.join(outside_tests)} {'is' if len(outside_tests) == 1 else 'are'} not in the plan"
        )
    if outside_metrics:
        parts.append(f"the plan does not name {', '.join(outside_metrics)}")
    if not parts:
        return ""
    return "; ".join(parts).capitalize() + (
        ": those comparisons are exploratory (no adjusted p, no stars)."
    )


def plan_voice(
    *,
    plan: AnalysisPlan,
    multiplicity: Mapping[str, Any],
    metrics: Sequence[str],
    baseline: str,
    tests: Sequence[str] = ("by_review", "by_idea", "by_reviewer"),
    plan_hash: str = "",
) -> dict[str, Any]:
    """The report's words about its tests under `plan` (`multiplicity` as
    :func:`plan.apply_plan` returns it).

    Parameters
    ----------
    plan
        The analysis plan.
    multiplicity
        The multiplicity section the plan produced.
    metrics
        The report's metrics.
    baseline
        The baseline condition.
    tests
        The tests the report shows.
    plan_hash
        The plan's hash, quoted in the words.

    Returns
    -------
    dict
        Sentence name → text, the plan section's "voice", JSON-ready by design: the report
        template and the files print it as it is.
    """
    n_metrics = len(metrics)
    if plan.is_default():
        return _default_voice(n_metrics)
    members = [m for fam in multiplicity.get("families") or [] for m in fam["members"]]
    kind, sided = _sidedness(members, baseline)
    alpha = float(plan.alpha)
    method = CORRECTIONS[plan.method]
    families = _families_words(plan, multiplicity, baseline)
    stars = {mark: alpha / divisor for mark, divisor in STAR_STEPS}
    published = (
        f"Si et al.'s published convention (two-sided p, Bonferroni over the {n_metrics} "
        "metrics of each test and comparison)"
    )
    correction = (
        "no correction for multiple testing" if plan.method == "none" else f"{method} {families}"
    )
    sentence = (
        "Welch two-sample t-tests (Tests 1 and 2) and a one-sample t-test of per-reviewer "
        "differences (Test 3), as the study's analysis plan"
        + (f" (hash {plan_hash[:12]})" if plan_hash else "")
        + f" sets them: {sided}; {correction}; α = {_num(alpha)}. "
        + f"* adjusted p ≤ {_num(stars['*'])}, ** ≤ {_num(stars['**'])}, "
        + f"*** ≤ {_num(stars['***'])} (the plan's adjusted p)."
    )
    exploratory = _exploratory_words(plan, metrics, tests)
    if exploratory:
        sentence += " " + exploratory
    if "mixed" in plan.tests:
        sentence += (
            " The mixed model's condition effects are in the plan too: their planned and "
            "adjusted p are under Analysis plan."
        )
    sentence += f" {published} is shown in its own columns, without stars."
    return {
        "default": plan.is_default(),
        "sidedness": kind,
        "sidedness_text": sided,
        "method": plan.method,
        "method_label": method,
        "family_scope": plan.family_scope,
        "families_text": families,
        "alpha": alpha,
        "stars": stars,
        "star_rule": "adjusted p ≤ threshold",
        "sentence": sentence,
        "published": published,
        "published_columns": f"Si et al. convention: two-sided, Bonferroni × {n_metrics}",
    }


def _default_voice(n_metrics: int) -> dict[str, Any]:
    """The default plan is the paper's analysis: the report keeps the published words."""
    return {
        "default": True,
        "sidedness": "two-sided",
        "sidedness_text": "two-sided",
        "method": "bonferroni",
        "method_label": CORRECTIONS["bonferroni"],
        "family_scope": "per_comparison",
        "families_text": f"over the {n_metrics} metrics",
        "alpha": 0.05,
        "stars": {"*": 0.05, "**": 0.01, "***": 0.001},
        "star_rule": "Bonferroni p < threshold",
        "sentence": (
            "Welch two-sample t-tests (Tests 1 and 2) and a one-sample t-test of per-reviewer "
            f"differences (Test 3); two-sided; Bonferroni over the {n_metrics} metrics. "
            "* p < 0.05, ** p < 0.01, *** p < 0.001 after correction."
        ),
        "published": "",
        "published_columns": "",
    }


@dataclass(frozen=True)
class PlannedSummary:
    """One test under the analysis plan (`planned_summary`).

    Attributes
    ----------
    in_plan
        Whether the plan tests it.
    method, method_label, alpha
        The plan's multiple-testing method, its label and alpha.
    alternatives
        The alternatives of its comparisons in a family, sorted.
    families
        The families those comparisons fall in, in order of first appearance.
    planned_comparisons, exploratory_comparisons
        Its comparisons in a family, and those outside every family.
    """

    in_plan: bool
    method: str
    method_label: str
    alpha: float
    alternatives: list[str]
    families: list[str]
    planned_comparisons: int
    exploratory_comparisons: int

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the test section's "planned" entry."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def planned_summary(result: Mapping[str, Any], *, test: str, plan: AnalysisPlan) -> PlannedSummary:
    """One test's summary under the plan: whether the plan tests it, the alternatives and
    families its comparisons fall in, the method and alpha.

    Parameters
    ----------
    result
        The test's report section after :func:`plan.apply_plan` wrote its rows.
    test
        The test's name.
    plan
        The analysis plan.

    Returns
    -------
    PlannedSummary
        Whether the plan tests it, its method and alpha, and the alternatives and
        families of its comparisons.
    """
    rows = result.get("comparisons") or []
    planned = [r for r in rows if r.get("family")]
    return PlannedSummary(
        in_plan=test in plan.tests,
        method=plan.method,
        method_label=CORRECTIONS[plan.method],
        alpha=float(plan.alpha),
        alternatives=sorted({r["alternative"] for r in planned}),
        families=list(dict.fromkeys(r["family"] for r in planned)),
        planned_comparisons=len(planned),
        exploratory_comparisons=len(rows) - len(planned),
    )
