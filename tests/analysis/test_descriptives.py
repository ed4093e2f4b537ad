"""Descriptive tables and the frame contract, on the released Si et al. reviews."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from studies.analysis import descriptives as desc
from studies.analysis.frame import metric_columns, unique_reviews, validate_frame
from studies.analysis.simulate import simulate_study

METRICS = ["novelty", "excitement", "feasibility", "effectiveness", "overall"]

# si2024 README, Pearson over the 337 rows.
CORRELATIONS_337 = np.array(
    [
        [1, 0.731, -0.087, 0.395, 0.738],
        [0.731, 1, -0.048, 0.593, 0.860],
        [-0.087, -0.048, 1, 0.210, 0.071],
        [0.395, 0.593, 0.210, 1, 0.657],
        [0.738, 0.860, 0.071, 0.657, 1],
    ]
)


def test_validate_frame_names_every_missing_column(si2024_frame):
    broken = si2024_frame.drop(columns=["topic", "overall"])
    with pytest.raises(ValueError, match=r"\['topic', 'overall'\]"):
        validate_frame(broken, METRICS)


def test_validate_frame_rejects_text_scores_and_no_metrics(si2024_frame):
    with pytest.raises(ValueError, match="numeric"):
        validate_frame(si2024_frame.assign(overall="5"), METRICS)
    with pytest.raises(ValueError, match="metric"):
        validate_frame(si2024_frame, [])


def test_si2024_frame_satisfies_the_contract(si2024_frame):
    validate_frame(si2024_frame, METRICS)
    assert metric_columns(si2024_frame) == METRICS
    assert len(unique_reviews(si2024_frame)) == 296


def test_summary_reproduces_published_means_and_both_sds(si2024_frame):
    table = desc.summarize(si2024_frame, METRICS).set_index(["metric", "condition"])
    assert len(table) == 15
    human = table.loc[("novelty", "Human")]
    assert human["n"] == 119
    assert round(human["mean"], 4) == 4.8403
    assert round(human["sd_pop"], 4) == 1.7916  # np.std, what the released scripts print
    assert round(human["sd"], 4) == 1.7992
    assert human["median"] == 5
    assert np.isclose(human["se"], human["sd"] / np.sqrt(119))
    assert round(table.loc[("overall", "AI_Rerank"), "mean"], 4) == 5.3394


def test_summary_keeps_the_requested_condition_order(si2024_frame):
    table = desc.summarize(si2024_frame, ["overall"], conditions=["Human", "AI"])
    assert table["condition"].tolist() == ["Human", "AI"]


def test_correlations_reproduce_the_released_matrix(si2024_frame):
    corr = desc.correlations(si2024_frame, METRICS)
    assert list(corr.columns) == METRICS
    np.testing.assert_array_equal(corr.to_numpy().round(3), CORRELATIONS_337)


def test_correlations_on_unique_reviews_differ_from_the_337_rows(si2024_frame):
    uniq = desc.correlations(si2024_frame, METRICS, rows="unique")
    assert round(uniq.loc["overall", "excitement"], 3) == 0.857
    spearman = desc.correlations(si2024_frame, METRICS, method="spearman")
    assert spearman.loc["overall", "excitement"] > 0.8


def test_per_topic_counts_rows_and_gives_t_intervals(si2024_frame):
    table = desc.per_topic(si2024_frame, METRICS, ["Human", "AI", "AI_Rerank"])
    nov = table[table["metric"] == "novelty"]
    assert nov.groupby("topic")["n"].sum().to_dict() == {
        "Factuality": 82, "Multilingual": 65, "Coding": 62, "Uncertainty": 44,
        "Safety": 32, "Bias": 28, "Math": 24,
    }  # fmt: skip
    row = table.iloc[0]
    x = si2024_frame.query("topic == @row.topic and condition == @row.condition")[row.metric]
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert np.isclose(row["ci_low"], lo) and np.isclose(row["ci_high"], hi)
    assert table["condition"].iloc[:5].tolist() == ["Human"] * 5


def test_review_quality_counts_unique_reviews_in_the_overall_row(si2024_frame):
    table = desc.review_quality(si2024_frame).set_index(["variable", "condition"])
    assert table.loc[("minutes", "(all)"), "n"] == 296
    assert table.loc[("minutes", "Human"), "n"] == 119
    assert table.loc[("familiarity", "AI"), "missing"] == 0
    gapped = si2024_frame.assign(minutes=si2024_frame["minutes"].where(lambda s: s < 60))
    gapped_table = desc.review_quality(gapped, ["minutes"]).set_index("condition")
    n_missing = int((si2024_frame["minutes"] >= 60).sum())
    assert gapped_table.loc[["AI", "AI_Rerank", "Human"], "missing"].sum() == n_missing


def test_assignment_table_says_reviewers_are_unavailable_on_si2024(si2024_frame):
    table = desc.assignment_table(si2024_frame)
    json.dumps(table.as_dict(), allow_nan=False)
    assert (table.n_rows, table.n_reviews, table.n_ideas) == (337, 296, 129)
    assert table.reviews_per_idea["min"] == 2 and table.reviews_per_idea["max"] == 4
    assert table.reviews_per_idea_by_condition["Human"]["n"] == 49
    reviewers = table.reviewers
    assert reviewers["available"] is False
    assert "no reviewer ids" in reviewers["reason"]
    assert reviewers["reviews_per_reviewer"] is None
    assert reviewers["rows_without_reviewer"] == 337


def test_assignment_table_describes_reviewers_when_ids_exist():
    df = simulate_study(seed=5, n_reviewers=40, n_ideas_per_condition=20, load=(2, 5))
    reviewers = desc.assignment_table(df).reviewers
    assert reviewers["available"] is True and reviewers["reason"] is None
    assert reviewers["n_reviewers"] == 40
    assert reviewers["conditions_per_reviewer"]["min"] >= 2
    per = df.groupby("reviewer_id").size()
    assert reviewers["reviews_per_reviewer"]["mean"] == pytest.approx(per.mean())
    assert (
        2
        <= reviewers["reviews_per_reviewer"]["min"]
        <= reviewers["reviews_per_reviewer"]["max"]
        <= 5
    )


def test_summary_of_a_condition_with_one_review_has_no_sd():
    df = pd.DataFrame(
        {"review_id": ["a", "b", "c"], "idea_id": ["i", "j", "k"], "topic": ["t"] * 3,
         "condition": ["H", "H", "X"], "overall": [1.0, 3.0, 4.0]}
    )  # fmt: skip
    row = desc.summarize(df, ["overall"]).set_index("condition").loc["X"]
    assert row["n"] == 1 and row["mean"] == 4 and np.isnan(row["sd"]) and row["sd_pop"] == 0
