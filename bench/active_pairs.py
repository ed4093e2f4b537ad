"""Active pair selection for Bradley–Terry against random pairing: pairs to a stated precision.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/active_pairs.py            # 10 seeds
    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/active_pairs.py --smoke    # seconds

A synthetic world per seed: `--ideas` ideas with true log-strengths θ ~ N(0, s²), and a
judge whose verdict on a pair is a Bernoulli draw. "bt" (default): P(i beats j) =
σ(θ_i − θ_j), with s chosen so that the truly better idea wins 80 % of random pairs on
average (an 80 %-accurate judge); "flat": the better idea wins with probability 0.8
whatever the gap (Bradley–Terry is then the wrong model, as it may be for a real judge).

Both designs send `--batch` pairs at a time and refit after each batch: "random" draws
the batch uniformly from the pairs not yet judged twice, `--random-draws` times per world
(its own pairs and verdict draws each time; the first draw is the one earlier versions of
this bench made alone), so the denominator is random pairing's expected need on each
world rather than one draw's luck; "active" asks
`judging.methods.active_pairs.select_pairs` (the pairs expected to shrink the mean
interval width most) with the prior λ estimated from the outcomes so far
(`bradley_terry.estimate_ridge`). Every fit, for both, uses that empirical-Bayes prior.

The precision measure (docs/judge-reliability.md, fixed before the runs): **Kendall τ-b
between the fitted and the true strengths reaching `--tau` (0.85)**. A design's "pairs
needed" is where its τ curve, averaged over the seeds at each batch boundary, first
reaches the target (linear interpolation between boundaries). Each seed's first crossing
is printed for both designs side by side (the same world and stopping rule; random
pairing's crossing is that of its τ curve averaged over its draws), with their ratio and
the median and mean over the seeds. The mean width of the 95 % intervals and their
coverage of the true centred strengths are printed at that point too: a design may not
buy τ with intervals that stop covering.

A secondary measure, printed before the last line and named as such: the pairs each
design needs for its seed-mean interval width to fall to the width random pairing has
where it reaches the τ target ("the same interval width"). It was added after the primary
measure's runs; the last line stays on τ.

The last line is `active pairs @N ideas: A vs random R (ratio X)`; the target is
X ≤ 0.65.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.stats import kendalltau, norm

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from judging.methods.active_pairs import (  # noqa: E402
    CRITERIA,
    centred_se,
    mean_interval_width,
    random_pairs,
    select_pairs,
)
from judging.methods.bradley_terry import estimate_ridge, fit_bradley_terry  # noqa: E402

TARGET_RATIO = 0.65


def spread_for_accuracy(accuracy: float) -> float:
    """s with E[σ(|θ_i − θ_j|)] = accuracy for θ ~ N(0, s²): the gap is N(0, 2s²)."""

    def mean_accuracy(s: float) -> float:
        sd = s * math.sqrt(2.0)
        half = quad(lambda g: norm.pdf(g, scale=sd) / (1.0 + math.exp(-g)), 0.0, np.inf)[0]
        return 2.0 * half

    return float(brentq(lambda s: mean_accuracy(s) - accuracy, 1e-3, 50.0))


@dataclass(frozen=True)
class Point:
    pairs: int
    tau: float
    width: float
    coverage: float
    ridge: float


def run(
    design: str,
    seed: int,
    *,
    ideas: int,
    batch: int,
    max_pairs: int,
    noise: str,
    spread: float,
    criterion: str = "width",
    draw: int = 0,
) -> list[Point]:
    """One design on one seeded world: a Point after every batch. `draw` > 0 gives random
    pairing other pairs and other verdict draws on the same world."""
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal(ideas) * spread
    verdicts = np.random.default_rng([seed, 1] if draw == 0 else [seed, 1, draw])
    pair_seed: int | str = seed if draw == 0 else f"{seed}:{draw}"
    names = list(range(ideas))
    games: list[tuple[int, int, float]] = []
    ridge = 1.0
    points: list[Point] = []
    while len(games) < max_pairs:
        if design == "active":
            pairs = select_pairs(games, names, batch, ridge=ridge, seed=seed, criterion=criterion)
        else:
            pairs = random_pairs(games, names, batch, seed=pair_seed)
        if not pairs:
            break
        for a, b in pairs:
            if noise == "bt":
                p = 1.0 / (1.0 + math.exp(-(theta[a] - theta[b])))
            else:
                p = 0.8 if theta[a] > theta[b] else 0.2
            games.append((a, b, float(verdicts.random() < p)))
        ridge = estimate_ridge(games, names)
        fit = fit_bradley_terry(games, names, ridge=ridge)
        est = fit.theta - fit.theta.mean()
        truth = theta - theta.mean()
        half = norm.ppf(0.975) * centred_se(fit)
        points.append(
            Point(
                pairs=len(games),
                tau=float(kendalltau(est, truth).statistic),
                width=mean_interval_width(fit),
                coverage=float(np.mean(np.abs(est - truth) <= half)),
                ridge=ridge,
            )
        )
    return points


def crossing(pairs: Sequence[float], values: Sequence[float], target: float) -> float:
    """The first x where the piecewise-linear curve reaches `target` (inf if never)."""
    prev_x, prev_y = 0.0, -math.inf
    for x, y in zip(pairs, values, strict=True):
        if y >= target:
            if math.isinf(prev_y):
                return x
            return prev_x + (x - prev_x) * (target - prev_y) / (y - prev_y)
        prev_x, prev_y = x, y
    return math.inf


@dataclass(frozen=True)
class DesignResult:
    design: str
    needed: float
    """Pairs where the seed-averaged τ curve reaches the target."""
    per_seed: list[float]
    width: float
    coverage: float
    tau_at_random: float
    """Mean τ at the random design's `needed` (filled for the active design)."""


def pairs_to_width(runs: Sequence[list[Point]], width: float) -> float:
    """Pairs where the seed-mean width curve falls to `width` after its peak (inf if
    never). With few games the estimated prior is tight and the intervals narrow, so the
    curve rises before it falls; only the fall measures precision."""
    length = min(len(points) for points in runs)
    pairs = [runs[0][i].pairs for i in range(length)]
    mean_width = [statistics.fmean(points[i].width for points in runs) for i in range(length)]
    peak = max(range(length), key=mean_width.__getitem__)
    return crossing(pairs[peak:], [-w for w in mean_width[peak:]], -width)


def _at(runs: Sequence[list[Point]], pairs: float, field: str) -> float:
    """The seed mean of `field` at the first batch boundary at or past `pairs`."""
    values = []
    for points in runs:
        point = next((p for p in points if p.pairs >= pairs), points[-1])
        values.append(getattr(point, field))
    return statistics.fmean(values)


def mean_tau_curve(runs: Sequence[list[Point]]) -> tuple[list[int], list[float]]:
    """Batch boundaries and the mean τ over `runs` at each (up to the shortest run)."""
    length = min(len(points) for points in runs)
    pairs = [runs[0][i].pairs for i in range(length)]
    return pairs, [statistics.fmean(points[i].tau for points in runs) for i in range(length)]


def summarise(design: str, by_seed: Sequence[Sequence[list[Point]]], target: float) -> DesignResult:
    """`by_seed`: each world's runs (one per draw)."""
    runs = [points for draws in by_seed for points in draws]
    pairs, mean_tau = mean_tau_curve(runs)
    needed = crossing(pairs, mean_tau, target)
    per_seed = [crossing(*mean_tau_curve(draws), target) for draws in by_seed]
    at = needed if math.isfinite(needed) else pairs[-1]
    return DesignResult(
        design=design,
        needed=needed,
        per_seed=per_seed,
        width=_at(runs, at, "width"),
        coverage=_at(runs, at, "coverage"),
        tau_at_random=math.nan,
    )


def _spread(values: Sequence[float]) -> str:
    """Median and mean of the finite values, and how many never reached the target."""
    finite = [x for x in values if math.isfinite(x)]
    if not finite:
        return "none reached the target"
    missed = len(values) - len(finite)
    tail = f", {missed} never reached it" if missed else ""
    return f"median {statistics.median(finite):.0f}, mean {statistics.fmean(finite):.0f}{tail}"


def print_per_seed(seeds: Iterable[int], random: Sequence[float], active: Sequence[float]) -> None:
    """Each seed's first crossing of the τ target for both designs (the same world, judge
    draws and stopping rule), their ratio, and the median and mean over the seeds."""
    print(f"\n{'seed':>5}  {'random':>7}  {'active':>7}  {'ratio':>6}")
    ratios = []
    for seed, r, a in zip(seeds, random, active, strict=True):
        ratio = a / r if math.isfinite(r) and math.isfinite(a) else math.nan
        ratios.append(ratio)
        print(f"{seed:>5}  {r:>7.0f}  {a:>7.0f}  {ratio:>6.2f}")
    print(f"per-seed pairs to τ: random {_spread(random)}; active {_spread(active)}")
    finite = [x for x in ratios if math.isfinite(x)]
    if finite:
        print(
            f"per-seed ratio: median {statistics.median(finite):.2f}, "
            f"mean {statistics.fmean(finite):.2f}"
        )


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--ideas", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--batch", type=int, default=25, help="pairs chosen and judged at once")
    ap.add_argument("--accuracy", type=float, default=0.8)
    ap.add_argument("--tau", type=float, default=0.85, help="the precision target")
    ap.add_argument("--max-pairs", type=int, default=3600)
    ap.add_argument("--noise", choices=["bt", "flat"], default="bt")
    ap.add_argument(
        "--criterion", choices=CRITERIA, default="width", help="what the active design shrinks"
    )
    ap.add_argument("--random-draws", type=int, default=5, help="random pairing's runs per world")
    ap.add_argument("--smoke", action="store_true", help="20 ideas, 2 seeds: seconds")
    args = ap.parse_args(argv)
    if args.smoke:
        args.ideas, args.seeds, args.batch, args.tau, args.max_pairs = 20, 2, 10, 0.7, 300
        args.random_draws = 2
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        print("note: OPENBLAS_NUM_THREADS=1 is much faster on a shared machine")
    spread = spread_for_accuracy(args.accuracy)
    started = time.perf_counter()
    print(
        f"{args.ideas} ideas, θ ~ N(0, {spread:.3f}²) (the better idea wins "
        f"{args.accuracy:.0%} of random pairs), judge '{args.noise}', batches of {args.batch}, "
        f"seeds {args.seed}..{args.seed + args.seeds - 1}, precision: Kendall τ-b ≥ {args.tau}, "
        f"active criterion '{args.criterion}', random pairing drawn {args.random_draws} times "
        "per world"
    )
    results: dict[str, DesignResult] = {}
    all_runs: dict[str, list[list[Point]]] = {}
    by_seed: dict[str, list[list[list[Point]]]] = {}
    for design in ("random", "active"):
        by_seed[design] = []
        for seed in range(args.seed, args.seed + args.seeds):
            draws = []
            for draw in range(args.random_draws if design == "random" else 1):
                points = run(
                    design,
                    seed,
                    ideas=args.ideas,
                    batch=args.batch,
                    max_pairs=args.max_pairs,
                    noise=args.noise,
                    spread=spread,
                    criterion=args.criterion,
                    draw=draw,
                )
                draws.append(points)
                print(
                    f"  {design} seed {seed}{f' draw {draw}' if design == 'random' else ''}: "
                    f"τ {points[-1].tau:.3f} after {points[-1].pairs} pairs "
                    f"({time.perf_counter() - started:.0f} s)",
                    flush=True,
                )
            by_seed[design].append(draws)
        all_runs[design] = [points for draws in by_seed[design] for points in draws]
        results[design] = summarise(design, by_seed[design], args.tau)
    print(
        f"\n{'design':>7}  {'pairs to τ':>10}  {'per seed (min–max)':>19}  {'width':>6}  {'cover':>6}"
    )
    for r in results.values():
        finite = [x for x in r.per_seed if math.isfinite(x)]
        span = f"{min(finite):.0f}–{max(finite):.0f}" if finite else "—"
        print(f"{r.design:>7}  {r.needed:>10.0f}  {span:>19}  {r.width:>6.3f}  {r.coverage:>6.1%}")
    rnd, act = results["random"], results["active"]
    if args.random_draws > 1:
        first = [draws[0] for draws in by_seed["random"]]
        single = crossing(*mean_tau_curve(first), args.tau)
        per_draw = [
            crossing(*mean_tau_curve([draws[d] for draws in by_seed["random"]]), args.tau)
            for d in range(args.random_draws)
        ]
        print(
            f"random pairing, each draw alone: {', '.join(f'{x:.0f}' for x in per_draw)} "
            f"pairs (the first draw, as this bench measured before: {single:.0f}, active "
            f"ratio {act.needed / single:.2f})"
        )
    print_per_seed(range(args.seed, args.seed + args.seeds), rnd.per_seed, act.per_seed)
    if math.isfinite(rnd.needed):
        print(
            f"τ at the random design's {rnd.needed:.0f} pairs: random "
            f"{_at(all_runs['random'], rnd.needed, 'tau'):.3f}, active "
            f"{_at(all_runs['active'], rnd.needed, 'tau'):.3f}"
        )
    if math.isfinite(rnd.needed):
        width = _at(all_runs["random"], rnd.needed, "width")
        by_width = {d: pairs_to_width(all_runs[d], width) for d in ("random", "active")}
        print(
            f"secondary, the same mean 95 % width ({width:.3f}, random's at its τ target): "
            f"random {by_width['random']:.0f}, active {by_width['active']:.0f} "
            f"(ratio {by_width['active'] / by_width['random']:.2f})"
        )
    print(f"wall time {time.perf_counter() - started:.0f} s")
    ratio = act.needed / rnd.needed if math.isfinite(rnd.needed) else math.nan
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(f"target ratio <= {TARGET_RATIO}: {verdict}")
    print(
        f"active pairs @{args.ideas} ideas: {act.needed:.0f} vs random {rnd.needed:.0f} "
        f"(ratio {ratio:.2f})"
    )


if __name__ == "__main__":
    main()
