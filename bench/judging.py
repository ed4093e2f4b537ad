"""Judge-engine throughput against the scripted server: calls, wall time, latency bound.

    .venv/bin/python bench/judging.py                 # the issue's setting (≈ 4–5 minutes)
    .venv/bin/python bench/judging.py --latency 0.2   # quicker

For 150 ideas in 7 topics it runs a Swiss tournament (5 rounds, both orders) and a
both-order round robin within topics, at the given latency and concurrency, and prints
each run's calls, wall time and the bound calls × latency / concurrency (the best any
client could do). Then, at zero latency, it measures the per-call overhead of our code:
a warm replay that answers every unit from the cache (lookup + outcome rows + progress),
and a fresh run minus the bare `openai` client round trip to the same server.

Wall-clock "busy" times count time the engine thread spends waiting for the GIL (the
worker threads and the in-process test server share it) and for a CPU on a loaded
machine, so the bench also prints CPU time (`time.thread_time`): the engine thread's per
unit, excluding the ratings step, and the worker threads' per `send`. These do not depend
on machine load.

    .venv/bin/python bench/judging.py --overhead-only --profile   # ≈ 1 minute
    .venv/bin/python bench/judging.py --smoke   # every part on tiny sizes (CI)

`--profile` runs cProfile (CPU-time clock) over the engine thread of a fresh and of a
cached run and prints where each unit's time goes, by step of our code.

It uses a throw-away SQLite database in a temporary directory, never the project's.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import logging
import os
import pstats
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def setup_django(db_path: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{db_path}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ideareview.settings")
    os.environ.setdefault("DJANGO_LOG_LEVEL", "WARNING")
    # The scripted endpoint listens on loopback, which judges may reach only when the
    # administrator lists it (host and port; the port is chosen at random).
    os.environ.setdefault("IDEAREVIEW_LLM_HOST_ALLOWLIST", "127.0.0.1:*,localhost:*")
    import django

    django.setup()
    logging.disable(logging.INFO)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def build_study(n_ideas: int, n_topics: int):
    from django.contrib.auth import get_user_model

    from studies.models import Idea, Topic
    from studies.services.study import study_create

    owner, _ = get_user_model().objects.get_or_create(username="bench")
    study = study_create(owner=owner, slug=f"bench-{time.time_ns()}", title="bench")
    topics = [Topic.objects.create(study=study, name=f"topic {t}") for t in range(n_topics)]
    words = [
        "retrieval",
        "prompting",
        "calibration",
        "agents",
        "reasoning",
        "factuality",
        "multilingual",
    ]
    ideas = []
    for i in range(n_ideas):
        text = f"Idea {i}. " + " ".join(words[(i + k) % len(words)] for k in range(20 + i % 37))
        ideas.append(
            Idea(
                study=study,
                topic=topics[i % n_topics],
                title=f"Idea {i}",
                raw_text=text,
                normalized_text=text,
                normalization_status=Idea.NormalizationStatus.APPROVED,
            )
        )
    Idea.objects.bulk_create(ideas)
    return study


@contextlib.contextmanager
def cpu_meter() -> Iterator[dict[str, Any]]:
    """CPU seconds of the engine's own thread (`Engine.execute`, so without the ratings
    step) and of the worker threads inside `send`, for runs made inside the block.

    Instrumentation only: it wraps the two callables in this process and restores them.
    """
    from judging.services import engine as services
    from llm import pool as sending

    acc: dict[str, Any] = {"engine": 0.0, "send": 0.0, "sends": 0, "profile": None}
    lock = threading.Lock()
    execute, send = services.Engine.execute, sending.send

    def timed_execute(self: Any) -> None:
        profile = acc["profile"]
        started = time.thread_time()
        if profile is not None:
            profile.enable()
        try:
            execute(self)
        finally:
            if profile is not None:
                profile.disable()
            acc["engine"] += time.thread_time() - started

    def timed_send(prepared: Any, **kw: Any) -> Any:
        started = time.thread_time()
        try:
            return send(prepared, **kw)
        finally:
            with lock:
                acc["send"] += time.thread_time() - started
                acc["sends"] += 1

    services.Engine.execute = timed_execute  # type: ignore[method-assign]
    sending.send = timed_send  # the name the send pool's worker threads call
    try:
        yield acc
    finally:
        services.Engine.execute = execute  # type: ignore[method-assign]
        sending.send = send


# Steps of the engine thread's work per unit, as (path part, function) in cProfile's
# terms; cumulative CPU, so nested steps are also inside their parents.
PROFILE_STEPS = [
    (
        "judging/services/engine.py",
        "_fill",
        "start units: cancel check, prepare, cache lookup, budget, submit",
    ),
    ("judging/services/engine.py", "stopped", "  stop check (cancelled, lost, budget)"),
    ("llm/client.py", "prepare", "  prepare (cache key: JSON + SHA-256)"),
    (
        "llm/client.py",
        "lookup",
        "  cache lookup (SELECT; a hit loads the whole LLMCall row)",
    ),
    ("judging/services/engine.py", "_record", "store a returned call"),
    (
        "llm/client.py",
        "record",
        "  LLMCall INSERT (request + response JSON) in a savepoint",
    ),
    ("judging/services/engine.py", "complete", "  outcome: savepoint + driver.store"),
    ("judging/services/drivers/", "store", "    driver.store (parse + outcome INSERT)"),
    ("judging/services/base.py", "mark_parsed", "    UPDATE LLMCall.parsed after the INSERT"),
    ("judging/services/engine.py", "flush", "progress row UPDATE (every 0.5 s) and commits"),
    ("django/db/transaction.py", "__enter__", "savepoints opened (atomic blocks)"),
    ("django/db/transaction.py", "__exit__", "savepoints released / commits"),
    (
        "db/backends/utils.py",
        "debug_sql",
        "DEBUG query logging (CursorDebugWrapper; off in production)",
    ),
]


def print_profile(label: str, profile: cProfile.Profile, units: int) -> None:
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = sum(tt for (_cc, _nc, tt, _ct, _callers) in stats.values())
    print(f"\n{label}: engine-thread CPU under cProfile {1000 * total / units:.2f} ms/unit")
    for suffix, func, text in PROFILE_STEPS:
        ct = sum(
            v[3] for (path, _line, name), v in stats.items() if name == func and suffix in path
        )
        calls = sum(
            v[1] for (path, _line, name), v in stats.items() if name == func and suffix in path
        )
        if calls:
            print(f"  {1000 * ct / units:6.2f} ms/unit  {calls / units:5.2f}×  {text}")
    own = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:6]
    print("  largest own time:")
    for (path, line, name), (_cc, nc, tt, _ct, _callers) in own:
        where = f"{Path(path).name}:{line}" if line else ""
        print(f"  {1000 * tt / units:6.2f} ms/unit  {nc / units:5.2f}×  {name} {where}")


def latency_runs(args: argparse.Namespace) -> None:
    """Swiss and round robin at the given latency and concurrency, against the bound."""
    from judging.services import judge_run_create, judge_run_execute
    from judging.testserver import Rules, TestServer
    from llm.models import JudgeConfig

    study = build_study(args.ideas, args.topics)
    with TestServer(Rules(latency=args.latency)) as server, cpu_meter() as cpu:
        judge = JudgeConfig.objects.create(
            name="bench",
            base_url=server.base_url,
            model="scripted",
            concurrency=args.concurrency,
            timeout_seconds=max(30.0, 10 * args.latency),
            backoff_seconds=0.05,
        )
        print(
            f"{args.ideas} ideas in {args.topics} topics, latency {args.latency:g} s, "
            f"concurrency {args.concurrency}"
        )
        print(
            f"{'run':<44}{'calls':>7}{'calls s':>9}{'bound s':>9}{'ratio':>7}"
            f"{'ratings s':>11}{'our ms/call':>13}{'CPU ms/call':>13}"
        )
        plans = [("swiss", {"rounds": args.rounds, "both_orders": True})]
        if not args.skip_round_robin:
            plans.append(("pairwise", {}))
        for method, params in plans:
            run = judge_run_create(study=study, method=method, config=judge, params=params)
            cpu["engine"] = 0.0
            started = time.perf_counter()
            run = judge_run_execute(run=run)
            total = time.perf_counter() - started
            engine = run.summary["engine"]
            # "calls s" is the engine's wall time: from the first call to the last
            # outcome stored. The ratings (Bradley–Terry with its bootstrap, Swiss
            # standings) are computed afterwards and shown on their own.
            wall = engine["wall_s"]
            bound = run.http_calls * args.latency / args.concurrency
            label = f"{method} {params or ''}".strip()
            ratio = f"{wall / bound:.2f}" if bound else "-"
            print(
                f"{label:<44}{run.http_calls:>7}{wall:>9.1f}{bound:>9.1f}{ratio:>7}"
                f"{total - wall:>11.1f}{engine['ms_per_unit']:>13.2f}"
                f"{1000 * cpu['engine'] / max(1, engine['units']):>13.2f}"
            )
            assert run.status == "done", run.message
    print(
        "our ms/call: the run's own thread, busy (not waiting on HTTP) per call, commits "
        "included, wall clock; CPU ms/call: the same thread's CPU time"
    )


def overhead(args: argparse.Namespace) -> None:
    """Zero latency, one call at a time, on a fresh study (no cache), then a replay."""
    from judging.services import judge_run_create, judge_run_execute
    from judging.testserver import Rules, TestServer
    from llm.client import prepare, send
    from llm.models import JudgeConfig

    study = build_study(args.overhead_ideas, 2)
    with TestServer(Rules()) as server:
        judge = JudgeConfig.objects.create(
            name="overhead", base_url=server.base_url, model="scripted", concurrency=1
        )
        bare = [
            prepare(judge, [{"role": "user", "content": f"warm-up {i}"}])
            for i in range(args.bare_calls)
        ]
        send(bare[0])
        started, cpu_started = time.perf_counter(), time.thread_time()
        for p in bare[1:]:
            send(p)
        client_ms = (time.perf_counter() - started) / (len(bare) - 1) * 1000
        client_cpu_ms = (time.thread_time() - cpu_started) / (len(bare) - 1) * 1000

        measured = {}
        for label in ("fresh", "replay"):
            with cpu_meter() as cpu:
                run = judge_run_create(study=study, method="pairwise", config=judge)
                started = time.perf_counter()
                run = judge_run_execute(run=run)
                total = time.perf_counter() - started
            engine = run.summary["engine"]
            measured[label] = (run, total, engine, cpu)
        profiles: dict[str, tuple[cProfile.Profile, int]] = {}
        if args.profile:
            # Separate runs under another model name (an empty cache), so the profiler's
            # own cost stays out of the figures above.
            judge = JudgeConfig.objects.create(
                name="profile", base_url=server.base_url, model="scripted-profile", concurrency=1
            )
            for label in ("fresh", "replay"):
                with cpu_meter() as profiled:
                    profiled["profile"] = cProfile.Profile(time.thread_time)
                    run = judge_run_execute(
                        run=judge_run_create(study=study, method="pairwise", config=judge)
                    )
                profiles[label] = (profiled["profile"], run.summary["engine"]["units"])
        run, total, engine, cpu = measured["fresh"]
        fresh_ms = total / run.http_calls * 1000
        fresh_engine_ms = engine["wall_s"] / engine["units"] * 1000
        fresh_cpu_ms = cpu["engine"] / engine["units"] * 1000
        send_cpu_ms = cpu["send"] / max(1, cpu["sends"]) * 1000
        replay, total, r_engine, r_cpu = measured["replay"]
        cached_ms = total / replay.cache_hits * 1000
        cached_engine_ms = r_engine["wall_s"] / r_engine["units"] * 1000
        cached_cpu_ms = r_cpu["engine"] / r_engine["units"] * 1000
        assert replay.http_calls == 0

    print()
    print(f"bare openai client round trip (not our code): {client_ms:6.2f} ms/call")
    print(f"fresh run, per call, all in:                  {fresh_ms:6.2f} ms/call")
    print(f"  of which our code (fresh − bare client):    {fresh_ms - client_ms:6.2f} ms/call")
    print(f"cache replay, per unit (our code only):       {cached_ms:6.2f} ms/unit")
    print("the same without the ratings step (Bradley–Terry bootstrap), engine only:")
    print(f"  fresh run, engine wall per call:            {fresh_engine_ms:6.2f} ms/call")
    print(f"  cache replay, engine wall per unit:         {cached_engine_ms:6.2f} ms/unit")
    print("CPU time (load-independent):")
    print(f"  engine thread, fresh run, per call:         {fresh_cpu_ms:6.2f} ms/call")
    print(f"  engine thread, cache replay, per unit:      {cached_cpu_ms:6.2f} ms/unit")
    print(f"  worker thread in send (our wrapper + SDK):  {send_cpu_ms:6.2f} ms/call")
    print(f"  bare send loop, calling thread:             {client_cpu_ms:6.2f} ms/call")
    verdict = "under" if max(fresh_cpu_ms, cached_cpu_ms) < 5 else "OVER"
    print(f"  our engine's CPU per call is {verdict} the 5 ms aim")
    for label, (profile, units) in profiles.items():
        print_profile(f"{label} run", profile, units)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ideas", type=int, default=150)
    ap.add_argument("--topics", type=int, default=7)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip-round-robin", action="store_true")
    ap.add_argument("--overhead-only", action="store_true", help="skip the latency runs")
    ap.add_argument(
        "--profile", action="store_true", help="cProfile the engine thread (zero latency)"
    )
    ap.add_argument("--overhead-ideas", type=int, default=40)
    ap.add_argument("--bare-calls", type=int, default=200, help="bare client round trips")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, every part (latency runs, overhead, profile): seconds",
    )
    args = ap.parse_args()
    if args.smoke:
        args.ideas, args.topics, args.latency, args.concurrency, args.rounds = 12, 2, 0.01, 4, 2
        args.overhead_ideas, args.bare_calls, args.profile = 8, 20, True
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f} (wall times depend on it)")

    with tempfile.TemporaryDirectory() as tmp:
        setup_django(Path(tmp) / "bench.sqlite3")
        if not args.overhead_only:
            latency_runs(args)
        overhead(args)


if __name__ == "__main__":
    main()
