"""Celery tasks for judge runs: thin, id-taking, time-limited (docs/architecture.md, "Background jobs").

A run's state is in its row; the task only claims the run and calls the service. With
`acks_late`, a task whose worker was killed is delivered again and simply resumes: the
service skips every unit that already has an outcome. If the run's heartbeat is still
fresh (its old worker may be alive), the task retries later instead of running it twice.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.db import transaction
from django.utils import timezone

from .models import JudgeRun

log = logging.getLogger(__name__)

SOFT_TIME_LIMIT = 3 * 3600
TIME_LIMIT = SOFT_TIME_LIMIT + 300


def judge_run_enqueue(*, run: JudgeRun) -> JudgeRun:
    """Send the run to a worker once the transaction that created or resumed it commits."""
    run_id = run.pk
    transaction.on_commit(lambda: execute_judge_run.delay(run_id))
    return run


@shared_task(
    bind=True,
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
    max_retries=20,
    acks_late=True,
)
def execute_judge_run(self: Any, run_id: int) -> None:
    from .services import STALE_AFTER, judge_run_execute

    run = JudgeRun.objects.filter(pk=run_id).select_related("study", "config").first()
    if run is None or not run.is_active:
        return
    try:
        run = judge_run_execute(run=run)
    except SoftTimeLimitExceeded:
        # Hand the run to a fresh task: everything finished so far is kept and skipped.
        JudgeRun.objects.filter(pk=run_id).update(
            status=JudgeRun.Status.QUEUED, heartbeat_at=None, message="continuing after time limit"
        )
        raise self.retry(countdown=1) from None
    if run.status == JudgeRun.Status.RUNNING and run.heartbeat_at:
        # Another worker holds a fresh heartbeat; look again once it would be stale.
        age = (timezone.now() - run.heartbeat_at).total_seconds()
        raise self.retry(countdown=max(5, int(STALE_AFTER.total_seconds() - age) + 1))
