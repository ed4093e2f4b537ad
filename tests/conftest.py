"""Shared fixtures: the personas (owner, other researcher, reviewers) and the si2024 files."""

from __future__ import annotations

import atexit
import gc
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
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from ideareview.celery import app as celery_app

# One BLAS (and OpenMP) thread per test process. pytest-xdist already runs a process per
# core, and OpenBLAS's default of a thread per core on top of that oversubscribes the
# cores: its threads spin while they wait for each other, so a small dense factorisation
# (the mixed models' reduced systems) burns many times the CPU it needs (docs/testing.md).
# Set here, in the process that starts the xdist workers and before it starts them, it
# reaches every worker before numpy loads, and the processes tests start (Celery workers,
# Rscript). A one-process run (-n 0) has numpy loaded already (pytest-django set Django up
# first) and keeps the library's default unless the shell sets these: lowering the count
# in-process instead would leave OpenBLAS ignoring later changes made from another thread,
# which tests/test_report_threads.py's in-process Celery worker makes.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

# Property tests run beside worker processes, browsers and other test processes: a draw
# that takes a second under that load is the machine, not the code. No deadline and no
# "too slow" health check; what each property asserts is unchanged.
hypothesis_settings.register_profile(
    "ideareview", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("ideareview")

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

#: Redis database of the login-limit tests (tests/test_logins.py, test_login_limits.py): not
#: one a test run's brokers use (CI's production pass takes 12 to 15, one per xdist worker,
#: and the worker tests flush theirs). Those tests never flush it: each counts under keys of
#: its own (an address and account, or a key prefix), so they can run side by side.
LIMITS_REDIS_DB = 11


def limits_redis_url() -> str | None:
    """The login-limit tests' Redis database, or None when no Redis runs on loopback."""
    try:
        import redis

        redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=0.5).ping()
    except Exception:
        return None
    return f"redis://127.0.0.1:6379/{LIMITS_REDIS_DB}"


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


@pytest.fixture(autouse=True)
def _report_figures_only_when_marked(request, settings):
    """A report built in this process draws its figures (matplotlib, a large share of a
    small report's build) only in tests marked `figures`: the others read its tables and
    numbers. The figures' own tests (tests/analysis/test_plots.py and the like) draw them
    directly; worker processes a test starts keep the setting's default and draw them."""
    settings.IDEAREVIEW_REPORT_FIGURES = request.node.get_closest_marker("figures") is not None


#: A chromium that is not there: a report built without it says why it has no PDF.
NO_CHROMIUM = "/nonexistent/chromium"


@pytest.fixture(autouse=True)
def _report_pdf_only_when_marked(request, settings):
    """Likewise the PDF (a chromium process per report, about half a second of CPU): a
    report built in this process prints one only in tests marked `pdf`; the others build it
    as on a machine without chromium (a browser walk's live server too); worker processes a
    test starts keep the setting's default and print it."""
    if request.node.get_closest_marker("pdf") is None:
        settings.IDEAREVIEW_CHROMIUM = NO_CHROMIUM


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user("owner", password="owner-pass-123")


@pytest.fixture
def other_researcher(db):
    return get_user_model().objects.create_user("other", password="other-pass-123")


@pytest.fixture
def si2024_study(db, owner):
    from studies.services.study import study_create
    from studies.services.transfer import reviews_import, reviews_parse

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


# ------------------------------------------------------------------ the migrated database
#
# Migrating an empty database costs a test process 10 to 20 s of CPU (more on PostgreSQL,
# whose server works too). So one process migrates and keeps the result as a template,
# named by a hash of every installed app's migration files and Django's version; every
# other process, in this run or a later one, starts from a copy of it (Django's keepdb:
# `migrate` then finds nothing to apply). A changed, added or removed migration changes the
# name, so a stale schema is never used; `--create-db` ignores the template.
# - SQLite: the template is a file in pytest's cache folder; a copy is the test database.
# - PostgreSQL: the template is a database on the server (`ideareview_tpl_<hash>`), and a
#   copy is `CREATE DATABASE ... TEMPLATE`, which takes a second.
# The processes of one run start together: a lock (a file lock; a PostgreSQL advisory lock)
# lets the first migrate while the others wait for its template instead of migrating too.


def _migrations_hash() -> str:
    import hashlib

    import django
    from django.apps import apps

    digest = hashlib.sha256(django.__version__.encode())
    for config in sorted(apps.get_app_configs(), key=lambda c: c.label):
        for path in sorted((Path(config.path) / "migrations").glob("*.py")):
            digest.update(f"{config.label}/{path.name}".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class _SqliteTemplates:
    """The migrated SQLite database kept as a file, guarded by a file lock."""

    def __init__(self, config: pytest.Config, test_db: Path) -> None:
        folder = config.rootpath / ".pytest_cache" / "ideareview"
        folder.mkdir(parents=True, exist_ok=True)
        self.template = folder / f"test-db-{_migrations_hash()}.sqlite3"
        self.test_db = test_db
        self._lock = (folder / "test-db.lock").open("a")

    def lock(self) -> None:
        import fcntl

        fcntl.flock(self._lock, fcntl.LOCK_EX)

    def unlock(self) -> None:
        import fcntl

        fcntl.flock(self._lock, fcntl.LOCK_UN)

    def exists(self) -> bool:
        return self.template.exists()

    def copy(self) -> None:
        shutil.copyfile(self.template, self.test_db)

    def save(self) -> None:
        """Written whole under another name, then renamed; other migrations' templates go."""
        import sqlite3

        for old in self.template.parent.glob("test-db-*.sqlite3"):
            if old != self.template:
                old.unlink(missing_ok=True)
        partial = self.template.with_suffix(f".{os.getpid()}.partial")
        source, copy = sqlite3.connect(self.test_db), sqlite3.connect(partial)
        try:
            source.backup(copy)
        finally:
            copy.close()
            source.close()
        os.replace(partial, self.template)

    def drop_copy(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.test_db}{suffix}").unlink(missing_ok=True)

    def close(self) -> None:
        self._lock.close()


class _PostgresTemplates:
    """The migrated PostgreSQL database kept as a template database on the server. Every
    template operation of every checkout on this server holds one advisory lock, so a
    template is never dropped while another process copies it."""

    LOCK_KEY = 0x1DEA4E71  # any constant shared by all checkouts

    def __init__(self, db: dict[str, Any], test_name: str) -> None:
        import psycopg

        self.template = f"ideareview_tpl_{_migrations_hash()}"
        self.test_db = test_name
        self._conn = psycopg.connect(
            dbname="postgres",
            host=db.get("HOST") or None,
            port=db.get("PORT") or None,
            user=db.get("USER") or None,
            password=db.get("PASSWORD") or None,
            autocommit=True,
        )

    def _run(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        cursor = self._conn.execute(sql, args)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []

    def _name(self, name: str) -> str:
        from psycopg import sql

        return sql.Identifier(name).as_string(self._conn)

    def lock(self) -> None:
        self._run("SELECT pg_advisory_lock(%s)", self.LOCK_KEY)

    def unlock(self) -> None:
        self._run("SELECT pg_advisory_unlock(%s)", self.LOCK_KEY)

    def exists(self) -> bool:
        return bool(self._run("SELECT 1 FROM pg_database WHERE datname = %s", self.template))

    def copy(self) -> None:
        self._run(f"DROP DATABASE IF EXISTS {self._name(self.test_db)} WITH (FORCE)")
        self._run(
            f"CREATE DATABASE {self._name(self.test_db)} TEMPLATE {self._name(self.template)}"
        )

    def save(self) -> None:
        from django.db import connections

        connections.close_all()  # a template must have no other session
        for (old,) in self._run(
            "SELECT datname FROM pg_database WHERE datname LIKE 'ideareview\\_tpl\\_%%'"
        ):
            if old != self.template:
                self._run(f"DROP DATABASE IF EXISTS {self._name(old)}")
        partial = f"{self.template}_partial_{os.getpid()}"
        self._run(f"CREATE DATABASE {self._name(partial)} TEMPLATE {self._name(self.test_db)}")
        self._run(f"ALTER DATABASE {self._name(partial)} RENAME TO {self._name(self.template)}")

    def drop_copy(self) -> None:
        from django.db import connections

        connections.close_all()
        self._run(f"DROP DATABASE IF EXISTS {self._name(self.test_db)} WITH (FORCE)")

    def close(self) -> None:
        self._conn.close()


def _templates(config: pytest.Config) -> _SqliteTemplates | _PostgresTemplates | None:
    from django.db import connection

    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return _SqliteTemplates(config, Path(db["TEST"]["NAME"]))
    if "postgresql" in db["ENGINE"]:
        return _PostgresTemplates(db, connection.creation._get_test_db_name())
    return None


#: This process's templates while it migrates for the others (django_db_setup saves them).
_migrating: list[_SqliteTemplates | _PostgresTemplates] = []


@pytest.fixture(scope="session")
def django_db_keepdb(request, django_db_keepdb, django_db_createdb, django_db_modify_db_settings):
    """True (keep the database Django finds) when the test database was copied from the
    migrated template; the copy is removed at the end, as Django removes one it made. When
    there is no template yet, this process holds the lock while Django migrates."""
    store = None if django_db_keepdb or django_db_createdb else _templates(request.config)
    if store is None:
        yield django_db_keepdb
        return
    store.lock()
    if not store.exists():
        _migrating.append(store)
        try:
            yield False
        finally:
            if _migrating:  # Django's migration failed: let the others try
                _migrating.clear()
                store.unlock()
            store.close()
        return
    try:
        store.copy()
    finally:
        store.unlock()
    yield True
    store.drop_copy()
    store.close()


@pytest.fixture(scope="session")
def django_db_setup(request, django_db_setup, django_db_keepdb, django_db_blocker):
    """After Django migrated a new test database, and before any test wrote to it, keep it
    as the template and let the waiting processes copy it."""
    if _migrating:
        store = _migrating.pop()
        try:
            with django_db_blocker.unblock():
                store.save()
        finally:
            store.unlock()
    yield
    # A thread that has ended (a live server's, a job's) leaves its connection to the
    # collector, which runs seldom here (GC_THRESHOLDS): free such connections before the
    # test database is dropped, since PostgreSQL refuses to drop one with a session open.
    gc.collect()
    # A session can outlive that too (a thread still running, a process a test started and
    # left behind); this process's test database is its own, so end any other session on
    # it, or the drop fails and leaves the database behind.
    with django_db_blocker.unblock():
        _end_other_sessions_on_the_test_database()


def _end_other_sessions_on_the_test_database() -> None:
    from django.db import connections
    from django.db.utils import DatabaseError

    for conn in connections.all(initialized_only=True):
        if conn.vendor != "postgresql":
            continue
        try:
            with conn.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
        except DatabaseError:  # the drop then says why, as before
            pass


# ------------------------------------------------------- emptying the database after a test
#
# A test that commits (transactional_db, live_server: the browser walks, the worker
# processes) is followed by Django's flush, which on PostgreSQL is one TRUNCATE of every
# table: the server gives each of the ~60 tables a new file, about 0.5 s a test, while
# deleting the few rows a test leaves takes milliseconds. The flush deletes instead, in
# one transaction with the foreign keys checked at its end (Django declares them
# DEFERRABLE INITIALLY DEFERRED), so the order of the tables does not matter. A flush that
# resets sequences or cascades to tables outside the list keeps Django's statements.


def _flush_by_delete(original: Any) -> Any:
    def sql_flush(
        self: Any,
        style: Any,
        tables: Any,
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if reset_sequences or allow_cascade or not tables:
            return original(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        deletes = [
            f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(t))};"
            for t in tables
        ]
        return [f"{style.SQL_KEYWORD('SET CONSTRAINTS ALL DEFERRED')};", *deletes]

    sql_flush.original = original  # type: ignore[attr-defined]
    return sql_flush


def _use_flush_by_delete() -> None:
    from django.db.backends.postgresql.operations import DatabaseOperations

    if not hasattr(DatabaseOperations.sql_flush, "original"):
        DatabaseOperations.sql_flush = _flush_by_delete(DatabaseOperations.sql_flush)


# --------------------------------------------------------------------------- CI's passes
#
# CI runs the suite twice (.ci/run): on the embedded defaults (SQLite, filesystem broker)
# and on the production parts (PostgreSQL, Redis). IDEAREVIEW_TEST_PASS says which pass
# this is, so each test runs where its outcome can differ and no test runs twice for
# nothing:
# - "production": every test that uses the database, and the browser walks: the app as it
#   is deployed, on the parts it is deployed on;
# - "embedded": every test that touches neither (the statistics, the judging methods, the
#   R cross-checks, settings and commands), and the database tests marked `embedded`:
#   those whose outcome depends on the embedded parts themselves (the filesystem broker
#   under real worker processes, SQLite's transactions and locks, migrations, `make run`'s
#   file cache and var/ folder).
# A database test without the mark reads and writes rows through the ORM, which SQLite and
# PostgreSQL answer alike; it runs once, on PostgreSQL.
# Unset (a developer's `make test`), everything runs.
TEST_PASSES = ("embedded", "production")
DATABASE_FIXTURES = {"db", "transactional_db", "live_server", "django_db_setup"}


def _uses_database(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("django_db") is not None or bool(names & DATABASE_FIXTURES)


SHARED_FIXTURE = re.compile(r"scope=\"(module|class|package)\"|xdist_group")
# A module whose tests take seconds says so with one of these marks (module-wide or on a
# test): before any run has recorded durations, its tests are expected to be slow.
SLOW_MARK = re.compile(r"mark\.(slow|e2e|r)\b")
DURATIONS_KEY = "ideareview/durations"


@cache
def _module_source(module: str) -> str:
    path = ROOT / module
    return path.read_text("utf-8") if path.suffix == ".py" and path.exists() else ""


def _module_shares_a_computation(module: str) -> bool:
    """Whether a test module has a module-, class- or package-scoped fixture (a model fit,
    an R run) or names an xdist group: computed once per process, so its tests belong
    together on one worker."""
    return bool(SHARED_FIXTURE.search(_module_source(module)))


#: Durations of a whole run kept in the repository (`make test-durations` refreshes them
#: from this checkout's last runs), so a fresh clone, as CI's is, starts its longest tests
#: first too. Only their order matters: they were measured on a loaded machine.
COMMITTED_DURATIONS = Path(__file__).with_name("durations.json")


@cache
def _committed_durations() -> dict[str, float]:
    import json

    try:
        return json.loads(COMMITTED_DURATIONS.read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def _guessed_seconds(nodeid: str) -> float:
    """A test's expected duration when this checkout has not recorded it: the committed
    one, else seconds for a module with slow, browser or R marks, a fraction of one
    otherwise."""
    committed = _committed_durations().get(nodeid)
    if committed:
        return committed
    module = nodeid.split("::", 1)[0]
    return (
        8.0 if module.startswith("tests/e2e/") or SLOW_MARK.search(_module_source(module)) else 0.3
    )


@pytest.hookimpl(optionalhook=True)  # a run without pytest-xdist installed still collects
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` (make test): every test is scheduled on its own, except that the
    tests of a module sharing a computation (above) go to one worker as a unit, which
    computes it once. pytest-xdist's own loadgroup marks tests through Item._nodeid, which
    pytest 9.2 no longer reads, so it scattered them; this scheduler needs only the
    test ids the controller has.

    Units go out longest first (each test's duration in the last run that ran it, kept in
    pytest's cache; a guess from its module's marks before that), so the run does not end
    with one worker on a long test while the others idle."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    cache_ = getattr(config, "cache", None)
    recorded: dict[str, float] = cache_.get(DURATIONS_KEY, {}) if cache_ else {}

    class SharedComputationScheduling(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if _module_shares_a_computation(module) else nodeid

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the queue is complete at the first assignment
                self.ordered = True

                def seconds(unit: dict[str, bool]) -> float:
                    return sum(recorded.get(n) or _guessed_seconds(n) for n in unit)

                units = sorted(self.workqueue.items(), key=lambda kv: -seconds(kv[1]))
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return SharedComputationScheduling(config, log)


class _Durations:
    """Records each test's duration (setup, call and teardown) in the process that reports
    them (the xdist controller, or a run without xdist) and keeps them in pytest's cache
    for the scheduler above; tests not run this time keep their earlier figure."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.seconds: dict[str, float] = {}
        self.started: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # The first setup in each process also creates its test database: not the test's.
        process = str(getattr(report, "node", "main"))
        if report.when == "setup" and process not in self.started:
            self.started.add(process)
            return
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        cache_ = getattr(self.config, "cache", None)
        if cache_ is None or not self.seconds:
            return
        kept = cache_.get(DURATIONS_KEY, {})
        kept.update({k: round(v, 3) for k, v in self.seconds.items()})
        cache_.set(DURATIONS_KEY, kept)


class _CpuLog:
    """IDEAREVIEW_TEST_CPU_LOG=folder: each test process appends, per test, the CPU its
    process and the children it waited for spent (user + system, setup to teardown), and
    the children's part of it, to `<folder>/cpu-<pid>.tsv`. Wall times mislead on a loaded
    2-core machine; this is what says which tests the suite's CPU goes to
    (docs/testing.md)."""

    def __init__(self, folder: str) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        self.path = Path(folder) / f"cpu-{os.getpid()}.tsv"

    @staticmethod
    def _cpu() -> tuple[float, float]:
        """(this process, the children it has waited for) in seconds of user + system."""
        import resource

        own, kids = (
            resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        )
        return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> Any:
        own, kids = self._cpu()
        yield
        own_after, kids_after = self._cpu()
        # A child's CPU counts when it is reaped, which may be during a later test (a
        # server a fixture started, ended when its scope ends): the third column says how
        # much of the second was children's.
        with self.path.open("a", encoding="utf-8") as out:
            total = own_after - own + kids_after - kids
            out.write(f"{item.nodeid}\t{total:.3f}\t{kids_after - kids:.3f}\n")


def pytest_configure(config: pytest.Config) -> None:
    _use_flush_by_delete()
    if not hasattr(config, "workerinput"):  # not inside an xdist worker
        config.pluginmanager.register(_Durations(config), "ideareview-durations")
    folder = os.environ.get("IDEAREVIEW_TEST_CPU_LOG", "")
    runs_tests = hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", 0)
    if folder and runs_tests:
        config.pluginmanager.register(_CpuLog(folder), "ideareview-cpu-log")


# The garbage collector in a test process. Once the tests are collected, the modules,
# Django's apps and the test functions are all loaded, and none of them is garbage: they
# go to the collector's permanent generation (gc.freeze), which its full collections no
# longer walk; and a test process allocates millions of short-lived objects (queries,
# templates, numpy results), so it collects the youngest generation after 20,000
# allocations instead of 700 and the older ones less often. What is garbage is still
# collected, in fewer passes (docs/testing.md has the measured share of the CPU).
GC_THRESHOLDS = (20_000, 20, 20)


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


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
            return not browser and (
                not _uses_database(item) or item.get_closest_marker("embedded") is not None
            )
        return browser or _uses_database(item)

    keep = [item for item in items if wanted(item)]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if not wanted(item)])
        items[:] = keep
