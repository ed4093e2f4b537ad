"""Split-half consistency and Krippendorff's alpha."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from studies.analysis import consistency as cons
from tests.analysis.splits import plain_half_means

METRICS = ["novelty", "excitement", "feasibility", "effectiveness", "overall"]


def _frame(scores_per_idea: list[list[float]], metric: str = "overall") -> pd.DataFrame:
    rows = [
        (f"i{i}", f"i{i}r{j}", s)
        for i, scores in enumerate(scores_per_idea)
        for j, s in enumerate(scores)
    ]
    df = pd.DataFrame(rows, columns=["idea_id", "review_id", metric])
    return df.assign(condition="C", topic="t", reviewer_id=None)


def test_si2024_consistency_over_all_rows_is_about_56_5_percent(si2024_frame):
    res = cons.inter_reviewer_consistency(
        si2024_frame, "overall", n_splits=1000, n_bootstrap=0, n_permutations=0
    )
    assert abs(res.balanced_accuracy - 0.565) < 0.015
    assert (res.n_units, res.n_reviews, res.n_selected) == (147, 337, 72)
    assert 0.03 < res.split_sd < 0.05  # one split alone swings by several points
    assert 0.45 < res.split_low < 0.52 and 0.61 < res.split_high < 0.68
    assert res.ci_low is None and res.p_value is None


def test_si2024_consistency_defaults_give_the_readme_ci_and_p_value(si2024_frame):
    res = cons.inter_reviewer_consistency(si2024_frame)
    json.dumps(res.as_dict(), allow_nan=False)
    assert (res.n_splits, res.n_bootstrap, res.n_permutations) == (1000, 1000, 1000)
    assert abs(res.balanced_accuracy - 0.565) < 0.015
    assert abs(res.ci_low - 0.47) < 0.025 and abs(res.ci_high - 0.64) < 0.025
    assert 0.03 < res.p_value < 0.15  # README: p ~ 0.08, not clearly above chance
    assert abs(res.null_mean - 0.5) < 0.01


def test_si2024_consistency_on_unique_reviews_counts_each_review_once(si2024_frame):
    res = cons.inter_reviewer_consistency(
        si2024_frame, rows="unique", n_splits=300, n_bootstrap=0, n_permutations=0
    )
    assert (res.n_units, res.n_reviews) == (129, 296)
    assert 0.52 < res.balanced_accuracy < 0.58


def test_consistency_is_reproducible_for_a_seed(si2024_frame):
    kw = {"n_splits": 50, "n_bootstrap": 20, "n_permutations": 20, "seed": 11}
    a = cons.inter_reviewer_consistency(si2024_frame, **kw)
    b = cons.inter_reviewer_consistency(si2024_frame, **kw)
    assert a == b


def test_random_scores_give_chance_consistency():
    rng = np.random.default_rng(0)
    df = _frame(rng.integers(1, 11, size=(2000, 3)).tolist())
    res = cons.inter_reviewer_consistency(df, n_splits=40, n_bootstrap=0, n_permutations=0)
    # 1000 selected ideas: the sd of one data set's accuracy is about 1.5 points
    assert abs(res.balanced_accuracy - 0.5) < 0.045


def test_perfectly_consistent_reviewers_give_full_consistency():
    df = _frame([[float(i)] * (2 + i % 3) for i in range(40)])
    res = cons.inter_reviewer_consistency(df, n_splits=100, n_bootstrap=50, n_permutations=99)
    assert res.balanced_accuracy == 1.0
    assert res.split_low == 1.0
    assert res.p_value == pytest.approx(1 / 100)


def test_ideas_with_a_single_review_do_not_count():
    df = _frame([[1.0, 2.0], [3.0], [4.0, 4.0], [5.0, 6.0], [7.0, np.nan], [8.0, 9.0]])
    assert cons.score_matrix(df, "overall").shape == (4, 2)
    with pytest.raises(ValueError, match="too few"):
        cons.inter_reviewer_consistency(df.iloc[:4], n_bootstrap=0, n_permutations=0)


def test_split_accuracies_take_well_under_a_second_for_1000_splits(si2024_frame):
    import time

    P = cons.score_matrix(si2024_frame, "overall").to_numpy()
    start = time.process_time()  # CPU time: colleagues' jobs share the machine
    acc = cons.split_accuracies(P, 1000, np.random.default_rng(0))
    assert time.process_time() - start < 0.5
    assert acc.shape == (1000,) and np.all((acc >= 0) & (acc <= 1))


# Units A: (1, 2), B: (3, 3), C: (2, 4); D: (5) has no pair and drops out. n = 6.
# interval: D_o = (2*1 + 0 + 2*4) / 6 = 10/6; D_e = 2 * SS / (n - 1) = 2 * 5.5 / 5 = 2.2
#           alpha = 1 - (10/6) / 2.2 = 8/33
# nominal: 4 mismatched ordered pairs; sum_c!=k n_c n_k = 36 - (1 + 4 + 4 + 1) = 26
#           alpha = 1 - 5 * 4 / 26 = 3/13
# ordinal: n = (1, 2, 2, 1) for values 1-4; delta(1,2) = 2.25, delta(2,4) = 12.25,
#           observed sum 2 * 2.25 + 2 * 12.25 = 29; expected sum 2 * 99 = 198
#           alpha = 1 - 5 * 29 / 198 = 53/198
HAND = _frame([[1, 2], [3, 3], [2, 4], [5]])


@pytest.mark.parametrize(
    ("level", "expected"), [("interval", 8 / 33), ("nominal", 3 / 13), ("ordinal", 53 / 198)]
)
def test_krippendorff_alpha_matches_a_hand_computation(level, expected):
    assert math.isclose(cons.krippendorff_alpha(HAND, "overall", level), expected)


def test_krippendorff_alpha_reproduces_the_readme_values(si2024_frame):
    assert abs(cons.krippendorff_alpha(si2024_frame, "overall") - 0.08) < 0.01
    assert abs(cons.krippendorff_alpha(si2024_frame, "novelty") - 0.16) < 0.01
    alphas = {m: cons.krippendorff_alpha(si2024_frame, m) for m in METRICS}
    assert max(alphas, key=alphas.get) == "novelty"


def test_krippendorff_alpha_agrees_with_the_krippendorff_package(si2024_frame):
    krippendorff = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(4)
    sparse = _frame(
        [rng.integers(1, 6, size=rng.integers(1, 5)).astype(float).tolist() for _ in range(60)]
    )
    for df in (si2024_frame, sparse):
        for metric in ("novelty", "overall") if df is si2024_frame else ("overall",):
            # Slots stand in for coders: alpha does not depend on who gave which value.
            data = cons.score_matrix(df, metric, rows="unique").to_numpy().T
            for level in ("interval", "ordinal", "nominal"):
                ref = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
                assert math.isclose(cons.krippendorff_alpha(df, metric, level), ref, rel_tol=1e-9)


def test_alpha_with_a_distinct_value_per_score_agrees_with_the_krippendorff_package():
    # A judge's per-idea means (or any fine-grained score) make almost every value its own
    # category: ordinal and nominal alpha must not need a categories x categories matrix.
    krippendorff = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(9)
    quality = rng.normal(5, 1, 150)
    df = _frame([list(q + rng.normal(0, 1, rng.integers(1, 5))) for q in quality])
    data = cons.score_matrix(df, "overall", rows="unique").to_numpy().T
    assert len(np.unique(data[~np.isnan(data)])) > 300
    for level in ("interval", "ordinal", "nominal"):
        ref = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        ours = cons.krippendorff_alpha(df, "overall", level)
        assert math.isclose(ours, ref, rel_tol=1e-9, abs_tol=1e-12), level


def test_ordinal_alpha_of_ten_thousand_distinct_values_is_cheap():
    # 10,000 ideas x 3 continuous scores: a 30,000 x 30,000 coincidence matrix would take
    # 7 GB; the mid-rank form is linear in the number of scores.
    import time

    rng = np.random.default_rng(1)
    quality = rng.normal(5, 1, 10_000)
    df = _frame([list(q + rng.normal(0, 1, 3)) for q in quality])
    started = time.process_time()
    for level in ("ordinal", "nominal"):
        alpha = cons.krippendorff_alpha(df, "overall", level)
        assert math.isfinite(alpha)
    assert time.process_time() - started < 10


@pytest.mark.slow
def test_large_studies_are_split_in_batches_of_bounded_memory(monkeypatch):
    # 5,000 idea units: a batch of 4,096 replicates would hold 20M-number planes (1.3 GB
    # for a 30,000-review study); batches shrink so that one plane stays under _PLANE
    rng = np.random.default_rng(0)
    quality = rng.normal(5, 1, 5000)
    df = _frame([list(np.clip(np.round(q + rng.normal(0, 1, 3)), 1, 10)) for q in quality])
    planes: list[int] = []
    split_batch = cons._split_batch

    def recorded(
        P: np.ndarray, rng: np.random.Generator, top_fraction: float, repeat: int = 1
    ) -> np.ndarray:
        planes.append(P.shape[1] * repeat * P.shape[2])
        return split_batch(P, rng, top_fraction, repeat)

    monkeypatch.setattr(cons, "_split_batch", recorded)
    res = cons.inter_reviewer_consistency(
        df, n_splits=1000, n_bootstrap=40, n_permutations=40, splits_per_resample=10
    )
    assert max(planes) <= cons._PLANE
    assert sum(planes) == (1000 + 40 * 10 + 40 * 10) * 5000  # every replicate, once
    assert res.n_units == 5000 and 0.6 < res.balanced_accuracy < 0.9
    assert res.p_value == pytest.approx(1 / 41)


def _plain_split_batch(P: np.ndarray, rng: np.random.Generator, top_fraction: float):
    """`_split_batch` written plainly (the picks as boolean masks, integer counters), with
    the same random draws in the same order."""
    _, reps, units = P.shape
    mean_a, mean_b = plain_half_means(P, rng)
    k = int(np.floor(top_fraction * units))
    key_a = np.round(mean_a, 9) + rng.random((reps, units)) * 1e-10
    part = np.argpartition(key_a, (k - 1, units - k), axis=-1)
    bottom, top = np.zeros((reps, units), bool), np.zeros((reps, units), bool)
    np.put_along_axis(bottom, part[:, :k], True, axis=-1)
    np.put_along_axis(top, part[:, units - k :], True, axis=-1)
    b = np.round(mean_b, 9)
    med = np.median(b, axis=-1, keepdims=True)
    pred_top = (b > med) | ((b == med) & (rng.random((reps, units)) < 0.5))
    return ((pred_top & top).sum(-1) / k + (~pred_top & bottom).sum(-1) / k) / 2


def test_split_batch_equals_a_plain_computation_of_the_same_draws():
    rng = np.random.default_rng(3)
    df = _frame([list(rng.integers(1, 11, rng.integers(2, 7))) for _ in range(80)])
    P = cons.score_matrix(df, "overall").to_numpy(float)
    for reps_of in (lambda m: np.broadcast_to(P.T[:, None], (P.shape[1], m, P.shape[0])),
                    lambda m: P.T[:, rng.integers(0, P.shape[0], (m, P.shape[0]))]):  # fmt: skip
        batch = reps_of(50)
        got = cons._split_batch(batch, np.random.default_rng(8), 0.25)
        want = _plain_split_batch(batch, np.random.default_rng(8), 0.25)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        assert len(set(got)) > 5  # the splits differ, so the draws matter


def test_split_batch_repeats_each_replicate_as_a_repeated_matrix_would():
    rng = np.random.default_rng(4)
    P = rng.integers(1, 11, (300, 4)).astype(float)
    P[rng.random(P.shape) < 0.3] = np.nan
    P = P[(~np.isnan(P)).sum(1) >= 2]
    batch = P.T[:, rng.integers(0, P.shape[0], (6, P.shape[0]))]
    got = cons._split_batch(batch, np.random.default_rng(2), 0.25, repeat=5)
    want = cons._split_batch(np.repeat(batch, 5, axis=1), np.random.default_rng(2), 0.25)
    np.testing.assert_array_equal(got, want)


def test_split_batch_repeats_equal_the_repeated_matrix_across_several_blocks():
    # Replicates are broadcast over their repeats in blocks of whole replicates: with
    # more replicates than one block holds, every block boundary must give what the
    # repeated (copied) matrix gives, and the single-matrix path what its splits give.
    rng = np.random.default_rng(5)
    P = rng.integers(1, 11, (400, 5)).astype(float)
    P[:, 2:][rng.random((400, 3)) < 0.5] = np.nan
    P = P[(~np.isnan(P)).sum(1) >= 2]
    batch = P.T[:, rng.integers(0, P.shape[0], (70, P.shape[0]))]
    assert 70 * 7 * P.shape[0] > 2 * cons._BLOCK
    got = cons._split_batch(batch, np.random.default_rng(6), 0.25, repeat=7)
    want = cons._split_batch(np.repeat(batch, 7, axis=1), np.random.default_rng(6), 0.25)
    np.testing.assert_array_equal(got, want)
    plain = _plain_split_batch(np.repeat(batch, 7, axis=1), np.random.default_rng(6), 0.25)
    np.testing.assert_allclose(got, plain, rtol=0, atol=1e-12)


@pytest.mark.parametrize("levels", [3, 40, 100_000])
def test_extremes_from_one_sort_equal_argpartition_even_with_ties_at_the_cuts(levels):
    # Few distinct keys: most rows have ties at both cuts, settled as argpartition does.
    rng = np.random.default_rng(levels)
    key = rng.integers(0, levels, (60, 101)).astype(float)
    pred_top = rng.random(key.shape) < 0.5
    for k in (1, 25, 50):
        top, bottom = cons._extremes_hits(key, pred_top, k)
        part = np.argpartition(key, (k - 1, 101 - k), axis=-1)
        want_top = np.take_along_axis(pred_top, part[:, 101 - k :], axis=-1).sum(-1)
        want_bottom = (~np.take_along_axis(pred_top, part[:, :k], axis=-1)).sum(-1)
        np.testing.assert_array_equal(top, want_top)
        np.testing.assert_array_equal(bottom, want_bottom)


def test_row_medians_equal_numpy_median():
    rng = np.random.default_rng(6)
    for units in (7, 8, 1001):
        b = np.round(rng.integers(1, 11, (30, units)) / rng.integers(1, 4, (30, units)), 9)
        np.testing.assert_array_equal(cons._row_medians(b), np.median(b, axis=-1, keepdims=True))
