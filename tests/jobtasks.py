"""A job kind for the worker fault tests: one long step with no progress tick, so only
the heartbeat shows that its worker is alive. Worker processes started by the tests load
it with `celery -A ideareview worker -I tests.jobtasks`."""

from __future__ import annotations

import os
import time
from pathlib import Path

from celery import shared_task

from judging.models import JudgeRun
from studies.job_kinds import JobKind, job_kind_register
from studies.jobs import job_progress, job_run, worker_task_register
from studies.models import JobRun


def _sleep(job: JobRun) -> None:
    # One file per start, named by job, process and attempt: the tests count the starts.
    Path(job.params["marks"], f"{job.pk}-{os.getpid()}-{job.attempts}").touch()
    time.sleep(job.params["seconds"])
    job_progress(job=job, done=1, total=1, message="slept")


@shared_task(acks_late=True)
def sleep_job(job_id: int) -> None:
    job_run(job_id=job_id, kind="test-sleep", work=_sleep)


@shared_task(acks_late=True)
def held_sleep_job(job_id: int) -> None:
    """The sleep job, but the first delivery of its message hangs before it claims the
    job, as a worker does that dies between taking a message and claiming its job."""
    held = Path(JobRun.objects.get(pk=job_id).params["held"])
    first = not any(held.iterdir())
    (held / str(os.getpid())).touch()
    if first:
        time.sleep(600)
    job_run(job_id=job_id, kind="test-held", work=_sleep)


job_kind_register(JobKind("test-sleep", sleep_job, "studies:study_detail", "Sleeping"))
job_kind_register(JobKind("test-held", held_sleep_job, "studies:study_detail", "Held"))


@shared_task(acks_late=True)
def held_judge_run(run_id: int) -> None:
    """A judge run's task whose first delivery hangs before it claims the run, as a worker
    does that dies between taking the message and claiming the run. The worker is started
    with IDEAREVIEW_TEST_HELD_DIR, where each delivery leaves a file."""
    from judging.tasks import execute_judge_run

    held = Path(os.environ["IDEAREVIEW_TEST_HELD_DIR"])
    first = not any(held.iterdir())
    (held / str(os.getpid())).touch()
    if first:
        time.sleep(600)
    execute_judge_run(run_id)


worker_task_register(held_judge_run, JudgeRun)


@shared_task
def beat_tick() -> None:
    """What the several-machines test's beats schedule every second: the beats' logs show
    which one sent it."""
