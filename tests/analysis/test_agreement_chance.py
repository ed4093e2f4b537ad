"""The random-ranking baseline of the agreement section: what chance gives, not a judge."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from studies.analysis import agreement as ag
from studies.analysis.agreement_report import build_agreement, computed_baselines
from studies.analysis.options import ReportOptions

SEED = ReportOptions().seed


def _study(per_condition: int, shift: float, seed: int = 0) -> pd.DataFrame:
    """Ideas A01.. and H01.. (so ids sort by condition), three reviews each; the H ideas
    score `shift` higher."""
    rng = np.random.default_rng(seed)
    rows = []
    for cond, offset in (("A", 0.0), ("H", shift)):
        for i in range(1, per_condition + 1):
            idea = f"{cond}{i:02d}"
            for r in range(3):
                score = float(np.clip(np.round(5 + offset + rng.normal(0, 1)), 1, 10))
                rows.append((idea, f"{idea}-r{r}", f"rev{r}", cond, "t", score))
    return pd.DataFrame(
        rows, columns=["idea_id", "review_id", "reviewer_id", "condition", "topic", "overall"]
    )


def test_the_random_baseline_does_not_line_up_with_ids_that_sort_by_condition():
    # 16 ideas, A01-A08 before H01-H08, the H ideas scored 3 points higher: a ranking that
    # follows the id order correlates strongly with the reviewers. A chance baseline must
    # not: its mean is about 0 and its range about symmetric.
    df = _study(8, shift=3.0)
    options = ReportOptions(agreement_splits=20, agreement_bootstrap=20, agreement_permutations=20)
    judges, status = computed_baselines(
        df, metric="overall", lengths=None, reasons={}, seed=options.seed
    )
    out = build_agreement(
        df,
        metrics=["overall"],
        judges=judges,
        human_pairs=None,
        consistency={},
        options=options,
        baselines=status,
    )
    table = next(t for t in out["tables"] if t["id"] == "correlation")
    cell = next(r for r in table["rows"] if r["key"] == "baseline_random")["cells"]["overall"]
    assert abs(cell["value"]) < 0.1
    low, high = cell["range_low"], cell["range_high"]
    assert low < cell["value"] < high
    assert abs(low + high) < 0.1 and 0.35 < high < 0.65
    # a description of chance, not a judge's estimate
    assert cell["ci_low"] is None and cell["ci_high"] is None
    assert "p =" not in cell["how"] and "random rankings between" in cell["how"]
    # nowhere compared as if it were a judge
    assert not any(j["key"] == "baseline_random" for j in out["judges"])
    for t in out["tables"]:
        if t["id"] != "correlation":
            assert not any(r["key"] == "baseline_random" for r in t["rows"])


@pytest.mark.parametrize("n", [20, 40])
def test_the_chance_range_matches_the_known_null_distribution_of_spearman(n):
    # Under random rankings the Spearman rho with any fixed, non-constant scores has mean
    # 0 and variance exactly 1/(n-1) (the permutation moments of a Pearson correlation,
    # ties or not); for moderate n it is close to normal, so 95 % of random rankings lie
    # within about +-1.96/sqrt(n-1). Sampling error with 2,000 rankings: SD about
    # sd/sqrt(2*2000) (under 0.004), the 2.5 % quantile about 0.011 at n = 20, and the
    # normal approximation moves the exact quantile by under 0.01 (the exact two-sided 5 %
    # critical values without ties are 0.447 for n = 20 and 0.313 for n = 40, against 0.450
    # and 0.314):
    # tolerances 0.012 on the SD and 0.04 on the range.
    rng = np.random.default_rng(n)
    ideas = [f"i{i:02d}" for i in range(n)]
    rows = [
        (idea, f"{idea}-r{r}", f"rev{r}", "C", "t", float(rng.integers(1, 11)))
        for idea in ideas
        for r in range(3)
    ]
    df = pd.DataFrame(
        rows, columns=["idea_id", "review_id", "reviewer_id", "condition", "topic", "overall"]
    )
    res = ag.chance_agreement(df, "overall", seed=SEED)
    assert res.reason is None and res.n_ideas == n and res.n_rankings == ag.CHANCE_RANKINGS
    sd = 1 / math.sqrt(n - 1)
    s = res.spearman
    assert abs(s["mean"]) < 3 * sd / math.sqrt(res.n_rankings)
    assert s["sd"] == pytest.approx(sd, abs=0.012)
    assert s["low"] == pytest.approx(-1.96 * sd, abs=0.04)
    assert s["high"] == pytest.approx(1.96 * sd, abs=0.04)
    # Kendall's tau-b: the null SD without ties is sqrt(2(2n+5) / (9n(n-1))); ties among
    # the human means shrink it a little, so it can only be at most that (plus noise).
    tau_sd = math.sqrt(2 * (2 * n + 5) / (9 * n * (n - 1)))
    k = res.kendall
    assert abs(k["mean"]) < 3 * tau_sd / math.sqrt(res.n_rankings)
    assert 0.85 * tau_sd < k["sd"] < tau_sd + 0.01


def test_the_chance_baseline_is_reproducible_from_the_seed_and_says_why_it_cannot_run():
    df = _study(5, shift=1.0)
    first = ag.chance_agreement(df, "overall", seed=SEED).as_dict()
    assert ag.chance_agreement(df, "overall", seed=SEED).as_dict() == first
    assert ag.chance_agreement(df, "overall", seed=SEED + 1).as_dict() != first
    flat = df.assign(overall=4.0)
    res = ag.chance_agreement(flat, "overall")
    assert res.spearman == {} and "same" in (res.reason or "")
    few = df[df["idea_id"].isin(["A01", "A02"])]
    assert "at least 3" in (ag.chance_agreement(few, "overall").reason or "")


def _chance_cell(out: dict) -> dict:
    table = next(t for t in out["tables"] if t["id"] == "correlation")
    return next(r for r in table["rows"] if r["key"] == "baseline_random")["cells"]["overall"]


def test_a_chance_sentence_and_its_table_cell_print_the_same_digits(monkeypatch):
    # Values exactly halfway at the third decimal (exact in binary, so Python's own
    # formatting rounds them to even: 0.062, -0.312, 0.562). The table cell and the
    # sentence that is its footnote must both round half away from zero.
    from studies.templatetags.report_format import cell as cell_filter

    df = _study(8, shift=3.0)
    figures = {"mean": 0.0625, "sd": 0.25, "low": -0.3125, "high": 0.5625}

    def chance(frame, metric, *, seed, n_rankings=2000, confidence=0.95):
        return ag.ChanceAgreement(
            metric=metric, n_ideas=16, n_rankings=n_rankings, seed=seed,
            confidence=confidence, spearman=figures, kendall=figures,
        )  # fmt: skip

    monkeypatch.setattr(ag, "chance_agreement", chance)
    options = ReportOptions(agreement_splits=20, agreement_bootstrap=20, agreement_permutations=20)
    out = build_agreement(
        df, metrics=["overall"], judges=[], human_pairs=None, consistency={}, options=options
    )
    cell = _chance_cell(out)
    assert cell_filter(cell) == "0.063 (95 % range \u22120.313 to 0.563)"
    assert "per idea 0.063, 95% of random rankings between \u22120.313 and 0.563" in cell["how"]
    assert "τ-b mean 0.063, 95% between \u22120.313 and 0.563" in cell["how"]


def test_the_count_of_chance_rankings_is_a_report_option_the_report_states():
    df = _study(8, shift=3.0)
    draws = {"agreement_splits": 20, "agreement_bootstrap": 20, "agreement_permutations": 20}

    def agreement(options: ReportOptions) -> dict:
        judges, status = computed_baselines(
            df, metric="overall", lengths=None, reasons={}, seed=options.seed,
            chance_rankings=options.chance_rankings,
        )  # fmt: skip
        return build_agreement(
            df, metrics=["overall"], judges=judges, human_pairs=None, consistency={},
            options=options, baselines=status,
        )  # fmt: skip

    default = agreement(ReportOptions(**draws))
    few = agreement(ReportOptions(**draws, chance_rankings=300))
    assert default["options"]["chance_rankings"] == ag.CHANCE_RANKINGS == 2000
    assert few["options"]["chance_rankings"] == 300
    assert few["chance"]["overall"]["n_rankings"] == 300
    assert "over 300 independent uniformly random rankings" in _chance_cell(few)["how"]
    assert "over 2,000 independent" in _chance_cell(default)["how"]
    assert "from 300 independent" in few["baselines"]["baseline_random"]["how"]
    # the range is the one 300 rankings give, not the 2,000 rankings' range
    expected = ag.chance_agreement(df, "overall", n_rankings=300, seed=SEED).spearman
    cell, before = _chance_cell(few), _chance_cell(default)
    assert (cell["range_low"], cell["range_high"]) == (expected["low"], expected["high"])
    assert (cell["range_low"], cell["range_high"]) != (before["range_low"], before["range_high"])


@pytest.mark.parametrize("bad", [0, 199, 20_001, 2.5, "2000", True])
def test_a_count_of_chance_rankings_out_of_bounds_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=r"chance_rankings: must be a whole number from 200"):
        ReportOptions(chance_rankings=bad)
