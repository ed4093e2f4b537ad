"""Descriptive tables: score summaries, metric correlations, per-topic means, review effort
and the shape of the reviewer assignment.

Every table counts rows (review × condition) unless it pools conditions; pooled tables say
which rows they used, because the copies of a review that sits in two conditions would
otherwise count twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from .frame import (
    QUALITY_COLUMNS,
    has_reviewer_ids,
    json_float,
    ordered_conditions,
    require_columns,
    unique_reviews,
    validate_frame,
)

ALL_CONDITIONS = "(all)"
_ID_REQUIRED = ("review_id", "idea_id", "condition", "topic")


def summarize(
    df: pd.DataFrame,
    metrics: Sequence[str],
    conditions: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Per metric × condition: n, mean, sd (ddof=1), sd_pop (ddof=0), median, se, min, max.

    Both SDs are given because the released Si et al. scripts print `np.std` (ddof=0),
    while the sample SD (ddof=1) is what a reader expects; the report must say which.
    Columns: metric, condition, n, mean, sd, sd_pop, median, se, min, max.
    """
    validate_frame(df, metrics, require=_ID_REQUIRED)
    conds = ordered_conditions(df, conditions)
    rows = []
    for metric in metrics:
        for cond in conds:
            x = df.loc[df["condition"] == cond, metric].dropna().to_numpy(float)
            rows.append({"metric": metric, "condition": cond, **_moments(x)})
    return pd.DataFrame(rows)


def _moments(x: np.ndarray) -> dict[str, Any]:
    n = len(x)
    sd = float(np.std(x, ddof=1)) if n > 1 else np.nan
    return {
        "n": n,
        "mean": float(np.mean(x)) if n else np.nan,
        "sd": sd,
        "sd_pop": float(np.std(x, ddof=0)) if n else np.nan,
        "median": float(np.median(x)) if n else np.nan,
        "se": sd / np.sqrt(n) if n > 1 else np.nan,
        "min": float(np.min(x)) if n else np.nan,
        "max": float(np.max(x)) if n else np.nan,
    }


def correlations(
    df: pd.DataFrame,
    metrics: Sequence[str],
    method: Literal["pearson", "spearman", "kendall"] = "pearson",
    *,
    rows: Literal["all", "unique"] = "all",
) -> pd.DataFrame:
    """Metric × metric correlation matrix over pairwise-complete rows.

    `rows="all"` uses every review × condition row (what the released scripts do: 337 rows
    on si2024); `rows="unique"` counts each review once, which is the honest N for a
    pooled statistic.
    """
    validate_frame(df, metrics, require=("review_id",))
    data = unique_reviews(df) if rows == "unique" else df
    return data[list(metrics)].corr(method=method)


def per_topic(
    df: pd.DataFrame,
    metrics: Sequence[str],
    conditions: Sequence[str] | None = None,
    *,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Per topic × condition × metric: n, mean, sd and a t-based CI of the mean (rows).

    Per-topic cells hold only a handful of ideas (4-11 per condition in Si et al.), so the
    interval uses Student's t with n-1 df rather than a normal approximation; cells with
    n < 2 get no interval. Columns: topic, condition, metric, n, mean, sd, ci_low, ci_high.
    """
    validate_frame(df, metrics, require=_ID_REQUIRED)
    conds = ordered_conditions(df, conditions)
    sub = df[df["condition"].isin(conds)]
    out = []
    for (topic, cond), grp in sub.groupby(["topic", "condition"], sort=True):
        for metric in metrics:
            x = grp[metric].dropna().to_numpy(float)
            n = len(x)
            mean = float(x.mean()) if n else np.nan
            sd = float(x.std(ddof=1)) if n > 1 else np.nan
            if n > 1:
                half = stats.t.ppf(0.5 + confidence / 2, n - 1) * sd / np.sqrt(n)
                lo, hi = mean - half, mean + half
            else:
                lo = hi = np.nan
            out.append(
                {
                    "topic": topic,
                    "condition": cond,
                    "metric": metric,
                    "n": n,
                    "mean": mean,
                    "sd": sd,
                    "ci_low": lo,
                    "ci_high": hi,
                }
            )
    res = pd.DataFrame(out)
    if res.empty:
        return res
    order = {c: i for i, c in enumerate(conds)}
    mord = {m: i for i, m in enumerate(metrics)}
    return (
        res.assign(_c=res["condition"].map(order), _m=res["metric"].map(mord))
        .sort_values(["topic", "_c", "_m"], kind="stable")
        .drop(columns=["_c", "_m"])
        .reset_index(drop=True)
    )


def review_quality(df: pd.DataFrame, variables: Sequence[str] = QUALITY_COLUMNS) -> pd.DataFrame:
    """Review effort per condition and overall: n, missing, mean, median, sd (ddof=1).

    The per-condition rows count every review × condition row (the copy of a review in a
    second condition belongs to that condition too); the `(all)` row counts each review
    once, so it is not the sum of the others.
    Columns: variable, condition, n, missing, mean, median, sd.
    """
    require_columns(df, ("review_id", "condition", *variables))
    groups = [(str(c), g) for c, g in df.groupby("condition", sort=True)]
    groups.append((ALL_CONDITIONS, unique_reviews(df)))
    out = []
    for var in variables:
        for cond, grp in groups:
            col = pd.to_numeric(grp[var], errors="coerce")
            x = col.dropna().to_numpy(float)
            n = len(x)
            out.append(
                {
                    "variable": var,
                    "condition": cond,
                    "n": n,
                    "missing": int(col.isna().sum()),
                    "mean": float(x.mean()) if n else np.nan,
                    "median": float(np.median(x)) if n else np.nan,
                    "sd": float(x.std(ddof=1)) if n > 1 else np.nan,
                }
            )
    return pd.DataFrame(out)


def _count_stats(counts: pd.Series) -> dict[str, Any]:
    x = counts.to_numpy(float)
    n = len(x)
    return {
        "n": n,
        "mean": json_float(x.mean()) if n else None,
        "sd": json_float(x.std(ddof=1)) if n > 1 else None,
        "median": json_float(np.median(x)) if n else None,
        "min": json_float(x.min()) if n else None,
        "max": json_float(x.max()) if n else None,
    }


@dataclass(frozen=True)
class AssignmentShape:
    """The shape of an assignment (`assignment_table`). Each "stats" is {n, mean, sd,
    median, min, max}.

    Attributes
    ----------
    n_rows, n_reviews, n_ideas, n_conditions, n_topics
        Rows (review x condition), unique reviews, ideas, conditions and topics.
    reviews_per_idea
        Stats of unique reviews per idea_id.
    reviews_per_idea_by_condition
        Condition → stats of rows per idea in it.
    reviewers
        {available, reason, n_reviewers, rows_without_reviewer, reviews_per_reviewer,
        conditions_per_reviewer, topics_per_reviewer}; without reviewer ids available is
        False, reason says why and the per-reviewer stats are None.
    """

    n_rows: int
    n_reviews: int
    n_ideas: int
    n_conditions: int
    n_topics: int
    reviews_per_idea: dict[str, Any]
    reviews_per_idea_by_condition: dict[str, dict[str, Any]]
    reviewers: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report's "assignment" section: the fields in order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def assignment_table(df: pd.DataFrame) -> AssignmentShape:
    """The shape of the assignment: counts, reviews per idea, and per reviewer when the
    data has reviewer ids. When no row has one the reviewer block says so instead of
    guessing: the per-reviewer stats are None.

    Parameters
    ----------
    df
        The review frame (idea_id, review_id, condition, topic; reviewer_id if known).

    Returns
    -------
    AssignmentShape
        The counts and their stats; ``as_dict()`` is the report's "assignment" section.
    """
    require_columns(df, _ID_REQUIRED)
    uniq = unique_reviews(df)
    reviewers: dict[str, Any] = {
        "available": False,
        "reason": None,
        "n_reviewers": None,
        "rows_without_reviewer": int(df["reviewer_id"].isna().sum())
        if "reviewer_id" in df
        else len(df),
        "reviews_per_reviewer": None,
        "conditions_per_reviewer": None,
        "topics_per_reviewer": None,
    }
    if not has_reviewer_ids(df):
        reviewers["reason"] = (
            "the data has no reviewer ids (e.g. names removed before release), so reviews "
            "per reviewer, conditions per reviewer and topics per reviewer cannot be computed"
        )
    else:
        known = df[df["reviewer_id"].notna()]
        by = known.groupby("reviewer_id")
        reviewers.update(
            available=True,
            n_reviewers=int(known["reviewer_id"].nunique()),
            reviews_per_reviewer=_count_stats(by["review_id"].nunique()),
            conditions_per_reviewer=_count_stats(by["condition"].nunique()),
            topics_per_reviewer=_count_stats(by["topic"].nunique()),
        )
    return AssignmentShape(
        n_rows=len(df),
        n_reviews=len(uniq),
        n_ideas=int(df["idea_id"].nunique()),
        n_conditions=int(df["condition"].nunique()),
        n_topics=int(df["topic"].nunique()),
        reviews_per_idea=_count_stats(uniq.groupby("idea_id").size()),
        reviews_per_idea_by_condition={
            str(c): _count_stats(g.groupby("idea_id").size())
            for c, g in df.groupby("condition", sort=True)
        },
        reviewers=reviewers,
    )
