"""The lme4-style formula front end: parsing, design, and equality with lme4."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from studies.analysis.lmm_formula import fit_formula, parse_formula
from studies.analysis.lmm_sparse import design_matrix, fit_lmm
from tests.analysis.simulations import simulate_crossed

GROUPS = "(1 | topic) + (1|reviewer_id) + (1 | idea_id)"


def _with_covariate(seed: int) -> pd.DataFrame:
    df = simulate_crossed(n_ideas=150, n_reviewers=60, n_topics=5, seed=seed)
    rng = np.random.default_rng(seed)
    df["familiarity"] = rng.integers(1, 6, len(df)).astype(float)
    df["score"] = df["score"] + 0.3 * df["familiarity"]
    return df


def test_parse_formula_separates_response_fixed_part_and_groups() -> None:
    assert parse_formula("score ~ condition + x + (1 | topic) + (1|idea_id)") == (
        "score",
        "condition + x",
        ["topic", "idea_id"],
    )
    assert parse_formula("y ~ (1 | g)") == ("y", "1", ["g"])


@pytest.mark.parametrize(
    ("formula", "message"),
    [
        ("score ~ condition + (x | topic)", r"only random intercepts \(1 \| topic\)"),
        ("score ~ condition + (1 | topic/idea_id)", "nested or interacting groups"),
        ("score ~ condition + (1 | topic) + (1 | topic)", "appears twice"),
        ("score ~ condition ~ x + (1 | topic)", "exactly one '~'"),
        ("score ~ condition", "not a mixed model"),
        ("score ~ condition + (1 | nowhere)", "no column 'nowhere'"),
        ("score ~ condition + missing_col + (1 | topic)", "fixed part"),
    ],
)
def test_bad_formulas_are_refused_with_a_reason(formula: str, message: str) -> None:
    df = simulate_crossed(seed=1)
    with pytest.raises(ValueError, match=message):
        fit_formula(formula, df)


def test_missing_response_values_are_refused_not_dropped() -> None:
    df = simulate_crossed(seed=2)
    df.loc[df.index[3], "score"] = np.nan
    with pytest.raises(ValueError, match=r"column 'score' is missing in 1 of"):
        fit_formula(f"score ~ condition + {GROUPS}", df)


def test_formula_fit_equals_the_design_matrix_fit() -> None:
    df = _with_covariate(seed=3)
    fit = fit_formula(
        f"score ~ C(condition, contr.treatment('Human')) + familiarity + {GROUPS}",
        df,
        n_starts=1,
        satterthwaite=False,
    )
    X, names = design_matrix(df, baseline="Human", covariates=["familiarity"])
    ref = fit_lmm(
        df["score"].to_numpy(),
        X,
        {g: df[g] for g in ("topic", "reviewer_id", "idea_id")},
        fixed_names=names,
        n_starts=1,
        satterthwaite=False,
    )
    assert fit.loglik == pytest.approx(ref.loglik, abs=1e-9)
    np.testing.assert_allclose(fit.coef, ref.coef, atol=1e-9)
    assert fit.fixed_names[-1] == "familiarity"


def test_an_interaction_is_the_product_column() -> None:
    df = _with_covariate(seed=4)
    fit = fit_formula(f"score ~ condition * familiarity + {GROUPS}", df, n_starts=1)
    # formulaic's default reference level is the first in sorted order: "AI"
    assert fit.fixed_names == [
        "Intercept",
        "condition[T.AI_Rerank]",
        "condition[T.Human]",
        "familiarity",
        "condition[T.AI_Rerank]:familiarity",
        "condition[T.Human]:familiarity",
    ]
    cond = df["condition"].to_numpy()
    fam = df["familiarity"].to_numpy()
    rerank, human = (cond == "AI_Rerank").astype(float), (cond == "Human").astype(float)
    X = np.column_stack([np.ones(len(df)), rerank, human, fam, rerank * fam, human * fam])
    ref = fit_lmm(
        df["score"].to_numpy(),
        X,
        {g: df[g] for g in ("topic", "reviewer_id", "idea_id")},
        n_starts=1,
    )
    assert fit.loglik == pytest.approx(ref.loglik, abs=1e-9)
    np.testing.assert_allclose(fit.coef, ref.coef, atol=1e-9)
    np.testing.assert_allclose(fit.df, ref.df, rtol=1e-6)


def test_formula_fit_equals_lme4_with_a_covariate() -> None:
    from studies.analysis.rcheck import lme4_fit, r_unavailable_reason

    if (why := r_unavailable_reason()) is not None:
        if os.environ.get("IDEAREVIEW_REQUIRE_R") == "1":
            pytest.fail(f"IDEAREVIEW_REQUIRE_R=1 but {why}")
        pytest.skip(why)
    df = _with_covariate(seed=5)
    ours = fit_formula(
        f"score ~ C(condition, contr.treatment('Human')) + familiarity + {GROUPS}", df
    )
    ref = lme4_fit(df, "score", baseline="Human", covariates=("familiarity",))
    assert ours.loglik == pytest.approx(ref.loglik, abs=1e-2)
    lme4_rows = [ref.term(t) for t in ["Intercept", "condition[AI]", "condition[AI_Rerank]"]]
    lme4_rows.append(ref.term("familiarity"))
    for j, row in zip([0, 1, 2, 3], lme4_rows, strict=True):
        assert ours.coef[j] == pytest.approx(row["coef"], abs=1e-3)
        assert ours.se[j] == pytest.approx(row["se"], abs=1e-3)
    for g, v in ours.variances.items():
        assert v == pytest.approx(ref.variance[g], abs=1e-3)
    assert ours.sigma2 == pytest.approx(ref.variance["residual"], abs=1e-3)
