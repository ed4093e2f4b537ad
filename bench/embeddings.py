"""How long the duplicate check takes: model load, embedding throughput, pair search.

Prints its figures; it is not a timed test. Run from the repository root:

    .venv/bin/python bench/embeddings.py [--long 64] [--short 256] [--ideas 15000]

Embedding is measured on a sample and extrapolated to ``--ideas``; the pair search runs
on the full ``--ideas`` count with vectors shaped like real ones (clusters of near
copies planted among random directions).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# The embedder reads its settings (threads, model folder) from Django's settings.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ideareview.settings")

from studies.embeddings import DIMENSION, _model, embed, near_duplicates  # noqa: E402

WORDS = [
    "model",
    "prompt",
    "retrieval",
    "claim",
    "language",
    "dataset",
    "answer",
    "reasoning",
    "verify",
    "translate",
    "benchmark",
    "error",
    "uncertainty",
    "calibration",
    "code",
    "test",
    "bias",
    "safety",
    "math",
    "step",
    "plan",
    "baseline",
    "method",
    "evidence",
    "sample",
    "agreement",
    "accuracy",
    "human",
    "expert",
    "novel",
    "idea",
]


def synthetic_texts(n: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(words)) + "." for _ in range(n)]


def clustered_vectors(n: int, seed: int = 0) -> tuple[np.ndarray, int]:
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, DIMENSION)).astype(np.float32)
    planted = n // 100
    src = rng.integers(0, n, size=planted)
    dst = rng.integers(0, n, size=planted)
    vecs[dst] = vecs[src] + rng.normal(scale=0.3, size=(planted, DIMENSION)).astype(np.float32)
    return vecs, planted


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def timed_cpu(fn, *args, **kwargs):
    """Wall and CPU seconds: on a shared machine the CPU figure is the one to compare."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", type=int, default=64, help="proposals of ~900 words to embed")
    parser.add_argument("--short", type=int, default=256, help="seed ideas of ~60 words")
    parser.add_argument("--ideas", type=int, default=15000, help="size of the pair search")
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument(
        "--smoke", action="store_true", help="4 proposals, 8 seed ideas, 600 vectors: seconds"
    )
    args = parser.parse_args()
    if args.smoke:
        args.long, args.short, args.ideas, args.block = 4, 8, 600, 256

    threads = os.environ.get("IDEAREVIEW_EMBEDDING_THREADS", "1")
    print(f"cores {os.cpu_count()}, BLAS threads for embedding {threads}")
    _, load, load_cpu = timed_cpu(_model)
    print(
        f"model load (tokenizer + safetensors, first call): {load:.2f} s wall, {load_cpu:.2f} s CPU"
    )

    if args.long:
        texts = synthetic_texts(args.long, 900, seed=1)
        _, secs, cpu = timed_cpu(embed, texts)
        per = cpu / args.long
        print(
            f"embed {args.long} proposals of 900 words (cut at 256 word pieces): "
            f"{secs:.1f} s wall, {cpu:.1f} s CPU, {per * 1000:.0f} ms CPU each -> "
            f"{args.ideas} ideas ~ {per * args.ideas / 60:.1f} CPU min"
        )
    if args.short:
        texts = synthetic_texts(args.short, 60, seed=2)
        _, secs, cpu = timed_cpu(embed, texts)
        per = cpu / args.short
        print(
            f"embed {args.short} seed ideas of 60 words: {secs:.1f} s wall, {cpu:.1f} s CPU, "
            f"{per * 1000:.1f} ms CPU each -> {args.ideas} ideas ~ "
            f"{per * args.ideas / 60:.1f} CPU min"
        )

    vecs, planted = clustered_vectors(args.ideas)
    ids = list(range(args.ideas))
    groups = ["Human" if i % 3 == 0 else "AI" for i in ids]
    tracemalloc.start()
    pairs, secs, cpu = timed_cpu(near_duplicates, ids, vecs, 0.8, groups, block=args.block)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    full = args.ideas * args.ideas * 4 / 2**20
    print(
        f"near_duplicates over {args.ideas} vectors (block {args.block}): {secs:.1f} s wall, "
        f"{cpu:.1f} s CPU, "
        f"peak {peak / 2**20:.0f} MiB (the full matrix would be {full:.0f} MiB), "
        f"{len(pairs)} pairs found for {planted} planted"
    )


if __name__ == "__main__":
    main()
