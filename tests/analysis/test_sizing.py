"""The power engine against independent computations, and the search for the smallest design.

Independent references: statsmodels' noncentral-t power (two-sample and one-sample) where
the test's units are independent; the design-effect formula for Test 1 when reviews of one
idea share its effect; the GLS variance computed from the explicit covariance matrix; and
the project's own test functions run on simulated frames (`simulate.power`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.power import TTestIndPower, TTestPower

from studies.analysis.simulate import draw_layout, power
from studies.analysis.sizing import (
    Design,
    PowerEngine,
    ScoreModel,
    gls_variance,
    ideas_grid,
    mixed_layout,
    smallest_design,
)

REPS = 4000


def _mc_slack(p: float, reps: int = REPS, sds: float = 4.0) -> float:
    return sds * math.sqrt(p * (1 - p) / reps)


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_test1_on_independent_reviews_has_the_noncentral_t_power(alternative):
    design = Design(ideas_per_condition=40, reviews_per_idea=2, load=4, n_topics=3)
    effect = 0.35 if alternative != "less" else -0.35
    model = ScoreModel(0.0, 0.0, 0.0, 1.0, effect)
    got = PowerEngine("by_review", n_reps=REPS, seed=1).power(
        design, model, alpha=0.05, alternative=alternative
    )
    sm_alt = {"two-sided": "two-sided", "greater": "larger", "less": "smaller"}[alternative]
    # 80 reviews per condition, d = effect / sd.
    want = TTestIndPower().power(
        effect_size=effect, nobs1=80, alpha=0.05, ratio=1.0, alternative=sm_alt
    )
    assert abs(got - want) < _mc_slack(want), (got, want)


def test_test2_with_idea_effects_has_the_power_of_a_t_test_on_idea_means():
    # Idea means are independent with variance var_idea + var_residual / k = 0.5 + 1.5 / 3.
    design = Design(ideas_per_condition=30, reviews_per_idea=3, load=5, n_topics=1)
    model = ScoreModel(0.0, 0.5, 0.0, 1.5, 0.6)
    got = PowerEngine("by_idea", n_reps=REPS, seed=2).power(
        design, model, alpha=0.01, alternative="two-sided"
    )
    want = TTestIndPower().power(effect_size=0.6, nobs1=30, alpha=0.01, ratio=1.0)
    assert abs(got - want) < _mc_slack(want), (got, want)


def test_test1_with_idea_effects_follows_the_design_effect_not_the_naive_power():
    m, k, var_i, var_e, effect = 40, 8, 0.4, 1.6, 0.35
    design = Design(ideas_per_condition=m, reviews_per_idea=k, load=8, n_topics=1)
    model = ScoreModel(0.0, var_i, 0.0, var_e, effect)
    got = PowerEngine("by_review", n_reps=REPS, seed=3).power(
        design, model, alpha=0.05, alternative="two-sided"
    )
    n = m * k
    # The difference of means has variance 2 (var_i + var_e / k) / m (design effect
    # 1 + (k - 1) ICC); Test 1 divides it by the naive SE from the within-group variance,
    # whose expectation is var_e + var_i (n - k) / (n - 1).
    se_true = math.sqrt(2 * (var_i + var_e / k) / m)
    se_naive = math.sqrt(2 * (var_e + var_i * (n - k) / (n - 1)) / n)
    z = stats.norm.isf(0.025)
    want = stats.norm.sf((z * se_naive - effect) / se_true) + stats.norm.cdf(
        (-z * se_naive - effect) / se_true
    )
    assert abs(got - want) < _mc_slack(want) + 0.01, (got, want)
    naive = TTestIndPower().power(
        effect_size=effect / math.sqrt(var_i + var_e), nobs1=n, alpha=0.05
    )
    assert naive - want > 0.1  # the clustering matters: reviews are not independent


def test_test3_has_the_one_sample_power_of_per_reviewer_differences():
    # A load of 4 alternates conditions: each reviewer scores 2 + 2, so the difference has
    # variance var_residual (1/2 + 1/2); the reviewer effect cancels.
    design = Design(ideas_per_condition=40, reviews_per_idea=2, load=4, n_topics=1)
    model = ScoreModel(0.0, 0.0, 2.0, 1.0, 0.4)
    got = PowerEngine("by_reviewer", n_reps=REPS, seed=4).power(
        design, model, alpha=0.05, alternative="greater"
    )
    want = TTestPower().power(
        effect_size=0.4, nobs=design.n_reviewers, alpha=0.05, alternative="larger"
    )
    assert design.n_reviewers == 40
    assert abs(got - want) < _mc_slack(want), (got, want)


def test_the_engine_agrees_with_the_project_tests_run_on_simulated_frames():
    true = {"var_topic": 0.1, "var_idea": 0.4, "var_reviewer": 0.8, "var_residual": 1.9}
    design = Design(ideas_per_condition=24, reviews_per_idea=3, load=6, n_topics=4)
    loop = power(
        n_reps=400, tests=("by_review", "by_idea", "by_reviewer"), seed=5,
        n_reviewers=design.n_reviewers, n_ideas_per_condition=24,
        conditions={"Human": 0.0, "AI": 0.6}, reviews_per_idea=3, load=(6, 6), n_topics=4,
        **true,
    )  # fmt: skip
    model = ScoreModel(true["var_topic"], true["var_idea"], true["var_reviewer"], 1.9, 0.6)
    for row in loop.itertuples():
        got = PowerEngine(row.test, n_reps=REPS, seed=6).power(
            design, model, alpha=0.05, alternative="two-sided"
        )
        slack = 4 * math.sqrt(row.mc_se**2 + got * (1 - got) / REPS)
        assert abs(got - row.power) < slack, (row.test, got, row.power)


def test_the_gls_variance_equals_the_explicit_covariance_computation():
    rng = np.random.default_rng(7)
    lay = draw_layout(
        n_reviewers=12, n_ideas_per_condition=10, n_conditions=3, reviews_per_idea=3,
        n_topics=3, load=(7, 8), rng=rng,
    )  # fmt: skip
    model = ScoreModel(0.2, 0.5, 0.7, 1.3, 0.0)
    n = len(lay.idea)
    cond = lay.idea_condition[lay.idea]
    X = np.column_stack([np.ones(n), cond == 1, cond == 2]).astype(float)

    def same(codes: np.ndarray) -> np.ndarray:
        return (codes[:, None] == codes[None, :]).astype(float)

    V = (
        model.var_residual * np.eye(n)
        + model.var_topic * same(lay.idea_topic[lay.idea])
        + model.var_idea * same(lay.idea)
        + model.var_reviewer * same(lay.reviewer)
    )
    want = np.linalg.inv(X.T @ np.linalg.solve(V, X))[1, 1]
    assert gls_variance(mixed_layout(lay), model) == pytest.approx(want, rel=1e-10)
    # Components at zero drop out of the Woodbury form one by one.
    for zeroed in ({"var_topic": 0.0}, {"var_idea": 0.0}, {"var_reviewer": 0.0, "var_topic": 0.0}):
        m2 = ScoreModel(**{**model.__dict__, **zeroed})
        V2 = (
            m2.var_residual * np.eye(n) + m2.var_topic * same(lay.idea_topic[lay.idea])
            + m2.var_idea * same(lay.idea) + m2.var_reviewer * same(lay.reviewer)
        )  # fmt: skip
        want2 = np.linalg.inv(X.T @ np.linalg.solve(V2, X))[1, 1]
        assert gls_variance(mixed_layout(lay), m2) == pytest.approx(want2, rel=1e-10)


def test_mixed_power_is_the_wald_power_of_the_balanced_nested_design():
    m, k, var_i, var_e, effect = 25, 3, 0.5, 1.5, 0.5
    design = Design(ideas_per_condition=m, reviews_per_idea=k, load=5, n_topics=1)
    model = ScoreModel(0.0, var_i, 0.0, var_e, effect)
    se = math.sqrt(2 * (var_i + var_e / k) / m)
    z = stats.norm.isf(0.05)
    want = stats.norm.sf(z - effect / se)
    got = PowerEngine("mixed").power(design, model, alpha=0.05, alternative="greater")
    assert got == pytest.approx(want, rel=1e-9)


def test_without_an_effect_test1_rejects_at_alpha_only_when_reviews_are_independent():
    design = Design(ideas_per_condition=30, reviews_per_idea=3, load=6, n_topics=1)
    engine = PowerEngine("by_review", n_reps=REPS, seed=8)
    flat = engine.power(design, ScoreModel(0, 0, 0, 1.0, 0.0), alpha=0.05, alternative="two-sided")
    assert abs(flat - 0.05) < _mc_slack(0.05)
    clustered = engine.power(
        design, ScoreModel(0, 0.8, 0, 1.0, 0.0), alpha=0.05, alternative="two-sided"
    )
    assert clustered > 0.05 + _mc_slack(0.05)  # Test 1's known false positives


def test_one_engine_gives_the_same_power_again_and_a_new_seed_other_draws():
    design = Design(ideas_per_condition=20, reviews_per_idea=2, load=4, n_topics=2)
    model = ScoreModel(0.1, 0.3, 0.5, 1.5, 0.5)
    a = PowerEngine("by_idea", n_reps=200, seed=1)
    first = a.power(design, model, alpha=0.05, alternative="two-sided")
    assert a.power(design, model, alpha=0.05, alternative="two-sided") == first
    assert (
        PowerEngine("by_idea", n_reps=200, seed=1).power(
            design, model, alpha=0.05, alternative="two-sided"
        )
        == first
    )
    others = {
        PowerEngine("by_idea", n_reps=200, seed=s).power(
            design, model, alpha=0.05, alternative="two-sided"
        )
        for s in range(2, 6)
    }
    assert others != {first}


def test_the_search_finds_the_first_grid_design_that_reaches_the_target():
    # The mixed test's power is exact and, without crossed reviewers, rises strictly with
    # ideas, so a scan of the whole grid gives the answer to compare with.
    model = ScoreModel(0.0, 0.4, 0.0, 1.6, 0.35)
    engine = PowerEngine("mixed", n_layouts=1)
    kwargs = {"reviews_per_idea": 3, "load": 6, "n_conditions": 2, "n_topics": 1}
    grid = ideas_grid(3, 2000)
    powers = [
        engine.power(Design(int(m), 3, 6, 2, 1), model, alpha=0.05, alternative="two-sided")
        for m in grid
    ]
    first = int(grid[next(i for i, p in enumerate(powers) if p >= 0.8)])
    for start in (None, 5, first, 1500):
        res = smallest_design(
            engine, model, alpha=0.05, alternative="two-sided", target=0.8, start=start, **kwargs
        )
        assert res.design is not None and res.design.ideas_per_condition == first
        assert len(res.evaluated) <= 2 * math.log2(len(grid)) + 3
        below = max(m for m, _ in res.evaluated if m < first)
        assert below < res.ideas <= first
    # The interpolated crossing is where the exact power is 0.8.
    se = math.sqrt(2 * (0.4 + 1.6 / 3) / res.ideas)
    assert stats.norm.sf(stats.norm.isf(0.025) - 0.35 / se) == pytest.approx(0.8, abs=0.01)


def test_a_target_beyond_the_cap_is_reported_as_not_reached():
    res = smallest_design(
        PowerEngine("by_idea", n_reps=100), ScoreModel(0, 0.4, 0.5, 2.0, 0.02),
        reviews_per_idea=2, load=4, n_conditions=2, n_topics=1, alpha=0.05,
        alternative="two-sided", max_ideas_per_condition=60,
    )  # fmt: skip
    assert res.design is None and res.ideas == math.inf and res.reviews == math.inf
    assert max(m for m, _ in res.evaluated) == 60


def test_impossible_designs_and_models_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="exceeds the 4 ideas"):
        Design(ideas_per_condition=2, reviews_per_idea=1, load=5).check()
    with pytest.raises(ValueError, match="ideas_per_condition must be >= 2"):
        Design(ideas_per_condition=1, reviews_per_idea=1, load=1).check()
    with pytest.raises(ValueError, match="var_idea must be >= 0"):
        ScoreModel(0.0, -0.1, 0.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="var_residual must be > 0"):
        ScoreModel(0.0, 0.1, 0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="unknown test"):
        PowerEngine("by_magic")
    with pytest.raises(ValueError, match="alternative"):
        PowerEngine("by_idea").power(
            Design(10, 2, 4), ScoreModel(0, 0, 0, 1, 0), alpha=0.05, alternative="bigger"
        )


def test_the_grid_takes_every_small_count_then_geometric_steps():
    grid = ideas_grid(2, 1000)
    assert grid[0] == 2 and grid[-1] == 1000 and list(grid[:10]) == list(range(2, 12))
    steps = grid[1:] / grid[:-1]
    assert (steps > 1).all() and steps[-20:-1].max() < 1.07
