"""The Elo simulation (bench/elo_convergence.py): quality rises with the judge's accuracy.

Seeded and paired (the same worlds and draws for every accuracy), so the comparisons are
deterministic; the margins below are a fraction of the gaps the defaults produce, and the
absolute bounds fail if the Elo update loses its direction, its step size or its clamp.
"""

from __future__ import annotations

import importlib.util
import math
import random
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "elo_convergence.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_elo_convergence", _PATH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


sim = _load()
WORLD = sim.World(targets=80, corpus=400, references=50)
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def by_accuracy():
    return {s.accuracy: s for s in sim.sweep(WORLD, (1.0, 0.9, 0.7), reps=len(SEEDS))}


def test_a_perfect_judge_recovers_the_true_scores_closely(by_accuracy):
    perfect = by_accuracy[1.0]
    start_mae, start_rho = perfect.start
    assert perfect.mae[0] < 0.32
    assert perfect.spearman[0] > 0.93
    assert perfect.kendall[0] > 0.78
    # Elo, not the starting prior, carries the information.
    assert start_rho[0] < 0.3
    assert perfect.mae[0] < 0.5 * start_mae[0]


def test_quality_falls_monotonically_with_judge_accuracy(by_accuracy):
    best, mid, worst = by_accuracy[1.0], by_accuracy[0.9], by_accuracy[0.7]
    assert best.mae[0] + 0.08 < worst.mae[0]
    assert best.spearman[0] > worst.spearman[0] + 0.05
    assert best.kendall[0] > worst.kendall[0] + 0.08
    assert best.mae[0] <= mid.mae[0] + 0.01 <= worst.mae[0]
    assert best.kendall[0] >= mid.kendall[0] - 0.01 >= worst.kendall[0]
    # Per seed, not only on average.
    for b, w in zip(best.runs, worst.runs, strict=True):
        assert b.mae < w.mae and b.kendall > w.kendall


def test_even_a_70_percent_judge_beats_the_start(by_accuracy):
    worst = by_accuracy[0.7]
    start_mae, start_rho = worst.start
    assert worst.mae[0] < start_mae[0] - 0.15
    assert worst.spearman[0] > start_rho[0] + 0.5


def test_chains_respect_t_max_and_the_scale(by_accuracy):
    for summary in by_accuracy.values():
        for run in summary.runs:
            assert max(run.comparisons) <= WORLD.max_steps
            assert all(0.0 < s < 5.0 for s in run.final)
            assert sum(run.stopped.values()) == WORLD.targets
    # A noisier judge takes at least as many comparisons to settle.
    assert by_accuracy[1.0].comparisons <= by_accuracy[0.7].comparisons


def test_the_decaying_k_lets_most_perfect_judge_chains_stop_on_epsilon(by_accuracy):
    # With K_t = 0.5·0.95^t about 60 % stop on |Δs| < ε after ~39 comparisons; a K that
    # does not decay gives ~25 % and ~44.
    perfect = by_accuracy[1.0]
    assert perfect.converged > 0.45
    assert perfect.comparisons < 42


def test_the_same_seed_gives_the_same_run():
    a = sim.simulate(0.8, sim.World(targets=10, corpus=50, references=10), seed=3)
    b = sim.simulate(0.8, sim.World(targets=10, corpus=50, references=10), seed=3)
    assert a.final == b.final and a.comparisons == b.comparisons


def test_the_gap_judge_is_calibrated_to_its_mean_accuracy():
    world = sim.World(noise="gap")
    scale = sim._gap_scale(world, 0.8, random.Random(0))
    rng = random.Random(1)
    pairs = [
        abs(
            sim._truncated_normal(rng, world.mean, world.sd)
            - sim._truncated_normal(rng, world.mean, world.sd)
        )
        for _ in range(4000)
    ]
    mean = sum(1 / (1 + math.exp(-scale * g)) for g in pairs) / len(pairs)
    assert mean == pytest.approx(0.8, abs=0.01)


def test_the_service_defaults_report_a_better_score_than_the_chain_on_the_same_steps():
    world = sim.replace(sim.World(targets=80, corpus=400), noise="flat")
    exact = sim.service_summary(0.8, world, sim.PAPER_EXACT, 2, 0)
    posterior = sim.service_summary(0.8, world, sim.PAPER_RULE, 2, 0)
    # The same stop rule, hence the same comparisons, read by a posterior instead.
    assert [r.comparisons for r in exact.runs] == [r.comparisons for r in posterior.runs]
    assert posterior.kendall[0] > exact.kendall[0] + 0.03
    assert posterior.mae[0] < exact.mae[0]


def test_the_information_option_beats_the_nearest_rule_at_the_same_budget_under_gap_noise():
    world = sim.replace(sim.World(targets=80, corpus=400), noise="gap")
    nearest = sim.Schedule(selection="nearest", epsilon=0.0, max_steps=sim.ADAPTIVE.max_steps)
    near = sim.service_summary(0.8, world, nearest, 2, 0)
    info = sim.service_summary(0.8, world, sim.ADAPTIVE, 2, 0)
    assert info.comparisons == near.comparisons == sim.ADAPTIVE.max_steps
    assert info.kendall[0] > near.kendall[0] + 0.02
