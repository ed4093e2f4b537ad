"""Human-LLM agreement: correlations, judge consistency, pairwise, top-k, diagnostics, alpha."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from studies.analysis import agreement as ag
from studies.analysis.frame import unique_reviews
from tests.analysis.splits import plain_half_means

METRICS = ["novelty", "excitement", "feasibility", "effectiveness", "overall"]


def _frame(scores_per_idea: dict[str, list[float]], metric: str = "overall") -> pd.DataFrame:
    rows = [
        (idea, f"{idea}r{j}", f"rev{j}", s)
        for idea, scores in scores_per_idea.items()
        for j, s in enumerate(scores)
    ]
    df = pd.DataFrame(rows, columns=["idea_id", "review_id", "reviewer_id", metric])
    return df.assign(condition="C", topic="t")


def _judge(scores: dict[str, float], metric: str = "overall") -> pd.DataFrame:
    return pd.DataFrame({"idea_id": list(scores), "metric": metric, "score": list(scores.values())})


def _draws(n_splits: int, n_bootstrap: int, n_permutations: int, **options: Any) -> ag.Resampling:
    return ag.Resampling(
        n_splits=n_splits, n_bootstrap=n_bootstrap, n_permutations=n_permutations, **options
    )


def _noisy_judge(frame: pd.DataFrame, sd: float, seed: int) -> pd.DataFrame:
    """Human mean per idea plus Gaussian noise, every metric."""
    means = unique_reviews(frame).groupby("idea_id")[METRICS].mean()
    long = means.stack().rename("score").reset_index()
    long.columns = ["idea_id", "metric", "score"]
    rng = np.random.default_rng(seed)
    return long.assign(score=long["score"] + rng.normal(0, sd, len(long)))


def _simulated_study(n_ideas: int, n_reviews: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Reviews = idea quality + reviewer noise (idea sd 1, noise sd 2), on a continuous scale."""
    rng = np.random.default_rng(seed)
    quality = rng.normal(0, 1, n_ideas)
    scores = quality[:, None] + rng.normal(0, 2, (n_ideas, n_reviews))
    return _frame({f"i{i:03d}": list(s) for i, s in enumerate(scores)}), quality


# ------------------------------------------------------------------ absolute agreement


def test_absolute_agreement_matches_a_hand_computed_case():
    # judge ranks 1 2 3 4, humans 1 3 2 4: one discordant pair of six.
    frame = _frame({"a": [1, 1], "b": [3, 3], "c": [2, 2], "d": [4, 4]})
    res = ag.absolute_agreement(frame, _judge({"a": 1, "b": 2, "c": 3, "d": 4}), n_bootstrap=0)
    out = res.by_metric["overall"]
    assert (out.n_ideas, out.n_reviews) == (4, 8)
    assert out.spearman.estimate == pytest.approx(0.8)
    assert out.kendall.estimate == pytest.approx(4 / 6)
    assert out.pearson.estimate == pytest.approx(0.8)


def test_absolute_agreement_estimates_equal_scipy_on_random_data():
    rng = np.random.default_rng(3)
    ideas = {f"i{i}": rng.integers(1, 11, size=rng.integers(2, 5)).tolist() for i in range(40)}
    frame = _frame(ideas)
    judge = _judge({i: float(rng.integers(1, 6)) for i in ideas})  # many ties
    out = ag.absolute_agreement(frame, judge, n_bootstrap=200).by_metric["overall"]
    x = judge.set_index("idea_id")["score"].sort_index().to_numpy()
    y = frame.groupby("idea_id")["overall"].mean().sort_index().to_numpy()
    for name, fn in [
        ("spearman", stats.spearmanr),
        ("kendall", stats.kendalltau),
        ("pearson", stats.pearsonr),
    ]:
        ref = fn(x, y)
        corr = getattr(out, name)
        assert corr.estimate == pytest.approx(ref.statistic, abs=1e-12)
        assert corr.p_value == pytest.approx(ref.pvalue, rel=1e-9)
        assert corr.ci_low <= corr.estimate <= corr.ci_high


@pytest.mark.parametrize(
    "n, tied",
    [(30, True), (400, True), (400, False)],  # Kendall past _KENDALL_VECTOR_MAX too
)
def test_vectorised_bootstrap_correlations_equal_scipy_on_each_resample(n, tied):
    rng = np.random.default_rng(5)
    # Many ties (1-5 scores) or none (continuous), negative values and a -0.0 among them.
    x = rng.integers(-2, 3, n).astype(float) if tied else rng.normal(size=n)
    y = x + (rng.integers(-2, 3, n) if tied else rng.normal(size=n))
    x[0] = -0.0
    idx = rng.integers(0, n, size=(25, n))
    X, Y = x[idx], y[idx]
    for rows_fn, ref in [
        (ag._spearman_rows, stats.spearmanr),
        (ag._kendall_rows, stats.kendalltau),
        (ag._pearson_rows, stats.pearsonr),
    ]:
        got = rows_fn(x, y, idx)
        want = [ref(a, b).statistic for a, b in zip(X, Y, strict=True)]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # The counted ranks are scipy's, resample by resample.
    np.testing.assert_array_equal(ag._resampled_ranks(x, idx), stats.rankdata(X, axis=1))


def test_a_judge_that_gives_every_idea_the_same_score_gets_a_reason_not_a_number():
    frame = _frame({"a": [1, 2], "b": [5, 6], "c": [8, 9]})
    res = ag.absolute_agreement(frame, _judge({"a": 5, "b": 5, "c": 5}))
    for method in ("spearman", "kendall", "pearson"):
        block = getattr(res.by_metric["overall"], method)
        assert block.estimate is None
        assert "same score" in block.reason
    json.dumps(res.as_dict(), allow_nan=False)


def test_no_overlapping_ideas_give_reasons_everywhere():
    frame = _frame({f"i{i}": [i, i + 1] for i in range(12)})
    judge = _judge({f"other{i}": float(i) for i in range(12)})
    absolute = ag.absolute_agreement(frame, judge).by_metric["overall"].as_dict()
    assert absolute["n_ideas"] == 0 and absolute["n_ideas_without_judge"] == 12
    assert "at least 3 ideas" in absolute["spearman"]["reason"]
    cons = ag.judge_consistency(frame, judge, resampling=_draws(10, 0, 0)).as_dict()
    assert cons["balanced_accuracy"] is None and "no idea" in cons["reason"]
    top = ag.top_k_overlap(frame, judge).as_dict()
    assert top["overlap"] is None and "no idea" in top["reason"]
    assert list(top)[-2:] == ["overlap", "reason"]
    alpha = ag.krippendorff_with_judges(frame, {"j": judge}).as_dict()
    assert alpha["judges"] == {}
    assert alpha["left_out"]["j"].startswith("the judge scored none of the reviewed ideas")
    for res in (absolute, cons, top, alpha):
        json.dumps(res, allow_nan=False)


def test_a_judge_metric_missing_from_the_frame_is_a_clear_error():
    frame = _frame({"a": [1, 2]})
    with pytest.raises(ValueError, match="no judge metric"):
        ag.absolute_agreement(frame, _judge({"a": 1}, metric="clarity"))


def test_judge_samples_are_averaged_and_unparseable_samples_ignored():
    judge = pd.DataFrame(
        {
            "idea_id": ["a", "a", "a", "b"],
            "metric": "overall",
            "score": [4.0, 6.0, np.nan, 3.0],
            "sample": [0, 1, 2, 0],
        }
    )
    assert ag.judge_idea_scores(judge, "overall").to_dict() == {"a": 5.0, "b": 3.0}


def test_agreement_falls_as_the_judge_gets_noisier_on_si2024(si2024_frame):
    spearman, consistency = [], []
    for sd in (0.0, 1.0, 3.0):
        judge = _noisy_judge(si2024_frame, sd, seed=1)
        res = ag.absolute_agreement(si2024_frame, judge, ["overall"], n_bootstrap=200)
        spearman.append(res.by_metric["overall"].spearman.estimate)
        cons = ag.judge_consistency(
            si2024_frame, judge, resampling=_draws(200, 0, 0), ceiling=False
        )
        consistency.append(cons.balanced_accuracy)
    assert spearman[0] == pytest.approx(1.0)
    assert spearman[0] > spearman[1] > spearman[2] > 0
    assert consistency[0] > consistency[1] > consistency[2]
    assert res.by_metric["overall"].n_ideas == 129


# --------------------------------------------------------- judge consistency (Si et al.)


def test_judge_consistency_reports_the_si2024_ceiling_beside_the_judge(si2024_frame):
    judge = _noisy_judge(si2024_frame, 2.0, seed=2)
    res = ag.judge_consistency(si2024_frame, judge, resampling=_draws(500, 100, 100, seed=3))
    json.dumps(res.as_dict(), allow_nan=False)
    ceiling = res.ceiling
    assert ceiling is not None
    assert (res.n_units, res.n_reviews, res.n_selected) == (147, 337, 72)
    assert abs(ceiling["balanced_accuracy"] - 0.565) < 0.015
    assert ceiling["ci_low"] < ceiling["balanced_accuracy"] < ceiling["ci_high"]
    # The paired human-human value from the same splits agrees with consistency.py's.
    assert abs(res.human_same_splits - ceiling["balanced_accuracy"]) < 0.01
    assert res.ci_low < res.balanced_accuracy < res.ci_high
    assert res.difference_ci_low < res.difference < res.difference_ci_high
    assert res.p_value < 0.05  # the judge carries the human signal, leaking half B's


def test_a_judge_as_good_as_a_fresh_half_of_reviewers_recovers_the_human_ceiling():
    frame, quality = _simulated_study(n_ideas=400, n_reviews=6, seed=0)
    rng = np.random.default_rng(1)
    fresh_half = quality + rng.normal(0, 2, (400, 3)).mean(1)
    judge = _judge(dict(zip(sorted(frame["idea_id"].unique()), fresh_half, strict=True)))
    res = ag.judge_consistency(frame, judge, resampling=_draws(300, 0, 0), ceiling=False)
    assert 0.6 < res.human_same_splits < 0.8  # a clear signal, far from 0.5 and 1
    # 200 selected ideas: one data set's judge value has an sd of about 2.5 points.
    assert abs(res.balanced_accuracy - res.human_same_splits) < 0.06


def test_a_constant_judge_picks_at_random_and_scores_chance(si2024_frame):
    judge = _judge({i: 5.0 for i in si2024_frame["idea_id"].unique()})
    res = ag.judge_consistency(si2024_frame, judge, resampling=_draws(2000, 0, 0), ceiling=False)
    assert res.judge_constant is True
    assert abs(res.balanced_accuracy - 0.5) < 0.01


def test_judge_consistency_drops_units_the_judge_did_not_score(si2024_frame):
    ideas = sorted(si2024_frame["idea_id"].unique())
    judge = _noisy_judge(si2024_frame, 1.0, seed=4)
    judge = judge[judge["idea_id"].isin(ideas[:60])]
    res = ag.judge_consistency(si2024_frame, judge, resampling=_draws(50, 0, 0))
    assert res.n_units + res.n_units_without_judge == 147
    assert res.ceiling is not None and res.ceiling["n_units"] == res.n_units


def test_judge_consistency_is_reproducible_for_a_seed(si2024_frame):
    judge = _noisy_judge(si2024_frame, 1.0, seed=5)
    kw = {"resampling": _draws(50, 20, 20, seed=9)}
    assert ag.judge_consistency(si2024_frame, judge, **kw) == ag.judge_consistency(
        si2024_frame, judge, **kw
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"confidence": 1.0}, "confidence must be in (0, 1)"),
        ({"top_fraction": 0.6}, "top_fraction must be in (0, 0.5]"),
        ({"n_splits": 0}, "n_splits and splits_per_resample must be >= 1"),
        ({"n_bootstrap": -1}, "n_bootstrap and n_permutations must be >= 0"),
        ({"rows": "some"}, "rows must be 'all' or 'unique'"),
    ],
)
def test_resampling_options_out_of_range_are_refused_by_name(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ag.Resampling(**options)


def test_a_judge_consistency_that_cannot_be_computed_reports_no_resampled_figures():
    frame = _frame({f"i{i}": [i % 10 + 1, 5] for i in range(3)})
    res = ag.judge_consistency(frame, _judge({f"i{i}": float(i) for i in range(3)}))
    assert not res.computed and "too few" in (res.reason or "")
    assert list(res.as_dict())[-3:] == ["ceiling", "reason", "balanced_accuracy"]


def _reference_split(P, C, rng, top_fraction):
    """One random split per replicate, computed plainly (as the module first did): P
    (slots, reps, units) with NaN for no review, C (reps, units) the judge's score ranks;
    the picks are np.argpartition's. Same random draws, in the same order, as the module."""
    _, reps, units = P.shape
    mean_a, mean_b = plain_half_means(P, rng)
    b = np.round(mean_b, 9)
    med = np.median(b, axis=-1, keepdims=True)
    pred_top = (b > med) | ((b == med) & (rng.random((reps, units)) < 0.5))
    k = int(np.floor(top_fraction * units))

    def accuracy(key):
        part = np.argpartition(key, (k - 1, units - k), axis=-1)
        top = np.take_along_axis(pred_top, part[:, units - k :], axis=-1).sum(-1)
        bottom = (~np.take_along_axis(pred_top, part[:, :k], axis=-1)).sum(-1)
        return (top + bottom) / (2 * k)

    judge = accuracy(C + rng.random((reps, units)) * 0.5)
    human = accuracy(np.round(mean_a, 9) + rng.random((reps, units)) * 1e-10)
    return judge, human


@pytest.mark.parametrize("judge_scale", [3, 1000])  # many ties at the cut, or almost none
def test_judge_consistency_equals_a_plain_computation_of_the_same_draws(judge_scale):
    rng = np.random.default_rng(11)
    n_ideas = 60
    frame = _frame(
        {f"i{i:02d}": list(rng.integers(1, 11, rng.integers(2, 6))) for i in range(n_ideas)}
    )
    scores = {f"i{i:02d}": float(rng.integers(0, judge_scale)) for i in range(n_ideas)}
    splits, boot, perms, per = 40, 30, 30, 3
    got = ag.judge_consistency(
        frame, _judge(scores), ceiling=False,
        resampling=_draws(splits, boot, perms, splits_per_resample=per, seed=4),
    ).as_dict()  # fmt: skip

    from studies.analysis.consistency import score_matrix

    P = score_matrix(frame, "overall").to_numpy(float).T  # slots x units
    J = np.array([scores[i] for _, i in score_matrix(frame, "overall").index])
    codes = np.unique(J, return_inverse=True)[1].astype(float)
    units = P.shape[1]
    assert per * boot * units <= ag._CELLS  # one batch per phase, as here
    r = np.random.default_rng(4)
    j, h = _reference_split(
        np.broadcast_to(P[:, None], (len(P), splits, units)),
        np.broadcast_to(codes, (splits, units)), r, 0.25,
    )  # fmt: skip
    idx = r.integers(0, units, size=(boot, units))
    bj, bh = _reference_split(
        np.repeat(P[:, idx], per, axis=1), np.repeat(codes[idx], per, axis=0), r, 0.25
    )
    shuffled = r.permuted(np.broadcast_to(codes, (perms, units)), axis=1)
    null, _ = _reference_split(
        np.broadcast_to(P[:, None], (len(P), perms * per, units)),
        np.repeat(shuffled, per, axis=0), r, 0.25,
    )  # fmt: skip
    bj, bh = bj.reshape(boot, per).mean(1), bh.reshape(boot, per).mean(1)
    null = null.reshape(perms, per).mean(1)
    assert got["balanced_accuracy"] == pytest.approx(j.mean(), abs=1e-12)
    assert got["human_same_splits"] == pytest.approx(h.mean(), abs=1e-12)
    assert got["split_sd"] == pytest.approx(j.std(ddof=1), abs=1e-12)
    lo, hi = np.quantile(bj, [0.025, 0.975])
    assert (got["ci_low"], got["ci_high"]) == pytest.approx((lo, hi), abs=1e-12)
    lo, hi = np.quantile(bj - bh, [0.025, 0.975])
    assert (got["difference_ci_low"], got["difference_ci_high"]) == pytest.approx(
        (lo, hi), abs=1e-12
    )
    assert got["null_mean"] == pytest.approx(null.mean(), abs=1e-12)
    assert got["p_value"] == (1 + np.sum(null >= j.mean() - 1e-12)) / (1 + perms)


# --------------------------------------------------------------------------- pairwise


def _pairs(rows: list[tuple[str, str, str, str]], dimension: str = "overall") -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["idea_a", "idea_b", "first_shown", "verdict"]).assign(
        dimension=dimension
    )


def _ratings(rows: list[tuple[str, str, str, str, str]]) -> pd.DataFrame:
    cols = ["reviewer_id", "idea_a", "idea_b", "shown_first", "choice"]
    return pd.DataFrame(rows, columns=cols).assign(dimension="overall")


def test_judge_preference_sums_both_orders_and_a_flip_is_a_tie():
    prefs = ag.judge_pair_preferences(
        _pairs(
            [
                ("a", "b", "a", "A"),
                ("a", "b", "b", "A"),  # a wins in both orders
                ("d", "c", "d", "A"),
                ("d", "c", "c", "B"),  # d wins as shown first, c wins as shown first: a flip
                ("e", "f", "e", "unparseable"),
                ("e", "f", "f", "B"),
                ("g", "h", "g", "unparseable"),
            ]
        )
    ).set_index(["x", "y"])
    assert prefs.loc[("a", "b"), "preference"] == "x"
    assert prefs.loc[("c", "d"), "preference"] == "tie"
    assert prefs.loc[("e", "f"), ["preference", "n_verdicts", "n_unparseable"]].tolist() == [
        "y",
        1,
        1,
    ]
    assert ("g", "h") not in prefs.index  # nothing parseable: no preference


def test_human_choices_are_translated_from_the_side_shown():
    winners = ag.human_pair_winners(
        _ratings(
            [
                ("r1", "a", "b", "a", "first"),
                ("r2", "a", "b", "b", "first"),
                ("r3", "b", "a", "b", "second"),
                ("r4", "a", "b", "b", "tie"),
            ]
        )
    )
    assert winners["winner"].tolist() == ["x", "y", "x", "tie"]
    assert (winners["x"] == "a").all()


def test_symmetric_kappa_equals_scikit_learn_on_both_orientations():
    cohen_kappa_score = pytest.importorskip("sklearn.metrics").cohen_kappa_score
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(5, 60))
        first = rng.choice(ag.LABELS, n, p=[0.5, 0.3, 0.2]).tolist()
        second = [f if rng.random() < 0.6 else rng.choice(ag.LABELS) for f in first]
        swap = {"x": "y", "y": "x", "tie": "tie"}
        ref = cohen_kappa_score(
            first + [swap[v] for v in first], second + [swap[v] for v in second]
        )
        assert ag.symmetric_kappa(first, second) == pytest.approx(ref, abs=1e-12)


def test_label_agreement_matches_a_hand_computation():
    # 4 items: x/x, y/y, x/y, tie/x. Doubled: 8 items, 4 agreeing, p_o = 1/2.
    # Doubled marginals: first (x 3, y 3, tie 2), second (x 4, y 4, tie 0):
    # p_e = (3*4 + 3*4) / 64 = 3/8, kappa = (1/2 - 3/8) / (5/8) = 1/5.
    # Without ties: x/x, y/y, x/y -> p_o 2/3, marginals 3/3 and 3/3, p_e 1/2, kappa 1/3.
    res = ag.label_agreement(["x", "y", "x", "tie"], ["x", "y", "y", "x"]).as_dict()
    assert res["with_ties"] == {"n": 4, "accuracy": 0.5, "kappa": pytest.approx(0.2)}
    assert res["without_ties"]["accuracy"] == pytest.approx(2 / 3)
    assert res["without_ties"]["kappa"] == pytest.approx(1 / 3)
    assert res["without_ties"]["n_dropped"] == 1
    assert res["confusion"] == [[1, 1, 0], [0, 1, 0], [1, 0, 0]]


def test_pairwise_agreement_against_ratings_means_and_other_reviewers():
    judge = _pairs(
        [
            ("a", "b", "a", "A"),
            ("a", "b", "b", "A"),  # judge: a
            ("c", "d", "c", "B"),
            ("c", "d", "d", "B"),  # judge: d
            ("e", "f", "e", "A"),
            ("e", "f", "f", "B"),  # judge: tie (flips with the order)
        ]
    )
    ratings = _ratings(
        [
            ("r1", "a", "b", "a", "first"),  # a: agrees
            ("r2", "a", "b", "b", "second"),  # a: agrees
            ("r3", "b", "a", "a", "tie"),  # tie: judge decisive, disagrees
            ("r1", "c", "d", "c", "first"),  # c: disagrees
            ("r2", "g", "h", "g", "first"),  # never judged
        ]
    )
    frame = _frame({"a": [8, 7], "b": [3, 4], "c": [5, 5], "d": [5, 5], "e": [2], "f": [6]})
    res = ag.pairwise_agreement(judge, human_pairs=ratings, frame=frame)
    block = res.by_dimension["overall"]
    assert block["n_judged_pairs"] == 3 and block["judge_tie_rate"] == pytest.approx(1 / 3)

    vs = block["vs_human_ratings"]
    assert (vs["n"], vs["n_pairs"], vs["n_ratings_unmatched"]) == (4, 2, 1)
    assert vs["with_ties"]["accuracy"] == pytest.approx(0.5)
    assert vs["without_ties"]["n"] == 3
    assert vs["without_ties"]["accuracy"] == pytest.approx(2 / 3)

    # Means: a > b agrees; c = d is a human tie vs judge d; e < f vs judge tie.
    means = block["vs_human_means"]
    assert means["n"] == 3 and means["with_ties"]["accuracy"] == pytest.approx(1 / 3)
    assert means["without_ties"]["n"] == 1 and means["without_ties"]["accuracy"] == 1.0

    # a-b was rated by three reviewers: 3 reviewer pairs (x,x) (x,tie) (x,tie).
    hh = block["human_human"]
    assert (hh["n_pairs"], hh["n"]) == (1, 3)
    assert hh["with_ties"]["accuracy"] == pytest.approx(1 / 3)
    # Kappa counts both reviewer orders and both orientations of the pair (12 items).
    swap = {"x": "y", "y": "x", "tie": "tie"}
    f, s = ["x", "x", "x", "x", "tie", "tie"], ["x", "tie", "tie", "x", "x", "x"]
    f, s = f + [swap[v] for v in f], s + [swap[v] for v in s]
    p_o = np.mean(np.array(f) == np.array(s))
    p_e = sum(f.count(c) * s.count(c) for c in ag.LABELS) / len(f) ** 2
    assert hh["with_ties"]["kappa"] == pytest.approx((p_o - p_e) / (1 - p_e))
    assert hh["judge_on_same_pairs"]["n"] == 3
    assert hh["judge_on_same_pairs"]["with_ties"]["accuracy"] == pytest.approx(2 / 3)
    json.dumps(res.as_dict(), allow_nan=False)


def test_pairwise_agreement_without_human_inputs_says_what_is_missing():
    res = ag.pairwise_agreement(_pairs([("a", "b", "a", "A")]))
    block = res.by_dimension["overall"]
    assert block["vs_human_ratings"]["reason"] == "no human pair ratings given"
    assert block["vs_human_means"]["reason"] == "no review frame given"


def test_an_unknown_verdict_is_a_clear_error():
    with pytest.raises(ValueError, match="verdict must be one of"):
        ag.judge_pair_preferences(_pairs([("a", "b", "a", "first")]))


# ------------------------------------------------------------------------ top-k overlap


def test_top_k_overlap_matches_a_hand_computed_case():
    frame = _frame({i: [s, s] for i, s in zip("abcdefgh", [8, 7, 6, 5, 4, 3, 2, 1], strict=True)})
    judge = _judge(dict(zip("abcdefgh", [8, 1, 7, 2, 3, 4, 5, 6], strict=True)))
    res = ag.top_k_overlap(frame, judge, k=0.25)  # k = 2: humans {a, b}, judge {a, c}
    assert (res.k, res.overlap, res.share) == (2, 1.0, 0.5)
    assert res.expected_by_chance == pytest.approx(0.5)
    assert res.p_value == pytest.approx(stats.hypergeom.sf(0, 8, 2, 2))


def test_top_k_overlap_breaks_ties_at_the_cut_by_expectation():
    frame = _frame({i: [s, s] for i, s in zip("abcdef", [6, 5, 4, 3, 2, 1], strict=True)})
    judge = _judge(dict(zip("abcdef", [9, 5, 5, 5, 1, 1], strict=True)))
    res = ag.top_k_overlap(frame, judge, k=2)  # judge: a sure, one of b/c/d
    assert res.overlap == pytest.approx(1 + 1 / 3)
    assert res.n_tied_at_cut_judge == 3 and res.n_tied_at_cut_human == 0
    assert res.p_value == pytest.approx(stats.hypergeom.sf(0, 6, 2, 2))


def test_a_perfect_judge_overlaps_fully_and_a_noisy_one_less_on_si2024(si2024_frame):
    exact = ag.top_k_overlap(si2024_frame, _noisy_judge(si2024_frame, 0.0, 0))
    noisy = ag.top_k_overlap(si2024_frame, _noisy_judge(si2024_frame, 3.0, 0))
    assert exact.n_ideas == 129 and exact.k == 32
    # Human means tie at the cut, so even a perfect judge's overlap is an expectation < k.
    assert exact.overlap > noisy.overlap > exact.expected_by_chance - 3
    assert exact.p_value < 1e-10


# -------------------------------------------------------------------------- diagnostics


def test_diagnostics_measure_position_bias_length_bias_and_failures():
    pairs = _pairs(
        [
            ("a", "b", "a", "A"),
            ("a", "b", "b", "A"),  # consistent
            ("c", "d", "c", "A"),
            ("c", "d", "d", "B"),  # first shown won both times: inconsistent
            ("e", "f", "e", "tie"),
            ("e", "f", "f", "unparseable"),  # no parseable couple
        ]
    ).assign(len_a=[100, 100, 50, 50, 10, 10], len_b=[80, 80, 70, 70, 10, 10], cost=0.5)
    res = ag.judge_diagnostics(judge_pairs=pairs).pairwise
    assert res["position_consistency"]["n"] == 2
    assert res["position_consistency"]["consistency"] == 0.5
    # Decisive: a(first) a(second) c(first) d(first): 3 of 4 won by the first shown.
    assert res["first_position_win_rate"]["rate"] == 0.75
    assert res["first_position_win_rate"]["p_value"] == pytest.approx(0.625)
    # Longer: a 100>80 won twice, c 50<70 won once, d won once -> 3 of 4.
    assert res["longer_text_win_rate"]["rate"] == 0.75
    assert res["unparseable_rate"] == pytest.approx(1 / 6)
    assert res["tie_rate"] == pytest.approx(1 / 5)
    assert res["cost_per_idea"]["value"] == pytest.approx(3.0 / 6)


def test_diagnostics_without_lengths_or_costs_say_they_cannot_compute():
    pairs = _pairs([("a", "b", "a", "A"), ("a", "b", "b", "B")])
    scores = _judge({"a": 5.0, "b": np.nan})
    res = ag.judge_diagnostics(judge_pairs=pairs, judge_scores=scores)
    assert res.pairwise["longer_text_win_rate"]["reason"] == "cannot compute: no text lengths"
    assert res.pairwise["longer_text_win_rate"]["rate"] is None
    assert res.pairwise["cost_per_idea"]["reason"] == "cannot compute: no costs"
    assert res.direct["unparseable_rate"] == 0.5
    with_map = ag.judge_diagnostics(judge_pairs=pairs, lengths={"a": 10, "b": 20})
    assert with_map.pairwise["longer_text_win_rate"]["rate"] == 0.5
    json.dumps(res.as_dict(), allow_nan=False)


# ------------------------------------------------------------------------- Krippendorff


def test_alpha_with_a_judge_equals_the_krippendorff_package_on_random_data():
    krippendorff = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(7)
    n_ideas, n_reviewers = 40, 10
    data = np.full((n_reviewers + 1, n_ideas), np.nan)
    rows = []
    for i in range(n_ideas):
        who = rng.choice(n_reviewers, size=rng.integers(1, 5), replace=False)
        for r in who:
            data[r, i] = rng.integers(1, 11)
            rows.append((f"i{i:02d}", f"i{i}r{r}", f"r{r}", data[r, i]))
    frame = pd.DataFrame(rows, columns=["idea_id", "review_id", "reviewer_id", "overall"])
    frame = frame.assign(condition="C", topic="t")
    judged = rng.random(n_ideas) < 0.8
    data[n_reviewers, judged] = rng.integers(1, 11, judged.sum())
    judge = _judge({f"i{i:02d}": data[n_reviewers, i] for i in np.flatnonzero(judged)})

    res = ag.krippendorff_with_judges(frame, {"j": judge}, "overall", level="ordinal")
    humans = krippendorff.alpha(reliability_data=data[:n_reviewers], level_of_measurement="ordinal")
    both = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal")
    assert res.humans["alpha"] == pytest.approx(humans, rel=1e-9)
    assert res.judges["j"]["alpha"] == pytest.approx(both, rel=1e-9)
    assert res.judges["j"]["n_values"] == int(
        (~np.isnan(data)).sum(0)[(~np.isnan(data)).sum(0) >= 2].sum()
    )
    assert res.judges["j"]["delta"] == pytest.approx(both - humans, rel=1e-9)


def test_a_judge_equal_to_the_human_mean_raises_alpha_and_a_random_one_lowers_it(si2024_frame):
    ideas = sorted(si2024_frame["idea_id"].unique())
    rng = np.random.default_rng(0)
    res = ag.krippendorff_with_judges(
        si2024_frame,
        {
            "mean": _noisy_judge(si2024_frame, 0.0, 0),
            "random": _judge(dict(zip(ideas, rng.integers(1, 11, len(ideas)), strict=True))),
            "noisy": _noisy_judge(si2024_frame, 4.0, 0),
        },
        "overall",
    )
    humans = res.humans
    assert (humans["n_units"], humans["n_values"]) == (129, 296)
    assert abs(humans["alpha"] - 0.087) < 0.005
    assert res.judges["mean"]["alpha"] > humans["alpha"] > res.judges["random"]["alpha"]
    assert res.judges["mean"]["n_values"] == 296 + 129
    assert res.judges["noisy"]["outside_human_range"] is True
    assert res.judges["mean"]["outside_human_range"] is False


def test_one_call_gives_every_statistic_of_a_judge_run_as_json(si2024_frame):
    judge = _noisy_judge(si2024_frame, 1.0, seed=6)
    ideas = sorted(si2024_frame["idea_id"].unique())[:20]
    pairs = _pairs(
        [
            (a, b, first, "A")
            for a, b in zip(ideas[::2], ideas[1::2], strict=True)
            for first in (a, b)
        ]
    )
    res = ag.judge_agreement(
        si2024_frame,
        judge_scores=judge,
        judge_pairs=pairs,
        metrics=["overall", "novelty"],
        resampling=_draws(50, 20, 20),
    ).as_dict()
    json.dumps(res, allow_nan=False)
    assert set(res) == {"draws", "absolute", "consistency", "top_k", "pairwise", "diagnostics"}
    # a study this size keeps the draws it asked for
    assert res["draws"]["scaled"] is False and res["draws"]["n_bootstrap"] == 20
    assert set(res["consistency"]) == {"overall", "novelty"}
    assert res["pairwise"]["by_dimension"]["overall"]["vs_human_means"]["n"] == 10
    assert res["diagnostics"]["pairwise"]["position_consistency"]["consistency"] == 1.0
    assert res["diagnostics"]["pairwise"]["longer_text_win_rate"]["reason"] == ag.NO_LENGTHS


def test_draws_shrink_in_proportion_past_1500_idea_units_but_not_below_100():
    assert ag.scaled_draws(200, 300) == 200
    assert ag.scaled_draws(1000, 3000) == 500
    assert ag.scaled_draws(200, 10_000) == 100
    assert ag.scaled_draws(50, 10_000) == 50


def test_judges_of_one_report_share_one_human_ceiling_per_metric(si2024_frame):
    cache: dict = {}
    results = [
        ag.judge_agreement(
            si2024_frame,
            judge_scores=_noisy_judge(si2024_frame, sd, seed=6),
            metrics=["overall", "novelty"],
            resampling=_draws(30, 10, 10),
            ceiling_cache=cache,
        )
        for sd in (0.5, 2.0)
    ]
    # One ceiling, one score matrix and one set of recorded splits per metric, not per
    # judge and metric.
    assert sorted(k[0] for k in cache) == [
        "novelty", "overall", "score_matrix", "score_matrix", "splits", "splits"
    ]  # fmt: skip
    for m in ("overall", "novelty"):
        first, second = (r.consistency[m].ceiling for r in results if r.consistency)
        assert first is second
        alone = ag.judge_consistency(
            si2024_frame, _noisy_judge(si2024_frame, 2.0, seed=6), m,
            resampling=_draws(30, 10, 10),
        ).ceiling  # fmt: skip
        assert alone == first


@pytest.mark.parametrize("judge_scale", [3, 1000])  # many ties at the cut, or almost none
def test_a_judge_replaying_recorded_splits_gets_what_it_gets_alone(si2024_frame, judge_scale):
    rng = np.random.default_rng(7)
    ideas = sorted(si2024_frame["idea_id"].unique())
    judges = [
        pd.DataFrame(
            {
                "idea_id": ideas,
                "metric": "overall",
                "score": rng.integers(0, judge_scale, len(ideas)),
            }
        ).astype({"score": float})
        for _ in range(3)
    ]
    kw = {"resampling": _draws(40, 20, 20, splits_per_resample=3)}
    cache: dict = {}
    shared = [ag.judge_consistency(si2024_frame, j, ceiling_cache=cache, **kw) for j in judges]
    alone = [ag.judge_consistency(si2024_frame, j, **kw) for j in judges]
    assert [len(v) for k, v in cache.items() if k[0] == "splits"] == [3]  # recorded once
    assert shared == alone
    assert len({r.balanced_accuracy for r in alone}) == 3
    # A judge of other ideas gets splits of its own units.
    fewer = judges[0][judges[0]["idea_id"].isin(ideas[:90])]
    assert ag.judge_consistency(si2024_frame, fewer, ceiling_cache=cache, **kw) == (
        ag.judge_consistency(si2024_frame, fewer, **kw)
    )
