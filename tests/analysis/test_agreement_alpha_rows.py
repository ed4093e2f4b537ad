"""Krippendorff's alpha rows of the agreement section: a judge is a rater only on the
metrics it scored per idea."""

from __future__ import annotations

import numpy as np
import pandas as pd

from studies.analysis import agreement as ag
from studies.analysis.agreement_report import JudgeData, build_agreement
from studies.analysis.options import ReportOptions

METRICS = ["novelty", "overall"]


def _frame(n_ideas: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    quality = rng.normal(5, 1.5, n_ideas)
    rows = [
        (f"i{i:02d}", f"i{i:02d}-r{r}", f"rev{r}", "AB"[i % 2], "t")
        + tuple(float(np.clip(np.round(q + rng.normal(0, 1)), 1, 10)) for _ in METRICS)
        for i, q in enumerate(quality)
        for r in range(3)
    ]
    return pd.DataFrame(
        rows, columns=["idea_id", "review_id", "reviewer_id", "condition", "topic", *METRICS]
    )


def _pairs(ideas: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"idea_a": a, "idea_b": b, "first_shown": first, "verdict": "A", "dimension": "overall"}
            for a, b in zip(ideas[::2], ideas[1::2], strict=True)
            for first in (a, b)
        ]
    )


def test_alpha_rows_only_for_a_judge_with_per_idea_scores_on_the_metric():
    df = _frame(16)
    ideas = sorted(df["idea_id"].unique())
    means = df.groupby("idea_id")[METRICS].mean()
    direct = means.stack().rename("score").reset_index()
    direct.columns = ["idea_id", "metric", "score"]
    # A pairwise run: its verdicts, and a per-idea rating on the one dimension it
    # compared, for a single idea only (too few to be a rater anywhere).
    pairwise_scores = pd.DataFrame({"idea_id": [ideas[0]], "metric": "overall", "score": [3.0]})
    judges = [
        JudgeData(key="run1", label="direct (run 1)", method="direct", baseline=False,
                  judge_scores=direct),
        JudgeData(key="run2", label="pairwise (run 2)", method="pairwise", baseline=False,
                  judge_scores=pairwise_scores, judge_pairs=_pairs(ideas)),
    ]  # fmt: skip
    out = build_agreement(
        df,
        metrics=METRICS,
        judges=judges,
        human_pairs=None,
        consistency={},
        options=ReportOptions(
            agreement_splits=10, agreement_bootstrap=10, agreement_permutations=10
        ),
    )
    table = next(t for t in out["tables"] if t["id"] == "krippendorff")
    rows = {r["key"]: r for r in table["rows"]}
    assert set(rows) == {"ceiling", "run1"}
    assert set(rows["run1"]["cells"]) == set(METRICS)
    assert "ranking-only" in table["caption"]
    for m in METRICS:
        block = out["krippendorff"][m]
        assert set(block["judges"]) == {"run1"}
        assert "only 1" in block["left_out"]["run2"] or "none" in block["left_out"]["run2"]
        # the direct judge is the human mean: one more rater in full agreement adds values
        assert block["judges"]["run1"]["n_values"] == block["humans"]["n_values"] + 16


def test_a_judge_scoring_one_metric_is_a_rater_on_that_metric_only():
    df = _frame(12, seed=1)
    means = df.groupby("idea_id")["overall"].mean()
    ratings = pd.DataFrame({"idea_id": means.index, "metric": "overall", "score": means.values})
    for m in METRICS:
        res = ag.krippendorff_with_judges(df, {"pairwise": ratings}, m)
        if m == "overall":
            assert set(res.judges) == {"pairwise"} and res.left_out == {}
            assert res.judges["pairwise"]["n_judged_ideas"] == 12
        else:
            assert res.judges == {} and "none" in res.left_out["pairwise"]
    # at the minimum it is a rater, one idea short it is not
    few = ratings.iloc[: ag.MIN_IDEAS]
    assert "pairwise" in ag.krippendorff_with_judges(df, {"pairwise": few}, "overall").judges
    fewer = ratings.iloc[: ag.MIN_IDEAS - 1]
    res = ag.krippendorff_with_judges(df, {"pairwise": fewer}, "overall")
    assert res.judges == {} and f"only {ag.MIN_IDEAS - 1}" in res.left_out["pairwise"]
