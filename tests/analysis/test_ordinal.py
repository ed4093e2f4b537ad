"""The cumulative-link mixed model without R: its gradient, its inputs, its result shape.

The equality with R's ``ordinal::clmm`` is in test_ordinal_crosscheck.py (marked ``r``).
"""

from __future__ import annotations

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


def _problem(df: pd.DataFrame, groups: tuple[str, ...]) -> ordinal._Clmm:
    prep = prepare_mixed_data(df, "overall", baseline="Human", groups=groups)
    y = np.searchsorted(np.unique(prep.y), prep.y)
    codes, sizes = [], []
    for g in prep.groups_used:
        c, u = pd.factorize(prep.group_labels[g])
        codes.append(c)
        sizes.append(len(u))
    return ordinal._Clmm(y, prep.X[:, 1:], codes, sizes)


@pytest.mark.parametrize(
    "groups", [("reviewer_id", "idea_id"), ("idea_id",), ("topic", "reviewer_id", "idea_id")]
)
def test_laplace_gradient_equals_central_differences(groups) -> None:
    prob = _problem(_sim(), groups)
    rng = np.random.default_rng(0)
    psi = ordinal._start(prob.y, prob.K, prob.p, prob.G)
    psi[prob.K - 1 :] += rng.normal(0, 0.3, prob.p + prob.G)
    _, grad = prob.value_and_grad(psi)
    h = 1e-5
    numeric = np.array(
        [(prob.value(psi + e) - prob.value(psi - e)) / (2 * h) for e in np.eye(len(psi)) * h]
    )
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-4)


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
