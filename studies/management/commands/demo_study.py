"""Build a whole synthetic study end to end and check its known effects in the report.

    python manage.py demo_study --slug demo-study --ideas-per-condition 10 --reviewers 10

The local OpenAI-compatible test server is started in this process on a free port for
normalization and the judges, and stopped afterwards. An existing slug is refused.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from studies.demo import DemoError, demo_study_build


class Command(BaseCommand):
    help = "Build a synthetic study through the web's services and check its effects."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--slug", default="demo-study")
        parser.add_argument("--ideas-per-condition", type=int, default=10)
        parser.add_argument("--reviewers", type=int, default=10)
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument(
            "--out", type=Path, help="report folder (default var/reports/<slug>/<time>)"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        # One INFO line per HTTP request would bury the summary.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        try:
            result = demo_study_build(
                slug=opts["slug"],
                ideas_per_condition=opts["ideas_per_condition"],
                reviewers=opts["reviewers"],
                seed=opts["seed"],
                out_dir=opts["out"],
                echo=lambda line: self.stderr.write(line),
            )
        except DemoError as exc:
            raise CommandError(str(exc)) from exc
        for line in result.summary():
            self.stdout.write(line)
        if not result.ok:
            failed = [c.name for c in result.checks if not c.passed]
            raise CommandError("the synthetic effects did not show up: " + "; ".join(failed))
        self.stdout.write(self.style.SUCCESS("all checks passed"))
