"""ideareview/gunicorn.conf.py: the connection and recycling settings bench/load.py
showed to matter."""

import runpy
from pathlib import Path

CONF = Path(__file__).resolve().parents[1] / "ideareview" / "gunicorn.conf.py"


def test_idle_connections_outlive_a_typing_reviewer_and_a_proxy(monkeypatch):
    # A page saves every few seconds while the reviewer types (bench/load.py: 5 s) and a
    # proxy reuses its idle upstream connections for up to a minute: closing sooner makes
    # the next request a new connection, or a resend when it crossed the close.
    monkeypatch.delenv("IDEAREVIEW_WEB_WORKERS", raising=False)
    conf = runpy.run_path(str(CONF))
    assert conf["worker_class"] == "gthread"  # idle connections wait in the poller
    assert conf["keepalive"] > 60


def test_workers_are_recycled_rarely_but_still_recycled():
    conf = runpy.run_path(str(CONF))
    assert 20_000 <= conf["max_requests"] <= 200_000
    assert 0 < conf["max_requests_jitter"] < conf["max_requests"]
