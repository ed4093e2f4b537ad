"""Read a study file written by study_export into this database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from studies.services.study import study_import
from studies.services.transfer import TransferError


class Command(BaseCommand):
    help = "Import a study file written by study_export (all or nothing)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("file")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            study = study_import(text=Path(options["file"]).read_text(encoding="utf-8"))
        except (OSError, TransferError) as exc:
            raise CommandError(f"{options['file']}: {exc}") from exc
        self.stdout.write(f"imported {study.slug} from {options['file']}")
