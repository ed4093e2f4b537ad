"""Tests 1-3 against the released Si et al. numbers and independent computations."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats import weightstats

from studies.analysis import hypothesis as hyp
from studies.analysis.simulate import simulate_study

METRICS = ["novelty", "excitement", "feasibility", "effectiveness", "overall"]

# si2024 README: metric -> (Human mean, AI mean, AI_Rerank mean,
#   (AI t, p, p_bonf), (AI_Rerank t, p, p_bonf))
TEST1 = {
    "novelty": (4.8403, 5.6422, 5.8073, (3.3936, 0.000815, 0.00408), (4.2097, 3.69e-05, 0.000185)),
    "excitement": (4.5546, 5.1927, 5.4587, (2.6510, 0.00859, 0.043), (3.6659, 0.000307, 0.00154)),
    "feasibility": (6.6134, 6.3394, 6.4404, (-1.0654, 0.288, 1), (-0.7185, 0.473, 1)),
    "effectiveness": (5.1345, 5.4679, 5.5505, (1.5006, 0.135, 0.674), (1.9022, 0.0584, 0.292)),
    "overall": (4.6807, 4.8532, 5.3394, (0.7209, 0.472, 1), (2.6879, 0.00773, 0.0386)),
}
TEST2 = {
    "novelty": (4.8639, 5.6224, 5.7823, (2.7965, 0.00625, 0.0313), (3.8460, 0.000219, 0.00109)),
    "excitement": (4.5578, 5.1837, 5.4456, (2.4615, 0.0157, 0.0783), (3.4465, 0.000852, 0.00426)),
    "feasibility": (6.5340, 6.3010, 6.4150, (-0.8227, 0.413, 1), (-0.4488, 0.655, 1)),
    "effectiveness": (5.1020, 5.4847, 5.5714, (1.5825, 0.117, 0.584), (2.1532, 0.0338, 0.169)),
    "overall": (4.6871, 4.8333, 5.3197, (0.5721, 0.569, 1), (2.5821, 0.0113, 0.0567)),
}
N_TEST1 = {"Human": 119, "AI": 109, "AI_Rerank": 109}
N_TEST2 = {"Human": 49, "AI": 49, "AI_Rerank": 49}


def _by_key(result: dict) -> dict[tuple[str, str], dict]:
    return {(c["metric"], c["condition"]): c for c in result["comparisons"]}


def _check_against_table(result: dict, table: dict, n: dict[str, int]) -> None:
    comps = _by_key(result)
    assert len(comps) == 10
    for metric, (m_h, m_ai, m_rr, ai, rr) in table.items():
        for cond, mean, (t, p, p_bonf) in (("AI", m_ai, ai), ("AI_Rerank", m_rr, rr)):
            c = comps[(metric, cond)]
            assert c["n"] == n[cond] and c["n_baseline"] == n["Human"]
            assert abs(c["mean"] - mean) < 0.005, (metric, cond)
            assert abs(c["mean_baseline"] - m_h) < 0.005, metric
            assert abs(c["t"] - t) < 1e-3, (metric, cond, c["t"])
            assert math.isclose(c["p_two_sided"], p, rel_tol=0.01), (metric, cond, c["p_two_sided"])
            assert math.isclose(c["p_two_sided_bonferroni"], p_bonf, rel_tol=0.01), (metric, cond)


def test_review_level_test_reproduces_table_7(si2024_frame):
    result = hyp.test_by_review(si2024_frame, METRICS, baseline="Human")
    assert result["available"] and result["conditions"] == ["AI", "AI_Rerank"]
    assert result["published"]["n_corrected"] == 5
    assert result["published"]["alternative"] == "two-sided"
    _check_against_table(result, TEST1, N_TEST1)


def test_idea_level_test_reproduces_table_8(si2024_frame):
    result = hyp.test_by_idea(si2024_frame, METRICS, baseline="Human")
    _check_against_table(result, TEST2, N_TEST2)


def test_results_are_json_serialisable_plain_python(si2024_frame):
    result = hyp.test_by_review(si2024_frame, METRICS, baseline="Human")
    text = json.dumps(result, allow_nan=False)
    assert json.loads(text) == result
    comp = result["comparisons"][0]
    assert type(comp["t"]) is float and type(comp["n"]) is int
    assert list(comp) == [
        "metric", "condition", "baseline", "n", "mean", "sd", "n_baseline", "mean_baseline",
        "sd_baseline", "diff", "se", "t", "df", "p_two_sided", "p_two_sided_bonferroni",
        "ci_low", "ci_high",
    ]  # fmt: skip


def test_reviewer_test_on_si2024_is_unavailable_with_a_reason(si2024_frame):
    result = hyp.test_by_reviewer(si2024_frame, METRICS, baseline="Human")
    assert result["available"] is False
    assert "no reviewer ids" in result["reason"]
    assert result["comparisons"] == []
    json.dumps(result, allow_nan=False)


def test_conditions_restrict_the_comparisons_and_bonferroni_counts_metrics(si2024_frame):
    result = hyp.test_by_review(
        si2024_frame, ["novelty", "overall"], baseline="Human", conditions=["AI"]
    )
    assert [(c["metric"], c["condition"]) for c in result["comparisons"]] == [
        ("novelty", "AI"),
        ("overall", "AI"),
    ]
    nov = result["comparisons"][0]
    assert math.isclose(nov["p_two_sided_bonferroni"], min(1, 2 * nov["p_two_sided"]))


def test_unknown_baseline_is_an_error(si2024_frame):
    with pytest.raises(ValueError, match="baseline"):
        hyp.test_by_review(si2024_frame, METRICS, baseline="human")


def test_welch_matches_statsmodels_and_scipy_on_random_data():
    rng = np.random.default_rng(7)
    for _ in range(20):
        nx, ny = rng.integers(3, 60, size=2)
        x = rng.normal(rng.normal(), rng.uniform(0.5, 3), nx)
        y = rng.normal(rng.normal(), rng.uniform(0.5, 3), ny)
        ours = hyp.welch(x, y)
        t, p, dof = weightstats.ttest_ind(x, y, usevar="unequal")
        lo, hi = weightstats.CompareMeans(
            weightstats.DescrStatsW(x), weightstats.DescrStatsW(y)
        ).tconfint_diff(usevar="unequal")
        ref = stats.ttest_ind(x, y, equal_var=False)
        assert math.isclose(ours.t, t, rel_tol=1e-10)
        assert math.isclose(ours.p, p, rel_tol=1e-8)
        assert math.isclose(ours.p, ref.pvalue, rel_tol=1e-8)
        assert math.isclose(ours.df, dof, rel_tol=1e-10)
        assert math.isclose(ours.ci_low, lo, rel_tol=1e-8)
        assert math.isclose(ours.ci_high, hi, rel_tol=1e-8)


def test_welch_with_too_few_points_gives_no_statistic():
    out = hyp.welch(np.array([1.0]), np.array([1.0, 2.0, 3.0]))
    assert math.isnan(out.t) and math.isnan(out.p)


def test_reviewer_test_matches_a_hand_computation():
    # r1: AI mean 6, Human mean 4 -> +2; r2: AI 5, Human 5 -> 0; r3: AI 7.5, Human 4.5 -> +3;
    # r4 saw only Human and is left out; the row without a reviewer id is ignored.
    rows = [
        ("r1", "AI", 6), ("r1", "Human", 3), ("r1", "Human", 5),
        ("r2", "AI", 5), ("r2", "Human", 5),
        ("r3", "AI", 7), ("r3", "AI", 8), ("r3", "Human", 4.5),
        ("r4", "Human", 9),
        (None, "AI", 1),
    ]  # fmt: skip
    df = pd.DataFrame(rows, columns=["reviewer_id", "condition", "overall"])
    df["idea_id"] = [f"i{k}" for k in range(len(df))]
    result = hyp.test_by_reviewer(df, ["overall"], baseline="Human")
    (c,) = result["comparisons"]
    d = np.array([2.0, 0.0, 3.0])
    mean, sd = 5 / 3, np.sqrt(((d - 5 / 3) ** 2).sum() / 2)
    t = mean / (sd / np.sqrt(3))
    assert c["n"] == 3 and c["df"] == 2
    assert math.isclose(c["diff"], mean) and math.isclose(c["sd"], sd)
    assert math.isclose(c["mean"], (6 + 5 + 7.5) / 3)
    assert math.isclose(c["mean_baseline"], (4 + 5 + 4.5) / 3)
    assert math.isclose(c["t"], t)
    assert math.isclose(c["p_two_sided"], 2 * stats.t.sf(t, 2))
    half = stats.t.ppf(0.975, 2) * sd / np.sqrt(3)
    assert math.isclose(c["ci_low"], mean - half) and math.isclose(c["ci_high"], mean + half)


def test_reviewer_test_on_simulated_study_matches_groupby_and_scipy():
    df = simulate_study(seed=3, metrics=("overall", "novelty"))
    result = hyp.test_by_reviewer(df, ["overall", "novelty"], baseline="Human")
    comps = _by_key(result)
    for metric in ("overall", "novelty"):
        means = df.groupby(["reviewer_id", "condition"])[metric].mean().unstack()
        for cond in ("AI", "AI_Rerank"):
            d = (means[cond] - means["Human"]).dropna()
            ref = stats.ttest_1samp(d, 0.0)
            c = comps[(metric, cond)]
            assert c["n"] == len(d)
            assert math.isclose(c["diff"], d.mean())
            assert math.isclose(c["t"], ref.statistic, rel_tol=1e-10)
            assert math.isclose(c["p_two_sided"], ref.pvalue, rel_tol=1e-8)
            assert math.isclose(c["p_two_sided_bonferroni"], min(1.0, 2 * ref.pvalue), rel_tol=1e-8)


def test_idea_test_averages_each_idea_once_per_condition():
    df = pd.DataFrame(
        {
            "idea_id": ["a", "a", "b", "c", "c", "c", "d", "d"],
            "condition": ["H", "H", "H", "X", "X", "X", "X", "X"],
            "overall": [1.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, np.nan],
        }
    )
    (c,) = hyp.test_by_idea(df, ["overall"], baseline="H")["comparisons"]
    assert c["n"] == 2 and c["n_baseline"] == 2
    assert c["mean"] == 7.0 and c["mean_baseline"] == 3.0
