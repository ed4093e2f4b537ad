"""Judge panels: several judges asked the same prompts, and their verdict combined.

Pure: the callers turn a panel run's rows into the mappings below
(docs/judge-reliability.md, "Judge panels", defines every figure).

- Direct scores: each member's score of an idea on a metric is the mean of its parseable
  samples; the panel's is the mean of its members' scores (a member with no parseable
  answer for that idea and metric is left out, so it neither pulls the mean nor counts).
- Pairwise verdicts: the majority of the members' parseable verdicts; a split (as many
  for one side as for the other) is a tie, and a pair no member answered stays
  unparseable.
- Agreement with the reviewers: each member's correlation with the reviewers' mean
  score, the panel's, and panel − best member, all on the ideas every member and the
  reviewers scored, with percentile bootstrap intervals from the same resamples of those
  ideas. The best member is chosen again in each resample, so the interval of the
  difference carries the luck of picking the best on the same ideas.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from studies.analysis.agreement import resampled_correlations

__all__ = [
    "MEASURES",
    "combine_verdicts",
    "majority_verdict",
    "member_means",
    "panel_agreement",
    "panel_scores",
]

Measure = Literal["spearman", "kendall", "pearson"]
MEASURES: tuple[Measure, ...] = ("spearman", "kendall", "pearson")
"""The agreement measures of a panel, those the report computes for every judge run."""


def member_means(
    rows: Iterable[tuple[Hashable, Hashable, float | None]],
) -> dict[Hashable, float]:
    """Mean of the parseable scores per key from (key, sample, score) rows; a key whose
    every score is None is absent."""
    values: dict[Hashable, list[float]] = defaultdict(list)
    for key, _sample, score in rows:
        if score is not None and math.isfinite(score):
            values[key].append(float(score))
    return {k: sum(v) / len(v) for k, v in values.items()}


def panel_scores(members: Mapping[Any, Mapping[Any, float]]) -> dict[Any, float]:
    """The panel's score per key: the mean of the members' scores for it, over the members
    that have one."""
    values: dict[Any, list[float]] = defaultdict(list)
    for scores in members.values():
        for key, score in scores.items():
            values[key].append(score)
    return {k: sum(v) / len(v) for k, v in values.items()}


def majority_verdict(verdicts: Sequence[str]) -> str:
    """The panel's verdict on one comparison: "A" or "B" when more members said it than
    the other, "tie" when the parseable verdicts split evenly (or all said tie), and
    "unparseable" when no member gave a parseable verdict."""
    counts = Counter(v for v in verdicts if v in ("A", "B", "tie"))
    if not counts:
        return "unparseable"
    if counts["A"] > counts["B"]:
        return "A"
    if counts["B"] > counts["A"]:
        return "B"
    return "tie"


def combine_verdicts(rows: Iterable[tuple[Hashable, str]]) -> dict[Hashable, str]:
    """The panel's verdict per comparison from (comparison, member's verdict) rows, by
    `majority_verdict`."""
    verdicts: dict[Hashable, list[str]] = defaultdict(list)
    for key, verdict in rows:
        verdicts[key].append(verdict)
    return {key: majority_verdict(v) for key, v in verdicts.items()}


def _ordered(ideas: Iterable[Hashable]) -> list[Hashable]:
    """The ideas in their natural order (ids), so resamples are reproducible by hand; by
    their text where they do not compare."""
    ideas = list(ideas)
    try:
        return sorted(ideas)  # type: ignore[type-var]
    except TypeError:
        return sorted(ideas, key=repr)


def _est(value: float, draws: np.ndarray, n: int, level: float) -> dict[str, Any]:
    finite = draws[np.isfinite(draws)]
    low = high = math.nan
    if finite.size >= 2:
        tail = (1.0 - level) / 2.0
        low, high = (float(q) for q in np.quantile(finite, [tail, 1.0 - tail]))
    return {
        "value": value if math.isfinite(value) else None,
        "low": low if math.isfinite(low) else None,
        "high": high if math.isfinite(high) else None,
        "n": n,
    }


def panel_agreement(
    human: Mapping[Any, float],
    members: Mapping[str, Mapping[Any, float]],
    panel: Mapping[Any, float],
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Agreement with the reviewers' mean score of each member, of the panel, and of
    panel − best member, per measure (module text).

    Parameters
    ----------
    human
        The reviewers' mean score by idea.
    members
        Each member's score by idea, by the member's label (in the panel's order).
    panel
        The panel's score by idea (`panel_scores`).
    n_boot, level, seed
        Bootstrap resamples of the ideas, the intervals' level, and the resamples' seed.

    Returns
    -------
    dict
        {"n_ideas", "members": [labels], "measures": {measure: {"members": {label: est},
        "panel": est, "best_member": label or None, "difference": est}}}; an est is
        {value, low, high, n}, None where it cannot be computed (fewer than three ideas, a
        constant side).
    """
    ideas = _ordered(i for i in panel if i in human and all(i in m for m in members.values()))
    n = len(ideas)
    y = np.array([human[i] for i in ideas], float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n)) if n >= 3 and n_boot > 0 else np.empty((0, n), int)
    out: dict[str, Any] = {"n_ideas": n, "members": list(members), "measures": {}}
    for measure in MEASURES:
        points: dict[str, float] = {}
        draws: dict[str, np.ndarray] = {}
        for label, scores in members.items():
            x = np.array([scores[i] for i in ideas], float)
            points[label], draws[label] = resampled_correlations(x, y, measure, idx)
        p = np.array([panel[i] for i in ideas], float)
        panel_point, panel_draws = resampled_correlations(p, y, measure, idx)
        ranked = [label for label in members if math.isfinite(points[label])]
        best = max(ranked, key=lambda label: points[label]) if ranked else None
        if best is not None:
            # NaN where a resample leaves some member without a correlation: the best of
            # that resample is unknown.
            best_draws = np.max(np.vstack([draws[label] for label in members]), axis=0)
            diff_point = panel_point - points[best] if len(ranked) == len(members) else math.nan
            diff = _est(diff_point, panel_draws - best_draws, n, level)
        else:
            diff = _est(math.nan, np.empty(0), n, level)
        out["measures"][measure] = {
            "members": {label: _est(points[label], draws[label], n, level) for label in members},
            "panel": _est(panel_point, panel_draws, n, level),
            "best_member": best,
            "difference": diff,
        }
    return out
