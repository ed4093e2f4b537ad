"""How many judge runs a study has, by state, for its step list (`studies.overview`
defines the interface; `JudgingConfig.ready()` registers this counter)."""

from __future__ import annotations

from studies.jobs import job_mark_if_lost
from studies.models import Study
from studies.overview import JudgeRunCounts

from .models import JudgeRun


def study_judge_run_counts(study: Study) -> JudgeRunCounts:
    runs = JudgeRun.objects.filter(study=study)
    for run in runs.filter(status__in=JudgeRun.ACTIVE):
        job_mark_if_lost(job=run)  # a run whose worker died is not counted as running
    return JudgeRunCounts(
        done=runs.filter(status=JudgeRun.Status.DONE).count(),
        active=runs.filter(status__in=JudgeRun.ACTIVE).count(),
    )
