"""Fit times and peak memory of the crossed mixed model per engine and study size.

Usage::

    python bench/mixed.py [--sizes 300,3000,30000,100000] [--engines statsmodels,sparse,lme4]
                          [--starts 1] [--timeout 300] [--threads 1] [--reml/--ml]

Engines: ``sparse`` is :func:`studies.analysis.mixed.fit_mixed` with our engine (backend
chosen automatically); ``sparse:hybrid``, ``sparse:cholmod`` and ``sparse:splu`` call
:func:`studies.analysis.lmm_sparse.fit_lmm` with that backend forced; ``statsmodels`` is the
reference path (skipped above 3,000 rows: dense matrices); ``lme4`` is R's ``lmer`` through
:mod:`studies.analysis.rcheck` (its own fit time, without R start-up).

Designs follow the study protocol: 7 topics, 3 conditions, each reviewer takes two topics
(``--topics-per-reviewer 1``: one) and 2-7 ideas from them (30,000 reviews ~ 12,000 ideas
and 7,000 reviewers).  Each
(engine, size) runs in a fresh child process with its own process group, so that its peak
resident memory (``ru_maxrss``, which also counts C allocations and, for lme4, the R
process) is its own and a fit that exceeds ``--timeout`` seconds is killed with everything
it started: the benchmark always stops by itself.  ``cpu s`` is the CPU time of the fit
(user + system, R included), a fairer measure than wall time on a shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STATSMODELS_MAX = 3000  # dense matrices: minutes at 3,000 rows, impractical beyond


def simulate_design(n_reviews: int, seed: int = 0, topics_per_reviewer: int = 2) -> pd.DataFrame:
    """The bench's study: ``topics_per_reviewer`` = 2 crosses reviewers across the whole
    study at random (the hard case); 1 keeps every reviewer inside one topic."""
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
        chosen = rng.choice(n_topics, topics_per_reviewer, replace=False)
        pool = np.concatenate([by_topic[t] for t in chosen])
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


def _estimates(res: Any) -> dict[str, dict[str, float]]:
    """Coefficients, SEs, variance components and any Satterthwaite df, by name."""
    return {
        "coef": {r["term"]: float(r["coef"]) for r in res.fixed},
        "se": {r["term"]: float(r["se"]) for r in res.fixed},
        "var": {g: float(v) for g, v in res.variance.items()},
        "df": {r["term"]: float(r["df"]) for r in res.fixed if r.get("df") is not None},
    }


def _differences(ours: dict[str, Any], ref: dict[str, Any]) -> str:
    """Largest absolute differences from lme4 (the issue's tolerances: 1e-3 and 1e-2)."""
    parts = []
    for key in ("coef", "se", "var"):
        common = set(ours[key]) & set(ref[key])
        worst = max((abs(ours[key][t] - ref[key][t]) for t in common), default=float("nan"))
        parts.append(f"max |d {key}| {worst:.2e}")
    parts.append(f"|d loglik| {abs(ours['loglik'] - ref['loglik']):.2e}")
    common = set(ours.get("df", {})) & set(ref.get("df", {}))
    if common:  # lmerTest's tolerance in the tests: 2e-3 relative
        worst = max(abs(ours["df"][t] / ref["df"][t] - 1) for t in common)
        parts.append(f"max rel d df {worst:.2e}")
    return ", ".join(parts)


def _r_blas() -> str:
    """The BLAS R loads (CHOLMOD's supernodal factorisation inside lme4 runs on it).

    Debian's R uses the ``libblas.so.3`` alternative; to give lme4 OpenBLAS for one run
    without changing the system, install ``libopenblas0-pthread`` and set
    ``R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib:/usr/lib/x86_64-linux-gnu``.
    """
    try:
        out = subprocess.run(
            ["Rscript", "-e", "cat(sessionInfo()$BLAS)"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    return out.stdout.strip() or "unknown"


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _child(
    engine: str,
    n: int,
    n_starts: int,
    reml: bool,
    threads: int,
    topics: int,
    satt: bool,
    queue: mp.Queue,
) -> None:
    os.setpgid(0, 0)  # R and anything else we start die with us on a timeout
    try:
        if threads > 0:
            from threadpoolctl import threadpool_limits

            os.environ["OPENBLAS_NUM_THREADS"] = str(threads)  # for R's BLAS, too
            threadpool_limits(threads)
        df = simulate_design(n, topics_per_reviewer=topics)
        t0, c0 = time.perf_counter(), _cpu_seconds()
        if engine == "lme4":
            from studies.analysis.rcheck import lme4_fit

            res = lme4_fit(df, "score", baseline="Human", reml=reml, satterthwaite=satt)
            secs = res.fit_seconds or float("nan")
            row = {
                "loglik": res.loglik,
                "b_AI": res.term("condition[AI]")["coef"],
                "backend": "lmer",
                "levels": res.n_levels,
                "rows": res.n_obs,
                **_estimates(res),
            }
        elif engine.startswith("sparse:"):
            from studies.analysis.lmm_sparse import design_matrix, fit_lmm

            X, names = design_matrix(df, baseline="Human")
            fit = fit_lmm(
                df["score"].to_numpy(),
                X,
                {g: df[g] for g in ("topic", "reviewer_id", "idea_id")},
                fixed_names=names,
                reml=reml,
                n_starts=n_starts,
                backend=engine.split(":", 1)[1],
                satterthwaite=satt,
            )
            secs = time.perf_counter() - t0
            row = {
                "loglik": fit.loglik,
                "b_AI": float(fit.coef[names.index("condition[AI]")]),
                "backend": f"{fit.backend} evals={[st.n_evals for st in fit.starts]}",
                "levels": fit.n_levels,
                "rows": fit.n_obs,
                "coef": dict(zip(names, map(float, fit.coef), strict=True)),
                "se": dict(zip(names, map(float, fit.se), strict=True)),
                "var": {**fit.variances, "residual": fit.sigma2},
                "df": {} if fit.df is None else dict(zip(names, map(float, fit.df), strict=True)),
            }
        else:
            from studies.analysis.mixed import fit_mixed

            res = fit_mixed(
                df,
                "score",
                baseline="Human",
                engine=engine,
                n_starts=n_starts,
                reml=reml,
                satterthwaite=satt,
            )
            secs = time.perf_counter() - t0
            row = {
                "loglik": res.loglik,
                "b_AI": res.term("condition[AI]")["coef"],
                "backend": (
                    f"{res.details.get('backend', '')} evals={res.details.get('evaluations', '')}"
                ),
                "levels": res.n_levels,
                "rows": res.n_obs,
                **_estimates(res),
            }
        cpu = _cpu_seconds() - c0
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        peak_mb = max(peak_mb, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
        queue.put({"engine": engine, "seconds": secs, "cpu": cpu, "peak_mb": peak_mb, **row})
    except Exception as exc:  # a benchmark reports failures, it does not stop
        queue.put({"engine": engine, "rows": n, "error": f"{type(exc).__name__}: {exc}"})


def run_table(
    sizes: list[int],
    engines: list[str],
    *,
    starts: int = 1,
    timeout: float = 300.0,
    threads: int = 1,
    reml: bool = True,
    topics_per_reviewer: int = 2,
    satterthwaite: bool = False,
) -> None:
    """Print one line per (size, engine): fit time, CPU, peak memory, log-likelihood.

    With ``satterthwaite`` the sparse engine also computes Satterthwaite df and lme4 runs
    through lmerTest, so both times include them and the df are compared."""
    engines = list(engines)
    if "lme4" in engines:
        from studies.analysis.rcheck import r_unavailable_reason

        if (why := r_unavailable_reason()) is not None:
            print(f"# lme4 skipped: {why}")
            engines.remove("lme4")
        else:
            print(f"# lme4's BLAS: {_r_blas()}")
    ctx = mp.get_context("fork")
    print(
        f"# {'REML' if reml else 'ML'}, {starts} start(s), "
        f"{threads or 'default'} BLAS thread(s), timeout {timeout:g} s per fit, "
        f"reviewers in {topics_per_reviewer} of 7 topics"
        + (", Satterthwaite df (lmerTest for lme4)" if satterthwaite else "")
    )
    print(
        f"{'reviews':>8} {'engine':>15} {'rows':>7} {'seconds':>9} {'cpu s':>8} {'peak MB':>8}"
        "  loglik / note"
    )
    for n in sizes:
        done: dict[str, dict[str, Any]] = {}
        for engine in engines:
            if engine == "statsmodels" and n > STATSMODELS_MAX:
                print(
                    f"{n:>8} {engine:>15} {'':>7} {'skipped':>9} {'':>8} {'':>8}  dense: impractical"
                )
                continue
            q: mp.Queue = ctx.Queue()
            proc = ctx.Process(
                target=_child,
                args=(engine, n, starts, reml, threads, topics_per_reviewer, satterthwaite, q),
            )
            proc.start()
            proc.join(timeout)
            if proc.is_alive():
                assert proc.pid is not None  # started above
                with contextlib.suppress(ProcessLookupError):  # it may have just finished
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.join()
                print(
                    f"{n:>8} {engine:>15} {'':>7} {'>' + format(timeout, 'g'):>9} "
                    f"{'':>8} {'':>8}  timed out (killed)",
                    flush=True,
                )
                continue
            r = q.get() if not q.empty() else {"error": "no result"}
            if "error" in r:
                print(f"{n:>8} {engine:>15} {'':>7} {'error':>9} {'':>8} {'':>8}  {r['error']}")
                continue
            print(
                f"{n:>8} {engine:>15} {r['rows']:>7} {r['seconds']:>9.2f} {r['cpu']:>8.2f} "
                f"{r['peak_mb']:>8.0f}  {r['loglik']:.4f} b_AI={r['b_AI']:.5f} {r['backend']} "
                f"{r['levels']}",
                flush=True,
            )
            done[engine] = r
        if "lme4" in done:
            for engine, r in done.items():
                if engine != "lme4" and "coef" in r:
                    print(f"{n:>8} {engine + ' vs lme4':>24}  {_differences(r, done['lme4'])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="300,3000,30000,100000")
    ap.add_argument("--engines", default="statsmodels,sparse,lme4")
    ap.add_argument("--starts", type=int, default=1, help="optimiser starts per fit")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per fit")
    ap.add_argument(
        "--threads", type=int, default=1, help="BLAS threads per fit (0: library default)"
    )
    ap.add_argument("--ml", action="store_true", help="fit by ML instead of REML")
    ap.add_argument(
        "--topics-per-reviewer",
        type=int,
        default=2,
        choices=[1, 2],
        help="2: reviewers cross the study at random (default, the hard case); 1: each "
        "reviewer stays within one topic",
    )
    ap.add_argument(
        "--satterthwaite",
        action="store_true",
        help="time the sparse engine with Satterthwaite df and lme4 through lmerTest, and "
        "compare the df",
    )
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="150 reviews, every engine, with Satterthwaite df: seconds",
    )
    args = ap.parse_args()
    if args.smoke:
        args.sizes, args.timeout, args.satterthwaite = "150", 120.0, True
    run_table(
        [int(s) for s in args.sizes.split(",") if s],
        [e for e in args.engines.split(",") if e],
        starts=args.starts,
        timeout=args.timeout,
        threads=args.threads,
        reml=not args.ml,
        topics_per_reviewer=args.topics_per_reviewer,
        satterthwaite=args.satterthwaite,
    )


if __name__ == "__main__":
    main()
