"""Wall time of the full study report: analysis (with agreement), HTML with plots, JSON,
CSVs, PDF and the reproducibility package.

    python bench/report.py [--size 30000] [--judges 3] [--draws 50] [--skip-si2024]
    python bench/report.py --smoke    # every part on a small simulated study (CI)

si2024: the released reviews imported into a throwaway in-memory database, then the real
`report_build` service (which writes every file and the package), timed per part; no
judge runs exist there, so agreement is the ceiling plus the report-computed baselines.

Simulated study (default 30,000 reviews, three judges): no database (importing 30,000
reviews would take minutes and measure the ORM, not the report). The frame comes from
`simulate_study`; each judge scores every idea and metric as the human mean plus noise
(SD 0.5, 1.0, 2.0). Timed: `build_report` with agreement (`--draws` splits, bootstrap
resamples and permutations per judge and metric), the HTML with plots, report.json, the
CSVs, the chromium PDF, and a package stand-in (a zip of the review rows as CSV, the
judge scores and the report files), since the package service reads rows from the DB.
BLAS threads are limited as `report_build` limits them (ANALYSIS_BLAS_THREADS).

Each line ends with the CPU time (user + sys, this process and chromium) and the load
average: on a shared machine the wall times grow with the load, the CPU time much less.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METRICS = ["novelty", "excitement", "feasibility", "effectiveness", "overall"]


def _smoke_options() -> Any:
    from studies.analysis.options import ReportOptions

    return ReportOptions(
        consistency_splits=20,
        consistency_bootstrap=20,
        consistency_permutations=20,
        mixed_starts=1,
        agreement_splits=10,
        agreement_bootstrap=10,
        agreement_permutations=10,
        panel_bootstrap=20,
    )


def _cpu() -> float:
    """CPU seconds (user + sys) of this process and its finished children (chromium)."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _line(name: str, parts: dict[str, float], total: float, cpu: float | None = None) -> None:
    detail = ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
    extra = f"  cpu {cpu:.2f} s, load average {os.getloadavg()[0]:.1f}" if cpu is not None else ""
    print(f"{name:<28} total {total:7.2f} s  ({detail}){extra}", flush=True)


def bench_si2024(smoke: bool = False) -> None:
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import setup_test_environment

    from studies.models import Study
    from studies.report_files import report_build

    setup_test_environment()
    connection.creation.create_test_db(verbosity=0, keepdb=False, serialize=False)
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("bench")
    data = ROOT / "data" / "si2024"
    call_command(
        "import_reviews",
        "--format",
        "si2024",
        "--reviews",
        str(data / "ideation_reviews.json"),
        "--titles",
        str(data / "idea_titles.csv"),
        "--study",
        "si2024",
        "--owner",
        "bench",
        "--baseline",
        "Human",
        stdout=io.StringIO(),
    )
    study = Study.objects.get(slug="si2024")
    with tempfile.TemporaryDirectory() as tmp:
        t0, cpu0 = time.perf_counter(), _cpu()
        # --smoke: the same parts with few resamples (the counts change the time, not
        # the code that runs)
        options = _smoke_options() if smoke else None
        snap = report_build(study=study, out_dir=Path(tmp) / "r", options=options)
        total, cpu = time.perf_counter() - t0, _cpu() - cpu0
        t = snap.data["timings"]
        analysis = sum(v for k, v in t.items() if k not in ("pdf", "package"))
        parts = {
            "analysis": analysis,
            **{k: t[k] for k in ("agreement", "pdf", "package") if k in t},
        }
        parts["html+json+csv+db"] = total - analysis - t.get("pdf", 0) - t.get("package", 0)
        _line("si2024 (report_build)", parts, total, cpu)


def bench_simulated(size: int, n_judges: int, draws: int) -> None:
    import numpy as np
    import pandas as pd
    from django.conf import settings

    from studies import csvsafe
    from studies.analysis.frame import unique_reviews
    from studies.analysis.report import JudgeData, ReportOptions, build_report, tidy_tables
    from studies.analysis.simulate import simulate_study
    from studies.analysis.threads import blas_threads
    from studies.report_files import pdf_available, render_report_html, report_pdf

    per_condition = max(10, size // (3 * 3))
    df = simulate_study(
        n_reviewers=max(20, size // 4),
        n_ideas_per_condition=per_condition,
        reviews_per_idea=3,
        load=(2, 7),
        metrics=METRICS,
        discretize=True,
        seed=1,
    )
    df["source_idea_id"] = df["idea_id"]
    means = unique_reviews(df).groupby("idea_id")[METRICS].mean()
    rng = np.random.default_rng(0)
    judges = []
    for k, sd in enumerate([0.5, 1.0, 2.0][:n_judges]):
        s = means.stack().rename("score").reset_index().rename(columns={"level_1": "metric"})
        s["score"] = s["score"] + rng.normal(0, sd, len(s))
        s["cost"] = 0.001
        judges.append(
            JudgeData(
                key=f"sim{k}",
                label=f"simulated judge (noise SD {sd})",
                method="direct",
                baseline=False,
                model="simulated",
                judge_scores=s,
            )
        )
    options = ReportOptions(
        agreement_splits=draws, agreement_bootstrap=draws, agreement_permutations=draws
    )
    parts: dict[str, float] = {}
    # BLAS threads as report_build limits them for a real report (ANALYSIS_BLAS_THREADS).
    limit = contextlib.ExitStack()
    limit.enter_context(blas_threads(settings.ANALYSIS_BLAS_THREADS))
    t_all, cpu0 = time.perf_counter(), _cpu()
    t0 = time.perf_counter()
    report = build_report(
        df,
        metrics=METRICS,
        baseline="Human",
        conditions=["Human", "AI", "AI_Rerank"],
        options=options,
        judges=judges,
    )
    parts["analysis"] = time.perf_counter() - t0
    parts["of which agreement"] = report["timings"]["agreement"]
    report["study"] = {"slug": "simulated", "title": f"simulated {size}"}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        t0 = time.perf_counter()
        for name, table in tidy_tables(report, df).items():
            csvsafe.frame_to_csv(table, out / f"{name}.csv", index=False)
        (out / "report.json").write_text(json.dumps(report, indent=2, allow_nan=False))
        parts["json+csv"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        (out / "report.html").write_text(render_report_html(report, df, judges))
        parts["html+plots"] = time.perf_counter() - t0
        if pdf_available():
            t0 = time.perf_counter()
            report_pdf(out / "report.html", out / "report.pdf")
            parts["pdf"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        with zipfile.ZipFile(out / "package.zip", "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("data/reviews.csv", csvsafe.frame_to_csv(df, index=False))
            z.writestr(
                "judges/judgments.csv",
                csvsafe.frame_to_csv(
                    pd.concat([j.judge_scores.assign(run=j.key) for j in judges]), index=False
                ),
            )
            for f in sorted(out.iterdir()):
                if f.name != "package.zip":
                    z.write(f, f"report/{f.name}")
        parts["package (stand-in)"] = time.perf_counter() - t0
    total, cpu = time.perf_counter() - t_all, _cpu() - cpu0
    limit.close()
    _line(f"simulated {len(unique_reviews(df))} reviews", parts, total, cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=30000)
    parser.add_argument("--judges", type=int, default=3)
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--skip-si2024", action="store_true")
    parser.add_argument(
        "--smoke", action="store_true", help="si2024, then 300 reviews, 2 judges, 10 draws"
    )
    args = parser.parse_args()
    if args.smoke:
        args.size, args.judges, args.draws = 300, 2, 10
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ideareview.settings")
    import django

    django.setup()
    if not args.skip_si2024:
        bench_si2024(smoke=args.smoke)
    if args.size:
        bench_simulated(args.size, args.judges, args.draws)


if __name__ == "__main__":
    main()
