"""Open a study for review (the command-line "Open for review")."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from studies.models import Study
from studies.services.ideas import StudyNotReady
from studies.services.study import LEAKAGE_ACKNOWLEDGEMENT, study_open_for_review


class Command(BaseCommand):
    help = (
        "Open a study for review: reviewers then see the assignments committed for them "
        "and are mailed. Committing an assignment does not open the study."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument(
            "--acknowledge",
            default="",
            metavar="TEXT",
            help="needed when the latest leakage check says the texts reviewers read are "
            f"easy to tell apart by source: the words “{LEAKAGE_ACKNOWLEDGEMENT}”",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        study = Study.objects.filter(slug=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study {opts['study']!r}")
        try:
            study_open_for_review(study=study, acknowledgement=opts["acknowledge"])
        except StudyNotReady as exc:
            raise CommandError("cannot open for review: " + "; ".join(exc.reasons)) from exc
        self.stdout.write(self.style.SUCCESS(f"study {study.slug} is open for review"))
