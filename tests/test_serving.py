"""`make serve`: migrate, static files, gunicorn, a Celery worker and beat; bounded
database connections; the daily reminders on beat's schedule."""

from __future__ import annotations

import os
import runpy
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.core import mail

# `make serve` on the embedded defaults (both CI passes)
pytestmark = [pytest.mark.slow, pytest.mark.embedded]

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CELERY_", "IDEAREVIEW_", "DATABASE_", "CACHE_", "REDIS_"))
    }
    return {**env, **extra}


def _get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.headers["Content-Type"], response.read()


def test_make_serve_runs_the_web_server_with_static_files_a_worker_and_beat(tmp_path):
    port = _free_port()
    env = _clean_env(
        IDEAREVIEW_VAR_DIR=str(tmp_path),
        IDEAREVIEW_BIN=str(Path(sys.executable).parent),
        IDEAREVIEW_BIND=f"127.0.0.1:{port}",
        IDEAREVIEW_WEB_WORKERS="1",
        IDEAREVIEW_WEB_THREADS="2",
        IDEAREVIEW_WORKER_CONCURRENCY="1",
    )
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(
        ["scripts/serve"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                status, _, body = _get(f"http://127.0.0.1:{port}/healthz")
                break
            except OSError:
                assert server.poll() is None, (tmp_path / "serve.log").read_text()
                assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
                time.sleep(0.5)
        assert status == 200 and b'"ok"' in body
        status, kind, _ = _get(f"http://127.0.0.1:{port}/static/css/app.css")
        assert status == 200 and kind.startswith("text/css")
        # The worker and beat log their start in their own time: wait for each line.
        for name, line in [("worker.log", "ready"), ("beat.log", "beat: Starting")]:
            deadline = time.monotonic() + 60
            while line not in (tmp_path / name).read_text():
                assert time.monotonic() < deadline, (tmp_path / name).read_text()
                time.sleep(0.5)
        assert "studies.tasks.send_reminders" in (tmp_path / "worker.log").read_text()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        status = server.wait(timeout=60)
        log.close()
    # a stop that was asked for is not a failure (systemd would mark the unit failed)
    assert status == 0, (tmp_path / "serve.log").read_text()
    assert "asked to stop" in (tmp_path / "serve.log").read_text()
    time.sleep(1)
    with pytest.raises(OSError):
        _get(f"http://127.0.0.1:{port}/healthz")


def test_connection_budget_counts_every_thread_and_worker_process():
    budget = runpy.run_path(str(ROOT / "scripts" / "connection_budget.py"))["budget"]
    # 5 web processes x 4 threads, 2 Celery processes + their parent, beat, 2 spare
    assert budget(workers=5, threads=4, pool=0, concurrency=2, machines=1) == 26
    # a pool smaller than the threads bounds each process by the pool
    assert budget(workers=5, threads=8, pool=3, concurrency=2, machines=2) == 2 * 19 + 2


def test_a_postgres_pool_is_configured_with_health_checks_when_asked_for(tmp_path):
    show = (
        "from django.conf import settings as s; d = s.DATABASES['default']; "
        "p = d['OPTIONS']['pool']; print(d['CONN_MAX_AGE'], p['max_size'], p['check'].__name__)"
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", show],
        cwd=ROOT,
        env=_clean_env(
            IDEAREVIEW_VAR_DIR=str(tmp_path),
            DATABASE_URL="postgres://ir:pw@127.0.0.1:5432/ir",
            DATABASE_POOL_MAX_SIZE="6",
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "0 6 check_connection"


@pytest.mark.django_db
def test_beat_mails_the_daily_reminders_of_studies_in_review(owner):
    from ideareview.celery import app
    from studies.models import Study
    from studies.services.invitations import invitation_create
    from studies.services.study import study_create
    from studies.tasks import send_reminders

    entry = settings.CELERY_BEAT_SCHEDULE["send-reminders"]
    app.loader.import_default_modules()
    assert entry["task"] in app.tasks
    reviewing = study_create(owner=owner, slug="live", baseline_condition="Human")
    Study.objects.filter(pk=reviewing.pk).update(status=Study.Status.REVIEWING)
    draft = study_create(owner=owner, slug="draft", baseline_condition="Human")
    invitation_create(study=reviewing, email="a@example.org", send=False)
    invitation_create(study=draft, email="b@example.org", send=False)
    mail.outbox.clear()
    send_reminders()
    assert [m.to for m in mail.outbox] == [["a@example.org"]]
