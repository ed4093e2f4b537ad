"""Shared fixtures: the personas (owner, other researcher, reviewers) and the si2024 files."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from ideareview.celery import app as celery_app

# Tests publish real Celery messages. On the filesystem broker they go to a folder of the
# test run's own, set before any connection exists, so a developer's running worker never
# takes them and var/ stays clean.
# The folder is laid out as settings.py lays out `var/`, so a worker process started with
# IDEAREVIEW_VAR_DIR=TEST_VAR_DIR reads the same queue.
TEST_VAR_DIR = tempfile.mkdtemp(prefix="ideareview-test-var-")
atexit.register(shutil.rmtree, TEST_VAR_DIR, ignore_errors=True)
if str(celery_app.conf.broker_url).startswith("filesystem://"):
    _broker = Path(TEST_VAR_DIR) / "broker"
    for _sub in ("out", "processed", "control"):
        (_broker / _sub).mkdir(parents=True)
    celery_app.conf.broker_transport_options = {
        "data_folder_in": str(_broker / "out"),
        "data_folder_out": str(_broker / "out"),
        "processed_folder": str(_broker / "processed"),
        "control_folder": str(_broker / "control"),
        "store_processed": False,
    }

# pytest-xdist runs the suite in several processes ("gw0", "gw1", ...; `make test`). Each
# one is isolated: its own test database (pytest-django suffixes the name per worker; the
# SQLite file is named by process id), its own TEST_VAR_DIR (above), its own file folders
# (the session fixture _own_var_folders), ports picked free by the OS, and on Redis its own
# broker database: the configured database number plus the worker's index, so a worker
# process one test starts never takes another test process's tasks.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
WORKER_INDEX = int(XDIST_WORKER[2:]) if XDIST_WORKER[2:].isdigit() else 0


def _redis_db_for_worker(url: str, index: int) -> str:
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    db = base + index
    if db > 15:
        raise pytest.UsageError(
            f"CELERY_BROKER_URL={url!r}: test process {index} would use Redis database {db};"
            " pick a lower database number or fewer xdist workers (Redis has 0-15)"
        )
    return urlunsplit(parts._replace(path=f"/{db}"))


if WORKER_INDEX and str(celery_app.conf.broker_url).startswith(("redis://", "rediss://")):
    _url = _redis_db_for_worker(str(celery_app.conf.broker_url), WORKER_INDEX)
    celery_app.conf.broker_url = _url
    settings.CELERY_BROKER_URL = _url
    os.environ["CELERY_BROKER_URL"] = _url  # worker processes the tests start

ROOT = Path(__file__).resolve().parents[1]
SI2024 = ROOT / "data" / "si2024"
SI_REVIEWS = SI2024 / "ideation_reviews.json"
SI_TITLES = SI2024 / "idea_titles.csv"
METRICS = ["novelty", "excitement", "feasibility", "effectiveness", "overall"]


@pytest.fixture(autouse=True)
def _fast_passwords_and_clean_cache(settings):
    # The default hasher costs ~0.3 s per user on a small machine; tests make dozens.
    # The cache holds rate limits: every test starts and ends without any.
    from django.core.cache import cache

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user("owner", password="owner-pass-123")


@pytest.fixture
def other_researcher(db):
    return get_user_model().objects.create_user("other", password="other-pass-123")


@pytest.fixture
def si2024_study(db, owner):
    from studies.services import reviews_import, reviews_parse, study_create

    study = study_create(owner=owner, slug="si2024", title="si2024", baseline_condition="Human")
    parsed = reviews_parse(
        study=study,
        fmt="si2024",
        reviews=SI_REVIEWS.read_bytes(),
        reviews_name=SI_REVIEWS.name,
        titles=SI_TITLES.read_bytes(),
        titles_name=SI_TITLES.name,
    )
    reviews_import(study=study, parsed=parsed, kind="si2024", actor=owner)
    return study


@pytest.fixture(scope="session", autouse=True)
def _own_var_folders():
    """Uploads, reports and report builds of this test process go under its TEST_VAR_DIR,
    not the checkout's var/ (shared with a running server and with the other test
    processes: a report build removes the work folders it finds there)."""
    from django.test import override_settings

    var = Path(TEST_VAR_DIR)
    with override_settings(
        MEDIA_ROOT=var / "media", REPORTS_ROOT=var / "reports", JOB_WORK_ROOT=var / "work"
    ):
        yield


@pytest.fixture(scope="session", autouse=True)
def _test_cache():
    """Each test process counts rate limits in a cache of its own: the default file cache
    under var/ is shared with a running server and with other test runs, which tests clear."""
    from django.test import override_settings

    location = f"ideareview-tests-{os.getpid()}"
    backend = "django.core.cache.backends.locmem.LocMemCache"
    with override_settings(CACHES={"default": {"BACKEND": backend, "LOCATION": location}}):
        yield


@pytest.fixture(scope="session", autouse=True)
def _local_llm_servers():
    """Tests run with DEBUG off, where loopback LLM endpoints are refused unless listed:
    the scripted test servers listen on 127.0.0.1 on ports of their own, so the tests'
    settings (and any worker process they start) list loopback on any port. Tests of the
    refusal set their own list."""
    import os

    from django.test import override_settings

    os.environ["IDEAREVIEW_LLM_HOST_ALLOWLIST"] = "127.0.0.1:*,localhost:*"
    with override_settings(LLM_HOST_ALLOWLIST=["127.0.0.1:*", "localhost:*"]):
        yield


# --------------------------------------------------------------------------- CI's passes
#
# CI runs the suite twice (.ci/run): on the embedded defaults (SQLite, filesystem broker)
# and on the production parts (PostgreSQL, Redis). IDEAREVIEW_TEST_PASS says which pass
# this is, so each test runs where its outcome can differ and no test runs twice for
# nothing:
# - "embedded": every test except the browser walks (marker e2e);
# - "production": the tests that use the database (their SQL, transactions and locks
#   differ between the two) or a worker and broker, and the browser walks, which drive
#   the app as it is deployed. Tests that touch neither (the statistics, the judging
#   methods, the R cross-checks) compute the same numbers on both and run once.
# Unset (a developer's `make test`), everything runs.
TEST_PASSES = ("embedded", "production")
DATABASE_FIXTURES = {"db", "transactional_db", "live_server", "django_db_setup"}


def _uses_database(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("django_db") is not None or bool(names & DATABASE_FIXTURES)


SHARED_FIXTURE = re.compile(r"scope=\"(module|class|package)\"|xdist_group")


@cache
def _module_shares_a_computation(module: str) -> bool:
    """Whether a test module has a module-, class- or package-scoped fixture (a model fit,
    an R run) or names an xdist group: computed once per process, so its tests belong
    together on one worker."""
    path = ROOT / module
    return path.suffix == ".py" and bool(SHARED_FIXTURE.search(path.read_text("utf-8")))


@pytest.hookimpl(optionalhook=True)  # a run without pytest-xdist installed still collects
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` (make test): every test is scheduled on its own, except that the
    tests of a module sharing a computation (above) go to one worker as a unit, which
    computes it once. pytest-xdist's own loadgroup marks tests through Item._nodeid, which
    pytest 9.2 no longer reads, so it would scatter them; this scheduler needs only the
    test ids the controller has."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedComputationScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if _module_shares_a_computation(module) else nodeid

    return SharedComputationScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    test_pass = os.environ.get("IDEAREVIEW_TEST_PASS", "")
    if not test_pass:
        return
    if test_pass not in TEST_PASSES:
        raise pytest.UsageError(
            f"IDEAREVIEW_TEST_PASS={test_pass!r}: expected one of {', '.join(TEST_PASSES)}"
        )

    def wanted(item: pytest.Item) -> bool:
        browser = item.get_closest_marker("e2e") is not None
        if test_pass == "embedded":
            return not browser
        return browser or _uses_database(item)

    keep = [item for item in items if wanted(item)]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if not wanted(item)])
        items[:] = keep
