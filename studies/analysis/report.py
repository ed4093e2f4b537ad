"""The study report as one JSON-ready dict, assembled from the pure analysis functions.

`build_report` is the single place that decides what the report contains; the service
layer adds the study's identity and writes the files. The schema is documented in
docs/report-schema.md; its top-level keys are stable:

    schema, generated_at, software, options, metrics, conditions, baseline, data, notes,
    summary, by_review, by_idea, by_reviewer, plan, mixed_effects, ordinal, correlations,
    consistency, reliability, per_topic, review_quality, assignment, agreement, progress_total

Everything is keyed by metric and condition names as imported.
"""

from __future__ import annotations

import copy
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from . import consistency as cons
from . import descriptives as desc
from . import hypothesis as hyp
from .frame import has_reviewer_ids, json_float, unique_reviews
from .plan import AnalysisPlan, apply_plan, mixed_comparisons, plan_document, plan_hash
from .plan_voice import plan_voice, planned_summary

SCHEMA = "ideareview.report/2"

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class ReportOptions:
    consistency_splits: int = 1000
    consistency_bootstrap: int = 1000
    consistency_permutations: int = 1000
    consistency_metric: str = "overall"
    seed: int = 20240906
    mixed_starts: int = 3
    mixed_engine: str = "auto"
    mixed_reml: bool = True
    # Refit every main model with R's lme4 (needs Rscript + lme4) and report the gaps.
    crosscheck_lme4: bool = False
    # Human-LLM agreement: draws per judge and metric. Big studies want fewer (the cost
    # grows with ideas x draws x judges x metrics).
    agreement_splits: int = 200
    agreement_bootstrap: int = 200
    agreement_permutations: int = 200
    # The ordinal check (cumulative-link mixed model): "all" metrics, the "primary" one
    # (consistency_metric) or "none". Past ordinal_all_max_rows only the primary metric is
    # fitted (on every row: its reviewer block is sparse, so no size is refused).
    ordinal: str = "all"
    ordinal_all_max_rows: int = 1500


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


def _data_notes(df: pd.DataFrame, uniq: pd.DataFrame, reviewers: bool) -> list[str]:
    """The report's opening notes on what the rows are and what the data lacks."""
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
    return notes


def _data_counts(
    df: pd.DataFrame, uniq: pd.DataFrame, reviewers: bool, conditions: list[str]
) -> dict[str, Any]:
    """How many rows, reviews, ideas, topics and reviewers the report rests on."""
    return {
        "rows": len(df),
        "unique_reviews": len(uniq),
        "ideas": int(df["idea_id"].nunique()),
        "topics": int(df["topic"].nunique()),
        "reviewers": int(df["reviewer_id"].dropna().nunique()) if reviewers else 0,
        "flagged_rows": int(df["flagged"].sum()) if "flagged" in df else 0,
        "rows_per_condition": {c: int((df["condition"] == c).sum()) for c in conditions},
    }


def _mixed_section(
    df: pd.DataFrame,
    *,
    metrics: list[str],
    baseline: str,
    options: ReportOptions,
    plan: AnalysisPlan,
    tick: Callable[[str], None],
    extras: bool = True,
) -> tuple[dict[str, Any], str]:
    """The mixed-model fits per metric, their sensitivity fits and the model's description;
    also the idea unit the fits used. Without ``extras``: the main fits and the
    description only (no sensitivity fits, no lme4 cross-check)."""
    mixed: dict[str, Any] = {"fits": {}, "engine_requested": options.mixed_engine}
    from .mixed import fit_mixed

    # The idea random effect is the idea as it appears in a condition (one id per condition,
    # as the released scripts and lme4 reference use). When some ideas sit in several
    # conditions, a sensitivity fit with one effect per idea is reported beside it.
    per_condition = "source_idea_id" in df and df["source_idea_id"].notna().all()
    idea_unit = "source_idea_id" if per_condition else "idea_id"
    shared_ideas = (
        extras and per_condition and df["source_idea_id"].nunique() != df["idea_id"].nunique()
    )
    mixed["sensitivity"] = {}

    data, covariates, topic_groups = mixed_design(df, plan)

    def fit(metric: str, idea_col: str, n_starts: int) -> dict[str, Any]:
        try:
            return fit_mixed(
                data,
                metric,
                baseline=baseline,
                groups=(*topic_groups, "reviewer_id", idea_col),
                reml=options.mixed_reml,
                engine=options.mixed_engine,
                n_starts=n_starts,
                seed=options.seed,
                covariates=covariates,
            ).to_dict()
        except ValueError as exc:
            return {"metric": metric, "error": str(exc)}

    for metric in metrics:
        tick(f"mixed model: {metric}")
        mixed["fits"][metric] = fit(metric, idea_unit, options.mixed_starts)
        if shared_ideas:
            # A sensitivity fit; two starts still show whether the optimum is unique.
            mixed["sensitivity"][metric] = fit(metric, "idea_id", min(2, options.mixed_starts))
    mixed["available"] = True
    if extras and options.crosscheck_lme4:
        mixed["lme4_crosscheck"] = lme4_crosscheck(
            df, mixed["fits"], baseline=baseline, idea_unit=idea_unit, reml=options.mixed_reml
        )
    mixed["idea_unit"] = idea_unit
    fixed_terms = "".join(f" + {c}" for c in plan.covariates) + (
        " + topic (fixed)" if plan.topic == "fixed" else ""
    )
    mixed["model"] = (
        f"score ~ condition ({baseline} baseline){fixed_terms} + crossed random intercepts "
        "for the grouping factors the data identify ("
        + ("topic, " if plan.topic == "random" else "")
        + "reviewer, idea"
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
    return mixed, idea_unit


def _correlations_section(df: pd.DataFrame, metrics: list[str], n_unique: int) -> dict[str, Any]:
    """Metric correlations over all rows and over unique reviews."""
    return {
        "method": "pearson",
        "rows": {"n": len(df), "matrix": _matrix(desc.correlations(df, metrics, rows="all"))},
        "unique_reviews": {
            "n": n_unique,
            "matrix": _matrix(desc.correlations(df, metrics, rows="unique")),
        },
        "spearman_unique_reviews": {
            "n": n_unique,
            "matrix": _matrix(desc.correlations(df, metrics, "spearman", rows="unique")),
        },
    }


def _consistency_section(
    df: pd.DataFrame, *, metrics: list[str], options: ReportOptions, notes: list[str]
) -> dict[str, Any]:
    """Inter-reviewer consistency per metric; a note is added to `notes` when the
    resampling draws are reduced for a large study."""
    consistency: dict[str, Any] = {"available": True, "by_metric": {}}
    try:
        main_metric = (
            options.consistency_metric if options.consistency_metric in metrics else metrics[-1]
        )
        # Resampling cost grows with ideas x draws; past ~1,500 ideas the draws shrink in
        # proportion (never below 100), which widens the Monte Carlo error of the CI and
        # p a little, and the report says so.
        n_units = int(df.groupby(["condition", "idea_id"]).ngroups)
        scale = min(1.0, 1500 / max(n_units, 1))
        n_boot = max(
            min(100, options.consistency_bootstrap), int(options.consistency_bootstrap * scale)
        )
        n_perm = max(
            min(100, options.consistency_permutations),
            int(options.consistency_permutations * scale),
        )
        if scale < 1:
            notes.append(
                f"{n_units} idea units: the consistency bootstrap and permutation test use "
                f"{n_boot} and {n_perm} draws instead of {options.consistency_bootstrap} and "
                f"{options.consistency_permutations}, to keep the report's time bounded."
            )
        splits: list[float] = []
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
                    n_bootstrap=n_boot if heavy else 0,
                    n_permutations=n_perm if heavy else 0,
                    seed=options.seed,
                    splits_out=splits if heavy and rows == "all" else None,
                )
            consistency["by_metric"][metric] = entry
        main = consistency["by_metric"][main_metric]["all"]
        consistency.update(
            metric=main_metric,
            mean=main["balanced_accuracy"],
            split_values=[round(float(v), 4) for v in splits],
        )
    except ValueError as exc:
        consistency = {"available": False, "reason": str(exc), "by_metric": {}}
    return consistency


def _reliability_section(df: pd.DataFrame, metrics: list[str], n_unique: int) -> dict[str, Any]:
    """Krippendorff's α per metric on unique reviews."""
    return {
        "krippendorff_alpha": {
            m: {
                "interval": json_float(cons.krippendorff_alpha(df, m, "interval", rows="unique")),
                "ordinal": json_float(cons.krippendorff_alpha(df, m, "ordinal", rows="unique")),
                "rows": "unique reviews, units = ideas",
                "n": n_unique,
            }
            for m in metrics
        }
    }


def _comparison_sections(
    df: pd.DataFrame,
    *,
    metrics: list[str],
    baseline: str,
    conditions: list[str],
    options: ReportOptions,
    plan: AnalysisPlan,
    registered: AnalysisPlan | None,
    tick: Callable[[str], None],
    timings: dict[str, float],
) -> dict[str, Any]:
    """The condition comparisons: summaries, Tests 1-3, the mixed and ordinal models and
    the planned tests, keyed as in the report; each stage's time goes to `timings`."""
    t0 = time.perf_counter()
    tick("descriptive statistics")
    summary = desc.summarize(df, metrics, conditions)
    idea_means = df.groupby(["condition", "idea_id"], as_index=False)[metrics].mean()
    idea_means["review_id"] = idea_means["condition"] + "/" + idea_means["idea_id"]
    idea_means["topic"] = df.groupby(["condition", "idea_id"])["topic"].first().to_numpy()
    summary_by_idea = desc.summarize(idea_means, metrics, conditions)
    timings["descriptives"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    tick("Tests 1-3 (Welch and per-reviewer t-tests)")
    by_review = hyp.test_by_review(df, metrics, baseline=baseline, conditions=conditions)
    by_idea = hyp.test_by_idea(df, metrics, baseline=baseline, conditions=conditions)
    by_reviewer = hyp.test_by_reviewer(df, metrics, baseline=baseline, conditions=conditions)
    timings["tests"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    mixed, idea_unit = _mixed_section(
        df, metrics=metrics, baseline=baseline, options=options, plan=plan, tick=tick
    )
    registered_mixed = None
    if registered is not None and _mixed_formula_differs(plan, registered):
        # The registered plan's results need the registered plan's model.
        registered_mixed, _ = _mixed_section(
            df, metrics=metrics, baseline=baseline, options=options, plan=registered,
            tick=lambda _message: None, extras=False,
        )  # fmt: skip
    timings["mixed_effects"] = time.perf_counter() - t0
    plan_section = planned_tests(
        {"by_review": by_review, "by_idea": by_idea, "by_reviewer": by_reviewer},
        mixed["fits"],
        plan=plan,
        registered=registered,
        metrics=metrics,
        baseline=baseline,
        registered_mixed=registered_mixed,
    )

    t0 = time.perf_counter()
    tick("ordinal check (cumulative-link mixed model)")
    ordinal = build_ordinal(
        df, metrics=metrics, baseline=baseline, idea_unit=idea_unit, options=options
    )
    timings["ordinal"] = time.perf_counter() - t0

    return {
        "summary": {
            "by_review": _records(summary),
            "by_idea": _records(summary_by_idea),
        },
        "by_review": by_review,
        "by_idea": by_idea,
        "by_reviewer": by_reviewer,
        "plan": plan_section,
        "mixed_effects": mixed,
        "ordinal": ordinal,
    }


def build_report(
    df: pd.DataFrame,
    *,
    metrics: Sequence[str],
    baseline: str,
    conditions: Sequence[str],
    options: ReportOptions = ReportOptions(),
    progress: Progress | None = None,
    judges: Sequence[JudgeData] = (),
    human_pairs: pd.DataFrame | None = None,
    baselines: Mapping[str, Any] | None = None,
    plan: AnalysisPlan | None = None,
    registered: AnalysisPlan | None = None,
) -> dict[str, Any]:
    """Every table, test and model of the report, computed from one analysis frame.

    `judges` (stored runs and report-computed baselines) and `human_pairs` feed the
    agreement section; `baselines` says per no-LLM baseline whether it could run.
    `plan` decides sidedness and multiple testing (the default plan: two-sided,
    Bonferroni over the metrics) and the words the report uses about its tests
    (`plan_voice`); `registered` is the frozen plan, whose results are shown beside the
    current plan's when the two differ.
    """
    plan = plan or AnalysisPlan()
    metrics = list(metrics)
    conditions = [c for c in conditions if c in set(df["condition"])]
    if baseline not in conditions:
        raise ValueError(
            f"baseline condition {baseline!r} has no reviews (conditions: {conditions})"
        )
    steps = 8 + len(metrics) + 1
    step = 0
    timings: dict[str, float] = {}

    def tick(message: str) -> None:
        nonlocal step
        if progress is not None:
            progress(step, steps, message)
        step += 1

    uniq = unique_reviews(df)
    reviewers = has_reviewer_ids(df)
    notes = _data_notes(df, uniq, reviewers)

    comparisons = _comparison_sections(
        df,
        metrics=metrics,
        baseline=baseline,
        conditions=conditions,
        options=options,
        plan=plan,
        registered=registered,
        tick=tick,
        timings=timings,
    )

    t0 = time.perf_counter()
    tick("metric correlations")
    correlations = _correlations_section(df, metrics, len(uniq))
    timings["correlations"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    tick("inter-reviewer consistency and reliability")
    consistency = _consistency_section(df, metrics=metrics, options=options, notes=notes)
    reliability = _reliability_section(df, metrics, len(uniq))
    timings["consistency"] = time.perf_counter() - t0

    tick("per-topic breakdown, review quality, assignment")
    per_topic = desc.per_topic(df, metrics, conditions)
    quality = desc.review_quality(df)
    assignment = desc.assignment_table(df)

    t0 = time.perf_counter()
    tick("human-LLM agreement")
    agreement = build_agreement(
        df,
        metrics=metrics,
        judges=judges,
        human_pairs=human_pairs,
        consistency=consistency,
        options=options,
        baselines=baselines,
    )
    timings["agreement"] = time.perf_counter() - t0

    report: dict[str, Any] = {
        "schema": SCHEMA,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "software": software_versions(),
        "options": asdict(options),
        "metrics": metrics,
        "conditions": conditions,
        "baseline": baseline,
        "data": _data_counts(df, uniq, reviewers, conditions),
        "notes": notes,
        **comparisons,
        "correlations": correlations,
        "consistency": consistency,
        "reliability": reliability,
        "per_topic": {"rows": _records(per_topic), "confidence": 0.95},
        "review_quality": {"rows": _records(quality)},
        "assignment": assignment,
        "agreement": agreement,
        "timings": {k: round(v, 3) for k, v in timings.items()},
        "progress_total": steps,
    }
    return report


def mixed_design(
    df: pd.DataFrame, plan: AnalysisPlan
) -> tuple[pd.DataFrame, list[str], tuple[str, ...]]:
    """The frame, covariates and topic grouping the plan's mixed model uses.

    With ``topic: fixed`` each topic but the first (sorted) gets a 0/1 column
    ``topic[<name>]`` entered as a fixed effect, and topic is no random intercept.
    """
    covariates = list(plan.covariates)
    if plan.topic != "fixed":
        return df, covariates, ("topic",)
    levels = sorted(df["topic"].dropna().astype(str).unique())
    dummies = {f"topic[{lv}]": (df["topic"].astype(str) == lv).astype(float) for lv in levels[1:]}
    return df.assign(**dummies), covariates + list(dummies), ()


def _mixed_formula_differs(plan: AnalysisPlan, registered: AnalysisPlan) -> bool:
    """Whether the registered plan tests the mixed model with another formula."""
    return "mixed" in registered.tests and (registered.covariates, registered.topic) != (
        plan.covariates,
        plan.topic,
    )


def _registered_differences(plan: AnalysisPlan, registered: AnalysisPlan) -> list[str]:
    """What of the registered plan the report does not recompute: the resampling
    settings and seed of the consistency and agreement sections follow the current plan."""
    ours, theirs = plan.option_overrides(), registered.option_overrides()
    keys = sorted(set(ours) | set(theirs))
    return [
        f"{k}: registered {theirs.get(k, 'configured default')}, "
        f"current {ours.get(k, 'configured default')}"
        for k in keys
        if ours.get(k) != theirs.get(k)
    ]


def planned_tests(
    tests: dict[str, dict[str, Any]],
    fits: Mapping[str, dict[str, Any]],
    *,
    plan: AnalysisPlan,
    registered: AnalysisPlan | None,
    metrics: Sequence[str],
    baseline: str,
    registered_mixed: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The plan section: the plan, its hash, and the families it corrects.

    The comparisons of Tests 1-3 get the current plan's columns; a registered plan that
    differs is applied to copies, so both sets of results can be shown. When the two
    plans' mixed-model formulas differ, ``registered_mixed`` holds the registered
    formula's fits, and the registered plan's mixed-model tests use them.
    """

    def mixed_tests(fits: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        ok_fits = {m: f for m, f in fits.items() if "error" not in f}
        return mixed_comparisons(ok_fits, baseline=baseline)

    all_tests = {**tests, "mixed": mixed_tests(fits)}
    digest = plan_hash(plan)
    multiplicity = apply_plan(all_tests, plan, metrics=metrics)
    for name, result in tests.items():
        result["planned"] = planned_summary(result, test=name, plan=plan)
    section: dict[str, Any] = {
        "document": plan_document(plan),
        "hash": digest,
        "default": plan.is_default(),
        "multiplicity": multiplicity,
        "voice": plan_voice(
            plan=plan,
            multiplicity=multiplicity,
            metrics=metrics,
            baseline=baseline,
            tests=list(tests),
            plan_hash=digest,
        ),
        "registered": None,
        "deviation": False,
    }
    if registered is not None:
        reg_hash = plan_hash(registered)
        section["registered"] = {"document": plan_document(registered), "hash": reg_hash}
        if reg_hash != section["hash"]:
            section["deviation"] = True
            reg_tests = copy.deepcopy(all_tests)
            if registered_mixed is not None:
                reg_tests["mixed"] = mixed_tests(registered_mixed["fits"])
                section["registered"]["mixed_model"] = registered_mixed["model"]
                section["registered"]["mixed_fits"] = registered_mixed["fits"]
            section["registered"]["multiplicity"] = apply_plan(
                reg_tests, registered, metrics=metrics, write=False
            )
            section["registered"]["not_recomputed"] = _registered_differences(plan, registered)
    return section


def multiplicity_rows(report: dict[str, Any]) -> pd.DataFrame:
    """multiplicity.csv: every family member under the current (and registered) plan."""
    rows: list[dict[str, Any]] = []
    plan = report.get("plan") or {}
    sources = [("current", plan.get("hash"), plan.get("multiplicity"))]
    reg = plan.get("registered") or {}
    if reg.get("multiplicity"):
        sources.append(("registered", reg.get("hash"), reg["multiplicity"]))
    for which, digest, section in sources:
        if not section:
            continue
        for fam in section.get("families", []):
            for m in fam["members"]:
                rows.append(
                    {
                        "plan": which,
                        "plan_hash": digest,
                        "family": fam["name"],
                        "family_size": fam["size"],
                        "method": section["method"],
                        "alpha": section["alpha"],
                        **m,
                    }
                )
    columns = ["plan", "plan_hash", "family", "family_size", "method", "alpha", "test"]
    columns += ["metric", "condition", "alternative", "p_unadjusted", "p_adjusted", "reject"]
    return pd.DataFrame(rows, columns=columns)


def build_ordinal(
    df: pd.DataFrame,
    *,
    metrics: Sequence[str],
    baseline: str,
    idea_unit: str,
    options: ReportOptions,
) -> dict[str, Any]:
    """The ordinal check: a cumulative-logit mixed model per metric beside the linear one."""
    from .ordinal import fit_ordinal

    primary = options.consistency_metric if options.consistency_metric in metrics else metrics[-1]
    out: dict[str, Any] = {
        "model": (
            f"ordered score ~ condition ({baseline} baseline), logit link, one threshold "
            "between each pair of adjacent observed levels, crossed random intercepts for "
            "reviewer and idea"
            + (" within condition" if idea_unit == "source_idea_id" else "")
            + "; Laplace approximation (as R's ordinal::clmm)"
        ),
        "fits": {},
    }
    if options.ordinal == "none":
        return {**out, "available": False, "reason": "turned off in the report options"}
    chosen = list(metrics)
    if options.ordinal == "primary" or len(df) > options.ordinal_all_max_rows:
        chosen = [primary]
        if options.ordinal == "all":
            out["note"] = (
                f"{len(df)} rows: the ordinal check is fitted for the primary metric "
                f"({primary}) only (all metrics up to {options.ordinal_all_max_rows} rows)"
            )
    for metric in chosen:
        try:
            out["fits"][metric] = fit_ordinal(
                df, metric, baseline=baseline, groups=("reviewer_id", idea_unit)
            ).to_dict()
        except ValueError as exc:
            out["fits"][metric] = {"metric": metric, "error": str(exc)}
    out["available"] = True
    return out


def ordinal_rows(report: dict[str, Any]) -> pd.DataFrame:
    """ordinal.csv: one row per threshold, fixed effect and random-effect SD."""
    rows: list[dict[str, Any]] = []
    for metric, fit in (report.get("ordinal") or {}).get("fits", {}).items():
        base = {"metric": metric, "loglik": fit.get("loglik"), "engine": fit.get("engine")}
        for row in fit.get("thresholds") or []:
            rows.append({**base, "kind": "threshold", **row})
        for row in fit.get("fixed") or []:
            rows.append({**base, "kind": "fixed", **row})
        for name, sd in (fit.get("sd") or {}).items():
            rows.append(
                {
                    **base,
                    "kind": "sd",
                    "term": name,
                    "coef": sd,
                    "boundary": name in (fit.get("boundary") or []),
                }
            )
        if "error" in fit:
            rows.append({**base, "kind": "error", "term": fit["error"]})
    columns = ["metric", "kind", "term", "coef", "se", "z", "p", "ci_low", "ci_high"]
    columns += ["odds_ratio", "boundary", "loglik", "engine"]
    return pd.DataFrame(rows, columns=columns)


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
                    "boundary": name in (fit.get("boundary") or []),
                    "loglik": fit.get("loglik"),
                    "engine": fit.get("engine"),
                }
            )
    tables["mixed_effects"] = pd.DataFrame(mixed_rows)
    if "ordinal" in report:
        tables["ordinal"] = ordinal_rows(report)
    if "plan" in report:
        tables["multiplicity"] = multiplicity_rows(report)
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
    if "agreement" in report:
        tables["agreement"] = agreement_rows(report)
    return tables


# ------------------------------------------------------------------- agreement section


@dataclass
class JudgeData:
    """One judge as plain frames (agreement.py's `judge_scores` / `judge_pairs`).

    `computed` marks a no-LLM baseline the report computed itself (no stored run)."""

    key: str
    label: str
    method: str
    baseline: bool
    model: str = ""
    judge_scores: pd.DataFrame | None = None
    judge_pairs: pd.DataFrame | None = None
    lengths: Mapping[str, float] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    computed: bool = False


def _cell(
    value: Any,
    fmt: str,
    how: str,
    *,
    n: Any = None,
    ci: tuple[Any, Any] = (None, None),
    reason: str | None = None,
) -> dict[str, Any]:
    return {
        "value": json_float(value) if isinstance(value, float | np.floating) else _plain(value),
        "format": fmt,
        "ci_low": json_float(ci[0]) if ci[0] is not None else None,
        "ci_high": json_float(ci[1]) if ci[1] is not None else None,
        "n": _plain(n),
        "how": how,
        "reason": reason,
    }


def _p(x: Any) -> str:
    if x is None:
        return "–"
    return f"{x:.3f}" if x >= 0.001 else f"{x:.1e}"


def _pc(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def computed_baselines(
    df: pd.DataFrame,
    *,
    metric: str,
    lengths: Mapping[str, float] | None,
    reasons: Mapping[str, str | None],
    seed: int,
) -> tuple[list[JudgeData], dict[str, Any]]:
    """The no-LLM baselines as rankings of the reviewed ideas, for studies without a stored
    baseline run: a seeded random ranking, and the text length ranking (what longer-text-
    wins converges to). A baseline that cannot run (no text) is reported with its reason,
    never with a number."""
    ideas = sorted(set(df["idea_id"]))
    out: list[JudgeData] = []
    status: dict[str, Any] = {}
    rng = np.random.default_rng(seed)
    rand = pd.DataFrame({"idea_id": ideas, "metric": metric, "score": rng.permutation(len(ideas))})
    out.append(
        JudgeData(
            key="baseline_random",
            label="Baseline: random ranking",
            method="baseline_random",
            baseline=True,
            judge_scores=rand.astype({"score": float}),
            computed=True,
        )
    )
    status["baseline_random"] = {
        "available": True,
        "reason": None,
        "how": f"computed in the report: a random ranking of the {len(ideas)} reviewed ideas "
        f"(seed {seed}), scored on {metric}",
    }
    reason = reasons.get("baseline_longer")
    usable = lengths is not None and any(lengths.get(i, 0) > 0 for i in ideas)
    if usable and reason is None:
        assert lengths is not None
        longer = pd.DataFrame(
            {
                "idea_id": ideas,
                "metric": metric,
                "score": [float(lengths.get(i, np.nan)) for i in ideas],
            }
        )
        out.append(
            JudgeData(
                key="baseline_longer",
                label="Baseline: longer text",
                method="baseline_longer",
                baseline=True,
                judge_scores=longer,
                lengths=lengths,
                computed=True,
            )
        )
        status["baseline_longer"] = {
            "available": True,
            "reason": None,
            "how": "computed in the report: ideas ranked by the length (characters) of the "
            f"text a judge would see, scored on {metric}",
        }
    else:
        status["baseline_longer"] = {
            "available": False,
            "reason": reason or "longer-text-wins cannot run: the ideas have no text",
            "how": None,
        }
    return out, status


def _agreement_ceiling(
    df: pd.DataFrame,
    *,
    metrics: list[str],
    judges: Sequence[JudgeData],
    consistency: Mapping[str, Any],
    o: ReportOptions,
) -> dict[str, Any]:
    """The human ceiling per metric: human-human split-half consistency on all ideas.

    The headline metric's value (with CI) comes from the consistency section; the others
    get a CI here. A CI for a non-headline metric is only worth its cost where a judge
    scored it."""
    from . import agreement as ag

    judged = {
        str(m)
        for j in judges
        if not j.computed and j.judge_scores is not None
        for m in j.judge_scores["metric"].unique()
    }
    ceiling: dict[str, Any] = {}
    for m in metrics:
        known = (consistency.get("by_metric") or {}).get(m, {}).get("all")
        if known is None or (known.get("ci_low") is None and m in judged):
            try:
                # Draws shrink past 1,500 idea units, as for each judge (agreement.py).
                units = int(df.groupby(["condition", "idea_id"]).ngroups)
                known = cons.inter_reviewer_consistency(
                    df,
                    m,
                    rows="all",
                    n_splits=ag.scaled_draws(o.consistency_splits, units),
                    n_bootstrap=ag.scaled_draws(o.agreement_bootstrap, units),
                    n_permutations=0,
                    splits_per_resample=max(1, round(10 * min(1.0, ag.SCALE_UNITS / units))),
                    seed=o.seed,
                )
            except ValueError as exc:
                known = {"balanced_accuracy": None, "reason": str(exc)}
        ceiling[m] = known
    return ceiling


def _judge_agreement_entry(
    df: pd.DataFrame,
    j: JudgeData,
    *,
    metrics: list[str],
    head: str,
    human_pairs: pd.DataFrame | None,
    o: ReportOptions,
    ceilings: dict[Any, Any],
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One judge's entry in the agreement section, and its result when it could be
    computed (None when the run has nothing to compare or the comparison failed)."""
    from . import agreement as ag

    scores = j.judge_scores
    if scores is not None:
        scores = scores[scores["metric"].isin(metrics)]
        if j.computed:
            scores = scores[scores["metric"] == head]
        if scores.empty:
            scores = None
    entry: dict[str, Any] = {
        "key": j.key,
        "label": j.label,
        "method": j.method,
        "baseline": j.baseline,
        "computed_in_report": j.computed,
        "model": j.model,
        "info": j.info,
    }
    if scores is None and j.judge_pairs is None:
        entry.update(available=False, reason="the run produced no score on a form metric")
        return entry, None
    judged = set() if scores is None else set(scores["metric"].unique())
    try:
        res = ag.judge_agreement(
            df,
            judge_scores=scores,
            judge_pairs=j.judge_pairs if j.judge_pairs is not None and len(j.judge_pairs) else None,
            human_pairs=human_pairs,
            metrics=None if scores is None else [m for m in metrics if m in judged],
            lengths=j.lengths,
            rows="all",
            n_splits=o.agreement_splits,
            n_bootstrap=o.agreement_bootstrap,
            n_permutations=o.agreement_permutations,
            seed=o.seed,
            ceiling_cache=ceilings,
        )
    except ValueError as exc:
        entry.update(available=False, reason=str(exc))
        return entry, None
    entry.update(available=True, reason=None, result=res)
    return entry, res


def _number_footnotes(tables: list[dict[str, Any]]) -> list[str]:
    """Give every cell of `tables` its footnote number; the footnotes in that order."""
    notes: list[str] = []
    for table in tables:
        for row in table["rows"]:
            for cell in row["cells"].values():
                notes.append(cell["how"])
                cell["note"] = len(notes)
    return notes


def build_agreement(
    df: pd.DataFrame,
    *,
    metrics: Sequence[str],
    judges: Sequence[JudgeData],
    human_pairs: pd.DataFrame | None,
    consistency: Mapping[str, Any],
    options: ReportOptions,
    baselines: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Human-LLM agreement for every judge, with the human ceiling beside it.

    Tables are judges x metrics; each cell carries its value, CI, n and one sentence saying
    how it was computed (shown on hover in the page and as a footnote in the files).
    """
    from . import agreement as ag

    metrics = list(metrics)
    o = options
    head = consistency.get("metric", metrics[-1]) if consistency.get("available") else metrics[-1]
    out: dict[str, Any] = {
        "available": bool(judges),
        "n_judges": sum(not j.computed for j in judges),
        "reason": None
        if any(not j.computed for j in judges)
        else "This study has no finished judge run: only the human ceiling and the no-LLM "
        "baselines the report computes itself are shown. Run a judge on the Judges page.",
        "metrics": metrics,
        "headline_metric": head,
        "options": {
            "splits": o.agreement_splits,
            "bootstrap": o.agreement_bootstrap,
            "permutations": o.agreement_permutations,
            "top_fraction": 0.25,
            "seed": o.seed,
            "rows": "all",
        },
        "baselines": dict(baselines or {}),
        "judges": [],
        "tables": [],
    }

    out["ceiling"] = _agreement_ceiling(
        df, metrics=metrics, judges=judges, consistency=consistency, o=o
    )

    results: list[tuple[JudgeData, dict[str, Any]]] = []
    ceilings: dict[Any, Any] = {}  # the human ceiling, once per metric for all judges
    for j in judges:
        entry, res = _judge_agreement_entry(
            df, j, metrics=metrics, head=head, human_pairs=human_pairs, o=o, ceilings=ceilings
        )
        out["judges"].append(entry)
        if res is not None:
            results.append((j, res))

    alpha_judges = {
        j.key: j.judge_scores for j, _ in results if j.judge_scores is not None and not j.computed
    }
    out["krippendorff"] = {
        m: ag.krippendorff_with_judges(df, alpha_judges, m, level="ordinal") for m in metrics
    }
    out["human_pairs"] = {
        "n_ratings": 0 if human_pairs is None else len(human_pairs),
        "n_reviewers": 0 if human_pairs is None else int(human_pairs["reviewer_id"].nunique()),
    }
    out["tables"] = _agreement_tables(out, results, metrics)
    out["footnotes"] = _number_footnotes(out["tables"])
    return out


def _row(key: str, label: str, kind: str, cells: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "label": label, "kind": kind, "cells": cells}


def _kind(j: JudgeData) -> str:
    return "baseline" if j.baseline else "judge"


def _agreement_tables(
    out: dict[str, Any], results: Sequence[tuple[JudgeData, dict[str, Any]]], metrics: list[str]
) -> list[dict[str, Any]]:
    cols = [{"key": m, "label": m} for m in metrics]
    return [
        _consistency_table(out, results, metrics, cols),
        _correlation_table(results, cols),
        _top_k_table(results, cols),
        _pairwise_table(out, results),
        _diagnostics_table(results),
        _krippendorff_table(out, results, metrics, cols),
    ]


def _consistency_table(
    out: dict[str, Any],
    results: Sequence[tuple[JudgeData, dict[str, Any]]],
    metrics: list[str],
    cols: list[dict[str, str]],
) -> dict[str, Any]:
    """Si et al. consistency: each judge against the human–human ceiling."""
    rows = []
    cells = {}
    for m in metrics:
        c = out["ceiling"][m]
        if c.get("balanced_accuracy") is None:
            cells[m] = _cell(
                None,
                "pct",
                f"Human–human consistency on {m}: not computable.",
                reason=c.get("reason"),
            )
            continue
        cells[m] = _cell(
            c["balanced_accuracy"],
            "pct",
            f"Human–human ceiling on {m}: each unit's reviews split in random halves "
            f"{c['n_splits']} times; one half's means pick the top and bottom "
            f"{c['top_fraction']:.0%} ({c['n_selected']} of {c['n_units']} idea × condition "
            f"units, {c['n_reviews']} reviews), the other half's median split scores them "
            f"(balanced accuracy, mean over splits); 95% CI: percentile bootstrap over units "
            f"({c.get('n_bootstrap', 0)} resamples).",
            n=c["n_units"],
            ci=(c.get("ci_low"), c.get("ci_high")),
        )
    rows.append(_row("ceiling", "Human ceiling (human–human)", "ceiling", cells))
    for j, res in results:
        if "consistency" not in res:
            continue
        cells = {}
        for m in metrics:
            c = res["consistency"].get(m)
            if c is None:
                continue
            if c.get("balanced_accuracy") is None:
                cells[m] = _cell(
                    None,
                    "pct",
                    f"{j.label} on {m}: not computable: {c['reason']}.",
                    n=c["n_units"],
                    reason=c["reason"],
                )
                continue
            cells[m] = _cell(
                c["balanced_accuracy"],
                "pct",
                f"{j.label} on {m}: its scores pick the top and bottom "
                f"{c['top_fraction']:.0%} of {c['n_units']} units ({c['n_selected']} picked, "
                f"{c['n_reviews']} reviews), scored against a random half of each unit's "
                f"reviewers (balanced accuracy, mean over {c['n_splits']} splits); 95% CI: "
                f"bootstrap over units ({c['n_bootstrap']} resamples); permutation p = "
                f"{_p(c.get('p_value'))} ({c['n_permutations']} shuffles); the other half of "
                f"the reviewers on the same splits: {_pc(c.get('human_same_splits'))}.",
                n=c["n_units"],
                ci=(c.get("ci_low"), c.get("ci_high")),
            )
        rows.append(_row(j.key, j.label, _kind(j), cells))
    return {
        "id": "consistency",
        "title": "Consistency with the reviewers (Si et al. metric), judge vs. human ceiling",
        "caption": "Balanced accuracy of top/bottom 25 % picks against a random half of "
        "the reviewers; 50 % is chance. The ceiling row is the reviewers' own agreement.",
        "columns": cols,
        "rows": rows,
    }


def _correlation_table(
    results: Sequence[tuple[JudgeData, dict[str, Any]]], cols: list[dict[str, str]]
) -> dict[str, Any]:
    """Rank correlation of each judge with the human mean per idea."""
    rows = []
    for j, res in results:
        if "absolute" not in res:
            continue
        cells = {}
        for m, info in res["absolute"]["by_metric"].items():
            s = info["spearman"]
            k = info["kendall"]
            how = (
                f"{j.label} on {m}: Spearman ρ between the judge's score and the mean human "
                f"score per idea (each review once), n = {info['n_ideas']} ideas "
                f"({info['n_reviews']} reviews); 95% CI: percentile bootstrap over ideas "
                f"({s.get('n_bootstrap_used', 0)} of {s.get('n_bootstrap', 0)} resamples usable); "
                f"p = {_p(s.get('p_value'))}; Kendall τ-b = "
                + ("–" if k.get("estimate") is None else f"{k['estimate']:.3f}")
                + "."
            )
            cells[m] = _cell(
                s.get("estimate"),
                "num3",
                how
                if s.get("reason") is None
                else f"{j.label} on {m}: Spearman ρ not computable: {s['reason']}.",
                n=info["n_ideas"],
                ci=(s.get("ci_low"), s.get("ci_high")),
                reason=s.get("reason"),
            )
        rows.append(_row(j.key, j.label, _kind(j), cells))
    return {
        "id": "correlation",
        "title": "Rank correlation with the human mean per idea (Spearman ρ)",
        "caption": "Kendall τ-b and Pearson r with their CIs are in report.json and "
        "agreement.csv. No human–human row: a split-half ρ is not the same quantity.",
        "columns": cols,
        "rows": rows,
    }


def _top_k_table(
    results: Sequence[tuple[JudgeData, dict[str, Any]]], cols: list[dict[str, str]]
) -> dict[str, Any]:
    """Overlap of each judge's top ideas with the reviewers' top ideas."""
    rows = []
    for j, res in results:
        if "top_k" not in res:
            continue
        cells = {}
        for m, t in res["top_k"].items():
            if t.get("overlap") is None:
                cells[m] = _cell(
                    None,
                    "num1",
                    f"{j.label} on {m}: top-k overlap not computable: {t['reason']}.",
                    n=t["n_ideas"],
                    reason=t["reason"],
                )
                continue
            cells[m] = _cell(
                t["overlap"],
                "num1",
                f"{j.label} on {m}: of the humans' {t['k']} best ideas (by mean score) among "
                f"n = {t['n_ideas']} ideas, the expected number also among the judge's {t['k']} "
                f"best (ties at the cut broken at random); chance {t['expected_by_chance']:.1f}; "
                f"hypergeometric p = {_p(t.get('p_value'))}.",
                n=t["n_ideas"],
            )
            cells[m]["k"] = t["k"]
        rows.append(_row(j.key, j.label, _kind(j), cells))
    return {
        "id": "top_k",
        "title": "Top-25 % overlap with the reviewers' best ideas (as Si et al. Table 12)",
        "caption": "Expected overlap of the two top-k sets; k is a quarter of the ideas "
        "both scored.",
        "columns": cols,
        "rows": rows,
    }


def _pairwise_judge_cells(name: str, dim: str, block: dict[str, Any]) -> dict[str, Any]:
    """One judge's pairwise cells on one dimension, against ratings and means."""
    vr, vm = block["vs_human_ratings"], block["vs_human_means"]
    cells: dict[str, Any] = {}
    if vr.get("with_ties"):
        n = vr["n"]
        cells["ratings_acc"] = _cell(
            vr["with_ties"]["accuracy"],
            "pct",
            f"{name}: share of the {n} reviewer pair ratings (of {vr['n_pairs']} judged "
            "pairs) whose choice (either idea or tie) equals the judge's preference, "
            "summed over both orders.",
            n=n,
            reason=vr.get("reason"),
        )
        cells["ratings_kappa"] = _cell(
            vr["with_ties"]["kappa"],
            "num3",
            f"{name}: Cohen's κ over the same {n} ratings, three labels, each item "
            "counted in both orientations of the pair.",
            n=n,
        )
        nd = vr["without_ties"]["n"]
        cells["ratings_acc_nt"] = _cell(
            vr["without_ties"]["accuracy"],
            "pct",
            f"{name}: accuracy over the {nd} ratings where neither the judge nor the "
            f"reviewer said tie ({vr['without_ties']['n_dropped']} dropped).",
            n=nd,
        )
    else:
        for key in ("ratings_acc", "ratings_kappa", "ratings_acc_nt"):
            cells[key] = _cell(None, "pct", f"{name}: {vr.get('reason')}.", reason=vr.get("reason"))
    if vm.get("with_ties"):
        n = vm["n"]
        cells["means_acc"] = _cell(
            vm["with_ties"]["accuracy"],
            "pct",
            f"{name}: share of {n} judged pairs whose two ideas have reviews where the "
            "judge's preference equals the idea with the higher human mean on "
            f"{dim} (equal means = tie).",
            n=n,
            reason=vm.get("reason"),
        )
        cells["means_kappa"] = _cell(
            vm["with_ties"]["kappa"],
            "num3",
            f"{name}: Cohen's κ over the same {n} pairs, each counted in both orientations.",
            n=n,
        )
    else:
        for key in ("means_acc", "means_kappa"):
            cells[key] = _cell(None, "pct", f"{name}: {vm.get('reason')}.", reason=vm.get("reason"))
    return cells


def _pairwise_ceiling_row(dim: str, hh: dict[str, Any]) -> dict[str, Any]:
    """The reviewer-vs-reviewer row of the pairwise table."""
    n = hh["n"]
    return _row(
        "ceiling",
        f"Human ceiling ({dim}: reviewer vs. reviewer)",
        "ceiling",
        {
            "ratings_acc": _cell(
                hh["with_ties"]["accuracy"],
                "pct",
                f"Human–human: over {hh['n_pairs']} pairs rated by two or more "
                f"reviewers, the share of the {n} reviewer couples choosing the "
                "same (either idea or tie).",
                n=n,
                reason=hh.get("reason"),
            ),
            "ratings_kappa": _cell(
                hh["with_ties"]["kappa"],
                "num3",
                f"Human–human Cohen's κ over the same {n} couples, both rater "
                "orders and both pair orientations.",
                n=n,
            ),
            "ratings_acc_nt": _cell(
                hh["without_ties"]["accuracy"],
                "pct",
                f"Human–human accuracy over the {hh['without_ties']['n']} couples "
                "where neither said tie.",
                n=hh["without_ties"]["n"],
            ),
        },
    )


def _pairwise_table(
    out: dict[str, Any], results: Sequence[tuple[JudgeData, dict[str, Any]]]
) -> dict[str, Any]:
    """Pairwise verdicts of each judge against reviewer ratings and means."""
    pcols = [
        {"key": "ratings_acc", "label": "vs. ratings: accuracy"},
        {"key": "ratings_kappa", "label": "κ"},
        {"key": "ratings_acc_nt", "label": "accuracy, no ties"},
        {"key": "means_acc", "label": "vs. means: accuracy"},
        {"key": "means_kappa", "label": "κ"},
    ]
    rows = []
    hh_done = False
    for j, res in results:
        for dim, block in (res.get("pairwise") or {}).get("by_dimension", {}).items():
            name = f"{j.label} ({dim})"
            cells = _pairwise_judge_cells(name, dim, block)
            rows.append(_row(f"{j.key}:{dim}", name, _kind(j), cells))
            hh = block.get("human_human") or {}
            if not hh_done and hh.get("with_ties"):
                hh_done = True
                rows.insert(0, _pairwise_ceiling_row(dim, hh))
    return {
        "id": "pairwise",
        "title": "Pairwise verdicts against the reviewers",
        "caption": "The judge's preference per pair is its verdicts summed over both "
        "orders (a verdict that flips with the order is a tie). "
        + (
            ""
            if out["human_pairs"]["n_ratings"]
            else "The study has no reviewer pair ratings, so only the comparison with "
            "human means is possible."
        ),
        "columns": pcols,
        "rows": rows,
    }


def _diagnostics_table(results: Sequence[tuple[JudgeData, dict[str, Any]]]) -> dict[str, Any]:
    """Position and length biases, parse failures and cost of each stored run."""
    dcols = [
        {"key": "position", "label": "position consistency"},
        {"key": "first", "label": "first-position wins"},
        {"key": "longer", "label": "longer-text wins"},
        {"key": "unparseable", "label": "unparseable"},
        {"key": "cost", "label": "cost per idea"},
    ]
    rows = []
    for j, res in results:
        if j.computed:
            continue
        d = res["diagnostics"]
        cells = {}
        pw, direct = d.get("pairwise"), d.get("direct")
        if pw:
            pos, first, longer = (
                pw["position_consistency"],
                pw["first_position_win_rate"],
                pw["longer_text_win_rate"],
            )
            cells["position"] = _cell(
                pos.get("consistency"),
                "pct",
                f"{j.label}: share of the {pos['n']} pairs judged in both orders (both verdicts "
                "parseable) where the two verdicts name the same winner or both say tie.",
                n=pos["n"],
                reason=pos.get("reason"),
            )
            cells["first"] = _cell(
                first.get("rate"),
                "pct",
                f"{j.label}: share of the {first['n']} decisive verdicts won by the idea shown "
                f"first; binomial p = {_p(first.get('p_value'))} against 50 %.",
                n=first["n"],
                reason=first.get("reason"),
            )
            cells["longer"] = _cell(
                longer.get("rate"),
                "pct",
                f"{j.label}: share of the {longer['n']} decisive verdicts between texts of "
                f"unequal length won by the longer text; p = {_p(longer.get('p_value'))}."
                if longer.get("rate") is not None
                else f"{j.label}: longer-text win rate {longer['reason']}.",
                n=longer["n"],
                reason=longer.get("reason"),
            )
        src = pw or direct or {}
        n_all = src.get("n_verdicts", src.get("n_rows"))
        cells["unparseable"] = _cell(
            src.get("unparseable_rate"),
            "pct",
            f"{j.label}: share of its {n_all} "
            + ("verdicts" if pw else "score rows")
            + " that could not be parsed.",
            n=n_all,
        )
        cost = src.get("cost_per_idea") or {}
        cells["cost"] = _cell(
            cost.get("value"),
            "money",
            f"{j.label}: total cost of the calls this run paid for "
            f"({cost.get('total_cost') or 0:.4f}) over the {cost.get('n_ideas')} ideas it judged."
            if cost.get("value") is not None
            else f"{j.label}: cost per idea {cost.get('reason')}.",
            n=cost.get("n_ideas"),
            reason=cost.get("reason"),
        )
        rows.append(_row(j.key, j.label, _kind(j), cells))
    return {
        "id": "diagnostics",
        "title": "Judge diagnostics",
        "caption": "Biases and failure rates of each stored run.",
        "columns": dcols,
        "rows": rows,
    }


def _krippendorff_table(
    out: dict[str, Any],
    results: Sequence[tuple[JudgeData, dict[str, Any]]],
    metrics: list[str],
    cols: list[dict[str, str]],
) -> dict[str, Any]:
    """Krippendorff's α among the reviewers, and with each judge as one more rater."""
    rows = []
    cells = {}
    for m in metrics:
        h = out["krippendorff"][m]["humans"]
        cells[m] = _cell(
            h["alpha"],
            "num3",
            f"Krippendorff's α (ordinal) among the reviewers on {m}: units = ideas, each review "
            f"once, {h['n_units']} ideas with two or more reviews ({h['n_values']} values).",
            n=h["n_units"],
            reason=h.get("reason"),
        )
    rows.append(_row("ceiling", "Reviewers only", "ceiling", cells))
    keys = {j.key: j for j, _ in results}
    for key, j in keys.items():
        cells = {}
        for m in metrics:
            b = out["krippendorff"][m]["judges"].get(key)
            if b is None:
                continue
            cells[m] = _cell(
                b["alpha"],
                "num3",
                f"α with {j.label} added as one more rater on {m}: {b['n_units']} ideas, "
                f"{b['n_values']} values; change from the reviewers' α "
                + ("–" if b["delta"] is None else f"{b['delta']:+.3f}")
                + (
                    " (judge values outside the reviewers' range)"
                    if b["outside_human_range"]
                    else ""
                )
                + ".",
                n=b["n_units"],
                reason=b.get("reason"),
            )
        if cells:
            rows.append(_row(key, f"+ {j.label}", _kind(j), cells))
    return {
        "id": "krippendorff",
        "title": "Krippendorff's α (ordinal), reviewers and each judge as one more rater",
        "caption": "",
        "columns": cols,
        "rows": rows,
    }


def agreement_rows(report: dict[str, Any]) -> pd.DataFrame:
    """The agreement tables in long form: one row per number, with its n and sentence."""
    recs = []
    for table in (report.get("agreement") or {}).get("tables", []):
        labels = {c["key"]: c["label"] for c in table["columns"]}
        for row in table["rows"]:
            for col, cell in row["cells"].items():
                recs.append(
                    {
                        "table": table["id"],
                        "row": row["key"],
                        "row_label": row["label"],
                        "kind": row["kind"],
                        "column": col,
                        "column_label": labels.get(col, col),
                        "value": cell["value"],
                        "ci_low": cell["ci_low"],
                        "ci_high": cell["ci_high"],
                        "n": cell["n"],
                        "how": cell["how"],
                        "reason": cell["reason"],
                    }
                )
    cols = [
        "table",
        "row",
        "row_label",
        "kind",
        "column",
        "column_label",
        "value",
        "ci_low",
        "ci_high",
        "n",
        "how",
        "reason",
    ]
    return pd.DataFrame(recs, columns=cols)
