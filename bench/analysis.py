"""Wall time of the full study analysis (five metrics, mixed models, 1,000 consistency
splits, bootstrap and permutation test) on si2024 and on a simulated larger study, then
the crossed mixed model alone at conference scale, engine by engine with lme4 beside.

    python bench/analysis.py [--sizes 3000] [--engine auto|sparse|statsmodels] [--starts 5]
                             [--mixed-sizes 300,3000,30000,100000]
                             [--mixed-engines statsmodels,sparse,lme4]
                             [--mixed-timeout 900] [--mixed-threads 1]

Prints one line per data set and engine with the time per part (target: si2024 < 5 s),
then one line per (size, engine) of the mixed model with seconds, CPU seconds, peak
memory and the log-likelihood (targets: 30,000 reviews < 20 s, 100,000 < 2 min and
4 GB).  ``--mixed-sizes ''`` skips the second table; ``bench/mixed.py`` prints it alone.
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
    args = parser.parse_args()
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ideareview.settings")
    django.setup()
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


if __name__ == "__main__":
    main()
