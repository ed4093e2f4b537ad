"""Linked study phases: the same ideas reviewed at two stages, and how their scores moved.

The design follows the execution study of Si, Hashimoto and Yang ("The Ideation–Execution
Gap: Execution Outcomes of LLM-Generated versus Human Research Ideas"): ideas reviewed as
proposals in one study are carried out and reviewed again in a second, and the question is
whether the scores of one condition fell more than another's. docs/phases.md has the design
and every formula; this module is the arithmetic.

Inputs are two review frames (one row per review × condition, as ``selectors.review_frame``
builds them and :mod:`frame` describes), the scales of each phase's form, the baseline,
and the later study's :class:`~studies.analysis.plan.AnalysisPlan` for sidedness and the
multiple-testing method. Ideas are matched by their per-condition external id
(``source_idea_id`` when both frames carry it, else ``idea_id``); an id must name one
condition in each phase, and a condition that changed between the phases is refused unless
the caller asks for such ideas to be left out.

:func:`compare_phases` returns a :class:`PhaseComparison`: the match, per idea and metric
the mean in each phase and the change, per condition the mean change, Welch tests of the
change against the baseline condition (corrected over the metrics), a mixed model of the
score on condition × phase with idea and reviewer random intercepts, Pearson and Spearman
correlations of the per-idea means between the phases with intervals, top-k overlap and the
largest rank moves. :meth:`PhaseComparison.to_dict` is the JSON section and
:func:`phase_tables` the tidy CSV tables; the slope chart is in :mod:`phase_plots`.

Pure module: no Django imports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import special, stats

from . import hypothesis as hyp
from .frame import json_float, validate_frame
from .mixed import MixedResult, fit_mixed
from .plan import CORRECTIONS, AnalysisPlan, adjust, sided_p
from .rounding import counted

__all__ = [
    "PHASE_TEST",
    "ChangeTest",
    "ConditionChange",
    "PhaseComparison",
    "PhaseCorrelation",
    "PhaseMatch",
    "PhaseModelFit",
    "RankMove",
    "SharedMetrics",
    "TopOverlap",
    "compare_phases",
    "match_phases",
    "phase_tables",
    "shared_metrics",
]

#: The test name a plan's hypotheses are matched against (a hypothesis with ``test: "*"``
#: applies to the phase comparison as to every other test).
PHASE_TEST = "phases"
SPEARMAN_CI_METHOD = "Fisher z with the Bonett-Wright variance (1 + rho^2/2) / (n - 3)"
PEARSON_CI_METHOD = "Fisher z, variance 1 / (n - 3)"


# ------------------------------------------------------------------ shared metrics


@dataclass(frozen=True)
class SharedMetrics:
    """The metrics two phases' forms share, and why the others are not compared.

    Attributes
    ----------
    metrics:
        Metrics in both forms on the same scale, in the first form's order.
    scales:
        ``metric -> (minimum, maximum)`` of each shared metric.
    mismatched:
        ``metric -> (first scale, second scale)`` for metrics in both forms whose scales
        differ (a 1-5 score and a 1-10 score are not the same measurement).
    only_first, only_second:
        Metrics in one form only.
    """

    metrics: tuple[str, ...]
    scales: dict[str, tuple[int, int]]
    mismatched: dict[str, tuple[tuple[int, int], tuple[int, int]]]
    only_first: tuple[str, ...]
    only_second: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "metrics": list(self.metrics),
            "scales": {m: list(s) for m, s in self.scales.items()},
            "mismatched": {m: [list(a), list(b)] for m, (a, b) in self.mismatched.items()},
            "only_first": list(self.only_first),
            "only_second": list(self.only_second),
        }


def _scale(value: Sequence[Any], metric: str, which: str) -> tuple[int, int]:
    try:
        lo, hi = (int(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(
            f"the {which} phase's scale of {metric!r} must be (minimum, maximum), got {value!r}"
        ) from None
    if lo >= hi:
        raise ValueError(
            f"the {which} phase's scale of {metric!r} has minimum {lo} >= maximum {hi}"
        )
    return lo, hi


def shared_metrics(
    scales_first: Mapping[str, Sequence[Any]], scales_second: Mapping[str, Sequence[Any]]
) -> SharedMetrics:
    """Which metrics two phases can be compared on.

    Parameters
    ----------
    scales_first, scales_second:
        Each phase's form as ``metric -> (minimum, maximum)`` (``FormDefinition.scales()``).

    Returns
    -------
    SharedMetrics
        The metrics both forms have on equal scales, and the ones left aside with why.
    """
    first = {m: _scale(s, m, "first") for m, s in scales_first.items()}
    second = {m: _scale(s, m, "second") for m, s in scales_second.items()}
    both = [m for m in first if m in second]
    return SharedMetrics(
        metrics=tuple(m for m in both if first[m] == second[m]),
        scales={m: first[m] for m in both if first[m] == second[m]},
        mismatched={m: (first[m], second[m]) for m in both if first[m] != second[m]},
        only_first=tuple(m for m in first if m not in second),
        only_second=tuple(m for m in second if m not in first),
    )


def _chosen_metrics(requested: Sequence[str] | None, shared: SharedMetrics) -> list[str]:
    if requested is None:
        if not shared.metrics:
            raise ValueError(
                "the two phases share no metric on the same scale "
                f"(first only: {list(shared.only_first)}, second only: "
                f"{list(shared.only_second)}, different scales: {sorted(shared.mismatched)})"
            )
        return list(shared.metrics)
    problems = []
    for m in requested:
        if m in shared.mismatched:
            (a, b), (c, d) = shared.mismatched[m]
            problems.append(f"{m!r} is on {a}-{b} in the first phase and {c}-{d} in the second")
        elif m in shared.only_first:
            problems.append(f"{m!r} is not a metric of the second phase's form")
        elif m in shared.only_second:
            problems.append(f"{m!r} is not a metric of the first phase's form")
        elif m not in shared.metrics:
            problems.append(f"{m!r} is a metric of neither phase's form")
    if problems:
        raise ValueError(
            "cannot compare the phases on: "
            + "; ".join(problems)
            + f" (shared metrics: {', '.join(shared.metrics) or 'none'})"
        )
    if not requested:
        raise ValueError("no metric to compare: pass at least one shared metric")
    return list(dict.fromkeys(requested))


# ------------------------------------------------------------------ matching


@dataclass(frozen=True)
class PhaseMatch:
    """How the ideas of two phases pair up.

    Attributes
    ----------
    id_column:
        The frame column the ideas were matched on.
    compared:
        Ids in both phases under the same condition, not left out and in an analysed
        condition: the ideas every statistic uses (sorted).
    conditions:
        ``id -> condition`` of each compared idea.
    only_first, only_second:
        Ids present in one phase only.
    disagree:
        ``(id, first condition, second condition)`` for ids in both phases whose
        condition differs; they are never compared.
    left_out:
        Ids the caller asked to leave out that are in both phases.
    left_out_absent:
        Ids asked to be left out that are not in both phases (nothing was left out for
        them; often a misspelt id).
    outside_conditions:
        Ids in both phases whose condition is not among the analysed conditions.
    """

    id_column: str
    compared: tuple[str, ...]
    conditions: dict[str, str]
    only_first: tuple[str, ...]
    only_second: tuple[str, ...]
    disagree: tuple[tuple[str, str, str], ...]
    left_out: tuple[str, ...]
    left_out_absent: tuple[str, ...]
    outside_conditions: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "id_column": self.id_column,
            "compared": list(self.compared),
            "n_compared": len(self.compared),
            "conditions": dict(self.conditions),
            "only_first": list(self.only_first),
            "only_second": list(self.only_second),
            "disagree": [
                {"idea": i, "condition_first": a, "condition_second": b}
                for i, a, b in self.disagree
            ],
            "left_out": list(self.left_out),
            "left_out_absent": list(self.left_out_absent),
            "outside_conditions": list(self.outside_conditions),
        }


def _default_id_column(first: pd.DataFrame, second: pd.DataFrame) -> str:
    """The per-condition external id when both frames have it for every row: an idea in two
    conditions of the first phase then matches the one it was carried out as."""
    col = "source_idea_id"
    if all(col in df.columns and df[col].notna().all() for df in (first, second)):
        return col
    return "idea_id"


def _idea_conditions(df: pd.DataFrame, id_column: str, label: str) -> dict[str, str]:
    """``id -> condition`` of one phase, refusing an id under two conditions."""
    if df[id_column].isna().any():
        raise ValueError(
            f"the {label} phase has {int(df[id_column].isna().sum())} rows without "
            f"{id_column}; every review row must name its idea"
        )
    pairs = df[[id_column, "condition"]].astype(str).drop_duplicates()
    counts = pairs.groupby(id_column)["condition"].agg(lambda s: sorted(s))
    several = counts[counts.map(len) > 1]
    if len(several):
        shown = "; ".join(f"{i!r}: {', '.join(c)}" for i, c in list(several.items())[:5])
        raise ValueError(
            f"the {label} phase names {len(several)} idea id(s) under several conditions "
            f"({shown}); match on per-condition ids (source_idea_id) so that each id has one "
            "condition"
        )
    return {str(i): c[0] for i, c in counts.items()}


def match_phases(
    first: pd.DataFrame,
    second: pd.DataFrame,
    *,
    id_column: str | None = None,
    leave_out: Sequence[str] = (),
    conditions: Sequence[str] | None = None,
    labels: tuple[str, str] = ("first", "second"),
) -> PhaseMatch:
    """Pair the ideas of two review frames by external id.

    Parameters
    ----------
    first, second:
        The review frames of the earlier and the later phase.
    id_column:
        The column to match on; default ``source_idea_id`` when both frames carry it for
        every row, else ``idea_id``.
    leave_out:
        Ids to keep out of the comparison (e.g. ideas whose execution departed from plan).
    conditions:
        The conditions to analyse; default all conditions of the matched ideas.
    labels:
        The phases' names, used in messages.

    Returns
    -------
    PhaseMatch
        Which ids are compared, which sit in one phase only, whose condition disagrees,
        and which were left out.
    """
    col = id_column or _default_id_column(first, second)
    for df, label in ((first, labels[0]), (second, labels[1])):
        if col not in df.columns or "condition" not in df.columns:
            raise ValueError(f"the {label} phase's frame needs the columns {col!r} and 'condition'")
    a = _idea_conditions(first, col, labels[0])
    b = _idea_conditions(second, col, labels[1])
    both = sorted(set(a) & set(b))
    disagree = tuple((i, a[i], b[i]) for i in both if a[i] != b[i])
    asked = list(dict.fromkeys(str(i) for i in leave_out))
    left_out = tuple(i for i in asked if i in a and i in b)
    agree = [i for i in both if a[i] == b[i] and i not in left_out]
    wanted = set(conditions) if conditions is not None else None
    outside = tuple(i for i in agree if wanted is not None and a[i] not in wanted)
    compared = tuple(i for i in agree if i not in outside)
    return PhaseMatch(
        id_column=col,
        compared=compared,
        conditions={i: a[i] for i in compared},
        only_first=tuple(sorted(set(a) - set(b))),
        only_second=tuple(sorted(set(b) - set(a))),
        disagree=disagree,
        left_out=left_out,
        left_out_absent=tuple(i for i in asked if i not in left_out),
        outside_conditions=outside,
    )


# ------------------------------------------------------------------ result objects


@dataclass(frozen=True)
class ConditionChange:
    """The mean change of one condition on one metric (descriptive, no correction).

    ``mean_first`` and ``mean_second`` average the per-idea means of the ``n`` ideas with a
    mean in both phases, so ``mean_change = mean_second - mean_first``; ``sd`` (ddof 1),
    ``se``, ``t``, ``df`` (n - 1), two-sided ``p`` and the t interval are those of the
    one-sample t-test of the per-idea changes against 0.
    """

    metric: str
    condition: str
    n: int
    mean_first: float
    mean_second: float
    mean_change: float
    sd: float
    se: float
    t: float
    df: float
    p: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class ChangeTest:
    """Welch's test of one condition's per-idea changes against the baseline's.

    ``diff = mean - mean_baseline`` (the condition's mean change minus the baseline's);
    ``se``, ``t`` and ``df`` are Welch's; ``p`` is two-sided; ``p_unadjusted`` is the p of
    the planned ``alternative`` and ``p_adjusted`` its value after the plan's correction
    within ``family``; ``ci_low``/``ci_high`` the two-sided Welch interval of ``diff``.
    """

    metric: str
    condition: str
    baseline: str
    n: int
    mean: float
    sd: float
    n_baseline: int
    mean_baseline: float
    sd_baseline: float
    diff: float
    se: float
    t: float
    df: float
    p: float
    ci_low: float
    ci_high: float
    alternative: str = "two-sided"
    p_unadjusted: float = math.nan
    p_adjusted: float = math.nan
    family: str = ""
    reject: bool = False


@dataclass(frozen=True)
class PhaseModelFit:
    """The mixed model of one metric: ``score ~ condition * phase + (1|reviewer) + (1|idea)``.

    ``result`` is the fit in the report's shape (``None`` with ``error`` when it could not
    be fitted). ``interactions`` has one row per non-baseline condition: the
    ``condition[c]:phase[second]`` coefficient (its change minus the baseline's change,
    estimated on reviews), with the planned alternative, the p-value of that alternative
    (Satterthwaite t when the engine gave df, else the Wald z; ``p_method`` says which),
    and its adjusted value.
    """

    metric: str
    formula: str
    result: MixedResult | None
    error: str | None = None
    interactions: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(
            {
                "metric": self.metric,
                "formula": self.formula,
                "fit": self.result.to_dict() if self.result is not None else None,
                "error": self.error,
                "interactions": list(self.interactions),
            }
        )


@dataclass(frozen=True)
class PhaseCorrelation:
    """Pearson and Spearman correlation of per-idea means between the phases.

    ``subset`` is ``"all"`` or a condition. p-values are two-sided t-tests of zero
    correlation on n - 2 df. Intervals: Pearson by Fisher z with variance 1/(n - 3);
    Spearman by Fisher z with the Bonett-Wright variance (1 + rho^2/2)/(n - 3). Values
    that need more ideas than there are (n < 3 for r, n < 4 for an interval) are NaN.
    """

    metric: str
    subset: str
    n: int
    pearson_r: float
    pearson_p: float
    pearson_ci_low: float
    pearson_ci_high: float
    spearman_rho: float
    spearman_p: float
    spearman_ci_low: float
    spearman_ci_high: float


@dataclass(frozen=True)
class TopOverlap:
    """How many of one phase's top ideas on a metric are among the other's.

    The top set of a phase holds the ideas whose rank (highest mean first, ties sharing
    the lowest rank) is at most ``k``, so ties at the cut are all in and a set can hold
    more than ``k`` ideas. ``expected_overlap = |first| |second| / n`` is the overlap two
    unrelated rankings give on average. ``mean_rank_*`` is each condition's mean rank
    (average ranks, 1 = best) over the ``n`` ideas ranked.
    """

    metric: str
    k: int
    n: int
    top_first: tuple[str, ...]
    top_second: tuple[str, ...]
    overlap: int
    jaccard: float
    expected_overlap: float
    top_first_by_condition: dict[str, int]
    top_second_by_condition: dict[str, int]
    mean_rank_first: dict[str, float]
    mean_rank_second: dict[str, float]


@dataclass(frozen=True)
class RankMove:
    """One idea's rank in each phase (average ranks, 1 = best) and ``move = rank_first -
    rank_second`` (positive: it climbed)."""

    metric: str
    idea: str
    condition: str
    rank_first: float
    rank_second: float
    move: float
    mean_first: float
    mean_second: float


@dataclass(frozen=True)
class PhaseComparison:
    """Everything :func:`compare_phases` computes; see its docstring for each part."""

    labels: tuple[str, str]
    baseline: str
    conditions: tuple[str, ...]
    metrics: tuple[str, ...]
    shared: SharedMetrics
    match: PhaseMatch
    method: str
    alpha: float
    family_scope: str
    confidence: float
    ideas: pd.DataFrame
    changes: tuple[ConditionChange, ...]
    tests: tuple[ChangeTest, ...]
    models: dict[str, PhaseModelFit]
    correlations: tuple[PhaseCorrelation, ...]
    overlaps: tuple[TopOverlap, ...]
    moves: tuple[RankMove, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """The JSON section (docs/phases.md): plain numbers, NaN as ``None``."""
        return _jsonable(
            {
                "labels": list(self.labels),
                "baseline": self.baseline,
                "conditions": list(self.conditions),
                "metrics": list(self.metrics),
                "shared": self.shared.to_dict(),
                "match": self.match.to_dict(),
                "multiplicity": {
                    "method": self.method,
                    "method_label": CORRECTIONS[self.method],
                    "alpha": self.alpha,
                    "family_scope": self.family_scope,
                },
                "confidence": self.confidence,
                "ideas": _records(self.ideas),
                "changes": [vars(c) for c in self.changes],
                "tests": [vars(t) for t in self.tests],
                "mixed": {m: f.to_dict() for m, f in self.models.items()},
                "correlations": [vars(c) for c in self.correlations],
                "correlation_methods": {
                    "pearson_ci": PEARSON_CI_METHOD,
                    "spearman_ci": SPEARMAN_CI_METHOD,
                },
                "top_k": [_overlap_dict(o) for o in self.overlaps],
                "rank_moves": [vars(m) for m in self.moves],
                "notes": list(self.notes),
            }
        )


def _overlap_dict(o: TopOverlap) -> dict[str, Any]:
    d = dict(vars(o))
    d["top_first"], d["top_second"] = list(o.top_first), list(o.top_second)
    return d


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        return json_float(obj)
    return obj


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {str(k): _jsonable(v) for k, v in row.items()} for row in table.to_dict(orient="records")
    ]


# ------------------------------------------------------------------ per-idea means


IDEA_COLUMNS = (
    "idea", "condition", "metric", "n_first", "mean_first", "n_second", "mean_second",
    "change", "rank_first", "rank_second", "rank_move",
)  # fmt: skip


def _idea_table(
    first: pd.DataFrame, second: pd.DataFrame, match: PhaseMatch, metrics: Sequence[str]
) -> pd.DataFrame:
    """One row per compared idea × metric: review count and mean in each phase, the
    change, and each phase's rank among the ideas with a mean in both."""
    col, ids = match.id_column, list(match.compared)
    sides = []
    for df in (first, second):
        sub = df[df[col].astype(str).isin(ids)]
        grouped = sub.groupby(sub[col].astype(str))[list(metrics)]
        sides.append((grouped.count().reindex(ids), grouped.mean().reindex(ids)))
    rows = []
    for m in metrics:
        part = pd.DataFrame(
            {
                "idea": ids,
                "condition": [match.conditions[i] for i in ids],
                "metric": m,
                "n_first": sides[0][0][m].fillna(0).astype(int).to_numpy(),
                "mean_first": sides[0][1][m].to_numpy(float),
                "n_second": sides[1][0][m].fillna(0).astype(int).to_numpy(),
                "mean_second": sides[1][1][m].to_numpy(float),
            }
        )
        part["change"] = part["mean_second"] - part["mean_first"]
        both = part["change"].notna()
        # Highest mean first; tied ideas share the average of their ranks.
        part["rank_first"] = (-part["mean_first"].where(both)).rank(method="average")
        part["rank_second"] = (-part["mean_second"].where(both)).rank(method="average")
        part["rank_move"] = part["rank_first"] - part["rank_second"]
        rows.append(part)
    return pd.concat(rows, ignore_index=True)[list(IDEA_COLUMNS)]


def _condition_changes(
    ideas: pd.DataFrame, metrics: Sequence[str], conditions: Sequence[str], confidence: float
) -> list[ConditionChange]:
    out = []
    for m in metrics:
        for c in conditions:
            rows = ideas[(ideas["metric"] == m) & (ideas["condition"] == c)].dropna(
                subset=["change"]
            )
            one = hyp.one_sample(rows["change"].to_numpy(float), confidence=confidence)
            n = int(one.n)
            out.append(
                ConditionChange(
                    metric=m,
                    condition=c,
                    n=n,
                    mean_first=float(rows["mean_first"].mean()) if n else math.nan,
                    mean_second=float(rows["mean_second"].mean()) if n else math.nan,
                    mean_change=float(one.diff),
                    sd=float(one.sd),
                    se=float(one.se),
                    t=float(one.t),
                    df=float(one.df),
                    p=float(one.p),
                    ci_low=float(one.ci_low),
                    ci_high=float(one.ci_high),
                )
            )
    return out


# ------------------------------------------------------------------ change tests


def _family(kind: str, condition: str, baseline: str, scope: str) -> str:
    """Per-comparison plans correct each condition's comparison over the metrics; any other
    scope corrects all of this kind's comparisons together."""
    if scope == "per_comparison":
        return f"{kind}: {condition} vs {baseline}"
    return kind


def _correct(rows: list[dict[str, Any]], plan: AnalysisPlan) -> None:
    """Fill ``p_adjusted`` and ``reject`` of each row within its family, in place."""
    families: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        families.setdefault(row["family"], []).append(row)
    for group in families.values():
        adjusted = adjust([r["p_unadjusted"] for r in group], plan.method)
        for row, a in zip(group, adjusted, strict=True):
            row["p_adjusted"] = float(a)
            row["reject"] = bool(np.isfinite(a) and a <= plan.alpha)


def _planned_p(
    t: float, df: float | None, p_two: float, alternative: str, *, normal: bool
) -> float:
    if alternative == "two-sided":
        return p_two
    return sided_p(t=t, df=df, alternative=alternative, normal=normal)


def _change_tests(
    ideas: pd.DataFrame,
    metrics: Sequence[str],
    conditions: Sequence[str],
    plan: AnalysisPlan,
    confidence: float,
) -> list[ChangeTest]:
    baseline, others = conditions[0], conditions[1:]
    rows: list[dict[str, Any]] = []
    for m in metrics:
        sub = ideas[ideas["metric"] == m]
        y = sub.loc[sub["condition"] == baseline, "change"].dropna().to_numpy(float)
        for c in others:
            x = sub.loc[sub["condition"] == c, "change"].dropna().to_numpy(float)
            w = hyp.welch(x, y, confidence=confidence)
            alt = plan.alternative(test=PHASE_TEST, metric=m, condition=c, baseline=baseline)
            rows.append(
                {
                    "metric": m,
                    "condition": c,
                    "baseline": baseline,
                    **w.as_dict(),
                    "alternative": alt,
                    "p_unadjusted": _planned_p(w.t, w.df, w.p, alt, normal=False),
                    "family": _family("change (Welch)", c, baseline, plan.family_scope),
                }
            )
    _correct(rows, plan)
    return [ChangeTest(**r) for r in rows]


# ------------------------------------------------------------------ mixed model


def _reviewer_labels(
    parts: Sequence[tuple[pd.DataFrame, str]],
) -> tuple[list[pd.Series] | None, str | None]:
    """Reviewer labels per phase, prefixed by the phase (a reviewer id of one study says
    nothing about the other's), or None and the reason when some row lacks one."""
    missing = []
    for df, label in parts:
        if "reviewer_id" not in df.columns or df["reviewer_id"].isna().all():
            missing.append(f"the {label} phase has no reviewer ids")
        elif df["reviewer_id"].isna().any():
            missing.append(
                f"{int(df['reviewer_id'].isna().sum())} of {len(df)} rows of the {label} "
                "phase have no reviewer id"
            )
    if missing:
        return None, (
            "; ".join(missing) + ": the model has no reviewer random effect (idea effect only)"
        )
    return [label + ":" + df["reviewer_id"].astype(str) for df, label in parts], None


def _model_frame(
    first: pd.DataFrame,
    second: pd.DataFrame,
    match: PhaseMatch,
    metrics: Sequence[str],
    labels: tuple[str, str],
    conditions: Sequence[str],
) -> tuple[pd.DataFrame, list[str], str | None]:
    """Both phases' review rows of the compared ideas, stacked, with the phase and the
    condition × phase columns the model enters as fixed effects."""
    col = match.id_column
    parts = [
        (df[df[col].astype(str).isin(match.compared)], label)
        for df, label in ((first, labels[0]), (second, labels[1]))
    ]
    reviewers, reason = _reviewer_labels(parts)
    frames = []
    for k, (df, label) in enumerate(parts):
        ids = df[col].astype(str)
        frames.append(
            pd.DataFrame(
                {
                    "idea_id": ids.to_numpy(),
                    "condition": ids.map(match.conditions).to_numpy(),
                    "phase": label,
                    "reviewer_id": reviewers[k].to_numpy() if reviewers else None,
                    **{m: df[m].to_numpy(float) for m in metrics},
                }
            )
        )
    data = pd.concat(frames, ignore_index=True)
    later = (data["phase"] == labels[1]).astype(float)
    terms = {f"phase[{labels[1]}]": later}
    for c in conditions[1:]:
        terms[f"condition[{c}]:phase[{labels[1]}]"] = later * (data["condition"] == c)
    data = data.assign(**terms)
    return data, list(terms), reason


def _model_formula(baseline: str, labels: tuple[str, str], reviewers: bool) -> str:
    effects = "(1|reviewer) + (1|idea)" if reviewers else "(1|idea)"
    return (
        f"score ~ condition ({baseline} baseline) * phase ({labels[0]} baseline) + {effects}; "
        "REML; reviewers of the two phases are distinct levels"
    )


def _fit_models(
    data: pd.DataFrame,
    terms: list[str],
    reviewer_reason: str | None,
    *,
    metrics: Sequence[str],
    conditions: Sequence[str],
    labels: tuple[str, str],
    plan: AnalysisPlan,
    n_starts: int,
    seed: int,
) -> dict[str, PhaseModelFit]:
    baseline = conditions[0]
    formula = _model_formula(baseline, labels, reviewer_reason is None)
    fits: dict[str, PhaseModelFit] = {}
    rows: list[dict[str, Any]] = []
    for m in metrics:
        try:
            res = fit_mixed(
                data,
                m,
                baseline=baseline,
                groups=("reviewer_id", "idea_id"),
                covariates=terms,
                engine="sparse",
                n_starts=n_starts,
                seed=seed,
            )
        except ValueError as exc:
            fits[m] = PhaseModelFit(metric=m, formula=formula, result=None, error=str(exc))
            continue
        if reviewer_reason is not None:
            res.warnings.insert(0, reviewer_reason)
        mine = _interaction_rows(res, m, conditions, labels, plan)
        rows += mine
        fits[m] = PhaseModelFit(metric=m, formula=formula, result=res, interactions=tuple(mine))
    _correct(rows, plan)  # the rows are the fits' own dicts: corrected in place
    return fits


def _interaction_rows(
    res: MixedResult,
    metric: str,
    conditions: Sequence[str],
    labels: tuple[str, str],
    plan: AnalysisPlan,
) -> list[dict[str, Any]]:
    baseline = conditions[0]
    out = []
    for c in conditions[1:]:
        row = res.term(f"condition[{c}]:phase[{labels[1]}]")
        alt = plan.alternative(test=PHASE_TEST, metric=metric, condition=c, baseline=baseline)
        df = row.get("df")
        normal = df is None or not np.isfinite(df)
        p_two = row["p"] if normal else row["p_satterthwaite"]
        out.append(
            {
                "metric": metric,
                "condition": c,
                "baseline": baseline,
                "term": row["term"],
                "coef": row["coef"],
                "se": row["se"],
                "z": row["z"],
                "df": df,
                "alternative": alt,
                "p_method": "Wald z" if normal else "Satterthwaite t",
                "p_unadjusted": _planned_p(row["z"], df, p_two, alt, normal=normal),
                "family": _family("change (mixed)", c, baseline, plan.family_scope),
            }
        )
    return out


def _models(
    first: pd.DataFrame,
    second: pd.DataFrame,
    match: PhaseMatch,
    metrics: Sequence[str],
    labels: tuple[str, str],
    conditions: Sequence[str],
    plan: AnalysisPlan,
    n_starts: int,
    seed: int,
) -> tuple[dict[str, PhaseModelFit], str | None]:
    """The mixed model of every metric, and why it has no reviewer effect (None: it has)."""
    data, terms, reason = _model_frame(first, second, match, metrics, labels, conditions)
    fits = _fit_models(
        data,
        terms,
        reason,
        metrics=metrics,
        conditions=conditions,
        labels=labels,
        plan=plan,
        n_starts=n_starts,
        seed=seed,
    )
    return fits, reason


# ------------------------------------------------------------------ correlations


def _fisher_interval(r: float, se: float, confidence: float) -> tuple[float, float]:
    if not (np.isfinite(r) and np.isfinite(se)) or abs(r) >= 1:
        return math.nan, math.nan
    q = float(special.ndtri(0.5 + confidence / 2))
    z = math.atanh(r)
    return math.tanh(z - q * se), math.tanh(z + q * se)


def _pearson(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(r, two-sided p of the t-test of r = 0 on n - 2 df)."""
    n = len(x)
    if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan
    xc, yc = x - x.mean(), y - y.mean()
    r = float(np.clip(xc @ yc / math.sqrt((xc @ xc) * (yc @ yc)), -1.0, 1.0))
    if abs(r) == 1:
        return r, 0.0
    t = r * math.sqrt((n - 2) / (1 - r * r))
    return r, float(2 * special.stdtr(n - 2, -abs(t)))


def _correlation(
    metric: str, subset: str, x: np.ndarray, y: np.ndarray, confidence: float
) -> PhaseCorrelation:
    n = len(x)
    r, p = _pearson(x, y)
    rho, p_rho = _pearson(stats.rankdata(x), stats.rankdata(y))
    se_r = 1 / math.sqrt(n - 3) if n > 3 else math.nan
    se_rho = math.sqrt((1 + rho * rho / 2) / (n - 3)) if n > 3 else math.nan
    return PhaseCorrelation(
        metric,
        subset,
        n,
        r,
        p,
        *_fisher_interval(r, se_r, confidence),
        rho,
        p_rho,
        *_fisher_interval(rho, se_rho, confidence),
    )


def _correlations(
    ideas: pd.DataFrame, metrics: Sequence[str], conditions: Sequence[str], confidence: float
) -> list[PhaseCorrelation]:
    out = []
    for m in metrics:
        sub = ideas[ideas["metric"] == m].dropna(subset=["change"])
        for subset in ("all", *conditions):
            part = sub if subset == "all" else sub[sub["condition"] == subset]
            x = part["mean_first"].to_numpy(float)
            y = part["mean_second"].to_numpy(float)
            out.append(_correlation(m, subset, x, y, confidence))
    return out


# ------------------------------------------------------------------ rankings


def _top_set(means: pd.Series, k: int) -> set[str]:
    ranks = (-means).rank(method="min")
    return set(means.index[ranks <= k])


def _overlap(
    part: pd.DataFrame, metric: str, k_wanted: int, conditions: Sequence[str]
) -> TopOverlap:
    part = part.set_index("idea")
    n = len(part)
    k = min(k_wanted, n)
    a = _top_set(part["mean_first"], k) if n else set()
    b = _top_set(part["mean_second"], k) if n else set()
    cond = part["condition"]

    def by_condition(ids: set[str]) -> dict[str, int]:
        return {c: int((cond[list(ids)] == c).sum()) for c in conditions}

    def mean_rank(column: str) -> dict[str, float]:
        return {c: float(part.loc[cond == c, column].mean()) for c in conditions}

    union = a | b
    return TopOverlap(
        metric=metric,
        k=k,
        n=n,
        top_first=tuple(sorted(a)),
        top_second=tuple(sorted(b)),
        overlap=len(a & b),
        jaccard=len(a & b) / len(union) if union else math.nan,
        expected_overlap=len(a) * len(b) / n if n else math.nan,
        top_first_by_condition=by_condition(a),
        top_second_by_condition=by_condition(b),
        mean_rank_first=mean_rank("rank_first"),
        mean_rank_second=mean_rank("rank_second"),
    )


def _rankings(
    ideas: pd.DataFrame,
    metrics: Sequence[str],
    conditions: Sequence[str],
    top_k: int,
    n_moves: int,
) -> tuple[list[TopOverlap], list[RankMove]]:
    overlaps, moves = [], []
    for m in metrics:
        part = ideas[ideas["metric"] == m].dropna(subset=["change"])
        overlaps.append(_overlap(part, m, top_k, conditions))
        biggest = part.assign(size=part["rank_move"].abs()).sort_values(
            ["size", "idea"], ascending=[False, True], kind="stable"
        )
        for r in biggest.head(n_moves).to_dict(orient="records"):
            moves.append(
                RankMove(
                    metric=m,
                    idea=str(r["idea"]),
                    condition=str(r["condition"]),
                    rank_first=float(r["rank_first"]),
                    rank_second=float(r["rank_second"]),
                    move=float(r["rank_move"]),
                    mean_first=float(r["mean_first"]),
                    mean_second=float(r["mean_second"]),
                )
            )
    return overlaps, moves


# ------------------------------------------------------------------ entry point


def _check_values(
    df: pd.DataFrame, metrics: Sequence[str], scales: SharedMetrics, label: str
) -> None:
    """Refuse scores outside their form's scale: they would mean the frames or the scales
    given are not the phase's."""
    problems = []
    for m in metrics:
        lo, hi = scales.scales[m]
        v = df[m]
        bad = v.notna() & ((v < lo) | (v > hi))
        if bad.any():
            shown = ", ".join(f"{x:g}" for x in v[bad].unique()[:3])
            problems.append(f"{m}: {int(bad.sum())} scores outside {lo}-{hi} (e.g. {shown})")
    if problems:
        raise ValueError(
            f"the {label} phase has scores off its form's scale: " + "; ".join(problems)
        )


def _analysed_conditions(
    match: PhaseMatch, baseline: str, conditions: Sequence[str] | None
) -> tuple[str, ...]:
    present = sorted(set(match.conditions.values()))
    if baseline not in present:
        raise ValueError(
            f"the baseline condition {baseline!r} has no idea in both phases "
            f"(compared ideas' conditions: {', '.join(present) or 'none'})"
        )
    order = list(conditions) if conditions is not None else present
    others = [c for c in order if c != baseline and c in present]
    if not others:
        raise ValueError(
            f"only the baseline condition {baseline!r} has ideas in both phases: there is no "
            "change to compare it with"
        )
    return (baseline, *others)


def _refuse_disagreements(match: PhaseMatch, labels: tuple[str, str]) -> None:
    shown = "; ".join(
        f"{i!r}: {a} in the {labels[0]} phase, {b} in the {labels[1]}"
        for i, a, b in match.disagree[:10]
    )
    more = f" and {len(match.disagree) - 10} more" if len(match.disagree) > 10 else ""
    raise ValueError(
        f"{counted(len(match.disagree), 'idea')} {'has' if len(match.disagree) == 1 else 'have'} "
        f"different conditions in the two phases ({shown}"
        f"{more}); correct the conditions, or leave these ideas out"
    )


def _notes(
    match: PhaseMatch, labels: tuple[str, str], conditions: Sequence[str], reviewer: str | None
) -> list[str]:
    counts = pd.Series(match.conditions).value_counts()
    notes = [
        f"{len(match.compared)} ideas are in both phases and compared ("
        + ", ".join(f"{int(counts.get(c, 0))} {c}" for c in conditions)
        + f"), matched on {match.id_column}; {len(match.only_first)} are only in the "
        f"{labels[0]} phase and {len(match.only_second)} only in the {labels[1]}."
    ]
    if match.left_out:
        notes.append(f"Left out as asked: {', '.join(match.left_out)}.")
    if match.left_out_absent:
        notes.append(
            "Asked to leave out but not in both phases (nothing to leave out): "
            + ", ".join(match.left_out_absent)
            + "."
        )
    if match.disagree:
        notes.append(
            f"{len(match.disagree)} ideas whose condition differs between the phases are "
            "not compared: " + ", ".join(i for i, _, _ in match.disagree) + "."
        )
    if match.outside_conditions:
        notes.append(
            f"{len(match.outside_conditions)} ideas in both phases belong to conditions "
            "not analysed: " + ", ".join(match.outside_conditions) + "."
        )
    if reviewer is not None:
        notes.append(reviewer[0].upper() + reviewer[1:] + ".")
    return notes


def _checked_inputs(
    first: pd.DataFrame,
    second: pd.DataFrame,
    *,
    scales: tuple[Mapping[str, Sequence[Any]], Mapping[str, Sequence[Any]]],
    metrics: Sequence[str] | None,
    labels: tuple[str, str],
    on_disagreement: str,
    top_k: int,
    n_moves: int,
) -> tuple[SharedMetrics, list[str]]:
    """The shared metrics and the ones compared, after every input check that needs no
    matching: options, metric names and scales, frame columns, scores on their scale."""
    if len(labels) != 2 or labels[0] == labels[1] or not all(labels):
        raise ValueError(f"labels must be two different names, got {labels!r}")
    if on_disagreement not in ("refuse", "leave_out"):
        raise ValueError(
            f"on_disagreement must be 'refuse' or 'leave_out', not {on_disagreement!r}"
        )
    if top_k < 1 or n_moves < 0:
        raise ValueError("top_k must be at least 1 and n_moves at least 0")
    shared = shared_metrics(*scales)
    chosen = _chosen_metrics(metrics, shared)
    for df, label in ((first, labels[0]), (second, labels[1])):
        try:
            validate_frame(df, chosen, require=("condition",))
        except ValueError as exc:
            raise ValueError(f"the {label} phase's frame: {exc}") from None
        _check_values(df, chosen, shared, label)
    return shared, chosen


def compare_phases(
    first: pd.DataFrame,
    second: pd.DataFrame,
    *,
    scales_first: Mapping[str, Sequence[Any]],
    scales_second: Mapping[str, Sequence[Any]],
    baseline: str,
    metrics: Sequence[str] | None = None,
    plan: AnalysisPlan | None = None,
    leave_out: Sequence[str] = (),
    labels: tuple[str, str] = ("first", "second"),
    conditions: Sequence[str] | None = None,
    id_column: str | None = None,
    on_disagreement: str = "refuse",
    top_k: int = 10,
    n_moves: int = 5,
    confidence: float = hyp.CONFIDENCE_LEVEL,
    mixed: bool = True,
    mixed_starts: int = 3,
    seed: int = 0,
) -> PhaseComparison:
    """Compare two phases of the same ideas: means, changes, tests, model, correlations.

    Parameters
    ----------
    first, second:
        Review frames of the earlier and the later phase (one row per review ×
        condition; the metric columns as floats, NaN where a review has no score).
    scales_first, scales_second:
        Each phase's form as ``metric -> (minimum, maximum)``; only metrics both forms
        have on the same scale can be compared, and scores off the scale are refused.
    baseline:
        The condition every other condition's change is tested against.
    metrics:
        The metrics to compare (default: every shared metric); a metric that is not
        shared, or whose scales differ, is refused with the reason.
    plan:
        The later study's plan: its hypotheses (test ``"*"`` or ``"phases"``) give each
        comparison's alternative (``"AI < Human"``: AI's change is below Human's), its
        method and alpha correct and decide; per-comparison families correct each
        condition's comparison over the metrics, other scopes all of them together.
        Default: two-sided, Bonferroni.
    leave_out:
        Idea ids to keep out (the result names them, and those it did not find).
    labels:
        Names of the two phases (e.g. ``("ideation", "execution")``); the model's phase
        term is ``phase[<second label>]``.
    conditions:
        Conditions to analyse, in order; default all of the compared ideas', sorted.
    id_column:
        Column to match ideas on (default: ``source_idea_id`` when both frames carry it,
        else ``idea_id``).
    on_disagreement:
        ``"refuse"`` (default): an idea whose condition differs between the phases is an
        error naming it; ``"leave_out"``: such ideas are not compared, and named.
    top_k, n_moves:
        Size of the top sets compared; how many of the largest rank moves to list.
    confidence, mixed, mixed_starts, seed:
        Level of every interval; whether to fit the mixed model, its starts and seed.

    Returns
    -------
    PhaseComparison
        ``match``; ``ideas`` (per idea × metric: reviews and mean in each phase, change,
        ranks); ``changes`` (per metric × condition); ``tests`` (Welch, per metric ×
        non-baseline condition); ``models`` (per metric); ``correlations`` (per metric ×
        all ideas and each condition); ``overlaps`` and ``moves`` (per metric);
        ``notes``.
    """
    plan = plan or AnalysisPlan()
    shared, chosen = _checked_inputs(
        first,
        second,
        scales=(scales_first, scales_second),
        metrics=metrics,
        labels=labels,
        on_disagreement=on_disagreement,
        top_k=top_k,
        n_moves=n_moves,
    )
    match = match_phases(
        first,
        second,
        id_column=id_column,
        leave_out=leave_out,
        conditions=conditions,
        labels=labels,
    )
    if match.disagree and on_disagreement == "refuse":
        _refuse_disagreements(match, labels)
    conds = _analysed_conditions(match, baseline, conditions)
    ideas = _idea_table(first, second, match, chosen)
    models, reviewer_reason = (
        _models(first, second, match, chosen, labels, conds, plan, mixed_starts, seed)
        if mixed
        else ({}, None)
    )
    overlaps, moves = _rankings(ideas, chosen, conds, top_k, n_moves)
    return PhaseComparison(
        labels=(labels[0], labels[1]),
        baseline=baseline,
        conditions=conds,
        metrics=tuple(chosen),
        shared=shared,
        match=match,
        method=plan.method,
        alpha=plan.alpha,
        family_scope=plan.family_scope,
        confidence=confidence,
        ideas=ideas,
        changes=tuple(_condition_changes(ideas, chosen, conds, confidence)),
        tests=tuple(_change_tests(ideas, chosen, conds, plan, confidence)),
        models=models,
        correlations=tuple(_correlations(ideas, chosen, conds, confidence)),
        overlaps=tuple(overlaps),
        moves=tuple(moves),
        notes=tuple(_notes(match, labels, conds, reviewer_reason)),
    )


# ------------------------------------------------------------------ tidy tables


def _mixed_rows(result: PhaseComparison) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for metric, fit in result.models.items():
        if fit.result is None:
            rows.append({"metric": metric, "kind": "error", "term": fit.error})
            continue
        res = fit.result
        base = {"metric": metric, "loglik": res.loglik, "engine": res.engine}
        planned = {r["term"]: r for r in fit.interactions}
        for row in res.fixed:
            extra = planned.get(row["term"], {})
            rows.append(
                {
                    **base,
                    "kind": "fixed",
                    **row,
                    **{
                        k: extra.get(k)
                        for k in ("alternative", "p_unadjusted", "p_adjusted", "family", "reject")
                    },
                }
            )
        for name, var in res.variance.items():
            rows.append(
                {
                    **base,
                    "kind": "variance",
                    "term": name,
                    "coef": var,
                    "boundary": name in res.boundary,
                }
            )
    columns = ["metric", "kind", "term", "coef", "se", "z", "p", "ci_low", "ci_high", "df"]
    columns += ["p_satterthwaite", "alternative", "p_unadjusted", "p_adjusted", "family"]
    columns += ["reject", "boundary", "loglik", "engine"]
    return pd.DataFrame(rows, columns=columns)


def _match_rows(result: PhaseComparison) -> pd.DataFrame:
    m = result.match
    rows = [
        {"idea": i, "status": "compared", "condition_first": c, "condition_second": c}
        for i, c in m.conditions.items()
    ]
    rows += [{"idea": i, "status": "only_first"} for i in m.only_first]
    rows += [{"idea": i, "status": "only_second"} for i in m.only_second]
    rows += [
        {"idea": i, "status": "condition_differs", "condition_first": a, "condition_second": b}
        for i, a, b in m.disagree
    ]
    rows += [{"idea": i, "status": "left_out"} for i in m.left_out]
    rows += [{"idea": i, "status": "left_out_not_found"} for i in m.left_out_absent]
    rows += [{"idea": i, "status": "condition_not_analysed"} for i in m.outside_conditions]
    return pd.DataFrame(rows, columns=["idea", "status", "condition_first", "condition_second"])


def phase_tables(result: PhaseComparison) -> dict[str, pd.DataFrame]:
    """The comparison as tidy tables for CSV export, one row per number's unit.

    Parameters
    ----------
    result:
        What :func:`compare_phases` returned.

    Returns
    -------
    dict of DataFrame
        CSV name → table, as the report's files take it: ``phase_match`` (per idea id: compared, in one phase only, condition differs, left
        out), ``phase_ideas`` (per idea × metric), ``phase_changes`` (per metric ×
        condition), ``phase_tests`` (Welch, per metric × condition), ``phase_mixed``
        (fixed effects and variances per metric), ``phase_correlations``, ``phase_top_k``
        and ``phase_rank_moves``; columns named as in the JSON section.
    """
    overlaps = []
    for o in result.overlaps:
        d = _overlap_dict(o)
        d["top_first"], d["top_second"] = " ".join(o.top_first), " ".join(o.top_second)
        for key in (
            "top_first_by_condition",
            "top_second_by_condition",
            "mean_rank_first",
            "mean_rank_second",
        ):
            for c, v in d.pop(key).items():
                d[f"{key}[{c}]"] = v
        overlaps.append(d)
    return {
        "phase_match": _match_rows(result),
        "phase_ideas": result.ideas.copy(),
        "phase_changes": pd.DataFrame([vars(c) for c in result.changes]),
        "phase_tests": pd.DataFrame([vars(t) for t in result.tests]),
        "phase_mixed": _mixed_rows(result),
        "phase_correlations": pd.DataFrame([vars(c) for c in result.correlations]),
        "phase_top_k": pd.DataFrame(overlaps),
        "phase_rank_moves": pd.DataFrame(
            [vars(m) for m in result.moves], columns=list(RankMove.__dataclass_fields__)
        ),
    }
