"""Judge-engine throughput against the scripted server: calls, wall time, latency bound.

    .venv/bin/python bench/judging.py                 # the issue's setting (≈ 4–5 minutes)
    .venv/bin/python bench/judging.py --latency 0.2   # quicker

For 150 ideas in 7 topics it runs a Swiss tournament (5 rounds, both orders) and a
both-order round robin within topics, at the given latency and concurrency, and prints
each run's calls, wall time and the bound calls × latency / concurrency (the best any
client could do). Then, at zero latency, it measures the per-call overhead of our code:
a warm replay that answers every unit from the cache (lookup + outcome rows + progress),
and a fresh run minus the bare `openai` client round trip to the same server.

It uses a throw-away SQLite database in a temporary directory, never the project's.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def setup_django(db_path: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{db_path}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ideareview.settings")
    os.environ.setdefault("DJANGO_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    logging.disable(logging.INFO)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def build_study(n_ideas: int, n_topics: int):
    from django.contrib.auth import get_user_model

    from studies.models import Idea, Topic
    from studies.services import study_create

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ideas", type=int, default=150)
    ap.add_argument("--topics", type=int, default=7)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip-round-robin", action="store_true")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        setup_django(Path(tmp) / "bench.sqlite3")
        from judging.client import prepare, send
        from judging.models import JudgeConfig
        from judging.services import judge_run_create, judge_run_execute
        from judging.testserver import Rules, TestServer

        study = build_study(args.ideas, args.topics)
        with TestServer(Rules(latency=args.latency)) as server:
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
                f"{'ratings s':>11}{'our ms/call':>13}"
            )
            plans = [("swiss", {"rounds": args.rounds, "both_orders": True})]
            if not args.skip_round_robin:
                plans.append(("pairwise", {}))
            for method, params in plans:
                run = judge_run_create(study=study, method=method, config=judge, params=params)
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
                )
                assert run.status == "done", run.message

        # Overhead at zero latency, one call at a time, on a fresh study (no cache).
        study = build_study(40, 2)
        with TestServer(Rules()) as server:
            judge = JudgeConfig.objects.create(
                name="overhead", base_url=server.base_url, model="scripted", concurrency=1
            )
            bare = [
                prepare(judge, [{"role": "user", "content": f"warm-up {i}"}]) for i in range(200)
            ]
            send(bare[0])
            started = time.perf_counter()
            for p in bare[1:]:
                send(p)
            client_ms = (time.perf_counter() - started) / (len(bare) - 1) * 1000

            run = judge_run_create(study=study, method="pairwise", config=judge)
            started = time.perf_counter()
            run = judge_run_execute(run=run)
            fresh_ms = (time.perf_counter() - started) / run.http_calls * 1000

            replay = judge_run_create(study=study, method="pairwise", config=judge)
            started = time.perf_counter()
            replay = judge_run_execute(run=replay)
            cached_ms = (time.perf_counter() - started) / replay.cache_hits * 1000
            assert replay.http_calls == 0

        print()
        print(f"bare openai client round trip (not our code): {client_ms:6.2f} ms/call")
        print(f"fresh run, per call, all in:                  {fresh_ms:6.2f} ms/call")
        print(f"  of which our code (fresh − bare client):    {fresh_ms - client_ms:6.2f} ms/call")
        print(f"cache replay, per unit (our code only):       {cached_ms:6.2f} ms/unit")
        print(
            "our ms/call: the run's own thread, busy (not waiting on HTTP) per call, "
            "commits included"
        )


if __name__ == "__main__":
    main()
