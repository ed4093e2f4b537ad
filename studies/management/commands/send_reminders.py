"""Mail reminders to reviewers with open work and to open invitations (cron-friendly)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from studies.analysis.rounding import counted
from studies.models import Study
from studies.services.errors import ImportedStudyRefused
from studies.services.invitations import RecruitmentError
from studies.services.reviews import reminders_send


class Command(BaseCommand):
    help = "Send reminder mails for every reviewing study, or for the studies named."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("studies", nargs="*", help="study slugs (default: all reviewing)")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["studies"]:
            studies = list(Study.objects.filter(slug__in=opts["studies"]))
            missing = set(opts["studies"]) - {s.slug for s in studies}
            if missing:
                raise CommandError(f"no study {', '.join(sorted(missing))}")
        else:
            studies = list(Study.objects.filter(status=Study.Status.REVIEWING))
        for study in studies:
            try:
                sent = reminders_send(study=study)
            except (ImportedStudyRefused, RecruitmentError) as exc:
                raise CommandError(f"{study.slug}: {exc}") from exc
            self.stdout.write(
                f"{study.slug}: {counted(sent['reviewers'], 'reviewer')}, "
                f"{counted(sent['invitations'], 'invitation')}"
            )
