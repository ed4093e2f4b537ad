"""The cumulative-link mixed model without R: its gradient, its inputs, its result shape.

The equality with R's ``ordinal::clmm`` is in test_ordinal_crosscheck.py (marked ``r``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from studies.analysis import ordinal
from studies.analysis.mixed import prepare_mixed_data
from studies.analysis.simulate import simulate_study


def _sim(n_reviewers: int = 60, per_condition: int = 40, seed: int = 3) -> pd.DataFrame:
    return simulate_study(
        n_reviewers=n_reviewers,
        n_ideas_per_condition=per_condition,
        reviews_per_idea=3,
        metrics=("overall",),
        discretize=True,
        seed=seed,
    )


def _problem(df: pd.DataFrame, groups: tuple[str, ...], engine: str = "dense") -> ordinal._Clmm:
    prep = prepare_mixed_data(df, "overall", baseline="Human", groups=groups)
    y = np.searchsorted(np.unique(prep.y), prep.y)
    codes, sizes = [], []
    for g in prep.groups_used:
        c, u = pd.factorize(prep.group_labels[g])
        codes.append(c)
        sizes.append(len(u))
    return ordinal._Clmm(y, prep.X[:, 1:], codes, sizes, engine=engine)


@pytest.mark.parametrize(
    "groups", [("reviewer_id", "idea_id"), ("idea_id",), ("topic", "reviewer_id", "idea_id")]
)
@pytest.mark.parametrize("engine", ["dense", "sparse"])
def test_laplace_gradient_equals_central_differences(groups, engine) -> None:
    prob = _problem(_sim(), groups, engine)
    rng = np.random.default_rng(0)
    psi = ordinal._start(prob.y, prob.K, prob.p, prob.G)
    psi[prob.K - 1 :] += rng.normal(0, 0.3, prob.p + prob.G)
    _, grad = prob.value_and_grad(psi)
    h = 1e-5
    numeric = np.array(
        [(prob.value(psi + e) - prob.value(psi - e)) / (2 * h) for e in np.eye(len(psi)) * h]
    )
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "groups", [("reviewer_id", "idea_id"), ("topic", "reviewer_id", "idea_id")]
)
def test_the_sparse_reviewer_block_gives_the_dense_likelihood_and_gradient(groups) -> None:
    df = _sim(n_reviewers=150, per_condition=100, seed=8)
    dense, sparse = _problem(df, groups, "dense"), _problem(df, groups, "sparse")
    rng = np.random.default_rng(1)
    for _ in range(3):
        psi = ordinal._start(dense.y, dense.K, dense.p, dense.G)
        psi[dense.K - 1 :] += rng.normal(0, 0.5, dense.p + dense.G)
        v_dense, g_dense = dense.value_and_grad(psi)
        v_sparse, g_sparse = sparse.value_and_grad(psi)
        assert v_sparse == pytest.approx(v_dense, rel=1e-12)
        np.testing.assert_allclose(g_sparse, g_dense, rtol=1e-9, atol=1e-9)


def test_sparse_and_dense_fits_give_the_same_estimates() -> None:
    # 900 reviews, 300 ideas x 180 reviewers: above the auto engine's dense limit.
    df = _sim(n_reviewers=180, per_condition=100, seed=11)
    sparse = ordinal.fit_ordinal(df, "overall", baseline="Human")
    dense = ordinal.fit_ordinal(df, "overall", baseline="Human", engine="dense")
    assert sparse.details["schur"] == "sparse" and dense.details["schur"] == "dense"
    assert sparse.converged and dense.converged
    assert sparse.loglik == pytest.approx(dense.loglik, abs=1e-8)
    for a, b in zip(sparse.thresholds + sparse.fixed, dense.thresholds + dense.fixed, strict=True):
        assert a["coef"] == pytest.approx(b["coef"], abs=1e-6)
        assert a["se"] == pytest.approx(b["se"], abs=1e-6)
    for g, sd in dense.sd.items():
        assert sparse.sd[g] == pytest.approx(sd, abs=1e-6)


def test_ordinal_fit_recovers_the_direction_of_the_condition_effects() -> None:
    fit = ordinal.fit_ordinal(_sim(n_reviewers=120, per_condition=80), "overall", baseline="Human")
    assert fit.converged
    assert fit.term("condition[AI_Rerank]")["coef"] > 0
    assert set(fit.sd) == {"reviewer_id", "idea_id"}
    assert [t["term"] for t in fit.thresholds][0] == f"{fit.levels[0]}|{fit.levels[1]}"
    assert fit.to_dict()["loglik"] == pytest.approx(fit.loglik)


def test_ordinal_fit_refuses_non_integer_scores() -> None:
    df = _sim()
    df.loc[df.index[0], "overall"] = 4.5
    with pytest.raises(ValueError, match="non-integer scores"):
        ordinal.fit_ordinal(df, "overall", baseline="Human")


def test_ordinal_fit_refuses_data_without_any_grouping_factor() -> None:
    df = _sim().drop(columns=["reviewer_id", "idea_id"])
    with pytest.raises(ValueError, match="no grouping factor"):
        ordinal.fit_ordinal(df, "overall", baseline="Human")


def _tiny(seed: int, n: int = 6) -> pd.DataFrame:
    """The size of the browser walk's study: six reviews, two conditions, scores 1-10."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "condition": ["Human", "AI"] * (n // 2),
            "reviewer_id": [f"r{i % 3}" for i in range(n)],
            "idea_id": [f"i{i % 4}" for i in range(n)],
            "overall": rng.integers(1, 11, n).astype(float),
        }
    )


def test_a_tiny_study_is_not_fitted_and_the_report_says_why(recwarn) -> None:
    from studies.analysis.report import ReportOptions, build_ordinal

    df = _tiny(seed=4)  # levels 6, 8, 9, 10: 3 thresholds + 1 effect + 2 SDs
    with pytest.raises(ValueError, match=r"too few reviews: overall has 6 review\(s\)") as err:
        ordinal.fit_ordinal(df, "overall", baseline="Human")
    assert "6 parameters" in str(err.value)
    assert f"{ordinal.MIN_REVIEWS_PER_PARAMETER * 6}" in str(err.value)
    section = build_ordinal(
        df, metrics=["overall"], baseline="Human", idea_unit="idea_id", options=ReportOptions()
    )
    assert section["fits"]["overall"]["error"].startswith("too few reviews")
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_the_size_rule_counts_the_parameters_the_model_has() -> None:
    """Ten levels, three conditions, two factors: 9 thresholds + 2 effects + 2 SDs."""
    needed = ordinal.MIN_REVIEWS_PER_PARAMETER * 13
    with pytest.raises(ValueError, match=f"13 parameters .* here {needed}"):
        ordinal._check_size("overall", n=needed - 1, levels=10, p=2, G=2)
    ordinal._check_size("overall", n=needed, levels=10, p=2, G=2)


@pytest.mark.parametrize("seed", [4, 5, 6, 10, 31])
def test_fits_past_the_size_rule_raise_no_numpy_warnings(monkeypatch, seed) -> None:
    """Where the tiny fits used to divide 0 by 0 and take logs of negative curvatures,
    the optimiser now backs off: no RuntimeWarning, whatever the fit's outcome."""
    monkeypatch.setattr(ordinal, "MIN_REVIEWS_PER_PARAMETER", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            fit = ordinal.fit_ordinal(_tiny(seed), "overall", baseline="Human")
        except ValueError as exc:  # a refusal must say why, in words
            assert "finite likelihood" in str(exc) or "level" in str(exc)
        else:
            assert np.isfinite(fit.loglik)


def test_review_probabilities_that_underflow_give_no_nan_and_no_warning() -> None:
    a = np.array([-800.0, 1.0])
    c = np.array([-900.0, -1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pieces = ordinal._pieces(a, c, full=True)
    assert pieces.logp[0] == -np.inf and np.isfinite(pieces.logp[1])
    for name in ("d1", "w", "d3", "la", "lc", "a_d1", "c_d1", "a_d2", "c_d2"):
        assert np.all(np.isfinite(getattr(pieces, name))), name
