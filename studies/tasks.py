"""Celery tasks: thin wrappers that take a job's id, run its service under the job
lifecycle of `jobs.job_run` (lease, heartbeat, outcome in the row) and own time limits.

Every task here is sent with the settings' late acknowledgement: on Redis a task whose
worker was killed is delivered again, and the job's lease decides whether it runs."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from .job_kinds import JobKind, job_kind_register
from .jobs import job_enqueue, job_run, job_start
from .models import JobRun, Study

log = logging.getLogger(__name__)

# Celery's hard time limit of each task, in seconds (the soft limit comes first and lets
# the job record why it stopped).
JOB_TIME_LIMITS: dict[str, int] = {
    "report": 1900,
    "duplicates": 1900,
    "normalization": 6 * 3600 + 120,
    "leakage": 3700,
    "import": 3700,
    "assignment": 700,
    "sizing": 3700,
}


def report_enqueue(*, study: Study, actor: Any = None) -> JobRun:
    """Create the job row now and send the task once the row is committed."""
    job = job_start(study=study, kind="report", actor=actor, total=1)
    return job_enqueue(job=job)


@shared_task(soft_time_limit=1800, time_limit=JOB_TIME_LIMITS["report"])
def report_build_task(job_id: int) -> None:
    from .report_files import report_build

    job_run(job_id=job_id, kind="report", work=lambda job: report_build(study=job.study, job=job))


@shared_task(soft_time_limit=1800, time_limit=JOB_TIME_LIMITS["duplicates"])
def find_duplicates(job_id: int) -> None:
    from .services.ideas import duplicates_find

    job_run(job_id=job_id, kind="duplicates", work=lambda job: duplicates_find(job=job))


@shared_task(soft_time_limit=6 * 3600, time_limit=JOB_TIME_LIMITS["normalization"])
def normalize_ideas(job_id: int) -> None:
    from .services.ideas import normalization_run

    job_run(job_id=job_id, kind="normalization", work=lambda job: normalization_run(job=job))


@shared_task(soft_time_limit=3600, time_limit=JOB_TIME_LIMITS["leakage"])
def check_leakage(job_id: int) -> None:
    from .services.ideas import leakage_check_run

    job_run(job_id=job_id, kind="leakage", work=lambda job: leakage_check_run(job=job))


@shared_task(soft_time_limit=3600, time_limit=JOB_TIME_LIMITS["import"])
def import_reviews(job_id: int) -> None:
    from .services.transfer import reviews_import_job

    job_run(job_id=job_id, kind="import", work=lambda job: reviews_import_job(job=job))


@shared_task(soft_time_limit=600, time_limit=JOB_TIME_LIMITS["assignment"])
def preview_assignment(job_id: int) -> None:
    from .services.assignment import assignment_preview_run

    job_run(job_id=job_id, kind="assignment", work=lambda job: assignment_preview_run(job=job))


@shared_task(soft_time_limit=3600, time_limit=JOB_TIME_LIMITS["sizing"])
def size_design(job_id: int) -> None:
    from .design_sizing import sizing_run

    job_run(job_id=job_id, kind="sizing", work=lambda job: sizing_run(job=job))


@shared_task(soft_time_limit=600, time_limit=900)
def send_reminders() -> None:
    """The daily reminder mails; Celery beat schedules it (CELERY_BEAT_SCHEDULE)."""
    from .services.reviews import reminders_send_all

    for slug, sent in reminders_send_all().items():
        log.info("reminders for %s: %s", slug, sent)


@shared_task(soft_time_limit=240, time_limit=300)
def release_idle_platform_places() -> None:
    """Release abandoned platform places in every study; beat schedules it."""
    from .services.platform import platform_places_sweep

    n = platform_places_sweep()
    if n:
        log.info("released %s idle platform place(s)", n)


for _kind in (
    JobKind("report", report_build_task, "studies:study_report", "Building the report"),
    JobKind("duplicates", find_duplicates, "studies:duplicates", "Checking for duplicates"),
    JobKind("normalization", normalize_ideas, "studies:normalization", "Normalising"),
    JobKind("leakage", check_leakage, "studies:leakage", "Checking for leakage"),
    JobKind("import", import_reviews, "studies:reviews_import_page", "Importing reviews"),
    JobKind("assignment", preview_assignment, "studies:assignment_preview", "Solving"),
    JobKind("sizing", size_design, "studies:sizing", "Sizing the design"),
):
    job_kind_register(_kind)
