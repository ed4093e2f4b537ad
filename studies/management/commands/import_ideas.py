"""Import ideas into a study from a CSV, JSONL, zip, Markdown file, or a folder of them.

    manage.py import_ideas STUDY PATH [--topic NAME ...] [--condition KEY:human|ai ...]
                                      [--import-valid-rows] [--dry-run]

A file with problems imports nothing (and the command fails, listing each file and row)
unless --import-valid-rows is given.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from studies.analysis.rounding import counted
from studies.models import Study
from studies.services.ideas import (
    PreparationError,
    condition_add,
    ideas_import,
    ideas_read_path,
    topic_add,
)


class Command(BaseCommand):
    help = (
        "Import ideas (CSV, JSONL, zip or folder of Markdown) into a study. Columns: "
        "external_id (or id, idea_id), topic, condition, text (or one column per template "
        "section), optional title and institution; see docs/import-ideas.md."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="The study's slug.")
        parser.add_argument("path", help="A file, or a folder of Markdown files.")
        parser.add_argument(
            "--topic", action="append", default=[], help="Create this topic first (repeatable)."
        )
        parser.add_argument(
            "--condition",
            action="append",
            default=[],
            metavar="KEY:KIND",
            help="Create this condition first, KIND human or ai (repeatable).",
        )
        parser.add_argument(
            "--import-valid-rows",
            action="store_true",
            help="Import the valid rows of a file that has problems, skipping the others.",
        )
        parser.add_argument("--dry-run", action="store_true", help="Read and report only.")

    def handle(self, *args: Any, **opts: Any) -> None:
        study = Study.objects.filter(slug=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study {opts['study']!r}")
        with transaction.atomic():
            try:
                for name in opts["topic"]:
                    topic_add(study=study, name=name)
                for spec in opts["condition"]:
                    key, _, kind = spec.partition(":")
                    condition_add(study=study, key=key, kind=(kind or "ai").strip().lower())
            except PreparationError as exc:
                raise CommandError(str(exc)) from exc
            batch = ideas_read_path(study=study, path=opts["path"])
            for p in batch.problems:
                stream = self.stderr if p.level == "error" else self.stdout
                stream.write(f"{p.level}: {p}")
            self.stdout.write(
                f"{counted(len(batch.records), 'idea')} readable, "
                f"{counted(len(batch.errors), 'problem')}"
            )
            if opts["dry_run"]:
                transaction.set_rollback(True)
                return
            try:
                summary = ideas_import(
                    study=study,
                    batch=batch,
                    source=str(opts["path"]),
                    import_valid_rows=opts["import_valid_rows"],
                )
            except PreparationError as exc:
                transaction.set_rollback(True)
                raise CommandError(str(exc)) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"imported {counted(summary['ideas'], 'idea')} into {study.slug}"
                + (
                    f", skipped {counted(summary['skipped_rows'], 'row')}"
                    if summary["skipped_rows"]
                    else ""
                )
                + (f"; {summary['incomplete']} miss sections" if summary["incomplete"] else "")
            )
        )
