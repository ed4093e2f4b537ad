"""Quality flags, exclusion rules, leniency and the with/without table, against hand
computations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from studies.analysis import hypothesis as hyp
from studies.analysis.mixed import fit_mixed
from studies.analysis.plan import PlanError, apply_plan, parse_plan, plan_document, plan_hash
from studies.analysis.quality import (
    ExclusionRule,
    QualityRules,
    ReviewAnswers,
    duplicate_flags,
    exclusions,
    review_flags,
    reviewer_leniency,
    with_without,
)

METRICS = ["novelty", "feasibility", "overall"]
RULES = QualityRules(min_minutes=3.0)


def answers(rid, reviewer, scores, **kw):
    return ReviewAnswers(
        review_id=rid,
        reviewer_id=reviewer,
        idea_id=kw.pop("idea", f"i{rid}"),
        scores=dict(zip(METRICS, scores, strict=True)),
        **kw,
    )


def kinds(flags):
    return sorted((f.review_id, f.kind) for f in flags)


def test_each_review_flag_fires_on_its_case_and_only_there():
    reviews = [
        answers("1", "A", [5, 6, 7], minutes_measured=2.5, attention={"care": 2}),
        answers("2", "A", [4, 4, 4], minutes_measured=3.0, attention={"care": "2"}),
        answers("3", "B", [5, 6, 7], minutes_measured=None, attention={"care": 5}),
        answers("4", "B", [5, 6, 7], minutes_measured=10, attention={}),
        # Gold: overall 9 is outside 2-5; novelty 5 inside 4-6.
        answers("5", "C", [5, 6, 9], idea="g1", gold=True, attention={"care": 2}),
        answers("6", "C", [5, 6, 4], idea="g1", gold=True, attention={"care": 2}),
    ]
    flags = review_flags(
        reviews,
        rules=RULES,
        metrics=METRICS,
        expected={"care": 2},
        gold_ranges={"g1": {"novelty": (4, 6), "overall": (2, 5)}},
    )
    assert kinds(flags) == [
        ("1", "fast"),  # 2.5 < 3; review 2 at exactly the floor is not
        ("2", "straight_line"),
        ("3", "attention"),
        ("4", "attention"),  # unanswered counts as failed
        ("5", "gold"),
    ]
    detail = {f.review_id: f.detail for f in flags}
    assert detail["5"] == "overall 9 outside 2–5"
    assert detail["3"] == "care: answered 5, instructed 2"
    # An imported review never saw the checks: nothing to fail.
    imported = [answers("8", "D", [5, 6, 7])]
    assert review_flags(imported, rules=RULES, metrics=METRICS, expected={"care": 2}) == []
    # With two metrics a form cannot straight-line under the default of three items.
    two = [ReviewAnswers("9", "A", "i", {"novelty": 3, "overall": 3})]
    assert review_flags(two, rules=RULES, metrics=["novelty", "overall"], expected={}) == []


def test_near_duplicate_rationales_are_flagged_within_and_across_reviewers():
    text = "a long enough rationale of at least eight words here"
    reviews = [
        answers("1", "A", [1, 2, 3], rationales={"novelty": text}),
        answers("2", "A", [1, 2, 3], rationales={"novelty": text, "overall": text}),
        answers("3", "B", [1, 2, 3], rationales={"overall": text}),
        answers("4", "B", [1, 2, 3], rationales={"overall": "too short"}),
    ]
    e1, e2 = np.array([1.0, 0.0]), np.array([0.6, 0.8])
    vectors = {
        ("1", "novelty"): e1,
        ("2", "novelty"): e2,  # cosine with e1 is 0.6: not a duplicate
        ("2", "overall"): e1 * 3,  # same direction as review 1's: cosine 1
        ("3", "overall"): np.array([0.99, 0.141]),  # cosine with e1 0.9899
        ("4", "overall"): e1,  # too short to compare
    }
    flags = duplicate_flags(reviews, vectors, rules=QualityRules(duplicate_cosine=0.98))
    assert kinds(flags) == [
        ("1", "duplicate_other"),
        ("1", "duplicate_own"),
        ("2", "duplicate_other"),
        ("2", "duplicate_own"),
        ("3", "duplicate_other"),
    ]
    own = next(f for f in flags if f.review_id == "1" and f.kind == "duplicate_own")
    assert own.detail == "novelty rationale ~ review 2's overall (cosine 1.000)"
    # At a threshold above 0.9899 only the exact pair within reviewer A is left.
    strict = duplicate_flags(reviews, vectors, rules=QualityRules(duplicate_cosine=0.995))
    assert kinds(strict) == [("1", "duplicate_own"), ("2", "duplicate_own")]


def test_exclusion_rules_say_what_each_removed_and_what_only_it_removed():
    reviews = [answers(str(i), "AB"[i % 2], [1, 2, 3]) for i in range(1, 7)]
    reviews.append(answers("7", "B", [1, 2, 3], gold=True))
    flags = review_flags(
        [
            answers("1", "B", [1, 2, 3], minutes_measured=1),
            answers("3", "B", [4, 4, 4], minutes_measured=1),
            answers("7", "B", [9, 9, 9], idea="g", gold=True),
        ],
        rules=RULES,
        metrics=METRICS,
        expected={},
        gold_ranges={"g": {"overall": (1, 3)}},
    )
    result = exclusions(
        flags,
        [ExclusionRule("fast"), ExclusionRule("straight_line"), ExclusionRule("gold", "reviewer")],
        reviews,
    )
    # Reviewer B wrote the analysed reviews 1, 3, 5 (7 is gold: never analysed).
    assert result.analysed == 6
    assert result.removed == ["1", "3", "5"] and result.kept == 3
    rows = {r["rule"]: r for r in result.rules}
    assert rows["fast"]["review_ids"] == ["1", "3"] and rows["fast"]["only_this_rule"] == 0
    assert rows["straight_line"]["reviews"] == 1
    assert rows["gold (whole reviewer)"]["review_ids"] == ["1", "3", "5"]
    assert rows["gold (whole reviewer)"]["only_this_rule"] == 1


def test_imported_reviews_without_a_reviewer_are_each_their_own_reviewer():
    """Reviews imported from a file name no reviewer (empty id): a whole-reviewer rule
    removes the flagged one only, two of them are never "their own" duplicates, and the
    ones flagged at import are counted and kept."""
    reviews = [
        answers("1", "", [4, 4, 4], rationales={"overall": "same words " * 5}),
        answers("2", "", [1, 2, 3], rationales={"overall": "same words " * 5}),
        answers("3", "", [1, 2, 3], import_flags=("no_consent",)),
        answers("4", "", [2, 3, 4]),
    ]
    vectors = {("1", "overall"): np.ones(3), ("2", "overall"): np.ones(3)}
    dupes = duplicate_flags(reviews, vectors, rules=RULES)
    assert kinds(dupes) == [("1", "duplicate_other"), ("2", "duplicate_other")]
    flags = review_flags(reviews, rules=RULES, metrics=METRICS, expected={}) + dupes
    result = exclusions(flags, [ExclusionRule("straight_line", "reviewer")], reviews)
    assert result.analysed == 4
    assert result.removed == ["1"] and result.kept == 3
    assert result.flagged_at_import == 1 and result.flagged_at_import_kept == 1


def test_the_plan_carries_quality_rules_and_older_plans_keep_their_hash():
    assert "quality" not in plan_document(parse_plan({}))
    assert plan_hash(parse_plan({})) == plan_hash(parse_plan({"quality": {}}))
    plan = parse_plan(
        {"quality": {"min_minutes": 4, "exclude": ["attention", "gold", {"flag": "fast"}]}}
    )
    assert plan.quality.exclude == (
        ExclusionRule("attention"),
        ExclusionRule("gold", "reviewer"),
        ExclusionRule("fast"),
    )
    assert parse_plan(plan_document(plan)) == plan
    with pytest.raises(PlanError) as exc:
        parse_plan(
            {"quality": {"exclude": ["late", {"flag": "gold", "unit": "review"}, "fast", "fast"]}}
        )
    text = "; ".join(exc.value.problems)
    assert "quality.exclude[0]: 'late' is not a flag" in text
    assert "quality.exclude[1]: a gold review is never analysed" in text
    assert "quality.exclude[3]: the rule 'fast' (review) is listed twice" in text


def test_leniency_is_the_shrunken_mean_residual_with_its_conditional_variance():
    # One grouping factor with known variances: the effect of a reviewer with n reviews
    # and mean residual r is n*t/(n*t + s) * r, its variance 1/(n/s + 1/t).
    df = pd.DataFrame(
        {
            "reviewer_id": ["a"] * 3 + ["b"] * 2 + ["c"] * 4,
            "condition": ["H", "X", "H", "X", "H", "H", "X", "X", "H"],
            "overall": [7, 8, 6, 3, 2, 5, 5, 6, 4],
        }
    )
    fit = {
        "fixed": [{"term": "Intercept", "coef": 5.0}, {"term": "condition[X]", "coef": 1.0}],
        "variance": {"reviewer_id": 2.0, "residual": 1.0},
    }
    out = reviewer_leniency(
        df, fit, metric="overall", baseline="H", groups=("reviewer_id",)
    ).set_index("reviewer_id")
    resid = df["overall"] - 5.0 - (df["condition"] == "X") * 1.0
    for r, grp in resid.groupby(df["reviewer_id"]):
        n = len(grp)
        assert out.loc[r, "effect"] == pytest.approx(n * 2 / (n * 2 + 1) * grp.mean())
        assert out.loc[r, "sd"] == pytest.approx((1 / (n / 1.0 + 1 / 2.0)) ** 0.5)
        assert out.loc[r, "reviews"] == n
    # a: residuals 2, 2, 1 -> 6/7 * 5/3 = 1.429, sd 0.535: low 0.381 > 0.
    assert out.loc["a", "flag"] == "lenient" and out.loc["b", "flag"] == "severe"
    assert out.loc["c", "flag"] == ""


def test_leniency_in_a_crossed_model_matches_the_marginal_formula():
    rng = np.random.default_rng(3)
    rows = [
        (f"r{r}", f"i{i}", "H" if i % 2 else "X", f"t{i % 3}")
        for r in range(8)
        for i in range(12)
        if rng.random() < 0.5
    ]
    df = pd.DataFrame(rows, columns=["reviewer_id", "idea_id", "condition", "topic"])
    df["overall"] = rng.normal(5, 1.5, len(df)).round()
    fit = fit_mixed(
        df, "overall", baseline="H", groups=("reviewer_id", "idea_id"), n_starts=1
    ).to_dict()
    out = reviewer_leniency(
        df, fit, metric="overall", baseline="H", groups=("reviewer_id", "idea_id")
    ).set_index("reviewer_id")
    # b = D Z' V^-1 (y - X beta), Var(b | y) = D - D Z' V^-1 Z D, V = Z D Z' + s I.
    zr = pd.get_dummies(df["reviewer_id"]).sort_index(axis=1).to_numpy(float)
    zi = pd.get_dummies(df["idea_id"]).sort_index(axis=1).to_numpy(float)
    var = fit["variance"]
    Z = np.hstack([zr, zi])
    D = np.diag([var["reviewer_id"]] * zr.shape[1] + [var.get("idea_id", 0.0)] * zi.shape[1])
    V = Z @ D @ Z.T + var["residual"] * np.eye(len(df))
    coef = {row["term"]: row["coef"] for row in fit["fixed"]}
    resid = df["overall"] - coef["Intercept"] - (df["condition"] == "X") * coef["condition[X]"]
    Vinv = np.linalg.inv(V)
    b = D @ Z.T @ Vinv @ resid.to_numpy()
    cov = D - D @ Z.T @ Vinv @ Z @ D
    names = sorted(df["reviewer_id"].unique())
    for k, r in enumerate(names):
        assert out.loc[r, "effect"] == pytest.approx(b[k], abs=1e-8)
        assert out.loc[r, "sd"] == pytest.approx(cov[k, k] ** 0.5, abs=1e-8)


def test_the_with_without_table_recomputes_the_plans_tests_on_the_kept_reviews():
    rng = np.random.default_rng(5)
    n = 40
    df = pd.DataFrame(
        {
            "review_id": [str(i) for i in range(n)],
            "idea_id": [f"i{i // 2}" for i in range(n)],
            "reviewer_id": [f"r{i % 8}" for i in range(n)],
            "condition": ["H" if (i // 2) % 2 else "AI" for i in range(n)],
            "topic": "t",
            "novelty": rng.integers(1, 11, n).astype(float),
            "overall": rng.integers(1, 11, n).astype(float),
        }
    )
    plan = parse_plan({"primary_metrics": ["novelty"], "secondary_metrics": ["overall"]})
    kept = df[df["reviewer_id"] != "r0"]
    metrics = ["novelty", "overall"]

    def run(frame):
        return {
            "by_review": hyp.test_by_review(frame, metrics, baseline="H"),
            "by_idea": hyp.test_by_idea(frame, metrics, baseline="H"),
            "by_reviewer": hyp.test_by_reviewer(frame, metrics, baseline="H"),
        }

    rows = with_without(run(df), run(kept), plan=plan, metrics=metrics)
    assert [(r["test"], r["metric"]) for r in rows] == [
        ("by_review", "novelty"),
        ("by_idea", "novelty"),
        ("by_reviewer", "novelty"),
    ]
    # Each side is the plan applied to its own data (Bonferroni over the two metrics).
    direct = run(kept)
    apply_plan(direct, plan, metrics=metrics)
    p_kept = direct["by_review"]["comparisons"][0]
    assert rows[0]["p_adjusted_kept"] == pytest.approx(p_kept["p_adjusted"])
    assert rows[0]["p_adjusted_kept"] == pytest.approx(min(1.0, 2 * p_kept["p_two_sided"]))
    assert rows[0]["n_all"] == 20 and rows[0]["n_kept"] == 15
    assert rows[0]["changed"] == (rows[0]["reject_all"] != rows[0]["reject_kept"])
    assert {r["kept_note"] for r in rows} == {""}
    # A test with no result on the kept side (a model that failed there) says so; it is
    # not a changed decision, even where the all-review side rejects.
    every = run(df)
    every["by_idea"]["comparisons"][0].update(p_two_sided=1e-9)
    missing = run(kept)
    missing["by_idea"]["comparisons"] = []
    rows = with_without(every, missing, plan=plan, metrics=metrics)
    row = next(r for r in rows if r["test"] == "by_idea")
    assert row["reject_all"] is True and row["changed"] is None and row["p_adjusted_kept"] is None
    assert row["kept_note"].startswith("no result on the kept reviews")


def _three_conditions():
    """Eight reviewers over H (the baseline), AI and X ideas: only r6 and r7 reviewed X;
    only r0, r1 and r6 reviewed H."""
    rng = np.random.default_rng(11)
    plan = {0: "h0 h1 h2 h3 a0 a1", 1: "h0 h1 h2 h3 a1 a2", 6: "h0 x0 x1 x2 x3", 7: "x0 x1 x2 x3"}
    rows = []
    for r in range(8):
        for idea in plan.get(r, f"a{r} a{(r + 3) % 8} a{(r + 5) % 8}").split():
            cond = {"h": "H", "a": "AI", "x": "X"}[idea[0]]
            rows.append((f"r{r}", idea, cond))
    df = pd.DataFrame(rows, columns=["reviewer_id", "idea_id", "condition"])
    df["review_id"] = [str(i) for i in range(len(df))]
    df["topic"] = "t"
    df["overall"] = rng.integers(1, 11, len(df)).astype(float)
    return df


def _section(df, flagged_reviewers):
    from studies.analysis.quality import Flag
    from studies.analysis.quality_report import quality_section

    metrics = ["overall"]
    conds = ["H", "AI", "X"]
    report = {
        "metrics": metrics,
        "baseline": "H",
        "conditions": conds,
        "by_review": hyp.test_by_review(df, metrics, baseline="H", conditions=conds),
        "by_idea": hyp.test_by_idea(df, metrics, baseline="H", conditions=conds),
        "by_reviewer": hyp.test_by_reviewer(df, metrics, baseline="H", conditions=conds),
        "mixed_effects": {"fits": {}},
    }
    reviews = [
        ReviewAnswers(row.review_id, row.reviewer_id, row.idea_id, {"overall": row.overall})
        for row in df.itertuples()
    ]
    flags = [
        Flag(r.review_id, r.reviewer_id, "attention", "careful: answered 7, instructed 3")
        for r in reviews
        if r.reviewer_id in flagged_reviewers
    ]
    plan = parse_plan({"primary_metrics": ["overall"], "quality": {"exclude": ["attention"]}})
    section = quality_section(
        df, report, flags=flags, reviews=reviews, plan=plan, design=(df, [], ("topic",))
    )
    return report, section


def test_a_condition_the_rules_empty_keeps_its_row_saying_no_review_is_left():
    df = _three_conditions()
    report, q = _section(df, {"r6", "r7"})  # every review of X is removed
    assert q["with_without_note"] == ""
    rows = {(r["test"], r["condition"]): r for r in q["with_without"]}
    assert set(rows) == {
        (t, c) for t in ("by_review", "by_idea", "by_reviewer") for c in ("AI", "X")
    }
    kept = df[~df["reviewer_id"].isin({"r6", "r7"})]
    for test in ("by_review", "by_idea", "by_reviewer"):
        gone = rows[(test, "X")]
        full = next(c for c in report[test]["comparisons"] if c["condition"] == "X")
        # All reviews: the figures stay; kept side: nothing, and why.
        assert gone["n_all"] == full["n"] and gone["diff_all"] == pytest.approx(full["diff"])
        assert gone["kept_note"] == "no reviews of X are left"
        assert gone["diff_kept"] is None and gone["n_kept"] is None and gone["changed"] is None
        assert rows[(test, "AI")]["kept_note"] == ""
    # AI against H on the kept reviews is the same Welch test on those rows alone.
    ai = kept.loc[kept["condition"] == "AI", "overall"]
    h = kept.loc[kept["condition"] == "H", "overall"]
    welch = hyp.welch(ai.to_numpy(), h.to_numpy())
    row = rows[("by_review", "AI")]
    assert row["n_kept"] == len(ai) and row["diff_kept"] == pytest.approx(ai.mean() - h.mean())
    assert row["p_adjusted_kept"] == pytest.approx(welch.p)
    assert row["changed"] == (bool(row["reject_all"]) != bool(row["reject_kept"]))


def test_the_baseline_or_every_review_emptied_keeps_the_rows_with_their_all_review_figures():
    df = _three_conditions()
    h_reviewers = set(df.loc[df["condition"] == "H", "reviewer_id"])
    for flagged, note in (
        (h_reviewers, "no reviews of H are left (the baseline)"),
        (set(df["reviewer_id"]), None),
    ):
        report, q = _section(df, flagged)
        assert q["with_without_note"] == ""
        assert len(q["with_without"]) == 6
        for row in q["with_without"]:
            want = note or f"no reviews of {row['condition']} are left"
            assert row["kept_note"] == want, row
            assert row["n_all"] > 0 and row["n_kept"] is None
