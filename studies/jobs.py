"""One lifecycle for every background job of a study (report, normalization, duplicates,
leakage, large imports): start, enqueue, claim under a lease, heartbeat, progress,
finish, lost, cancel, retry.

The state lives in the `JobRun` row, never in Celery's result backend, so a page can tell
what happened to a job whose worker died. The rules:

- Sending the task happens after the row is committed; if the broker cannot be reached
  the row says so at once (failed, with a retry), instead of staying queued for ever.
- A worker takes a job by writing a fresh lease token into the row, and keeps it by
  writing a heartbeat from a thread of its own, so a step that computes for ten minutes
  without a progress tick is not taken for lost. A job whose heartbeat stops is lost.
- A second delivery of the same task (Redis redelivers unacknowledged messages) finds the
  job held by a fresh heartbeat under another lease and leaves it alone; it takes the job
  over only once that heartbeat is stale.
- Every write the worker makes is conditional on its lease: a cancelled or taken-over job
  stops at its next progress tick, and cancel is a plain row update that needs no worker.
- Retry puts the same row back in the queue; the job's work is written to resume (skip
  what is already stored) or to start over cleanly.
- A worker's main process knows sooner than the heartbeat when one of its pool processes
  dies (Celery's WorkerLostError): it marks the job that process held lost at once. It
  also writes when it takes a job's message off the queue, so a job whose worker died
  after taking the message but before claiming the job is lost too, not queued for ever.

Judge runs (judging's `JudgeRun`) keep rows of their own with the same lifecycle fields
(status with the same values, lease, heartbeat_at, worker, received_at, attempts) and go
through the functions here that take any job row: `task_send`, `job_mark_if_lost`,
`job_cancel`, `job_requeue`, `lease_take`, `lease_heartbeat`, `job_mark_process_died`.
Judging registers its task with `worker_task_register`, so the worker's main process
looks after its rows as it does after `JobRun`s.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from celery import signals
from celery.exceptions import WorkerLostError
from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import DateTimeField, F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from .job_kinds import JOB_KINDS
from .models import JobRun, Study

log = logging.getLogger(__name__)

ACTIVE = (JobRun.Status.QUEUED, JobRun.Status.RUNNING)

JobRow = Any
"""A `JobRun`, or a row of another model with the same lifecycle fields and Status values
(judging's `JudgeRun`)."""

# Publishing gives up after a few quick tries: the request that starts a job waits for
# it, and a job that could not be sent says so and offers a retry.
PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.5}


class JobStopped(Exception):
    """The job is no longer this worker's: it was cancelled, or another worker took it."""


WORKER_TASKS: dict[str, Any] = {}


def worker_task_register(task: Any, model: Any) -> None:
    """A task, other than a job kind's, that takes the id of a `model` row with the job
    lifecycle fields: the worker's main process writes `received_at` when it takes the
    task's message and marks the row lost when the pool process that runs it dies."""
    WORKER_TASKS[task.name] = model


def _row_model(task_name: str | None) -> Any:
    """The model whose rows the task with this name runs, or None for any other task."""
    if any(kind.task.name == task_name for kind in JOB_KINDS.values()):
        return JobRun
    return WORKER_TASKS.get(task_name or "")


def _rows(job: JobRow) -> Any:
    return type(job)._default_manager


def job_start(
    *, study: Study, kind: str, actor: Any = None, total: int = 0, **params: Any
) -> JobRun:
    return JobRun.objects.create(
        study=study,
        kind=kind,
        total=total,
        params=params,
        created_by=actor if getattr(actor, "pk", None) else None,
    )


def job_enqueue(*, job: JobRun) -> JobRun:
    """Send the job's task once the transaction that created the row commits."""
    transaction.on_commit(lambda: job_send(job=job))
    return job


def job_send(*, job: JobRun) -> bool:
    """Publish the job's task now (see `task_send`)."""
    return task_send(task=JOB_KINDS[job.kind].task, row=job)


def task_send(*, task: Any, row: JobRow) -> bool:
    """Publish `task(row.pk)` now. A broker that cannot be reached marks the row failed
    with a message that says so; it can be retried once the broker is back."""
    try:
        task.apply_async((row.pk,), retry=True, retry_policy=PUBLISH_RETRY_POLICY)
    except Exception as exc:  # kombu raises many types for an unreachable broker
        log.warning("could not send %s %s: %s", task.name, row.pk, exc)
        _set(
            row,
            _rows(row).filter(pk=row.pk, status=row.Status.QUEUED),
            status=row.Status.FAILED,
            finished_at=timezone.now(),
            error=(
                "could not be sent to the task queue, so no worker will run it "
                f"({type(exc).__name__}: {exc}). Check that the broker "
                "(CELERY_BROKER_URL) is running, then retry."
            ),
        )
        return False
    return True


def job_active(*, study: Study, kind: str) -> JobRun | None:
    """The study's queued or running job of this kind, unless it turns out to be lost
    (then it is marked so, and None lets a fresh one start)."""
    job = JobRun.objects.filter(study=study, kind=kind, status__in=ACTIVE).first()
    if job is None or job_mark_if_lost(job=job):
        return None
    return job


def job_latest(*, study: Study, kind: str) -> JobRun | None:
    """The study's newest job of this kind, for a page to show, marked lost first if its
    worker stopped, so the page does not poll a job no worker will finish."""
    job = JobRun.objects.filter(study=study, kind=kind).first()
    if job is not None:
        job_mark_if_lost(job=job)
    return job


def job_latest_done(*, study: Study, kind: str) -> JobRun | None:
    """The study's most recently finished job of this kind: the result a page shows."""
    return (
        JobRun.objects.filter(study=study, kind=kind, status=JobRun.Status.DONE)
        .order_by("-finished_at", "-pk")
        .first()
    )


def _lost_after() -> timedelta:
    return timedelta(seconds=settings.JOB_LOST_AFTER_SECONDS)


def job_mark_if_lost(*, job: JobRow) -> bool:
    """Mark a running job lost when its worker has not written a heartbeat for
    JOB_LOST_AFTER_SECONDS, and a queued job whose message a worker took that long ago
    without claiming the job (the worker died in between; on the filesystem broker the
    message is gone). A queued job no worker has taken is never lost: it waits for a
    worker (with one worker it may wait behind a six-hour normalization), and its page
    says so."""
    if job.status == job.Status.QUEUED and job.received_at is not None:
        return _mark_if_never_claimed(job)
    if job.status != job.Status.RUNNING:
        return False
    last = job.heartbeat_at or job.started_at or job.created_at
    if last > timezone.now() - _lost_after():
        return False
    seconds = int((timezone.now() - last).total_seconds())
    return _set(
        job,
        _rows(job).filter(pk=job.pk, status=job.status, heartbeat_at=job.heartbeat_at),
        status=job.Status.LOST,
        finished_at=timezone.now(),
        error=(
            f"lost: its worker has sent no heartbeat for {seconds} s (the process was "
            "killed or its machine stopped). Retry it: it resumes where it can, and "
            "check that a Celery worker is running."
        ),
    )


def _mark_if_never_claimed(job: JobRow) -> bool:
    received = job.received_at
    assert received is not None
    if received > timezone.now() - _lost_after():
        return False
    seconds = int((timezone.now() - received).total_seconds())
    return _set(
        job,
        _rows(job).filter(pk=job.pk, status=job.Status.QUEUED, received_at=received),
        status=job.Status.LOST,
        finished_at=timezone.now(),
        error=(
            f"lost: a worker took it from the queue {seconds} s ago but never started it "
            "(the worker was killed, or could not reach the database). Retry it, and "
            "check that a Celery worker is running."
        ),
    )


def job_cancel(*, job: JobRow, **fields: Any) -> bool:
    """Cancel a queued or running job (any job row; `fields` are written with it). This
    is a row update, so it works whether or not a worker still runs it; a live worker
    stops at its next progress tick."""
    return _set(
        job,
        _rows(job).filter(pk=job.pk, status__in=ACTIVE),
        status=job.Status.CANCELLED,
        finished_at=timezone.now(),
        message="cancelled",
        **fields,
    )


class JobNotRetryable(ValueError):
    pass


def job_retry(*, job: JobRun) -> JobRun:
    """Put a failed, lost or cancelled job back in the queue under the same row; the
    work it already stored is kept and skipped where the job knows how."""
    if not job.can_retry:
        raise JobNotRetryable(f"a {job.get_status_display().lower()} job cannot be retried")
    other = job_active(study=job.study, kind=job.kind)
    if other is not None and other.pk != job.pk:
        raise JobNotRetryable(f"another {job.kind} job ({other.pk}) is already queued or running")
    if not job_requeue(job=job, message="queued again"):
        raise JobNotRetryable("the job changed meanwhile; reload the page")
    return job_enqueue(job=job)


def job_requeue(*, job: JobRow, **fields: Any) -> bool:
    """Put a job row back to queued, as no worker has ever held it (lease, heartbeat,
    worker and `received_at` cleared), if its status is still the one the caller saw;
    `fields` are written with it. The caller then sends its task."""
    return _set(
        job,
        _rows(job).filter(pk=job.pk, status=job.status),
        status=job.Status.QUEUED,
        error="",
        finished_at=None,
        lease="",
        heartbeat_at=None,
        worker="",
        received_at=None,
        **fields,
    )


def _set(job: JobRow, rows: Any, **fields: Any) -> bool:
    """Conditional update of a job row; the object follows only when the row changed."""
    if not rows.update(**fields):
        return False
    for name, value in fields.items():
        setattr(job, name, value)
    return True


# --------------------------------------------------------------------------- worker side


def job_claim(*, job_id: int, kind: str) -> JobRun | None:
    """Take the job for this worker under a fresh lease, or None when it is not ours to
    run: finished, cancelled, held by another worker whose heartbeat is fresh, or not of
    the kind the task runs."""
    if not lease_take(JobRun, job_id, where=Q(kind=kind)):
        job = JobRun.objects.filter(pk=job_id).first()
        if job is not None:
            log.info("job %s not claimed: %s, heartbeat %s", job_id, job.status, job.heartbeat_at)
        return None
    return JobRun.objects.select_related("study").get(pk=job_id)


def lease_take(model: Any, pk: int, *, where: Q | None = None, **fields: Any) -> bool:
    """Take the `model` row (any job row) for this process under a fresh lease: a queued
    row, or a running one whose heartbeat is stale (its worker is gone). False when it is
    not ours to run: finished, cancelled, lost, or held under a fresh heartbeat. The
    claim writes the holding process ("node:pid"), the heartbeat, the first start and
    the attempt's number; `fields` are written with them."""
    now = timezone.now()
    claimable = Q(status=model.Status.QUEUED) | Q(
        status=model.Status.RUNNING, heartbeat_at__lt=now - _lost_after()
    )
    return bool(
        model._default_manager.filter(claimable, where or Q(), pk=pk).update(
            status=model.Status.RUNNING,
            lease=uuid.uuid4().hex,
            worker=f"{_node()}:{os.getpid()}",
            heartbeat_at=now,
            started_at=Coalesce("started_at", Value(now), output_field=DateTimeField()),
            attempts=F("attempts") + 1,
            **fields,
        )
    )


def lease_stale_in(job: JobRow) -> float | None:
    """Seconds until the lease of a running row goes stale (so that `lease_take` can take
    it over) if no heartbeat comes meanwhile, plus one heartbeat interval of margin; None
    for a row that is not running. For a delivery that found the row held by another
    worker: that worker may have just died, so the delivery looks again then instead of
    leaving the row to a worker that is gone."""
    job.refresh_from_db(fields=["status", "heartbeat_at"])
    if job.status != job.Status.RUNNING or job.heartbeat_at is None:
        return None
    stale_at = job.heartbeat_at + _lost_after()
    margin = settings.JOB_HEARTBEAT_SECONDS
    return max(0.0, (stale_at - timezone.now()).total_seconds()) + margin


class RowHeartbeat(threading.Thread):
    """Writes `heartbeat_at` on the rows `rows()` selects every JOB_HEARTBEAT_SECONDS,
    from its own thread (and database connection), while the worker's main thread does
    the work. When no row is left to update (cancelled, taken over), `lost_lease` is set
    and the thread ends."""

    def __init__(self, name: str, rows: Callable[[], Any]):
        super().__init__(name=name, daemon=True)
        self.rows = rows
        self.halt = threading.Event()
        self.lost_lease = threading.Event()

    def run(self) -> None:
        try:
            while not self.halt.wait(settings.JOB_HEARTBEAT_SECONDS):
                try:
                    kept = self.rows().update(heartbeat_at=timezone.now())
                except Exception:  # a busy database must not end the heartbeat
                    log.exception("heartbeat of %s not written", self.name)
                    close_old_connections()
                    continue
                if not kept:
                    self.lost_lease.set()
                    return
        finally:
            connection.close()

    def __enter__(self) -> RowHeartbeat:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.halt.set()
        self.join()


def lease_heartbeat(job: JobRow) -> RowHeartbeat:
    """The heartbeat of a job row this worker holds: it ends when the row is no longer
    running under the lease (cancelled, lost, taken over)."""
    rows, job_id, lease, running = _rows(job), job.pk, job.lease, job.Status.RUNNING
    return RowHeartbeat(
        f"{job._meta.model_name}-{job_id}-heartbeat",
        lambda: rows.filter(pk=job_id, lease=lease, status=running),
    )


def job_run(*, job_id: int, kind: str, work: Callable[[JobRun], Any]) -> JobRun | None:
    """Claim the job, run `work(job)` with a heartbeat beside it, and record the outcome.

    Returns the job, or None if it was not this worker's to run. An exception from the
    work fails the job with its message and is raised again for Celery to log."""
    job = job_claim(job_id=job_id, kind=kind)
    if job is None:
        _look_again_if_held(job_id=job_id, kind=kind)
        return None
    try:
        with lease_heartbeat(job):
            work(job)
    except JobStopped:
        log.info("%s job %s stopped: no longer this worker's", job.kind, job.pk)
        return job
    except BaseException as exc:  # time limits too: the row must say what happened
        log.exception("%s job %s failed", job.kind, job.pk)
        job_finish(job=job, error=job_error_text(exc))
        raise
    job_finish(job=job)
    return job


def job_error_text(exc: BaseException) -> str:
    """What a failed job's row tells the owner: the message alone for the errors the app
    raises on purpose to say what is wrong (ValueError and the services' errors built on
    it); an unexpected exception keeps its class name."""
    if isinstance(exc, ValueError) and str(exc):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _look_again_if_held(*, job_id: int, kind: str) -> None:
    """A delivery that found its job held by another worker sends the job's task again
    for the moment that worker's heartbeat would be stale: the broker's own second
    delivery (its visibility timeout counts from the first) can come before a killed
    worker's lease runs out, and the job would then wait for a page to mark it lost."""
    job = JobRun.objects.filter(pk=job_id, kind=kind).first()
    wait = None if job is None or kind not in JOB_KINDS else lease_stale_in(job)
    if wait is not None:
        log.info("job %s held by %s; looking again in %.0f s", job_id, job and job.worker, wait)
        JOB_KINDS[kind].task.apply_async((job_id,), countdown=wait)


def _held(job: JobRun) -> Any:
    """The job's row, as long as this worker holds it (an unclaimed row, as when a
    service runs a job's work inline, has an empty lease and is held by its caller)."""
    return JobRun.objects.filter(pk=job.pk, lease=job.lease, status__in=ACTIVE)


def job_progress(*, job: JobRun, done: int, total: int | None = None, message: str = "") -> None:
    """Progress goes straight to its row so pollers see it while the job runs. Raises
    JobStopped when the job was cancelled or taken over: the work ends there."""
    fields: dict[str, Any] = {
        "done": done,
        "message": message[:300],
        "status": JobRun.Status.RUNNING,
    }
    if total is not None:
        fields["total"] = total
    if job.started_at is None:
        fields["started_at"] = timezone.now()
    if not _set(job, _held(job), **fields):
        raise JobStopped(f"job {job.pk} was cancelled or taken over")


def job_finish(*, job: JobRun, error: str = "") -> None:
    fields: dict[str, Any] = {
        "status": JobRun.Status.FAILED if error else JobRun.Status.DONE,
        "error": error,
        "finished_at": timezone.now(),
    }
    if not error:
        fields["done"] = job.total
    if not _set(job, _held(job), **fields):
        log.info("%s job %s ended after it was cancelled or taken over", job.kind, job.pk)


# ------------------------------------------------------------- the worker's main process
#
# Celery sends these signals in the worker's main process: task_received when it takes a
# message off the queue (before any pool process runs it), task_failure with
# WorkerLostError when a prefork pool process died while running a task. (At the hard
# time limit Celery sends task_failure before it kills the process, so the process still
# lives then and the heartbeat rule marks the job.) With the solo pool the main process
# runs the tasks itself, so only task_received applies there.

_NODE = {"name": ""}


@signals.celeryd_init.connect
def _remember_node(sender: str | None = None, **_: Any) -> None:
    """The worker's node name; pool processes forked from this one inherit it."""
    _NODE["name"] = sender or ""


def _node() -> str:
    return _NODE["name"] or socket.gethostname()


@contextmanager
def _main_process_database() -> Iterator[None]:
    """Database work in a signal handler of the worker's main process: a fresh
    connection, closed again so no pool process forked later inherits it, and an error
    logged instead of raised into the consumer."""
    close_old_connections()
    try:
        yield
    except Exception:
        log.exception("job bookkeeping in the worker's main process failed")
    finally:
        connection.close()


@signals.task_received.connect
def _job_message_received(request: Any = None, **_: Any) -> None:
    model = _row_model(request.name) if request is not None else None
    if model is None or not request.args:
        return
    with _main_process_database():
        model._default_manager.filter(pk=request.args[0], status=model.Status.QUEUED).update(
            received_at=timezone.now()
        )


@signals.task_failure.connect
def _job_process_died(
    sender: Any = None, exception: BaseException | None = None, args: Any = None, **_: Any
) -> None:
    if not isinstance(exception, WorkerLostError):
        return
    model = _row_model(getattr(sender, "name", None))
    if not args or model is None:
        return
    with _main_process_database():
        job_mark_process_died(job_id=args[0], reason=worker_lost_reason(exception), model=model)


def worker_lost_reason(exception: BaseException) -> str:
    """Celery's message without its "Job: N." (the pool's own counter, which a reader
    would take for the job's number on the page)."""
    text = re.sub(r"\s*Job: \d+\.?", "", str(exception)).strip()
    return f"{type(exception).__name__}: {text}"


def process_alive(pid: int) -> bool:
    """Whether a process of this machine with this id exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user: alive
        return True
    return True


def job_mark_process_died(*, job_id: int, reason: str, model: Any = JobRun) -> bool:
    """Mark the job (a `model` row) lost now if it is running under a process of this
    worker that no longer exists. A job held by a live process (another delivery that
    took it over, on this worker or another) is left alone."""
    node = f"{_node()}:"
    running = model.Status.RUNNING
    job = model._default_manager.filter(pk=job_id, status=running, worker__startswith=node).first()
    if job is None or process_alive(int(job.worker[len(node) :])):
        return False
    return _set(
        job,
        model._default_manager.filter(pk=job.pk, status=running, lease=job.lease),
        status=model.Status.LOST,
        finished_at=timezone.now(),
        error=(
            f"lost: the worker process that ran it ({job.worker}) died ({reason}). Retry "
            "it: it resumes where it can."
        ),
    )
