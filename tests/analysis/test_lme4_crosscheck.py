"""Our sparse engine against R's lme4 on simulated crossed designs and on si2024.

All lme4 fits run in one Rscript process (R start-up costs about a second).  The tests
skip when Rscript or lme4 is missing, unless IDEAREVIEW_REQUIRE_R=1 (CI), where a missing
R is a failure.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from studies.analysis.mixed import MixedResult, fit_mixed
from studies.analysis.rcheck import RJob, lme4_fit_many, r_unavailable_reason

pytestmark = pytest.mark.r


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


CASES = [("y300", 300, True), ("y300", 300, False), ("y3000", 3000, True), ("y3000", 3000, False)]


@pytest.fixture(scope="module")
def batch(si2024_frame) -> tuple[pd.DataFrame, list[RJob], list[MixedResult]]:
    reason = r_unavailable_reason()
    if reason is not None:
        if os.environ.get("IDEAREVIEW_REQUIRE_R") == "1":
            pytest.fail(f"IDEAREVIEW_REQUIRE_R=1 but {reason}")
        pytest.skip(reason)
    si = si2024_frame[
        ["condition", "topic", "reviewer_id", "idea_id", "source_idea_id", "excitement"]
    ]
    # One stacked frame, one Rscript run: each job sees only the rows with its metric.
    frame = pd.concat(
        [_simulate(300, 1, "y300"), _simulate(3000, 2, "y3000"), si], ignore_index=True
    )
    jobs = [RJob(metric=m, baseline="Human", reml=reml) for m, _, reml in CASES]
    jobs.append(RJob("excitement", "Human", groups=("topic", "reviewer_id", "source_idea_id")))
    jobs.append(RJob("excitement", "Human", groups=("topic", "reviewer_id", "idea_id")))
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


@pytest.mark.parametrize(
    "case", range(len(CASES)), ids=[f"{n}-{'REML' if r else 'ML'}" for _, n, r in CASES]
)
def test_sparse_engine_equals_lme4_on_crossed_designs(batch, case) -> None:
    frame, jobs, refs = batch
    metric, _, reml = CASES[case]
    ours = fit_mixed(frame, metric, baseline="Human", reml=reml, engine="sparse", n_starts=1)
    assert ours.groups_used == ["topic", "reviewer_id", "idea_id"]
    _assert_close(ours, refs[case], tol=1e-3, ll_tol=1e-2)


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
    ours = fit_mixed(si2024_frame, "excitement", baseline="Human", engine="sparse", n_starts=1)
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
