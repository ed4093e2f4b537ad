"""The reliability panel's statistics against independent computations: pandas for the
shares and SDs, a one-way ANOVA for the pooled SD, statsmodels' Logit and GLM for the
style-controlled Bradley–Terry, statsmodels' OLS for the calibration line, scipy's
bootstrap for the intervals, and a simulation for the vertex bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
from scipy import stats

from judging.methods import reliability as rel


def _answers(seed: int = 0) -> dict[int, list[str | None]]:
    rng = np.random.default_rng(seed)
    out: dict[int, list[str | None]] = {}
    for prompt in range(80):
        r = int(rng.integers(1, 5))
        p = float(rng.uniform(0.5, 1.0))
        out[prompt] = [("A" if rng.random() < p else "B") for _ in range(r)]
    out[80] = ["A", None, "A"]  # the unparseable answer is left out: one identical pair
    out[81] = ["tie", None]  # one answer left: skipped
    return out


def test_the_identical_share_is_the_mean_per_prompt_share_of_agreeing_answer_pairs():
    answers = _answers()
    long = pd.DataFrame(
        [(p, a) for p, group in answers.items() for a in group if a is not None],
        columns=["prompt", "answer"],
    )
    counts = long.groupby(["prompt", "answer"]).size().rename("c").reset_index()
    counts["agree"] = counts.c * (counts.c - 1) / 2
    per = counts.groupby("prompt").agg(agree=("agree", "sum"), r=("c", "sum"))
    per = per[per.r >= 2]
    expected = (per.agree / (per.r * (per.r - 1) / 2)).to_numpy()

    est = rel.identical_share(answers, n_boot=4000, seed=1)
    assert est.value == pytest.approx(expected.mean())
    assert est.n == len(expected)
    ref = stats.bootstrap(
        (expected,), np.mean, n_resamples=4000, method="percentile", random_state=2
    ).confidence_interval
    assert est.low == pytest.approx(ref.low, abs=0.01)
    assert est.high == pytest.approx(ref.high, abs=0.01)


def test_the_repetition_sd_is_the_root_mean_square_error_of_a_one_way_anova():
    rng = np.random.default_rng(3)
    scores = {i: list(rng.normal(5, 1.0, int(rng.integers(2, 5))).round()) for i in range(60)}
    scores[60] = [4.0]  # a prompt asked once has no within-prompt spread: skipped
    scores[61] = [3.0, None, 5.0]
    frame = pd.DataFrame(
        [
            (i, x)
            for i, xs in scores.items()
            if len([x for x in xs if x is not None]) > 1
            for x in xs
            if x is not None
        ],
        columns=["prompt", "score"],
    )
    anova = smf.ols("score ~ C(prompt)", data=frame).fit()
    est = rel.score_sd(scores, n_boot=500)
    assert est.value == pytest.approx(math.sqrt(anova.mse_resid))
    assert est.low < est.value < est.high


def test_self_preference_reports_the_judge_the_reviewers_and_their_paired_difference():
    pairs = [
        ("o1", "x1", 1.0, 1.0),
        ("o1", "x2", 1.0, 0.0),
        ("o2", "x1", 0.5, None),
        ("o2", "x3", 0.0, 0.5),
        ("o3", "x2", None, 1.0),
        ("o3", "x3", 1.0, 0.0),
    ]
    out = rel.self_preference(pairs, n_boot=300)
    frame = pd.DataFrame(pairs, columns=["own", "other", "judge", "human"])
    assert out.judge.value == pytest.approx(frame.judge.mean())
    assert out.human.value == pytest.approx(frame.human.mean())
    both = frame.dropna()
    assert out.difference.value == pytest.approx((both.judge - both.human).mean())
    assert (out.judge.n, out.human.n, out.difference.n) == (5, 5, 4)
    for est in (out.judge, out.human, out.difference):
        assert est.low <= est.value <= est.high


def test_the_vertex_bootstrap_matches_the_spread_of_a_figure_whose_pairs_share_ideas():
    """Each idea carries its own effect into every pair it is in; the spread of the mean
    over repeated studies is what the interval must reflect. Resampling ideas reproduces
    it; resampling pairs as if independent gives much less."""
    rng = np.random.default_rng(5)
    n_ideas, n_pairs = 40, 200

    def study(rng: np.random.Generator):
        effect = rng.normal(0, 1, n_ideas)
        a = rng.integers(0, n_ideas, n_pairs)
        b = (a + rng.integers(1, n_ideas, n_pairs)) % n_ideas
        values = effect[a] + 0.5 * effect[b] + rng.normal(0, 0.5, n_pairs)
        return list(zip(a.tolist(), b.tolist(), strict=True)), values

    true_sd = np.std([study(rng)[1].mean() for _ in range(800)])
    widths_vertex, widths_pairs = [], []
    for k in range(40):
        ends, values = study(rng)
        low, high = rel.vertex_bootstrap(
            ends, lambda w, v=values: float(np.average(v, weights=w)), n_boot=300, seed=k
        )
        widths_vertex.append(high - low)
        naive = rel.bootstrap_interval(values, np.mean, n_boot=300, seed=k)
        widths_pairs.append(naive.high - naive.low)
    nominal = 2 * 1.96 * true_sd
    assert 0.75 * nominal < np.mean(widths_vertex) < 1.4 * nominal
    assert np.mean(widths_pairs) < 0.7 * nominal


def test_style_features_count_words_markup_and_list_items():
    text = (
        "# Title\n\nSome **bold** words and *one* `code` [link](http://x).\n\n"
        "- first item\n- second item\n1. numbered\n2) also numbered\n"
    )
    words = len(text.split())
    f = rel.style_covariates(text)
    assert f["length"] == words
    # heading, bold, italic, code, link
    assert f["markdown_density"] == pytest.approx(100 * 5 / words)
    assert f["list_items"] == 4
    assert rel.style_covariates("") == {"length": 0.0, "markdown_density": 0.0, "list_items": 0.0}


def test_style_differences_are_normalised_and_zero_when_both_are_zero():
    d = rel.style_differences(
        {"length": 300, "markdown_density": 0, "list_items": 3},
        {"length": 100, "markdown_density": 0, "list_items": 1},
    )
    assert d.tolist() == pytest.approx([0.5, 0.0, 0.5])


def _style_world(seed: int, n_ideas: int = 30, n_games: int = 600, ties: bool = False):
    rng = np.random.default_rng(seed)
    groups = {i: ("g0", "g1", "g2")[i % 3] for i in range(n_ideas)}
    effect = {"g0": 0.0, "g1": 0.6, "g2": -0.4}
    features = {
        i: {
            "length": float(rng.integers(150, 600)),
            "markdown_density": float(rng.gamma(2, 1.5)),
            "list_items": float(rng.poisson(3)),
        }
        for i in range(n_ideas)
    }
    games = []
    for _ in range(n_games):
        a, b = (int(x) for x in rng.choice(n_ideas, 2, replace=False))
        d = rel.style_differences(features[a], features[b])
        eta = effect[groups[a]] - effect[groups[b]] + 1.5 * d[0] - 0.8 * d[1] + 0.3
        p = 1 / (1 + math.exp(-eta))
        u = rng.random()
        s = 1.0 if u < p else 0.0
        if ties and abs(u - p) < 0.08:
            s = 0.5
        games.append((a, b, s))
    return games, features, groups


def _design(games, features, groups, rated):
    rows = []
    for a, b, _ in games:
        row = [float(groups[a] == g) - float(groups[b] == g) for g in rated[1:]]
        fa, fb = features[a], features[b]
        row += [
            (fa[k] - fb[k]) / (fa[k] + fb[k]) if fa[k] + fb[k] else 0.0
            for k in rel.STYLE_COVARIATES
        ]
        rows.append([*row, 1.0])
    return np.array(rows), np.array([s for _, _, s in games])


def test_style_controlled_bradley_terry_matches_statsmodels_logit_on_the_same_design():
    games, features, groups = _style_world(0)
    rated = ("g0", "g1", "g2")
    fit = rel.fit_style_bt(games, features, groups, rated=rated, ridge=0)
    x, y = _design(games, features, groups, rated)
    ref = sm.Logit(y, x).fit(disp=0)
    # statsmodels fixes g0 at 0; ours centres: compare differences from g0.
    theta = fit.strengths
    assert theta["g1"] - theta["g0"] == pytest.approx(ref.params[0], abs=1e-6)
    assert theta["g2"] - theta["g0"] == pytest.approx(ref.params[1], abs=1e-6)
    names = [*rel.STYLE_COVARIATES, "position"]
    assert [fit.beta[k] for k in names] == pytest.approx(ref.params[2:].tolist(), abs=1e-6)
    assert [fit.beta_se[k] for k in names] == pytest.approx(ref.bse[2:].tolist(), rel=1e-5)
    assert fit.log_likelihood == pytest.approx(ref.llf, abs=1e-6)


def test_ties_count_as_half_a_win_as_in_a_binomial_glm_with_proportions():
    games, features, groups = _style_world(1, ties=True)
    assert any(s == 0.5 for *_, s in games)
    rated = ("g0", "g1", "g2")
    fit = rel.fit_style_bt(games, features, groups, rated=rated, ridge=0, position=True)
    x, y = _design(games, features, groups, rated)
    ref = sm.GLM(y, x, family=sm.families.Binomial()).fit()
    names = [*rel.STYLE_COVARIATES, "position"]
    assert [fit.beta[k] for k in names] == pytest.approx(ref.params[2:].tolist(), abs=1e-6)


def test_a_style_feature_that_never_differs_is_reported_as_not_estimable():
    games, features, groups = _style_world(2)
    for f in features.values():
        f["markdown_density"] = 0.0
    fit = rel.fit_style_bt(games, features, groups)
    assert math.isnan(fit.beta["markdown_density"])
    assert math.isfinite(fit.beta["length"]) and math.isfinite(fit.beta_se["length"])
    _, _, betas = rel.style_bt_intervals(games, features, groups, n_boot=30)
    assert math.isnan(betas["markdown_density"].low)
    assert betas["length"].low < betas["length"].value < betas["length"].high


def test_an_idea_without_features_is_named():
    games, features, groups = _style_world(3)
    del features[games[4][0]]
    with pytest.raises(ValueError, match=f"game .*idea {games[4][0]}"):
        rel.fit_style_bt(games, features, groups)


def test_calibration_matches_ols_with_its_t_intervals_and_a_paired_bootstrap():
    rng = np.random.default_rng(4)
    judge = {i: float(rng.integers(1, 11)) for i in range(70)}
    human = {i: 1.5 + 0.6 * judge[i] + float(rng.normal(0, 1)) for i in judge}
    human[999] = 5.0  # no judge score: left out
    out = rel.calibration(judge, human, n_boot=3000, seed=1)
    x = np.array([judge[i] for i in judge])
    y = np.array([human[i] for i in judge])
    ols = sm.OLS(y, sm.add_constant(x)).fit()
    assert out["n"] == 70
    assert out["intercept"].value == pytest.approx(ols.params[0])
    assert out["slope"].value == pytest.approx(ols.params[1])
    ci = ols.conf_int(0.05)
    assert out["intercept_t"] == pytest.approx(tuple(ci[0]))
    assert out["slope_t"] == pytest.approx(tuple(ci[1]))
    assert out["residual_sd"] == pytest.approx(math.sqrt(ols.scale))
    ref = stats.bootstrap(
        (x, y),
        lambda a, b: stats.linregress(a, b).slope,
        paired=True,
        vectorized=False,
        n_resamples=3000,
        method="percentile",
        random_state=3,
    ).confidence_interval
    assert out["slope"].low == pytest.approx(ref.low, abs=0.02)
    assert out["slope"].high == pytest.approx(ref.high, abs=0.02)


def test_reliability_bins_split_ideas_by_judge_score_into_equal_groups():
    judge = {i: float(i) for i in range(9)}
    human = {i: float(10 - i) for i in range(9)}
    rows = rel.reliability_bins(judge, human, bins=3)
    assert [r["n"] for r in rows] == [3, 3, 3]
    assert [r["judge"] for r in rows] == [1.0, 4.0, 7.0]
    assert [r["human"] for r in rows] == [9.0, 6.0, 3.0]
    half = stats.t.ppf(0.975, 2) * 1.0 / math.sqrt(3)
    assert rows[0]["low"] == pytest.approx(9.0 - half)


def test_the_reliability_plot_is_an_inline_svg_and_empty_without_enough_ideas():
    judge = {i: float(i % 7 + 1) for i in range(30)}
    human = {i: 0.5 + 0.8 * judge[i] + (i % 3) * 0.3 for i in judge}
    svg = rel.reliability_plot(judge, human, title="Calibration of judge X")
    assert svg.startswith("<svg") and "Calibration of judge X" in svg
    assert "perfect calibration" in svg
    assert rel.reliability_plot({1: 2.0}, {1: 3.0}) == ""


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("gpt-4o-mini", "openai"),
        ("o3-mini", "openai"),
        ("openrouter/anthropic/claude-3.5-sonnet", "anthropic"),
        ("Claude-Opus-4", "anthropic"),
        ("meta-llama/Llama-3.1-70B-Instruct", "meta"),
        ("Qwen2.5-72B-Instruct", "alibaba"),
        ("gemini-1.5-pro", "google"),
        ("mixtral-8x7b", "mistral"),
        ("deepseek-r1", "deepseek"),
        ("my-own-model", "my-own-model"),
    ],
)
def test_model_names_map_to_their_family(name, family):
    assert rel.model_family(name) == family


def test_style_intervals_survive_resamples_that_leave_a_coefficient_unidentified():
    # Three ideas, two conditions, a handful of games: many vertex resamples drop an
    # idea or a feature's variation, and their refits are singular. They give no draw;
    # the fit and the intervals from the other draws stand.
    from judging.methods.reliability import style_bt_intervals

    features = {
        "h1": {"length": 100.0, "markdown_density": 0.0, "list_items": 0.0},
        "a1": {"length": 300.0, "markdown_density": 4.0, "list_items": 5.0},
        "a2": {"length": 120.0, "markdown_density": 1.0, "list_items": 0.0},
    }
    groups = {"h1": "Human", "a1": "AI", "a2": "AI"}
    games = [("h1", "a1", 0.0), ("a1", "h1", 1.0), ("h1", "a2", 1.0), ("a2", "h1", 0.5)]
    fit, ratings, beta = style_bt_intervals(games, features, groups, n_boot=50, seed=1)
    assert set(ratings) == {"Human", "AI"} and "length" in beta
    assert all(np.isfinite(r.value) for r in ratings.values())


def test_the_style_fit_takes_a_game_it_predicts_with_certainty_without_a_warning():
    """A resample can leave a game the fit is all but sure of (its log-odds below about
    -709): e^-eta overflows, and the probability is its limit, 0, with no RuntimeWarning."""
    import warnings

    from judging.methods.reliability import _sigmoid

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = _sigmoid(np.array([-1000.0, -20.0, 0.0, 20.0, 1000.0]))
    assert p[0] == 0.0 and p[-1] == 1.0 and p[2] == 0.5
    assert p[1] == pytest.approx(1 / (1 + math.exp(20))) and p[3] == pytest.approx(
        1 / (1 + math.exp(-20))
    )


def test_style_variance_inflation_matches_the_regression_of_each_column_on_the_others():
    games, features, groups = _style_world(5)
    rated = ("g0", "g1", "g2")
    fit = rel.fit_style_bt(games, features, groups, rated=rated)
    x, _ = _design(games, features, groups, rated)
    for k, name in enumerate(rel.STYLE_COVARIATES):
        j = 2 + k  # after the two group columns
        others = np.delete(x, j, axis=1)  # the position column is the constant
        r2 = sm.OLS(x[:, j], others).fit().rsquared
        assert fit.vif[name] == pytest.approx(1 / (1 - r2), rel=1e-8)
        assert fit.vif[name] < 2  # independent features in this world
    assert math.isnan(fit.vif["position"])
    # A resample counts a game as often as it was drawn, as the fit does.
    counts = np.random.default_rng(0).integers(0, 3, len(games))
    boot = rel.fit_style_bt(games, features, groups, rated=rated, weights=counts)
    keep = np.repeat(np.arange(len(games)), counts)
    r2 = sm.OLS(x[keep, 2], np.delete(x[keep], 2, axis=1)).fit().rsquared
    assert boot.vif["length"] == pytest.approx(1 / (1 - r2), rel=1e-8)


def test_style_features_that_move_together_are_flagged_as_not_separable():
    games, features, groups = _style_world(6)
    rng = np.random.default_rng(6)
    for f in features.values():  # markdown grows with length, as in generated ideas
        f["markdown_density"] = f["length"] / 100 * float(rng.uniform(0.97, 1.03))
    fit = rel.fit_style_bt(games, features, groups)
    assert fit.vif["length"] > rel.VIF_LIMIT and fit.vif["markdown_density"] > rel.VIF_LIMIT
    assert fit.vif["list_items"] < 2
    for f in features.values():  # exactly: a constant count of marks, density ∝ 1/length
        f["markdown_density"] = 700 / f["length"]
    exact = rel.fit_style_bt(games, features, groups)
    assert exact.vif["length"] == math.inf and exact.vif["markdown_density"] == math.inf
