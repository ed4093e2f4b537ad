"""Job faults with real worker processes (`celery -A ideareview worker`) killed by
SIGKILL, on whichever broker the settings name: the filesystem broker by default, Redis
when CELERY_BROKER_URL says so (CI runs both). The filesystem broker never delivers a
message twice, so there the heartbeat and the retry carry a job; Redis delivers an
unacknowledged message again after its visibility timeout, and the lease decides."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.urls import reverse

from ideareview.celery import app
from studies.jobs import job_enqueue, job_mark_if_lost, job_retry, job_start
from studies.models import JobRun, StudyReport
from tests import jobtasks
from tests.conftest import ROOT, TEST_VAR_DIR
from tests.factories import make_judged_study

# One xdist worker runs these tests one after another: they spend most of their time
# waiting (for a heartbeat to go stale, a message to come back, a sleeping job), and when
# all the workers waited on them at once, cores stood idle that other tests could use.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.embedded,
    pytest.mark.xdist_group("killed-workers"),
]

HEARTBEAT = 1
LOST_AFTER = 4
# Long enough that a killed worker's heartbeat is stale (LOST_AFTER) well before its
# message comes back, so the second delivery takes the job over instead of leaving it to
# the dead worker; the test jobs sleep less than this, so a live worker's own message is
# not delivered again while it runs.
VISIBILITY = 10
RESTORE = 1  # the workers' sweep for messages past the visibility timeout (s)
# How long a live worker may take to finish a job or run it has been given: a bound for a
# hung test, not a figure under test (a loaded CI machine starts workers slowly).
DONE_WITHIN = 180
ON_REDIS = str(django_settings.CELERY_BROKER_URL).startswith("redis")


def database_url() -> str:
    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    return (
        f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST'] or '127.0.0.1'}:"
        f"{s['PORT'] or 5432}/{s['NAME']}"
    )


class Workers:
    """Worker processes this test started; each is killed by its own pid at the end."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.procs: list[subprocess.Popen] = []

    def start(self, pool: str = "solo", **environ: str) -> subprocess.Popen:
        proc = self.launch(pool, **environ)
        self.wait_ready(proc)
        return proc

    def start_two(self) -> list[subprocess.Popen]:
        """Two solo workers, started side by side (a start takes seconds)."""
        procs = [self.launch(), self.launch()]
        for proc in procs:
            self.wait_ready(proc)
        return procs

    def launch(self, pool: str = "solo", **environ: str) -> subprocess.Popen:
        n = len(self.procs) + 1
        log = self.tmp / f"worker{n}.log"
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "IDEAREVIEW_VAR_DIR": TEST_VAR_DIR,
            "DJANGO_SECRET_KEY": "worker-of-a-test",
            "IDEAREVIEW_JOB_HEARTBEAT_SECONDS": str(HEARTBEAT),
            "IDEAREVIEW_JOB_LOST_AFTER_SECONDS": str(LOST_AFTER),
            "IDEAREVIEW_BROKER_VISIBILITY_TIMEOUT": str(VISIBILITY),
            "IDEAREVIEW_BROKER_RESTORE_SECONDS": str(RESTORE),
            "IDEAREVIEW_CONSISTENCY_SPLITS": "50",
            "IDEAREVIEW_MIXED_ENGINE": "sparse",
            "IDEAREVIEW_REPORT_FIGURES": "0",  # the reports here are read for their rows
            # nor for their quality flags: embedding si2024's 1,300 imported rationales
            # took most of a build on a busy machine
            "IDEAREVIEW_QUALITY_EMBED_PER_REPORT": "0",
            **environ,
        }
        cmd = [
            sys.executable, "-m", "celery", "-A", "ideareview", "worker", f"--pool={pool}",
            "--concurrency=1", "-I", "tests.jobtasks", "--without-mingle", "--without-gossip",
            "--without-heartbeat", "-n", f"test{n}-{os.getpid()}@%h", "-l", "INFO",
        ]  # fmt: skip
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
        )
        self.procs.append(proc)
        return proc

    def wait_ready(self, proc: subprocess.Popen) -> None:
        log = self.tmp / f"worker{self.procs.index(proc) + 1}.log"
        deadline = time.monotonic() + 90
        while " ready." not in log.read_text():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "worker not ready after 90 s"
            time.sleep(0.2)

    def log(self, proc: subprocess.Popen) -> str:
        return (self.tmp / f"worker{self.procs.index(proc) + 1}.log").read_text()

    def kill(self, proc: subprocess.Popen) -> float:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        return time.monotonic()

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)


@pytest.fixture
def workers(tmp_path, settings):
    settings.JOB_LOST_AFTER_SECONDS = LOST_AFTER
    settings.REPORTS_ROOT = Path(TEST_VAR_DIR) / "reports"
    # Messages left by earlier runs' killed workers must not reach this test's rows.
    if ON_REDIS:
        with app.connection_for_write() as conn:
            conn.default_channel.client.flushdb()
    else:
        app.control.purge()
    w = Workers(tmp_path)
    yield w
    w.stop_all()


@pytest.fixture
def bare_study(owner):
    """A study without reviews: enough for the sleep jobs, and quick to make."""
    from studies.services.study import study_create

    return study_create(owner=owner, slug="sleepy", title="Sleepy")


def wait_until(check, seconds: float = 120, what: str = "") -> float:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(0.1)
    raise AssertionError(f"not reached within {seconds} s: {what}")


def status_of(job: JobRun) -> str:
    job.refresh_from_db()
    assert job.status != "failed", job.error
    return job.status


def sleep_job(study, tmp_path: Path, seconds: float) -> JobRun:
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    job = job_start(study=study, kind="test-sleep", total=1, seconds=seconds, marks=str(marks))
    return job_enqueue(job=job)


def starts(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "marks").iterdir())


def wait_started(job: JobRun, tmp_path: Path) -> None:
    """Until a worker holds the job and its long step has begun."""
    wait_until(lambda: status_of(job) == "running" and bool(starts(tmp_path)), what="started")


def test_a_report_whose_worker_is_killed_is_lost_within_the_setting_and_a_retry_rebuilds_it(
    si2024_study, owner, client, workers
):
    first = workers.start()
    client.force_login(owner)
    client.post(reverse("studies:study_report_build", args=["si2024"]))
    job = JobRun.objects.get(study=si2024_study, kind="report")
    # killed while it writes the files: no row names what it saved, so no page shows it
    wait_until(lambda: status_of(job) == "running" and "writing" in job.message, what="writing")
    time.sleep(0.5)
    killed = workers.kill(first)
    reports = Path(TEST_VAR_DIR) / "reports" / "si2024"
    assert not StudyReport.objects.filter(study=si2024_study).exists()

    # the page that polls the job says it was lost within LOST_AFTER (+ a poll's slack)
    status = reverse("studies:job_status", args=["si2024", job.pk])
    lost = wait_until(
        lambda: 'data-job-status="lost"' in client.get(status, HTTP_HX_REQUEST="true").text,
        seconds=LOST_AFTER + 10,
        what="job marked lost",
    )
    assert lost - killed <= LOST_AFTER + 2
    assert "no heartbeat" in job.__class__.objects.get(pk=job.pk).error
    # a new build is not blocked by the lost one; here the lost one is retried instead
    workers.start()
    client.post(reverse("studies:job_retry", args=["si2024", job.pk]))
    wait_until(lambda: status_of(job) == "done", seconds=300, what="retried report done")
    assert job.attempts >= 2 and job.error == ""
    report = StudyReport.objects.get(job=job)
    assert report.data["data"]["rows"] == 337
    # the retried build saved a fresh version and removed whatever the killed one left
    assert report.directory.startswith("si2024/")
    assert [p.name for p in reports.iterdir()] == [report.directory.split("/")[1]]
    assert {"report.html", "report.json", "package.zip"} <= {
        p.name for p in (reports.parent / report.directory).iterdir()
    }


def test_a_long_step_without_progress_is_not_lost_while_its_worker_lives_and_is_once_it_dies(
    bare_study, tmp_path, workers
):
    worker = workers.start()
    job = sleep_job(bare_study, tmp_path, seconds=3 * LOST_AFTER)
    wait_started(job, tmp_path)
    # the pages poll all the while: a long step is never taken for lost
    while status_of(job) == "running":
        assert not job_mark_if_lost(job=job)
        time.sleep(0.5)
    assert job.status == "done" and len(starts(tmp_path)) == 1

    long = sleep_job(bare_study, tmp_path, seconds=600)
    wait_until(lambda: status_of(long) == "running" and len(starts(tmp_path)) == 2)
    killed = workers.kill(worker)
    lost = wait_until(lambda: job_mark_if_lost(job=long), seconds=LOST_AFTER + 10)
    assert LOST_AFTER - 1.5 <= lost - killed <= LOST_AFTER + 2
    assert status_of(long) == "lost"


def test_cancel_works_on_a_job_whose_worker_is_dead(bare_study, owner, client, workers, tmp_path):
    worker = workers.start()
    job = sleep_job(bare_study, tmp_path, seconds=600)
    wait_started(job, tmp_path)
    workers.kill(worker)
    client.force_login(owner)
    body = client.post(
        reverse("studies:job_cancel", args=[bare_study.slug, job.pk]), HTTP_HX_REQUEST="true"
    ).text
    assert status_of(job) == "cancelled" and "cancelled" in body
    # a new worker (and, on Redis, the message delivered again) leaves it cancelled
    second = workers.start()
    if ON_REDIS:
        wait_until(
            lambda: workers.log(second).count("] received") == 1,
            seconds=VISIBILITY + 30,
            what="the message delivered again",
        )
    time.sleep(2)
    assert status_of(job) == "cancelled" and len(starts(tmp_path)) == 1


def test_a_second_delivery_of_a_running_job_does_not_run_it_twice(bare_study, tmp_path, workers):
    workers.start_two()
    job = sleep_job(bare_study, tmp_path, seconds=3 * LOST_AFTER)
    wait_started(job, tmp_path)
    # the same message again, as a broker delivers it when it thinks the first was lost
    jobtasks.sleep_job.delay(job.pk)
    wait_until(lambda: status_of(job) == "done", seconds=DONE_WITHIN, what="done")
    time.sleep(1)
    assert len(starts(tmp_path)) == 1 and job.attempts == 1


@pytest.mark.skipif(not ON_REDIS, reason="the filesystem broker never delivers twice")
def test_on_redis_a_killed_workers_job_is_delivered_again_and_resumed_by_another_worker(
    bare_study, tmp_path, workers
):
    # Both workers are up before the job starts, so the message comes back through the
    # idle worker's periodic sweep, not through the one a worker makes when it starts.
    workers.start_two()
    job = sleep_job(bare_study, tmp_path, seconds=2 * LOST_AFTER)
    wait_started(job, tmp_path)
    workers.kill(holder(workers, tmp_path))
    # no page polls it (nobody marks it lost): the broker's redelivery finds its
    # heartbeat stale and the other worker takes the job over under a new lease
    wait_until(lambda: len(starts(tmp_path)) == 2, seconds=VISIBILITY + 30, what="redelivered")
    # each start's file is written just after its claim, a moment after its delivery
    first, second = sorted((tmp_path / "marks" / name).stat().st_mtime for name in starts(tmp_path))
    late = second - first - VISIBILITY
    assert -1 <= late <= 2 * RESTORE + 2, late
    wait_until(lambda: status_of(job) == "done", seconds=2 * LOST_AFTER + 10, what="resumed")
    assert job.attempts == 2 and len(starts(tmp_path)) == 2


def holder(workers: Workers, tmp_path: Path) -> subprocess.Popen:
    """The solo worker whose process runs the sleep job (its pid names the start's file)."""
    (pid,) = {int(name.split("-")[1]) for name in starts(tmp_path)}
    return next(p for p in workers.procs if p.pid == pid)


def test_a_prefork_workers_killed_pool_process_marks_its_job_lost_at_once_and_retry_resumes_it(
    bare_study, tmp_path, workers
):
    # the heartbeat rule alone would wait a minute; nothing polls the job here anyway
    workers.start(pool="prefork", IDEAREVIEW_JOB_LOST_AFTER_SECONDS="60")
    job = sleep_job(bare_study, tmp_path, seconds=2 * LOST_AFTER)
    wait_started(job, tmp_path)
    (start,) = starts(tmp_path)
    child = int(start.split("-")[1])
    assert child not in {p.pid for p in workers.procs}  # a pool process, not the worker
    assert job.worker.endswith(f"@{os.uname().nodename}:{child}"), job.worker
    os.kill(child, signal.SIGKILL)  # a process of the worker this test started
    killed = time.monotonic()
    # the worker's main process sees its pool process die and marks the job at once:
    # Celery reports it at the first check of its pool (every 5 s) after the lost wait
    lost = wait_until(lambda: status_of(job) == "lost", seconds=30, what="marked lost")
    assert lost - killed <= django_settings.CELERY_WORKER_LOST_WAIT + 5 + 1, lost - killed
    assert "SIGKILL" in job.error and f":{child})" in job.error, job.error
    # the worker started a new pool process; Retry runs the job there
    job_retry(job=job)
    wait_until(lambda: status_of(job) == "done", seconds=DONE_WITHIN, what="retried job done")
    assert job.attempts == 2 and len({name.split("-")[1] for name in starts(tmp_path)}) == 2


def test_a_job_whose_worker_died_after_taking_its_message_but_before_claiming_it_is_lost(
    bare_study, tmp_path, workers
):
    first = workers.start()
    held = tmp_path / "held"
    held.mkdir()
    (tmp_path / "marks").mkdir()
    job = job_start(
        study=bare_study,
        kind="test-held",
        total=1,
        seconds=1,
        marks=str(tmp_path / "marks"),
        held=str(held),
    )
    job_enqueue(job=job)
    wait_until(lambda: any(held.iterdir()), what="message taken")
    job.refresh_from_db()
    assert job.status == "queued" and job.received_at is not None
    killed = workers.kill(first)
    # on the filesystem broker the message is gone with the worker: only this rule
    # ends the wait (on Redis it would also come back after the visibility timeout)
    lost = wait_until(lambda: job_mark_if_lost(job=job), seconds=LOST_AFTER + 10)
    assert lost - killed <= LOST_AFTER + 2
    assert status_of(job) == "lost" and "never started it" in job.error
    workers.start()
    job_retry(job=job)
    wait_until(lambda: status_of(job) == "done", seconds=DONE_WITHIN, what="retried job done")
    assert job.attempts == 1 and len(starts(tmp_path)) == 1


def _point_producer(urls: tuple[str, str, str], options: dict) -> None:
    """Send this process's tasks through another broker (the producer pools are rebuilt
    from the new settings; the write URL is the one the producer uses)."""
    app.conf.broker_url, app.conf.broker_write_url, app.conf.broker_read_url = urls
    app.conf.broker_transport_options = options
    app._pool = None
    app.amqp._producer_pool = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _redis_server(port: int, tmp_path: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],  # fmt: skip
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)


@pytest.fixture
def broker_down(tmp_path):
    """The app's producer points at a broker that is not there until the returned function
    is called, which brings it up and returns the environment for workers that use it: on
    the filesystem broker a queue folder that does not exist yet, on Redis a Redis server
    of this test's own (on a free loopback port) that is not running yet."""
    saved = (
        (app.conf.broker_url, app.conf.broker_write_url, app.conf.broker_read_url),
        dict(app.conf.broker_transport_options or {}),
    )
    servers: list[subprocess.Popen] = []
    if ON_REDIS:
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed")
        port = _free_port()
        url = f"redis://127.0.0.1:{port}/0"
        _point_producer((url, url, url), saved[1])

        def back() -> dict[str, str]:
            servers.append(_redis_server(port, tmp_path))
            return {"CELERY_BROKER_URL": url}

    else:
        missing = str(tmp_path / "no-such-queue")
        _point_producer(
            saved[0], {**saved[1], "data_folder_in": missing, "data_folder_out": missing}
        )

        def back() -> dict[str, str]:
            _point_producer(*saved)
            return {}

    yield back
    _point_producer(*saved)
    for server in servers:
        server.kill()
        server.wait(10)


def test_a_build_clicked_while_the_broker_is_down_fails_with_a_message_and_a_retry_finishes_it(
    si2024_study, owner, client, workers, broker_down
):
    client.force_login(owner)
    response = client.post(
        reverse("studies:study_report_build", args=["si2024"]), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    assert "could not be sent to the task queue" in response.text and "Retry" in response.text
    job = JobRun.objects.get(study=si2024_study, kind="report")
    assert job.status == "failed" and "CELERY_BROKER_URL" in job.error
    broker = broker_down()  # the broker is back
    workers.start(**broker)
    client.post(reverse("studies:job_retry", args=["si2024", job.pk]))
    wait_until(lambda: status_of(job) == "done", seconds=300, what="report built after retry")
    assert StudyReport.objects.filter(job=job).exists()


# --------------------------------------------------------------------------- judge runs
#
# The same faults for judge runs (judging's JudgeRun rows, studies.jobs' lifecycle), with
# their LLM calls answered by the scripted server in this process (judging.testserver).


@pytest.fixture
def judged(owner):
    from judging.testserver import Rules, TestServer

    study = make_judged_study(owner)
    with TestServer(Rules(latency=0.3)) as server:
        yield study, server


def judge_for(server, **fields):
    from llm.models import JudgeConfig

    return JudgeConfig.objects.create(
        name="scripted",
        base_url=server.base_url,
        model="scripted-1",
        api_key_env="IDEAREVIEW_TESTSERVER_KEY",
        concurrency=1,
        max_attempts=1,
        timeout_seconds=30,
        **fields,
    )


def queued_run(study, server, method="absolute"):
    """A judge run of one call per idea (8), one call at a time, sent to the workers."""
    from judging.services import judge_run_create
    from judging.tasks import judge_run_enqueue

    run = judge_run_create(study=study, method=method, config=judge_for(server))
    return judge_run_enqueue(run=run)


def run_row(run):
    run.refresh_from_db()
    return run


def run_page(client, run) -> str:
    """The run's page as its poll asks for it (which marks a run whose worker died lost)."""
    url = reverse("judging:run_detail", args=[run.study.slug, run.pk])
    return client.get(url, HTTP_HX_REQUEST="true").text


def outcomes(run) -> int:
    from judging.models import Judgment

    return Judgment.objects.filter(run=run).values("idea").distinct().count()


def test_a_judge_run_in_a_long_call_is_not_lost_while_its_worker_lives_is_once_it_dies_and_resumes(
    judged, owner, client, workers
):
    study, server = judged
    server.rules.latency = LOST_AFTER + 1.5  # one call outlasts the lost-after setting
    worker = workers.start()
    run = queued_run(study, server)
    client.force_login(owner)
    wait_until(lambda: run_row(run).status == "running", what="running")
    # the page polls all through the first call: its heartbeat keeps the run alive
    while run_row(run).done_calls == 0:
        assert 'id="run-status">Running<' in run_page(client, run)
        time.sleep(0.5)
    # killed in its second call
    killed = workers.kill(worker)
    lost = wait_until(
        lambda: (run_page(client, run), run_row(run).status == "lost")[1],
        seconds=LOST_AFTER + 10,
        what="marked lost by the page",
    )
    assert lost - killed <= LOST_AFTER + 2, lost - killed
    assert "no heartbeat" in run.error and run.done_calls == 1
    page = client.get(reverse("judging:run_detail", args=[study.slug, run.pk])).text
    assert 'id="resume-run"' in page and "no heartbeat" in page
    # resumed by a new worker: the first call's outcome is kept, not asked again
    server.rules.latency = 0.05
    asked = server.requests
    workers.start()
    client.post(reverse("judging:run_resume", args=[study.slug, run.pk]))
    wait_until(lambda: run_row(run).status == "done", seconds=DONE_WITHIN, what="resumed run done")
    assert run.done_calls == run.total_calls == 8 == outcomes(run)
    assert server.requests - asked == 7 and run.attempts == 2 and run.error == ""


def test_cancel_ends_a_judge_run_whose_worker_is_dead_at_once_and_resume_finishes_it(
    judged, owner, client, workers
):
    study, server = judged
    first = workers.start()
    run = queued_run(study, server)
    wait_until(lambda: run_row(run).done_calls >= 2, what="calls made")
    workers.kill(first)
    client.force_login(owner)
    client.post(reverse("judging:run_cancel", args=[study.slug, run.pk]))
    assert run_row(run).status == "cancelled"  # at once: no wait for a stale heartbeat
    done, asked = run.done_calls, server.requests
    second = workers.start()
    if ON_REDIS:  # the killed worker's message comes back, and leaves the run cancelled
        wait_until(
            lambda: workers.log(second).count("] received") == 1,
            seconds=VISIBILITY + 30,
            what="the message delivered again",
        )
        time.sleep(1)
    assert run_row(run).status == "cancelled" and server.requests == asked
    client.post(reverse("judging:run_resume", args=[study.slug, run.pk]))
    wait_until(lambda: run_row(run).status == "done", seconds=DONE_WITHIN, what="resumed run done")
    assert run.done_calls == 8 == outcomes(run)
    # only the units without an outcome were asked (the one in flight at the kill again)
    assert server.requests - asked <= 8 - done


def test_a_prefork_workers_killed_pool_process_marks_its_judge_run_lost_at_once(judged, workers):
    from judging.services import judge_run_resume
    from judging.tasks import judge_run_enqueue

    study, server = judged
    # the heartbeat rule alone would wait a minute; nothing polls the run here
    workers.start(pool="prefork", IDEAREVIEW_JOB_LOST_AFTER_SECONDS="60")
    run = queued_run(study, server)
    wait_until(lambda: run_row(run).done_calls >= 1, what="a call made")
    child = int(run.worker.rsplit(":", 1)[1])
    assert run.worker.endswith(f"@{os.uname().nodename}:{child}"), run.worker
    assert child not in {p.pid for p in workers.procs}  # a pool process, not the worker
    os.kill(child, signal.SIGKILL)  # a process of the worker this test started
    killed = time.monotonic()
    lost = wait_until(lambda: run_row(run).status == "lost", seconds=30, what="marked lost")
    assert lost - killed <= django_settings.CELERY_WORKER_LOST_WAIT + 5 + 1, lost - killed
    assert "SIGKILL" in run.error and f":{child})" in run.error, run.error
    judge_run_enqueue(run=judge_run_resume(run=run))  # runs in the worker's new pool process
    wait_until(lambda: run_row(run).status == "done", seconds=DONE_WITHIN, what="resumed run done")
    assert run.attempts == 2 and run.done_calls == 8 == outcomes(run)
    assert not run.worker.endswith(f":{child}")


def test_a_judge_run_whose_worker_died_after_taking_its_message_but_before_claiming_it_is_lost(
    judged, tmp_path, workers
):
    from judging.services import judge_run_create, judge_run_mark_if_lost, judge_run_resume
    from judging.tasks import judge_run_enqueue

    study, server = judged
    held = tmp_path / "held"
    held.mkdir()
    first = workers.start(IDEAREVIEW_TEST_HELD_DIR=str(held))
    run = judge_run_create(study=study, method="absolute", config=judge_for(server))
    jobtasks.held_judge_run.delay(run.pk)
    wait_until(lambda: any(held.iterdir()), what="message taken")
    assert run_row(run).status == "queued" and run.received_at is not None
    killed = workers.kill(first)
    # on the filesystem broker the message is gone with the worker: only this rule ends
    # the wait (on Redis it would also come back after the visibility timeout)
    lost = wait_until(lambda: judge_run_mark_if_lost(run=run), seconds=LOST_AFTER + 10)
    assert lost - killed <= LOST_AFTER + 2
    assert run_row(run).status == "lost" and "never started it" in run.error
    workers.start()
    judge_run_enqueue(run=judge_run_resume(run=run))
    wait_until(lambda: run_row(run).status == "done", seconds=DONE_WITHIN, what="resumed run done")
    assert run.attempts == 1 and run.done_calls == 8 and server.requests == 8


def test_a_second_delivery_of_a_running_judge_run_does_not_run_it_twice(judged, workers):
    from judging.tasks import execute_judge_run

    study, server = judged
    workers.start_two()
    run = queued_run(study, server)
    wait_until(lambda: run_row(run).done_calls >= 1, what="a call made")
    # the same message again, as a broker delivers it when it thinks the first was lost
    execute_judge_run.delay(run.pk)
    wait_until(lambda: run_row(run).status == "done", seconds=DONE_WITHIN, what="done")
    time.sleep(1)
    assert run_row(run).attempts == 1 and server.requests == 8 == outcomes(run)


@pytest.mark.skipif(not ON_REDIS, reason="the filesystem broker never delivers twice")
def test_on_redis_a_killed_workers_judge_run_is_delivered_again_and_resumed_by_another_worker(
    judged, workers
):
    study, server = judged
    procs = workers.start_two()
    run = queued_run(study, server)
    wait_until(lambda: run_row(run).done_calls >= 2, what="calls made")
    pid = int(run.worker.rsplit(":", 1)[1])
    workers.kill(next(p for p in procs if p.pid == pid))
    # nobody polls the run: the redelivery finds its heartbeat stale and takes it over
    wait_until(lambda: run_row(run).status == "done", seconds=VISIBILITY + 30, what="resumed")
    assert run.attempts == 2 and run.done_calls == 8 == outcomes(run)


def test_a_judge_run_started_while_the_broker_is_down_fails_with_a_message_and_resume_runs_it(
    judged, owner, client, workers, broker_down
):
    study, server = judged
    judge = judge_for(server)
    client.force_login(owner)
    response = client.post(
        reverse("judging:run_create", args=[study.slug]),
        {"method": "absolute", "config": judge.pk, "params": "{}"},
        follow=True,
    )
    run = study.judge_runs.get()
    assert run.status == "failed" and "CELERY_BROKER_URL" in run.error
    assert "could not be sent to the task queue" in response.text
    assert 'id="resume-run"' in response.text
    broker = broker_down()  # the broker is back
    workers.start(**broker)
    client.post(reverse("judging:run_resume", args=[study.slug, run.pk]))
    wait_until(lambda: run_row(run).status == "done", seconds=60, what="run done after resume")
    assert run.done_calls == 8 and run.error == ""
