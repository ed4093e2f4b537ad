"""Sizing a study from a pilot: the estimate, the bootstrap re-fits, the result and its plot,
and the acceptance check (the recommended size against the size the true model gives)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from studies.analysis.lmm_sparse import fit_lmm
from studies.analysis.mixed import fit_mixed, prepare_mixed_data
from studies.analysis.pilot import (
    DenseReml,
    PrimaryHypothesis,
    estimate_pilot,
    size_for_model,
    size_from_pilot,
    size_from_plan,
)
from studies.analysis.plan import parse_plan
from studies.analysis.simulate import simulate_study
from studies.analysis.sizing import PowerEngine, ScoreModel
from studies.analysis.sizing_plots import power_curve_svg
from studies.analysis.threads import blas_threads

TRUE = {"var_topic": 0.05, "var_idea": 0.41, "var_reviewer": 0.8, "var_residual": 1.9}
EFFECT = 0.5
BY_IDEA = PrimaryHypothesis("overall", "by_idea", "AI", "Human")


def _pilot(seed: int, **over: object) -> pd.DataFrame:
    """The acceptance pilot: 20 reviewers, 40 ideas (20 per condition), 3 reviews each."""
    design = {
        "n_reviewers": 20, "n_ideas_per_condition": 20, "reviews_per_idea": 3, "load": (6, 6),
        "n_topics": 4, "conditions": {"Human": 0.0, "AI": EFFECT}, **TRUE, **over,
    }  # fmt: skip
    return simulate_study(**design, seed=seed)


@pytest.mark.parametrize("reml", [True, False])
def test_the_dense_refit_reaches_the_sparse_engines_optimum(reml):
    # Seed 1 has a topic variance near 0: a search in theta (not theta^2) stops at 0 there.
    for seed in (1,):
        df = _pilot(seed)
        prep = prepare_mixed_data(df, "overall", baseline="Human")
        ref = fit_lmm(
            prep.y, prep.X, prep.group_labels, fixed_names=prep.fixed_names, reml=reml,
            n_starts=2, satterthwaite=False,
        )  # fmt: skip
        codes = [pd.factorize(pd.Series(prep.group_labels[g]))[0] for g in ref.groups_used]
        theta, sigma2, beta, dev = DenseReml(prep.X, codes, reml=reml).fit(prep.y)
        assert dev[0] <= ref.deviance + 1e-6
        assert sigma2[0] == pytest.approx(ref.sigma2, rel=1e-4)
        for j, g in enumerate(ref.groups_used):
            assert theta[0, j] ** 2 * sigma2[0] == pytest.approx(ref.variances[g], abs=1e-4)
        np.testing.assert_allclose(beta[0], ref.coef, atol=1e-5)


def test_the_estimate_names_each_component_after_its_factor():
    # Reviewer variance far above the idea variance, so a swap could not pass.
    df = simulate_study(
        n_reviewers=60, n_ideas_per_condition=60, reviews_per_idea=3, load=(5, 7), n_topics=4,
        conditions={"Human": 0.0, "AI": 0.7}, var_idea=0.15, var_reviewer=1.5,
        var_topic=0.0, var_residual=1.0, seed=4,
    )  # fmt: skip
    est = estimate_pilot(df, BY_IDEA, n_starts=1)
    fit = fit_mixed(df, "overall", baseline="Human", n_starts=1, satterthwaite=False)
    m = est.model
    assert m.var_reviewer == pytest.approx(fit.variance["reviewer_id"], rel=1e-6)
    assert m.var_idea == pytest.approx(fit.variance["idea_id"], rel=1e-6)
    assert m.var_residual == pytest.approx(fit.variance["residual"], rel=1e-6)
    assert m.effect == pytest.approx(fit.term("condition[AI]")["coef"], rel=1e-6)
    assert 1.0 < m.var_reviewer < 2.2 and m.var_idea < 0.5
    assert (est.n_reviews, est.n_ideas, est.n_reviewers, est.n_topics) == (360, 120, 60, 4)
    assert est.reviews_per_idea == 3.0 and 5 <= est.load <= 7
    assert est.conditions == ("Human", "AI")


def test_a_pilot_without_reviewer_ids_puts_the_reviewer_variance_at_zero_and_refuses_test3():
    df = _pilot(1).assign(reviewer_id=None)
    est = estimate_pilot(df, BY_IDEA, n_starts=1)
    assert est.model.var_reviewer == 0.0 and est.load is None and est.n_reviewers == 0
    assert any("reviewer variance is taken as 0" in n for n in est.notes)
    with pytest.raises(ValueError, match="Test 3 .* needs reviewer ids"):
        estimate_pilot(df, PrimaryHypothesis("overall", "by_reviewer", "AI", "Human"))
    with pytest.raises(ValueError, match="give the reviewers' load"):
        size_from_pilot(df, BY_IDEA, alpha=0.05, n_boot=2, n_reps=20)
    with pytest.raises(ValueError, match="no reviews in condition 'AI_Rerank'"):
        estimate_pilot(df, PrimaryHypothesis("overall", "by_idea", "AI_Rerank", "Human"))


def test_the_bootstrap_spread_of_the_effect_matches_the_models_standard_error():
    est = estimate_pilot(_pilot(2), BY_IDEA, n_starts=1)
    with blas_threads(1):
        models, failed = est.bootstrap(80, seed=3)
    effects = np.array([m.effect for m in models])
    assert failed == 0 and len(models) == 80
    assert abs(effects.mean() - est.model.effect) < 4 * est.effect_se / math.sqrt(80)
    assert effects.std(ddof=1) == pytest.approx(est.effect_se, rel=0.25)
    resid = np.array([m.var_residual for m in models])
    assert resid.mean() == pytest.approx(est.model.var_residual, rel=0.1)
    given, _ = est.bootstrap(5, seed=3, effect=0.25)
    assert {m.effect for m in given} == {0.25}


def test_large_pilots_are_re_fitted_by_the_sparse_engine_to_the_same_models(monkeypatch):
    from studies.analysis import pilot

    est = estimate_pilot(_pilot(3), BY_IDEA, n_starts=1)
    with blas_threads(1):
        dense, _ = est.bootstrap(2, seed=1)
        monkeypatch.setattr(pilot, "PILOT_DENSE_MAX_LEVELS", 0)
        sparse, failed = est.bootstrap(2, seed=1)
    assert failed == 0
    for a, b in zip(dense, sparse, strict=True):
        for name in ("var_topic", "var_idea", "var_reviewer", "var_residual", "effect"):
            assert getattr(a, name) == pytest.approx(getattr(b, name), abs=2e-4), name


def test_a_sizing_reads_as_json_and_draws_its_power_curve():
    seen: list[float] = []
    with blas_threads(1):
        res = size_from_pilot(
            _pilot(5), BY_IDEA, alpha=0.05, effect=EFFECT, n_boot=10, n_reps=200,
            n_starts=1, curve_points=6, progress=lambda f, _m: seen.append(f),
        )  # fmt: skip
    doc = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    d = doc["design"]
    assert d["n_reviews"] == d["ideas_per_condition"] * 2 * d["reviews_per_idea"]
    assert d["n_reviewers"] == math.ceil(d["n_reviews"] / d["load"]) and d["load"] == 6
    assert doc["power"] >= 0.8 - 3 * doc["mc_se"]
    lo, hi = doc["interval_reviews"]
    assert lo <= doc["size_reviews"] <= hi
    cheapest = min(s["reviews"] for s in doc["shapes"])
    assert doc["size_reviews"] == cheapest
    assert doc["bootstrap"] == {"n": 10, "failed_fits": 0, "beyond_cap": 0}
    assert seen[-1] == 1.0 and seen == sorted(seen)
    svg = power_curve_svg(doc)
    assert svg.startswith("<svg") and "ideas per condition" in svg and "target power" in svg
    assert f"{d['ideas_per_condition']} ideas per condition" in svg


def test_a_size_beyond_the_cap_is_reported_as_such_and_still_drawn():
    with blas_threads(1):
        res = size_from_pilot(
            _pilot(7), BY_IDEA, alpha=0.05, effect=0.01, n_boot=3, n_reps=50, n_starts=1,
            max_ideas_per_condition=30, curve_points=4,
        )  # fmt: skip
    doc = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    assert doc["design"] is None and doc["size_reviews"] is None and doc["power"] is None
    assert doc["interval_reviews"] == [None, None]
    assert doc["bootstrap"]["beyond_cap"] == 3
    assert all(s["design"] is None for s in doc["shapes"])
    assert power_curve_svg(doc).startswith("<svg")


def test_sizing_from_a_plan_uses_its_corrected_level_and_direction():
    plan = parse_plan({"hypotheses": [{"direction": "AI > Human", "metric": "overall"}]})
    metrics = ["novelty", "excitement", "feasibility", "effectiveness", "overall"]
    with blas_threads(1):
        res = size_from_plan(
            _pilot(6), plan, metric="overall", test="by_idea", condition="AI",
            baseline="Human", metrics=metrics, effect=EFFECT, n_boot=4, n_reps=100,
            n_starts=1, curve_points=0,
        )  # fmt: skip
    assert res.alpha == pytest.approx(0.01) and res.alternative == "greater"
    assert res.plan_level is not None and res.plan_level.family_size == 5
    # One-sided at 0.01 against two-sided at 0.05: a different size, from the same draws.
    best, _ = size_for_model(res.model, test="by_idea", alpha=0.05, load=6, n_topics=4, n_reps=100)
    assert best is not None and best.reviews < res.size


@pytest.mark.slow
def test_the_size_from_a_small_pilot_is_near_the_true_size_and_its_interval_covers_it():
    """The acceptance check, lighter than bench/pilot_sizing.py (which runs 20 seeds with
    200 bootstrap pilots each): 10 pilots of 20 reviewers and 40 ideas, the effect to
    detect given, Test 2 at 0.05 for power 0.8. One engine serves every pilot and the
    truth (the same draws either way; shared only to draw each design once)."""
    engine = PowerEngine("by_idea", n_reps=300)
    truth, _ = size_for_model(
        ScoreModel(**TRUE, effect=EFFECT), test="by_idea", alpha=0.05, load=6, n_topics=4,
        engine=engine,
    )  # fmt: skip
    assert truth is not None
    sizes, covered = [], []
    with blas_threads(1):
        for seed in range(10):
            res = size_from_pilot(
                _pilot(100 + seed), BY_IDEA, alpha=0.05, effect=EFFECT, n_boot=40,
                n_starts=1, curve_points=0, engine=engine,
            )  # fmt: skip
            sizes.append(res.size)
            covered.append(res.interval[0] <= truth.reviews <= res.interval[1])
    assert abs(np.median(sizes) / truth.reviews - 1) <= 0.2, (sizes, truth.reviews)
    assert np.mean(covered) >= 0.8, (covered, sizes)
