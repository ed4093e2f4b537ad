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
- Accuracy on the reviewers' own pair ratings (pairwise panels, and one judge's pooled
  verdicts): each reviewer's rating of a pair the judges compared is one item, the
  judge's preference the sign of its summed verdicts over both orders; accuracy with ties
  and on the decisive items, with vertex-bootstrap intervals over ideas (pairs that share
  an idea are not independent) from one set of resamples for every judge.
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
    "PAIR_MEASURES",
    "combine_verdicts",
    "majority_verdict",
    "member_means",
    "pair_accuracy",
    "pair_preferences",
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


# --- accuracy on the reviewers' pair ratings -------------------------------------------

PairMeasure = Literal["with_ties", "without_ties"]
PAIR_MEASURES: tuple[PairMeasure, ...] = ("with_ties", "without_ties")
"""Accuracy on every item (a tie is a label like the others), and on the items where
neither the judge nor the reviewer said tie: the report's two accuracies."""

_PANEL = "\0panel"  # the panel's key beside its members' labels (no label starts so)

PairKey = tuple[Hashable, Hashable, Hashable]
"""(dimension, x, y) with x before y in the ideas' natural order."""


def _oriented(a: Hashable, b: Hashable) -> tuple[Hashable, Hashable, bool]:
    """(x, y, swapped): the two ideas in their natural order."""
    x, y = _ordered([a, b])
    return x, y, x != a


def pair_preferences(
    rows: Iterable[tuple[Hashable, Hashable, Hashable, str]],
) -> dict[PairKey, str]:
    """A judge's preference per (dimension, x, y) from (dimension, idea_a, idea_b, verdict)
    rows, the verdict about idea_a ("A"), idea_b ("B"), "tie" or "unparseable": +1 for the
    winner's side summed over the parseable verdicts (both orders, every call), "x" or "y"
    by the sign, "tie" at 0; a pair with no parseable verdict has none. The report's
    summation (`studies.analysis.agreement.judge_pair_preferences`)."""
    margin: dict[PairKey, int] = defaultdict(int)
    for dim, a, b, verdict in rows:
        if verdict not in ("A", "B", "tie"):
            continue
        x, y, swapped = _oriented(a, b)
        sign = {"A": 1, "B": -1, "tie": 0}[verdict]
        margin[(dim, x, y)] += -sign if swapped else sign
    return {k: "x" if m > 0 else "y" if m < 0 else "tie" for k, m in margin.items()}


def pair_accuracy(
    ratings: Sequence[tuple[Hashable, Hashable, Hashable, str]],
    members: Mapping[str, Mapping[PairKey, str]],
    panel: Mapping[PairKey, str] | None = None,
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Each judge's (and the panel's) accuracy on the reviewers' pair ratings, and panel −
    best member (module text).

    Parameters
    ----------
    ratings
        One (dimension, x, y, winner) per reviewer rating, x before y in the ideas'
        natural order and winner in {"x", "y", "tie"}.
    members
        Each judge's preference per (dimension, x, y) (`pair_preferences`), by label.
    panel
        The panel's preferences (from its combined verdicts); None for no panel.
    n_boot, level, seed
        Vertex-bootstrap resamples of the ideas, the level, and the resamples' seed.

    Returns
    -------
    dict
        {"n_ratings", "n_pairs", "n_ideas", "n_reviewer_pairs", "members": [labels],
        "measures": {measure: {"members": {label: est}, "panel": est or None,
        "best_member": label or None, "difference": est or None, "reviewers": est}}}. The
        items are the ratings of pairs every judge (and the panel) has a preference for;
        "reviewers" is one reviewer's rating against another's of the same pair, on those
        pairs (the human–human figure beside the judges'); an est is {value, low, high,
        n} with n the items it counts.
    """
    judges = {**members, **({_PANEL: panel} if panel is not None else {})}
    items = [r for r in ratings if all((r[0], r[1], r[2]) in p for p in judges.values())]
    ideas = _ordered({i for r in items for i in (r[1], r[2])})
    index = {idea: k for k, idea in enumerate(ideas)}
    a = np.array([index[r[1]] for r in items], int)
    b = np.array([index[r[2]] for r in items], int)
    human = np.array([r[3] for r in items], object)
    if len(ideas) >= 2 and n_boot > 0:
        rng = np.random.default_rng(seed)
        counts = np.stack(
            [np.bincount(rng.integers(0, len(ideas), len(ideas)), minlength=len(ideas))
             for _ in range(n_boot)]
        ).astype(float)  # fmt: skip
    else:
        counts = np.empty((0, len(ideas)))
    weights = counts[:, a] * counts[:, b]
    points: dict[str, dict[str, float]] = {m: {} for m in PAIR_MEASURES}
    draws: dict[str, dict[str, np.ndarray]] = {m: {} for m in PAIR_MEASURES}
    for label, prefs in judges.items():
        judged = np.array([prefs[(r[0], r[1], r[2])] for r in items], object)
        correct = (judged == human).astype(float)
        decisive = ((judged != "tie") & (human != "tie")).astype(float)
        for measure, mask in (("with_ties", np.ones(len(items))), ("without_ties", decisive)):
            points[measure][label] = _ratio(float(correct @ mask), float(mask.sum()))
            with np.errstate(invalid="ignore", divide="ignore"):
                draws[measure][label] = (weights @ (correct * mask)) / (weights @ mask)
    reviewers, n_twos = _reviewers_against_each_other(items, index, counts, level)
    out: dict[str, Any] = {
        "n_ratings": len(items),
        "n_pairs": len({(r[0], r[1], r[2]) for r in items}),
        "n_ideas": len(ideas),
        "n_reviewer_pairs": n_twos,
        "members": list(members),
        "measures": {},
    }
    for measure in PAIR_MEASURES:
        n = {
            label: len(items)
            if measure == "with_ties"
            else sum(1 for r in items if prefs[(r[0], r[1], r[2])] != "tie" and r[3] != "tie")
            for label, prefs in judges.items()
        }
        est = {
            label: _est(points[measure][label], draws[measure][label], n[label], level)
            for label in judges
        }
        block: dict[str, Any] = {
            "members": {label: est[label] for label in members},
            "panel": est.get(_PANEL),
            "best_member": None,
            "difference": None,
            "reviewers": reviewers[measure],
        }
        if panel is not None:
            block.update(
                _panel_versus_best(
                    points[measure], draws[measure], list(members), len(items), level
                )
            )
        out["measures"][measure] = block
    return out


def _reviewers_against_each_other(
    items: Sequence[tuple[Hashable, Hashable, Hashable, str]],
    index: Mapping[Hashable, int],
    counts: np.ndarray,
    level: float,
) -> tuple[dict[str, dict[str, Any]], int]:
    """The reviewers against each other on the judges' pairs: every two ratings of one
    pair an item (the report's human–human figure), with the judges' resamples of the
    ideas; per measure an est, and the number of items."""
    by_key: dict[PairKey, list[str]] = defaultdict(list)
    for r in items:
        by_key[(r[0], r[1], r[2])].append(r[3])
    twos = [
        (index[k[1]], index[k[2]], u, v)
        for k, winners in by_key.items()
        for i, u in enumerate(winners)
        for v in winners[i + 1 :]
    ]
    weights = counts[:, [t[0] for t in twos]] * counts[:, [t[1] for t in twos]]
    same = np.array([float(t[2] == t[3]) for t in twos])
    both_decisive = np.array([float("tie" not in t[2:]) for t in twos])
    out: dict[str, dict[str, Any]] = {}
    for measure, mask in (("with_ties", np.ones(len(twos))), ("without_ties", both_decisive)):
        with np.errstate(invalid="ignore", divide="ignore"):
            draws = (weights @ (same * mask)) / (weights @ mask)
        value = _ratio(float(same @ mask), float(mask.sum()))
        out[measure] = _est(value, draws, int(mask.sum()), level)
    return out, len(twos)


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


def _panel_versus_best(
    points: Mapping[str, float],
    draws: Mapping[str, np.ndarray],
    labels: list[str],
    n: int,
    level: float,
) -> dict[str, Any]:
    """The best member (highest point value) and panel − best, the best chosen again in
    each resample; NaN in a resample where some judge has no figure."""
    panel_point, panel_draws = points[_PANEL], draws[_PANEL]
    ranked = [label for label in labels if math.isfinite(points[label])]
    if not ranked:
        return {"best_member": None, "difference": _est(math.nan, np.empty(0), n, level)}
    best = max(ranked, key=lambda label: points[label])
    best_draws = np.max(np.vstack([draws[label] for label in labels]), axis=0)
    diff_point = panel_point - points[best] if len(ranked) == len(labels) else math.nan
    return {"best_member": best, "difference": _est(diff_point, panel_draws - best_draws, n, level)}
