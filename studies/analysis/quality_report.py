"""The report's quality section: the flags, what the exclusion rules removed, the plan's
primary tests with and without those reviews, and each reviewer's leniency.

Pure module: no Django imports. The flags come in computed (``studies.analysis.quality``
from the rows the service reads); this module only needs the analysis frame, the report
built on it and the plan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pandas as pd

from . import hypothesis as hyp
from .frame import json_float
from .plan import AnalysisPlan, mixed_comparisons
from .quality import (
    FLAG_KINDS,
    ExclusionRule,
    Flag,
    ReviewAnswers,
    exclusions,
    primary_metrics,
    reviewer_leniency,
    with_without,
)

__all__ = ["quality_section", "quality_rows", "rules_in_force"]


def rules_in_force(plan: AnalysisPlan) -> tuple[tuple[ExclusionRule, ...], bool]:
    """The plan's exclusion rules, or, when it registers none, every flag as a rule (the
    gold miss removing the reviewer), shown as an unplanned sensitivity analysis. The
    flag says whether the rules are the plan's."""
    if plan.quality.exclude:
        return plan.quality.exclude, True
    return tuple(
        ExclusionRule(k, "reviewer" if k == "gold" else "review") for k in FLAG_KINDS
    ), False


def _tests(df: pd.DataFrame, metrics: list[str], baseline: str, conditions: list[str]) -> dict:
    return {
        "by_review": hyp.test_by_review(df, metrics, baseline=baseline, conditions=conditions),
        "by_idea": hyp.test_by_idea(df, metrics, baseline=baseline, conditions=conditions),
        "by_reviewer": hyp.test_by_reviewer(df, metrics, baseline=baseline, conditions=conditions),
    }


def quality_section(
    df: pd.DataFrame,
    report: dict[str, Any],
    *,
    flags: Sequence[Flag],
    reviews: Sequence[ReviewAnswers],
    plan: AnalysisPlan,
    design: tuple[pd.DataFrame, list[str], tuple[str, ...]],
    refit_mixed: Any = None,
    pending: int = 0,
) -> dict[str, Any]:
    """The quality section of ``report`` (built on ``df`` with ``plan``).

    ``refit_mixed(frame)`` returns the mixed-model fits on a frame (the report's own
    model); it is called for the kept reviews only when the plan tests the mixed model
    and a rule removed something. ``design`` is the frame, covariates and grouping
    factors the report's mixed model used (``report.mixed_design`` and its groups), for
    the leniency. ``pending`` counts rationales not yet compared.

    Parameters
    ----------
    df
        The review frame the report was built on.
    report
        The report so far (its metrics, conditions, tests and mixed fits are read).
    flags, reviews
        The study's quality flags and every review's answers.
    plan
        The analysis plan (quality thresholds and exclusion rules).
    design, refit_mixed, pending
        As above.

    Returns
    -------
    dict
        The report's "quality" section, JSON-ready by design and written out as it is:
        flags and their counts, the exclusion (`Exclusions.as_dict()` and whether it was
        planned), the with/without rows and the reviewers' leniency.
    """
    metrics = list(report["metrics"])
    baseline, conditions = report["baseline"], list(report["conditions"])
    rules, planned = rules_in_force(plan)
    # The exclusion counts the reviews the frame analyses (gold ones are left out there).
    in_frame = set(df["review_id"].astype(str))
    reviews = [r for r in reviews if r.gold or r.review_id in in_frame]
    excl = exclusions(flags, rules, reviews)
    removed = set(excl.removed)
    kept = df[~df["review_id"].astype(str).isin(removed)]
    section: dict[str, Any] = {
        "kinds": FLAG_KINDS,
        "thresholds": {
            "min_minutes": plan.quality.min_minutes,
            "straight_line_items": plan.quality.straight_line_items,
            "duplicate_cosine": plan.quality.duplicate_cosine,
            "duplicate_min_words": plan.quality.duplicate_min_words,
        },
        "flags": [f.as_dict() for f in flags],
        "counts": {k: n for k, n in Counter(f.kind for f in flags).items()},
        "flagged_reviewers": len({f.reviewer_id for f in flags if f.reviewer_id}),
        "rationales_not_compared": pending,
        "exclusion": {**excl.as_dict(), "planned": planned},
        "with_without": [],
        "with_without_note": "",
        "leniency": {},
    }
    tests_all = {k: report[k] for k in ("by_review", "by_idea", "by_reviewer")}
    tests_all["mixed"] = mixed_comparisons(_ok(report["mixed_effects"]["fits"]), baseline=baseline)
    try:
        if removed:
            tests_kept, emptied = _kept_tests(
                kept, metrics, baseline, conditions, refit_mixed if "mixed" in plan.tests else None
            )
        else:
            tests_kept, emptied = tests_all, {}
        section["with_without"] = with_without(
            tests_all, tests_kept, plan=plan, metrics=metrics, emptied=emptied
        )
    except ValueError as exc:
        section["with_without_note"] = f"the tests cannot be run without the removed reviews: {exc}"
    section["leniency"] = _leniency(report, plan, design)
    return section


def _kept_tests(
    kept: pd.DataFrame,
    metrics: list[str],
    baseline: str,
    conditions: list[str],
    refit_mixed: Any,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The tests on the kept reviews, over the conditions that still have some, and the
    conditions the rules emptied (condition -> what the table says in their place). The
    baseline emptied leaves no comparison to make; a compared condition emptied leaves
    the others' comparisons."""
    present = set(kept["condition"]) if not kept.empty else set()
    emptied = {
        c: f"no reviews of {c} are left" + (" (the baseline)" if c == baseline else "")
        for c in conditions
        if c not in present
    }
    if baseline in emptied:
        return {}, emptied
    left = [c for c in conditions if c in present]
    tests = _tests(kept, metrics, baseline, left)
    fits = refit_mixed(kept) if refit_mixed else {}
    tests["mixed"] = mixed_comparisons(_ok(fits), baseline=baseline)
    return tests, emptied


def _ok(fits: dict[str, Any]) -> dict[str, Any]:
    return {m: f for m, f in (fits or {}).items() if "error" not in f}


def _leniency(
    report: dict[str, Any],
    plan: AnalysisPlan,
    design: tuple[pd.DataFrame, list[str], tuple[str, ...]],
) -> dict[str, Any]:
    """Per primary metric, each reviewer's effect in the report's mixed model."""
    mixed = report.get("mixed_effects") or {}
    data, covariates, groups = design
    out: dict[str, Any] = {}
    for metric in primary_metrics(plan, report["metrics"]):
        fit = (mixed.get("fits") or {}).get(metric) or {"error": "not fitted"}
        try:
            table = reviewer_leniency(
                data, fit, metric=metric, baseline=report["baseline"], groups=groups,
                covariates=covariates,
            )  # fmt: skip
        except ValueError as exc:
            out[metric] = {"rows": [], "note": str(exc)}
            continue
        rows = [
            {k: (json_float(v) if isinstance(v, float) else v) for k, v in rec.items()}
            for rec in table.to_dict(orient="records")
        ]
        out[metric] = {"rows": rows, "note": "" if rows else "the model has no reviewer effect"}
    return out


def quality_rows(report: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """The section's CSV tables: flags, exclusions per rule, with/without, leniency.

    Parameters
    ----------
    report
        The report, with or without its quality section.

    Returns
    -------
    dict of DataFrame
        CSV name → table (none without a quality section), as the report's files take it.
    """
    q = report.get("quality")
    if not q:
        return {}
    leniency = [
        {"metric": metric, **row}
        for metric, block in q["leniency"].items()
        for row in block["rows"]
    ]
    rules = [{k: v for k, v in r.items() if k != "review_ids"} for r in q["exclusion"]["rules"]]
    return {
        "quality_flags": pd.DataFrame(
            q["flags"], columns=["review_id", "reviewer_id", "kind", "detail"]
        ),
        "quality_exclusions": pd.DataFrame(
            rules, columns=["rule", "flag", "unit", "reviews", "only_this_rule"]
        ),
        "quality_with_without": pd.DataFrame(q["with_without"]),
        "leniency": pd.DataFrame(
            leniency,
            columns=["metric", "reviewer_id", "effect", "sd", "low", "high", "reviews", "flag"],
        ),
    }
