"""The posterior over an idea's score (LigBench's "information" rule and the "posterior"
estimate), against an independent plain-Python computation on a finer grid."""

from __future__ import annotations

import random

import pytest

from judging.methods.elo import EloChain
from judging.methods.ligbench import (
    Schedule,
    next_reference,
    paper_order,
    posterior_of,
    replay,
    reported,
)
from judging.methods.ligbench_posterior import PosteriorChain, information
from tests.judging import posterior_reference as ref

POOL = {
    r: {"rating": s}
    for r, s in zip("abcdefgh", [0.5, 1.0, 1.5, 2.0, 3.0, 3.5, 4.0, 4.5], strict=True)
}
VERDICTS = [(3.0, 1.0), (4.0, 0.0), (3.5, 0.5), (1.0, 0.0), (2.0, 1.0)]
"""(reference score, outcome), including a tie and a loss against a far weaker reference."""


@pytest.mark.parametrize(
    ("prior_sd", "slope", "lapse"), [(0.5, 3.0, 0.3), (0.8, 1.5, 0.0), (0.35, 6.0, 0.1)]
)
def test_the_posterior_mean_and_sd_match_an_independent_computation(prior_sd, slope, lapse):
    chain = PosteriorChain.start(2.2, prior_sd)
    for i, (s_ref, outcome) in enumerate(VERDICTS):
        chain = chain.advance(i, s_ref, outcome, max_steps=99, slope=slope, lapse=lapse)
        m, sd = ref.mean_sd(ref.density(2.2, VERDICTS[: i + 1], prior_sd, slope, lapse))
        assert chain.score == pytest.approx(m, abs=2e-3)
        assert chain.sd == pytest.approx(sd, abs=2e-3)
        assert chain.steps[-1].score_after == chain.score and chain.steps[-1].sd_after == chain.sd
    assert chain.stopped is None and len(chain.steps) == len(VERDICTS)


def test_the_predictive_win_probability_before_a_step_is_the_posterior_average():
    chain = PosteriorChain.start(2.2, 0.5).advance("x", 3.0, 1.0, slope=3.0, lapse=0.3)
    points = ref.density(2.2, [(3.0, 1.0)], 0.5, 3.0, 0.3)
    after = chain.advance("y", 2.6, 0.0, slope=3.0, lapse=0.3)
    expected = sum(w * ref._p_win(s, 2.6, 3.0, 0.3) for s, w in points)
    assert after.steps[-1].expected == pytest.approx(expected, abs=2e-3)


def test_the_information_of_a_verdict_is_its_mutual_information_with_the_score():
    chain = PosteriorChain.start(2.2, 0.6)
    for s_ref, outcome in VERDICTS[:2]:
        chain = chain.advance(s_ref, s_ref, outcome, slope=3.0, lapse=0.2)
    points = ref.density(2.2, VERDICTS[:2], 0.6, 3.0, 0.2)
    for s_ref in (0.5, 2.0, 2.4, 3.0, 4.5):
        assert information(chain.weights, s_ref, 3.0, 0.2) == pytest.approx(
            ref.mutual_information(points, s_ref, 3.0, 0.2), abs=1e-4
        )


def test_the_information_rule_picks_the_unmet_reference_of_largest_information():
    rng = random.Random(5)
    schedule = Schedule(selection="information", prior_sd=0.6, slope=3.0, lapse=0.2)
    for _ in range(5):
        initial = rng.uniform(0.5, 4.5)
        played = [(r, {"rating": float(rng.random() < 0.5)}) for r in rng.sample(list(POOL), 3)]
        chains = replay({"rating": initial}, POOL, played, schedule)
        verdicts = [(POOL[r]["rating"], o["rating"]) for r, o in played]
        points = ref.density(initial, verdicts, 0.6, 3.0, 0.2)
        met = {r for r, _ in played}
        gain = {
            r: ref.mutual_information(points, POOL[r]["rating"], 3.0, 0.2)
            for r in POOL
            if r not in met
        }
        chosen = next_reference(chains, POOL, list(met), schedule, "idea")
        assert chosen not in met
        assert gain[chosen] == pytest.approx(max(gain.values()), abs=1e-4)


def test_the_lapse_rate_limits_what_one_wrong_verdict_against_a_far_reference_does():
    # The idea (prior at 3.5) loses to a reference at 0.5: with no lapse this verdict is
    # near-impossible unless the score is very low, so it drags the estimate far down.
    moved = {
        lapse: 3.5 - PosteriorChain.start(3.5, 0.7).advance("x", 0.5, 0.0, lapse=lapse).score
        for lapse in (0.0, 0.3)
    }
    assert moved[0.3] < 0.1 < moved[0.0]


def test_a_posterior_stops_on_its_sd_or_t_max_and_skips_unparseable_answers():
    chain = PosteriorChain.start(2.5, 0.5)
    chain = chain.advance("a", 2.5, None)
    assert chain.skipped == 1 and chain.steps == () and chain.score == pytest.approx(2.5)
    loose = chain.advance("a", 2.5, 1.0, sd_stop=0.49)
    assert loose.stopped == "converged" and loose.sd < 0.49
    assert loose.advance("b", 3.0, 1.0) is loose  # a stopped posterior ignores later answers
    capped = chain.advance("a", 2.5, 1.0, max_steps=2).advance("b", 3.0, 0.0, max_steps=2)
    assert capped.stopped == "max_steps" and len(capped.steps) == 2
    assert chain.finish().stopped == "exhausted"
    with pytest.raises(ValueError, match="outcome"):
        chain.advance("a", 2.5, 0.7)


def test_the_posterior_estimate_reads_the_paper_chain_s_verdicts_and_keeps_its_stop():
    order = paper_order(list(POOL), 0, "x")
    outcomes = [1.0, 0.0, 1.0, 0.5, 1.0, 0.0, 1.0, 1.0]
    played = [(r, {"rating": o}) for r, o in zip(order, outcomes, strict=True)]
    chain_rule = Schedule(epsilon=0.02)
    posterior_rule = Schedule(epsilon=0.02, estimate="posterior", prior_sd=0.5)
    chain = replay({"rating": 2.4}, POOL, played, chain_rule)["rating"]
    same = replay({"rating": 2.4}, POOL, played, posterior_rule)["rating"]
    assert isinstance(chain, EloChain) and same == chain  # the same steps and stop
    assert reported(chain, chain_rule) == chain.score
    used = [(s.reference_score, s.outcome) for s in chain.steps]
    assert reported(chain, posterior_rule) == pytest.approx(
        ref.posterior_mean(2.4, used, 0.5, posterior_rule.slope, posterior_rule.lapse), abs=2e-3
    )
    assert posterior_of(chain, posterior_rule).steps[-1].reference == chain.steps[-1].reference


def test_schedule_options_are_checked():
    for bad in (
        {"selection": "best"},
        {"estimate": "median"},
        {"prior_sd": 0.0},
        {"lapse": 1.0},
        {"slope": -1.0},
        {"sd_stop": -0.1},
    ):
        with pytest.raises(ValueError):
            Schedule(**bad)  # type: ignore[arg-type]
