"""`make run`'s script: the address links in mails point at follows the address it serves.

The lines of scripts/run that choose the host, the port and IDEAREVIEW_BASE_URL are run
by bash as written (up to the export), without migrating or starting anything."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _base_url(env: dict[str, str]) -> str:
    script = (ROOT / "scripts" / "run").read_text()
    start = script.index("HOST=")
    end = script.index("\n", script.index("export IDEAREVIEW_BASE_URL"))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("IDEAREVIEW_")}
    out = subprocess.run(
        ["bash", "-c", script[start:end] + '\nprintf %s "$IDEAREVIEW_BASE_URL"'],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


@pytest.mark.parametrize(
    ("env", "url"),
    [
        ({}, "http://127.0.0.1:8000"),
        ({"IDEAREVIEW_PORT": "8031"}, "http://127.0.0.1:8031"),
        ({"IDEAREVIEW_HOST": "0.0.0.0", "IDEAREVIEW_PORT": "8020"}, "http://127.0.0.1:8020"),
        ({"IDEAREVIEW_HOST": "::1"}, "http://[::1]:8000"),
        (
            {"IDEAREVIEW_PORT": "8031", "IDEAREVIEW_BASE_URL": "https://review.example.org"},
            "https://review.example.org",
        ),
    ],
)
def test_links_in_mails_point_where_make_run_serves(env, url):
    assert _base_url(env) == url
