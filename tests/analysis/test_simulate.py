"""Simulated studies follow the assignment rules; power behaves at both ends."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest

from studies.analysis.frame import validate_frame
from studies.analysis.simulate import draw_layout, power, simulate_study

FAST = ("by_review", "by_idea", "by_reviewer")


def _check_assignment(df: pd.DataFrame, load: tuple[int, int]) -> None:
    by = df.groupby("reviewer_id")
    assert not df.duplicated(["reviewer_id", "idea_id"]).any()
    assert (by["condition"].nunique() >= 2).all()
    assert by.size().between(*load).all()


def test_simulated_study_follows_the_contract_and_the_assignment_rules():
    df = simulate_study(seed=1)
    validate_frame(df, ["overall"])
    assert len(df) == 3 * 49 * 2
    assert df["review_id"].is_unique and df["reviewer_id"].notna().all()
    assert df.groupby("idea_id").size().eq(2).all()
    assert df.groupby("condition")["idea_id"].nunique().to_dict() == {
        "Human": 49, "AI": 49, "AI_Rerank": 49,
    }  # fmt: skip
    assert df["topic"].nunique() == 7 and df["reviewer_id"].nunique() == 79
    _check_assignment(df, (2, 7))


def test_a_range_of_reviews_per_idea_still_follows_the_rules():
    for seed in range(5):
        df = simulate_study(
            seed=seed, reviews_per_idea=(2, 4), n_reviewers=60, n_ideas_per_condition=30
        )
        counts = df.groupby("idea_id").size()
        assert counts.between(2, 4).all() and counts.nunique() > 1
        _check_assignment(df, (2, 7))


def test_the_same_seed_gives_the_same_study():
    pd.testing.assert_frame_equal(simulate_study(seed=9), simulate_study(seed=9))
    assert not simulate_study(seed=9)["overall"].equals(simulate_study(seed=10)["overall"])


def test_discretized_scores_are_integers_on_the_form_scale():
    df = simulate_study(seed=2, discretize=True, var_residual=9.0, metrics=("novelty", "overall"))
    for m in ("novelty", "overall"):
        assert df[m].between(1, 10).all() and (df[m] == df[m].round()).all()


def test_without_noise_condition_means_equal_the_true_effects():
    df = simulate_study(
        seed=3, conditions={"Human": 0.0, "AI": 1.5}, var_reviewer=0, var_idea=0,
        var_topic=0, var_residual=0, grand_mean=4.0,
    )  # fmt: skip
    assert df.groupby("condition")["overall"].mean().to_dict() == {"AI": 5.5, "Human": 4.0}


def test_impossible_loads_and_a_nonzero_baseline_are_rejected():
    with pytest.raises(ValueError, match="cannot be spread"):
        simulate_study(n_reviewers=10, load=(2, 3))
    with pytest.raises(ValueError, match="baseline"):
        simulate_study(conditions={"Human": 0.5, "AI": 1.0})


def test_a_large_effect_is_detected_by_every_test():
    res = power(
        n_reps=20, tests=FAST, seed=1, conditions={"Human": 0.0, "AI": 2.5},
        n_ideas_per_condition=30, n_reviewers=40,
    )  # fmt: skip
    assert set(res["test"]) == set(FAST) and (res["condition"] == "AI").all()
    assert (res["n_valid"] == 20).all()
    assert (res["power"] >= 0.95).all()


def test_with_no_effect_each_test_rejects_at_about_alpha():
    n_reps = 300
    res = power(
        n_reps=n_reps, tests=FAST, seed=2, alpha=0.05, conditions={"Human": 0.0, "AI": 0.0},
        n_ideas_per_condition=20, n_reviewers=20, load=(3, 5),
        var_reviewer=0.0, var_idea=0.0, var_topic=0.0, var_residual=2.0,
    )  # fmt: skip
    # With only residual noise every test is exact; 3.5 Monte Carlo SEs of slack.
    slack = 3.5 * np.sqrt(0.05 * 0.95 / n_reps)
    assert (res["power"] - 0.05).abs().max() < slack, res


def test_unknown_tests_are_rejected():
    with pytest.raises(ValueError, match="unknown test"):
        power(n_reps=1, tests=("by_magic",))


@pytest.mark.skipif(
    importlib.util.find_spec("studies.analysis.mixed") is None,
    reason="studies.analysis.mixed (fit_mixed) is not written yet",
)
def test_power_runs_the_mixed_model_when_it_is_available():
    res = power(
        n_reps=2, tests=("mixed",), seed=4, conditions={"Human": 0.0, "AI": 3.0},
        n_ideas_per_condition=12, n_reviewers=12, load=(2, 4), mixed_options={"n_starts": 1},
    )  # fmt: skip
    assert res["test"].tolist() == ["mixed"]
    assert res["n_valid"].iloc[0] == 2 and res["power"].iloc[0] == 1.0


def test_the_layout_is_the_simulation_engines_assignment():
    df = simulate_study(
        seed=11, n_reviewers=30, n_ideas_per_condition=15, reviews_per_idea=(2, 4),
        conditions={"Human": 0.0, "AI": 1.0, "AI_Rerank": 1.0}, n_topics=3, load=(2, 6),
    )  # fmt: skip
    lay = draw_layout(
        n_reviewers=30, n_ideas_per_condition=15, n_conditions=3, reviews_per_idea=(2, 4),
        n_topics=3, load=(2, 6), rng=np.random.default_rng(11),
    )  # fmt: skip
    assert df["idea_id"].tolist() == [f"idea{i}" for i in lay.idea]
    assert df["reviewer_id"].tolist() == [f"rev{r}" for r in lay.reviewer]
    assert df["topic"].tolist() == [f"topic{t}" for t in lay.idea_topic[lay.idea]]
