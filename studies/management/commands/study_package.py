"""Write a study's reproducibility package (de-identified data, form, assignment, judge
prompts and cached responses, software versions, the latest report) to one zip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from studies.models import Study
from studies.package import package_build


class Command(BaseCommand):
    help = "Build the reproducibility package of a study (a zip; see docs/package.md)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument("--out", type=Path, required=True, help="the .zip to write")
        parser.add_argument(
            "--no-report",
            action="store_true",
            help="leave the latest report out (by default its files go into report/)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        study = Study.objects.filter(slug=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study {opts['study']!r}")
        out: Path = opts["out"]
        if out.suffix != ".zip":
            raise CommandError("--out must name a .zip file")
        manifest = package_build(study=study, out=out, use_report=not opts["no_report"])
        files = manifest["files"]
        has_report = any(name.startswith("report/") for name in files)
        self.stdout.write(f"package written to {out} ({len(files) + 1} files)")
        if not has_report:
            self.stdout.write("  no report included (build one with study_report first)")
