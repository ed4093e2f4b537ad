"""The study report as one JSON-ready dict, assembled from the pure analysis functions.

`build_report` is the single place that decides what the report contains; the service
layer adds the study's identity and writes the files. The schema is documented in
docs/report-schema.md; its top-level keys are stable:

    schema, generated_at, software, options, metrics, conditions, baseline, data, notes,
    summary, by_review, by_idea, by_reviewer, mixed_effects, correlations, consistency,
    reliability, per_topic, review_quality, assignment, progress_total

Everything is keyed by metric and condition names as imported.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from . import consistency as cons
from . import descriptives as desc
from . import hypothesis as hyp
from .frame import has_reviewer_ids, json_float, unique_reviews

SCHEMA = "ideareview.report/1"

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class ReportOptions:
    consistency_splits: int = 1000
    consistency_bootstrap: int = 1000
    consistency_permutations: int = 1000
    consistency_metric: str = "overall"
    seed: int = 20240906
    mixed_starts: int = 5
    mixed_engine: str = "auto"
    mixed_reml: bool = True
    # Refit every main model with R's lme4 (needs Rscript + lme4) and report the gaps.
    crosscheck_lme4: bool = False


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for rec in table.to_dict(orient="records"):
        out.append(
            {
                str(k): (json_float(v) if isinstance(v, float | np.floating) else _plain(v))
                for k, v in rec.items()
            }
        )
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if v is pd.NA or v is pd.NaT:
        return None
    return v


def _matrix(m: pd.DataFrame) -> dict[str, dict[str, float | None]]:
    return {str(r): {str(c): json_float(m.loc[r, c]) for c in m.columns} for r in m.index}


def software_versions() -> dict[str, str]:
    import scipy
    import statsmodels

    from ideareview import __version__

    return {
        "ideareview": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "scipy": scipy.__version__,
        "statsmodels": statsmodels.__version__,
    }


def build_report(
    df: pd.DataFrame,
    *,
    metrics: Sequence[str],
    baseline: str,
    conditions: Sequence[str],
    options: ReportOptions = ReportOptions(),
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Every table, test and model of the report, computed from one analysis frame."""
    metrics = list(metrics)
    conditions = [c for c in conditions if c in set(df["condition"])]
    if baseline not in conditions:
        raise ValueError(
            f"baseline condition {baseline!r} has no reviews (conditions: {conditions})"
        )
    steps = 6 + len(metrics) + 1
    step = 0
    timings: dict[str, float] = {}

    def tick(message: str) -> None:
        nonlocal step
        if progress is not None:
            progress(step, steps, message)
        step += 1

    uniq = unique_reviews(df)
    reviewers = has_reviewer_ids(df)
    n_copies = len(df) - len(uniq)
    notes = [
        f"{len(df)} rows: one per review × condition. {len(uniq)} unique reviews"
        + (
            f"; {n_copies} rows repeat a review whose idea sits in two conditions"
            if n_copies
            else ""
        )
        + ". Per-condition tables and tests count every row (as the published tables do); "
        "pooled statistics (correlations, consistency, reliability) are given on unique reviews too.",
        "SD is the sample SD (ddof = 1); SD (pop.), with ddof = 0, is what the released Si et al. "
        "scripts print.",
    ]
    if not reviewers:
        notes.append(
            "The data has no reviewer ids, so Test 3 (per-reviewer differences) and the "
            "reviewer random effect cannot be computed; no reviewers are invented."
        )

    t0 = time.perf_counter()
    tick("descriptive statistics")
    summary = desc.summarize(df, metrics, conditions)
    idea_means = df.groupby(["condition", "idea_id"], as_index=False)[metrics].mean()
    idea_means["review_id"] = idea_means["condition"] + "/" + idea_means["idea_id"]
    idea_means["topic"] = df.groupby(["condition", "idea_id"])["topic"].first().to_numpy()
    summary_by_idea = desc.summarize(idea_means, metrics, conditions)
    timings["descriptives"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    tick("Tests 1-3 (Welch, Bonferroni)")
    by_review = hyp.test_by_review(df, metrics, baseline=baseline, conditions=conditions)
    by_idea = hyp.test_by_idea(df, metrics, baseline=baseline, conditions=conditions)
    by_reviewer = hyp.test_by_reviewer(df, metrics, baseline=baseline, conditions=conditions)
    timings["tests"] = time.perf_counter() - t0

    mixed: dict[str, Any] = {"fits": {}, "engine_requested": options.mixed_engine}
    t0 = time.perf_counter()
    from .mixed import fit_mixed

    # The idea random effect is the idea as it appears in a condition (one id per condition,
    # as the released scripts and lme4 reference use). When some ideas sit in several
    # conditions, a sensitivity fit with one effect per idea is reported beside it.
    per_condition = "source_idea_id" in df and df["source_idea_id"].notna().all()
    idea_unit = "source_idea_id" if per_condition else "idea_id"
    shared_ideas = per_condition and df["source_idea_id"].nunique() != df["idea_id"].nunique()
    mixed["sensitivity"] = {}

    def fit(metric: str, idea_col: str) -> dict[str, Any]:
        try:
            return fit_mixed(
                df,
                metric,
                baseline=baseline,
                groups=("topic", "reviewer_id", idea_col),
                reml=options.mixed_reml,
                engine=options.mixed_engine,
                n_starts=options.mixed_starts,
                seed=options.seed,
            ).to_dict()
        except ValueError as exc:
            return {"metric": metric, "error": str(exc)}

    for metric in metrics:
        tick(f"mixed model: {metric}")
        mixed["fits"][metric] = fit(metric, idea_unit)
        if shared_ideas:
            mixed["sensitivity"][metric] = fit(metric, "idea_id")
    mixed["available"] = True
    if options.crosscheck_lme4:
        mixed["lme4_crosscheck"] = lme4_crosscheck(
            df, mixed["fits"], baseline=baseline, idea_unit=idea_unit, reml=options.mixed_reml
        )
    mixed["idea_unit"] = idea_unit
    mixed["model"] = (
        f"score ~ condition ({baseline} baseline) + crossed random intercepts for the "
        "grouping factors the data identify (topic, reviewer, idea"
        + (" within condition" if per_condition else "")
        + "); "
        + ("REML" if options.mixed_reml else "ML")
    )
    if shared_ideas:
        mixed["sensitivity_note"] = (
            f"{df['idea_id'].nunique()} distinct ideas appear under "
            f"{df['source_idea_id'].nunique()} per-condition ids. The main fits give each "
            "per-condition id its own random effect (the published analysis); the "
            "sensitivity fits give each distinct idea one effect shared across conditions, "
            "so the repeated reviews of one idea count as one idea's."
        )
    timings["mixed_effects"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    tick("metric correlations")
    correlations = {
        "method": "pearson",
        "rows": {"n": len(df), "matrix": _matrix(desc.correlations(df, metrics, rows="all"))},
        "unique_reviews": {
            "n": len(uniq),
            "matrix": _matrix(desc.correlations(df, metrics, rows="unique")),
        },
        "spearman_unique_reviews": {
            "n": len(uniq),
            "matrix": _matrix(desc.correlations(df, metrics, "spearman", rows="unique")),
        },
    }
    timings["correlations"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    tick("inter-reviewer consistency and reliability")
    consistency: dict[str, Any] = {"available": True, "by_metric": {}}
    try:
        main_metric = (
            options.consistency_metric if options.consistency_metric in metrics else metrics[-1]
        )
        for metric in metrics:
            entry = {}
            heavy = metric == main_metric
            # The headline metric gets both row sets with CI and p; the others a point
            # estimate with its split spread (the CIs cost 20x the splits).
            for rows in ("all", "unique") if heavy else ("all",):
                entry[rows] = cons.inter_reviewer_consistency(
                    df,
                    metric,
                    rows=rows,
                    n_splits=options.consistency_splits,
                    n_bootstrap=options.consistency_bootstrap if heavy else 0,
                    n_permutations=options.consistency_permutations if heavy else 0,
                    seed=options.seed,
                )
            consistency["by_metric"][metric] = entry
        main = consistency["by_metric"][main_metric]["all"]
        consistency.update(
            metric=main_metric,
            mean=main["balanced_accuracy"],
            split_values=[
                round(float(v), 4)
                for v in cons.split_accuracies(
                    cons.score_matrix(df, main_metric, rows="all").to_numpy(float),
                    options.consistency_splits,
                    np.random.default_rng(options.seed),
                )
            ],
        )
    except ValueError as exc:
        consistency = {"available": False, "reason": str(exc), "by_metric": {}}
    reliability = {
        "krippendorff_alpha": {
            m: {
                "interval": json_float(cons.krippendorff_alpha(df, m, "interval", rows="unique")),
                "ordinal": json_float(cons.krippendorff_alpha(df, m, "ordinal", rows="unique")),
                "rows": "unique reviews, units = ideas",
                "n": len(uniq),
            }
            for m in metrics
        }
    }
    timings["consistency"] = time.perf_counter() - t0

    tick("per-topic breakdown, review quality, assignment")
    per_topic = desc.per_topic(df, metrics, conditions)
    quality = desc.review_quality(df)
    assignment = desc.assignment_table(df)

    report: dict[str, Any] = {
        "schema": SCHEMA,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "software": software_versions(),
        "options": asdict(options),
        "metrics": metrics,
        "conditions": conditions,
        "baseline": baseline,
        "data": {
            "rows": len(df),
            "unique_reviews": len(uniq),
            "ideas": int(df["idea_id"].nunique()),
            "topics": int(df["topic"].nunique()),
            "reviewers": int(df["reviewer_id"].dropna().nunique()) if reviewers else 0,
            "flagged_rows": int(df["flagged"].sum()) if "flagged" in df else 0,
            "rows_per_condition": {c: int((df["condition"] == c).sum()) for c in conditions},
        },
        "notes": notes,
        "summary": {
            "by_review": _records(summary),
            "by_idea": _records(summary_by_idea),
        },
        "by_review": by_review,
        "by_idea": by_idea,
        "by_reviewer": by_reviewer,
        "mixed_effects": mixed,
        "correlations": correlations,
        "consistency": consistency,
        "reliability": reliability,
        "per_topic": {"rows": _records(per_topic), "confidence": 0.95},
        "review_quality": {"rows": _records(quality)},
        "assignment": assignment,
        "timings": {k: round(v, 3) for k, v in timings.items()},
        "progress_total": steps,
    }
    return report


def lme4_crosscheck(
    df: pd.DataFrame, fits: dict[str, Any], *, baseline: str, idea_unit: str, reml: bool
) -> dict[str, Any]:
    """Refit the report's models through R's lmer and give the largest differences."""
    from .rcheck import RJob, lme4_fit_many, r_unavailable_reason

    reason = r_unavailable_reason()
    if reason is not None:
        return {"available": False, "reason": f"lme4 cross-check skipped: {reason}"}
    metrics = [m for m, f in fits.items() if "error" not in f]
    jobs = [
        RJob(metric=m, baseline=baseline, reml=reml, groups=("topic", "reviewer_id", idea_unit))
        for m in metrics
    ]
    out: dict[str, Any] = {"available": True, "by_metric": {}}
    for metric, r in zip(metrics, lme4_fit_many(df, jobs), strict=True):
        ours = fits[metric]
        theirs = r.to_dict()
        ours_fixed = {row["term"]: row for row in ours["fixed"]}
        coef = max(abs(ours_fixed[t["term"]]["coef"] - t["coef"]) for t in theirs["fixed"])
        se = max(abs(ours_fixed[t["term"]]["se"] - t["se"]) for t in theirs["fixed"])
        var = max(abs(ours["variance"][k] - v) for k, v in theirs["variance"].items())
        out["by_metric"][metric] = {
            "max_abs_diff_coef": coef,
            "max_abs_diff_se": se,
            "max_abs_diff_variance": var,
            "loglik_lme4": theirs["loglik"],
            "abs_diff_loglik": abs(ours["loglik"] - theirs["loglik"]),
            "lme4_seconds": theirs.get("fit_seconds"),
        }
    return out


def tidy_tables(report: dict[str, Any], df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Long-format CSVs: one row per number, columns named as in report.json."""
    tables: dict[str, pd.DataFrame] = {
        "summary": pd.concat(
            [
                pd.DataFrame(report["summary"]["by_review"]).assign(unit="review"),
                pd.DataFrame(report["summary"]["by_idea"]).assign(unit="idea"),
            ]
        ),
        "by_review": pd.DataFrame(report["by_review"]["comparisons"]),
        "by_idea": pd.DataFrame(report["by_idea"]["comparisons"]),
        "by_reviewer": pd.DataFrame(
            report["by_reviewer"].get("comparisons") or [], columns=["metric", "condition"]
        )
        if report["by_reviewer"].get("available")
        else pd.DataFrame({"available": [False], "reason": [report["by_reviewer"].get("reason")]}),
        "per_topic": pd.DataFrame(report["per_topic"]["rows"]),
    }
    if report["by_reviewer"].get("available"):
        tables["by_reviewer"] = pd.DataFrame(report["by_reviewer"]["comparisons"])
    mixed_rows = []
    for metric, fit in report["mixed_effects"]["fits"].items():
        for row in fit.get("fixed") or []:
            mixed_rows.append(
                {
                    "metric": metric,
                    "kind": "fixed",
                    **row,
                    "loglik": fit.get("loglik"),
                    "engine": fit.get("engine"),
                }
            )
        for name, var in (fit.get("variance") or {}).items():
            mixed_rows.append(
                {
                    "metric": metric,
                    "kind": "variance",
                    "term": name,
                    "coef": var,
                    "loglik": fit.get("loglik"),
                    "engine": fit.get("engine"),
                }
            )
    tables["mixed_effects"] = pd.DataFrame(mixed_rows)
    corr_rows = []
    for rows_key in ("rows", "unique_reviews"):
        block = report["correlations"][rows_key]
        for a, row in block["matrix"].items():
            for b, v in row.items():
                corr_rows.append(
                    {
                        "rows": rows_key,
                        "n": block["n"],
                        "metric_a": a,
                        "metric_b": b,
                        "pearson_r": v,
                    }
                )
    tables["correlations"] = pd.DataFrame(corr_rows)
    return tables
