"""The phase comparison against independent computations, lme4, and a known change.

The synthetic pair of studies (`_pair`) is built so that every idea's change is known
exactly: its reviews in the second phase are its first-phase scores in another order,
shifted by the idea's change, and each condition's changes average to the condition's
known change. Every closed-form number is recomputed here with pandas, scipy and
statsmodels (never with the module's own helpers) and held to 1e-10; the mixed model is
held to R's lme4 (through lmerTest, for the Satterthwaite df) to 1e-4.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from studies.analysis.phase_plots import phase_slopes
from studies.analysis.phases import (
    PhaseComparison,
    compare_phases,
    match_phases,
    phase_tables,
    shared_metrics,
)
from studies.analysis.plan import CORRECTIONS, parse_plan
from studies.analysis.rcheck import lmertest_unavailable_reason
from studies.importers import (
    ImportFailed,
    RowInput,
    default_mapping,
    mapping_check,
    parse_rows,
    read_table,
    sha256_bytes,
)
from studies.protocol.forms import EXECUTION_FORM, SI2024_FORM

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "tests" / "data" / "synthetic_execution_release.json"
TOL = 1e-10
METRICS = ("novelty", "overall")
SCALES_1 = {"novelty": (1, 10), "overall": (1, 10), "feasibility": (1, 10)}
SCALES_2 = {"novelty": (1, 10), "overall": (1, 10), "soundness": (1, 10), "code": (1, 5)}
#: The known change of each condition (second phase minus first), on both metrics.
DELTA = {"Human": -0.5, "AI": -2.0, "AI_Rerank": -1.25}
N_IDEAS = {"Human": 10, "AI": 12, "AI_Rerank": 8}
LABELS = ("ideation", "execution")
BH_AI_LESS = {"hypotheses": [{"direction": "AI < Human"}], "multiple_testing": {"method": "bh"}}


# ----------------------------------------------------------------------- builders


def _offsets(n: int) -> list[float]:
    """n numbers that sum to exactly 0 (dyadic pairs), each idea's departure from its
    condition's change."""
    half = [0.125 * (k + 1) for k in range(n // 2)]
    out = [v for h in half for v in (-h, h)]
    return out + [0.0] * (n - len(out))


def _pair(seed: int = 7) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two review frames of the same ideas with a known change per condition, plus ideas
    in one phase only and one idea the tests leave out."""
    rng = np.random.default_rng(seed)
    first: list[dict] = []
    second: list[dict] = []
    ideas = [(f"{c}_{i}", c) for c, n in N_IDEAS.items() for i in range(n)]
    offsets = {c: _offsets(n) for c, n in N_IDEAS.items()}
    extra = [("Only1_a", "Human", 1), ("Only1_b", "AI", 1), ("Only2_a", "AI", 2)]
    extra += [("Left_1", "AI", 0)]
    for k, (idea, cond) in enumerate(ideas + [(i, c) for i, c, _ in extra]):
        n = int(rng.integers(2, 5))
        base = {m: rng.integers(4, 9, n).astype(float) for m in METRICS}
        where = next((w for i, _, w in extra if i == idea), 0)
        if where != 2:
            for j in range(n):
                first.append(
                    {"idea_id": idea, "condition": cond, "reviewer_id": f"P{rng.integers(12)}"}
                    | {m: base[m][j] for m in METRICS}
                    | {"feasibility": float(rng.integers(1, 11))}
                )
        if where == 1:
            continue
        off = offsets[cond][int(idea.split("_")[-1])] if where == 0 and "_" in idea else 0.0
        shift = {"novelty": DELTA[cond] + off, "overall": DELTA[cond] - off}
        later = {m: rng.permutation(base[m]) + shift[m] for m in METRICS}
        if cond == "Human" and k % 3 == 0:
            # Two more reviews around the idea's later mean leave that mean as it was.
            for m in METRICS:
                mu = later[m].mean()
                later[m] = np.concatenate([later[m], [mu - 0.5, mu + 0.5]])
        for j in range(len(later["novelty"])):
            second.append(
                {"idea_id": idea, "condition": cond, "reviewer_id": f"X{rng.integers(10)}"}
                | {m: later[m][j] for m in METRICS}
                | {"soundness": float(rng.integers(1, 11))}
            )
    return pd.DataFrame(first), pd.DataFrame(second)


def _compare(first, second, **kwargs) -> PhaseComparison:
    kwargs = {
        "scales_first": SCALES_1,
        "scales_second": SCALES_2,
        "baseline": "Human",
        "labels": LABELS,
        "leave_out": ["Left_1", "Nowhere_9"],
        "mixed": False,
    } | kwargs
    return compare_phases(first, second, **kwargs)


@pytest.fixture(scope="module")
def pair() -> tuple[pd.DataFrame, pd.DataFrame]:
    return _pair()


@pytest.fixture(scope="module")
def result(pair) -> PhaseComparison:
    return _compare(*pair, plan=parse_plan(BH_AI_LESS))


def _idea_means(first: pd.DataFrame, second: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Independent per-idea means: pivot tables over the compared ideas."""
    keep = [i for i in first["idea_id"].unique() if i in set(second["idea_id"]) and i != "Left_1"]
    a = first[first["idea_id"].isin(keep)].pivot_table(
        index="idea_id", columns="condition", values=metric, aggfunc="mean"
    )
    b = second[second["idea_id"].isin(keep)].pivot_table(
        index="idea_id", columns="condition", values=metric, aggfunc="mean"
    )
    out = pd.DataFrame(
        {
            "condition": a.idxmax(axis=1).where(a.notna().any(axis=1)),
            "m1": a.max(axis=1),
            "m2": b.reindex(a.index).max(axis=1),
        }
    )
    out["change"] = out["m2"] - out["m1"]
    return out


def _by(result: PhaseComparison, kind: str, **where):
    rows = [r for r in getattr(result, kind) if all(getattr(r, k) == v for k, v in where.items())]
    assert len(rows) == 1, (kind, where, rows)
    return rows[0]


# ----------------------------------------------------------------------- matching


def test_ideas_are_matched_and_the_others_named(result) -> None:
    m = result.match
    assert m.id_column == "idea_id"
    assert len(m.compared) == sum(N_IDEAS.values())
    assert m.only_first == ("Only1_a", "Only1_b")
    assert m.only_second == ("Only2_a",)
    assert m.left_out == ("Left_1",) and m.left_out_absent == ("Nowhere_9",)
    assert m.disagree == ()
    assert "Left_1" not in set(result.ideas["idea"])
    assert any("Left out as asked: Left_1" in n for n in result.notes)
    assert any("Nowhere_9" in n for n in result.notes)
    assert result.conditions == ("Human", "AI", "AI_Rerank")


def test_a_condition_that_changed_between_phases_is_refused_or_left_out(pair) -> None:
    first, second = pair
    second = second.copy()
    second.loc[second["idea_id"] == "Human_3", "condition"] = "AI"
    with pytest.raises(ValueError, match=r"'Human_3': Human in the ideation phase, AI in the"):
        _compare(first, second)
    res = _compare(first, second, on_disagreement="leave_out")
    assert res.match.disagree == (("Human_3", "Human", "AI"),)
    assert "Human_3" not in res.match.compared
    assert any("Human_3" in n for n in res.notes)
    assert (phase_tables(res)["phase_match"].set_index("idea").loc["Human_3", "status"]) == (
        "condition_differs"
    )


def test_per_condition_ids_match_an_idea_shared_by_two_conditions() -> None:
    # As in the Si et al. release: one idea in AI and AI_Rerank, one id per condition.
    # Only its AI id was carried out, so only that one is compared.
    first = pd.DataFrame(
        {
            "idea_id": ["S", "S", "S", "S", "H", "H"],
            "source_idea_id": ["S_AI", "S_AI", "S_AI_Rerank", "S_AI_Rerank", "H_Human", "H_Human"],
            "condition": ["AI", "AI", "AI_Rerank", "AI_Rerank", "Human", "Human"],
            "overall": [5.0, 6.0, 5.0, 6.0, 4.0, 5.0],
        }
    )
    second = pd.DataFrame(
        {
            "idea_id": ["S_AI", "S_AI", "H_Human", "H_Human"],
            "source_idea_id": ["S_AI", "S_AI", "H_Human", "H_Human"],
            "condition": ["AI", "AI", "Human", "Human"],
            "overall": [3.0, 4.0, 4.0, 4.0],
        }
    )
    m = match_phases(first, second)
    assert m.id_column == "source_idea_id"
    assert m.compared == ("H_Human", "S_AI")
    assert m.conditions == {"H_Human": "Human", "S_AI": "AI"}
    assert m.only_first == ("S_AI_Rerank",)
    with pytest.raises(ValueError, match=r"'S': AI, AI_Rerank.*source_idea_id"):
        match_phases(first, second, id_column="idea_id")


def test_shared_metrics_need_the_same_scale() -> None:
    shared = shared_metrics(
        {"novelty": (1, 10), "overall": (1, 10), "feasibility": (1, 10), "code": (1, 10)},
        {"novelty": (1, 10), "overall": [1, 10], "code": (1, 5), "soundness": (1, 10)},
    )
    assert shared.metrics == ("novelty", "overall")
    assert shared.mismatched == {"code": ((1, 10), (1, 5))}
    assert shared.only_first == ("feasibility",) and shared.only_second == ("soundness",)


def test_a_metric_that_is_not_shared_or_on_another_scale_is_refused(pair) -> None:
    first, second = pair
    with pytest.raises(ValueError, match=r"'feasibility' is not a metric of the second"):
        _compare(first, second, metrics=["novelty", "feasibility"])
    with pytest.raises(ValueError, match=r"'overall' is on 1-10 in the first phase and 1-5"):
        _compare(first, second, scales_second={**SCALES_2, "overall": (1, 5)}, metrics=["overall"])


def test_scores_off_the_scale_are_refused_naming_phase_and_metric(pair) -> None:
    first, second = pair
    bad = second.copy()
    bad.loc[0, "overall"] = 11.0
    with pytest.raises(ValueError, match=r"execution phase.*overall: 1 scores outside 1-10"):
        _compare(first, bad)


def test_the_baseline_must_be_in_both_phases(pair) -> None:
    first, second = pair
    with pytest.raises(ValueError, match=r"baseline condition 'Nobody' has no idea in both"):
        _compare(first, second, baseline="Nobody")


# ----------------------------------------------------------------------- closed forms


def test_per_idea_means_and_changes_equal_pandas(pair, result) -> None:
    first, second = pair
    for metric in METRICS:
        ref = _idea_means(first, second, metric)
        ours = result.ideas[result.ideas["metric"] == metric].set_index("idea")
        assert sorted(ours.index) == sorted(ref.index)
        ours = ours.loc[ref.index]
        assert (ours["condition"] == ref["condition"]).all()
        for a, b in (("mean_first", "m1"), ("mean_second", "m2"), ("change", "change")):
            np.testing.assert_allclose(ours[a], ref[b], rtol=0, atol=TOL)
        counts = first.groupby("idea_id")[metric].count().reindex(ref.index)
        assert (ours["n_first"] == counts).all()


def test_each_condition_recovers_its_known_change_exactly(result) -> None:
    for metric in METRICS:
        for cond, delta in DELTA.items():
            c = _by(result, "changes", metric=metric, condition=cond)
            assert c.n == N_IDEAS[cond]
            assert c.mean_change == pytest.approx(delta, abs=1e-12)
            assert c.mean_second - c.mean_first == pytest.approx(delta, abs=1e-12)


def test_condition_changes_equal_scipy_one_sample_t(pair, result) -> None:
    first, second = pair
    for metric in METRICS:
        ref = _idea_means(first, second, metric)
        for cond in DELTA:
            d = ref.loc[ref["condition"] == cond, "change"].to_numpy()
            t = stats.ttest_1samp(d, 0.0)
            lo, hi = t.confidence_interval(0.95)
            c = _by(result, "changes", metric=metric, condition=cond)
            got = (c.mean_change, c.sd, c.t, c.df, c.p, c.ci_low, c.ci_high)
            want = (d.mean(), d.std(ddof=1), t.statistic, len(d) - 1, t.pvalue, lo, hi)
            np.testing.assert_allclose(got, want, rtol=0, atol=TOL)
            assert c.mean_first == pytest.approx(
                ref.loc[ref["condition"] == cond, "m1"].mean(), abs=TOL
            )


def test_welch_tests_of_the_change_equal_scipy_one_sided(pair, result) -> None:
    first, second = pair
    for metric in METRICS:
        ref = _idea_means(first, second, metric)
        y = ref.loc[ref["condition"] == "Human", "change"].to_numpy()
        for cond in ("AI", "AI_Rerank"):
            x = ref.loc[ref["condition"] == cond, "change"].to_numpy()
            planned = "less" if cond == "AI" else "two-sided"  # the plan is about AI only
            one = stats.ttest_ind(x, y, equal_var=False, alternative=planned)
            two = stats.ttest_ind(x, y, equal_var=False)
            lo, hi = two.confidence_interval(0.95)
            t = _by(result, "tests", metric=metric, condition=cond)
            assert t.alternative == planned
            got = (t.diff, t.t, t.df, t.p, t.p_unadjusted, t.ci_low, t.ci_high)
            want = (x.mean() - y.mean(), two.statistic, two.df, two.pvalue, one.pvalue, lo, hi)
            np.testing.assert_allclose(got, want, rtol=0, atol=TOL)
            assert (t.n, t.n_baseline) == (len(x), len(y))
            assert t.sd == pytest.approx(x.std(ddof=1), abs=TOL)
            # The known changes: AI's change minus Human's is exactly -1.5.
            assert t.diff == pytest.approx(DELTA[cond] - DELTA["Human"], abs=1e-12)


def test_benjamini_hochberg_corrects_each_comparison_over_the_metrics(result) -> None:
    for cond in ("AI", "AI_Rerank"):
        rows = [_by(result, "tests", metric=m, condition=cond) for m in METRICS]
        reject, adjusted, _, _ = multipletests([r.p_unadjusted for r in rows], method="fdr_bh")
        np.testing.assert_allclose([r.p_adjusted for r in rows], adjusted, rtol=0, atol=TOL)
        assert [r.reject for r in rows] == list(reject)
        assert {r.family for r in rows} == {f"change (Welch): {cond} vs Human"}


@pytest.mark.parametrize(
    "method,sm", [("bonferroni", "bonferroni"), ("holm", "holm"), ("by", "fdr_by")]
)
def test_other_corrections_and_one_family_over_all_comparisons(pair, method, sm) -> None:
    plan = parse_plan(
        {
            "hypotheses": [{"direction": "Human > AI"}, {"direction": "AI_Rerank < Human"}],
            "multiple_testing": {"method": method, "families": "per_test"},
        }
    )
    res = _compare(*pair, plan=plan)
    rows = list(res.tests)
    assert len(rows) == 4 and {r.family for r in rows} == {"change (Welch)"}
    assert {r.alternative for r in rows} == {"less"}
    _, adjusted, _, _ = multipletests([r.p_unadjusted for r in rows], method=sm)
    np.testing.assert_allclose([r.p_adjusted for r in rows], adjusted, rtol=0, atol=TOL)


def test_the_default_plan_is_two_sided_bonferroni(pair) -> None:
    res = _compare(*pair)
    for t in res.tests:
        assert t.alternative == "two-sided" and t.p_unadjusted == t.p
        assert t.p_adjusted == pytest.approx(min(1.0, 2 * t.p), abs=TOL)


def test_correlations_and_intervals_equal_scipy(pair, result) -> None:
    first, second = pair
    z = stats.norm.ppf(0.975)
    for metric in METRICS:
        ref = _idea_means(first, second, metric)
        for subset in ("all", *DELTA):
            part = ref if subset == "all" else ref[ref["condition"] == subset]
            x, y = part["m1"].to_numpy(), part["m2"].to_numpy()
            n = len(x)
            pr = stats.pearsonr(x, y)
            plo, phi = pr.confidence_interval(0.95)
            sr = stats.spearmanr(x, y)
            rho = sr.statistic
            se = math.sqrt((1 + rho**2 / 2) / (n - 3))  # Bonett and Wright
            slo, shi = math.tanh(math.atanh(rho) - z * se), math.tanh(math.atanh(rho) + z * se)
            c = _by(result, "correlations", metric=metric, subset=subset)
            assert c.n == n
            got = (c.pearson_r, c.pearson_p, c.pearson_ci_low, c.pearson_ci_high)
            np.testing.assert_allclose(got, (pr.statistic, pr.pvalue, plo, phi), atol=TOL)
            got = (c.spearman_rho, c.spearman_p, c.spearman_ci_low, c.spearman_ci_high)
            np.testing.assert_allclose(got, (rho, sr.pvalue, slo, shi), atol=TOL)


def test_correlations_need_enough_ideas() -> None:
    first = pd.DataFrame(
        {
            "idea_id": ["a", "b", "c", "d", "e"],
            "condition": ["Human", "Human", "AI", "AI", "AI"],
            "overall": [3.0, 5.0, 4.0, 6.0, 7.0],
        }
    )
    second = first.assign(overall=[4.0, 4.0, 2.0, 5.0, 5.0])
    res = compare_phases(
        first,
        second,
        scales_first={"overall": (1, 10)},
        scales_second={"overall": (1, 10)},
        baseline="Human",
        mixed=False,
    )
    human = _by(res, "correlations", metric="overall", subset="Human")
    assert human.n == 2 and math.isnan(human.pearson_r) and math.isnan(human.spearman_ci_low)
    ai = _by(res, "correlations", metric="overall", subset="AI")
    assert ai.n == 3 and not math.isnan(ai.pearson_r) and math.isnan(ai.pearson_ci_low)
    assert res.to_dict()["correlations"][1]["pearson_r"] is None


def test_top_k_overlap_and_rank_moves_equal_pandas_and_scipy(pair) -> None:
    first, second = pair
    res = _compare(first, second, top_k=6, n_moves=4)
    for metric in METRICS:
        ref = _idea_means(first, second, metric)
        top1 = set(ref["m1"].nlargest(6, keep="all").index)
        top2 = set(ref["m2"].nlargest(6, keep="all").index)
        o = _by(res, "overlaps", metric=metric)
        assert (set(o.top_first), set(o.top_second)) == (top1, top2)
        assert o.overlap == len(top1 & top2) and o.n == len(ref)
        assert o.jaccard == pytest.approx(len(top1 & top2) / len(top1 | top2), abs=TOL)
        assert o.expected_overlap == pytest.approx(len(top1) * len(top2) / len(ref), abs=TOL)
        assert o.top_first_by_condition["AI"] == sum(ref.loc[list(top1), "condition"] == "AI")
        r1 = pd.Series(stats.rankdata(-ref["m1"]), index=ref.index)
        r2 = pd.Series(stats.rankdata(-ref["m2"]), index=ref.index)
        for cond in DELTA:
            assert o.mean_rank_first[cond] == pytest.approx(
                r1[ref["condition"] == cond].mean(), abs=TOL
            )
        move = (r1 - r2).abs().sort_values(ascending=False)
        moves = [mv for mv in res.moves if mv.metric == metric]
        assert len(moves) == 4
        for mv in moves:
            assert (mv.rank_first, mv.rank_second) == (r1[mv.idea], r2[mv.idea])
            assert abs(mv.move) >= move.iloc[4] - TOL  # none larger was passed over
        assert [abs(mv.move) for mv in moves] == sorted(
            (abs(mv.move) for mv in moves), reverse=True
        )


def test_the_ai_ideas_fall_in_the_ranking(result) -> None:
    # AI ideas lose 2 points, Human ideas 0.5: the AI ideas' mean rank must worsen.
    for metric in METRICS:
        o = _by(result, "overlaps", metric=metric)
        assert o.mean_rank_second["AI"] > o.mean_rank_first["AI"]
        assert o.mean_rank_second["Human"] < o.mean_rank_first["Human"]


# ----------------------------------------------------------------------- outputs


def test_json_section_and_tidy_tables(result) -> None:
    doc = result.to_dict()
    text = json.dumps(doc, allow_nan=False)  # NaN must have become null
    assert json.loads(text)["match"]["left_out"] == ["Left_1"]
    assert doc["multiplicity"] == {
        "method": "bh",
        "method_label": CORRECTIONS["bh"],
        "alpha": 0.05,
        "family_scope": "per_comparison",
    }
    assert doc["correlation_methods"]["spearman_ci"].startswith("Fisher z with the Bonett-Wright")
    tables = phase_tables(result)
    n_ideas = sum(N_IDEAS.values())
    assert len(tables["phase_ideas"]) == n_ideas * len(METRICS)
    assert len(tables["phase_tests"]) == 2 * len(METRICS)
    assert len(tables["phase_changes"]) == 3 * len(METRICS)
    assert len(tables["phase_correlations"]) == 4 * len(METRICS)
    assert len(tables["phase_top_k"]) == len(METRICS)
    status = tables["phase_match"]["status"].value_counts().to_dict()
    assert status == {
        "compared": n_ideas,
        "only_first": 2,
        "only_second": 1,
        "left_out": 1,
        "left_out_not_found": 1,
    }
    assert "top_first_by_condition[AI]" in tables["phase_top_k"].columns
    for table in tables.values():
        table.to_csv(os.devnull, index=False)


def test_the_slope_chart_draws_every_metric_and_condition(result) -> None:
    svg = phase_slopes(
        result.ideas,
        metrics=result.metrics,
        conditions=result.conditions,
        labels=result.labels,
        scales=result.shared.scales,
    )
    assert svg.startswith("<svg")
    for text in ("novelty", "overall", "ideation", "execution", "AI (12 ideas)", "Human (10"):
        assert text in svg, text
    assert "<metadata>" not in svg


# ----------------------------------------------------------------------- mixed model


def _simulated_pair(
    n_per_condition: int, seed: int, conditions=("Human", "AI")
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Continuous scores from the model the comparison fits: idea and (phase-specific)
    reviewer intercepts, a condition effect in the first phase and a change per
    condition (Human -0.4, AI -1.5, AI_Rerank -1.0)."""
    rng = np.random.default_rng(seed)
    level = {"Human": 0.0, "AI": 0.6, "AI_Rerank": 0.4}
    change = {"Human": -0.4, "AI": -1.5, "AI_Rerank": -1.0}
    n_rev = max(8, min(40, n_per_condition // 2))
    rev = {p: rng.normal(0, 0.6, n_rev) for p in (0, 1)}
    frames: list[list[dict]] = [[], []]
    for cond in conditions:
        for i in range(n_per_condition):
            idea = f"{cond}_{i}"
            u = rng.normal(0, 0.8)
            for p in (0, 1):
                for r in rng.choice(n_rev, int(rng.integers(2, 5)), replace=False):
                    y = 5.5 + level[cond] + u + p * change[cond] + rev[p][r] + rng.normal(0, 1.2)
                    frames[p].append(
                        {"idea_id": idea, "condition": cond, "reviewer_id": f"R{r}", "overall": y}
                    )
    return pd.DataFrame(frames[0]), pd.DataFrame(frames[1])


WIDE = {"overall": (-50, 50)}  # continuous simulated scores: no form scale to hold them to

_R_SCRIPT = r"""
suppressPackageStartupMessages({library(lme4); library(lmerTest); library(jsonlite)})
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1], stringsAsFactors = FALSE)
d$condition <- factor(d$condition, levels = strsplit(args[3], ",")[[1]])
d$phase <- factor(d$phase, levels = c("ideation", "execution"))
out <- list()
for (f in c("score ~ condition * phase + (1 | reviewer) + (1 | idea)",
            "score ~ condition * phase + (1 | idea)")) {
  fit <- lmerTest::lmer(as.formula(f), data = d, REML = TRUE)
  cf <- summary(fit, ddf = "Satterthwaite")$coefficients
  vc <- as.data.frame(VarCorr(fit))
  out[[length(out) + 1]] <- list(
    terms = rownames(cf), coef = unname(cf[, "Estimate"]), se = unname(cf[, "Std. Error"]),
    df = unname(cf[, "df"]), p = unname(cf[, "Pr(>|t|)"]),
    grp = vc$grp, var = vc$vcov, loglik = as.numeric(logLik(fit)))
}
writeLines(toJSON(out, auto_unbox = TRUE, digits = NA), args[2])
"""


def _r_term(term: str) -> str:
    """lme4's name of one of our terms: condition[AI]:phase[execution] -> conditionAI:..."""
    if term == "Intercept":
        return "(Intercept)"
    return ":".join(part.replace("[", "").replace("]", "") for part in term.split(":"))


@pytest.fixture(scope="module")
def lme4_fits(tmp_path_factory):
    reason = lmertest_unavailable_reason()
    if reason is not None:
        if os.environ.get("IDEAREVIEW_REQUIRE_R") == "1":
            pytest.fail(f"IDEAREVIEW_REQUIRE_R=1 but {reason}")
        pytest.skip(reason)
    conditions = ("Human", "AI", "AI_Rerank")
    first, second = _simulated_pair(20, 3, conditions)
    # The data R sees, stacked here from the frames (reviewers of a phase are its own).
    stacked = pd.concat(
        [
            pd.DataFrame(
                {
                    "score": df["overall"],
                    "condition": df["condition"],
                    "phase": label,
                    "idea": df["idea_id"],
                    "reviewer": label + "_" + df["reviewer_id"],
                }
            )
            for df, label in ((first, "ideation"), (second, "execution"))
        ]
    )
    tmp = tmp_path_factory.mktemp("lme4")
    stacked.to_csv(tmp / "d.csv", index=False)
    (tmp / "fit.R").write_text(_R_SCRIPT)
    proc = subprocess.run(
        [shutil.which("Rscript") or "Rscript", "--vanilla", str(tmp / "fit.R"), str(tmp / "d.csv")]
        + [str(tmp / "out.json"), ",".join(conditions)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    with_reviewers, idea_only = json.loads((tmp / "out.json").read_text())
    ours = _compare(
        first,
        second,
        scales_first=WIDE,
        scales_second=WIDE,
        leave_out=(),
        mixed=True,
        mixed_starts=2,
        plan=parse_plan({"hypotheses": [{"direction": "AI < Human"}]}),
    )
    no_ids = _compare(
        first.assign(reviewer_id=None),
        second.assign(reviewer_id=None),
        scales_first=WIDE,
        scales_second=WIDE,
        leave_out=(),
        mixed=True,
        mixed_starts=2,
    )
    return (ours, with_reviewers), (no_ids, idea_only)


def _assert_equals_lme4(ours: PhaseComparison, ref: dict, variances: dict[str, str]) -> None:
    res = ours.models["overall"].result
    assert res is not None
    got = {_r_term(row["term"]): row for row in res.fixed}
    assert sorted(got) == sorted(ref["terms"])
    for j, term in enumerate(ref["terms"]):
        assert got[term]["coef"] == pytest.approx(ref["coef"][j], abs=1e-4), term
        assert got[term]["se"] == pytest.approx(ref["se"][j], abs=1e-4), term
        # Measured against lmerTest 3.1-3 on these data: coefficients within 5e-10, SEs
        # 2.4e-9, Satterthwaite p 2.3e-9, df 8.4e-8 relative, variances 9.4e-9, the REML
        # criterion 1.2e-13; 1e-4 leaves room for other BLAS and optimiser builds.
        assert got[term]["df"] == pytest.approx(ref["df"][j], rel=1e-4), term
        assert got[term]["p_satterthwaite"] == pytest.approx(ref["p"][j], abs=1e-4), term
    for grp, var in zip(ref["grp"], ref["var"], strict=True):
        assert res.variance[variances[grp]] == pytest.approx(var, abs=1e-4), grp
    assert res.loglik == pytest.approx(ref["loglik"], abs=1e-4)


@pytest.mark.r
def test_mixed_model_equals_lme4_with_reviewer_and_idea_effects(lme4_fits) -> None:
    (ours, ref), _ = lme4_fits
    res = ours.models["overall"].result
    assert res.groups_used == ["reviewer_id", "idea_id"]
    _assert_equals_lme4(
        ours, ref, {"reviewer": "reviewer_id", "idea": "idea_id", "Residual": "residual"}
    )
    # The planned one-sided p of the interaction is lmerTest's t on its Satterthwaite df.
    ai = next(r for r in ours.models["overall"].interactions if r["condition"] == "AI")
    j = ref["terms"].index("conditionAI:phaseexecution")
    t = ref["coef"][j] / ref["se"][j]
    assert ai["alternative"] == "less" and ai["p_method"] == "Satterthwaite t"
    assert ai["p_unadjusted"] == pytest.approx(stats.t.cdf(t, ref["df"][j]), abs=1e-4)


@pytest.mark.r
def test_mixed_model_without_reviewer_ids_keeps_the_idea_effect_and_says_so(lme4_fits) -> None:
    _, (ours, ref) = lme4_fits
    res = ours.models["overall"].result
    assert res.groups_used == ["idea_id"]
    assert res.groups_dropped == {"reviewer_id": "no reviewer ids in the data"}
    assert "no reviewer random effect" in res.warnings[0]
    assert "(1|idea)" in ours.models["overall"].formula
    assert "(1|reviewer)" not in ours.models["overall"].formula
    assert any("no reviewer ids" in n for n in ours.notes)
    _assert_equals_lme4(ours, ref, {"idea": "idea_id", "Residual": "residual"})


def test_the_interaction_recovers_the_known_change_difference_on_a_large_sample() -> None:
    first, second = _simulated_pair(400, 11)
    res = _compare(first, second, scales_first=WIDE, scales_second=WIDE, leave_out=(), mixed=True)
    fit = res.models["overall"]
    row = fit.result.term("condition[AI]:phase[execution]")
    # The simulated changes: AI -1.5, Human -0.4, so the interaction is -1.1.
    assert row["se"] < 0.1
    assert abs(row["coef"] - (-1.1)) < 4 * row["se"]
    assert fit.result.term("phase[execution]")["coef"] == pytest.approx(-0.4, abs=4 * 0.1)
    welch = _by(res, "tests", metric="overall", condition="AI")
    assert abs(welch.diff - (-1.1)) < 4 * welch.se


def test_a_phase_with_partly_missing_reviewer_ids_drops_the_reviewer_effect(pair) -> None:
    first, second = pair
    second = second.copy()
    second.loc[second.index[:3], "reviewer_id"] = None
    res = _compare(first, second, mixed=True, mixed_starts=1, metrics=["overall"])
    fit = res.models["overall"].result
    assert fit.groups_used == ["idea_id"]
    assert "3 of" in fit.warnings[0] and "execution phase have no reviewer id" in fit.warnings[0]


# ----------------------------------------------------------------------- the release


def _load_script():
    path = ROOT / "scripts" / "synthetic_execution_release.py"
    spec = importlib.util.spec_from_file_location("synthetic_execution_release", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_synthetic_release_file_is_the_scripts_output() -> None:
    committed = json.loads(RELEASE.read_text())
    assert committed == _load_script().build()
    assert len(committed) == 23 and {len(v) for v in committed.values()} == {181}
    assert len(set(committed["idea_id"])) == 43


def _parse_release(mapping: dict[str, str]):
    data = RELEASE.read_bytes()
    rows = read_table(data, RELEASE.name)
    header = list(dict.fromkeys(k for r in rows for k in r))
    mapping_check(mapping, form=EXECUTION_FORM, header=header, name=RELEASE.name)
    return parse_rows(
        rows,
        name=RELEASE.name,
        sha256=sha256_bytes(data),
        target=RowInput(form=EXECUTION_FORM, known_conditions=None, condition_kinds={}),
        mapping=default_mapping(header, EXECUTION_FORM.metric_keys, mapping),
        condition_kind_guess=True,
    )


def test_the_release_imports_with_the_execution_form_and_one_mapping() -> None:
    with pytest.raises(ImportFailed, match=r"field 'code_quality': missing column"):
        _parse_release({})
    parsed = _parse_release({"code_quality": "codebase_quality"})
    assert len(parsed.reviews) == 181 and len(parsed.ideas) == 43
    assert parsed.conditions == {"Human": "human", "AI": "ai"}
    assert parsed.summary["flags"] == {"ai_pledge_declined": 1}
    review = parsed.reviews[0]
    assert set(review.scores) == set(EXECUTION_FORM.metric_keys)
    # The mapped column's value arrives unchanged (the release's first row).
    first = read_table(RELEASE.read_bytes(), RELEASE.name)[0]
    assert review.scores["code_quality"] == float(first["codebase_quality"])
    assert review.familiarity is not None
    assert review.extra["experience"] == "yes" and review.rationales["faithfulness"]


def test_the_release_links_to_the_ideation_release(si2024_frame) -> None:
    parsed = _parse_release({"code_quality": "codebase_quality"})
    condition = {i: c for idea in parsed.ideas for c, i in idea.external_ids.items()}
    execution = pd.DataFrame(
        [
            {
                "idea_id": r.idea_ref,
                "source_idea_id": r.idea_ref,
                "condition": condition[r.idea_ref],
                "reviewer_id": None,
                **r.scores,
            }
            for r in parsed.reviews
        ]
    )
    left_out = ["Uncertainty_2_AI", "Multilingual_5_AI", "Bias_4_AI", "Factuality_8_AI"]
    res = compare_phases(
        si2024_frame,
        execution,
        scales_first=SI2024_FORM.scales(),
        scales_second=EXECUTION_FORM.scales(),
        baseline="Human",
        plan=parse_plan(BH_AI_LESS),
        labels=LABELS,
        leave_out=left_out,
        mixed=False,
    )
    assert res.metrics == ("novelty", "effectiveness", "excitement", "overall")
    assert res.shared.only_first == ("feasibility",)
    assert res.shared.only_second == ("soundness", "faithfulness", "code_quality")
    present = [i for i in left_out if i in set(execution["idea_id"])]
    assert res.match.left_out == tuple(present)
    assert len(res.match.compared) == 43 - len(present) and res.match.only_second == ()
    assert res.match.id_column == "source_idea_id"
    for t in res.tests:  # the synthetic file drops AI ideas by 1.4 and Human ideas by 0.4
        assert t.alternative == "less" and t.diff < 0
