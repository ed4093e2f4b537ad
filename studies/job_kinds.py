"""The kinds of background job a study runs, registered by the tasks modules.

Apart from the job lifecycle (`studies.jobs`) so the job row (`studies.models.JobRun`) can
name its kind's label without importing the lifecycle, which imports the models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JobKind:
    """What the lifecycle needs to know about one kind of job."""

    kind: str
    task: Any  # the Celery task that takes the job's id
    page: str  # URL name (with the study's slug) of the page that shows the job
    label: str  # what the progress partial says while it runs


JOB_KINDS: dict[str, JobKind] = {}


def job_kind_register(kind: JobKind) -> None:
    """Tasks modules register their kinds when imported (the app's ready() imports them)."""
    JOB_KINDS[kind.kind] = kind
