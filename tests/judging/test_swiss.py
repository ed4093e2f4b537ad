"""Swiss tournament: pairing properties, byes, game resolution and the call budget."""

from __future__ import annotations

import itertools
import random

import pytest

from judging.methods.pairwise import PairCall
from judging.methods.parsing import PairwiseVerdict, Unparseable
from judging.methods.swiss import (
    GameResult,
    SwissState,
    apply_round,
    calls_for_round,
    calls_per_round,
    pair_round,
    resolve_game,
    run_swiss,
    suggested_rounds,
    total_calls,
)


def coin_judge(seed: int):
    rng = random.Random(seed)
    return lambda a, b: rng.choice(["A", "B"])


def rematch_free_pairing_exists(state: SwissState) -> bool:
    """Brute force, for small fields: is there a pairing (with an allowed bye) without rematches?"""

    def perfect(ideas: list) -> bool:
        if not ideas:
            return True
        x, rest = ideas[0], ideas[1:]
        return any(
            frozenset((x, y)) not in state.played and perfect(rest[:k] + rest[k + 1 :])
            for k, y in enumerate(rest)
        )

    ideas = list(state.ideas)
    if len(ideas) % 2 == 0:
        return perfect(ideas)
    return any(perfect([i for i in ideas if i != b]) for b in ideas if b not in state.byes)


def test_calls_per_round_are_half_the_field_rounded_down_and_double_with_both_orders():
    assert calls_per_round(7) == 3
    assert calls_per_round(8, both_orders=True) == 8
    assert total_calls(1400, rounds=5) == 3500
    assert suggested_rounds(1400) == 11
    assert suggested_rounds(1) == 0


@pytest.mark.parametrize("n", [2, 3, 5, 6, 9, 12])
def test_every_idea_plays_once_each_round_except_a_single_bye(n):
    result = run_swiss(range(n), coin_judge(n), rounds=min(5, n))
    for rnd in result.rounds:
        seated = [i for pair in rnd.pairs for i in pair]
        assert len(seated) == len(set(seated)) == n - (n % 2)
        assert (rnd.bye is None) == (n % 2 == 0)
        assert set(seated) | ({rnd.bye} - {None}) == set(range(n))


def test_byes_rotate_and_no_idea_gets_two():
    result = run_swiss("abcde", coin_judge(1), rounds=5)
    byes = [rnd.bye for rnd in result.rounds]
    assert sorted(byes) == list("abcde")


def test_a_round_that_would_need_a_second_bye_is_refused():
    result = run_swiss("abc", coin_judge(2), rounds=3)
    with pytest.raises(ValueError, match="bye"):
        pair_round(result.state)


def test_a_bye_is_worth_one_point():
    state = SwissState.start("abc")
    rnd = pair_round(state)
    (a, b), bye = rnd.pairs[0], rnd.bye
    after = apply_round(state, rnd, [GameResult(a, b, 1.0, 0.0)])
    assert after.points[bye] == 1.0
    assert after.byes == {bye}


@pytest.mark.parametrize("n", [4, 5, 6, 7, 8])
@pytest.mark.parametrize("seed", range(6))
def test_there_are_no_rematches_whenever_a_rematch_free_pairing_exists(n, seed):
    state = SwissState.start(range(n))
    judge = coin_judge(seed)
    for _ in range(min(n - 1, 6)):
        rnd = pair_round(state, seed=seed)
        if rematch_free_pairing_exists(state):
            assert rnd.rematches == 0
        assert rnd.rematches == sum(frozenset(p) in state.played for p in rnd.pairs)
        games = [resolve_game(p, [PairCall(*p, judge(*p))]) for p in rnd.pairs]
        state = apply_round(state, rnd, games)


def test_four_ideas_meet_again_only_after_all_three_pairings_are_used():
    result = run_swiss("abcd", coin_judge(0), rounds=4)
    assert [rnd.rematches for rnd in result.rounds] == [0, 0, 0, 2]


def test_after_round_one_winners_meet_winners_and_losers_meet_losers():
    state = SwissState.start(range(8))
    rnd = pair_round(state, seed=5)
    games = [resolve_game(p, [PairCall(*p, "A")]) for p in rnd.pairs]
    state = apply_round(state, rnd, games)
    second = pair_round(state, seed=5)
    assert all(state.points[a] == state.points[b] for a, b in second.pairs)


def test_pairing_is_pure_and_reproducible():
    state = SwissState.start(range(10))
    assert pair_round(state, seed=3) == pair_round(state, seed=3)
    assert state.points == {i: 0.0 for i in range(10)}
    assert state.rounds_played == 0


def test_scores_are_win_counts_between_zero_and_the_number_of_rounds():
    result = run_swiss(range(11), coin_judge(9), rounds=5)
    assert all(0 <= s <= 5 for s in result.scores.values())
    games = sum(len(r.pairs) for r in result.rounds)
    assert sum(result.scores.values()) == games + 5  # one point per game and per bye
    assert len(result.calls) == total_calls(11, 5)


def test_a_consistent_judge_leaves_the_best_idea_undefeated_and_the_worst_winless():
    n = 16

    def judge(a, b):
        return "A" if a > b else "B"

    result = run_swiss(range(n), judge, rounds=4, seed=7)
    assert result.scores[n - 1] == 4
    assert result.scores[0] == 0
    assert result.state.standings()[0] == (n - 1, 4.0)


def test_both_orders_that_agree_give_the_winner_one_point():
    game = resolve_game(("x", "y"), [PairCall("x", "y", "A"), PairCall("y", "x", "B")])
    assert (game.points_first, game.points_second, game.agreed) == (1.0, 0.0, True)


def test_both_orders_that_disagree_are_a_draw_worth_half_a_point_each():
    game = resolve_game(("x", "y"), [PairCall("x", "y", "A"), PairCall("y", "x", "A")])
    assert (game.points_first, game.points_second, game.agreed) == (0.5, 0.5, False)
    tie_and_win = resolve_game(("x", "y"), [PairCall("x", "y", "tie"), PairCall("y", "x", "B")])
    assert (tie_and_win.points_first, tie_and_win.points_second) == (0.5, 0.5)


def test_an_unparseable_answer_never_decides_a_game():
    one_parsed = resolve_game(("x", "y"), [PairCall("x", "y", None), PairCall("y", "x", "A")])
    assert (one_parsed.points_first, one_parsed.points_second) == (0.0, 1.0)
    none_parsed = resolve_game(("x", "y"), [PairCall("x", "y", None), PairCall("y", "x", None)])
    assert none_parsed.void and none_parsed.points_first == none_parsed.points_second == 0.0


def test_run_swiss_accepts_parsed_verdicts_and_counts_void_games():
    def judge(a, b):
        return Unparseable("no tag", "?") if {a, b} == {0, 1} else PairwiseVerdict("A")

    result = run_swiss(range(4), judge, rounds=3, both_orders=True)
    assert result.state.void_games == 1
    assert len(result.calls) == 3 * calls_per_round(4, both_orders=True)


def test_both_orders_schedule_each_pair_once_each_way():
    rnd = pair_round(SwissState.start("abcd"))
    calls = calls_for_round(rnd, both_orders=True)
    assert len(calls) == 4
    assert {frozenset(c) for c in calls} == {frozenset(p) for p in rnd.pairs}
    assert all((b, a) in calls for a, b in calls)


def test_apply_round_rejects_results_that_do_not_match_the_pairs():
    state = SwissState.start("abcd")
    rnd = pair_round(state)
    (a, b) = rnd.pairs[0]
    with pytest.raises(ValueError):
        apply_round(state, rnd, [GameResult(a, b, 1.0, 0.0)])


def test_sides_are_mixed_so_the_higher_ranked_idea_is_not_always_shown_first():
    result = run_swiss(range(40), lambda a, b: "A" if a > b else "B", rounds=3, seed=1)
    firsts_higher = [a > b for rnd in result.rounds for a, b in rnd.pairs]
    assert 0 < sum(firsts_higher) < len(firsts_higher)


def test_a_large_field_is_paired_without_rematches_quickly():
    result = run_swiss(range(1001), coin_judge(3), rounds=5)
    assert all(rnd.rematches == 0 for rnd in result.rounds)
    pairs = [frozenset(p) for rnd in result.rounds for p in rnd.pairs]
    assert len(pairs) == len(set(pairs)) == 5 * 500
    assert len({rnd.bye for rnd in result.rounds}) == 5


def test_pairings_prefer_the_nearest_score_when_all_are_fresh():
    state = SwissState(
        ideas=tuple("abcdef"),
        points={"a": 3, "b": 3, "c": 2, "d": 2, "e": 0, "f": 0},
        rounds_played=3,
    )
    rnd = pair_round(state)
    assert {frozenset(p) for p in rnd.pairs} == {
        frozenset("ab"),
        frozenset("cd"),
        frozenset("ef"),
    }
    assert list(itertools.chain.from_iterable(rnd.pairs))  # every idea seated
