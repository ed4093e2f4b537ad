"""Compute a study's report: report.json, report.html, tidy CSVs, PDF and package, saved
into the reports storage (and copied to --out when given)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from studies.analysis.options import CHANCE_RANKINGS, chance_rankings_problem
from studies.analysis.report import ReportOptions
from studies.models import Study
from studies.report_files import report_build


class Command(BaseCommand):
    help = "Build the full statistical report of a study (JSON, self-contained HTML, CSVs)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument("--out", type=Path, help="also copy the files into this folder")
        parser.add_argument(
            "--splits", type=int, default=1000, help="consistency splits (default 1000)"
        )
        parser.add_argument("--seed", type=int, default=20240906)
        parser.add_argument("--starts", type=int, default=3, help="mixed-model starts per fit")
        parser.add_argument("--engine", choices=["auto", "statsmodels", "sparse"], default="auto")
        parser.add_argument(
            "--chance-rankings",
            type=int,
            default=CHANCE_RANKINGS,
            help=f"random rankings behind the chance baseline (default {CHANCE_RANKINGS})",
        )
        parser.add_argument(
            "--crosscheck-lme4",
            action="store_true",
            help="refit every mixed model with R's lme4 and report the differences",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        study = Study.objects.filter(slug=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study {opts['study']!r}")
        problem = chance_rankings_problem(opts["chance_rankings"], "--chance-rankings")
        if problem is not None:
            raise CommandError(problem)
        options = ReportOptions(
            consistency_splits=opts["splits"],
            seed=opts["seed"],
            mixed_starts=opts["starts"],
            mixed_engine=opts["engine"],
            crosscheck_lme4=opts["crosscheck_lme4"],
            chance_rankings=opts["chance_rankings"],
        )
        try:
            snap = report_build(
                study=study,
                out_dir=opts["out"],
                options=options,
                echo=lambda line: self.stderr.write(line),
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"report saved as {snap.directory} in the reports storage "
            f"({snap.data['timing_seconds']} s)"
        )
        names = ["report.json", "report.html", *snap.data["files"]["csv"]]
        if opts["out"] is not None:
            for name in names:
                self.stdout.write(f"  {opts['out'] / name}")
