"""Load the demo: a researcher account and the si2024 reviews as a study with its report,
and the second phase of the same ideas (a synthetic execution study) linked to it."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from studies.models import Study, StudyReport
from studies.report_files import report_build
from studies.services.study import researcher_grant

DATA = Path(settings.BASE_DIR) / "data" / "si2024"


class Command(BaseCommand):
    help = "Create the demo researcher and the si2024 study (idempotent), and print the login."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="demo")
        parser.add_argument("--no-report", action="store_true", help="skip building the report")
        parser.add_argument(
            "--no-phases",
            action="store_true",
            help="skip the second phase (the SYNTHETIC execution study linked to si2024)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        User = get_user_model()
        password_file = Path(settings.VAR_DIR) / "demo_password"
        if not password_file.exists():
            password_file.write_text(secrets.token_urlsafe(9))
            password_file.chmod(0o600)
        password = password_file.read_text().strip()
        user, _ = User.objects.get_or_create(username=opts["username"], defaults={"is_staff": True})
        user.set_password(password)
        user.save()
        researcher_grant(user=user)
        study = Study.objects.filter(slug="si2024").first()
        if study is None:
            call_command(
                "import_reviews",
                format="si2024",
                reviews=DATA / "ideation_reviews.json",
                titles=DATA / "idea_titles.csv",
                study="si2024",
                owner=user.get_username(),
                title="Si et al. 2024: human vs AI research ideas (released reviews)",
                baseline="Human",
                stdout=self.stdout,
            )
            study = Study.objects.get(slug="si2024")
        if not opts["no_report"] and not StudyReport.objects.filter(study=study).exists():
            self.stdout.write(
                "building the si2024 report (mixed models, 1,000 consistency splits) …"
            )
            snap = report_build(study=study)
            self.stdout.write(f"report ready ({snap.data['timing_seconds']} s)")
        if not opts["no_phases"]:
            # The execution phase of the same ideas, linked (docs/phases.md); its reviews
            # are synthetic, and the study's title says so.
            call_command("demo_phases", no_report=opts["no_report"], stdout=self.stdout)
        self.stdout.write("")
        self.stdout.write("Demo researcher account:")
        self.stdout.write(f"  username: {user.get_username()}")
        self.stdout.write(f"  password: {password}")
