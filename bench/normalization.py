"""Style normalization end to end against the scripted server, against its latency bound.

    .venv/bin/python bench/normalization.py                  # 150 ideas, 2 s, concurrency 4
    .venv/bin/python bench/normalization.py --latency 0.5    # quicker
    .venv/bin/python bench/normalization.py --smoke          # every step on 6 ideas (CI)

It imports N seven-section proposals (≈ 250 words each) into a throw-away SQLite
database, points a judge config at the local OpenAI-compatible test server answering
after `--latency` seconds, and runs the normalization task as a worker would: every idea
sent, rewritten, checked (numbers, names, sections, length, embedding similarity) and
stored. It prints the wall time, the bound ideas × latency / concurrency (the best any
client could do at that concurrency) and how far above it the run was, the most
requests the server saw in flight at once, and the CPU the automatic checks took.

The embedding model is loaded before the clock starts (a worker keeps it loaded); its
load time is printed separately.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def setup_django(db_path: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{db_path}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ideareview.settings")
    os.environ.setdefault("DJANGO_LOG_LEVEL", "WARNING")
    # The scripted endpoint listens on loopback, which judges may reach only when the
    # administrator lists it.
    os.environ.setdefault("IDEAREVIEW_LLM_HOST_ALLOWLIST", "127.0.0.1:*,localhost:*")
    import django

    django.setup()
    logging.disable(logging.INFO)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


WORDS = [
    *("retrieval", "prompting", "calibration", "agents", "reasoning", "factuality"),
    *("multilingual", "verifier", "planner", "critic", "decoding", "uncertainty"),
    *("evidence", "claims", "answers", "questions", "passages", "benchmarks"),
    *("baselines", "ablations", "annotators", "rationales"),
]
NAMES = ["GPT-4", "Llama-3-8B", "TruthfulQA", "HotpotQA", "BM25", "XNLI", "BLEU"]


def proposal(rng: random.Random, i: int) -> str:
    from studies.protocol.template import SECTIONS, render_sections

    def sentence() -> str:
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
        words.insert(rng.randrange(len(words)), rng.choice(NAMES))
        return " ".join(words).capitalize() + "."

    sections = {s.key: " ".join(sentence() for _ in range(4)) for s in SECTIONS}
    sections["title"] = f"Idea {i}: " + " ".join(rng.choice(WORDS) for _ in range(6))
    sections["experiment_plan"] += f" We use {rng.randint(2, 500)} examples per task."
    return render_sections(sections)


def build_study(n_ideas: int, seed: int):
    from django.contrib.auth import get_user_model

    from studies.models import Condition, Idea, IdeaCondition, Topic
    from studies.services.study import study_create

    rng = random.Random(seed)
    owner, _ = get_user_model().objects.get_or_create(username="bench")
    study = study_create(owner=owner, slug=f"bench-{time.time_ns()}", title="bench")
    topic = Topic.objects.create(study=study, name="topic")
    conditions = [
        Condition.objects.create(study=study, key="Human", kind=Condition.Kind.HUMAN),
        Condition.objects.create(study=study, key="AI", kind=Condition.Kind.AI),
    ]
    for i in range(n_ideas):
        idea = Idea.objects.create(
            study=study, topic=topic, title=f"Idea {i}", raw_text=proposal(rng, i)
        )
        IdeaCondition.objects.create(
            idea=idea, condition=conditions[i % 2], study=study, external_id=f"i{i}"
        )
    return study


def _same_vector(texts: list[str]) -> Any:
    import numpy as np

    return np.ones((len(texts), 384), dtype=np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--ideas", type=int, default=150)
    ap.add_argument("--latency", type=float, default=2.0, help="seconds per answer")
    ap.add_argument(
        "--concurrency", type=int, default=None, help="the judge config's (default: its default)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--no-embedding",
        action="store_true",
        help="skip the embedding-similarity check, to see the pipeline without its CPU",
    )
    ap.add_argument("--smoke", action="store_true", help="6 ideas, 0.01 s latency: seconds")
    args = ap.parse_args()
    if args.smoke:
        args.ideas, args.latency = 6, 0.01

    with tempfile.TemporaryDirectory(prefix="ideareview-bench-") as tmp:
        setup_django(Path(tmp) / "bench.sqlite3")
        from judging.testserver import Rules, TestServer
        from llm.models import JudgeConfig
        from studies import services, tasks
        from studies.embeddings import embed
        from studies.models import Idea, JobRun

        started = time.perf_counter()
        embed(["warm up"])
        load = time.perf_counter() - started

        study = build_study(args.ideas, args.seed)
        sample = Idea.objects.filter(study=study).first()
        words = len(sample.raw_text.split()) if sample else 0
        with TestServer(Rules(latency=args.latency)) as server:
            config = JudgeConfig(
                name="bench",
                base_url=server.base_url,
                model="scripted",
                timeout_seconds=max(30.0, 10 * args.latency),
                backoff_seconds=0.05,
            )
            if args.concurrency is not None:
                config.concurrency = args.concurrency
            config.save()
            study.normalization_config = config
            study.save()
            concurrency = int(config.concurrency)
            bound = args.ideas * args.latency / concurrency
            print(
                f"{args.ideas} ideas (≈{words} words each), latency {args.latency:g} s, "
                f"concurrency {concurrency}; embedding model loaded in {load:.1f} s"
            )
            tasks.normalize_ideas.delay = lambda *a, **k: None  # type: ignore[method-assign]
            cpu_before = time.process_time()
            started = time.perf_counter()
            job = services.normalization_enqueue(study=study)
            if args.no_embedding:
                services.normalization_run(job=job, embed=_same_vector)
                from studies.services import job_finish

                job_finish(job=job)
            else:
                tasks.normalize_ideas(job.pk)  # the task body, as the worker runs it
            wall = time.perf_counter() - started
            cpu = time.process_time() - cpu_before
            job = JobRun.objects.get(pk=job.pk)
            proposed = Idea.objects.filter(
                study=study, normalization_status=Idea.NormalizationStatus.PROPOSED
            ).count()
            print(f"job: {job.status}, {job.message}")
            print(f"ideas with a proposed rewrite: {proposed} of {args.ideas}")
            print(f"server: {server.answered} answered, at most {server.max_in_flight} in flight")
            print(f"wall time end to end: {wall:.1f} s")
            print(f"bound ideas × latency / concurrency: {bound:.1f} s")
            print(f"over the bound: {100 * (wall / bound - 1):+.1f} % (aim: within 20 %)")
            print(
                f"process CPU during the run: {cpu:.1f} s "
                f"({1000 * cpu / max(args.ideas, 1):.0f} ms per idea, mostly the embedding check)"
            )


if __name__ == "__main__":
    main()
