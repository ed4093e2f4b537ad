"""LigBench's pure pieces: the comparison schedule and the strict reason-then-answer parsing."""

from __future__ import annotations

import pytest

from judging.methods.elo import EloChain, run_elo
from judging.methods.ligbench import (
    Schedule,
    calibration_examples,
    next_reference,
    paper_order,
    replay,
)
from judging.methods.parsing import (
    InitialScores,
    Unparseable,
    parse_initial_scores,
    parse_reasoned_verdicts,
)

POOL = {
    r: {"rating": s}
    for r, s in zip("abcdefgh", [0.5, 1.0, 1.5, 2.0, 3.0, 3.5, 4.0, 4.5], strict=True)
}


def test_the_paper_rule_meets_the_references_in_one_seeded_order_each_once():
    order = paper_order(list(POOL), seed=3, key=1)
    assert sorted(order) == sorted(POOL) and order == paper_order(list(POOL), 3, 1)
    assert order != paper_order(list(POOL), 4, 1)
    chains = {"rating": EloChain.start(2.5)}
    schedule = Schedule(epsilon=0.0, seed=3)
    assert next_reference(chains, POOL, order[:3], schedule, 1) == order[3]
    assert next_reference(chains, POOL, order, schedule, 1) is None


def test_the_replayed_chain_is_the_paper_update_and_it_stops_on_epsilon():
    played = [(r, {"rating": 1.0}) for r in paper_order(list(POOL), 0, "x")]
    schedule = Schedule(epsilon=0.05)
    chains = replay({"rating": 2.5}, POOL, played, schedule)
    direct = run_elo(((r, POOL[r]["rating"], 1.0) for r, _ in played), initial=2.5, epsilon=0.05)
    assert chains["rating"].score == pytest.approx(direct.score)
    assert chains["rating"].stopped == direct.stopped == "converged"
    # A stopped chain asks for nothing more, although references are left.
    used = len(chains["rating"].steps)
    assert used < len(POOL)
    assert next_reference(chains, POOL, [r for r, _ in played[:used]], schedule, "x") is None


def test_the_nearest_rule_picks_the_reference_closest_to_the_current_score():
    chains = {"rating": EloChain.start(2.4)}
    schedule = Schedule(selection="nearest")
    assert next_reference(chains, POOL, [], schedule, 1) == "d"  # 2.0 is 0.4 away
    assert next_reference(chains, POOL, ["d"], schedule, 1) == "e"  # then 3.0 (0.6)
    # An exact tie (2.5 is 0.5 from both 2.0 and 3.0) is broken by a seeded coin.
    tied = {"rating": EloChain.start(2.5)}
    picks = {next_reference(tied, POOL, [], Schedule("nearest", seed=s), 1) for s in range(20)}
    assert picks == {"d", "e"}


def test_spread_examples_are_the_midpoints_of_equal_score_slices_lowest_first():
    related = list("hgfedcba")  # retrieval order: most related first, best score first
    scores = {r: POOL[r]["rating"] for r in related}
    # Eight references sorted by score, four slices of two: positions 1, 3, 5, 7.
    assert calibration_examples(related, scores, 4) == ["b", "d", "f", "h"]
    assert calibration_examples(related, scores, 3) == ["b", "e", "g"]
    assert calibration_examples(related, scores, 3, "related") == ["h", "g", "f"]
    # More examples than references shows them all; equal scores keep retrieval order.
    assert calibration_examples(related, scores, 20) == list("abcdefgh")
    assert calibration_examples(["x", "y"], {"x": 2.0, "y": 2.0}, 1) == ["y"]
    assert calibration_examples(["x", "y"], {"x": 2.0, "y": 2.0}, 2) == ["x", "y"]
    with pytest.raises(ValueError, match="calibration choice"):
        calibration_examples(related, scores, 3, "best")


def test_a_verdict_counts_only_as_the_last_line_after_the_reasons():
    ok = parse_reasoned_verdicts(
        'A has the sharper plan.\nVERDICT: {"rating": "A", "soundness": "tie"}',
        ["rating", "soundness"],
    )
    assert not isinstance(ok, Unparseable) and ok.winners == {"rating": "A", "soundness": "tie"}
    bad = {
        '{"rating": "A", "soundness": "B"}': "no final line",
        'VERDICT: {"rating": "A", "soundness": "B"}': "no reasoning",
        'Why.\nVERDICT: {"rating": "A", "soundness": "B"}\nThanks!': "text follows",
        'Why.\nVERDICT: {"rating": "A"}\nVERDICT: {"rating": "B"}': "2 lines",
        'Why.\nVERDICT: {"rating": "A"}': "missing dimensions",
        'Why.\nVERDICT: {"rating": "A", "soundness": "maybe"}': "is not A, B or tie",
    }
    for raw, reason in bad.items():
        parsed = parse_reasoned_verdicts(raw, ["rating", "soundness"])
        assert isinstance(parsed, Unparseable) and reason in parsed.reason, raw


def test_initial_scores_need_every_key_as_a_number_from_0_to_5():
    ok = parse_initial_scores(
        'Close to example 2.\nSCORES: {"rating": 3.4, "novelty": 2}', ["rating", "novelty"]
    )
    assert ok == InitialScores({"rating": 3.4, "novelty": 2.0}, "Close to example 2.")
    for raw in (
        'Why.\nSCORES: {"rating": 5.5, "novelty": 2}',
        'Why.\nSCORES: {"rating": "high", "novelty": 2}',
        'Why.\nSCORES: {"rating": 3}',
        'Why.\nSCORES: {"rating": true, "novelty": 2}',
    ):
        assert isinstance(parse_initial_scores(raw, ["rating", "novelty"]), Unparseable), raw
