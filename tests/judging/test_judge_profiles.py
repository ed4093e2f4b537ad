"""The simulated judge's behaviour profiles: each answer follows the stated model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from judging.methods.judge_profiles import (
    PROFILES,
    BehaviourProfile,
    IdeaTraits,
    direct_score,
    normal,
    pairwise_answer,
    pairwise_probability,
    simulate,
    traits_from_text,
    uniform,
)

A = IdeaTraits(quality=0.5, length=400, own_family=True)
B = IdeaTraits(quality=-0.2, length=200)


def test_the_pairwise_probability_adds_each_effect_on_the_log_odds():
    profile = BehaviourProfile(
        discrimination=1.5, position=0.4, length_preference=2.0, self_preference=0.8
    )
    eta = 1.5 * 0.7 + 0.4 + 2.0 * (200 / 600) + 0.8
    assert pairwise_probability(profile, A, B) == pytest.approx(1 / (1 + math.exp(-eta)))
    swapped = 1.5 * -0.7 + 0.4 + 2.0 * (-200 / 600) - 0.8
    assert pairwise_probability(profile, B, A) == pytest.approx(1 / (1 + math.exp(-swapped)))


def test_a_repeat_keeps_the_first_answer_unless_it_is_drawn_afresh():
    profile = BehaviourProfile(repetition_noise=0.3)
    p = pairwise_probability(profile, A, B)
    assert pairwise_answer(profile, A, B, p - 0.01) == "A"
    assert pairwise_answer(profile, A, B, p + 0.01) == "B"
    # Not redrawn (0.5 ≥ 0.3): the first answer stands whatever the fresh uniform.
    assert pairwise_answer(profile, A, B, p - 0.01, again=(0.5, 0.999)) == "A"
    # Redrawn (0.1 < 0.3): the fresh uniform decides.
    assert pairwise_answer(profile, A, B, p - 0.01, again=(0.1, 0.999)) == "B"


def test_a_direct_score_is_rounded_and_cut_to_the_scale():
    profile = BehaviourProfile(
        score_intercept=5.5, score_slope=1.2, score_self=0.8, idea_noise=0.8, repeat_sd=0.5
    )
    raw = 5.5 + 1.2 * 0.5 + 0.8 + 0.8 * 0.3 + 0.5 * -0.4
    assert direct_score(profile, A, 0.3, -0.4) == round(raw)
    assert direct_score(profile, A, 9.0, 0.0) == 10
    assert direct_score(profile, B, -9.0, 0.0) == 1


def test_the_shared_random_numbers_are_fixed_by_their_parts_and_distributed_as_stated():
    assert uniform("prompt", 1) == uniform("prompt", 1) != uniform("prompt", 2)
    us = np.array([uniform("u", k) for k in range(3000)])
    assert us.min() > 0 and us.max() < 1
    assert stats.kstest(us, "uniform").pvalue > 0.01
    zs = np.array([normal("z", k) for k in range(3000)])
    assert stats.kstest(zs, "norm").pvalue > 0.01


def test_a_profile_refuses_impossible_settings():
    with pytest.raises(ValueError, match="repetition_noise"):
        BehaviourProfile(repetition_noise=1.5)
    with pytest.raises(ValueError, match="repeat_sd"):
        BehaviourProfile(repeat_sd=-1)
    with pytest.raises(ValueError, match="scale"):
        BehaviourProfile(scale=(5, 5))


def test_a_simulated_study_answers_as_often_as_its_model_says():
    profile = PROFILES["all"]
    study = simulate(profile, seed=11, n_ideas=200, n_pairs=3000, repeat_share=0.25)
    firsts = [c for c in study.pair_calls if c.repeat == 0]
    repeats = [c for c in study.pair_calls if c.repeat == 1]
    assert len(firsts) == 3000
    assert len(repeats) / len(firsts) == pytest.approx(0.25, abs=0.03)
    predicted = np.array(
        [pairwise_probability(profile, study.ideas[c.first], study.ideas[c.second]) for c in firsts]
    )
    observed = np.array([c.answer == "A" for c in firsts], dtype=float)
    # The share of "A" answers matches the model's mean within binomial error, and so does
    # the share among the likeliest and unlikeliest thirds (calibration of the draws).
    for mask in (
        np.ones(len(firsts), bool),
        predicted > np.quantile(predicted, 2 / 3),
        predicted < np.quantile(predicted, 1 / 3),
    ):
        se = math.sqrt((predicted[mask] * (1 - predicted[mask])).sum()) / mask.sum()
        assert abs(observed[mask].mean() - predicted[mask].mean()) < 4 * se
    # Reviewers rate exactly the judged pairs of one own-family and one other idea.
    mixed = {
        (c.first, c.second)
        for c in firsts
        if study.ideas[c.first].own_family != study.ideas[c.second].own_family
    }
    assert set(study.human_pairs) == mixed
    assert {len(v) for v in study.human_scores.values()} == {3}


def test_traits_from_a_text_are_fixed_by_the_text():
    text = "A proposal about  sparse attention\nwith five more words here."
    t = traits_from_text(text, own_family=True)
    assert t.length == 10 and t.own_family
    assert t.quality == normal("quality", text) == traits_from_text(text).quality
    assert traits_from_text(text + "!").quality != t.quality
