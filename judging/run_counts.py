"""How many judge runs a study has, by state, for its step list (`studies.overview`
defines the interface; `JudgingConfig.ready()` registers this counter)."""

from __future__ import annotations

from studies.jobs import job_mark_if_lost
from studies.models import Study
from studies.overview import JudgeRunCounts

from .methods.registry import METHODS
from .models import JudgeRun


def study_judge_run_counts(study: Study) -> JudgeRunCounts:
    runs = JudgeRun.objects.filter(study=study)
    for run in runs.filter(status__in=JudgeRun.ACTIVE):
        job_mark_if_lost(job=run)  # a run whose worker died is not counted as running
    done = runs.filter(status=JudgeRun.Status.DONE)
    # Runs of a method that refuses ideas without text have judged ideas with text; the
    # random baseline and judge validation read none of the study's ideas.
    reads = [key for key, spec in METHODS.items() if spec.needs_text and spec.judges_ideas]
    return JudgeRunCounts(
        done=done.count(),
        on_text=done.filter(method__in=reads).count(),
        active=runs.filter(status__in=JudgeRun.ACTIVE).count(),
    )
