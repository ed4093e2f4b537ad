"""Create and run (or resume) an LLM-judge run from the command line."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from judging.methods.registry import METHODS
from judging.models import JudgeRun
from judging.services import (
    JudgeRunRefused,
    judge_run_create,
    judge_run_execute,
    judge_run_resume,
)
from judging.tasks import judge_run_enqueue
from llm.models import JudgeConfig
from llm.services import judge_configs_of
from studies.models import Study


class Command(BaseCommand):
    help = "Create a judge run on a study and execute it here (or --queue it for a worker)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--study", help="study slug")
        parser.add_argument("--method", choices=list(METHODS))
        parser.add_argument("--config", default="", help="JudgeConfig name (LLM methods)")
        parser.add_argument(
            "--panel",
            action="append",
            default=[],
            metavar="NAME",
            help="one more judge of the panel (JudgeConfig name; repeat for several)",
        )
        parser.add_argument("--params", default="{}", help="JSON object of method parameters")
        parser.add_argument("--budget-calls", type=int)
        parser.add_argument("--budget-cost", type=str)
        parser.add_argument("--resume", type=int, help="resume this run id instead")
        parser.add_argument("--queue", action="store_true", help="send to Celery, do not run")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            if opts["resume"]:
                run = JudgeRun.objects.get(pk=opts["resume"])
                run = judge_run_resume(run=run)
                if opts["queue"]:
                    judge_run_enqueue(run=run)
            else:
                if not opts["study"] or not opts["method"]:
                    raise CommandError("--study and --method are required")
                study = Study.objects.get(slug=opts["study"])
                # The study's own judges and the administrator's, by name (names are unique
                # within a study only).
                config = (
                    judge_configs_of(study).get(name=opts["config"]) if opts["config"] else None
                )
                run = judge_run_create(
                    study=study,
                    method=opts["method"],
                    config=config,
                    params=json.loads(opts["params"]),
                    budget_calls=opts["budget_calls"],
                    budget_cost=opts["budget_cost"],
                    panel=[judge_configs_of(study).get(name=name) for name in opts["panel"]],
                )
                if opts["queue"]:
                    judge_run_enqueue(run=run)
        except (JudgeRunRefused, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        except (Study.DoesNotExist, JudgeConfig.DoesNotExist, JudgeRun.DoesNotExist) as exc:
            raise CommandError(str(exc)) from exc
        if opts["queue"]:
            if run.status == JudgeRun.Status.FAILED:  # the broker refused the message
                raise CommandError(f"run {run.pk} {run.error}")
            self.stdout.write(f"run {run.pk} queued ({run.total_calls} units)")
            return
        run = judge_run_execute(run=run)
        self.stdout.write(
            f"run {run.pk}: {run.status} — {run.message}; {run.http_calls} calls, "
            f"{run.cache_hits} cache hits, {run.errors} errors, {run.unparseable} unparseable, "
            f"cost {run.cost}"
        )
