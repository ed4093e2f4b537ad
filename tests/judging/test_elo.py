"""LigBench Elo on 0–5: one step by hand, the clamp, stopping rules and venue debiasing."""

from __future__ import annotations

import math
import random

import pytest

from judging.methods.elo import (
    GAMMA,
    K_MAX,
    D,
    EloChain,
    debias_by_venue,
    elo_step,
    expected_score,
    k_factor,
    run_elo,
    run_elo_dimensions,
    soft_clamp,
)


def test_the_paper_parameters_are_the_defaults():
    assert (D, K_MAX, GAMMA) == (1.5, 0.5, 0.95)


def test_one_step_matches_the_hand_computation():
    # s = 2.5 beats a reference at 3.0 at t = 0:
    # E = 1/(1 + 10^(0.5/1.5)) = 1/(1 + 2.154435) = 0.317014
    # raw = 2.5 + 0.5·(1 − 0.317014) = 2.841493
    # C(raw) = 2.5 + 2.5·tanh(0.341493/2.5) = 2.839385
    step = elo_step(2.5, 3.0, 1.0, t=0)
    assert step.expected == pytest.approx(0.317014, abs=1e-6)
    assert step.k == 0.5
    assert step.raw == pytest.approx(2.841493, abs=1e-6)
    assert step.score_after == pytest.approx(2.839385, abs=1e-6)


def test_the_second_step_uses_the_decayed_k():
    # From 2.839385, losing to a reference at 2.0 at t = 1: K = 0.5·0.95 = 0.475,
    # E = 1/(1 + 10^((2.0 − 2.839385)/1.5)) = 0.783894, raw = 2.839385 − 0.475·0.783894.
    step = elo_step(2.839385, 2.0, 0.0, t=1)
    assert step.k == pytest.approx(0.475)
    assert step.expected == pytest.approx(0.783894, abs=1e-6)
    assert step.raw == pytest.approx(2.467035, abs=1e-6)
    assert step.score_after == pytest.approx(2.467037, abs=1e-6)


def test_k_decays_geometrically():
    assert k_factor(0) == 0.5
    assert k_factor(10) == pytest.approx(0.5 * 0.95**10)


def test_expected_scores_of_two_sides_sum_to_one_and_equal_scores_give_a_half():
    assert expected_score(3.1, 1.7) + expected_score(1.7, 3.1) == pytest.approx(1.0)
    assert expected_score(2.0, 2.0) == 0.5


def test_the_clamp_fixes_the_centre_stays_inside_zero_to_five_and_is_increasing():
    assert soft_clamp(2.5) == 2.5
    xs = [-50, -5, -1, 0, 1, 2.5, 4, 5, 6, 50]
    ys = [soft_clamp(x) for x in xs]
    assert all(0 <= y <= 5 for y in ys)
    assert all(0 < y < 5 for y in ys[1:-1])
    assert all(a < b for a, b in zip(ys[1:-1], ys[2:-1], strict=False))
    assert ys == sorted(ys)
    # Near the centre it is close to the identity (C'(2.5) = 1).
    assert soft_clamp(2.51) - 2.5 == pytest.approx(0.01, rel=1e-4)


def test_an_outcome_other_than_win_tie_or_loss_is_refused():
    with pytest.raises(ValueError):
        elo_step(2.5, 2.5, 0.7, t=0)


def test_a_tie_against_an_equal_reference_converges_at_once():
    chain = run_elo([("r1", 2.5, 0.5), ("r2", 4.0, 1.0)])
    assert chain.converged
    assert len(chain.steps) == 1
    assert chain.score == 2.5


def test_the_chain_stops_when_the_change_falls_below_epsilon():
    rng = random.Random(0)
    true = 3.6

    def comparisons():
        while True:
            ref = rng.uniform(0.5, 4.5)
            p = expected_score(true, ref)
            r = rng.random()
            yield (f"p{ref:.3f}", ref, 1.0 if r < p else 0.0)

    chain = run_elo(comparisons(), max_steps=500)
    assert chain.converged
    assert abs(chain.steps[-1].delta) < 1e-3
    assert all(abs(s.delta) >= 1e-3 for s in chain.steps[:-1])
    assert chain.score == chain.steps[-1].score_after
    # The history is a chain: each step starts where the previous one ended.
    assert all(
        a.score_after == b.score_before for a, b in zip(chain.steps, chain.steps[1:], strict=False)
    )
    assert [s.t for s in chain.steps] == list(range(len(chain.steps)))


def test_the_chain_stops_after_max_steps():
    alternating = [(i, 2.5 if i % 2 else 1.0, float(i % 2)) for i in range(100)]
    chain = run_elo(alternating, max_steps=5, epsilon=1e-9)
    assert chain.stopped == "max_steps"
    assert len(chain.steps) == 5


def test_running_out_of_references_is_reported():
    chain = run_elo([("r", 4.0, 1.0)])
    assert chain.stopped == "exhausted"
    assert chain.score > 2.5


def test_the_comparison_stream_is_not_read_past_the_stop():
    asked = []

    def lazily():
        for i in range(10):
            asked.append(i)
            yield (i, 2.5, 0.5)

    run_elo(lazily())
    assert asked == [0]


def test_an_unparseable_answer_is_skipped_without_advancing_t():
    chain = EloChain.start().advance("r1", 3.0, None).advance("r2", 3.0, 1.0)
    assert chain.skipped == 1
    assert len(chain.steps) == 1 and chain.steps[0].t == 0


def test_dimensions_run_and_stop_independently():
    stream = [
        ("r1", {"rating": 2.5, "soundness": 4.0}, {"rating": 0.5, "soundness": 1.0}),
        ("r2", {"rating": 1.0, "soundness": 1.0}, {"rating": 1.0, "soundness": None}),
        ("r3", {"rating": 1.0, "soundness": 3.0}, {"rating": 1.0, "soundness": 0.0}),
    ]
    chains = run_elo_dimensions(stream, {"rating": 2.5, "soundness": 2.0})
    assert chains["rating"].converged and len(chains["rating"].steps) == 1
    assert chains["soundness"].stopped == "exhausted"
    assert len(chains["soundness"].steps) == 2
    assert chains["soundness"].skipped == 1
    assert chains["soundness"].steps[1].k == pytest.approx(0.475)


def test_venue_debiasing_shifts_each_venue_to_the_overall_mean():
    scores = {"p1": 3.0, "p2": 2.0, "p3": 4.0, "p4": 3.5, "p5": None}
    venues = {"p1": "ICLR24", "p2": "ICLR24", "p3": "NeurIPS24", "p4": "NeurIPS24", "p5": "X"}
    result = debias_by_venue(scores, venues)
    # μ_ICLR24 = 2.5, μ_NeurIPS24 = 3.75, μ_all = 12.5/4 = 3.125
    assert result.venue_means == {"ICLR24": 2.5, "NeurIPS24": 3.75}
    assert result.overall_mean == 3.125
    assert result.adjusted["p1"] == pytest.approx(3.0 - 2.5 + 3.125)
    assert result.adjusted["p3"] == pytest.approx(4.0 - 3.75 + 3.125)
    assert result.adjusted["p5"] is None
    # After the shift every venue has the same mean.
    iclr = (result.adjusted["p1"] + result.adjusted["p2"]) / 2
    neurips = (result.adjusted["p3"] + result.adjusted["p4"]) / 2
    assert iclr == pytest.approx(neurips) == pytest.approx(3.125)


def test_venue_debiasing_needs_a_venue_for_every_scored_paper():
    with pytest.raises(ValueError):
        debias_by_venue({"p1": 3.0}, {})
    with pytest.raises(ValueError):
        debias_by_venue({"p1": math.nan}, {"p1": "X"})
