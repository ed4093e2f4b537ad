"""The analysis plan: parsing, multiplicity methods against statsmodels, one-sided tests
against scipy, and the default plan reproducing the published Bonferroni columns."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from studies.analysis import hypothesis as hyp
from studies.analysis.plan import (
    AnalysisPlan,
    PlanError,
    adjust,
    apply_plan,
    comparison_level,
    parse_plan,
    plan_document,
    plan_hash,
)
from studies.analysis.report import build_report

METRICS = ["novelty", "excitement", "feasibility", "effectiveness", "overall"]
SM_METHOD = {"bonferroni": "bonferroni", "holm": "holm", "bh": "fdr_bh", "by": "fdr_by"}


@pytest.mark.parametrize("method", ["bonferroni", "holm", "bh", "by"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adjusted_p_values_equal_statsmodels_multipletests(method, seed) -> None:
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(0, 0.08, 6), rng.uniform(0, 1, 9)])
    p[3] = p[4]  # a tie
    ours = adjust(p, method)
    theirs = multipletests(p, method=SM_METHOD[method])[1]
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-15)


def test_adjust_leaves_missing_p_out_of_the_family() -> None:
    ours = adjust([0.01, np.nan, 0.04], "holm")
    assert np.isnan(ours[1])
    np.testing.assert_allclose(ours[[0, 2]], multipletests([0.01, 0.04], method="holm")[1])


def _two_condition_frame(seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for cond, shift in (("Human", 0.6), ("AI", 0.0)):
        for i in range(30):
            for r in rng.choice(12, 3, replace=False):
                rows.append(
                    {
                        "condition": cond,
                        "idea_id": f"{cond}{i}",
                        "topic": "t",
                        "reviewer_id": f"r{r}",
                        **{m: float(rng.integers(1, 11) + shift) for m in METRICS},
                    }
                )
    return pd.DataFrame(rows)


def test_one_sided_benjamini_hochberg_plan_equals_scipy_and_statsmodels() -> None:
    df = _two_condition_frame()
    plan = parse_plan(
        {
            "primary_metrics": ["overall"],
            "secondary_metrics": ["novelty", "excitement", "feasibility", "effectiveness"],
            "hypotheses": [{"direction": "AI < Human"}],
            "multiple_testing": {"method": "bh", "families": "per_test"},
        }
    )
    plan.check(metrics=METRICS, conditions=["Human", "AI"], baseline="Human")
    tests = {
        "by_review": hyp.test_by_review(df, METRICS, baseline="Human"),
        "by_idea": hyp.test_by_idea(df, METRICS, baseline="Human"),
        "by_reviewer": hyp.test_by_reviewer(df, METRICS, baseline="Human"),
    }
    section = apply_plan(tests, plan, metrics=METRICS)
    ai, human = df[df.condition == "AI"], df[df.condition == "Human"]
    raw = [
        stats.ttest_ind(ai[m], human[m], equal_var=False, alternative="less").pvalue
        for m in METRICS
    ]
    expected = multipletests(raw, method="fdr_bh")[1]
    rows = {c["metric"]: c for c in tests["by_review"]["comparisons"]}
    for m, p, q in zip(METRICS, raw, expected, strict=True):
        assert rows[m]["alternative"] == "less"
        assert rows[m]["p_unadjusted"] == pytest.approx(p, rel=1e-10)
        assert rows[m]["p_adjusted"] == pytest.approx(q, rel=1e-10)
        assert rows[m]["family"] == "by_review" and rows[m]["adjustment"] == "bh"
    # Test 3: per-reviewer differences, one-sided one-sample t against 0
    means = df.pivot_table(index="reviewer_id", columns="condition", values=METRICS)
    raw3 = [
        stats.ttest_1samp(
            (means[m]["AI"] - means[m]["Human"]).dropna(), 0, alternative="less"
        ).pvalue
        for m in METRICS
    ]
    rows3 = {c["metric"]: c for c in tests["by_reviewer"]["comparisons"]}
    for m, q in zip(METRICS, multipletests(raw3, method="fdr_bh")[1], strict=True):
        assert rows3[m]["p_adjusted"] == pytest.approx(q, rel=1e-10)
    assert [f["name"] for f in section["families"]] == ["by_review", "by_idea", "by_reviewer"]


def test_default_plan_reproduces_the_published_bonferroni_columns(si2024_frame) -> None:
    conditions = ["Human", "AI", "AI_Rerank"]
    tests = {
        "by_review": hyp.test_by_review(si2024_frame, METRICS, baseline="Human"),
        "by_idea": hyp.test_by_idea(si2024_frame, METRICS, baseline="Human"),
    }
    before = copy.deepcopy(tests)
    apply_plan(tests, parse_plan("{}"), metrics=METRICS)
    for name in tests:
        for old, new in zip(before[name]["comparisons"], tests[name]["comparisons"], strict=True):
            assert {k: new[k] for k in old} == old  # nothing published changes
            assert new["p_adjusted"] == old["p_two_sided_bonferroni"]
            assert new["alternative"] == "two-sided"
    assert set(conditions) >= {c["condition"] for c in tests["by_review"]["comparisons"]}


def test_a_direction_against_the_baseline_written_either_way_is_the_same_test() -> None:
    a = parse_plan({"hypotheses": [{"direction": "AI < Human"}]})
    b = parse_plan({"hypotheses": [{"direction": "Human > AI"}]})
    for plan in (a, b):
        assert plan.alternative(test="by_idea", metric="x", condition="AI", baseline="Human") == (
            "less"
        )
    assert a.alternative(test="by_idea", metric="x", condition="AI_Rerank", baseline="Human") == (
        "two-sided"
    )


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{not json", "not valid JSON"),
        ({"multiple_testing": {"method": "sidak"}}, "multiple_testing.method"),
        ({"alpha": 1.5}, "alpha"),
        ({"hypotheses": [{"direction": "AI << Human"}]}, r"hypotheses\[0\].direction"),
        ({"hypotheses": [{"direction": "less", "test": "by_idea"}]}, r"hypotheses\[0\]"),
        ({"tests": ["by_review", "welch"]}, "tests"),
        ({"primary_metric": ["overall"]}, "unknown plan field"),
        ({"primary": ["overall"]}, "primary: must be an object"),
        ({"consistency": {"splits": 0}}, "consistency.splits"),
        ({"multiple_testing": {"families": [{"name": "a"}, {"name": "a"}]}}, "same name"),
        ({"agreement": {"chance_rankings": 50}}, r"agreement.chance_rankings: .* 200 to 20,000"),
        ({"agreement": {"chance_rankings": 50_000}}, r"agreement.chance_rankings: .* got 50000"),
        ({"agreement": {"chance_rankings": "many"}}, "agreement.chance_rankings"),
        ({"consistency": {"chance_rankings": 500}}, "consistency: unknown field"),
    ],
)
def test_bad_plans_are_refused_with_the_field_named(doc, message) -> None:
    with pytest.raises(PlanError, match=message):
        parse_plan(doc if isinstance(doc, str) else json.dumps(doc))


def test_a_plan_naming_what_the_study_lacks_is_refused() -> None:
    plan = parse_plan({"primary_metrics": ["clarity"]})
    with pytest.raises(PlanError, match="primary_metrics: 'clarity'"):
        plan.check(metrics=METRICS, conditions=["Human", "AI"], baseline="Human")
    plan = parse_plan({"hypotheses": [{"direction": "AI < AI_Rerank"}]})
    with pytest.raises(PlanError, match="baseline"):
        plan.check(metrics=METRICS, conditions=["Human", "AI", "AI_Rerank"], baseline="Human")


def test_plan_documents_round_trip_and_hash_by_content() -> None:
    doc = {
        "primary_metrics": ["overall"],
        "hypotheses": [{"direction": "AI < Human", "metric": "overall"}],
        "multiple_testing": {
            "method": "holm",
            "families": [{"name": "primary", "tests": ["by_idea"], "metrics": ["overall"]}],
        },
        "consistency": {"splits": 500},
        "seed": 7,
    }
    plan = parse_plan(doc)
    assert parse_plan(plan_document(plan)) == plan
    assert plan_hash(parse_plan(json.dumps(doc, indent=4))) == plan_hash(plan)
    assert plan_hash(plan) != plan_hash(AnalysisPlan())
    assert plan.option_overrides() == {"consistency_splits": 500, "seed": 7}
    assert AnalysisPlan().option_overrides() == {}


def test_a_plan_with_topic_fixed_fits_topic_effects_instead_of_a_topic_variance() -> None:
    from studies.analysis.mixed import fit_mixed
    from studies.analysis.report import mixed_design
    from studies.analysis.simulate import simulate_study

    df = simulate_study(n_reviewers=40, n_ideas_per_condition=20, n_topics=3, seed=2)
    plan = parse_plan({"mixed_model": {"topic": "fixed"}})
    data, covariates, topic_groups = mixed_design(df, plan)
    topics = sorted(df["topic"].unique())
    assert topic_groups == () and covariates == [f"topic[{t}]" for t in topics[1:]]
    assert data[f"topic[{topics[1]}]"].sum() == (df["topic"] == topics[1]).sum()
    fit = fit_mixed(
        data, "overall", baseline="Human", groups=("reviewer_id", "idea_id"),
        covariates=covariates, n_starts=1,
    )  # fmt: skip
    assert {r["term"] for r in fit.fixed} >= set(covariates)
    assert "topic" not in fit.variance
    with pytest.raises(PlanError, match="mixed_model.topic"):
        parse_plan({"mixed_model": {"topic": "nested"}})


def _frame_tests(seed: int = 3) -> tuple[dict, list[str]]:
    from studies.analysis.simulate import simulate_study

    df = simulate_study(n_reviewers=40, n_ideas_per_condition=15, metrics=METRICS, seed=seed)
    tests = {
        name: fn(df, METRICS, baseline="Human")
        for name, fn in (
            ("by_review", hyp.test_by_review),
            ("by_idea", hyp.test_by_idea),
            ("by_reviewer", hyp.test_by_reviewer),
        )
    }
    return tests, ["Human", "AI", "AI_Rerank"]


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"multiple_testing": {"method": "holm", "families": "per_test"}},
        {"multiple_testing": {"method": "bh", "families": "all"}, "alpha": 0.1},
        {"multiple_testing": {"method": "by", "families": "per_test"}},
        {"multiple_testing": {"method": "none"}},
        {"primary_metrics": ["overall", "novelty"], "tests": ["by_idea", "by_reviewer"]},
        {
            "multiple_testing": {
                "method": "bonferroni",
                "families": [
                    {"name": "main", "tests": ["by_idea"], "metrics": ["overall"]},
                    {"name": "rest", "tests": ["by_review", "by_idea"]},
                ],
            }
        },
    ],
)
def test_the_level_of_a_comparison_is_the_one_its_planned_family_tests_it_at(doc) -> None:
    plan = parse_plan(doc)
    tests, conditions = _frame_tests()
    section = apply_plan(copy.deepcopy(tests), plan, metrics=METRICS)
    for fam in section["families"]:
        for member in fam["members"]:
            lv = comparison_level(
                plan, test=member["test"], metric=member["metric"],
                condition=member["condition"], baseline="Human", metrics=METRICS,
                conditions=conditions,
            )  # fmt: skip
            assert (lv.family, lv.family_size) == (fam["name"], fam["size"])
            # Rejected for sure at this level: the adjusted p is then at most alpha.
            p, adj = member["p_unadjusted"], member["p_adjusted"]
            if p is not None and p <= lv.level:
                assert adj <= plan.alpha + 1e-12
            if plan.method in ("none", "bonferroni"):  # exactly the Bonferroni threshold
                assert (p <= lv.level) == (adj <= plan.alpha)


def test_the_level_follows_the_method_and_a_comparison_outside_the_plan_is_unadjusted() -> None:
    conditions = ["Human", "AI", "AI_Rerank"]
    kw = {"test": "by_idea", "metric": "overall", "condition": "AI", "baseline": "Human"}

    def level(doc: dict) -> float:
        plan = parse_plan(doc)
        return comparison_level(plan, metrics=METRICS, conditions=conditions, **kw).level

    assert level({}) == pytest.approx(0.05 / 5)
    assert level({"multiple_testing": {"families": "per_test"}}) == pytest.approx(0.05 / 10)
    assert level({"multiple_testing": {"families": "all"}}) == pytest.approx(0.05 / 30)
    assert level({"multiple_testing": {"method": "by"}}) == pytest.approx(
        0.05 / (5 * (1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5))
    )
    assert level({"multiple_testing": {"method": "none"}}) == 0.05
    outside = comparison_level(
        parse_plan({"primary_metrics": ["novelty"]}), metrics=METRICS, conditions=conditions, **kw
    )
    assert (outside.family, outside.level) == ("", 0.05)
    directed = comparison_level(
        parse_plan({"hypotheses": [{"direction": "AI > Human", "metric": "overall"}]}),
        metrics=METRICS, conditions=conditions, **kw,
    )  # fmt: skip
    assert directed.alternative == "greater" and directed.as_dict()["method_label"] == "Bonferroni"


def test_a_plan_sets_the_chance_rankings_and_a_plan_without_them_keeps_its_hash() -> None:
    plan = parse_plan({"agreement": {"splits": 50, "chance_rankings": 5000}})
    assert plan.option_overrides() == {"agreement_splits": 50, "chance_rankings": 5000}
    assert plan_document(plan)["agreement"] == {"splits": 50, "chance_rankings": 5000}
    assert parse_plan(plan_document(plan)) == plan
    # the key is written only when set, so plans saved before it keep their hash
    assert "agreement" not in plan_document(AnalysisPlan())
    assert plan_hash(parse_plan({"agreement": {"splits": 50}})) != plan_hash(plan)


def test_a_report_without_reviews_in_the_baseline_condition_says_so_plainly(
    si2024_frame,
) -> None:
    ai_only = si2024_frame[si2024_frame["condition"] == "AI"]
    with pytest.raises(ValueError) as refused:
        build_report(ai_only, metrics=["overall"], baseline="Human", conditions=["Human", "AI"])
    assert str(refused.value) == (
        "The baseline condition Human has no submitted reviews yet; the report compares "
        "each condition with it."
    )
