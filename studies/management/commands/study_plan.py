"""Show, set or freeze a study's analysis plan (docs/analysis-plan.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from studies.analysis.plan import PlanError, plan_document, plan_hash
from studies.models import Study
from studies.services.plans import study_plan
from studies.services.study import study_plan_freeze, study_plan_set


class Command(BaseCommand):
    help = "Print a study's analysis plan as JSON; --set FILE replaces it; --freeze registers it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument("--set", type=Path, metavar="FILE", help="a plan as a JSON file")
        parser.add_argument(
            "--freeze",
            action="store_true",
            help="register the plan (only before the first report is built)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        study = Study.objects.filter(slug=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study {opts['study']!r}")
        try:
            if opts["set"] is not None:
                path: Path = opts["set"]
                try:
                    text = path.read_text()
                except OSError as exc:
                    raise CommandError(f"{path}: {exc.strerror or exc}") from exc
                try:
                    study_plan_set(study=study, source=text, actor=None)
                except PlanError as exc:
                    raise CommandError(f"{path}: {exc}") from exc
            if opts["freeze"]:
                study_plan_freeze(study=study, actor=None)
                study.refresh_from_db()
        except PlanError as exc:
            raise CommandError(str(exc)) from exc
        plan = study_plan(study)
        self.stdout.write(json.dumps(plan_document(plan), indent=2))
        self.stderr.write(f"plan hash {plan_hash(plan)}")
        if study.analysis_plan_frozen_at is not None:
            state = (
                "the registered plan"
                if plan_hash(plan) == study.analysis_plan_hash
                else ("CHANGED since it was registered")
            )
            self.stderr.write(
                f"frozen {study.analysis_plan_frozen_at.isoformat(timespec='seconds')} "
                f"(hash {study.analysis_plan_hash}); the current plan is {state}"
            )
