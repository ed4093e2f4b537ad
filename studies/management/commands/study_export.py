"""Write a whole study (with its judge runs and calls) to one JSON file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from studies.models import Study
from studies.services.study import study_export


class Command(BaseCommand):
    help = "Export a study, everything in it, to FILE (read back with study_import)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug")
        parser.add_argument("file")

    def handle(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise CommandError(f"no study {options['slug']!r}")
        text = study_export(study=study)
        Path(options["file"]).write_text(text, encoding="utf-8")
        self.stdout.write(f"exported {study.slug} to {options['file']} ({len(text)} bytes)")
