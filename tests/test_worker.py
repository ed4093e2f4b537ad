"""A real Celery worker builds a study report from the broker the settings name
(filesystem by default, Redis in CI's second run), with progress in the job row."""

from __future__ import annotations

import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.urls import reverse

from ideareview.celery import app
from studies.models import JobRun, StudyReport

# a real worker on the configured broker (both CI passes)
pytestmark = [pytest.mark.slow, pytest.mark.embedded]


@pytest.fixture
def celery_worker(settings, tmp_path):
    settings.REPORTS_ROOT = tmp_path / "reports"
    settings.ANALYSIS_CONSISTENCY_SPLITS = 50
    settings.ANALYSIS_MIXED_ENGINE = "sparse"
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        yield


def wait_for(job: JobRun, seconds: float = 300) -> JobRun:
    deadline = time.monotonic() + seconds
    seen_progress = set()
    while time.monotonic() < deadline:
        job.refresh_from_db()
        seen_progress.add(job.done)
        if not job.is_active:
            job.seen_progress = seen_progress  # type: ignore[attr-defined]
            return job
        time.sleep(0.2)
    raise AssertionError(f"job still {job.status} after {seconds} s: {job.message}")


@pytest.mark.django_db(transaction=True)
@pytest.mark.figures  # the worker runs in this process; the page shows the report's plots
def test_worker_builds_the_report_while_the_page_polls_its_progress(
    si2024_study, owner, client, celery_worker
):
    client.force_login(owner)
    response = client.post(
        reverse("studies:study_report_build", args=["si2024"]), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert 'hx-trigger="every 1s"' in body and "<progress" in body
    job = JobRun.objects.get(study=si2024_study, kind="report")
    # a second click while it runs does not start a second job
    client.post(reverse("studies:study_report_build", args=["si2024"]), HTTP_HX_REQUEST="true")
    assert JobRun.objects.filter(study=si2024_study, kind="report").count() == 1
    job = wait_for(job)
    assert job.status == JobRun.Status.DONE, job.error
    assert job.done == job.total > 1
    report = StudyReport.objects.get(job=job)
    assert report.data["data"]["rows"] == 337
    status = client.get(
        reverse("studies:job_status", args=["si2024", job.pk]), HTTP_HX_REQUEST="true"
    )
    assert status["HX-Refresh"] == "true"
    assert "hx-trigger" not in status.content.decode()
    # the done line says what was built, not the name of the build's last step
    done = status.content.decode()
    unique = report.data["data"]["unique_reviews"]
    assert f"report built from {unique} review{'' if unique == 1 else 's'} of" in done
    assert "drawing plots" not in done
    # the owner's page then shows the finished report with its plots
    page = client.get(reverse("studies:study_report", args=["si2024"])).content.decode()
    assert "<svg" in page and "Test 1" in page
