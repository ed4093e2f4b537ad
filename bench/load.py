"""Load benchmark: N reviewers at once against the production server (gunicorn, as
`make serve` runs it) on PostgreSQL on loopback, with real sessions.

Each reviewer logs in (the logins spread over the first --ramp seconds), opens the
dashboard and each of their assignments, autosaves every --autosave seconds while typing
for --typing seconds (the text grows with each save), and submits. A prober asks the
trivial endpoint (/healthz: one SELECT 1) every 0.2 s throughout, so every request kind is
also shown as a ratio to a request that does almost nothing under the same load.
Afterwards the database is checked: every acknowledged submission exists exactly once,
with the scores and text that were sent.

    python bench/load.py                        # 200 reviewers, 60 s ramp, 2 x 60 s typing
    python bench/load.py --reviewers 20 --ramp 5 --typing 10 --assignments 1   # quick
    python bench/load.py --smoke     # 4 reviewers, seconds, on a free port (CI)

It creates (and drops first) its own database (--database, default ir_load) on the
PostgreSQL server of --pg (default postgres://postgres@127.0.0.1:5432), and starts
gunicorn on 127.0.0.1:--port with the same configuration file as `make serve`, its cache
(sessions, login limits) on Redis as in docs/deploy.md (--cache; --smoke uses the file
cache). It prints the CPU the generator, gunicorn, PostgreSQL and Redis used per request,
over the whole run and split at the last login. It ends with the line
`load: N reviewers, E errors, L lost, D duplicated; autosave p95 X ms (R x trivial)`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import os
import random
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HOST = "127.0.0.1"
PROBE_INTERVAL = 0.2
WORDS = [
    "novel",
    "baseline",
    "ablation",
    "prompt",
    "retrieval",
    "calibration",
    "dataset",
    "evaluation",
    "metric",
    "model",
    "benchmark",
    "hypothesis",
    "variance",
    "feasible",
    "reviewer",
    "claim",
    "evidence",
    "scaling",
    "error",
    "robust",
]


# --------------------------------------------------------------------------- HTTP client


class Session:
    """One reviewer's browser: a keep-alive connection and its cookies, on asyncio streams.
    Like a browser, a request that fails on a reused connection before any byte of an
    answer arrives is sent again once on a new connection (the server may close an idle
    connection at any moment).

    HTTP/1.1 is written and read by hand (status line, the few headers used, a body by
    Content-Length or chunked): the generator shares the machine with the server it
    measures, so every microsecond it spends per request is taken from the server."""

    def __init__(self, port: int, timeout: float = 300):
        self.port = port
        self.timeout = timeout
        self.host = f"Host: {HOST}:{port}\r\n"
        self.cookies: dict[str, str] = {}
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.used = False
        self.retries = 0

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(
        self, method: str, path: str, data: dict[str, str] | str | None = None, **headers: str
    ) -> tuple[int, str]:
        """`data`: the form's fields, or the form already urlencoded."""
        lines = [f"{method} {path} HTTP/1.1\r\n", self.host]
        lines += [f"{k}: {v}\r\n" for k, v in headers.items()]
        body = b""
        if data is not None:
            body = (data if isinstance(data, str) else urllib.parse.urlencode(data)).encode()
            lines.append("Content-Type: application/x-www-form-urlencoded\r\n")
        if body or method == "POST":
            lines.append(f"Content-Length: {len(body)}\r\n")
        if self.cookies:
            lines.append("Cookie: " + "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
            lines.append("\r\n")
        message = ("".join(lines) + "\r\n").encode() + body
        for attempt in (1, 2):
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection(HOST, self.port)
                self.used = False
            reused, answered = self.used, [False]
            try:
                async with asyncio.timeout(self.timeout):
                    self.writer.write(message)
                    status, text = await self._response(answered)
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                self.close()
                if reused and not answered[0] and attempt == 1:
                    self.retries += 1
                    continue
                if isinstance(exc, asyncio.IncompleteReadError):
                    raise ConnectionError("the server closed the connection mid-answer") from exc
                raise
            except BaseException:
                self.close()
                raise
            self.used = True
            return status, text
        raise AssertionError("unreachable")

    async def _response(self, answered: list[bool]) -> tuple[int, str]:
        assert self.reader is not None
        head = await self.reader.readuntil(b"\r\n\r\n")
        answered[0] = True
        status_line, *fields = head[:-4].decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        length, chunked, close = -1, False, False
        for line in fields:
            name, _, value = line.partition(":")
            name = name.lower()
            if name == "content-length":
                length = int(value)
            elif name == "set-cookie":
                cookie, _, _ = value.strip().partition(";")
                key, _, val = cookie.partition("=")
                self.cookies[key.strip()] = val
            elif name == "transfer-encoding":
                chunked = "chunked" in value.lower()
            elif name == "connection":
                close = value.strip().lower() == "close"
        if chunked:
            parts = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")  # no trailers are sent
                    break
                parts.append(await self.reader.readexactly(size + 2))
            body = b"".join(part[:-2] for part in parts)
        elif length >= 0:
            body = await self.reader.readexactly(length)
        else:
            body, close = await self.reader.read(), True
        if close:
            self.close()
        return status, body.decode("utf-8", "replace")


def healthz(port: int) -> bool:
    """Whether the server answers /healthz (a blocking check, before the run)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    finally:
        conn.close()


# --------------------------------------------------------------------------- recording


@dataclass
class Recorder:
    started: float = field(default_factory=time.monotonic)
    # kind -> [(start, ms)]: the start times let each kind be compared with the trivial
    # requests made while it ran.
    latencies: dict[str, list[tuple[float, float]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    errors: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    attempted: int = 0

    async def call(
        self, kind: str, expect: int, session: Session, *args: Any, **kw: Any
    ) -> str | None:
        self.attempted += 1
        t0 = time.monotonic()
        try:
            status, text = await session.request(*args, **kw)
        except Exception as exc:  # every failure is counted, none stops the run
            self.errors[kind].append(f"{type(exc).__name__}: {exc}")
            return None
        elapsed = (time.monotonic() - t0) * 1000
        if status != expect:
            self.errors[kind].append(f"HTTP {status} (expected {expect}): {text[:160]!r}")
            return None
        self.latencies[kind].append((t0, elapsed))
        return text


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# --------------------------------------------------------------------------- reviewers


CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
HIDDEN = re.compile(r'<input[^>]*type="hidden"[^>]*>')
ATTR = re.compile(r'(name|value)="([^"]*)"')


def hidden_fields(page: str) -> dict[str, str]:
    """The hidden inputs of the page's forms (CSRF token, a draft version, ...), sent back
    as a browser would."""
    fields = {}
    for tag in HIDDEN.findall(page):
        attrs = dict(ATTR.findall(tag))
        if "name" in attrs:
            fields[attrs["name"]] = attrs.get("value", "")
    return fields


@dataclass
class Plan:
    username: str
    password: str
    assignments: list[int]
    answers: dict[int, dict[str, str]]
    start_at: float


async def reviewer(plan: Plan, args: argparse.Namespace, rec: Recorder, acked: dict) -> None:
    await asyncio.sleep(max(0.0, plan.start_at - time.monotonic()))
    s = Session(args.port, args.timeout)
    page = await rec.call("login page", 200, s, "GET", "/login/")
    token = CSRF_INPUT.search(page or "")
    if token is None:
        return
    login = {"username": plan.username, "password": plan.password, "csrfmiddlewaretoken": token[1]}
    if await rec.call("login", 302, s, "POST", "/login/", login) is None:
        return
    await rec.call("dashboard", 200, s, "GET", "/studies/r/home/")
    for assignment in plan.assignments:
        page = await rec.call("open", 200, s, "GET", f"/studies/r/assignments/{assignment}/")
        if page is None:
            continue
        hidden = hidden_fields(page)
        csrf = s.cookies.get("csrftoken", "")
        answers = plan.answers[assignment]
        typing = TypedForm(hidden, answers)
        saves = max(1, int(args.typing / args.autosave))
        t0 = time.monotonic()
        for k in range(1, saves + 1):
            await asyncio.sleep(max(0.0, t0 + k * args.autosave - time.monotonic()))
            await rec.call(
                "autosave", 200, s, "POST", f"/studies/r/assignments/{assignment}/draft/",
                typing.at(k / saves), **{"HX-Request": "true", "X-CSRFToken": csrf},
            )  # fmt: skip
        url = f"/studies/r/assignments/{assignment}/submit/"
        if await rec.call("submit", 302, s, "POST", url, {**hidden, **answers}) is not None:
            acked[assignment] = answers
    s.close()
    acked["_retries"] = acked.get("_retries", 0) + s.retries


class TypedForm:
    """The form as an autosave sends it while the texts are typed: the hidden fields and
    the scores, and the start of each text. Encoded once per assignment: an encoded text's
    words are separated by "+" (a "+" inside a word is encoded), so the start of a text is
    the first words of its encoding."""

    def __init__(self, hidden: dict[str, str], answers: dict[str, str]):
        texts = {k: v for k, v in answers.items() if k.endswith("_rationale")}
        fixed = {**hidden, **{k: v for k, v in answers.items() if k not in texts}}
        self.fixed = urllib.parse.urlencode(fixed)
        self.texts = [
            (urllib.parse.quote_plus(k), urllib.parse.quote_plus(v).split("+"))
            for k, v in texts.items()
        ]

    def at(self, share: float) -> str:
        """The encoded form after `share` of the typing (at least one word of each text)."""
        parts = [self.fixed]
        for key, words in self.texts:
            parts.append(f"{key}={'+'.join(words[: max(1, int(len(words) * share))])}")
        return "&".join(parts)


async def prober(args: argparse.Namespace, rec: Recorder) -> None:
    s = Session(args.port)
    try:
        while True:
            t0 = time.monotonic()
            await rec.call("trivial (/healthz)", 200, s, "GET", "/healthz")
            await asyncio.sleep(max(0.0, PROBE_INTERVAL - (time.monotonic() - t0)))
    finally:
        s.close()


async def run(plans: list[Plan], args: argparse.Namespace, rec: Recorder, acked: dict) -> None:
    """Every reviewer as a task of one event loop, and the prober beside them."""
    probe = asyncio.create_task(prober(args, rec))
    await asyncio.gather(*(reviewer(plan, args, rec, acked) for plan in plans))
    probe.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await probe


# --------------------------------------------------------------------------- CPU


def proc_cpu(pid: int, children: bool = False) -> float:
    """CPU seconds (user + system) of a process from /proc/<pid>/stat; with `children`, also
    those of its children that have ended and been waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> float:
    """CPU seconds of a process and all its descendants, living or ended (an ended one
    counts in its parent's children time once the parent has waited for it)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parent[int(entry.name)] = int(stat[1])
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        with contextlib.suppress(OSError):
            total += proc_cpu(pid, children=True)
        todo.extend(child for child, ppid in parent.items() if ppid == pid)
    return total


def _comm(proc: Path) -> str:
    try:
        return (proc / "comm").read_text().strip()
    except OSError:
        return ""


def _cpu_or_zero(pid: int) -> float:
    try:
        return proc_cpu(pid)
    except OSError:
        return 0.0


def machine_busy() -> float:
    """CPU seconds all cores of the machine spent busy (not idle, not waiting on I/O)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(
        int, Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """Where the CPU goes during the run: this process (the load generator), the gunicorn
    process tree, PostgreSQL's backends serving the benchmark's database (polled every
    second, since a backend's time is gone once it ends), all of PostgreSQL's processes
    (other databases on the server included), and the whole machine. A snapshot every
    few seconds lets the run be split into phases (the logins, then the typing); the
    polling thread's own CPU is not counted as the generator's."""

    def __init__(self, args: argparse.Namespace, server_pid: int):
        import psycopg

        self.server_pid, self.database = server_pid, args.database
        self.conn = psycopg.connect(f"{args.pg.rstrip('/')}/postgres", autocommit=True)
        (own,) = self.conn.execute("SELECT pg_backend_pid()").fetchone() or (0,)
        self.postmaster = int(Path(f"/proc/{own}/stat").read_text().rsplit(")", 1)[1].split()[1])
        self.redis = [
            int(d.name)
            for d in Path("/proc").iterdir()
            if d.name.isdigit() and _comm(d) == "redis-server"
        ]
        self.backends: dict[int, float] = {}
        self.base_backends: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.samples: list[dict[str, float]] = []
        self.own_cpu = 0.0  # the polling thread's

    def _sample_backends(self) -> None:
        rows = self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.database,)
        ).fetchall()
        for (pid,) in rows:
            with contextlib.suppress(OSError):
                self.backends[pid] = proc_cpu(pid)

    def _poll(self) -> None:
        n = 0
        while not self.stop.wait(1.0):
            self._sample_backends()
            n += 1
            if n % 5 == 0:
                self.samples.append(self._now())
            self.own_cpu = time.thread_time()

    def _now(self) -> dict[str, float]:
        own = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "generator": own.ru_utime + own.ru_stime - self.own_cpu,
            "web": tree_cpu(self.server_pid),
            "pg": sum(self.backends.values()) - sum(self.base_backends.values()),
            "pg_all": tree_cpu(self.postmaster),
            "redis": sum(_cpu_or_zero(pid) for pid in self.redis),
            "machine": machine_busy(),
            "wall": time.monotonic(),
        }

    def start(self) -> None:
        self._sample_backends()
        self.base_backends = dict(self.backends)
        self.samples = [self._now()]
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join()
        self._sample_backends()
        self.samples.append(self._now())
        self.conn.close()

    def used(self, since: float | None = None, until: float | None = None) -> dict[str, float]:
        """CPU seconds spent by each part, and the wall time, between the snapshots nearest
        to `since` and `until` (monotonic times; default: the whole run)."""
        first, last = self.samples[0], self.samples[-1]
        if since is not None:
            first = min(self.samples, key=lambda x: abs(x["wall"] - since))
        if until is not None:
            last = min(self.samples, key=lambda x: abs(x["wall"] - until))
        return {**{k: last[k] - first[k] for k in first}, "from": first["wall"], "to": last["wall"]}


CPU_PARTS = [
    ("generator", "load generator (this process)"),
    ("web", "gunicorn (all workers)"),
    ("pg", "PostgreSQL backends of this database"),
    ("pg_all", "PostgreSQL, all processes"),
    ("redis", "Redis (the cache; all its clients)"),
]


def cpu_report(rec: Recorder, meter: CpuMeter) -> None:
    """CPU per part over the whole run, and split at the last login's answer: the logins'
    phase (password hashing, pages) and the typing after it (autosaves)."""
    logins = rec.latencies.get("login", [])
    phases: list[tuple[str, float | None, float | None]] = [("the whole run", None, None)]
    if logins:
        split = max(t + ms / 1000 for t, ms in logins)
        phases += [("until the last login", None, split), ("after it", split, None)]
    for name, since, until in phases:
        used = meter.used(since, until)
        wall = used["wall"]
        # the requests started between the two snapshots (the whole run: all of them)
        lo, hi = (used["from"], used["to"]) if phases[0][0] != name else (0, float("inf"))
        requests = sum(1 for spans in rec.latencies.values() for t, _ in spans if lo <= t < hi)
        if wall <= 0 or not requests:
            continue
        print(f"CPU, {name}: {wall:.1f} s, {requests} requests answered (probes included)")
        for key, label in CPU_PARTS:
            print(
                f"  {label:<40}{used[key]:>8.1f} s{used[key] / wall:>7.2f} cores"
                f"{used[key] / requests * 1000:>8.2f} ms/request"
            )
        print(
            f"  {'the whole machine (busy time)':<40}{used['machine']:>8.1f} s"
            f"{used['machine'] / wall:>7.2f} cores of {os.cpu_count()}"
        )


# --------------------------------------------------------------------------- set-up


def server_env(args: argparse.Namespace, var: Path) -> dict[str, str]:
    # PYTHONDONTWRITEBYTECODE goes too: a production server has its bytecode cached, and
    # without the cache every gunicorn worker (also each one recycled during the run)
    # compiles the project's modules again, seconds of CPU each.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CELERY_", "IDEAREVIEW_", "DATABASE_", "CACHE_"))
        and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(
        DATABASE_URL=f"{args.pg.rstrip('/')}/{args.database}",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="load-benchmark-" + "k" * 40,
        IDEAREVIEW_VAR_DIR=str(var),
        IDEAREVIEW_BIND=f"{HOST}:{args.port}",
        IDEAREVIEW_WEB_WORKERS=str(args.web_workers),
        IDEAREVIEW_WEB_THREADS=str(args.threads),
    )
    if args.pool:
        env["DATABASE_POOL_MAX_SIZE"] = str(args.pool)
    if args.cache != "file":
        env["CACHE_URL"] = args.cache
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def create_database(args: argparse.Namespace) -> None:
    import psycopg

    if not args.database.startswith("ir_"):
        raise SystemExit("--database must start with ir_ (it is dropped first)")
    with psycopg.connect(f"{args.pg.rstrip('/')}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{args.database}"')


def build_study(args: argparse.Namespace) -> list[Plan]:
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from tests.factories import review_answers, review_study

    owner = get_user_model().objects.create_user("load-owner", password="unused-Owner-1")
    built = review_study(
        owner,
        slug="load",
        n_reviewers=args.reviewers,
        n_ideas=max(4, args.reviewers // 2),
        per_reviewer=args.assignments,
    )
    rng = random.Random(args.seed)
    base = review_answers(built.study)
    start = time.monotonic() + 3
    plans = []
    for n, (rev, user) in enumerate(zip(built.reviewers, built.users, strict=True)):
        answers = {}
        for a in built.assignments[rev.pk]:
            one = dict(base)
            for key in base:
                if key.endswith("_rationale"):
                    words = [rng.choice(WORDS) for _ in range(len(base[key].split()) + 20)]
                    one[key] = f"R{n} A{a.pk} " + " ".join(words)
                elif key in {m.key for m in built.study.form_definition().metrics}:
                    one[key] = str(rng.randint(3, 8))
            answers[a.pk] = one
        offset = args.ramp * n / max(1, args.reviewers - 1)
        plans.append(Plan(user.username, built.password, list(answers), answers, start + offset))
    rng.shuffle(plans)
    return plans


def start_server(env: dict[str, str], var: Path, port: int) -> subprocess.Popen:
    import socket

    with socket.socket() as probe:
        if probe.connect_ex((HOST, port)) == 0:
            raise SystemExit(f"port {port} is in use: another server would answer (--port)")
    log = (var / "server.log").open("w")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "--config", "ideareview/gunicorn.conf.py",
         "ideareview.wsgi:application"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            if healthz(port):
                break
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, 15)
            raise SystemExit(f"gunicorn did not start; see {var / 'server.log'}")
        time.sleep(0.3)
    # One worker answered; the others may still be importing Django. Wait until the whole
    # tree is idle, so the run's CPU figures hold no start-up.
    before = tree_cpu(server.pid)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = tree_cpu(server.pid)
        if now - before < 0.05:
            break
        before = now
    return server


# --------------------------------------------------------------------------- checks


def check_database(acked: dict) -> tuple[int, int, int]:
    """(lost, duplicated, mismatched) among the acknowledged submissions."""
    from studies.models import Review

    lost = duplicated = mismatched = 0
    for assignment, sent in acked.items():
        if assignment == "_retries":
            continue
        rows = list(
            Review.objects.filter(
                assignment_id=assignment, status=Review.Status.SUBMITTED
            ).prefetch_related("scores")
        )
        if not rows:
            lost += 1
            continue
        if len(rows) > 1:
            duplicated += len(rows) - 1
        stored = {s.metric: s for s in rows[0].scores.all()}
        for key, value in sent.items():
            if key.endswith("_rationale"):
                metric = key.removesuffix("_rationale")
                if metric in stored and stored[metric].rationale != value:
                    mismatched += 1
                    break
            elif key in stored and stored[key].score != float(value):
                mismatched += 1
                break
    return lost, duplicated, mismatched


# --------------------------------------------------------------------------- report


TRIVIAL = "trivial (/healthz)"
KINDS = ["login page", "login", "dashboard", "open", "autosave", "submit", TRIVIAL]
QS = (0.5, 0.95, 0.99)


def trivial_during(rec: Recorder, kind: str) -> list[float]:
    """The trivial requests started while requests of `kind` were being made."""
    spans = rec.latencies.get(kind, [])
    if not spans:
        return []
    lo = min(t for t, _ in spans)
    hi = max(t + ms / 1000 for t, ms in spans)
    return [ms for t, ms in rec.latencies.get(TRIVIAL, []) if lo <= t <= hi]


def steady_state(rec: Recorder) -> None:
    """Autosaves once every login has been answered: the cost of typing alone, without
    the password hashing of the ramp."""
    logins = rec.latencies.get("login", [])
    if not logins:
        return
    after = max(t + ms / 1000 for t, ms in logins)
    saves = [ms for t, ms in rec.latencies.get("autosave", []) if t > after]
    base = [ms for t, ms in rec.latencies.get(TRIVIAL, []) if t > after]
    if not saves or not base:
        return
    qs = [percentile(saves, q) for q in QS]
    ratios = [v / percentile(base, q) for v, q in zip(qs, QS, strict=True)]
    print(
        f"{'autosave, after':<20}{len(saves):>6}{'':>5}"
        + "".join(f"{v:>9.1f}" for v in qs)
        + "".join(f"{r:>8.2f}" for r in ratios)
        + f"{percentile(base, 0.95):>13.1f}"
    )
    print(
        f"  (the last row: autosaves started after the last login was answered, {len(base)} "
        "trivial requests in the same time)"
    )


def report(
    rec: Recorder,
    wall: float,
    args: argparse.Namespace,
    checks: tuple,
    retries: int,
    meter: CpuMeter,
):
    lost, duplicated, mismatched = checks
    done = sum(len(v) for k, v in rec.latencies.items() if k != TRIVIAL)
    errors = sum(len(v) for v in rec.errors.values())
    print(
        f"\n{args.reviewers} reviewers x {args.assignments} assignment(s), logins over "
        f"{args.ramp:g} s, typing {args.typing:g} s per assignment, autosave every "
        f"{args.autosave:g} s; gunicorn {args.web_workers} workers x {args.threads} threads"
        f"{f', pool {args.pool}' if args.pool else ''}, cache {args.cache}; "
        f"{os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at the end"
    )
    # What the reviewers' schedule asks for: login page, login, dashboard, then per
    # assignment one open, the autosaves and a submit, within ramp + typing time.
    planned = args.reviewers * (
        3 + args.assignments * (2 + max(1, int(args.typing / args.autosave)))
    )
    planned_time = args.ramp + args.assignments * args.typing
    print(
        f"offered {planned / planned_time:.1f} req/s ({planned} requests in the "
        f"{planned_time:g} s the schedule takes); achieved {done / wall:.1f} req/s "
        f"({done} answered in {wall:.1f} s, {errors} errors, {retries} resent after the server "
        "closed an idle connection)"
    )
    print(
        "ratios: each percentile over the same percentile of the trivial requests made "
        "while that kind of request ran"
    )
    head = f"{'request':<20}{'n':>6}{'err':>5}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
    print(head + f"{'p50 x':>8}{'p95 x':>8}{'p99 x':>8}{'trivial p95':>13}")
    ratio95 = {}
    for kind in KINDS:
        lat = [ms for _, ms in rec.latencies.get(kind, [])]
        base = trivial_during(rec, kind)
        qs = [percentile(lat, q) for q in QS]
        ratios = [v / percentile(base, q) for v, q in zip(qs, QS, strict=True)]
        ratio95[kind] = ratios[1]
        print(
            f"{kind:<20}{len(lat):>6}{len(rec.errors.get(kind, [])):>5}"
            + "".join(f"{v:>9.1f}" for v in qs)
            + "".join(f"{r:>8.2f}" for r in ratios)
            + f"{percentile(base, 0.95):>13.1f}"
        )
    steady_state(rec)
    for kind, messages in rec.errors.items():
        print(f"  {kind}: {len(messages)} error(s), e.g. {messages[0]}")
    if mismatched:
        print(f"  {mismatched} submission(s) stored with other values than sent (counted lost)")
    cpu_report(rec, meter)
    autosave = percentile([ms for _, ms in rec.latencies.get("autosave", [])], 0.95)
    print(
        f"load: {args.reviewers} reviewers, {errors} errors, {lost + mismatched} lost, "
        f"{duplicated} duplicated; autosave p95 {autosave:.0f} ms "
        f"({ratio95['autosave']:.1f} x trivial)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reviewers", type=int, default=200)
    parser.add_argument("--assignments", type=int, default=2, help="per reviewer")
    parser.add_argument("--ramp", type=float, default=60, help="logins spread over (s)")
    parser.add_argument("--typing", type=float, default=60, help="per assignment (s)")
    parser.add_argument("--autosave", type=float, default=5, help="interval (s)")
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="ir_load")
    parser.add_argument("--port", type=int, default=8021)
    parser.add_argument("--web-workers", type=int, default=min(2 * (os.cpu_count() or 1), 8))
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--pool", type=int, default=0, help="DATABASE_POOL_MAX_SIZE (0: off)")
    parser.add_argument(
        "--cache",
        help="CACHE_URL (default redis://127.0.0.1:6379/8, as docs/deploy.md's production "
        "setup has Redis); 'file': the file cache under var/ (--smoke's default)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--timeout", type=float, default=300, help="s a reviewer waits for an answer (a browser's)"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="4 reviewers, one assignment each, 3 s of typing, 2 web workers, a free port",
    )
    args = parser.parse_args()
    if args.smoke:
        args.reviewers, args.assignments, args.ramp, args.typing, args.autosave = 4, 1, 1, 3, 1
        args.web_workers, args.threads, args.port = 2, 2, free_port()
        args.cache = args.cache or "file"  # runs where no Redis is
    args.cache = args.cache or "redis://127.0.0.1:6379/8"

    var = Path(tempfile.mkdtemp(prefix="ideareview-load-"))
    env = server_env(args, var)
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ideareview.settings")
    create_database(args)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True
    )
    t0 = time.monotonic()
    plans = build_study(args)
    print(f"study built: {args.reviewers} reviewers in {time.monotonic() - t0:.1f} s")
    server = start_server(env, var, args.port)
    from django.db import connections

    connections.close_all()  # the study is built: this process's backend is idle from here
    meter = CpuMeter(args, server.pid)
    rec, acked = Recorder(), dict[Any, Any]()
    started = time.monotonic()
    meter.start()
    try:
        asyncio.run(run(plans, args, rec, acked))
        wall = time.monotonic() - started
        meter.finish()
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
    report(rec, wall, args, check_database(acked), int(acked.get("_retries", 0)), meter)
    print(f"(server log: {var / 'server.log'})")


if __name__ == "__main__":
    main()
