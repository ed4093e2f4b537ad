"""Both-order round robin: schedule, +1/−1/0 sums, the map onto 1–5, position statistics."""

from __future__ import annotations

import itertools

import pytest

from judging.methods.pairwise import (
    PairCall,
    linear_map,
    possible_range,
    round_robin_pairs,
    schedule_round_robin,
    summarise_pairwise,
    verdict_counts,
)
from judging.methods.parsing import PairwiseVerdict, Unparseable


def test_a_full_round_robin_has_every_unordered_pair_once():
    pairs = round_robin_pairs(["a", "b", "c", "d"])
    assert len(pairs) == 6
    assert {frozenset(p) for p in pairs} == {
        frozenset(p) for p in itertools.combinations("abcd", 2)
    }


def test_a_sampled_round_robin_is_reproducible_from_its_seed():
    ideas = list(range(10))
    first = round_robin_pairs(ideas, sample=7, seed=3)
    assert first == round_robin_pairs(ideas, sample=7, seed=3)
    assert len(set(map(frozenset, first))) == 7
    assert first != round_robin_pairs(ideas, sample=7, seed=4)


def test_each_pair_is_scheduled_in_both_orders_within_its_group_only():
    calls = schedule_round_robin({"t1": ["a", "b", "c"], "t2": ["x", "y"]})
    shown = {(c.first, c.second) for c in calls}
    assert len(calls) == 2 * (3 + 1)
    assert ("a", "b") in shown and ("b", "a") in shown
    assert all(c.group == "t1" for c in calls if c.first in "abc")
    assert not any({c.first, c.second} == {"a", "x"} for c in calls)


def test_the_possible_range_is_two_per_opponent_and_maps_linearly_onto_one_to_five():
    assert possible_range(4) == (-6, 6)
    assert linear_map(-6, -6, 6) == 1.0
    assert linear_map(6, -6, 6) == 5.0
    assert linear_map(0, -6, 6) == 3.0
    assert linear_map(3, -6, 6) == 4.0


def both_orders(x, y, first_order, second_order):
    return [PairCall(x, y, first_order), PairCall(y, x, second_order)]


def test_sums_and_scores_match_a_hand_computed_three_idea_round_robin():
    # a beats b in both orders, a and c split by position, b and c tie once and c wins once.
    calls = (
        both_orders("a", "b", "A", "B")  # a +2, b −2
        + both_orders("a", "c", "A", "A")  # first shown wins each time: a 0, c 0
        + both_orders("b", "c", "tie", "A")  # c +1, b −1
    )
    summary = summarise_pairwise(calls)
    assert summary.sums == {"a": 2, "b": -3, "c": 1}
    # Range with three ideas, every call parsed: [−4, 4]; score = 1 + 4(s + 4)/8.
    assert summary.scores == {"a": 4.0, "b": 1 + 4 * 1 / 8, "c": 3.5}
    assert summary.parsed_calls == {"a": 4, "b": 4, "c": 4}


def test_position_consistency_counts_pairs_whose_two_orders_agree():
    calls = (
        both_orders("a", "b", "A", "B")  # a both times: agree
        + both_orders("a", "c", "A", "A")  # flips with position: disagree
        + both_orders("b", "c", "tie", "tie")  # tie both times: agree
    )
    summary = summarise_pairwise(calls)
    assert summary.n_consistency_pairs == 3
    assert summary.position_consistency == pytest.approx(2 / 3)


def test_first_position_win_rate_is_over_decisive_calls():
    calls = both_orders("a", "b", "A", "A") + both_orders("a", "c", "A", "B")
    calls += both_orders("b", "c", "tie", "A")
    summary = summarise_pairwise(calls)
    # Decisive calls: A, A, A, B, A -> 4 of 5 won by the first shown.
    assert summary.first_position_win_rate == pytest.approx(4 / 5)
    assert summary.tie_rate == pytest.approx(1 / 6)


def test_unparseable_calls_are_excluded_counted_and_shrink_that_ideas_range():
    calls = both_orders("a", "b", "A", None) + both_orders("a", "c", "A", "B")
    calls += both_orders("b", "c", "B", "A")
    summary = summarise_pairwise(calls)
    assert summary.n_unparseable == 1
    assert summary.unparseable_by_idea == {"a": 1, "b": 1, "c": 0}
    # a: 3 parsed calls, all won: sum 3 on [−3, 3] -> 5.
    assert summary.parsed_calls["a"] == 3 and summary.sums["a"] == 3
    assert summary.scores["a"] == 5.0
    # b: 3 parsed calls, lost 1 to a, won 0 and lost 2 to c -> sum −3 -> 1.
    assert summary.sums["b"] == -3 and summary.scores["b"] == 1.0
    # The a–b pair has only one parsed order, so it does not enter position consistency.
    assert summary.n_consistency_pairs == 2


def test_an_idea_whose_calls_all_failed_has_no_score_rather_than_a_middle_score():
    summary = summarise_pairwise(both_orders("a", "b", None, None), ideas=["a", "b", "z"])
    assert summary.scores == {"a": None, "b": None, "z": None}
    assert summary.position_consistency is None
    assert summary.first_position_win_rate is None


def test_pair_calls_are_built_from_parsed_verdicts_and_unparseables():
    ok = PairCall.from_verdict("a", "b", PairwiseVerdict("B"))
    bad = PairCall.from_verdict("a", "b", Unparseable("no tag", "hmm"))
    assert ok.points() == (-1, 1)
    assert bad.points() is None
    assert verdict_counts([ok, bad]) == {"B": 1, "unparseable": 1}


def test_an_idea_compared_with_itself_is_rejected():
    with pytest.raises(ValueError):
        summarise_pairwise([PairCall("a", "a", "A")])


def test_a_consistent_judge_ranks_a_known_order_exactly():
    quality = {"p": 4, "q": 3, "r": 2, "s": 1, "t": 0}
    calls = [
        PairCall(c.first, c.second, "A" if quality[c.first] > quality[c.second] else "B")
        for c in schedule_round_robin({"g": list(quality)})
    ]
    scores = summarise_pairwise(calls).scores
    assert [scores[i] for i in "pqrst"] == [5.0, 4.0, 3.0, 2.0, 1.0]
