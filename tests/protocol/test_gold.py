"""Gold items: expected ranges checked against the form, and gold assignment."""

from __future__ import annotations

import pytest

from studies.protocol.gold import GoldError, GoldIdea, GoldReviewer, gold_assign, gold_ranges_parse

SCALES = {"novelty": (1, 10), "overall": (1, 10), "code": (1, 5)}


def test_expected_ranges_are_checked_against_the_forms_scales():
    assert gold_ranges_parse({"overall": [2, 4], "code": [5, 5]}, SCALES) == {
        "overall": (2.0, 4.0),
        "code": (5.0, 5.0),
    }
    with pytest.raises(GoldError) as exc:
        gold_ranges_parse(
            {"overall": [4, 2], "code": [1, 6], "fun": [1, 2], "novelty": "3-5"}, SCALES
        )
    assert exc.value.problems == [
        "overall: the range 4–2 must have low ≤ high within the scale 1–10",
        "code: the range 1–6 must have low ≤ high within the scale 1–5",
        "'fun' is not a metric of the study's form",
        "novelty: the range must be two numbers [low, high]",
    ]
    with pytest.raises(GoldError, match="at least one"):
        gold_ranges_parse({}, SCALES)


def test_gold_items_go_by_topic_spread_evenly_and_never_to_the_authors_institution():
    ideas = [
        GoldIdea("g1", "math", ("MIT",)),
        GoldIdea("g2", "math"),
        GoldIdea("g3", "bias"),
    ]
    reviewers = [
        GoldReviewer("a", ("math",), "MIT"),  # may not have g1
        GoldReviewer("b", ("math",)),
        GoldReviewer("c", ("math",)),
        GoldReviewer("d", ("bias",), has=("g3",)),  # already has its one
        GoldReviewer("e", ("coding",)),  # no gold idea in its topics: any topic
    ]
    pairs = gold_assign(reviewers, ideas, per_reviewer=1, seed=7)
    got = dict(pairs)
    # a cannot take g1; b then takes the math item nobody has (g1); c either (one each).
    assert got["a"] == "g2" and got["b"] == "g1" and "d" not in got
    # e has no gold in its topics: it takes the least-reviewed item of any topic, which
    # after c is not the math item c took (two reviewers) but one with a single reviewer.
    after_c = {"g1": 1, "g2": 1, "g3": 1}
    after_c[got["c"]] += 1
    assert after_c[got["e"]] == 1
    # Two each: nobody gets the same gold idea twice; a has only g2 and g3 open.
    two = dict.fromkeys(r.id for r in reviewers)
    for r, i in gold_assign(reviewers, ideas, per_reviewer=2, seed=7):
        two[r] = (two[r] or ()) + (i,)
    assert len(set(two["a"])) == 2 and "g1" not in two["a"]
    assert two["d"] is not None and len(two["d"]) == 1 and "g3" not in two["d"]
