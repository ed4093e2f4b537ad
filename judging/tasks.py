"""Celery tasks for judge runs: thin, id-taking, time-limited (docs/architecture.md, "Background jobs").

A run's state is in its row, under the lifecycle of every background job (`studies.jobs`,
docs/jobs.md): the task is sent once the row is committed (a broker that cannot be
reached fails the run at once, with a message and Resume); the worker's main process
writes `received_at` when it takes the message and marks the run lost at once when the
pool process that runs it dies (`worker_task_register` below); the service claims the run
under a lease and writes its heartbeat from a thread of its own. With `acks_late`, Redis
delivers the task again when its worker was killed: the new delivery takes the run over
only once the old worker's heartbeat is stale, and resumes it (the service skips every
unit that already has an outcome). A delivery that finds the run held under a fresh
heartbeat leaves it alone for now, and sends the task again for the moment that heartbeat
would be stale: the visibility timeout counts from the first delivery, so the broker's
second delivery can come before the dead worker's lease runs out, and without a second
look the run would wait for a page to mark it lost.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.db import transaction

from studies.jobs import job_requeue, lease_stale_in, task_send, worker_task_register

from .models import JudgeRun

log = logging.getLogger(__name__)

SOFT_TIME_LIMIT = 3 * 3600
TIME_LIMIT = SOFT_TIME_LIMIT + 300


def judge_run_enqueue(*, run: JudgeRun) -> JudgeRun:
    """Send the run to a worker once the transaction that created or resumed it commits.
    If the broker cannot be reached the run is failed then and there, with a message
    that says so (the object follows when the send happens at once, outside a
    transaction, as in a request); Resume sends it again."""
    transaction.on_commit(lambda: judge_run_send(run=run))
    return run


def judge_run_send(*, run: JudgeRun) -> bool:
    return task_send(task=execute_judge_run, row=run)


@shared_task(
    bind=True,
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
    max_retries=20,
    acks_late=True,
)
def execute_judge_run(self: Any, run_id: int) -> None:
    from .services import judge_run_execute

    run = JudgeRun.objects.filter(pk=run_id).select_related("study", "config").first()
    if run is None or not run.is_active:
        return
    try:
        judge_run_execute(run=run)
        wait = lease_stale_in(run)
        if wait is not None:
            # Another worker holds the run: alive, or killed so recently that its
            # heartbeat is not yet stale. Look again when it would be.
            log.info("run %s held by %s; looking again in %.0f s", run.pk, run.worker, wait)
            execute_judge_run.apply_async((run.pk,), countdown=wait)
    except SoftTimeLimitExceeded:
        # Hand the run to a fresh task: everything finished so far is kept and skipped.
        run.refresh_from_db()
        if run.status == JudgeRun.Status.FAILED and job_requeue(
            job=run, message="continuing after time limit"
        ):
            raise self.retry(countdown=1) from None
        raise


worker_task_register(execute_judge_run, JudgeRun)
