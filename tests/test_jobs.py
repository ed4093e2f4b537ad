"""The job lifecycle's rules on rows, without a worker: lost by heartbeat, a queued job
never lost, cancel, retry, the lease, the one status endpoint, a broker that refuses the
message. The same faults with a real worker killed by SIGKILL are in
tests/test_jobs_worker.py."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from studies import jobs
from studies.analysis.report import build_report
from studies.models import JobRun

pytestmark = pytest.mark.embedded  # the job lease under each database's locks


def running(study, *, kind="report", beat_seconds_ago=0.0, **fields) -> JobRun:
    now = timezone.now()
    return JobRun.objects.create(
        study=study,
        kind=kind,
        status="running",
        started_at=now - timedelta(hours=1),
        heartbeat_at=now - timedelta(seconds=beat_seconds_ago),
        lease="a" * 32,
        **fields,
    )


@pytest.mark.django_db
def test_a_running_job_is_lost_only_once_its_heartbeat_is_older_than_the_setting(
    si2024_study, settings
):
    settings.JOB_LOST_AFTER_SECONDS = 120
    # started an hour ago (a long step), heartbeat fresh: still running
    job = running(si2024_study, beat_seconds_ago=100)
    assert jobs.job_active(study=si2024_study, kind="report") == job
    JobRun.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=121))
    assert jobs.job_active(study=si2024_study, kind="report") is None
    job.refresh_from_db()
    assert job.status == JobRun.Status.LOST and "no heartbeat for 121 s" in job.error
    assert job.can_retry


@pytest.mark.django_db
def test_a_queued_job_is_never_taken_for_lost(si2024_study, settings):
    # with one worker a report may wait behind a six-hour normalization
    job = JobRun.objects.create(
        study=si2024_study, kind="report", created_at=timezone.now() - timedelta(hours=8)
    )
    assert jobs.job_active(study=si2024_study, kind="report") == job
    job.refresh_from_db()
    assert job.status == JobRun.Status.QUEUED


@pytest.fixture
def bare_study(owner):
    from studies.services.study import study_create

    return study_create(owner=owner, slug="bare", title="Bare")


@pytest.mark.django_db
def test_a_queued_job_whose_message_a_worker_took_is_lost_once_not_claimed_within_the_setting(
    bare_study, settings
):
    settings.JOB_LOST_AFTER_SECONDS = 120
    now = timezone.now()
    job = JobRun.objects.create(
        study=bare_study, kind="report", received_at=now - timedelta(seconds=100)
    )
    assert not jobs.job_mark_if_lost(job=job) and job.status == JobRun.Status.QUEUED
    JobRun.objects.filter(pk=job.pk).update(received_at=now - timedelta(seconds=121))
    job.refresh_from_db()
    assert jobs.job_active(study=bare_study, kind="report") is None
    job.refresh_from_db()
    assert job.status == JobRun.Status.LOST and "took it from the queue 121 s ago" in job.error
    # a retry waits for a worker again, with no trace of the dead one's receipt
    jobs.job_retry(job=job)
    job.refresh_from_db()
    assert job.status == JobRun.Status.QUEUED and job.received_at is None
    assert not jobs.job_mark_if_lost(job=job)


@pytest.mark.django_db
def test_a_received_job_that_was_claimed_meanwhile_is_not_marked_lost_from_a_stale_copy(
    bare_study, settings
):
    settings.JOB_LOST_AFTER_SECONDS = 120
    old = timezone.now() - timedelta(seconds=500)
    job = JobRun.objects.create(study=bare_study, kind="report", received_at=old)
    stale_copy = JobRun.objects.get(pk=job.pk)
    assert jobs.job_claim(job_id=job.pk, kind="report") is not None
    assert not jobs.job_mark_if_lost(job=stale_copy)
    job.refresh_from_db()
    assert job.status == JobRun.Status.RUNNING


def dead_pid() -> int:
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.django_db
def test_a_job_whose_pool_process_died_is_lost_at_once_but_not_one_a_live_process_holds(
    bare_study,
):
    import os

    node = jobs._node()
    dead = running(bare_study, worker=f"{node}:{dead_pid()}")
    assert jobs.job_mark_process_died(job_id=dead.pk, reason="WorkerLostError: signal 9")
    dead.refresh_from_db()
    assert dead.status == JobRun.Status.LOST and "signal 9" in dead.error
    assert not jobs.job_mark_process_died(job_id=dead.pk, reason="again")  # once

    # taken over by a live process (another delivery), here or on another worker
    live = running(bare_study, kind="duplicates", worker=f"{node}:{os.getpid()}")
    elsewhere = running(bare_study, kind="leakage", worker=f"other@host:{dead_pid()}")
    for job in (live, elsewhere):
        assert not jobs.job_mark_process_died(job_id=job.pk, reason="WorkerLostError")
        job.refresh_from_db()
        assert job.status == JobRun.Status.RUNNING


@pytest.mark.django_db
def test_a_claim_records_the_process_that_holds_the_job(bare_study):
    import os

    job = JobRun.objects.create(study=bare_study, kind="report")
    claimed = jobs.job_claim(job_id=job.pk, kind="report")
    assert claimed is not None and claimed.worker == f"{jobs._node()}:{os.getpid()}"


@pytest.mark.django_db
def test_a_second_delivery_leaves_a_job_with_a_fresh_heartbeat_alone_and_takes_a_stale_one(
    si2024_study, settings
):
    settings.JOB_LOST_AFTER_SECONDS = 120
    job = running(si2024_study, beat_seconds_ago=10)
    assert jobs.job_claim(job_id=job.pk, kind="report") is None
    job.refresh_from_db()
    assert job.lease == "a" * 32
    JobRun.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=200))
    taken = jobs.job_claim(job_id=job.pk, kind="report")
    assert taken is not None and taken.lease != "a" * 32 and taken.attempts == 1
    # the old holder's writes now fail, so it stops at its next progress tick
    job.refresh_from_db()
    job.lease = "a" * 32
    with pytest.raises(jobs.JobStopped):
        jobs.job_progress(job=job, done=3, message="old worker")
    jobs.job_finish(job=job, error="old worker's end")
    taken.refresh_from_db()
    assert taken.status == JobRun.Status.RUNNING and taken.error == ""


@pytest.mark.django_db
def test_a_delivery_that_finds_its_job_held_sends_the_task_again_for_when_it_would_be_stale(
    si2024_study, settings, monkeypatch
):
    from studies.job_kinds import JOB_KINDS

    settings.JOB_LOST_AFTER_SECONDS, settings.JOB_HEARTBEAT_SECONDS = 120, 15
    job = running(si2024_study, beat_seconds_ago=10)
    sent, ran = [], []
    task = JOB_KINDS["report"].task
    monkeypatch.setattr(task, "apply_async", lambda args, countdown: sent.append((args, countdown)))
    assert jobs.job_run(job_id=job.pk, kind="report", work=ran.append) is None
    ((args, countdown),) = sent
    assert args == (job.pk,) and 120 - 10 + 15 - 2 <= countdown <= 120 - 10 + 15 and ran == []
    # a finished job is not looked at again
    JobRun.objects.filter(pk=job.pk).update(status=JobRun.Status.DONE)
    assert jobs.job_run(job_id=job.pk, kind="report", work=ran.append) is None
    assert len(sent) == 1 and ran == []


@pytest.mark.django_db
def test_finished_and_cancelled_jobs_are_not_claimed(si2024_study):
    for status in ("done", "failed", "cancelled", "lost"):
        job = JobRun.objects.create(study=si2024_study, kind="report", status=status)
        assert jobs.job_claim(job_id=job.pk, kind="report") is None


@pytest.mark.django_db
def test_cancel_needs_no_worker_and_the_worker_stops_at_its_next_tick(si2024_study):
    job = running(si2024_study)
    assert jobs.job_cancel(job=JobRun.objects.get(pk=job.pk))
    with pytest.raises(jobs.JobStopped):
        jobs.job_progress(job=job, done=1)
    jobs.job_finish(job=job)
    job.refresh_from_db()
    assert job.status == JobRun.Status.CANCELLED and job.finished_at is not None


@pytest.mark.django_db
def test_the_work_of_a_job_runs_with_its_outcome_in_the_row(si2024_study, settings):
    settings.JOB_HEARTBEAT_SECONDS = 1
    job = JobRun.objects.create(study=si2024_study, kind="report", total=2)
    seen = []

    def work(j: JobRun) -> None:
        seen.append(j.lease)
        jobs.job_progress(job=j, done=1, message="half")

    assert jobs.job_run(job_id=job.pk, kind="report", work=work) is not None
    job.refresh_from_db()
    assert job.status == JobRun.Status.DONE and job.done == 2 and seen == [job.lease]

    failing = JobRun.objects.create(study=si2024_study, kind="report")

    def boom(j: JobRun) -> None:
        raise ValueError("no reviews")

    with pytest.raises(ValueError):
        jobs.job_run(job_id=failing.pk, kind="report", work=boom)
    failing.refresh_from_db()
    # An error the app raises on purpose is its sentence alone; the owner reads it.
    assert failing.status == "failed" and failing.error == "no reviews"
    unexpected = JobRun.objects.create(study=si2024_study, kind="report")

    def crash(j: JobRun) -> None:
        raise KeyError("metric")

    with pytest.raises(KeyError):
        jobs.job_run(job_id=unexpected.pk, kind="report", work=crash)
    unexpected.refresh_from_db()
    assert unexpected.error == "KeyError: 'metric'"


@pytest.mark.django_db
def test_the_report_page_shows_a_failed_builds_refusal_as_a_sentence(si2024_study, owner):
    def refuse(j: JobRun) -> None:
        frame = pd.DataFrame({"condition": ["AI"]})
        build_report(frame, metrics=[], baseline="Human", conditions=["Human", "AI"])

    job = JobRun.objects.create(study=si2024_study, kind="report")
    with pytest.raises(ValueError):
        jobs.job_run(job_id=job.pk, kind="report", work=refuse)
    client = Client()
    client.force_login(owner)
    page = client.get(reverse("studies:study_report", args=[si2024_study.slug])).content.decode()
    assert "The last run failed: The baseline condition Human has no submitted reviews yet" in page
    assert "ValueError" not in page


@pytest.mark.django_db
def test_retry_puts_the_same_row_back_in_the_queue_and_sends_it_again(
    si2024_study, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr(jobs, "job_send", lambda *, job: sent.append(job.pk) or True)
    job = running(si2024_study)
    with pytest.raises(jobs.JobNotRetryable):
        jobs.job_retry(job=job)
    JobRun.objects.filter(pk=job.pk).update(status="lost", error="lost: ...")
    job.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        jobs.job_retry(job=job)
    job.refresh_from_db()
    assert sent == [job.pk]
    assert job.status == "queued" and job.error == "" and job.lease == "" and job.done == 0


@pytest.mark.django_db(transaction=True)
def test_a_broker_that_cannot_take_the_message_fails_the_job_with_a_retry(
    si2024_study, owner, client, monkeypatch
):
    from kombu.exceptions import OperationalError

    from studies.tasks import report_build_task

    def refuse(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6399. Connection refused.")

    monkeypatch.setattr(report_build_task, "apply_async", refuse)
    client.force_login(owner)
    response = client.post(
        reverse("studies:study_report_build", args=["si2024"]), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    body = response.content.decode()
    job = JobRun.objects.get(study=si2024_study, kind="report")
    assert job.status == "failed" and "could not be sent to the task queue" in job.error
    assert "Connection refused" in body and "Retry" in body and "hx-trigger" not in body
    # the next click starts a new job instead of waiting for the failed one
    monkeypatch.setattr(report_build_task, "apply_async", lambda *a, **k: None)
    client.post(reverse("studies:job_retry", args=["si2024", job.pk]), HTTP_HX_REQUEST="true")
    job.refresh_from_db()
    assert job.status == "queued"


@pytest.mark.django_db
def test_every_job_page_polls_the_one_status_endpoint_and_stops_when_lost(
    si2024_study, owner, client, settings
):
    settings.JOB_LOST_AFTER_SECONDS = 120
    client.force_login(owner)
    pages = {
        "report": "studies:study_report",
        "duplicates": "studies:duplicates",
        "normalization": "studies:normalization",
        "leakage": "studies:leakage",
        "import": "studies:reviews_import_page",
    }
    for kind, page in pages.items():
        job = running(si2024_study, kind=kind, message="step 3")
        status = reverse("studies:job_status", args=["si2024", job.pk])
        body = client.get(reverse(page, args=["si2024"])).content.decode()
        assert f'hx-get="{status}"' in body and "step 3" in body, kind
        JobRun.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
        polled = client.get(status, HTTP_HX_REQUEST="true")
        assert polled["HX-Refresh"] == "true"
        text = polled.content.decode()
        assert "hx-trigger" not in text and "no heartbeat" in text and "Retry" in text, kind
        JobRun.objects.filter(pk=job.pk).update(status="done")


@pytest.mark.django_db
def test_another_owner_cannot_see_cancel_or_retry_a_job(si2024_study, other_researcher, client):
    job = running(si2024_study)
    client.force_login(other_researcher)
    for name, method in (("job_status", "get"), ("job_cancel", "post"), ("job_retry", "post")):
        url = reverse(f"studies:{name}", args=["si2024", job.pk])
        assert getattr(client, method)(url).status_code == 404
    job.refresh_from_db()
    assert job.status == "running"


@pytest.mark.django_db
def test_cancel_from_the_page_with_no_worker(si2024_study, owner, client):
    job = running(si2024_study, beat_seconds_ago=1)
    client.force_login(owner)
    body = client.post(
        reverse("studies:job_cancel", args=["si2024", job.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    job.refresh_from_db()
    assert job.status == "cancelled" and "cancelled" in body and "Retry" in body


@pytest.mark.django_db
def test_a_large_review_import_runs_as_a_job_with_progress(
    owner, client, settings, django_capture_on_commit_callbacks, monkeypatch
):
    from studies.models import Review
    from studies.services.study import study_create
    from studies.tasks import import_reviews
    from tests.conftest import SI_REVIEWS, SI_TITLES

    settings.IMPORT_JOB_MIN_ROWS = 100
    sent = []
    monkeypatch.setattr(jobs, "job_send", lambda *, job: sent.append(job.pk) or True)
    study = study_create(owner=owner, slug="big", baseline_condition="Human")
    client.force_login(owner)
    url = reverse("studies:reviews_import_page", args=["big"])
    upload = {"format": "si2024", "reviews": SI_REVIEWS.open("rb"), "titles": SI_TITLES.open("rb")}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, upload)
    assert response.status_code == 302
    job = JobRun.objects.get(study=study, kind="import")
    assert sent == [job.pk] and Review.objects.filter(study=study).count() == 0
    page = client.get(url).content.decode()
    assert "Importing reviews" in page and "<progress" in page
    import_reviews(job.pk)  # what the worker does
    job.refresh_from_db()
    assert job.status == "done", job.error
    assert Review.objects.filter(study=study).count() == 296
    page = client.get(url).content.decode()
    assert "unique reviews: 296" in page
    # the done line gives the outcome, not the last step ("writing 296 reviews")
    assert job.message == "296 reviews and 129 ideas added, 0 reviews already here"
    assert job.message in page and "writing 296 reviews" not in page
    # the stored upload is removed once imported
    assert "reviews_path" in job.params
    from django.core.files.storage import default_storage

    assert not default_storage.exists(job.params["reviews_path"])


def test_the_lost_message_drops_celerys_pool_job_counter():
    from celery.exceptions import WorkerLostError

    error = WorkerLostError("Worker exited prematurely: signal 9 (SIGKILL) Job: 3.")
    assert jobs.worker_lost_reason(error) == (
        "WorkerLostError: Worker exited prematurely: signal 9 (SIGKILL)"
    )
