"""Judge-validation accuracy with Wilson intervals, on hand-built trials."""

from __future__ import annotations

import pytest

from judging.methods.validation import Trial, pairwise_accuracy, wilson_interval


def test_wilson_interval_matches_the_textbook_value_for_8_of_10():
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)


def test_wilson_interval_stays_inside_0_and_1_at_the_extremes():
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == 1.0
    assert 0 < wilson_interval(5, 5)[0] < 1
    with pytest.raises(ValueError):
        wilson_interval(1, 0)


def test_accuracy_counts_judge_ties_as_misses_and_leaves_out_equal_scores_and_garbage():
    trials = [
        Trial("rating", 0.5, "A"),  # hit
        Trial("rating", -0.2, "B"),  # hit
        Trial("rating", 0.1, "B"),  # miss, gap 0.1
        Trial("rating", -0.3, "tie"),  # judge tie: a miss, gap 0.3
        Trial("rating", 0.0, "A"),  # equal scores: no truth
        Trial("rating", 0.4, None),  # unparseable
        Trial("soundness", None, "A"),  # a score is missing: no truth
    ]
    acc = pairwise_accuracy(trials)
    r = acc["rating"]
    assert (r.trials, r.scored, r.correct) == (6, 4, 2)
    assert r.accuracy == 0.5 and (r.ci_low, r.ci_high) == pytest.approx(wilson_interval(2, 4))
    assert (r.judge_ties, r.truth_ties, r.unparseable) == (1, 1, 1)
    assert r.mean_gap_wrong == pytest.approx(0.2) and r.mean_gap_right == pytest.approx(0.35)
    s = acc["soundness"]
    assert s.scored == 0 and s.accuracy is None and s.ci_low is None and s.truth_ties == 1
