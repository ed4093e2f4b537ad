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
import importlib.metadata
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
from .agreement_report import JudgeData, agreement_rows, build_agreement
from .frame import Progress, has_reviewer_ids, json_float, plain_value, unique_reviews
from .options import ReportOptions
from .plan import AnalysisPlan, apply_plan, mixed_comparisons, plan_document, plan_hash
from .plan_voice import plan_voice, planned_summary
from .quality_report import quality_rows

SCHEMA = "ideareview.report/3"
DEFAULT_OPTIONS = ReportOptions()


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for rec in table.to_dict(orient="records"):
        out.append(
            {
                str(k): (json_float(v) if isinstance(v, float | np.floating) else plain_value(v))
                for k, v in rec.items()
            }
        )
    return out


def _matrix(m: pd.DataFrame) -> dict[str, dict[str, float | None]]:
    return {str(r): {str(c): json_float(m.loc[r, c]) for c in m.columns} for r in m.index}


def software_versions() -> dict[str, str]:
    """The versions the report was computed with.

    Returns
    -------
    dict
        Package → version (ideareview, python, numpy, pandas, scipy, statsmodels): the
        report's "software" section, JSON-ready by design.
    """
    import scipy
    import statsmodels

    return {
        # From the installed distribution's metadata (pyproject.toml): the project
        # package's __init__ would load the Celery app into this pure layer.
        "ideareview": importlib.metadata.version("ideareview"),
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
    from .mixed import fit_mixed, wald_caution

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
        mixed["fits"][metric]["wald_caution"] = wald_caution(mixed["fits"][metric])
        if shared_ideas:
            # A sensitivity fit; two starts still show whether the optimum is unique.
            mixed["sensitivity"][metric] = fit(metric, "idea_id", min(2, options.mixed_starts))
    mixed["available"] = True
    if extras and options.crosscheck_lme4:
        mixed["lme4_crosscheck"] = lme4_crosscheck(
            df, mixed["fits"], baseline=baseline, idea_unit=idea_unit, reml=options.mixed_reml
        ).as_dict()
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
                ).as_dict()
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


def _review_sections(
    df: pd.DataFrame,
    *,
    metrics: list[str],
    conditions: list[str],
    options: ReportOptions,
    n_unique: int,
    notes: list[str],
    judges: Sequence[JudgeData],
    human_pairs: pd.DataFrame | None,
    baselines: Mapping[str, Any] | None,
    tick: Callable[[str], None],
    timings: dict[str, float],
) -> dict[str, Any]:
    """What the reviews say beyond the comparisons: metric correlations, consistency and
    reliability, per-topic means, review quality, the assignment and the human-LLM
    agreement, keyed as in the report; each stage's time goes to `timings`, and the
    consistency section's notes to `notes`. `n_unique` counts the unique reviews."""
    t0 = time.perf_counter()
    tick("metric correlations")
    correlations = _correlations_section(df, metrics, n_unique)
    timings["correlations"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    tick("inter-reviewer consistency and reliability")
    consistency = _consistency_section(df, metrics=metrics, options=options, notes=notes)
    reliability = _reliability_section(df, metrics, n_unique)
    timings["consistency"] = time.perf_counter() - t0

    tick("per-topic breakdown, review quality, assignment")
    per_topic = desc.per_topic(df, metrics, conditions)
    quality = desc.review_quality(df)
    assignment = desc.assignment_table(df).as_dict()

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

    return {
        "correlations": correlations,
        "consistency": consistency,
        "reliability": reliability,
        "per_topic": {"rows": _records(per_topic), "confidence": 0.95},
        "review_quality": {"rows": _records(quality)},
        "assignment": assignment,
        "agreement": agreement,
    }


def build_report(
    df: pd.DataFrame,
    *,
    metrics: Sequence[str],
    baseline: str,
    conditions: Sequence[str],
    options: ReportOptions = DEFAULT_OPTIONS,
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

    Parameters
    ----------
    df
        The analysis frame, one row per (review, condition) (`frame.py`).
    metrics, baseline, conditions
        The form's metrics, the baseline condition and the conditions shown (those
        without reviews are left out).
    options
        Draws, seeds and which checks run.
    progress
        Called with (step, steps, message) as the stages start.
    judges, human_pairs, baselines
        The agreement section's inputs, as above.
    plan, registered
        The current analysis plan (None: the default) and the frozen one, as above.

    Returns
    -------
    dict
        The report, JSON-ready by design: report.json is this dict written out, and the
        HTML, CSVs and package read it.
    """
    plan = plan or AnalysisPlan()
    metrics = list(metrics)
    conditions = [c for c in conditions if c in set(df["condition"])]
    if baseline not in conditions:
        raise ValueError(
            f"The baseline condition {baseline} has no submitted reviews yet; the report "
            "compares each condition with it."
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

    reviews = _review_sections(
        df,
        metrics=metrics,
        conditions=conditions,
        options=options,
        n_unique=len(uniq),
        notes=notes,
        judges=judges,
        human_pairs=human_pairs,
        baselines=baselines,
        tick=tick,
        timings=timings,
    )
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
        **reviews,
        "timings": {k: round(v, 3) for k, v in timings.items()},
        "progress_total": steps,
    }
    return report


def mixed_fits(
    df: pd.DataFrame,
    *,
    metrics: Sequence[str],
    baseline: str,
    options: ReportOptions,
    plan: AnalysisPlan,
) -> dict[str, Any]:
    """The report's main mixed-model fits per metric on ``df`` (no sensitivity fits): the
    model the quality section refits on the reviews the exclusion rules keep.

    Parameters
    ----------
    df
        The review frame.
    metrics, baseline, options, plan
        As for `build_report`.

    Returns
    -------
    dict
        Metric → its fit as the mixed-effects section holds it ("fits"), JSON-ready by
        design; a fit that failed is ``{"metric", "error"}``.
    """
    section, _ = _mixed_section(
        df, metrics=list(metrics), baseline=baseline, options=options, plan=plan,
        tick=lambda _message: None, extras=False,
    )  # fmt: skip
    return section["fits"]


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

    Parameters
    ----------
    tests
        Tests 1-3's report sections; each gets its "planned" entry and the plan's columns.
    fits
        Metric → the mixed-model fit.
    plan, registered
        The current plan and the frozen one (None: none frozen).
    metrics, baseline
        The report's metrics and baseline condition.
    registered_mixed
        {"model", "fits"} of the registered plan's mixed model, when its formula differs.

    Returns
    -------
    dict
        The report's "plan" section, JSON-ready by design: document, hash, default,
        multiplicity, voice, registered and deviation.
    """

    def mixed_tests(fits: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        ok_fits = {m: f for m, f in fits.items() if "error" not in f}
        return mixed_comparisons(ok_fits, baseline=baseline)

    all_tests = {**tests, "mixed": mixed_tests(fits)}
    digest = plan_hash(plan)
    multiplicity = apply_plan(all_tests, plan, metrics=metrics)
    for name, result in tests.items():
        result["planned"] = planned_summary(result, test=name, plan=plan).as_dict()
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
    """The ordinal check: a cumulative-logit mixed model per metric beside the linear one.

    Parameters
    ----------
    df
        The review frame.
    metrics, baseline
        The report's metrics and baseline condition.
    idea_unit
        The idea grouping column (``idea_id`` or ``source_idea_id``).
    options
        Which metrics get the check (``options.ordinal``) and the row limit for all.

    Returns
    -------
    dict
        The report's "ordinal" section, JSON-ready by design: model, fits (each
        `OrdinalResult.to_dict()`, or ``{"metric", "error"}``), available and, when only
        the primary metric was fitted, a note.
    """
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


@dataclass(frozen=True)
class Lme4Crosscheck:
    """The report's mixed models refitted by R's lmer (`lme4_crosscheck`).

    Attributes
    ----------
    available
        Whether R and lme4 could be run.
    reason
        Why not, when they could not; None when they could.
    by_metric
        Metric → the largest absolute differences of coefficients, SEs and variances,
        lme4's log-likelihood, the log-likelihoods' difference and lme4's time.
    """

    available: bool
    reason: str | None = None
    by_metric: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the mixed-effects section's "lme4_crosscheck" entry:
        available and reason when not run, available and by_metric when run."""
        if not self.available:
            return {"available": False, "reason": self.reason}
        return {"available": True, "by_metric": self.by_metric}


def lme4_crosscheck(
    df: pd.DataFrame, fits: dict[str, Any], *, baseline: str, idea_unit: str, reml: bool
) -> Lme4Crosscheck:
    """Refit the report's models through R's lmer and give the largest differences.

    Parameters
    ----------
    df
        The review frame.
    fits
        Metric → the report's mixed-model fit.
    baseline, idea_unit, reml
        As the report's model was fitted.

    Returns
    -------
    Lme4Crosscheck
        Why R could not run, or per metric the largest differences of coefficients, SEs
        and variances, the two log-likelihoods and lme4's time.
    """
    from .rcheck import RJob, lme4_fit_many, r_unavailable_reason

    reason = r_unavailable_reason()
    if reason is not None:
        return Lme4Crosscheck(available=False, reason=f"lme4 cross-check skipped: {reason}")
    metrics = [m for m, f in fits.items() if "error" not in f]
    jobs = [
        RJob(metric=m, baseline=baseline, reml=reml, groups=("topic", "reviewer_id", idea_unit))
        for m in metrics
    ]
    by_metric: dict[str, dict[str, Any]] = {}
    for metric, r in zip(metrics, lme4_fit_many(df, jobs), strict=True):
        ours = fits[metric]
        theirs = r.to_dict()
        ours_fixed = {row["term"]: row for row in ours["fixed"]}
        coef = max(abs(ours_fixed[t["term"]]["coef"] - t["coef"]) for t in theirs["fixed"])
        se = max(abs(ours_fixed[t["term"]]["se"] - t["se"]) for t in theirs["fixed"])
        var = max(abs(ours["variance"][k] - v) for k, v in theirs["variance"].items())
        by_metric[metric] = {
            "max_abs_diff_coef": coef,
            "max_abs_diff_se": se,
            "max_abs_diff_variance": var,
            "loglik_lme4": theirs["loglik"],
            "abs_diff_loglik": abs(ours["loglik"] - theirs["loglik"]),
            "lme4_seconds": theirs.get("fit_seconds"),
        }
    return Lme4Crosscheck(available=True, by_metric=by_metric)


def tidy_tables(report: dict[str, Any], df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Long-format CSVs: one row per number, columns named as in report.json.

    Parameters
    ----------
    report
        The report dict.
    df
        The review frame it was built on.

    Returns
    -------
    dict of DataFrame
        CSV name → table, as the report's files write them.
    """
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
    tables.update(quality_rows(report))
    return tables
