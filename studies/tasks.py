"""Celery tasks: thin wrappers that take ids, call a service and own time limits."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.db import transaction

from .models import JobRun, Study
from .services import JOB_TIME_LIMITS

log = logging.getLogger(__name__)


def report_enqueue(*, study: Study, actor: Any = None) -> JobRun:
    """Create the job row now and send the task once the row is committed."""
    from .services import job_start

    job = job_start(study=study, kind="report", actor=actor, total=1)
    transaction.on_commit(lambda: build_report.delay(job.pk))
    return job


@shared_task(soft_time_limit=1800, time_limit=JOB_TIME_LIMITS["report"])
def build_report(job_id: int) -> None:
    from .reporting import report_build
    from .services import job_finish

    job = JobRun.objects.select_related("study").get(pk=job_id)
    if job.status not in (JobRun.Status.QUEUED, JobRun.Status.RUNNING):
        return
    try:
        report_build(study=job.study, job=job)
    except Exception as exc:  # the row must say what failed; Celery logs the traceback
        log.exception("report job %s failed", job_id)
        job_finish(job=job, error=f"{type(exc).__name__}: {exc}")
        raise
    job_finish(job=job)


# --- idea preparation (issue 4) -------------------------------------------------------


def _run_job(job_id: int, work: Any) -> None:
    """Claim a job row, run `work(job)`, and leave the outcome in the row."""
    from .services import job_finish

    job = JobRun.objects.select_related("study").get(pk=job_id)
    if job.status not in (JobRun.Status.QUEUED, JobRun.Status.RUNNING):
        return
    try:
        work(job)
    except Exception as exc:  # the row must say what failed; Celery logs the traceback
        log.exception("%s job %s failed", job.kind, job_id)
        job_finish(job=job, error=f"{type(exc).__name__}: {exc}")
        raise
    job_finish(job=job)


@shared_task(soft_time_limit=1800, time_limit=JOB_TIME_LIMITS["duplicates"])
def find_duplicates(job_id: int) -> None:
    from .ideaprep import duplicates_find

    _run_job(job_id, lambda job: duplicates_find(job=job))


@shared_task(soft_time_limit=6 * 3600, time_limit=JOB_TIME_LIMITS["normalization"])
def normalize_ideas(job_id: int) -> None:
    from .ideaprep import normalization_run

    _run_job(job_id, lambda job: normalization_run(job=job))


@shared_task(soft_time_limit=3600, time_limit=JOB_TIME_LIMITS["leakage"])
def check_leakage(job_id: int) -> None:
    from .ideaprep import leakage_check_run

    _run_job(job_id, lambda job: leakage_check_run(job=job))


@shared_task(soft_time_limit=600, time_limit=JOB_TIME_LIMITS["assignment"])
def preview_assignment(job_id: int) -> None:
    from .recruitment import assignment_preview_run

    _run_job(job_id, lambda job: assignment_preview_run(job=job))


@shared_task(soft_time_limit=600, time_limit=900)
def send_reminders() -> None:
    """The daily reminder mails; Celery beat schedules it (CELERY_BEAT_SCHEDULE)."""
    from .recruitment import reminders_send_all

    for slug, sent in reminders_send_all().items():
        log.info("reminders for %s: %s", slug, sent)
