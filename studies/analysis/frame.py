"""The review frame: the one table every analysis function reads.

One row per (review, condition). An idea can sit in two conditions (in Si et al. 17-18 ideas
were in both AI and AI_Rerank), so one review can appear on two rows that share a
`review_id`. Per-condition statistics use every row; anything that pools conditions
(correlations, reliability, consistency) must say whether it counts those copies once
(`unique_reviews`) or once per condition.

Pure pandas: no Django imports, so the same functions serve the web report, the command
line and the tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

#: Identifier columns every frame must carry (reviewer_id may be all None).
ID_COLUMNS: tuple[str, ...] = (
    "row_id",
    "review_id",
    "idea_id",
    "condition",
    "topic",
    "reviewer_id",
)
#: Per-review descriptors of the review itself; floats with NaN allowed.
QUALITY_COLUMNS: tuple[str, ...] = ("familiarity", "confidence", "minutes", "rationale_words")
#: Reviews that failed consent or the no-AI honor code; kept, but reportable.
Progress = Callable[[int, int, str], None]
"""A long computation's progress callback: steps done, steps in all, what it is doing."""

FLAG_COLUMN = "flagged"
#: Every column of the contract other than the metric columns.
REQUIRED_COLUMNS: tuple[str, ...] = (*ID_COLUMNS, *QUALITY_COLUMNS, FLAG_COLUMN)
#: The metric columns of the Si et al. review form, in the paper's table order.
SI2024_METRICS: tuple[str, ...] = (
    "novelty",
    "excitement",
    "feasibility",
    "effectiveness",
    "overall",
)
#: The baseline condition of the Si et al. study.
SI2024_BASELINE = "Human"

# Columns that are numeric but are never scores to analyse.
_NON_METRIC: frozenset[str] = frozenset((*REQUIRED_COLUMNS, "source_idea_id"))


def validate_frame(
    df: pd.DataFrame,
    metrics: Iterable[str],
    *,
    require: Sequence[str] = REQUIRED_COLUMNS,
) -> None:
    """Raise ValueError naming every missing or non-numeric column.

    Checked up front so a malformed import fails with one clear message instead of a
    KeyError deep inside a test statistic.
    """
    metrics = list(metrics)
    if not metrics:
        raise ValueError("no metric columns given: pass at least one metric name")
    require_columns(df, (*require, *metrics))
    not_numeric = [m for m in metrics if not pd.api.types.is_numeric_dtype(df[m])]
    if not_numeric:
        raise ValueError(f"metric column(s) {not_numeric} must be numeric (float, NaN allowed)")


def require_columns(df: pd.DataFrame, columns: Iterable[str]) -> None:
    """Raise ValueError listing the columns of `columns` that `df` lacks."""
    missing = [c for c in dict.fromkeys(columns) if c not in df.columns]
    if missing:
        raise ValueError(
            f"the review frame is missing required column(s) {missing}; it has {list(df.columns)}"
        )


def unique_reviews(df: pd.DataFrame) -> pd.DataFrame:
    """One row per review: drop the per-condition copies, keeping the first row."""
    return df.drop_duplicates(subset="review_id", keep="first")


def metric_columns(df: pd.DataFrame) -> list[str]:
    """The numeric columns of `df` that are not part of the fixed contract, in frame order."""
    return [c for c in df.columns if c not in _NON_METRIC and pd.api.types.is_numeric_dtype(df[c])]


def has_reviewer_ids(df: pd.DataFrame) -> bool:
    """True when at least one row names its reviewer."""
    return "reviewer_id" in df.columns and bool(df["reviewer_id"].notna().any())


def ordered_conditions(
    df: pd.DataFrame, conditions: Sequence[str] | None, *, baseline: str | None = None
) -> list[str]:
    """The conditions to report, baseline first, then the others in a stable order.

    Raises ValueError for a requested condition (or baseline) that has no rows, because a
    typo would otherwise silently yield an empty comparison.
    """
    present = [c for c in pd.unique(df["condition"]) if not pd.isna(c)]
    if conditions is None:
        chosen = sorted(present, key=str)
    else:
        chosen = list(dict.fromkeys(conditions))
        absent = [c for c in chosen if c not in present]
        if absent:
            raise ValueError(f"condition(s) {absent} have no rows; present: {sorted(present)}")
    if baseline is not None:
        if baseline not in present:
            raise ValueError(f"baseline {baseline!r} has no rows; present: {sorted(present)}")
        chosen = [baseline, *[c for c in chosen if c != baseline]]
    return chosen


def json_float(x: Any) -> float | None:
    """A plain float for JSON: numpy scalars become floats, NaN and inf become None."""
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def json_int(x: Any) -> int:
    return int(np.asarray(x).item())


def plain_value(v: Any) -> Any:
    """A numpy or pandas scalar as the plain Python value JSON takes."""
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if v is pd.NA or v is pd.NaT:
        return None
    return v
