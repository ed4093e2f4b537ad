"""Wall time of the full study analysis (five metrics, mixed models, 1,000 consistency
splits, bootstrap and permutation test) on si2024 and on a simulated larger study, then
the crossed mixed model alone at conference scale, engine by engine with lme4 beside.

    python bench/analysis.py [--sizes 3000] [--engine auto|sparse|statsmodels] [--starts 5]
                             [--mixed-sizes 300,3000,30000,100000]
                             [--mixed-engines statsmodels,sparse,lme4]
                             [--mixed-timeout 900] [--mixed-threads 1]
                             [--ordinal-sizes 3000] [--no-clmm]
                             [--judge-size 30000] [--judges 3] [--judge-draws 200]
    python bench/analysis.py --smoke    # every part on tiny sizes, in seconds (CI)

Prints one line per data set and engine with the time per part (target: si2024 < 5 s),
then one line per (size, engine) of the mixed model with seconds, CPU seconds, peak
memory and the log-likelihood (targets: 30,000 reviews < 20 s, 100,000 < 2 min and
4 GB).  ``--mixed-sizes ''`` skips the second table; ``bench/mixed.py`` prints it alone.

The ordinal check (cumulative-link mixed model) is then timed on si2024 (overall) and on
simulated crossed designs (``--ordinal-sizes``), beside R's ``ordinal::clmm`` (gradTol
1e-8) with the largest differences (``--no-clmm`` skips R).  Last, the human-LLM agreement
section at ``--judge-size`` reviews is timed with 0, 1 and ``--judges`` simulated judges
(noisy human means, every idea and metric; ``--judge-draws`` splits, bootstrap resamples
and permutations asked for, as ``ReportOptions``): the cost per judge is what each further
judge adds (target: at most 10 s at 30,000 reviews).  ``--judge-size 0`` skips it.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "analysis"))

METRICS = ["novelty", "excitement", "feasibility", "effectiveness", "overall"]


def si2024():
    from conftest import load_si2024_frame  # the independent reader used by the tests

    return load_si2024_frame(), ["Human", "AI", "AI_Rerank"]


def simulated(n_reviews: int):
    from studies.analysis.simulate import simulate_study

    per_condition = max(10, n_reviews // (3 * 3))
    df = simulate_study(
        n_reviewers=max(20, n_reviews // 4),
        n_ideas_per_condition=per_condition,
        reviews_per_idea=3,
        load=(2, 7),
        metrics=METRICS,
        discretize=True,
        seed=1,
    )
    df["source_idea_id"] = df["idea_id"]
    return df, ["Human", "AI", "AI_Rerank"]


def run(name: str, df, conditions, engine: str, starts: int, splits: int) -> None:
    from studies.analysis.report import ReportOptions, build_report

    options = ReportOptions(consistency_splits=splits, mixed_engine=engine, mixed_starts=starts)
    t0 = time.perf_counter()
    report = build_report(
        df, metrics=METRICS, baseline="Human", conditions=conditions, options=options
    )
    wall = time.perf_counter() - t0
    engines = sorted({f.get("engine", "?") for f in report["mixed_effects"]["fits"].values()})
    parts = ", ".join(f"{k} {v:.2f}" for k, v in report["timings"].items())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{name:<22} rows {len(df):>6}  engine {'/'.join(engines):<12} total {wall:7.2f} s  "
        f"({parts})  peak RSS {peak:.0f} MiB",
        flush=True,
    )


def ordinal_table(sizes: list[int], clmm: bool, threads: int) -> None:
    from threadpoolctl import threadpool_limits

    from studies.analysis.ordinal import fit_ordinal
    from studies.analysis.rcheck import ClmmJob, clmm_fit_many, ordinal_unavailable_reason
    from studies.analysis.simulate import simulate_study

    cases = [("si2024 overall", si2024()[0], "overall", ("reviewer_id", "source_idea_id"))]
    for size in sizes:
        df = simulate_study(
            n_reviewers=max(20, size // 4),
            n_ideas_per_condition=max(10, size // 9),
            reviews_per_idea=3,
            metrics=("overall",),
            discretize=True,
            seed=7,
        )
        cases.append((f"crossed {len(df)}", df, "overall", ("reviewer_id", "idea_id")))
    reason = ordinal_unavailable_reason() if clmm else "skipped (--no-clmm)"
    print(f"\n# ordinal check: ours ({threads or 'default'} BLAS threads) beside ordinal::clmm")
    for name, df, metric, groups in cases:
        with threadpool_limits(threads or None):
            t0 = time.perf_counter()
            ours = fit_ordinal(df, metric, baseline="Human", groups=groups)
            wall = time.perf_counter() - t0
        line = f"{name:<22} rows {ours.n_obs:>6}  ours {wall:7.2f} s  loglik {ours.loglik:.4f}"
        if reason is None:
            ref = clmm_fit_many(df, [ClmmJob(metric, "Human", groups=groups)])[0]
            ours_rows = ours.thresholds + ours.fixed
            ref_rows = ref.thresholds + ref.fixed
            coef = max(abs(a["coef"] - b["coef"]) for a, b in zip(ours_rows, ref_rows, strict=True))
            sd = max(abs(ours.sd[g] - v) for g, v in ref.sd.items())
            line += (
                f"  clmm {ref.fit_seconds:7.2f} s  max |coef diff| {coef:.1e}  "
                f"max |SD diff| {sd:.1e}  |loglik diff| {abs(ours.loglik - ref.loglik):.1e}"
            )
        else:
            line += f"  clmm: {reason}"
        print(line, flush=True)


def agreement_per_judge(size: int, n_judges: int, draws: int) -> None:
    import numpy as np

    from studies.analysis.consistency import inter_reviewer_consistency
    from studies.analysis.frame import unique_reviews
    from studies.analysis.report import JudgeData, ReportOptions, build_agreement
    from studies.analysis.simulate import simulate_study
    from studies.analysis.threads import blas_thread_counts

    df = simulate_study(
        n_reviewers=max(20, size // 4),
        n_ideas_per_condition=max(10, size // 9),
        reviews_per_idea=3,
        metrics=METRICS,
        discretize=True,
        seed=1,
    )
    means = unique_reviews(df).groupby("idea_id")[METRICS].mean()
    rng = np.random.default_rng(0)
    judges = []
    for k in range(n_judges):
        s = means.stack().rename("score").reset_index().rename(columns={"level_1": "metric"})
        s["score"] = s["score"] + rng.normal(0, 0.5 + k, len(s))
        judges.append(
            JudgeData(
                key=f"sim{k}", label=f"judge {k}", method="direct", baseline=False,
                model="simulated", judge_scores=s,
            )
        )  # fmt: skip
    options = ReportOptions(
        agreement_splits=draws, agreement_bootstrap=draws, agreement_permutations=draws
    )
    # As in the report: the consistency section has every metric's value (with a CI for
    # the headline only), so agreement adds CIs for the judged metrics once, then judges.
    consistency: dict = {"available": True, "metric": "overall", "by_metric": {}}
    for m in METRICS:
        consistency["by_metric"][m] = {
            "all": inter_reviewer_consistency(
                df, m, rows="all", n_splits=100, n_bootstrap=0, n_permutations=0
            ).as_dict()
        }
    print(
        f"\n# agreement at {len(df)} reviews, {draws} draws asked per judge and metric, "
        f"BLAS threads {blas_thread_counts()}"
    )
    times = []
    for n in sorted({0, 1, n_judges}):
        t0, c0 = time.perf_counter(), time.process_time()
        build_agreement(
            df, metrics=METRICS, judges=judges[:n], human_pairs=None,
            consistency=consistency, options=options,
        )  # fmt: skip
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        times.append((n, cpu))
        print(f"judges {n}: agreement {wall:7.2f} s wall, {cpu:7.2f} s CPU", flush=True)
    by_n = dict(times)  # CPU seconds: a busy machine inflates wall time, not CPU time
    if 1 in by_n and n_judges > 1:
        first = by_n[1] - by_n[0]
        further = (by_n[n_judges] - by_n[1]) / (n_judges - 1)
        print(
            f"first judge adds {first:.2f} CPU s (incl. the judged metrics' ceiling CIs, "
            f"computed once for all judges); each further judge {further:.2f} CPU s "
            "(target <= 10 s)",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--sizes", default="3000", help="simulated study sizes (reviews), comma-separated"
    )
    parser.add_argument("--engine", default="auto", choices=["auto", "sparse", "statsmodels"])
    parser.add_argument(
        "--starts", type=int, default=3, help="mixed-model starts (the report default)"
    )
    parser.add_argument("--splits", type=int, default=1000)
    parser.add_argument("--mixed-sizes", default="300,3000,30000,100000")
    parser.add_argument("--mixed-engines", default="statsmodels,sparse,lme4")
    parser.add_argument("--mixed-timeout", type=float, default=900.0, help="seconds per fit")
    parser.add_argument("--mixed-threads", type=int, default=1, help="BLAS threads (0: all)")
    parser.add_argument("--ordinal-sizes", default="3000", help="crossed designs (reviews)")
    parser.add_argument("--no-clmm", action="store_true", help="do not run R's clmm")
    parser.add_argument("--judge-size", type=int, default=30000)
    parser.add_argument("--judges", type=int, default=3)
    parser.add_argument("--judge-draws", type=int, default=200)
    parser.add_argument("--skip-report", action="store_true", help="skip the full analyses")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="every part on tiny sizes (si2024 with 20 splits, 150 reviews, a 60-review ordinal check, 2 judges): seconds",
    )
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.starts, args.splits = "150", 1, 20
        args.mixed_sizes, args.mixed_timeout, args.ordinal_sizes = "150", 120.0, "60"
        args.judge_size, args.judges, args.judge_draws = 300, 2, 20
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ideareview.settings")
    django.setup()
    if not args.skip_report:
        df, conds = si2024()
        run("si2024", df, conds, args.engine, args.starts, args.splits)
        for size in [int(s) for s in args.sizes.split(",") if s]:
            df, conds = simulated(size)
            run(f"simulated {size}", df, conds, args.engine, args.starts, args.splits)
    mixed_sizes = [int(s) for s in args.mixed_sizes.split(",") if s]
    if mixed_sizes:
        sys.path.insert(0, str(ROOT / "bench"))
        from mixed import run_table

        print("\n# crossed mixed model alone (bench/mixed.py), one fresh process per fit")
        run_table(
            mixed_sizes,
            [e for e in args.mixed_engines.split(",") if e],
            timeout=args.mixed_timeout,
            threads=args.mixed_threads,
        )
    ordinal_sizes = [int(s) for s in args.ordinal_sizes.split(",") if s]
    ordinal_table(ordinal_sizes, not args.no_clmm, args.mixed_threads)
    if args.judge_size > 0:
        from threadpoolctl import threadpool_limits

        # As the report does (ANALYSIS_BLAS_THREADS): unlimited BLAS threads spin on a busy
        # machine and inflate the CPU seconds this table reports.
        with threadpool_limits(args.mixed_threads or None):
            agreement_per_judge(args.judge_size, args.judges, args.judge_draws)


if __name__ == "__main__":
    main()
