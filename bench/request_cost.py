"""What one request costs, independent of how busy the machine is: database queries and
CPU time per request kind, through the whole middleware stack (sessions, CSRF, auth,
messages) with DEBUG off, on PostgreSQL on loopback.

For each kind it prints the number of queries one request makes, the web process's CPU
time per request (time.process_time: only this process, so other programs on the
machine do not count), and the PostgreSQL backend's CPU per request (read from
/proc/<pid>/stat of this connection's server process, 10 ms ticks, so it is averaged
over many requests). Wall time is printed too, but it is the noisy one.

    python bench/request_cost.py                      # 300 of each
    python bench/request_cost.py --profile autosave   # plus cProfile's top functions
    python bench/request_cost.py --login              # plus one login's password check
    python bench/request_cost.py --kinds autosave,login page   # only these kinds
    python bench/request_cost.py --smoke              # all of it, 10 of each (CI)
    python bench/request_cost.py --gunicorn           # over HTTP through gunicorn

With --gunicorn the requests go over loopback HTTP to gunicorn started as bench/load.py
starts it (`ideareview/gunicorn.conf.py`, the cache on Redis), several reviewers' keep-alive
connections at once, and the CPU is read from /proc for the whole gunicorn process tree,
the database's PostgreSQL backends and Redis: what a request costs the server, HTTP
parsing, threads and workers included. "login" there is a new connection's login page and
its POST.

It creates (and drops first) its own database (--database, default ir_request_cost) on
the PostgreSQL server of --pg (default postgres://postgres@127.0.0.1:5432). The cache is
the default (a file cache in a temporary folder) unless CACHE_URL is set.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import re
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FORM = "application/x-www-form-urlencoded"
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def setup(args: argparse.Namespace) -> None:
    import psycopg

    if not args.database.startswith("ir_"):
        raise SystemExit("--database must start with ir_ (it is dropped first)")
    with psycopg.connect(f"{args.pg.rstrip('/')}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{args.database}"')
    for key in [k for k in os.environ if k.startswith(("DJANGO_", "DATABASE_", "IDEAREVIEW_"))]:
        del os.environ[key]
    os.environ.update(
        DATABASE_URL=f"{args.pg.rstrip('/')}/{args.database}",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="request-cost-benchmark-" + "k" * 40,
        DJANGO_SETTINGS_MODULE="ideareview.settings",
        IDEAREVIEW_VAR_DIR=tempfile.mkdtemp(prefix="ideareview-cost-"),
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)


def backend_cpu() -> float:
    """CPU seconds (user + system) the PostgreSQL server process of this connection used."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def captured_queries(request: Callable[[], Any]) -> list[str]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        request()
    return [q["sql"] for q in ctx.captured_queries]


def cost(name: str, request: Callable[[], Any], n: int) -> dict[str, Any]:
    for _ in range(5):  # warm caches, templates, the connection
        request()
    queries = len(captured_queries(request))
    db0, cpu0, wall0 = backend_cpu(), time.process_time(), time.perf_counter()
    for _ in range(n):
        request()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    db = backend_cpu() - db0
    return {
        "name": name,
        "queries": queries,
        "cpu_ms": cpu / n * 1000,
        "db_ms": db / n * 1000,
        "wall_ms": wall / n * 1000,
    }


def profile(request: Callable[[], Any], n: int, sort: str = "cumulative") -> str:
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    for _ in range(n):
        request()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats(sort).print_stats(40)
    return out.getvalue()


def requests(study: Any) -> dict[str, Callable[[], Any]]:
    """One logged-in reviewer's requests, as the browser sends them (CSRF token included)."""
    from django.test import Client

    from tests.factories import review_answers

    reviewer = study.reviewers[0]
    (assignment, *_) = study.assignments[reviewer.pk]
    client = Client(enforce_csrf_checks=True, HTTP_HOST="127.0.0.1")
    client.force_login(study.users[0])
    page = client.get(f"/studies/r/assignments/{assignment.pk}/").content.decode()
    token = CSRF_INPUT.search(page)
    assert token is not None, "the review page has no CSRF token"
    answers = review_answers(study.study)
    body = urllib.parse.urlencode({**answers, "version": "0"})
    headers = {"HX-Request": "true", "X-CSRFToken": client.cookies["csrftoken"].value}

    def expect(status: int, response: Any) -> None:
        if response.status_code != status:
            raise SystemExit(f"HTTP {response.status_code}: {response.content[:300]!r}")

    def autosave() -> None:
        # urlencoded, as htmx sends it (the test client's default is multipart)
        url = f"/studies/r/assignments/{assignment.pk}/draft/"
        expect(200, client.post(url, body, content_type=FORM, headers=headers))

    password = study.password

    def login_page() -> Any:
        fresh = Client(enforce_csrf_checks=True, HTTP_HOST="127.0.0.1")
        response = fresh.get("/login/")
        expect(200, response)
        return fresh, response

    def login() -> None:
        # a new browser each time: the page (for its CSRF token), then the POST, which
        # checks the password and writes the new session
        fresh, response = login_page()
        token = CSRF_INPUT.search(response.content.decode())
        assert token is not None, "the login page has no CSRF token"
        data = {
            "username": study.users[0].username,
            "password": password,
            "csrfmiddlewaretoken": token[1],
        }
        expect(302, fresh.post("/login/", urllib.parse.urlencode(data), content_type=FORM))

    return {
        "trivial (/healthz)": lambda: expect(200, client.get("/healthz")),
        "autosave": autosave,
        "login page": login_page,
        "login page + login": login,
        "open": lambda: expect(200, client.get(f"/studies/r/assignments/{assignment.pk}/")),
        "dashboard": lambda: expect(200, client.get("/studies/r/home/")),
    }


def login_cost(n: int) -> None:
    """CPU of one password check, as a login makes it, with the hasher new passwords get
    and, for comparison, Django's Argon2 and PBKDF2 at Django's parameters."""
    from django.conf import settings
    from django.contrib.auth.hashers import check_password
    from django.test import override_settings
    from django.utils.module_loading import import_string

    django_hashers = "django.contrib.auth.hashers."
    paths = [settings.PASSWORD_HASHERS[0]]
    for name in ("Argon2PasswordHasher", "PBKDF2PasswordHasher"):
        if django_hashers + name not in paths:
            paths.append(django_hashers + name)
    for path in paths:
        hasher = import_string(path)()
        encoded = hasher.encode("Reviewer-pass-2024", hasher.salt())
        with override_settings(PASSWORD_HASHERS=[path]):
            t0 = time.process_time()
            for _ in range(n):
                assert check_password("Reviewer-pass-2024", encoded)
            ms = (time.process_time() - t0) / n * 1000
        parameters = encoded.rsplit("$", 2)[0]  # without the salt and the hash
        print(f"login: one password check, {parameters}: {ms:.1f} ms CPU")


# --------------------------------------------------------------------------- through gunicorn


def gunicorn_cost(args: argparse.Namespace, study: Any) -> None:
    """The request kinds over HTTP through gunicorn, CPU read from /proc (see the module's
    docstring); `args.concurrency` reviewers send at once, each on its own connection."""
    import asyncio

    sys.path.insert(0, str(ROOT / "bench"))
    import load  # bench/load.py: the server's start, the HTTP client, the CPU meter
    from django.db import connections

    connections.close_all()
    server_args = argparse.Namespace(
        pg=args.pg, database=args.database, port=load.free_port(), web_workers=args.web_workers,
        threads=args.threads, pool=0, cache=args.cache,
    )  # fmt: skip
    var = Path(tempfile.mkdtemp(prefix="ideareview-cost-http-"))
    server = load.start_server(load.server_env(server_args, var), var, server_args.port)
    users = study.users[: args.concurrency]

    async def logged_in(user: Any) -> tuple[Any, int, dict[str, str]]:
        s = load.Session(server_args.port)
        _, page = await s.request("GET", "/login/")
        token = CSRF_INPUT.search(page)
        assert token is not None, "the login page has no CSRF token"
        data = {"username": user.username, "password": study.password}
        status, _ = await s.request("POST", "/login/", {**data, "csrfmiddlewaretoken": token[1]})
        assert status == 302, f"login answered {status}"
        (assignment, *_) = study.assignments[study.reviewers[study.users.index(user)].pk]
        status, page = await s.request("GET", f"/studies/r/assignments/{assignment.pk}/")
        assert status == 200, f"the review page answered {status}"
        return s, assignment.pk, load.hidden_fields(page)

    async def one(kind: str, reviewer: tuple[Any, int, dict[str, str]], user: Any) -> None:
        s, assignment, hidden = reviewer
        if kind == "login":
            fresh = load.Session(server_args.port)
            _, page = await fresh.request("GET", "/login/")
            token = CSRF_INPUT.search(page)
            assert token is not None
            data = {"username": user.username, "password": study.password}
            status, _ = await fresh.request(
                "POST", "/login/", {**data, "csrfmiddlewaretoken": token[1]}
            )
            fresh.close()
            expected = 302
        elif kind == "autosave":
            form = urllib.parse.urlencode({**hidden, **answers})
            headers = {"HX-Request": "true", "X-CSRFToken": s.cookies.get("csrftoken", "")}
            url = f"/studies/r/assignments/{assignment}/draft/"
            status, _ = await s.request("POST", url, form, **headers)
            expected = 200
        else:
            status, _ = await s.request("GET", paths[kind].format(assignment))
            expected = 200
        if status != expected:
            raise SystemExit(f"{kind}: HTTP {status}")

    from tests.factories import review_answers

    answers = review_answers(study.study)
    paths = {
        "trivial (/healthz)": "/healthz",
        "open": "/studies/r/assignments/{}/",
        "dashboard": "/studies/r/home/",
    }
    kinds = ["trivial (/healthz)", "autosave", "open", "dashboard", "login"]

    async def run() -> None:
        reviewers = [await logged_in(u) for u in users]
        print(
            f"through gunicorn ({args.web_workers} workers x {args.threads} threads, cache "
            f"{args.cache}), {len(users)} reviewers sending at once; CPU per request:"
        )
        print(
            f"{'request':<20}{'web CPU ms':>12}{'db CPU ms':>11}{'Redis ms':>10}"
            f"{'client ms':>11}{'req/s':>8}"
        )
        for kind in kinds:
            rounds = max(1, args.n // len(users)) if kind != "login" else max(1, args.n // 10)
            for r, u in zip(reviewers, users, strict=True):  # warm each connection's worker
                await one(kind, r, u)
            meter = load.CpuMeter(server_args, server.pid)
            meter.start()
            for _ in range(rounds):
                await asyncio.gather(
                    *(one(kind, r, u) for r, u in zip(reviewers, users, strict=True))
                )
            meter.finish()
            used, n = meter.used(), rounds * len(users)
            print(
                f"{kind:<20}{used['web'] / n * 1000:>12.2f}{used['pg'] / n * 1000:>11.2f}"
                f"{used['redis'] / n * 1000:>10.2f}{used['generator'] / n * 1000:>11.2f}"
                f"{n / used['wall']:>8.0f}"
            )
        for r in reviewers:
            r[0].close()

    try:
        asyncio.run(run())
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
    print(f"(load average {os.getloadavg()[0]:.1f}; db: this database's backends)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="ir_request_cost")
    parser.add_argument("-n", type=int, default=300, help="requests of each kind")
    parser.add_argument("--profile", help="a request kind to profile with cProfile")
    parser.add_argument(
        "--sort", default="cumulative", help="cProfile's order: cumulative or tottime"
    )
    parser.add_argument("--queries", help="a request kind whose SQL to print")
    parser.add_argument("--login", action="store_true", help="time one password check")
    parser.add_argument("--kinds", help="comma-separated request kinds to measure (default: all)")
    parser.add_argument(
        "--gunicorn", action="store_true", help="over HTTP through gunicorn (the docstring)"
    )
    parser.add_argument("--concurrency", type=int, default=8, help="--gunicorn: reviewers")
    parser.add_argument("--web-workers", type=int, default=min(2 * (os.cpu_count() or 1), 8))
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument(
        "--cache", default="redis://127.0.0.1:6379/8", help="--gunicorn: CACHE_URL ('file')"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="10 of each, with the autosave's SQL and profile, a login, and --gunicorn's "
        "path: seconds",
    )
    args = parser.parse_args()
    if args.smoke:
        args.n, args.profile, args.queries, args.login = 10, "autosave", "autosave", True
    setup(args)
    from django.contrib.auth import get_user_model

    from tests.factories import review_study

    owner = get_user_model().objects.create_user("cost-owner", password="unused-Owner-1")
    reviewers = max(2, args.concurrency) if args.gunicorn else 2
    study = review_study(owner, slug="cost", n_reviewers=reviewers, n_ideas=4, per_reviewer=2)
    if args.gunicorn:
        gunicorn_cost(args, study)
        return
    kinds = requests(study)
    print(f"{'request':<20}{'queries':>8}{'web CPU ms':>12}{'db CPU ms':>11}{'wall ms':>9}")
    wanted = args.kinds.split(",") if args.kinds else list(kinds)
    for name in wanted:
        if name not in kinds:
            raise SystemExit(f"--kinds: {name!r} is not one of {', '.join(kinds)}")
    for name, request in ((k, kinds[k]) for k in wanted):
        row = cost(name, request, args.n)
        print(
            f"{row['name']:<20}{row['queries']:>8}{row['cpu_ms']:>12.2f}{row['db_ms']:>11.2f}"
            f"{row['wall_ms']:>9.2f}"
        )
    print(f"({args.n} requests of each kind; load average {os.getloadavg()[0]:.1f})")
    if args.queries:
        for sql in captured_queries(kinds[args.queries]):
            print(f"  {sql[:300]}")
    if args.profile:
        print(profile(kinds[args.profile], args.n, args.sort))
    if args.login:
        login_cost(5)
    if args.smoke:  # the HTTP path too, on the file cache (runs where no Redis is)
        args.cache, args.web_workers, args.threads = "file", 2, 2
        gunicorn_cost(args, study)


if __name__ == "__main__":
    main()
