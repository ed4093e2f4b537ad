"""Building a study's report: rows → analysis → files (JSON, HTML with plots, CSVs, PDF)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from django.conf import settings
from django.core.files import File
from django.core.files.storage import Storage
from django.template.loader import render_to_string
from django.utils import timezone

from . import csvsafe
from .analysis import phase_plots, plots
from .analysis.agreement_report import JudgeData, computed_baselines
from .analysis.phases import PhaseComparison, phase_tables
from .analysis.plan import AnalysisPlan
from .analysis.quality_report import quality_section
from .analysis.report import (
    ReportOptions,
    build_report,
    mixed_design,
    mixed_fits,
    tidy_tables,
)
from .analysis.rounding import counted, fixed
from .analysis.threads import blas_thread_counts, blas_threads
from .jobs import job_progress
from .judge_ratings import judge_ratings_provider
from .judge_tables import judge_tables
from .models import JobRun, Study, StudyReport
from .package import package_build
from .phase_links import phase_report_section
from .report_formats import REPORT_FORMATS
from .selectors import (
    baseline_availability,
    human_pair_frame,
    idea_labels,
    idea_lengths,
    judge_inputs,
    review_frame,
)
from .services.audit import audit, audit_chain_check
from .services.plans import plan_registration, study_plan, study_registered_plan
from .services.quality import study_quality
from .storage import reports_storage, storage_folder_remove
from .work_folders import work_folder


def report_build(
    *,
    study: Study,
    job: JobRun | None = None,
    out_dir: Path | None = None,
    options: ReportOptions | None = None,
    echo: Callable[[str], None] | None = None,
) -> StudyReport:
    """Compute the full report of a study and save its files into the "reports" storage
    (`studies.storage`), and a copy into the folder `out_dir` when one is given.

    BLAS threads are limited to ``ANALYSIS_BLAS_THREADS`` for the whole job (the worker's
    report task and the command alike); the report records the counts it ran with.
    """
    with blas_threads(settings.ANALYSIS_BLAS_THREADS):
        return _report_build(study=study, job=job, out_dir=out_dir, options=options, echo=echo)


def _report_build(
    *,
    study: Study,
    job: JobRun | None,
    out_dir: Path | None,
    options: ReportOptions | None,
    echo: Callable[[str], None] | None,
) -> StudyReport:
    started = time.perf_counter()
    df = review_frame(study)
    if df.empty:
        raise ValueError(f"study {study.slug} has no submitted reviews to analyse")
    form = study.form_definition()
    plan, registered = study_plan(study), study_registered_plan(study)
    options = options or ReportOptions(
        consistency_splits=settings.ANALYSIS_CONSISTENCY_SPLITS,
        seed=settings.ANALYSIS_SEED,
        mixed_starts=settings.ANALYSIS_MIXED_STARTS,
        mixed_engine=settings.ANALYSIS_MIXED_ENGINE,
    )
    # The plan's resampling settings and seed win over the configured ones.
    options = dataclasses.replace(options, **plan.option_overrides())

    def progress(done: int, total: int, message: str) -> None:
        if job is not None:
            job_progress(job=job, done=done, total=total, message=message)
        if echo is not None:
            echo(f"[{done}/{total}] {message}")

    conditions = [c.key for c in study.conditions.order_by("key")]
    baseline = study.baseline()
    conditions = [baseline, *[c for c in conditions if c != baseline]]
    judges, baselines = study_judges(study, df, form.metric_keys, options)
    report = build_report(
        df,
        metrics=form.metric_keys,
        baseline=baseline,
        conditions=conditions,
        options=options,
        progress=progress,
        judges=judges,
        human_pairs=human_pair_frame(study),
        baselines=baselines,
        plan=plan,
        registered=registered,
    )
    report["runtime"] = {
        "blas_threads_setting": settings.ANALYSIS_BLAS_THREADS,
        "blas_threads": blas_thread_counts(),
    }
    if report["plan"]["registered"] is not None:
        report["plan"]["registered"].update(plan_registration(study) or {})
    report["agreement"]["judge_configs"] = judge_config_panels(study, options)
    report["quality"] = _quality_section(study, df, report, plan=plan, options=options)
    phases, comparison = phase_report_section(
        study=study, plan=plan, seed=options.seed, mixed_starts=options.mixed_starts
    )
    if phases is not None:
        report["phases"] = phases
    report["study"] = {
        "slug": study.slug,
        "title": study.title,
        "form": {"key": form.key, "version": form.version},
        "baseline": baseline,
        "conditions": [{"key": c.key, "kind": c.kind} for c in study.conditions.order_by("key")],
        "metrics": form.metric_keys,
        "metric_labels": form.labels(),
        "scales": {k: list(v) for k, v in form.scales().items()},
        "topics": [t.name for t in study.topics.all()],
    }
    # The audit chain's head when the report was built: a later edit of the log shows.
    report["audit"] = audit_chain_check(study).as_dict()
    progress(
        report["progress_total"] - 1, report["progress_total"], "drawing plots and writing files"
    )
    version = f"{study.slug}/{timezone.now().strftime('%Y%m%dT%H%M%S%f')}"
    storage = reports_storage()
    _versions_remove_unshown(storage, study)
    with work_folder("report") as out:
        # matplotlib, chromium and the zip writer want real paths: the files are made
        # in a local folder, then saved into the storage.
        _write_files(study, report, df, judges, out, started=started, comparison=comparison)
        _save_version(storage, out, version)
        if out_dir is not None:
            # A folder named on the command line gets a copy; its other files stay.
            shutil.copytree(out, out_dir, dirs_exist_ok=True)
    # Only now, with every file saved, does a row (and so a page) name the version.
    snapshot = StudyReport.objects.create(study=study, job=job, data=report, directory=version)
    if job is not None:
        # The done line shows the job's message: what was built, not the last step's name.
        counts = report["data"]
        job.message = (
            f"report built from {counted(counts['unique_reviews'], 'review')} of "
            f"{counted(counts['ideas'], 'idea')} in {time.perf_counter() - started:.0f} s"
        )
        job.save(update_fields=["message"])
    audit(
        study=study,
        actor=job.created_by if job else None,
        verb="report_built",
        directory=version,
    )
    return snapshot


def _quality_section(
    study: Study,
    df: pd.DataFrame,
    report: dict[str, Any],
    *,
    plan: AnalysisPlan,
    options: ReportOptions,
) -> dict[str, Any]:
    """The flags of every submitted review, what the plan's rules remove, the primary
    tests without those reviews and the reviewers' leniency (docs/quality.md)."""
    quality = study_quality(study, plan=plan, embed_limit=settings.QUALITY_EMBED_PER_REPORT)

    def refit(frame: pd.DataFrame) -> dict[str, Any]:
        return mixed_fits(
            frame, metrics=report["metrics"], baseline=report["baseline"], options=options,
            plan=plan,
        )  # fmt: skip

    data, covariates, topic_groups = mixed_design(df, plan)
    idea_unit = report["mixed_effects"].get("idea_unit", "idea_id")
    return quality_section(
        df,
        report,
        design=(data, covariates, (*topic_groups, "reviewer_id", idea_unit)),
        flags=quality.flags,
        reviews=quality.reviews,
        plan=plan,
        refit_mixed=refit,
        pending=quality.pending,
    )


def _write_files(
    study: Study,
    report: dict[str, Any],
    df: pd.DataFrame,
    judges: list[JudgeData],
    out: Path,
    *,
    started: float,
    comparison: PhaseComparison | None = None,
) -> None:
    """Write the report's files (CSVs, HTML, PDF, JSON, package) into the folder `out`;
    a linked study's phase comparison adds its tables (`phase_*.csv`)."""
    tables = tidy_tables(report, df)
    tables.update(judge_tables(report))
    if comparison is not None:
        tables.update(phase_tables(comparison))
    csv_names = []
    for name, table in tables.items():
        csvsafe.frame_to_csv(table, out / f"{name}.csv", index=False)
        csv_names.append(f"{name}.csv")
    report["files"] = {
        "json": "report.json",
        "html": "report.html",
        "csv": sorted(csv_names),
        "pdf": "report.pdf" if pdf_available() else None,
    }
    if report["files"]["pdf"] is None:
        report["files"]["pdf_reason"] = pdf_unavailable_reason()
    html = render_report_html(report, df, judges)
    (out / "report.html").write_text(html)
    if report["files"]["pdf"]:
        t0 = time.perf_counter()
        try:
            report_pdf(out / "report.html", out / "report.pdf")
        except (OSError, subprocess.SubprocessError) as exc:
            report["files"]["pdf"] = None
            report["files"]["pdf_reason"] = f"chromium failed: {exc}"
        report["timings"]["pdf"] = round(time.perf_counter() - t0, 3)
    _write_extra_formats(report, df, out)
    report["files"]["package"] = "package.zip"
    report["timing_seconds"] = round(time.perf_counter() - started, 3)
    (out / "report.json").write_text(json.dumps(report, indent=2, allow_nan=False))
    t0 = time.perf_counter()
    # The package reads the report's files from the folder still being written.
    package_build(study=study, out=out / "package.zip", report_dir=out)
    report["timings"]["package"] = round(time.perf_counter() - t0, 3)


def _write_extra_formats(report: dict[str, Any], df: pd.DataFrame, out: Path) -> None:
    """Write each format of `REPORT_FORMATS` that brings its own writer, and name it in
    `report["files"]` (before report.json and the package are written, which list it)."""
    for fmt in REPORT_FORMATS:
        if fmt.write is None:
            continue
        body = fmt.write(report, df)
        path = out / fmt.name
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(body)
        report["files"][fmt.key] = fmt.name


def _save_version(storage: Storage, out: Path, version: str) -> None:
    """Save every file of `out` under `version` in the storage. A build killed in here
    leaves a version no row names: no page shows it, and the next build removes it."""
    for path in sorted(out.iterdir()):
        name = f"{version}/{path.name}"
        with path.open("rb") as fh:
            saved = storage.save(name, File(fh, name=path.name))
        if saved != name:
            raise OSError(f"report storage saved {name} as {saved}: the version is not fresh")


def _versions_remove_unshown(storage: Storage, study: Study) -> None:
    """Remove the study's report versions that no page shows: partial ones left by killed
    builds and those the newest report replaced. This assumes one build per study at a
    time: the report page starts no second job while one runs, but a `study_report`
    command run beside a running job is not guarded against."""
    shown = StudyReport.objects.filter(study=study).values_list("directory", flat=True).first()
    try:
        versions, _ = storage.listdir(study.slug)
    except FileNotFoundError:
        return
    for name in versions:
        if f"{study.slug}/{name}" != shown:
            storage_folder_remove(storage, f"{study.slug}/{name}")


def study_judges(
    study: Study, df: pd.DataFrame, metrics: Sequence[str], options: ReportOptions
) -> tuple[list[JudgeData], dict[str, Any]]:
    """The study's finished judge runs, plus the no-LLM baselines the report computes
    itself when no stored run of that baseline exists (labelled as computed)."""
    judges = judge_inputs(study, list(metrics), panel_bootstrap=options.panel_bootstrap)
    reasons = baseline_availability(study)
    head = options.consistency_metric if options.consistency_metric in metrics else metrics[-1]
    lengths = idea_lengths(study, idea_labels(study), "normalized")
    extra, status = computed_baselines(
        df,
        metric=head,
        lengths=lengths,
        reasons=reasons,
        seed=options.seed,
        chance_rankings=options.chance_rankings,
    )
    stored = {j.method for j in judges if j.baseline}
    for method in stored:
        how = "a stored baseline run"
        if method == "baseline_random":  # the chance row is computed all the same
            how += "; besides it, " + status[method]["how"].removeprefix("computed in the report: ")
        status[method] = {"available": True, "reason": None, "how": how}
    judges += [j for j in extra if j.method not in stored]
    return judges, status


def judge_config_panels(study: Study, options: ReportOptions) -> list[dict[str, Any]]:
    """The study's judge configs' pooled panels at the report's `panel_bootstrap`
    resamples (`JudgeRatingsProvider.config_panels`); none when no provider is registered."""
    provider = judge_ratings_provider()
    if provider is None:
        return []
    return provider.config_panels(study, panel_bootstrap=options.panel_bootstrap)


# --- PDF ---------------------------------------------------------------------------
# The PDF is Debian's chromium printing the self-contained report.html: the same text,
# tables, footnotes and vector plots, with no second layout to keep in step. chromium is
# already the browser of the e2e tests; without it the report says why there is no PDF.
# Its headless shell (Debian's chromium-headless-shell) comes first when installed: the
# same engine and the same pages, printed without starting the desktop browser's
# processes (docs/measurements.md).

CHROMIUM_CANDIDATES = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")


def _chromium() -> str | None:
    configured = settings.IDEAREVIEW_CHROMIUM
    if configured:
        return configured if Path(configured).exists() or shutil.which(configured) else None
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def pdf_available() -> bool:
    return _chromium() is not None


def pdf_unavailable_reason() -> str:
    return "no PDF: chromium was not found (apt-get install chromium, or set IDEAREVIEW_CHROMIUM)"


def report_pdf(html: Path, pdf: Path, *, timeout: float = 120) -> Path:
    """Print `html` to `pdf` with headless chromium (A4, backgrounds, no header/footer)."""
    exe = _chromium()
    if exe is None:
        raise OSError(pdf_unavailable_reason())
    with work_folder("pdf") as profile:
        subprocess.run(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--no-pdf-header-footer",
                "--run-all-compositor-stages-before-draw",
                f"--print-to-pdf={pdf.resolve()}",
                html.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=timeout,
        )
    if not pdf.exists() or pdf.stat().st_size == 0:
        raise OSError("chromium wrote no PDF")
    return pdf


def pdf_page_count(path: Path) -> int:
    """Pages of a PDF (chromium writes uncompressed page objects)."""
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", path.read_bytes()))


def _agreement_figures(
    report: dict[str, Any], df: pd.DataFrame, judges: Sequence[JudgeData]
) -> dict[str, Any]:
    from .analysis import agreement as ag

    agr = report.get("agreement") or {}
    metrics = report["metrics"]
    figs: dict[str, Any] = {}
    points = []
    human: dict[str, pd.Series] = {}
    for j in judges:
        if j.computed or j.judge_scores is None:
            continue
        judged = set(j.judge_scores["metric"])
        for m in metrics:
            if m not in judged:
                continue
            js = ag.judge_idea_scores(j.judge_scores, m)
            if m not in human:
                human[m] = ag.human_idea_means(df, m)[0]
            hm = human[m]
            both = js.index.intersection(hm.index)
            points.append(
                pd.DataFrame(
                    {
                        "judge": j.label,
                        "metric": m,
                        "judge_score": js.reindex(both).to_numpy(),
                        "human_mean": hm.reindex(both).to_numpy(),
                    }
                )
            )
    figs["scatter"] = (
        plots.judge_scatter(pd.concat(points, ignore_index=True), metrics) if points else ""
    )
    tables = {t["id"]: t for t in agr.get("tables", [])}
    cons = tables.get("consistency")
    if cons and not cons.get("unplotted"):
        ceiling = next((r for r in cons["rows"] if r["kind"] == "ceiling"), None)
        figs["bars"] = plots.agreement_bars(
            [r for r in cons["rows"] if r["kind"] != "ceiling"],
            metrics,
            ceiling=ceiling["cells"] if ceiling else {},
        )
    blocks = []
    for entry in agr.get("judges", []):
        pw = (entry.get("result") or {}).get("pairwise") or {}
        for dim, b in pw.get("by_dimension", {}).items():
            for key, xlabel in (
                ("vs_human_ratings", "reviewer ratings"),
                ("vs_human_means", "human means"),
            ):
                block = b.get(key) or {}
                if block.get("n"):
                    blocks.append(
                        {
                            "title": f"{entry['label']} ({dim}), n = {block['n']}",
                            "matrix": block["confusion"],
                            "xlabel": xlabel,
                        }
                    )
    figs["confusion"] = plots.confusion_matrices(blocks) if blocks else ""
    return figs


def report_figures(
    report: dict[str, Any], df: pd.DataFrame, judges: Sequence[JudgeData] = ()
) -> dict[str, Any]:
    metrics = report["metrics"]
    conditions = report["conditions"]
    per_topic = pd.DataFrame(report["per_topic"]["rows"])
    figures: dict[str, Any] = {
        "distributions": plots.score_distributions(
            df, metrics, conditions, scales=report.get("study", {}).get("scales")
        ),
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
            reference={"chance": 0.5, f"mean {fixed(cons['mean'], 3)}": cons["mean"]},
        )
    figures["agreement"] = _agreement_figures(report, df, judges)
    phases = report.get("phases") or {}
    if phases.get("available") and phases.get("ideas"):
        figures["phases"] = phase_plots.phase_slopes(
            pd.DataFrame(phases["ideas"]),
            metrics=phases["metrics"],
            conditions=phases["conditions"],
            labels=(phases["labels"][0], phases["labels"][1]),
            scales=phases["shared"]["scales"],
        )
    return figures


def render_report_html(
    report: dict[str, Any], df: pd.DataFrame, judges: Sequence[JudgeData] = ()
) -> str:
    # The same stylesheet serves the app's report page, so it lives with the static files.
    css = (Path(settings.BASE_DIR) / "static" / "css" / "report.css").read_text()
    return render_to_string(
        "studies/report_document.html",
        {
            "r": report,
            "fig": report_figures(report, df, judges) if settings.IDEAREVIEW_REPORT_FIGURES else {},
            "figures_off": not settings.IDEAREVIEW_REPORT_FIGURES,
            "css": css,
            "tests": [
                {"title": "Test 1: each review row a data point", "data": report["by_review"]},
                {"title": "Test 2: mean score per idea", "data": report["by_idea"]},
                {"title": "Test 3: per-reviewer differences", "data": report["by_reviewer"]},
            ],
        },
    )
