"""Building a study's report: rows → analysis → files (JSON, HTML with plots, CSVs)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from django.conf import settings
from django.template.loader import render_to_string
from django.utils import timezone

from .analysis import plots
from .analysis.report import ReportOptions, build_report, tidy_tables
from .models import JobRun, Study, StudyReport
from .selectors import review_frame
from .services import audit, job_progress


def report_build(
    *,
    study: Study,
    job: JobRun | None = None,
    out_dir: Path | None = None,
    options: ReportOptions | None = None,
    echo: Callable[[str], None] | None = None,
) -> StudyReport:
    """Compute the full report of a study and write it to `out_dir` (default var/reports)."""
    started = time.perf_counter()
    df = review_frame(study)
    if df.empty:
        raise ValueError(f"study {study.slug} has no submitted reviews to analyse")
    form = study.form_definition()
    options = options or ReportOptions(
        consistency_splits=settings.ANALYSIS_CONSISTENCY_SPLITS,
        seed=settings.ANALYSIS_SEED,
        mixed_starts=settings.ANALYSIS_MIXED_STARTS,
        mixed_engine=settings.ANALYSIS_MIXED_ENGINE,
    )

    def progress(done: int, total: int, message: str) -> None:
        if job is not None:
            job_progress(job=job, done=done, total=total, message=message)
        if echo is not None:
            echo(f"[{done}/{total}] {message}")

    conditions = [c.key for c in study.conditions.order_by("key")]
    baseline = study.baseline()
    conditions = [baseline, *[c for c in conditions if c != baseline]]
    report = build_report(
        df,
        metrics=form.metric_keys,
        baseline=baseline,
        conditions=conditions,
        options=options,
        progress=progress,
    )
    report["study"] = {
        "slug": study.slug,
        "title": study.title,
        "form": {"key": form.key, "version": form.version},
        "baseline": baseline,
        "conditions": [{"key": c.key, "kind": c.kind} for c in study.conditions.order_by("key")],
        "metrics": form.metric_keys,
        "topics": [t.name for t in study.topics.all()],
    }
    progress(
        report["progress_total"] - 1, report["progress_total"], "drawing plots and writing files"
    )
    stamp = timezone.now().strftime("%Y%m%dT%H%M%S%f")
    out = Path(out_dir) if out_dir else Path(settings.REPORTS_ROOT) / study.slug / stamp
    out.mkdir(parents=True, exist_ok=True)
    tables = tidy_tables(report, df)
    csv_names = []
    for name, table in tables.items():
        table.to_csv(out / f"{name}.csv", index=False)
        csv_names.append(f"{name}.csv")
    report["files"] = {"json": "report.json", "html": "report.html", "csv": sorted(csv_names)}
    report["timing_seconds"] = round(time.perf_counter() - started, 3)
    (out / "report.json").write_text(json.dumps(report, indent=2, allow_nan=False))
    html = render_report_html(report, df)
    (out / "report.html").write_text(html)
    snapshot = StudyReport.objects.create(study=study, job=job, data=report, directory=str(out))
    audit(
        study=study, actor=job.created_by if job else None, verb="report_built", directory=str(out)
    )
    return snapshot


def report_figures(report: dict[str, Any], df: pd.DataFrame) -> dict[str, Any]:
    metrics = report["metrics"]
    conditions = report["conditions"]
    per_topic = pd.DataFrame(report["per_topic"]["rows"])
    figures: dict[str, Any] = {
        "distributions": plots.score_distributions(df, metrics, conditions),
        "correlations": plots.correlation_heatmap(
            pd.DataFrame(report["correlations"]["unique_reviews"]["matrix"]).loc[metrics, metrics],
            title=f"Pearson r, unique reviews (n = {report['correlations']['unique_reviews']['n']})",
        ),
        "topics": [
            {"metric": m, "svg": plots.topic_means(per_topic, m, conditions)} for m in metrics
        ],
    }
    coef_rows = [
        {**row, "metric": metric}
        for metric, fit in report["mixed_effects"]["fits"].items()
        if fit.get("fixed")
        for row in fit["fixed"]
        if row["term"] != "Intercept"
    ]
    figures["coefficients"] = (
        plots.coefficient_plot(coef_rows, baseline=report["baseline"]) if coef_rows else ""
    )
    cons = report.get("consistency", {})
    if cons.get("available") and cons.get("split_values"):
        figures["consistency"] = plots.histogram(
            cons["split_values"],
            xlabel="balanced accuracy of one random split",
            reference={"chance": 0.5, f"mean {cons['mean']:.3f}": cons["mean"]},
        )
    return figures


def render_report_html(report: dict[str, Any], df: pd.DataFrame) -> str:
    css = (Path(__file__).parent / "templates" / "studies" / "report.css").read_text()
    return render_to_string(
        "studies/report_document.html",
        {
            "r": report,
            "fig": report_figures(report, df),
            "css": css,
            "tests": [
                {"title": "Test 1: each review row a data point", "data": report["by_review"]},
                {"title": "Test 2: mean score per idea", "data": report["by_idea"]},
                {"title": "Test 3: per-reviewer differences", "data": report["by_reviewer"]},
            ],
        },
    )
