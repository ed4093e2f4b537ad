"""Fit times and peak memory of the crossed mixed model per engine and study size.

Usage: ``python bench/mixed.py --sizes 300,3000,30000,100000 [--engines sparse,statsmodels,lme4]``

Designs follow the study protocol: 7 topics, 3 conditions, each reviewer takes two topics
and 2-7 ideas from them (30,000 reviews ~ 13,000 ideas and 7,000 reviewers).  Each
(engine, size) runs in a fresh child process so that its peak resident memory
(``ru_maxrss``, which also counts CHOLMOD's C allocations that tracemalloc cannot see) is
its own.  lme4's time is R's own ``lmer`` time, without R start-up.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STATSMODELS_MAX = 3000  # dense matrices: minutes at 3,000 rows, impractical beyond


def simulate_design(n_reviews: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n_topics = 7
    n_ideas = max(8, round(n_reviews / 2.3))
    n_rev = max(6, round(n_reviews / 4.3))
    idea_topic = rng.integers(0, n_topics, n_ideas)
    idea_cond = rng.integers(0, 3, n_ideas)
    by_topic = [np.flatnonzero(idea_topic == t) for t in range(n_topics)]
    loads = rng.integers(2, 8, n_rev)
    loads = np.maximum(1, np.round(loads * n_reviews / loads.sum())).astype(int)
    rr, ii = [], []
    for r in range(n_rev):
        pool = np.concatenate([by_topic[t] for t in rng.choice(n_topics, 2, replace=False)])
        pick = rng.choice(pool, min(loads[r], len(pool)), replace=False)
        rr.append(np.full(len(pick), r))
        ii.append(pick)
    r_arr, i_arr = np.concatenate(rr), np.concatenate(ii)
    y = (
        5
        + np.array([0.0, 0.6, 0.9])[idea_cond[i_arr]]
        + rng.normal(0, 0.3, n_topics)[idea_topic[i_arr]]
        + rng.normal(0, 0.8, n_rev)[r_arr]
        + rng.normal(0, 0.6, n_ideas)[i_arr]
        + rng.normal(0, 1.6, len(r_arr))
    )
    return pd.DataFrame(
        {
            "condition": np.array(["Human", "AI", "AI_Rerank"])[idea_cond[i_arr]],
            "topic": [f"T{t}" for t in idea_topic[i_arr]],
            "reviewer_id": [f"R{r}" for r in r_arr],
            "idea_id": [f"I{i}" for i in i_arr],
            "score": y,
        }
    )


def _child(engine: str, n: int, n_starts: int, queue: mp.Queue) -> None:
    try:
        df = simulate_design(n)
        t0 = time.perf_counter()
        if engine == "lme4":
            from studies.analysis.rcheck import lme4_fit

            res = lme4_fit(df, "score", baseline="Human")
            secs = res.fit_seconds or float("nan")
        else:
            from studies.analysis.mixed import fit_mixed

            res = fit_mixed(df, "score", baseline="Human", engine=engine, n_starts=n_starts)
            secs = time.perf_counter() - t0
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if engine == "lme4":
            peak_mb = max(peak_mb, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
        queue.put(
            {
                "engine": engine,
                "rows": res.n_obs,
                "levels": res.n_levels,
                "seconds": secs,
                "peak_mb": peak_mb,
                "loglik": res.loglik,
                "b_AI": res.term("condition[AI]")["coef"],
                "backend": res.details.get("backend", ""),
            }
        )
    except Exception as exc:  # a benchmark reports failures, it does not stop
        queue.put({"engine": engine, "rows": n, "error": f"{type(exc).__name__}: {exc}"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="300,3000,30000,100000")
    ap.add_argument("--engines", default="statsmodels,sparse,lme4")
    ap.add_argument("--starts", type=int, default=1, help="optimiser starts per fit")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per fit")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    engines = [e for e in args.engines.split(",") if e]
    if "lme4" in engines:
        from studies.analysis.rcheck import r_unavailable_reason

        if (why := r_unavailable_reason()) is not None:
            print(f"# lme4 skipped: {why}")
            engines.remove("lme4")
    ctx = mp.get_context("fork")
    print(f"{'reviews':>8} {'engine':>12} {'rows':>7} {'seconds':>9} {'peak MB':>8}  loglik / note")
    for n in sizes:
        for engine in engines:
            if engine == "statsmodels" and n > STATSMODELS_MAX:
                print(f"{n:>8} {engine:>12} {'':>7} {'skipped':>9} {'':>8}  dense: impractical")
                continue
            q: mp.Queue = ctx.Queue()
            proc = ctx.Process(target=_child, args=(engine, n, args.starts, q))
            proc.start()
            proc.join(args.timeout)
            if proc.is_alive():
                proc.terminate()
                proc.join()
                print(f"{n:>8} {engine:>12} {'':>7} {'>' + str(int(args.timeout)):>9}  timed out")
                continue
            r = q.get() if not q.empty() else {"error": "no result"}
            if "error" in r:
                print(f"{n:>8} {engine:>12} {'':>7} {'error':>9} {'':>8}  {r['error']}")
                continue
            print(
                f"{n:>8} {engine:>12} {r['rows']:>7} {r['seconds']:>9.2f} {r['peak_mb']:>8.0f}"
                f"  {r['loglik']:.4f} b_AI={r['b_AI']:.4f} {r['backend']} {r['levels']}",
                flush=True,
            )


if __name__ == "__main__":
    main()
