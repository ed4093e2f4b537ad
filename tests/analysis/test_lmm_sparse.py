"""Our lme4-style sparse engine: coverage on simulated data and degenerate inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from studies.analysis import lmm_sparse
from studies.analysis.lmm_sparse import _HybridFactor, available_backends, design_matrix, fit_lmm
from studies.analysis.mixed import fit_mixed
from tests.analysis.simulations import simulate_crossed


@pytest.mark.slow
def test_mixed_model_ci_covers_true_effect_in_at_least_90_percent_of_replications() -> None:
    true = {"condition[AI]": 0.5, "condition[AI_Rerank]": 0.8}
    hits = {t: 0 for t in true}
    reps = 50
    for seed in range(reps):
        df = simulate_crossed(n_ideas=45, n_reviewers=20, n_topics=1, seed=seed)
        X, names = design_matrix(df, baseline="Human")
        fit = fit_lmm(
            df["score"].to_numpy(),
            X,
            {"reviewer_id": df["reviewer_id"], "idea_id": df["idea_id"]},
            fixed_names=names,
            n_starts=1,
            satterthwaite=False,
        )
        for t, beta in true.items():
            j = names.index(t)
            lo, hi = fit.coef[j] - 1.96 * fit.se[j], fit.coef[j] + 1.96 * fit.se[j]
            hits[t] += lo <= beta <= hi
    for t, h in hits.items():
        assert h / reps >= 0.90, f"{t}: covered in {h}/{reps}"


def test_engine_recovers_variance_components_roughly() -> None:
    df = simulate_crossed(n_ideas=300, n_reviewers=100, n_topics=5, seed=3)
    X, names = design_matrix(df, baseline="Human")
    fit = fit_lmm(
        df["score"].to_numpy(),
        X,
        {"topic": df["topic"], "reviewer_id": df["reviewer_id"], "idea_id": df["idea_id"]},
        fixed_names=names,
        n_starts=2,
    )
    assert fit.converged and fit.starts_agree
    assert fit.variances["reviewer_id"] == pytest.approx(0.49, abs=0.25)
    assert fit.sigma2 == pytest.approx(2.25, abs=0.4)
    assert fit.n_levels == {"topic": 5, "reviewer_id": 100, "idea_id": 300}
    assert fit.df is not None and np.all(fit.df > 1)


def test_the_fit_does_not_depend_on_the_design_matrix_memory_layout() -> None:
    # formulaic hands over column-major matrices; a hand-built design is row-major
    df = simulate_crossed(seed=11)
    X, names = design_matrix(df, baseline="Human")
    groups = {g: df[g] for g in ("topic", "reviewer_id", "idea_id")}
    rows = fit_lmm(df["score"].to_numpy(), np.ascontiguousarray(X), groups, n_starts=1)
    cols = fit_lmm(df["score"].to_numpy(), np.asfortranarray(X), groups, n_starts=1)
    assert cols.loglik == rows.loglik
    np.testing.assert_array_equal(cols.coef, rows.coef)
    np.testing.assert_array_equal(cols.se, rows.se)


def test_satterthwaite_df_refactorise_only_for_steps_in_the_large_factors(monkeypatch) -> None:
    # What makes the df affordable at 100,000 reviews: the Hessian's steps in the small
    # (profiled) factor's theta and in sigma reuse the cached factorisation of the large
    # factors, so only the 2 + 2 one-sided and 4 cross steps in (reviewer, idea) can be
    # new. Here the one-sided ones are still cached from the convergence check's gradient,
    # which steps the same h: 4 new.
    df = simulate_crossed(seed=12, n_ideas=120, n_reviewers=50)
    X, names = design_matrix(df, baseline="Human")
    groups = {g: df[g] for g in ("topic", "reviewer_id", "idea_id")}
    calls = {"outer": 0, "inside": 0}
    outer, satterthwaite = lmm_sparse._Problem.outer, lmm_sparse._satterthwaite

    def counted_outer(self: Any, theta: np.ndarray) -> Any:
        calls["outer"] += 1
        return outer(self, theta)

    def counted_satterthwaite(*args: Any, **kwargs: Any) -> Any:
        before = calls["outer"]
        out = satterthwaite(*args, **kwargs)
        calls["inside"] += calls["outer"] - before
        return out

    monkeypatch.setattr(lmm_sparse._Problem, "outer", counted_outer)
    monkeypatch.setattr(lmm_sparse, "_satterthwaite", counted_satterthwaite)
    plain = fit_lmm(df["score"].to_numpy(), X, groups, n_starts=1, satterthwaite=False)
    assert plain.df is None and plain.p_satterthwaite is None and calls["inside"] == 0
    fit = fit_lmm(df["score"].to_numpy(), X, groups, n_starts=1)  # on by default
    assert fit.extra["profiled_factor"] == "topic"
    assert min(fit.variances.values()) > 0.01  # no boundary: all four parameters move
    assert fit.df is not None and np.all(fit.df > 1)
    assert calls["inside"] == 4
    assert fit.loglik == plain.loglik


def test_single_level_factor_is_dropped_with_a_reason() -> None:
    df = simulate_crossed(n_topics=1, seed=1)
    res = fit_mixed(df, "score", baseline="Human", engine="sparse", n_starts=1)
    assert "topic" not in res.groups_used
    assert "only one topic level" in res.groups_dropped["topic"]


def test_missing_reviewer_ids_are_dropped_with_the_documented_reason() -> None:
    df = simulate_crossed(seed=2)
    df["reviewer_id"] = None
    res = fit_mixed(df, "score", baseline="Human", engine="sparse", n_starts=1)
    assert res.groups_dropped["reviewer_id"] == "no reviewer ids in the data"
    assert res.groups_used == ["topic", "idea_id"]


def test_condition_with_no_rows_is_refused() -> None:
    df = simulate_crossed(seed=4)
    df["condition"] = pd.Categorical(df["condition"], categories=["Human", "AI", "AI_Rerank", "X"])
    with pytest.raises(ValueError, match="condition\\(s\\) with no rows: X"):
        fit_mixed(df, "score", baseline="Human", engine="sparse")


def test_missing_baseline_is_refused() -> None:
    df = simulate_crossed(seed=4)
    with pytest.raises(ValueError, match="baseline condition 'Nope' has no rows"):
        fit_mixed(df, "score", baseline="Nope", engine="sparse")


def test_all_equal_scores_are_refused() -> None:
    df = simulate_crossed(seed=5)
    df["score"] = 5.0
    with pytest.raises(ValueError, match="all .* scores are equal"):
        fit_mixed(df, "score", baseline="Human", engine="sparse")


def test_collinear_fixed_effects_are_refused() -> None:
    df = simulate_crossed(seed=6)
    X, names = design_matrix(df, baseline="Human")
    X = np.column_stack([X, X[:, 1] * 2.0])
    with pytest.raises(ValueError, match="perfectly collinear.*redundant"):
        fit_lmm(df["score"], X, {"idea_id": df["idea_id"]}, fixed_names=[*names, "twice_AI"])


def test_fewer_rows_than_parameters_is_refused() -> None:
    df = pd.DataFrame(
        {
            "condition": ["Human", "AI", "Human", "AI"],
            "topic": ["a", "a", "b", "b"],
            "reviewer_id": ["r1", "r2", "r1", "r2"],
            "idea_id": ["i1", "i2", "i3", "i4"],
            "score": [1.0, 2.0, 3.0, 5.0],
        }
    )
    with pytest.raises(ValueError, match="fewer rows than parameters"):
        fit_mixed(df, "score", baseline="Human", engine="sparse", groups=("topic", "reviewer_id"))


def test_only_baseline_condition_is_refused() -> None:
    df = simulate_crossed(seed=7)
    df = df[df["condition"] == "Human"]
    with pytest.raises(ValueError, match="no condition effect to estimate"):
        fit_mixed(df, "score", baseline="Human", engine="sparse")


def test_reviewer_who_saw_one_condition_is_valid() -> None:
    df = simulate_crossed(seed=8)
    topic_of = df.groupby("idea_id")["topic"].first()
    extra = pd.DataFrame(
        {
            "idea_id": ["I0", "I3"],
            "condition": ["Human", "Human"],
            "topic": [topic_of["I0"], topic_of["I3"]],
            "reviewer_id": ["R_solo", "R_solo"],
            "score": [4.0, 6.0],
            "review_id": ["x1", "x2"],
        }
    )
    res = fit_mixed(
        pd.concat([df, extra], ignore_index=True),
        "score",
        baseline="Human",
        engine="sparse",
        n_starts=1,
    )
    assert res.converged
    assert res.n_levels["reviewer_id"] == 31


def test_boundary_fit_is_reported() -> None:
    # Topic effects of exactly zero and a tiny study: REML puts the topic variance on 0.
    rng = np.random.default_rng(0)
    df = simulate_crossed(n_ideas=30, n_reviewers=15, n_topics=6, sd_topic=0.0, seed=11)
    df["score"] = df["score"] + rng.normal(0, 0.01, len(df))
    fits = [
        fit_mixed(
            df.sample(frac=0.8, random_state=s),
            "score",
            baseline="Human",
            engine="sparse",
            n_starts=1,
        )
        for s in range(6)
    ]
    boundary = [f for f in fits if "topic" in f.boundary]
    assert boundary, "expected at least one singular topic fit"
    f = boundary[0]
    assert f.variance["topic"] == pytest.approx(0.0, abs=1e-6)
    assert any("boundary" in w for w in f.warnings)


# ------------------------------------------------------------ factorisation back-ends


def _random_spd_pattern(m: int, avg_deg: int, seed: int) -> sp.csc_matrix:
    """A random sparse SPD matrix with a symmetric pattern (an expander-like graph)."""
    rng = np.random.default_rng(seed)
    nnz = m * avg_deg // 2
    a = rng.integers(0, m, nnz)
    b = rng.integers(0, m, nnz)
    w = rng.uniform(-1, 1, nnz)
    off = sp.coo_matrix((w, (a, b)), shape=(m, m)).tocsc()
    off = off + off.T
    diag = np.asarray(abs(off).sum(axis=1)).ravel() + 1.0
    mat = (off + sp.diags(diag)).tocsc()
    mat.sum_duplicates()
    mat.sort_indices()
    return mat


@pytest.mark.parametrize(("tau", "avg_deg"), [(4, 6), (96, 6), (10_000, 2)])
def test_hybrid_factor_is_the_exact_cholesky(tau: int, avg_deg: int) -> None:
    mat = _random_spd_pattern(400, avg_deg, seed=tau)
    fac = _HybridFactor(mat, tau=tau)
    assert fac.n_sparse + fac.n_core == 400
    if tau == 10_000:  # a sparse enough graph is eliminated without any dense core
        assert fac.n_core < 400
    logdet = fac.factorize(mat.data.copy())
    dense = mat.toarray()
    assert logdet == pytest.approx(np.linalg.slogdet(dense)[1], rel=1e-12, abs=1e-9)
    rhs = np.random.default_rng(1).normal(size=(400, 3))
    np.testing.assert_allclose(fac.solve(rhs), np.linalg.solve(dense, rhs), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(
        fac.solve(rhs[:, 0]), np.linalg.solve(dense, rhs[:, 0]), rtol=1e-9, atol=1e-11
    )
    # new values on the same pattern reuse the symbolic analysis
    mat2 = mat.copy()
    mat2.data = mat2.data * 1.5
    mat2.setdiag(mat2.diagonal() + 2.0)
    assert fac.factorize(mat2.data.copy()) == pytest.approx(
        np.linalg.slogdet(mat2.toarray())[1], rel=1e-12
    )


def test_hybrid_factor_refuses_an_indefinite_matrix() -> None:
    mat = _random_spd_pattern(200, 4, seed=3)
    bad = mat.copy()
    bad.setdiag(-1.0)
    fac = _HybridFactor(mat, tau=8)
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        fac.factorize(bad.tocsc().data.copy())


def _crossed_fit(df: pd.DataFrame, backend: str, reml: bool = True, n_starts: int = 1) -> Any:
    X, names = design_matrix(df, baseline="Human")
    return fit_lmm(
        df["score"].to_numpy(),
        X,
        {"topic": df["topic"], "reviewer_id": df["reviewer_id"], "idea_id": df["idea_id"]},
        fixed_names=names,
        reml=reml,
        n_starts=n_starts,
        backend=backend,
        satterthwaite=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("reml", [True, False])
def test_all_backends_give_the_same_fit(reml: bool) -> None:
    # 400 reviewers crossed with 500 ideas: the reduced system is far above DENSE_MAX.
    df = simulate_crossed(n_ideas=500, n_reviewers=400, n_topics=5, seed=21)
    fits = {b: _crossed_fit(df, b, reml) for b in available_backends()}
    ref = fits["dense"]
    assert {f.backend for f in fits.values()} == set(available_backends())
    for b, f in fits.items():
        assert f.loglik == pytest.approx(ref.loglik, abs=1e-6), b
        np.testing.assert_allclose(f.coef, ref.coef, atol=1e-6, err_msg=b)
        np.testing.assert_allclose(f.se, ref.se, atol=1e-6, err_msg=b)
        for g, v in ref.variances.items():
            assert f.variances[g] == pytest.approx(v, abs=1e-5), (b, g)


def test_superlu_fallback_works_without_scikit_sparse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lmm_sparse, "_cholmod", None)
    assert "cholmod" not in available_backends()
    df = simulate_crossed(n_ideas=300, n_reviewers=250, n_topics=4, seed=22)
    auto = _crossed_fit(df, "auto")
    assert auto.backend in {"hybrid", "dense"}
    splu = _crossed_fit(df, "splu")
    assert splu.backend == "splu"
    assert splu.loglik == pytest.approx(auto.loglik, abs=1e-6)
    np.testing.assert_allclose(splu.coef, auto.coef, atol=1e-6)
    with pytest.raises(ValueError, match="backend 'cholmod' is not available"):
        _crossed_fit(df, "cholmod")


@pytest.mark.slow
def test_extra_starts_explored_on_a_subsample_agree_with_the_full_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    df = simulate_crossed(n_ideas=600, n_reviewers=200, n_topics=5, seed=23)
    plain = _crossed_fit(df, "auto", n_starts=3)
    assert all(s.stage == "full data" for s in plain.starts)
    monkeypatch.setattr(lmm_sparse, "EXPLORE_MIN_ROWS", 1000)
    explored = _crossed_fit(df, "auto", n_starts=3)
    # the first start is a pilot: subsample from theta = 1, then all rows from there
    assert explored.starts[0].stage == "subsample, then full data"
    assert {s.stage for s in explored.starts[1:]} <= {"subsample", "subsample, then full data"}
    assert explored.starts_agree
    assert "explore" in explored.extra and explored.extra["explore"]["rows"] < len(df)
    assert any("subsample" in w for w in explored.warnings)
    assert explored.loglik == pytest.approx(plain.loglik, abs=1e-6)
    np.testing.assert_allclose(explored.coef, plain.coef, atol=1e-6)


def _piloted_and_plain(monkeypatch: pytest.MonkeyPatch, seed: int) -> tuple[Any, Any]:
    """One start on a 600-idea design, fitted as a large study (subsample pilot, then the
    full data) and as a small one; the fits must agree."""
    df = simulate_crossed(n_ideas=600, n_reviewers=200, n_topics=5, seed=seed)
    plain = _crossed_fit(df, "auto", n_starts=1)
    with monkeypatch.context() as m:
        m.setattr(lmm_sparse, "EXPLORE_MIN_ROWS", 1000)
        piloted = _crossed_fit(df, "auto", n_starts=1)
    assert [s.stage for s in piloted.starts] == ["subsample, then full data"]
    assert piloted.starts[0].converged
    assert piloted.loglik == pytest.approx(plain.loglik, abs=1e-6)
    np.testing.assert_allclose(piloted.coef, plain.coef, atol=1e-6)
    return piloted, plain


@pytest.mark.slow
def test_a_single_start_on_a_large_study_is_piloted_on_a_subsample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _piloted_and_plain(monkeypatch, seed=24)


def _dense_reml_deviance(
    y: np.ndarray, X: np.ndarray, codes: list[np.ndarray], theta: np.ndarray, reml: bool
) -> float:
    """The lme4 deviance written out densely: solve the full penalised least squares
    system for (u, beta) and compute the residuals directly (no Schur complements, no
    ``y'y - b'A^-1 b`` identity, no profiling of small factors)."""
    n, p = X.shape
    blocks, lam = [], []
    for c, t in zip(codes, theta, strict=True):
        z = np.zeros((n, c.max() + 1))
        z[np.arange(n), c] = 1.0
        blocks.append(z)
        lam.append(np.full(z.shape[1], t))
    zl = np.hstack(blocks) * np.concatenate(lam)[None, :]
    q = zl.shape[1]
    big = np.block([[zl.T @ zl + np.eye(q), zl.T @ X], [X.T @ zl, X.T @ X]])
    sol = np.linalg.solve(big, np.concatenate([zl.T @ y, X.T @ y]))
    u, beta = sol[:q], sol[q:]
    pwrss = float(np.sum((y - X @ beta - zl @ u) ** 2) + u @ u)
    logdet_a = np.linalg.slogdet(zl.T @ zl + np.eye(q))[1]
    # R_X'R_X is the Schur complement of A in the full system
    rx = X.T @ X - X.T @ zl @ np.linalg.solve(zl.T @ zl + np.eye(q), zl.T @ X)
    if reml:
        d = n - p
        return float(logdet_a + np.linalg.slogdet(rx)[1] + d * (1 + np.log(2 * np.pi * pwrss / d)))
    return float(logdet_a + n * (1 + np.log(2 * np.pi * pwrss / n)))


@pytest.mark.parametrize("reml", [True, False])
def test_profiled_deviance_equals_a_dense_computation(reml: bool) -> None:
    # Scores around 100 check that working with y - X beta_ols loses nothing.
    df = simulate_crossed(n_ideas=90, n_reviewers=40, n_topics=5, seed=31)
    y = df["score"].to_numpy() + 95.0
    X, _ = design_matrix(df, baseline="Human")
    codes = [pd.factorize(df[g], sort=True)[0] for g in ("topic", "reviewer_id", "idea_id")]
    levels = [int(c.max()) + 1 for c in codes]
    prob = lmm_sparse._Problem(y, X, codes, levels, reml, "auto")
    assert prob.k_outer == 2  # ideas and reviewers searched; topics profiled inside
    rng = np.random.default_rng(5)
    for theta_user in [np.array([0.3, 0.8, 0.5]), np.array([0.0, 1.7, 0.05]), rng.uniform(0, 2, 3)]:
        ours = prob.deviance(np.asarray(theta_user)[prob.order])
        assert ours == pytest.approx(
            _dense_reml_deviance(y, X, codes, theta_user, reml), rel=1e-10, abs=1e-8
        )
    # profiling: the inner minimum over the topic theta is the minimum of the full curve
    th_out = np.array([0.45, 0.7])
    best, th_topic = prob.profile(th_out)
    grid = np.linspace(0.0, 2.0, 401)
    curve = [prob.deviance(np.concatenate([th_out, [t]])) for t in grid]
    assert best <= min(curve) + 1e-9
    assert th_topic[0] == pytest.approx(grid[int(np.argmin(curve))], abs=0.01)


def test_profiling_the_topic_factor_gives_the_same_fit_as_searching_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    df = simulate_crossed(n_ideas=300, n_reviewers=120, n_topics=6, seed=32)
    profiled = _crossed_fit(df, "auto")
    monkeypatch.setattr(lmm_sparse, "SMALL_MAX", 0)  # every factor searched by COBYQA
    searched = _crossed_fit(df, "auto")
    assert profiled.loglik == pytest.approx(searched.loglik, abs=1e-6)
    np.testing.assert_allclose(profiled.coef, searched.coef, atol=1e-6)
    np.testing.assert_allclose(profiled.se, searched.se, atol=1e-6)
    for g, v in searched.variances.items():
        assert profiled.variances[g] == pytest.approx(v, abs=1e-5), g
    # fewer factorisations: COBYQA searches two dimensions instead of three
    assert profiled.starts[0].n_evals < searched.starts[0].n_evals


def test_newton_refinement_converges_from_a_warm_start_and_gives_up_cleanly() -> None:
    calls = 0

    def bowl(x: np.ndarray) -> float:  # smooth, even in each coordinate, minimum (0.4, 0.9)
        nonlocal calls
        calls += 1
        a, b = x[0] ** 2, x[1] ** 2
        return float(50 * (a - 0.16) ** 2 + 30 * (b - 0.81) ** 2 + 10 * (a - 0.16) * (b - 0.81))

    x, fx, ok, why = lmm_sparse._newton(bowl, np.array([0.43, 0.86]))
    assert ok, why
    np.testing.assert_allclose(x, [0.4, 0.9], atol=1e-6)
    assert calls <= 20
    # a saddle: the Hessian is indefinite, so Newton refuses and the caller falls back
    x, fx, ok, why = lmm_sparse._newton(
        lambda v: float((v[0] - 1) ** 2 - (v[1] - 1) ** 2), np.array([0.9, 0.9])
    )
    assert not ok and "not positive definite" in why


def test_the_profiled_factor_and_start_stages_are_reported() -> None:
    df = simulate_crossed(n_ideas=120, n_reviewers=50, n_topics=4, seed=33)
    res = fit_mixed(df, "score", baseline="Human", engine="sparse", n_starts=2)
    assert res.details["profiled_factor"] == "topic"
    assert res.details["stages"] == ["full data", "full data"]


@pytest.mark.slow
def test_when_newton_gives_up_cobyqa_finishes_the_piloted_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_newton = lmm_sparse._newton

    def failing(f: Any, x0: np.ndarray, max_iter: int = 6) -> Any:
        x, fx, _, _ = real_newton(f, x0, max_iter=1)  # one round, then "give up"
        return x, fx, False, "Newton: not converged in 1 rounds"

    monkeypatch.setattr(lmm_sparse, "_newton", failing)
    piloted, _ = _piloted_and_plain(monkeypatch, seed=25)
    assert "Newton" not in piloted.starts[0].message  # COBYQA's message: it took over


def test_hybrid_factor_splits_an_independent_core_into_dense_blocks() -> None:
    # Two expander-like graphs with no edge between them (reviewers who stay inside their
    # own topic): the dense core must come out as (at least) two blocks, still exact.
    a, b = _random_spd_pattern(300, 8, seed=41), _random_spd_pattern(200, 8, seed=42)
    mat = sp.block_diag([a, b], format="csc")
    mat.sort_indices()
    fac = _HybridFactor(mat, tau=4)
    assert len(fac.block_sizes) >= 2 and fac.block_sizes.sum() == fac.n_core
    dense = mat.toarray()
    assert fac.factorize(mat.data.copy()) == pytest.approx(np.linalg.slogdet(dense)[1], rel=1e-12)
    rhs = np.random.default_rng(2).normal(size=(500, 4))
    np.testing.assert_allclose(fac.solve(rhs), np.linalg.solve(dense, rhs), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize(
    ("tau", "avg_deg", "blocks"), [(4, 6, 1), (96, 6, 1), (10_000, 2, 1), (4, 8, 2)]
)
def test_selected_inverse_and_vector_solve_equal_the_dense_inverse(
    tau: int, avg_deg: int, blocks: int
) -> None:
    # Sparse columns only, a dense core, both, and a core split into independent blocks.
    mat = sp.block_diag(
        [_random_spd_pattern(300, avg_deg, seed=tau + k) for k in range(blocks)], format="csc"
    )
    mat.sort_indices()
    fac = _HybridFactor(mat, tau=tau)
    fac.factorize(mat.data.copy())
    inverse = np.linalg.inv(mat.toarray())
    rows = mat.indices
    cols = np.repeat(np.arange(mat.shape[1]), np.diff(mat.indptr))
    where = fac.inverse_positions(rows, cols)
    got = fac.inverse_values(fac.selected_inverse(), where)
    np.testing.assert_allclose(got, inverse[rows, cols], rtol=1e-10, atol=1e-13)
    rhs = np.random.default_rng(5).normal(size=mat.shape[0])
    np.testing.assert_allclose(fac.solve_vector(rhs), inverse @ rhs, rtol=1e-9, atol=1e-11)
    # after new values, the inverse follows them
    mat2 = mat.copy()
    mat2.setdiag(mat2.diagonal() + 3.0)
    fac.factorize(mat2.data.copy())
    got2 = fac.inverse_values(fac.selected_inverse(), where)
    np.testing.assert_allclose(
        got2, np.linalg.inv(mat2.toarray())[rows, cols], rtol=1e-10, atol=1e-13
    )
