"""Browser fixtures: Debian's chromium driven by Playwright (never `playwright install`).

The browser is Debian's chromium headless shell when it is installed (`make test`
installs it): the same engine, version and pages as the desktop chromium, without the
desktop browser's processes, and the build Playwright itself runs for headless tests;
the browser walks cost much less CPU on it (docs/testing.md has the figures). IDEAREVIEW_CHROMIUM names another executable (the desktop
`/usr/bin/chromium` works too).

Without chromium or the playwright package the e2e tests skip, saying why, unless
IDEAREVIEW_REQUIRE_BROWSER=1 (as CI sets), where they fail instead.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = (
    os.environ.get("IDEAREVIEW_CHROMIUM")
    or shutil.which("chromium-headless-shell")
    or shutil.which("chromium")
    or "/usr/bin/chromium"
)
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Playwright's sync API keeps an event loop in the test thread; the ORM calls the tests
# make between browser steps are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def _missing() -> str:
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return f"chromium not found at {CHROMIUM} (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing (pip install playwright)"
    return ""


@pytest.fixture(scope="session")
def browser():
    reason = _missing()
    if reason:
        if os.environ.get("IDEAREVIEW_REQUIRE_BROWSER") == "1":
            pytest.fail(f"IDEAREVIEW_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def worker():
    """A real Celery worker in this process, for pages whose work runs as a job."""
    from celery.contrib.testing.worker import start_worker

    from ideareview.celery import app

    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        yield
