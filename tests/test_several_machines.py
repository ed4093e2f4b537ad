"""Several machines, really run: two web servers (gunicorn), two Celery workers and two
Celery beats, each with its own empty working folder (IDEAREVIEW_VAR_DIR, so its own
media, reports and job work folders), sharing only PostgreSQL, the Redis broker (and
cache) and an S3-compatible object store: moto's standalone S3 server on loopback, reached
through django-storages as a MinIO or AWS bucket would be (docs/deploy.md, "Several
machines"). The processes are started once for the module; each test then acts as users
and operators do: uploads through one web server, downloads through the other, workers
killed by SIGKILL mid-job and their work taken over by the other worker through the
broker's redelivery and the job's lease.

Only on the production parts (PostgreSQL and Redis): SQLite and the filesystem broker are
one machine's by nature."""

from __future__ import annotations

import hashlib
import http.cookiejar
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from ideareview.celery import app
from tests.conftest import ROOT, SI_REVIEWS, SI_TITLES
from tests.factories import make_judged_study

ON_PRODUCTION_PARTS = str(settings.CELERY_BROKER_URL).startswith("redis") and str(
    settings.DATABASES["default"]["ENGINE"]
).endswith("postgresql")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not ON_PRODUCTION_PARTS, reason="several machines share PostgreSQL and Redis"
    ),
]

HEARTBEAT, LOST_AFTER, VISIBILITY, RESTORE = 1, 4, 10, 1  # as in test_jobs_worker
BUCKET = "ideareview-test"
PASSWORD = "several-machines-pass-1"
PROCESS_ENV_PREFIXES = ("DJANGO_", "CELERY_", "IDEAREVIEW_", "DATABASE_", "CACHE_", "REDIS_")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database_url() -> str:
    s = connection.settings_dict
    return (
        f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST'] or '127.0.0.1'}:"
        f"{s['PORT'] or 5432}/{s['NAME']}"
    )


class Browser:
    """A user's browser on one web server: cookies kept, redirects not followed, the CSRF
    token sent with every POST (stdlib only)."""

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    def __init__(self, base_url: str, cookies: http.cookiejar.CookieJar | None = None):
        self.base_url = base_url
        self.cookies = cookies if cookies is not None else http.cookiejar.CookieJar()
        self._open = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.cookies), self._NoRedirect
        ).open

    def request(
        self, path: str, *, data: dict[str, Any] | None = None, files: dict | None = None
    ) -> tuple[int, bytes]:
        body, headers = None, {}
        if data is not None or files is not None:
            body, headers["Content-Type"] = _multipart(data or {}, files or {})
            token = next((c.value for c in self.cookies if c.name == "csrftoken"), "")
            headers["X-CSRFToken"] = token
        request = urllib.request.Request(self.base_url + path, data=body, headers=headers)
        try:
            with self._open(request, timeout=60) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def get(self, path: str) -> tuple[int, bytes]:
        return self.request(path)

    def post(self, path: str, **kwargs: Any) -> tuple[int, bytes]:
        return self.request(path, **kwargs)


def _multipart(data: dict[str, Any], files: dict[str, tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in data.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
            f"{value}\r\n".encode()
        )
    for name, (filename, content) in files.items():
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        )
        parts.append(head.encode() + content + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def wait_until(check: Callable[[], object], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not reached within {seconds} s: {what}"
        time.sleep(0.2)


@dataclass
class Machine:
    """One process standing for one machine, with its own working folder."""

    name: str
    var: Path
    proc: subprocess.Popen
    port: int = 0

    @property
    def log(self) -> str:
        return (self.var / "process.log").read_text(errors="replace")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, by this process's own pid: the machine is gone, nothing cleans up."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


@dataclass
class Cluster:
    root: Path
    env: dict[str, str]
    s3_endpoint: str
    machines: list[Machine] = field(default_factory=list)

    def _start(self, name: str, cmd: list[str], port: int = 0) -> Machine:
        var = self.root / name
        var.mkdir()  # empty: nothing of another machine's is here
        env = {**self.env, "IDEAREVIEW_VAR_DIR": str(var)}
        if port:
            env["IDEAREVIEW_BIND"] = f"127.0.0.1:{port}"
        with (var / "process.log").open("w") as log:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        machine = Machine(name, var, proc, port)
        self.machines.append(machine)
        return machine

    def web(self, name: str) -> Machine:
        gunicorn = str(Path(sys.executable).parent / "gunicorn")
        cmd = [gunicorn, "--config", "ideareview/gunicorn.conf.py", "ideareview.wsgi:application"]
        return self._start(name, cmd, port=_free_port())

    def worker(self, name: str) -> Machine:
        cmd = [
            sys.executable, "-m", "celery", "-A", "ideareview", "worker", "--pool=solo",
            "-I", "tests.jobtasks", "--without-mingle", "--without-gossip",
            "--without-heartbeat", "-n", f"{name}-{os.getpid()}@%h", "-l", "INFO",
        ]  # fmt: skip
        return self._start(name, cmd)

    def beat(self, name: str) -> Machine:
        cmd = [
            sys.executable, "-m", "celery", "-A", "tests.beat_schedule", "beat", "-l", "INFO",
            "--max-interval", "1", "--schedule", str(self.root / name / "celerybeat-schedule"),
        ]  # fmt: skip
        return self._start(name, cmd)

    @staticmethod
    def ready(machine: Machine) -> bool:
        assert machine.alive(), f"{machine.name} stopped:\n{machine.log[-3000:]}"
        if machine.port:
            try:
                return Browser(machine.url).get("/healthz")[0] == 200
            except OSError:
                return False
        return " ready." in machine.log or "beat: Starting" in machine.log

    def wait_ready(self, *machines: Machine) -> None:
        for machine in machines:
            wait_until(lambda m=machine: self.ready(m), 300, f"{machine.name} ready")

    def live(self, kind: str) -> list[Machine]:
        return [m for m in self.machines if m.name.startswith(kind) and m.alive()]

    def workers_up(self) -> list[Machine]:
        """Two live workers: a killed one is replaced by a new machine (a new folder)."""
        missing = 2 - len(self.live("worker"))
        new = [self.worker(f"worker{len(self.machines) + 1}") for _ in range(missing)]
        self.wait_ready(*new)
        return self.live("worker")

    def by_pid(self, pid: int) -> Machine:
        return next(m for m in self.machines if m.proc.pid == pid)

    def s3_keys(self, prefix: str) -> list[str]:
        listing = self.s3().list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        return sorted(o["Key"] for o in listing.get("Contents", []))

    def s3(self):
        return boto3.client(
            "s3",
            endpoint_url=self.s3_endpoint,
            aws_access_key_id="test-key",
            aws_secret_access_key="test-secret",
            region_name="us-east-1",
        )

    def stop(self) -> None:
        for machine in self.machines:
            if machine.alive():
                machine.kill()


def _s3_server(tmp: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with (tmp / "moto.log").open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    wait_until(lambda: proc.poll() is None and _answers(endpoint), 60, "moto's S3 server")
    return proc, endpoint


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=1).close()
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def cluster(django_db_setup, tmp_path_factory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("machines")
    # Messages that killed workers of earlier runs left in this test process's broker
    # database must not reach this module's rows.
    with app.connection_for_write() as conn:
        conn.default_channel.client.flushdb()
    s3, endpoint = _s3_server(root)
    broker = str(settings.CELERY_BROKER_URL)
    base = {k: v for k, v in os.environ.items() if not k.startswith(PROCESS_ENV_PREFIXES)}
    env = {
        **base,
        # the same on every machine (docs/deploy.md)
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": broker,
        "CACHE_URL": broker,  # one Redis database: the tests' budget of them is small
        "DJANGO_SECRET_KEY": "several-machines-share-this-secret-key-0123456789",
        "IDEAREVIEW_S3_BUCKET": BUCKET,
        "IDEAREVIEW_S3_ENDPOINT_URL": endpoint,
        "IDEAREVIEW_S3_REGION": "us-east-1",
        "IDEAREVIEW_S3_ACCESS_KEY_ID": "test-key",
        "IDEAREVIEW_S3_SECRET_ACCESS_KEY": "test-secret",
        "IDEAREVIEW_LLM_HOST_ALLOWLIST": "127.0.0.1:*",
        # quick fault detection, as in test_jobs_worker
        "IDEAREVIEW_JOB_HEARTBEAT_SECONDS": str(HEARTBEAT),
        "IDEAREVIEW_JOB_LOST_AFTER_SECONDS": str(LOST_AFTER),
        "IDEAREVIEW_BROKER_VISIBILITY_TIMEOUT": str(VISIBILITY),
        "IDEAREVIEW_BROKER_RESTORE_SECONDS": str(RESTORE),
        "IDEAREVIEW_BEAT_LOCK_POLL_SECONDS": "1",
        # small work: an upload of more than 10 rows is imported by a worker; a report
        # with few resamples, no figures and no PDF (the PDF is one more file saved the same way)
        "IDEAREVIEW_IMPORT_JOB_ROWS": "10",
        "IDEAREVIEW_CONSISTENCY_SPLITS": "50",
        "IDEAREVIEW_MIXED_ENGINE": "sparse",
        "IDEAREVIEW_MIXED_STARTS": "1",
        "IDEAREVIEW_CHROMIUM": str(root / "no-chromium"),
        "IDEAREVIEW_REPORT_FIGURES": "0",
        "IDEAREVIEW_WEB_WORKERS": "1",
        "IDEAREVIEW_WEB_THREADS": "2",
    }
    cluster = Cluster(root, env, endpoint)
    try:
        cluster.s3().create_bucket(Bucket=BUCKET)
        # started side by side: each start takes seconds of CPU
        machines = [
            cluster.web("web1"),
            cluster.web("web2"),
            cluster.worker("worker1"),
            cluster.worker("worker2"),
            cluster.beat("beat1"),
            cluster.beat("beat2"),
        ]
        cluster.wait_ready(*machines)
        yield cluster
    finally:
        cluster.stop()
        s3.kill()
        s3.wait(10)


def owner_session(web: Machine) -> Browser:
    """A researcher logged in through `web`. The password is hashed with the servers' own
    first hasher (this test process uses a fast one the servers do not know)."""
    from django.utils.module_loading import import_string

    from ideareview.settings import PASSWORD_HASHERS

    hasher = import_string(PASSWORD_HASHERS[0])()
    get_user_model().objects.create(username="ada", password=hasher.encode(PASSWORD, hasher.salt()))
    browser = Browser(web.url)
    browser.get("/login/")
    status, body = browser.post("/login/", data={"username": "ada", "password": PASSWORD})
    assert status == 302, body[:2000]
    return browser


def local_files(machine: Machine, *folders: str) -> list[str]:
    """Files a machine keeps in its own media and reports folders."""
    return [str(p) for f in folders for p in (machine.var / f).rglob("*") if p.is_file()]


# ------------------------------------------------------------------------------- beat


def test_of_two_beats_only_one_sends_the_schedule_and_the_other_takes_over_when_it_dies(
    cluster,
):
    beats = cluster.live("beat")
    assert len(beats) == 2

    def sent(beat: Machine) -> int:
        return beat.log.count("Sending due task test-tick")

    wait_until(lambda: max(map(sent, beats)) >= 3, 30, "ticks sent")
    holder, standby = sorted(beats, key=sent, reverse=True)
    assert sent(standby) == 0, standby.log[-2000:]
    holder.kill()
    already = sent(holder)
    wait_until(lambda: sent(standby) >= 2, 15, "the standby beat takes over")
    assert sent(holder) == already
    standby.kill()  # its tick every second is no use to the tests below


# ------------------------------------------------------------------------- judge runs


def test_judge_runs_spread_over_both_workers_and_a_dead_workers_run_is_taken_over_unrepeated(
    cluster,
):
    from judging.models import JudgeRun, Judgment
    from judging.testserver import Rules, TestServer
    from llm.models import JudgeConfig, LLMCall

    workers = cluster.workers_up()
    web = owner_session(cluster.live("web")[1])
    study = make_judged_study(get_user_model().objects.get(username="ada"))
    with TestServer(Rules(latency=0.4)) as server:
        for n in (1, 2, 3):
            # one model each: the runs share no cache key, so every call is their own
            judge = JudgeConfig.objects.create(
                name=f"scripted {n}",
                base_url=server.base_url,
                model=f"scripted-{n}",
                api_key_env="IDEAREVIEW_TESTSERVER_KEY",
                concurrency=1,
                max_attempts=1,
                timeout_seconds=30,
            )
            status, body = web.post(
                f"/judging/{study.slug}/runs/new/",
                data={"method": "absolute", "config": judge.pk, "params": "{}"},
            )
            assert status == 302, body[:2000]
        runs = list(JudgeRun.objects.filter(study=study).order_by("pk"))
        assert len(runs) == 3
        seen: dict[int, set[str]] = {run.pk: set() for run in runs}

        def watch() -> list[JudgeRun]:
            for run in runs:
                run.refresh_from_db()
                if run.worker:
                    seen[run.pk].add(run.worker)
            return runs

        # two runs at once, one on each worker; one of them is killed mid-run
        def midway(run: JudgeRun) -> bool:
            return run.status == "running" and 2 <= run.done_calls <= 5

        wait_until(
            lambda: (
                len({r.worker for r in watch() if r.status == "running"}) == 2
                and any(map(midway, runs))
            ),
            60,
            "two runs running, one of them midway",
        )
        victim = next(filter(midway, runs))
        dead = cluster.by_pid(int(victim.worker.rsplit(":", 1)[1]))
        assert dead in workers
        dead.kill()
        # what the ledger holds for the run once its worker is gone
        recorded = [prompt_key(c.request["messages"]) for c in LLMCall.objects.filter(run=victim)]
        # no page polls the run: the broker delivers it again to the live worker, which
        # finds the heartbeat stale and takes the run over under a new lease
        wait_until(lambda: all(r.status == "done" for r in watch()), VISIBILITY + 240, "runs done")
        asked = server.requests
    victim.refresh_from_db()
    assert victim.attempts == 2 and len(seen[victim.pk]) == 2
    workers_used = {w.rsplit(":", 1)[1] for names in seen.values() for w in names}
    assert {str(w.proc.pid) for w in workers} <= workers_used
    for run in runs:
        calls = LLMCall.objects.filter(run=run)
        assert calls.count() == 8 == run.done_calls
        assert all(c.ok and c.attempts == 1 for c in calls)
        assert Judgment.objects.filter(run=run).values("idea").distinct().count() == 8
    # The ledger holds each call once. No call it held when the worker died was asked
    # again: each of those prompts went to the endpoint once per run (the three runs ask
    # the same prompts of three models). What the dead worker had not committed was: the
    # call in flight and the answers of its last uncommitted batch (the engine commits
    # every COMMIT_EVERY s: at 0.4 s a call and one call at a time, one answer, or two
    # when the worker was short of CPU).
    assert len(recorded) >= 2
    assert all(server.prompts[key] == 3 for key in recorded)
    assert 24 <= asked <= 24 + 3, asked


def prompt_key(messages: list[dict[str, Any]]) -> str:
    """How the scripted server counts a prompt (judging.testserver)."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------------------ report


def test_an_upload_through_one_web_server_is_reported_by_a_worker_and_read_through_the_other(
    cluster,
):
    from studies.models import JobRun, Review, StudyReport
    from studies.services.study import study_create

    cluster.workers_up()
    web1, web2 = cluster.live("web")
    session = owner_session(web1)
    study = study_create(
        owner=get_user_model().objects.get(username="ada"),
        slug="si2024",
        title="si2024",
        baseline_condition="Human",
    )
    # reviews and their ideas, uploaded through web 1: too many rows for the request, so
    # the upload waits in the shared store and a worker imports it
    reviews, rows = si2024_topics("Bias", "Math", "Safety")
    session.get(f"/studies/{study.slug}/import/")
    status, body = session.post(
        f"/studies/{study.slug}/import/",
        data={"format": "si2024"},
        files={
            "reviews": (SI_REVIEWS.name, reviews),
            "titles": (SI_TITLES.name, SI_TITLES.read_bytes()),
        },
    )
    assert status == 302, body[:2000]
    imported = JobRun.objects.get(study=study, kind="import")
    wait_until(lambda: _status(imported) == "done", 180, "import done")
    assert Review.objects.filter(study=study).exists()

    # the report, asked for through web 1; its worker is killed mid-build and the other
    # worker builds it, after the broker delivers the job again
    assert session.post(f"/studies/{study.slug}/report/build/", data={})[0] == 302
    job = JobRun.objects.get(study=study, kind="report")
    wait_until(lambda: _status(job) == "running" and job.message, 180, "report started")
    cluster.by_pid(int(job.worker.rsplit(":", 1)[1])).kill()
    wait_until(lambda: _status(job) == "done", VISIBILITY + 240, "report done by the other")
    assert job.attempts == 2
    report = StudyReport.objects.get(study=study)

    # read through web 2 with the same session: the files come from the shared store
    reader = Browser(web2.url, session.cookies)
    status, page = reader.get(f"/studies/{study.slug}/report/")
    assert status == 200 and b"Test 1" in page
    files = f"/studies/{study.slug}/report/files"
    data = json.loads(reader.get(f"{files}/report.json")[1])
    assert data["data"]["rows"] == rows == report.data["data"]["rows"]
    package = zipfile.ZipFile(io.BytesIO(reader.get(f"{files}/package.zip")[1]))
    assert "package/report/report.json" in package.namelist()

    # the bucket holds the one version the row names (the killed build's partial files
    # were removed by the build that finished) and no upload left over; no machine kept
    # an upload or a report file of its own
    keys = cluster.s3_keys("reports/")
    assert keys and all(k.startswith(f"reports/{report.directory}/") for k in keys)
    assert "reports/" + report.directory + "/package.zip" in keys
    assert cluster.s3_keys("uploads/") == []
    for machine in cluster.machines:
        assert local_files(machine, "media", "reports") == [], machine.name


def si2024_topics(*topics: str) -> tuple[bytes, int]:
    """The released reviews of a few topics (all three conditions each), and their count:
    a quarter of the release, for a cheaper report."""
    columns = json.loads(SI_REVIEWS.read_bytes())
    keep = [i for i, topic in enumerate(columns["topic"]) if topic in topics]
    return json.dumps({k: [v[i] for i in keep] for k, v in columns.items()}).encode(), len(keep)


def _status(job) -> str:
    job.refresh_from_db()
    assert job.status != "failed", job.error
    return job.status
