"""A report job in a running Celery worker runs with the configured number of BLAS
threads, and the worker's threads are as before once the job is done."""

from __future__ import annotations

import time

import pytest
from celery.contrib.testing.worker import start_worker

from ideareview.celery import app
from studies.analysis.threads import blas_thread_counts, blas_threads
from studies.models import JobRun, StudyReport
from studies.tasks import report_enqueue

# a real worker on the configured broker (both CI passes)
pytestmark = [pytest.mark.slow, pytest.mark.embedded]


@pytest.fixture
def worker_limiting_blas_threads(settings, tmp_path):
    settings.REPORTS_ROOT = tmp_path / "reports"
    settings.ANALYSIS_CONSISTENCY_SPLITS = 20
    settings.ANALYSIS_MIXED_ENGINE = "sparse"
    settings.ANALYSIS_MIXED_STARTS = 1
    settings.ANALYSIS_BLAS_THREADS = 1
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        yield


@pytest.mark.django_db(transaction=True)
def test_report_task_runs_with_the_configured_blas_threads(
    si2024_study, owner, settings, worker_limiting_blas_threads
):
    if not blas_thread_counts():
        pytest.skip("no BLAS library with a thread pool is loaded")
    before = blas_thread_counts()
    # A limit other than the process's count (test processes run one thread, tests/conftest.py;
    # a one-process run the library's default), so the job is seen to apply it.
    limit = 2 if set(before) == {1} else 1
    settings.ANALYSIS_BLAS_THREADS = limit
    job = report_enqueue(study=si2024_study, actor=owner)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if not job.is_active:
            break
        time.sleep(0.5)
    assert job.status == JobRun.Status.DONE, job.error
    runtime = StudyReport.objects.get(job=job).data["runtime"]
    assert runtime["blas_threads_setting"] == limit
    assert runtime["blas_threads"] and set(runtime["blas_threads"]) == {limit}
    assert blas_thread_counts() == before


def test_blas_threads_zero_leaves_the_library_default():
    before = blas_thread_counts()
    other = 2 if set(before) == {1} else 1  # test processes run one thread (tests/conftest.py)
    with blas_threads(0):
        assert blas_thread_counts() == before
    with blas_threads(other):
        assert set(blas_thread_counts()) == {other}
    assert blas_thread_counts() == before
