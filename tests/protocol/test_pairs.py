"""Pair-rating tasks spread over condition pairs, without a database."""

from __future__ import annotations

import random
from collections import Counter

from studies.protocol.pairs import Candidate, condition_pairs, pick_balanced

HA, HR, AR = ("AI", "Human"), ("AI_Rerank", "Human"), ("AI", "AI_Rerank")


def test_condition_pairs_are_what_one_idea_has_and_the_other_lacks():
    assert condition_pairs({"Human"}, {"AI"}) == (HA,)
    assert condition_pairs({"AI", "AI_Rerank"}, {"Human"}) == (HA, HR)
    assert condition_pairs({"AI"}, {"AI", "AI_Rerank"}) == ()  # nothing only on one side
    assert condition_pairs({"Human"}, {"Human"}) == ()


def skewed() -> list[Candidate[str]]:
    """Many Human–AI pairs, fewer Human–AI_Rerank, two AI–AI_Rerank: drawing at random
    would give mostly Human–AI."""
    out = [Candidate(f"h{k}", f"a{k}", (HA,)) for k in range(30)]
    out += [Candidate(f"h{k}", f"r{k}", (HR,)) for k in range(6)]
    out += [Candidate(f"a{k}", f"r{k}", (AR,)) for k in range(2)]
    return out


def spread(chosen: list[Candidate[str]]) -> Counter[tuple[str, str]]:
    return Counter(p for c in chosen for p in c.pairs)


def test_each_reviewer_gets_every_condition_pair_equally_when_there_are_enough():
    for seed in range(20):
        counts = spread(pick_balanced(skewed(), 6, random.Random(seed)))
        assert counts == {HA: 2, HR: 2, AR: 2}


def test_a_scarce_condition_pair_is_used_up_and_the_rest_stay_even():
    for seed in range(20):
        counts = spread(pick_balanced(skewed(), 10, random.Random(seed)))
        assert counts[AR] == 2 and {counts[HA], counts[HR]} == {4}


def test_pairs_already_given_count_towards_the_balance():
    counts = spread(pick_balanced(skewed(), 3, random.Random(0), Counter({HA: 3, HR: 3})))
    assert counts == {AR: 2, HA: 1} or counts == {AR: 2, HR: 1}


def test_the_same_seed_picks_the_same_pairs_and_ideas_are_not_all_reused():
    a = pick_balanced(skewed(), 6, random.Random(7))
    assert a == pick_balanced(skewed(), 6, random.Random(7))
    ideas = Counter(i for c in a for i in (c.first, c.second))
    assert max(ideas.values()) <= 2
