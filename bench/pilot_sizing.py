"""How well a small pilot sizes a study: the acceptance figures of `studies/analysis/pilot.py`.

    python bench/pilot_sizing.py [--seeds 20] [--boot 200] [--reps 400] [--tests by_idea]
                                 [--effect-modes given,estimated] [--fit-reps 200] [--smoke]

For each test and each way of choosing the effect, ``--seeds`` pilots of 20 reviewers and
40 ideas (20 per condition, 3 reviews each, Si et al.-like variances: topic 0.05, idea
0.41, reviewer 0.8, residual 1.9; effect 0.5) are sized for power 0.8 at alpha 0.05
(two-sided), each with ``--boot`` bootstrap pilots and a 90 % interval. Each line prints
the recommended size (reviews) and its interval; the summary prints the median size over
the size the true model gives (same machinery, same draws) and the share of intervals
that cover it. The acceptance asks for a median within 20 % and a coverage of at least
80 % with the effect given (``given``: the effect to detect is known, the variance
components come from the pilot); ``estimated`` also takes the effect from the pilot.

Last, the mixed model's power as the sizing computes it (GLS with the variance components
known, Wald z) is compared with the rejection rate of the real fit (`fit_mixed`, which
estimates them) on ``--fit-reps`` simulated studies of the true model's recommended size.

``--smoke`` runs 2 pilots with 10 bootstrap pilots and 4 fits: seconds, not figures.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TRUE = {"var_topic": 0.05, "var_idea": 0.41, "var_reviewer": 0.8, "var_residual": 1.9}
EFFECT = 0.5


def pilot(seed: int):
    from studies.analysis.simulate import simulate_study

    return simulate_study(
        n_reviewers=20, n_ideas_per_condition=20, reviews_per_idea=3, load=(6, 6), n_topics=4,
        conditions={"Human": 0.0, "AI": EFFECT}, seed=seed, **TRUE,
    )  # fmt: skip


def acceptance(test: str, mode: str, args: argparse.Namespace) -> None:
    from studies.analysis.pilot import PrimaryHypothesis, size_for_model, size_from_pilot
    from studies.analysis.sizing import PowerEngine, ScoreModel

    engine = PowerEngine(test, n_reps=args.reps)
    truth, _ = size_for_model(
        ScoreModel(**TRUE, effect=EFFECT), test=test, alpha=0.05, load=6, n_topics=4,
        engine=engine,
    )  # fmt: skip
    assert truth is not None
    print(
        f"\n{test}, effect {mode}: true size {truth.reviews:.0f} reviews "
        f"({truth.reviews_per_idea} per idea, {truth.ideas:.1f} ideas per condition)",
        flush=True,
    )
    sizes, covered, beyond, cpu = [], [], [], []
    for s in range(args.seeds):
        t0 = time.process_time()
        res = size_from_pilot(
            pilot(100 + s), PrimaryHypothesis("overall", test, "AI", "Human"), alpha=0.05,
            effect=EFFECT if mode == "given" else None, n_boot=args.boot, n_starts=1,
            curve_points=0, engine=engine,
        )  # fmt: skip
        cpu.append(time.process_time() - t0)
        lo, hi = res.interval
        sizes.append(res.size)
        covered.append(lo <= truth.reviews <= hi)
        beyond.append(float(np.isinf(res.boot_sizes).mean()))
        shape = res.design.reviews_per_idea if res.design else "-"
        print(
            f"  pilot {s:>2}: size {res.size:8.0f} ({shape} per idea)  interval "
            f"[{lo:6.0f}, {hi:6.0f}]  {'covers' if covered[-1] else 'misses'}  "
            f"pilot effect {res.estimate.model.effect:+.2f}  cpu {cpu[-1]:.1f} s",
            flush=True,
        )
    ratio = np.median(sizes) / truth.reviews
    print(
        f"  median size / true size = {ratio:.3f} (acceptance: within 0.8-1.2); coverage "
        f"{np.mean(covered):.0%} of {args.seeds} (acceptance: >= 80 %); bootstrap pilots "
        f"beyond the cap {np.mean(beyond):.1%}; cpu per pilot {np.mean(cpu):.1f} s",
        flush=True,
    )


def mixed_against_fits(args: argparse.Namespace) -> None:
    from studies.analysis.mixed import fit_mixed
    from studies.analysis.pilot import size_for_model
    from studies.analysis.simulate import simulate_study
    from studies.analysis.sizing import PowerEngine, ScoreModel

    engine = PowerEngine("mixed", n_layouts=8)
    model = ScoreModel(**TRUE, effect=EFFECT)
    best, _ = size_for_model(model, test="mixed", alpha=0.05, load=6, n_topics=4, engine=engine)
    assert best is not None and best.design is not None
    d = best.design
    computed = engine.power(d, model, alpha=0.05, alternative="two-sided")
    rejected = valid = 0
    t0 = time.process_time()
    for rep in range(args.fit_reps):
        df = simulate_study(
            n_reviewers=d.n_reviewers, n_ideas_per_condition=d.ideas_per_condition,
            reviews_per_idea=d.reviews_per_idea,
            load=(max(1, min(d.load, d.n_reviews // d.n_reviewers)), d.load),
            n_topics=d.n_topics, conditions={"Human": 0.0, "AI": EFFECT}, seed=5000 + rep,
            **TRUE,
        )  # fmt: skip
        try:
            fit = fit_mixed(df, "overall", baseline="Human", n_starts=1, satterthwaite=False)
        except ValueError:
            continue
        valid += 1
        rejected += fit.term("condition[AI]")["p"] < 0.05
    share = rejected / max(valid, 1)
    se = math.sqrt(share * (1 - share) / max(valid, 1))
    print(
        f"\nmixed model at {d.ideas_per_condition} ideas per condition, {d.reviews_per_idea} "
        f"per idea, {d.n_reviewers} reviewers: computed Wald power {computed:.3f}; real fits "
        f"reject in {share:.3f} ± {se:.3f} of {valid} studies "
        f"({(time.process_time() - t0) / max(valid, 1):.2f} s cpu per fit)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--boot", type=int, default=200)
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--tests", default="by_idea")
    parser.add_argument("--effect-modes", default="given,estimated")
    parser.add_argument("--fit-reps", type=int, default=200)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.seeds, args.boot, args.reps, args.fit_reps = 2, 8, 60, 2
    # Import everything first: threadpoolctl limits only the BLAS libraries already loaded,
    # and scipy loads its own with scipy.linalg.
    import studies.analysis.mixed
    import studies.analysis.pilot  # noqa: F401
    from studies.analysis.threads import blas_threads

    with blas_threads(1):
        for test in filter(None, args.tests.split(",")):
            for mode in filter(None, args.effect_modes.split(",")):
                acceptance(test, mode, args)
        if args.fit_reps:
            mixed_against_fits(args)


if __name__ == "__main__":
    main()
