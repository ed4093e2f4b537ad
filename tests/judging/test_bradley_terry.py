"""Bradley–Terry by Newton: closed forms, the ridge prior, and agreement with statsmodels."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm

from judging.methods.bradley_terry import comparisons_from_calls, fit_bradley_terry
from judging.methods.pairwise import PairCall


def games(a, b, wins_a, wins_b, ties=0):
    return [(a, b, 1.0)] * wins_a + [(a, b, 0.0)] * wins_b + [(a, b, 0.5)] * ties


def test_two_players_match_the_closed_form_log_odds_and_standard_error():
    fit = fit_bradley_terry(games("a", "b", 7, 3), ridge=0)
    strengths = fit.strengths
    assert strengths["a"] - strengths["b"] == pytest.approx(math.log(7 / 3))
    assert strengths["a"] + strengths["b"] == pytest.approx(0.0)
    # Var(θ_a − θ_b) = 1/(n·p·(1 − p)) = 1/7 + 1/3 for p = 0.7, n = 10.
    assert fit.se_difference("a", "b") == pytest.approx(math.sqrt(1 / 7 + 1 / 3))
    assert fit.probability("a", "b") == pytest.approx(0.7)


def test_ties_count_as_half_a_win_for_each_side():
    # 2 wins, 1 loss, 2 ties: a scores 3 of 5.
    fit = fit_bradley_terry(games("a", "b", 2, 1, ties=2), ridge=0)
    assert fit.probability("a", "b") == pytest.approx(3 / 5)


def test_with_the_ridge_the_fit_solves_the_penalised_score_equation():
    lam = 0.5
    fit = fit_bradley_terry(games("a", "b", 7, 3), ridge=lam)
    x = fit.strengths["a"]
    assert fit.strengths["b"] == pytest.approx(-x)
    # 7 − 10·σ(2x) − λx = 0
    assert 7 - 10 / (1 + math.exp(-2 * x)) - lam * x == pytest.approx(0, abs=1e-9)
    assert 0 < 2 * x < math.log(7 / 3)


def test_an_undefeated_idea_stays_finite_with_the_ridge_and_is_refused_without_it():
    comparisons = games("a", "b", 3, 0) + games("b", "c", 2, 1)
    fit = fit_bradley_terry(comparisons)
    assert all(math.isfinite(t) for t in fit.theta)
    assert fit.ranking()[0] == "a"
    with pytest.raises(ValueError, match="not finite"):
        fit_bradley_terry(comparisons, ridge=0)


def test_disconnected_groups_stay_finite_and_ideas_without_games_have_no_se():
    comparisons = games("a", "b", 3, 1) + games("x", "y", 1, 3)
    fit = fit_bradley_terry(comparisons, ideas=["lonely"])
    assert fit.ideas[0] == "lonely"
    assert fit.strengths["lonely"] == 0.0
    assert fit.se["lonely"] is None
    assert fit.se["a"] is not None and fit.se["a"] > 0
    assert fit.strengths["a"] > fit.strengths["b"]
    assert fit.strengths["y"] > fit.strengths["x"]
    with pytest.raises(ValueError):
        fit_bradley_terry(comparisons, ridge=0)


def test_ratings_are_elo_points_around_fifteen_hundred():
    fit = fit_bradley_terry(games("a", "b", 10, 1), ridge=0)
    ratings = fit.ratings
    assert (ratings["a"] + ratings["b"]) / 2 == pytest.approx(1500)
    # 400 points are 10:1 odds, so 10:1 data put a exactly 400 points above b.
    assert ratings["a"] - ratings["b"] == pytest.approx(400)
    assert fit.win_prob_vs_average["a"] > 0.5 > fit.win_prob_vs_average["b"]


def test_pair_calls_become_comparisons_without_the_unparseable_ones():
    calls = [PairCall("a", "b", "A"), PairCall("b", "a", "tie"), PairCall("a", "b", None)]
    assert comparisons_from_calls(calls) == [("a", "b", 1.0), ("b", "a", 0.5)]


def simulate(n_ideas=6, n_games=500, seed=0, tie_rate=0.0):
    rng = np.random.default_rng(seed)
    true = rng.normal(0, 1, n_ideas)
    rows = []
    for _ in range(n_games):
        i, j = rng.choice(n_ideas, 2, replace=False)
        if rng.random() < tie_rate:
            rows.append((int(i), int(j), 0.5))
        else:
            p = 1 / (1 + math.exp(-(true[i] - true[j])))
            rows.append((int(i), int(j), float(rng.random() < p)))
    return rows


def test_strengths_and_standard_errors_match_a_logistic_regression():
    rows = simulate()
    n = 6
    X = np.zeros((len(rows), n))
    y = np.zeros(len(rows))
    for g, (i, j, s) in enumerate(rows):
        X[g, i], X[g, j], y[g] = 1.0, -1.0, s
    logit = sm.Logit(y, X[:, 1:]).fit(disp=0)  # idea 0 is the reference level

    fit = fit_bradley_terry(rows, ideas=range(n), ridge=0)
    theta = fit.theta - fit.theta[0]
    assert theta[1:] == pytest.approx(logit.params, abs=1e-6)
    se = [fit.se_difference(k, 0) for k in range(1, n)]
    assert se == pytest.approx(logit.bse, rel=1e-5)


def test_ties_match_a_binomial_glm_with_half_successes():
    rows = simulate(n_ideas=5, n_games=400, seed=4, tie_rate=0.2)
    n = 5
    # Aggregate per ordered (i, j) as a proportion with its number of games as weight.
    agg: dict[tuple[int, int], list[float]] = {}
    for i, j, s in rows:
        agg.setdefault((i, j), []).append(s)
    X = np.zeros((len(agg), n))
    y = np.zeros(len(agg))
    w = np.zeros(len(agg))
    for g, ((i, j), results) in enumerate(agg.items()):
        X[g, i], X[g, j] = 1.0, -1.0
        y[g], w[g] = np.mean(results), len(results)
    glm = sm.GLM(y, X[:, 1:], family=sm.families.Binomial(), var_weights=w).fit()

    fit = fit_bradley_terry(rows, ideas=range(n), ridge=0)
    theta = fit.theta - fit.theta[0]
    assert theta[1:] == pytest.approx(glm.params, abs=1e-6)
    se = [fit.se_difference(k, 0) for k in range(1, n)]
    assert se == pytest.approx(glm.bse, rel=1e-5)


def test_a_small_ridge_barely_moves_well_determined_strengths():
    rows = simulate(n_games=2000, seed=2)
    plain = fit_bradley_terry(rows, ideas=range(6), ridge=0)
    ridged = fit_bradley_terry(rows, ideas=range(6))
    assert ridged.theta - ridged.theta.mean() == pytest.approx(plain.theta, abs=0.01)
