"""Our sparse engine against R's lme4 on simulated crossed designs and on si2024.

All lme4 fits run in one Rscript process (R start-up costs about a second), and the
lmerTest fits (Satterthwaite df) in a second one.  The tests skip when Rscript, lme4 or
lmerTest is missing, unless IDEAREVIEW_REQUIRE_R=1 (CI), where a missing R is a failure.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from studies.analysis.mixed import MixedResult, fit_mixed
from studies.analysis.rcheck import (
    RJob,
    lme4_fit,
    lme4_fit_many,
    lmertest_unavailable_reason,
    r_unavailable_reason,
)

pytestmark = pytest.mark.r


def _require(reason: str | None) -> None:
    """Skip when R (or an R package) is missing; fail instead when CI requires R."""
    if reason is not None:
        if os.environ.get("IDEAREVIEW_REQUIRE_R") == "1":
            pytest.fail(f"IDEAREVIEW_REQUIRE_R=1 but {reason}")
        pytest.skip(reason)


def _simulate(n_reviews: int, seed: int, tag: str) -> pd.DataFrame:
    """Topic x Reviewer x Idea: reviewers take 2 of 7 topics and 2-7 ideas from them."""
    rng = np.random.default_rng(seed)
    n_ideas, n_rev, n_topics = max(8, n_reviews // 3), max(6, n_reviews // 5), 7
    idea_topic = rng.integers(0, n_topics, n_ideas)
    idea_cond = np.arange(n_ideas) % 3
    by_topic = [np.flatnonzero(idea_topic == t) for t in range(n_topics)]
    loads = rng.integers(2, 8, n_rev)
    loads = np.maximum(1, np.round(loads * n_reviews / loads.sum())).astype(int)
    rr, ii = [], []
    for r in range(n_rev):
        pool = np.concatenate([by_topic[t] for t in rng.choice(n_topics, 2, replace=False)])
        pick = rng.choice(pool, min(loads[r], len(pool)), replace=False)
        rr += [r] * len(pick)
        ii += list(pick)
    r_arr, i_arr = np.array(rr), np.array(ii)
    y = (
        5
        + np.array([0.0, 0.6, 0.9])[idea_cond[i_arr]]
        + rng.normal(0, 0.3, n_topics)[idea_topic[i_arr]]
        + rng.normal(0, 0.8, n_rev)[r_arr]
        + rng.normal(0, 0.6, n_ideas)[i_arr]
        + rng.normal(0, 1.6, len(r_arr))
    )
    return pd.DataFrame(
        {
            "condition": np.array(["Human", "AI", "AI_Rerank"])[idea_cond[i_arr]],
            "topic": [f"{tag}T{t}" for t in idea_topic[i_arr]],
            "reviewer_id": [f"{tag}R{r}" for r in r_arr],
            "idea_id": [f"{tag}I{i}" for i in i_arr],
            tag: y,
        }
    )


def _with_covariates(df: pd.DataFrame, tag: str, seed: int) -> pd.DataFrame:
    """Add a reviewer-level familiarity (1-5) and a per-review word count to ``_simulate``'s
    design, and a response ``{tag}c`` that depends on both."""
    rng = np.random.default_rng(seed)
    rev = pd.factorize(df["reviewer_id"])[0]
    out = df.copy()
    out[f"{tag}_fam"] = rng.integers(1, 6, rev.max() + 1)[rev].astype(float)
    out[f"{tag}_words"] = np.round(rng.gamma(4.0, 60.0, len(df)))
    out[f"{tag}c"] = df[tag] + 0.3 * out[f"{tag}_fam"] + 0.002 * out[f"{tag}_words"]
    return out


def _singular(seed: int, tag: str) -> pd.DataFrame:
    """``_simulate``'s 150-row design with idea effects only: topic and/or reviewer
    variances end on the boundary (seed 0: both, seed 1: reviewer)."""
    df = _simulate(150, 100 + seed, tag)
    rng = np.random.default_rng(seed)
    idea = pd.factorize(df["idea_id"])[0]
    df[tag] = 5 + rng.normal(0, 0.7, idea.max() + 1)[idea] + rng.normal(0, 1.5, len(df))
    return df


CASES = [("y300", 300, True), ("y300", 300, False), ("y3000", 3000, True), ("y3000", 3000, False)]
IDEA = ("topic", "reviewer_id", "idea_id")
# Covariate models (metric, covariates, REML), fitted by lme4 in the same batch as CASES.
COV_CASES = [
    ("excitement", ("familiarity",), True),
    ("overall", ("familiarity", "confidence"), True),
    ("novelty", ("confidence",), False),
    ("y300c", ("y300_fam",), True),
    ("y300c", ("y300_fam", "y300_words"), False),
]
SI_COLUMNS = [
    "condition", "topic", "reviewer_id", "idea_id", "source_idea_id",
    "novelty", "excitement", "overall", "familiarity", "confidence",
]  # fmt: skip


@pytest.fixture(scope="module")
def batch(si2024_frame) -> tuple[pd.DataFrame, list[RJob], list[MixedResult]]:
    _require(r_unavailable_reason())
    si = si2024_frame[SI_COLUMNS]
    # One stacked frame, one Rscript run: each job sees only the rows with its metric.
    frame = pd.concat(
        [_with_covariates(_simulate(300, 1, "y300"), "y300", 11), _simulate(3000, 2, "y3000"), si],
        ignore_index=True,
    )
    jobs = [RJob(metric=m, baseline="Human", reml=reml) for m, _, reml in CASES]
    jobs.append(RJob("excitement", "Human", groups=("topic", "reviewer_id", "source_idea_id")))
    jobs.append(RJob("excitement", "Human", groups=IDEA))
    jobs += [RJob(m, "Human", reml=reml, covariates=c) for m, c, reml in COV_CASES]
    return frame, jobs, lme4_fit_many(frame, jobs)


def _assert_close(ours: MixedResult, ref: MixedResult, *, tol: float, ll_tol: float) -> None:
    assert ours.n_obs == ref.n_obs
    assert ours.n_levels == ref.n_levels
    for a, b in zip(ours.fixed, ref.fixed, strict=True):
        assert a["term"] == b["term"]
        assert a["coef"] == pytest.approx(b["coef"], abs=tol), a["term"]
        assert a["se"] == pytest.approx(b["se"], abs=tol), a["term"]
    assert set(ours.variance) == set(ref.variance)
    for k, v in ref.variance.items():
        assert ours.variance[k] == pytest.approx(v, abs=tol), k
    assert ours.loglik == pytest.approx(ref.loglik, abs=ll_tol)


_OURS: dict[tuple, MixedResult] = {}


def _ours(
    frame: pd.DataFrame,
    metric: str,
    *,
    reml: bool = True,
    groups: tuple[str, ...] = IDEA,
    covariates: tuple[str, ...] = (),
) -> MixedResult:
    """Our sparse fit of one model, made once: the lme4 and the lmerTest comparisons fit
    the same model on the same rows (each stacked frame holds a metric's rows once, and a
    fit uses only the rows with its metric), and the 3,000-row fits are the costly ones."""
    key = (metric, reml, tuple(groups), tuple(covariates))
    if key not in _OURS:
        _OURS[key] = fit_mixed(
            frame,
            metric,
            baseline="Human",
            reml=reml,
            groups=groups,
            covariates=covariates,
            engine="sparse",
            n_starts=1,
        )
    return _OURS[key]


@pytest.mark.parametrize(
    "case", range(len(CASES)), ids=[f"{n}-{'REML' if r else 'ML'}" for _, n, r in CASES]
)
def test_sparse_engine_equals_lme4_on_crossed_designs(batch, case) -> None:
    frame, jobs, refs = batch
    metric, _, reml = CASES[case]
    ours = _ours(frame, metric, reml=reml)
    assert ours.groups_used == ["topic", "reviewer_id", "idea_id"]
    _assert_close(ours, refs[case], tol=1e-3, ll_tol=1e-2)


def test_plain_lme4_jobs_carry_no_satterthwaite_df(batch) -> None:
    _, _, refs = batch
    for ref in refs:
        assert all(row["df"] is None and "p_satterthwaite" not in row for row in ref.fixed)
        assert ref.p_value_method == "Wald z (normal)"


def test_lme4_reproduces_the_readme_with_released_idea_ids(batch) -> None:
    _, _, refs = batch
    ref = refs[len(CASES)]
    assert ref.loglik == pytest.approx(-680.4320, abs=5.1e-5)
    assert ref.term("condition[AI]")["coef"] == pytest.approx(0.6345, abs=5.1e-5)
    assert ref.groups_dropped == {"reviewer_id": "no reviewer ids in the data"}
    assert ref.fit_seconds is not None and ref.fit_seconds >= 0


def test_canonical_idea_ids_give_a_different_lme4_fit(batch, si2024_frame) -> None:
    _, _, refs = batch
    ref = refs[len(CASES) + 1]
    assert ref.loglik == pytest.approx(-676.0070, abs=1e-4)
    ours = _ours(si2024_frame, "excitement")
    _assert_close(ours, ref, tol=1e-4, ll_tol=1e-4)


@pytest.mark.r
def test_report_lme4_crosscheck_agrees_on_si2024(si2024_frame) -> None:
    from studies.analysis.rcheck import r_unavailable_reason
    from studies.analysis.report import ReportOptions, build_report

    reason = r_unavailable_reason()
    if reason is not None:
        if os.environ.get("IDEAREVIEW_REQUIRE_R") == "1":
            pytest.fail(f"R/lme4 required: {reason}")
        pytest.skip(f"R/lme4 unavailable: {reason}")
    options = ReportOptions(
        consistency_splits=20, consistency_bootstrap=0, consistency_permutations=0,
        mixed_starts=2, crosscheck_lme4=True,
    )  # fmt: skip
    report = build_report(
        si2024_frame,
        metrics=["novelty", "overall"],
        baseline="Human",
        conditions=["Human", "AI", "AI_Rerank"],
        options=options,
    )
    check = report["mixed_effects"]["lme4_crosscheck"]
    assert check["available"] is True
    for metric in ["novelty", "overall"]:
        c = check["by_metric"][metric]
        assert c["max_abs_diff_coef"] < 1e-3 and c["max_abs_diff_variance"] < 1e-3
        assert c["abs_diff_loglik"] < 1e-2


# ----------------------------------------------------------------------- covariates


@pytest.mark.parametrize(
    "case",
    range(len(COV_CASES)),
    ids=[f"{m}+{'+'.join(c)}-{'REML' if r else 'ML'}" for m, c, r in COV_CASES],
)
def test_sparse_engine_with_covariates_equals_lme4(batch, case) -> None:
    # Measured (sparse vs lme4, these five cases): coefficients <= 7.4e-7, SEs <= 5.7e-7,
    # variance components <= 5.6e-6, log-likelihood <= 5.1e-10.  The tolerances are the
    # ones the model without covariates is held to.
    frame, _, refs = batch
    metric, covs, reml = COV_CASES[case]
    ref = refs[len(CASES) + 2 + case]
    ours = _ours(frame, metric, reml=reml, covariates=covs)
    assert [row["term"] for row in ours.fixed][-len(covs) :] == list(covs)
    assert ours.details["covariates"] == list(covs)
    _assert_close(ours, ref, tol=1e-3, ll_tol=1e-2)


def test_simulated_covariate_effects_are_recovered(batch) -> None:
    # The simulated response adds 0.3 x familiarity + 0.002 x words.
    _, _, refs = batch
    ref = refs[len(CASES) + 2 + 4]
    assert ref.term("y300_fam")["coef"] == pytest.approx(0.3, abs=3 * ref.term("y300_fam")["se"])
    assert ref.term("y300_words")["coef"] == pytest.approx(
        0.002, abs=3 * ref.term("y300_words")["se"]
    )


def test_constant_covariate_is_refused_before_r_runs(si2024_frame) -> None:
    _require(r_unavailable_reason())
    df = si2024_frame.assign(batch_no=3.0)
    with pytest.raises(ValueError, match="covariate 'batch_no' is constant.*intercept"):
        lme4_fit(df, "overall", baseline="Human", covariates=("batch_no",))


# ------------------------------------------------------- Satterthwaite against lmerTest

# Relative tolerance on the Satterthwaite df, from measurements of the sparse engine
# against lmerTest 3.1-3 (lme4 1.1-31, numDeriv 2016.8-1.1), per case below:
#   si2024 (REML): max 2.8e-5 (excitement, README grouping); 3.1e-6 with familiarity
#   simulated 300 rows: REML 9.5e-5, ML 3.0e-5;  3,000 rows: REML 7.3e-5, ML 4.0e-4
#   singular 150-row fits (variances on the boundary, held fixed by us, in lmerTest's
#   Hessian with zero cross-derivatives): b0 REML 6.9e-7, ML 3.8e-7; b1 REML 1.0e-5
# The largest differences are for the intercept, whose df (8-30) rest on the 7 topics.
# They come from the optimum, not from the df computation: the two optimisers stop up to
# 1e-7 apart in log-likelihood, and our _satterthwaite evaluated at lme4's own optimum
# gives lmerTest's df to 3.2e-7 (3,000 rows, REML and ML).  2e-3 leaves a 5x margin.
SATT_RTOL = 2e-3
# Satterthwaite t p-values: measured max absolute difference 1.7e-6 (300 rows, REML).
SATT_P_ATOL = 1e-4
SATT_CASES = [  # (metric, REML, grouping, covariates)
    ("novelty", True, IDEA, ()),
    ("overall", True, IDEA, ()),
    ("excitement", True, ("topic", "reviewer_id", "source_idea_id"), ()),
    ("excitement", True, IDEA, ("familiarity",)),
    ("y300", True, IDEA, ()),
    ("y300", False, IDEA, ()),
    ("y3000", True, IDEA, ()),
    ("y3000", False, IDEA, ()),
    ("b0", True, IDEA, ()),
    ("b0", False, IDEA, ()),
    ("b1", True, IDEA, ()),
]
# Grouping factors whose variance is estimated as 0 (both engines) in the singular cases.
SATT_BOUNDARY = {"b0": {"topic", "reviewer_id"}, "b1": {"reviewer_id"}}


@pytest.fixture(scope="module")
def satt_batch(si2024_frame) -> tuple[pd.DataFrame, list[MixedResult]]:
    _require(lmertest_unavailable_reason())
    frame = pd.concat(
        [
            _simulate(300, 1, "y300"),
            _simulate(3000, 2, "y3000"),
            _singular(0, "b0"),
            _singular(1, "b1"),
            si2024_frame[SI_COLUMNS],
        ],
        ignore_index=True,
    )
    jobs = [
        RJob(m, "Human", reml=reml, groups=g, covariates=c, satterthwaite=True)
        for m, reml, g, c in SATT_CASES
    ]
    return frame, lme4_fit_many(frame, jobs)


@pytest.mark.parametrize(
    "case",
    range(len(SATT_CASES)),
    ids=[
        f"{m}{'+' + '+'.join(c) if c else ''}-{g[-1]}-{'REML' if r else 'ML'}"
        for m, r, g, c in SATT_CASES
    ],
)
def test_satterthwaite_df_equal_lmertest(satt_batch, case) -> None:
    frame, refs = satt_batch
    metric, reml, groups, covs = SATT_CASES[case]
    ref = refs[case]
    assert "lmerTest Satterthwaite" in ref.p_value_method
    ours = _ours(frame, metric, reml=reml, groups=groups, covariates=covs)
    _assert_close(ours, ref, tol=1e-3, ll_tol=1e-2)  # the same model and optimum first
    assert set(ours.boundary) == set(ref.boundary) == SATT_BOUNDARY.get(metric, set())
    for a, b in zip(ours.fixed, ref.fixed, strict=True):
        assert a["df"] is not None and b["df"] is not None, a["term"]
        assert a["df"] == pytest.approx(b["df"], rel=SATT_RTOL), a["term"]
        assert a["p_satterthwaite"] == pytest.approx(b["p_satterthwaite"], abs=SATT_P_ATOL)
