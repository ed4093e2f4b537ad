"""How far an LLM judge agrees with the human reviewers, with the humans' own agreement
beside every figure as the ceiling.

Pure pandas / numpy / scipy: the callers turn ORM rows into the plain frames below.

Input frames
------------
``frame`` (the review frame, see `frame.py`)
    One row per review x condition: review_id, idea_id, condition, topic, reviewer_id and
    one numeric column per metric (1-10, NaN allowed). Per-idea human means count each
    review once (`unique_reviews`), so an idea that sits in two conditions is not
    double-weighted.

``judge_scores`` (one judge run's absolute scores)
    idea_id, metric, score; optional sample (several samples of one idea are averaged),
    optional cost (money spent on that row's call). score NaN means the answer could not be
    parsed: it counts towards the unparseable rate and is otherwise ignored. Per-idea
    ratings of a pairwise, Swiss, Elo or Bradley-Terry run (IdeaRating) fit the same frame
    with metric = the rated dimension. `idea_id` must use the frame's idea ids.

``judge_pairs`` (one judge run's pairwise outcomes)
    idea_a, idea_b, first_shown (equal to idea_a or idea_b), verdict in {"A", "B", "tie",
    "unparseable"} stated in field terms ("A": idea_a won, whichever side it was shown on),
    dimension; optional round, len_a / len_b (text lengths of idea_a / idea_b, any unit),
    cost.

``human_pairs`` (reviewers' pair ratings, one row per task x dimension)
    reviewer_id, idea_a, idea_b, shown_first (the idea shown first), dimension, choice in
    {"first", "second", "tie"} as the reviewer saw it.

Conventions
-----------
Every public statistic returns a small frozen result object whose `as_dict()` is the
JSON-ready dict the report writes (plain floats; NaN, inf and undefined values become
None). Every block states its n and which rows it used; a statistic that cannot be computed
is None with a `reason` string beside it rather than an exception. Malformed inputs (missing
columns, unknown verdicts) raise ValueError naming the problem. Everything random takes a
`seed` and is reproducible.

A pair of ideas is oriented canonically (x = the id that sorts first as a string, y = the
other) so that a judge's and a reviewer's verdicts on the same two ideas can be matched.
Labels are then "x", "y" or "tie".
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from .consistency import (
    Resampling,
    Rows,
    _extremes_hits,
    _row_medians,
    inter_reviewer_consistency,
    krippendorff_alpha,
    score_matrix,
)
from .frame import json_float, require_columns, unique_reviews, validate_frame
from .options import CHANCE_RANKINGS
from .rounding import percent_text

JUDGE_SCORE_COLUMNS: tuple[str, ...] = ("idea_id", "metric", "score")
JUDGE_PAIR_COLUMNS: tuple[str, ...] = ("idea_a", "idea_b", "first_shown", "verdict", "dimension")
HUMAN_PAIR_COLUMNS: tuple[str, ...] = (
    "reviewer_id",
    "idea_a",
    "idea_b",
    "shown_first",
    "dimension",
    "choice",
)
VERDICTS: tuple[str, ...] = ("A", "B", "tie", "unparseable")
CHOICES: tuple[str, ...] = ("first", "second", "tie")
LABELS: tuple[str, ...] = ("x", "y", "tie")

NO_LENGTHS = "cannot compute: no text lengths"
NO_COSTS = "cannot compute: no costs"

# Same tie grid as consistency.py: means of 1-10 scores never differ by less.
_TIE_DECIMALS = 9
# Cells (replicates x units) of one batch of splits, to bound memory on large studies.
_CELLS = 1_000_000
# Above this many ideas the Kendall bootstrap loops over scipy (O(n log n)) instead of
# building n x n sign matrices.
_KENDALL_VECTOR_MAX = 300
#: Above this many idea units a judge's resampling draws shrink in proportion, as the
#: report's consistency section does: the split-to-split spread of a balanced accuracy
#: shrinks like 1 / sqrt(units), so units x draws, and with it the Monte Carlo error, stay
#: about constant. Never fewer than MIN_DRAWS draws (or what was asked, if less).
SCALE_UNITS = 1500
MIN_DRAWS = 100
# A rank correlation needs this many ideas (a judge's with the reviewers, or chance's);
# a judge joins Krippendorff's alpha as a rater only with scores on as many reviewed ideas.
MIN_IDEAS = 3
DEFAULT_RESAMPLING = Resampling()
"""The options a judge's consistency uses unless given others (`Resampling`'s defaults)."""


def scaled_draws(n: int, n_units: int, *, floor: int = MIN_DRAWS) -> int:
    """``n`` draws scaled down for ``n_units`` idea units (see ``SCALE_UNITS``).

    Parameters
    ----------
    n
        The draws asked for.
    n_units
        The study's (condition, idea) units.
    floor
        Never fewer than this many draws (nor more than ``n``).

    Returns
    -------
    int
        The draws to make.
    """
    scale = min(1.0, SCALE_UNITS / max(n_units, 1))
    return max(min(floor, n), int(n * scale))


# --------------------------------------------------------------------------- helpers


def _py(x: Any) -> Any:
    """A plain Python scalar (ids come out of pandas as numpy scalars)."""
    return x.item() if isinstance(x, np.generic) else x


def _na(reason: str, **extra: Any) -> dict[str, Any]:
    return {**extra, "estimate": None, "reason": reason}


def _interval(values: np.ndarray, confidence: float) -> tuple[float | None, float | None]:
    v = values[np.isfinite(values)]
    if v.size < 2:
        return None, None
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(v, [tail, 1 - tail])
    return json_float(lo), json_float(hi)


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")


def _validate_judge_scores(judge_scores: pd.DataFrame) -> None:
    require_columns(judge_scores, JUDGE_SCORE_COLUMNS)
    if not pd.api.types.is_numeric_dtype(judge_scores["score"]):
        raise ValueError("judge score column 'score' must be numeric (NaN = unparseable)")


def judge_idea_scores(judge_scores: pd.DataFrame, metric: str) -> pd.Series:
    """The judge's score per idea for one metric: the mean of its parseable samples.

    Parameters
    ----------
    judge_scores
        One judge run's scores (module text).
    metric
        The metric read.

    Returns
    -------
    pandas.Series
        Mean score by idea id, sorted by id; ideas without a parseable score are absent.
    """
    _validate_judge_scores(judge_scores)
    rows = judge_scores[(judge_scores["metric"] == metric) & judge_scores["score"].notna()]
    return rows.groupby("idea_id", sort=True)["score"].mean().astype(float)


def human_idea_means(frame: pd.DataFrame, metric: str) -> tuple[pd.Series, pd.Series]:
    """Per idea: the mean human score and the number of reviews (each review once).

    Parameters
    ----------
    frame
        The review frame (module text).
    metric
        The metric read.

    Returns
    -------
    tuple of pandas.Series
        The mean score and the number of reviews, both by idea id, sorted by id.
    """
    validate_frame(frame, [metric], require=("review_id", "idea_id"))
    rows = unique_reviews(frame)
    rows = rows[rows[metric].notna()]
    grouped = rows.groupby("idea_id", sort=True)[metric]
    return grouped.mean().astype(float), grouped.size()


def _common(
    frame: pd.DataFrame, judge_scores: pd.DataFrame, metric: str
) -> tuple[pd.Index, np.ndarray, np.ndarray, dict[str, Any]]:
    """Ideas with both a judge score and a human mean, their values and the bookkeeping."""
    judge = judge_idea_scores(judge_scores, metric)
    human, n_rev = human_idea_means(frame, metric)
    common = judge.index.intersection(human.index).sort_values()
    info = {
        "metric": metric,
        "n_ideas": len(common),
        "n_reviews": int(n_rev.reindex(common).sum()),
        "n_ideas_without_judge": int(len(human.index.difference(judge.index))),
        "n_ideas_without_reviews": int(len(judge.index.difference(human.index))),
    }
    return common, judge.reindex(common).to_numpy(), human.reindex(common).to_numpy(), info


# ------------------------------------------------------------- absolute agreement


def _pearson_rows(x: np.ndarray, y: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
    """Pearson r of each resample (row of idx) of the pairs (x, y), NaN where a resample is
    constant; without idx, of each row pair of x and y."""
    X, Y = (x, y) if idx is None else (x[idx], y[idx])
    xc = X - X.mean(axis=1, keepdims=True)
    yc = Y - Y.mean(axis=1, keepdims=True)
    den = np.sqrt((xc**2).sum(1) * (yc**2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (xc * yc).sum(1) / den
    r[den <= 1e-12] = np.nan
    return r


def _kendall_rows(x: np.ndarray, y: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Kendall tau-b of each resample (row of idx) of the pairs (x, y): sum(sx sy) /
    sqrt(sum sx^2 sum sy^2) over i < j."""
    X, Y = x[idx], y[idx]
    n = X.shape[1]
    if n > _KENDALL_VECTOR_MAX:
        return np.array([stats.kendalltau(x, y).statistic for x, y in zip(X, Y, strict=True)])
    iu = np.triu_indices(n, 1)
    out = []
    step = max(1, 2_000_000 // max(1, len(iu[0])))
    for s in range(0, X.shape[0], step):
        x, y = X[s : s + step], Y[s : s + step]
        sx = np.sign(x[:, iu[0]] - x[:, iu[1]])
        sy = np.sign(y[:, iu[0]] - y[:, iu[1]])
        den = np.sqrt((sx**2).sum(1) * (sy**2).sum(1))
        with np.errstate(invalid="ignore", divide="ignore"):
            tau = (sx * sy).sum(1) / den
        tau[den == 0] = np.nan
        out.append(tau)
    return np.concatenate(out)


def _resampled_ranks(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """scipy's rankdata (average ranks, from 1) within each row of x[idx], by counting:
    a value's rank is the number of smaller values in its row plus (its count + 1) / 2.
    The values come from x, so their order is sorted once, not once per row."""
    _, codes = np.unique(x, return_inverse=True)
    n_codes = int(codes.max()) + 1
    C = codes.reshape(-1)[idx]
    reps = idx.shape[0]
    offset = n_codes * np.arange(reps)[:, None]
    counts = np.bincount((C + offset).ravel(), minlength=reps * n_codes)
    counts = counts.reshape(reps, n_codes)
    below = np.cumsum(counts, axis=1) - counts
    return np.take_along_axis(below + (counts + 1) / 2, C, axis=1)


def _spearman_rows(x: np.ndarray, y: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Spearman's rho of each resample (row of idx) of the pairs (x, y)."""
    return _pearson_rows(_resampled_ranks(x, idx), _resampled_ranks(y, idx))


_CORRELATIONS: dict[
    str, tuple[Callable[..., Any], Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]]
] = {
    "spearman": (stats.spearmanr, _spearman_rows),
    "kendall": (stats.kendalltau, _kendall_rows),
    "pearson": (stats.pearsonr, _pearson_rows),
}


def resampled_correlations(
    x: np.ndarray,
    y: np.ndarray,
    method: Literal["spearman", "kendall", "pearson"],
    resamples: np.ndarray,
) -> tuple[float, np.ndarray]:
    """The correlation of the pairs (x, y) by scipy, and its value in each resample (row
    of `resamples`, indices into x and y; NaN where a resample has a constant side): what
    `correlation_with_ci` computes its interval from, for callers that compare several
    judges on the same resamples."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    point, rows_fn = _CORRELATIONS[method]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, np.full(len(resamples), np.nan)
    estimate = float(point(x, y).statistic)
    return estimate, rows_fn(x, y, resamples) if len(resamples) else np.empty(0)


@dataclass(frozen=True)
class CorrelationCI:
    """One correlation with its p-value and bootstrap interval (`correlation_with_ci`).

    Attributes
    ----------
    method
        ``"spearman"``, ``"kendall"`` (tau-b) or ``"pearson"``.
    n
        The pairs correlated.
    estimate, p_value
        scipy's estimate and p-value; None when not computable (`reason` says why).
    confidence
        Level of the interval.
    n_bootstrap, n_bootstrap_used
        Resamples drawn, and those without a constant side (the interval's).
    ci_low, ci_high
        The percentile interval; None without at least two usable resamples.
    reason
        Why the correlation cannot be computed; None when it was.
    """

    method: str
    n: int
    estimate: float | None
    p_value: float | None = None
    confidence: float | None = None
    n_bootstrap: int | None = None
    n_bootstrap_used: int | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report; one not computed is method, n, estimate
        (None) and reason."""
        if self.reason is not None:
            return {"method": self.method, "n": self.n, "estimate": None, "reason": self.reason}
        return {f.name: getattr(self, f.name) for f in fields(self)}


def correlation_with_ci(
    x: np.ndarray,
    y: np.ndarray,
    method: Literal["spearman", "kendall", "pearson"],
    *,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    rng: np.random.Generator | None = None,
    resamples: np.ndarray | None = None,
) -> CorrelationCI:
    """One correlation with scipy's estimate and p-value and a percentile bootstrap CI.

    The bootstrap resamples pairs (ideas) with replacement; a resample in which either side
    is constant has no correlation and is left out (`n_bootstrap_used` says how many were
    kept). Kendall is tau-b, which corrects for the many ties of 1-10 scores.

    Parameters
    ----------
    x, y
        The paired values (judge score and human mean per idea).
    method
        ``"spearman"``, ``"kendall"`` (tau-b) or ``"pearson"``.
    n_bootstrap
        Bootstrap resamples (0: no interval).
    confidence
        Level of the interval, in (0, 1).
    rng
        Generator of the resamples (default: seed 0), unless `resamples` is given.
    resamples
        ``n_bootstrap x n`` indices already drawn by the caller.

    Returns
    -------
    CorrelationCI
        The estimate, p-value and interval; with fewer than 3 pairs or a constant side
        only method, n, estimate (None) and reason.
    """
    _check_confidence(confidence)
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    if n < MIN_IDEAS:
        reason = f"needs at least {MIN_IDEAS} ideas with both a judge and a human score, has {n}"
    elif np.ptp(x) == 0:
        reason = f"the judge gives all {n} ideas the same score ({x[0]:g})"
    elif np.ptp(y) == 0:
        reason = f"the human mean is the same for all {n} ideas ({y[0]:g})"
    else:
        reason = None
    if reason is not None:
        return CorrelationCI(method=method, n=n, estimate=None, reason=reason)
    point, rows_fn = _CORRELATIONS[method]
    res = point(x, y)
    used, ci_low, ci_high = 0, None, None
    if n_bootstrap > 0:
        if resamples is None:
            rng = rng if rng is not None else np.random.default_rng(0)
            resamples = rng.integers(0, n, size=(n_bootstrap, n))
        boot = rows_fn(x, y, resamples)
        used = int(np.isfinite(boot).sum())
        ci_low, ci_high = _interval(boot, confidence)
    return CorrelationCI(
        method=method,
        n=n,
        estimate=json_float(res.statistic),
        p_value=json_float(res.pvalue),
        confidence=confidence,
        n_bootstrap=n_bootstrap,
        n_bootstrap_used=used,
        ci_low=ci_low,
        ci_high=ci_high,
    )


def _metrics_to_use(
    frame: pd.DataFrame, judge_scores: pd.DataFrame, metrics: Sequence[str] | None
) -> list[str]:
    _validate_judge_scores(judge_scores)
    judged = list(dict.fromkeys(judge_scores["metric"].dropna()))
    if metrics is None:
        metrics = [m for m in judged if m in frame.columns]
        if not metrics:
            raise ValueError(
                f"no judge metric {judged} is a column of the review frame; "
                f"pass metrics= explicitly"
            )
    validate_frame(frame, metrics, require=("review_id", "idea_id"))
    return list(metrics)


_METHODS: tuple[Literal["spearman", "kendall", "pearson"], ...] = ("spearman", "kendall", "pearson")


@dataclass(frozen=True)
class MetricCorrelations:
    """The three correlations of one judge with the human mean on one metric.

    Attributes
    ----------
    metric
        The metric compared.
    n_ideas, n_reviews
        Ideas with both a judge score and a human mean, and their reviews (each once).
    n_ideas_without_judge, n_ideas_without_reviews
        Ideas reviewed but not judged, and judged but not reviewed (left out).
    spearman, kendall, pearson
        Each correlation (`correlation_with_ci`), on the same resamples.
    """

    metric: str
    n_ideas: int
    n_reviews: int
    n_ideas_without_judge: int
    n_ideas_without_reviews: int
    spearman: CorrelationCI
    kendall: CorrelationCI
    pearson: CorrelationCI

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report: the counts, then each correlation's dict."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        for method in _METHODS:
            out[method] = out[method].as_dict()
        return out


@dataclass(frozen=True)
class AbsoluteAgreement:
    """One judge's scores against the human means, per metric (`absolute_agreement`).

    Attributes
    ----------
    metrics
        The metrics compared.
    n_bootstrap, confidence, seed
        The intervals' resamples, level and seed.
    by_metric
        Metric → its `MetricCorrelations`.
    """

    metrics: list[str]
    n_bootstrap: int
    confidence: float
    seed: int
    by_metric: dict[str, MetricCorrelations]

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report."""
        return {
            "metrics": self.metrics,
            "n_bootstrap": self.n_bootstrap,
            "confidence": self.confidence,
            "seed": self.seed,
            "by_metric": {m: c.as_dict() for m, c in self.by_metric.items()},
        }


def absolute_agreement(
    frame: pd.DataFrame,
    judge_scores: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    *,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> AbsoluteAgreement:
    """Spearman, Kendall tau-b and Pearson between the judge's score and the human mean.

    Units are ideas with at least one parseable judge score and one human review for the
    metric; each review counts once. CIs are percentile bootstraps over ideas (all three
    correlations use the same resamples).

    Parameters
    ----------
    frame
        The review frame (module text).
    judge_scores
        One judge run's scores (module text).
    metrics
        The metrics compared; None: every judged metric that is a frame column.
    n_bootstrap
        Bootstrap resamples of ideas.
    confidence
        Level of the intervals, in (0, 1).
    seed
        Seed of the resamples.

    Returns
    -------
    AbsoluteAgreement
        The options used and, per metric, a `MetricCorrelations`.
    """
    metrics = _metrics_to_use(frame, judge_scores, metrics)
    by_metric: dict[str, MetricCorrelations] = {}
    for metric in metrics:
        _, x, y, info = _common(frame, judge_scores, metric)
        # Each correlation resamples with a fresh generator of `seed`, so all three use the
        # same resamples: draw them once.
        idx = (
            np.random.default_rng(seed).integers(0, len(x), size=(n_bootstrap, len(x)))
            if len(x) >= 3 and n_bootstrap > 0
            else None
        )
        spearman, kendall, pearson = (
            correlation_with_ci(
                x, y, method, n_bootstrap=n_bootstrap, confidence=confidence, resamples=idx
            )
            for method in _METHODS
        )
        by_metric[metric] = MetricCorrelations(
            **info, spearman=spearman, kendall=kendall, pearson=pearson
        )
    return AbsoluteAgreement(
        metrics=metrics,
        n_bootstrap=n_bootstrap,
        confidence=confidence,
        seed=seed,
        by_metric=by_metric,
    )


# ------------------------------------------------------------- chance baseline


@dataclass(frozen=True)
class ChanceAgreement:
    """What a random ranking's rank correlation with the human means is by chance
    (`chance_agreement`).

    Attributes
    ----------
    metric
        The metric the human means are of.
    n_ideas
        Ideas with a human mean (each review once), the ones ranked.
    n_rankings, seed, confidence
        The random rankings drawn, their seed, and the share of them the range holds.
    spearman, kendall
        {mean, sd, low, high}: the mean over the random rankings of Spearman's rho (or
        Kendall's tau-b) with the human means, its SD, and the central `confidence` range;
        empty when `reason` is set.
    reason
        Why nothing could be computed (too few ideas, no variation), else None.
    """

    metric: str
    n_ideas: int
    n_rankings: int
    seed: int
    confidence: float
    spearman: dict[str, Any]
    kendall: dict[str, Any]
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report."""
        return asdict(self)


def _summary(values: np.ndarray, confidence: float) -> dict[str, Any]:
    low, high = _interval(values, confidence)
    v = values[np.isfinite(values)]
    return {
        "mean": json_float(v.mean()) if v.size else None,
        "sd": json_float(v.std(ddof=1)) if v.size > 1 else None,
        "low": low,
        "high": high,
    }


def _kendall_against(y: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Kendall tau-b of y against each row of R, where the rows hold no ties."""
    n = len(y)
    if n > _KENDALL_VECTOR_MAX:
        return np.array([stats.kendalltau(y, r).statistic for r in R])
    iu = np.triu_indices(n, 1)
    sy = np.sign(y[iu[0]] - y[iu[1]])
    den = np.sqrt((sy**2).sum() * len(sy))
    step = max(1, 2_000_000 // max(1, len(sy)))
    out = [
        np.sign(R[s : s + step, iu[0]] - R[s : s + step, iu[1]]) @ sy / den
        for s in range(0, len(R), step)
    ]
    return np.concatenate(out)


def chance_agreement(
    frame: pd.DataFrame,
    metric: str,
    *,
    n_rankings: int = CHANCE_RANKINGS,
    confidence: float = 0.95,
    seed: int = 0,
) -> ChanceAgreement:
    """The agreement with the reviewers that a judge ranking the ideas at random gets:
    the distribution of Spearman's rho and Kendall's tau-b between the human mean per idea
    and `n_rankings` independent, uniformly random rankings of the ideas.

    A single random ranking is one draw from this distribution, and a fixed one can line
    up with anything the ideas' order carries (ids that sort by condition, say); the
    distribution depends on neither. Its mean is about 0 and, with no ties among the
    human means, its SD is 1 / sqrt(n - 1) for rho. It is what a judge's correlation is
    read against, not a judge: it has no CI and no p-value.

    Parameters
    ----------
    frame
        The review frame (module text).
    metric
        The metric whose human means are ranked against.
    n_rankings
        Random rankings drawn.
    confidence
        The share of random rankings the reported range holds, in (0, 1).
    seed
        Seed of the rankings.

    Returns
    -------
    ChanceAgreement
        The mean, SD and central range of each correlation; a reason instead when fewer
        than `MIN_IDEAS` ideas have a human mean or the means do not vary.
    """
    _check_confidence(confidence)
    human, _ = human_idea_means(frame, metric)
    y = human.to_numpy(float)
    n = len(y)
    base: dict[str, Any] = {
        "metric": metric,
        "n_ideas": n,
        "n_rankings": n_rankings,
        "seed": seed,
        "confidence": confidence,
    }
    reason = None
    if n < MIN_IDEAS:
        reason = f"needs at least {MIN_IDEAS} ideas with a human score, has {n}"
    elif np.ptp(y) == 0:
        reason = f"the human mean is the same for all {n} ideas ({y[0]:g})"
    elif n_rankings < 2:
        reason = f"needs at least 2 random rankings, asked for {n_rankings}"
    if reason is not None:
        return ChanceAgreement(**base, spearman={}, kendall={}, reason=reason)
    rng = np.random.default_rng(seed)
    R = rng.permuted(np.tile(np.arange(n, dtype=float), (n_rankings, 1)), axis=1)
    ranks = stats.rankdata(y)
    rc = ranks - ranks.mean()
    Rc = R - (n - 1) / 2
    rho = Rc @ rc / (np.sqrt((rc**2).sum()) * np.sqrt((Rc[0] ** 2).sum()))
    tau = _kendall_against(y, R)
    return ChanceAgreement(
        **base, spearman=_summary(rho, confidence), kendall=_summary(tau, confidence)
    )


# ----------------------------------------------------- Si et al. consistency, judge


# X, valid, n, total of `_Units` for a batch of replicates.
_UnitArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class _Units:
    """Per-unit arrays of one judged score matrix, computed once and shared by every batch.

    X (slots, units): scores with 0 where a slot is empty; valid its mask; n the reviews
    per unit; total their sum, added slot by slot as the split loop used to.
    """

    def __init__(self, P: np.ndarray) -> None:
        self.valid = ~np.isnan(P.T)
        self.X = np.where(self.valid, P.T, 0.0)
        self.n = self.valid.sum(0)
        self.total = np.zeros(P.shape[0])
        for x in self.X:
            self.total += x

    def broadcast(self, m: int) -> _UnitArrays:
        slots, units = self.X.shape
        return (
            np.broadcast_to(self.X[:, None, :], (slots, m, units)),
            np.broadcast_to(self.valid[:, None, :], (slots, m, units)),
            np.broadcast_to(self.n, (m, units)),
            np.broadcast_to(self.total, (m, units)),
        )

    def take(self, idx: np.ndarray) -> _UnitArrays:
        return self.X[:, idx], self.valid[:, idx], self.n[idx], self.total[idx]


def _judge_hits(C: np.ndarray, noise: np.ndarray, pred_top: np.ndarray, k: int) -> np.ndarray:
    """Per row: how many of the k units with the largest key C + noise * 0.5 half B
    predicts top, plus how many of the k with the smallest it does not; C holds integer
    ranks (as floats), 0 <= noise < 1.

    Equal to picking the k extremes with np.argpartition, without partitioning each row:
    counting the ranks finds the rank at each cut, every unit beyond a cut is in, and only
    the units tied at a cut (usually one) are ordered by their key.
    """
    reps, units = C.shape
    codes = C.astype(np.intp)
    n_codes = int(codes.max()) + 1
    offset = n_codes * np.arange(reps)[:, None]
    counts = np.bincount((codes + offset).ravel(), minlength=reps * n_codes)
    upto = np.cumsum(counts.reshape(reps, n_codes), axis=1)  # units with rank <= c
    low = (upto < k).sum(1)  # the rank of the k-th smallest
    high = (upto <= units - k).sum(1)  # the rank of the k-th largest
    below = np.where(low > 0, upto[np.arange(reps), np.maximum(low - 1, 0)], 0)
    above = units - upto[np.arange(reps), high]
    hits = (pred_top & (codes > high[:, None])).sum(1)
    hits += (codes < low[:, None]).sum(1) - (pred_top & (codes < low[:, None])).sum(1)
    for cut, wanted, largest in ((high, k - above, True), (low, k - below, False)):
        rows, cols = np.nonzero(codes == cut[:, None])
        key = C[rows, cols] + noise[rows, cols] * 0.5  # the key argpartition compared
        order = np.lexsort((-key if largest else key, rows))  # per row, those taken first
        rows, cols = rows[order], cols[order]
        first = np.searchsorted(rows, np.arange(reps))
        chosen = np.arange(rows.size) - first[rows] < wanted[rows]
        rows, cols = rows[chosen], cols[chosen]
        hits += np.bincount(rows, weights=pred_top[rows, cols] == largest, minlength=reps).astype(
            np.int64
        )
    return hits


def _judge_vs_half_batch(
    units: _UnitArrays,
    C: np.ndarray,
    rng: np.random.Generator,
    top_fraction: float,
    *,
    human: bool = True,
    log: list[Any] | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """For each replicate: (judge accuracy, human-human accuracy) on one random split.

    `units` is (X, valid, n, total) of `_Units` for the replicates: X and valid (slots,
    reps, units), n and total (reps, units); C (reps, units) the judge's dense score
    ranks. The reviews of each unit are split as in consistency.py; half B is the "ground
    truth" for both the judge's picks and half A's picks, so the two accuracies are
    paired. With `human=False` the human accuracy is not computed (its random draws are
    still made, so later batches see the same stream). `log` receives what a judge's
    accuracy needs besides its ranks: the generator state before the tie-breaking noise
    and half B's predictions (packed bits).
    """
    X, valid, n, total = units
    _, reps, n_units = X.shape
    h = n // 2 + ((n % 2 == 1) & (rng.random((reps, n_units)) < 0.5))
    need, left = h.astype(float), n.astype(float)  # small integers, exact as floats
    sum_a = np.zeros((reps, n_units))
    for x, ok in zip(X, valid, strict=True):
        take = rng.random((reps, n_units)) * left < need
        take &= ok
        np.add(sum_a, x, out=sum_a, where=take)
        need -= take
        left -= ok
    mean_a = sum_a / h
    mean_b = (total - sum_a) / (n - h)

    b = np.round(mean_b, _TIE_DECIMALS)
    med = _row_medians(b)
    pred_top = (b > med) | ((b == med) & (rng.random((reps, n_units)) < 0.5))
    k = int(np.floor(top_fraction * n_units))

    # Ties in the ranking are broken at random in every split, so a judge that ties many
    # ideas at the cut earns chance on them and no more.
    if log is not None:
        log += [rng.bit_generator.state, np.packbits(pred_top, axis=-1)]
    noise = rng.random((reps, n_units))
    judge = _judge_hits(C, noise, pred_top, k) / (2 * k)
    jitter = rng.random((reps, n_units)) * 10.0 ** -(_TIE_DECIMALS + 1)
    if not human:
        return judge, None
    top, bottom = _extremes_hits(np.round(mean_a, _TIE_DECIMALS) + jitter, pred_top, k)
    return judge, (top + bottom) / (2 * k)


def _generator(state: dict[str, Any]) -> np.random.Generator:
    """A generator that continues from `state` (a PCG64 state, as default_rng makes)."""
    rng = np.random.Generator(np.random.PCG64())
    rng.bit_generator.state = state
    return rng


def _run_batches(
    make: Callable[[np.random.Generator, int, int, bool], tuple[_UnitArrays | None, np.ndarray]],
    n_reps: int,
    per_rep: int,
    rng: np.random.Generator,
    top_fraction: float,
    n_units: int,
    *,
    human: bool = True,
    plan: list[Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean (judge, human) accuracy over `per_rep` splits for each of `n_reps` replicates
    (the human one empty with `human=False`).

    Everything but the judge's ranks is the same for every judge of the same units, seed
    and settings: an empty `plan` list records it batch by batch, and a filled one is
    replayed, which draws only the replicates' ranks and the tie-breaking noise again
    from the recorded generator states and gives the same numbers.
    """
    judge_means, human_means = [], []
    if plan:
        k = int(np.floor(top_fraction * n_units))
        for m, make_state, noise_state, packed, h in plan:
            _, C = make(_generator(make_state), m, per_rep, True)
            noise = _generator(noise_state).random((m * per_rep, n_units))
            pred_top = np.unpackbits(packed, axis=-1, count=n_units).astype(bool)
            j = _judge_hits(C, noise, pred_top, k) / (2 * k)
            judge_means.append(j.reshape(m, per_rep).mean(1))
            if h is not None:
                human_means.append(h)
        return np.concatenate(judge_means), (
            np.concatenate(human_means) if human_means else np.empty(0)
        )
    reps_per_chunk = max(1, _CELLS // (per_rep * max(1, n_units)))
    for s in range(0, n_reps, reps_per_chunk):
        m = min(reps_per_chunk, n_reps - s)
        log: list[Any] | None = None if plan is None else [m, rng.bit_generator.state]
        # each of the m replicates `per_rep` times in a row
        units, C = make(rng, m, per_rep, False)
        assert units is not None
        j, h = _judge_vs_half_batch(units, C, rng, top_fraction, human=human, log=log)
        judge_means.append(j.reshape(m, per_rep).mean(1))
        if h is not None:
            human_means.append(h.reshape(m, per_rep).mean(1))
        if plan is not None and log is not None:
            plan.append((*log, human_means[-1] if h is not None else None))
    if not judge_means:
        return np.empty(0), np.empty(0)
    return np.concatenate(judge_means), (
        np.concatenate(human_means) if human_means else np.empty(0)
    )


def _judged_units(
    frame: pd.DataFrame,
    judge: pd.Series,
    metric: str,
    rows: Rows,
    cache: dict[Any, Any] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The review matrix of the units whose idea the judge scored (units x review slots),
    those units' idea ids, and which of all the units had a judge score. `cache` (shared
    by the judges of one report) keeps the frame's score matrix for the next judge; the
    entry holds the frame itself, so it is only reused for that very frame."""
    key = ("score_matrix", id(frame), metric, rows)
    hit = cache.get(key) if cache is not None else None
    if hit is not None and hit[0] is frame:
        wide = hit[1]
    else:
        wide = score_matrix(frame, metric, rows=rows)
        if cache is not None:
            cache[key] = (frame, wide)
    unit_ideas = (
        wide.index.get_level_values("idea_id") if rows == "all" else wide.index
    ).to_numpy()
    # A hash lookup: np.isin sorts object arrays, seconds at 10,000 ideas.
    has_judge = pd.Index(unit_ideas).isin(judge.index)
    wide, unit_ideas = wide[has_judge], unit_ideas[has_judge]
    P = wide.to_numpy(float)
    # Drop slots that are empty for every remaining unit.
    P = P[:, ~np.all(np.isnan(P), axis=0)] if P.size else P
    return P, unit_ideas, has_judge


def _units_digest(P: np.ndarray, unit_ideas: np.ndarray) -> str:
    """A digest of a judge's review matrix and its units' ideas (a cache key)."""
    ideas = "\x1f".join(map(str, unit_ideas)).encode()
    return hashlib.sha256(P.tobytes() + ideas).hexdigest()


def _too_few_judged_units(n_units: int, top_fraction: float) -> str:
    """Why the judge's consistency cannot be computed on `n_units` units."""
    need = int(math.ceil(1 / top_fraction))
    return (
        "no idea has both a judge score and >= 2 human reviews"
        if n_units == 0
        else f"{n_units} units with a judge score and >= 2 reviews are too few to pick a "
        f"top {percent_text(top_fraction, 0)} (need at least {need})"
    )


@dataclass
class JudgeConsistency:
    """Si et al.'s consistency of one judge on one metric (`judge_consistency`).

    Attributes
    ----------
    metric, rows
        The metric and which rows counted (`Resampling.rows`).
    n_units
        Units with >= 2 reviews whose idea the judge scored.
    n_reviews
        Reviews in those units.
    n_selected
        Units picked per split: the top and the bottom ``top_fraction`` together.
    n_units_without_judge
        Units with >= 2 reviews the judge did not score (left out).
    top_fraction, seed, n_splits
        The options used (`Resampling`; the draws may have been scaled down).
    chance
        Balanced accuracy of guessing: 0.5.
    judge_constant
        Whether the judge gave every unit the same score (its picks are then random).
    ceiling
        The human-human consistency on the same units and draws
        (`consistency.inter_reviewer_consistency`'s dict), or None.
    reason
        Why the figure cannot be computed; None when it was.
    balanced_accuracy
        The judge's balanced accuracy, mean over the splits; None when not computable.
    split_sd, split_low, split_high
        Spread of the per-split accuracies: sd and 2.5 / 97.5 % quantiles.
    human_same_splits
        Half A's accuracy against the same half B on the same splits (paired).
    difference
        ``balanced_accuracy - human_same_splits``.
    confidence, n_bootstrap, splits_per_resample
        The bootstrap's options.
    ci_low, ci_high
        Percentile bootstrap interval (over units) of the judge's accuracy.
    difference_ci_low, difference_ci_high
        The same for the paired difference.
    n_permutations
        Shuffles of the judge's scores across units for the null.
    null_mean
        Mean accuracy under the null.
    p_value
        ``(1 + #null >= observed) / (1 + n_permutations)``; None without permutations.
    """

    metric: str
    rows: Rows
    n_units: int
    n_reviews: int
    n_selected: int
    n_units_without_judge: int
    top_fraction: float
    seed: int
    n_splits: int
    chance: float
    judge_constant: bool
    ceiling: dict[str, Any] | None
    reason: str | None
    balanced_accuracy: float | None = None
    split_sd: float | None = None
    split_low: float | None = None
    split_high: float | None = None
    human_same_splits: float | None = None
    difference: float | None = None
    confidence: float | None = None
    n_bootstrap: int | None = None
    splits_per_resample: int | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    difference_ci_low: float | None = None
    difference_ci_high: float | None = None
    n_permutations: int | None = None
    null_mean: float | None = None
    p_value: float | None = None

    @property
    def computed(self) -> bool:
        return self.reason is None

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report: the fields in order; a figure that could
        not be computed stops at `balanced_accuracy` (None) beside its `reason`."""
        names = [f.name for f in fields(self)]
        if not self.computed:
            names = names[: names.index("balanced_accuracy") + 1]
        return {name: getattr(self, name) for name in names}


def _judge_observed(
    out: JudgeConsistency,
    *,
    P: np.ndarray,
    codes: np.ndarray,
    rng: np.random.Generator,
    resampling: Resampling,
    plans: dict[str, list[Any]] | None = None,
) -> float:
    """Fill `out` with the judge's and the paired human accuracy over the splits (the
    resampled figures left empty); the judge's mean balanced accuracy. `plans`: see
    `_run_batches`."""
    r = resampling
    n_units = P.shape[0]
    units = _Units(P)

    def observed(
        g: np.random.Generator, m: int, per_rep: int, codes_only: bool
    ) -> tuple[_UnitArrays | None, np.ndarray]:
        C = np.broadcast_to(codes, (m * per_rep, n_units))
        return None if codes_only else units.broadcast(m * per_rep), C

    judge_acc, human_acc = _run_batches(
        observed, r.n_splits, 1, rng, r.top_fraction, n_units,
        plan=None if plans is None else plans["observed"],
    )  # fmt: skip
    acc = float(judge_acc.mean())
    out.balanced_accuracy = acc
    out.split_sd = json_float(judge_acc.std(ddof=1)) if r.n_splits > 1 else None
    out.split_low = json_float(np.quantile(judge_acc, 0.025))
    out.split_high = json_float(np.quantile(judge_acc, 0.975))
    out.human_same_splits = float(human_acc.mean())
    out.difference = float(acc - human_acc.mean())
    out.confidence = r.confidence
    out.n_bootstrap = r.n_bootstrap
    out.splits_per_resample = r.splits_per_resample
    out.n_permutations = r.n_permutations
    return acc


def _judge_resampling(
    out: JudgeConsistency,
    *,
    P: np.ndarray,
    codes: np.ndarray,
    rng: np.random.Generator,
    acc: float,
    resampling: Resampling,
    plans: dict[str, list[Any]] | None = None,
) -> None:
    """Fill `out` with the bootstrap CIs over units and the permutation p-value. `plans`:
    see `_run_batches`."""
    r = resampling
    n_units = P.shape[0]
    units = _Units(P)
    if r.n_bootstrap > 0:

        def resampled(
            g: np.random.Generator, m: int, per_rep: int, codes_only: bool
        ) -> tuple[_UnitArrays | None, np.ndarray]:
            idx = np.repeat(g.integers(0, n_units, size=(m, n_units)), per_rep, axis=0)
            return None if codes_only else units.take(idx), codes[idx]

        bj, bh = _run_batches(
            resampled, r.n_bootstrap, r.splits_per_resample, rng, r.top_fraction, n_units,
            plan=None if plans is None else plans["bootstrap"],
        )  # fmt: skip
        out.ci_low, out.ci_high = _interval(bj, r.confidence)
        out.difference_ci_low, out.difference_ci_high = _interval(bj - bh, r.confidence)
    if r.n_permutations > 0:

        def permuted(
            g: np.random.Generator, m: int, per_rep: int, codes_only: bool
        ) -> tuple[_UnitArrays | None, np.ndarray]:
            shuffled = g.permuted(np.broadcast_to(codes, (m, n_units)), axis=1)
            C = np.repeat(shuffled, per_rep, axis=0)
            return None if codes_only else units.broadcast(m * per_rep), C

        null, _ = _run_batches(
            permuted, r.n_permutations, r.splits_per_resample, rng, r.top_fraction, n_units,
            human=False, plan=None if plans is None else plans["permutations"],
        )  # fmt: skip
        out.null_mean = json_float(null.mean())
        out.p_value = float((1 + np.sum(null >= acc - 1e-12)) / (1 + r.n_permutations))


def _judge_ceiling(
    frame: pd.DataFrame,
    judge: pd.Series,
    metric: str,
    *,
    resampling: Resampling,
    ceiling_cache: dict[Any, Any] | None,
) -> dict[str, Any]:
    """The human-human consistency on the judged ideas, from `ceiling_cache` when another
    judge with the same ideas and settings has computed it."""
    ideas = np.sort(judge.index.astype(str).to_numpy())
    # No permutations: the ceiling is shown with its interval, not tested.
    r = replace(resampling, n_permutations=0)
    key = (metric, r, hashlib.sha256("\x1f".join(ideas).encode()).hexdigest())
    cache = ceiling_cache if ceiling_cache is not None else {}
    if key not in cache:
        cache[key] = inter_reviewer_consistency(
            frame[frame["idea_id"].isin(judge.index)], metric, **r.keywords()
        ).as_dict()
    return cache[key]


def judge_consistency(
    frame: pd.DataFrame,
    judge_scores: pd.DataFrame,
    metric: str = "overall",
    *,
    resampling: Resampling = DEFAULT_RESAMPLING,
    ceiling: bool = True,
    ceiling_cache: dict[Any, Any] | None = None,
) -> JudgeConsistency:
    """Si et al.'s consistency metric with the judge in the place of one half of the reviewers.

    Units are those of `consistency.score_matrix` (>= 2 reviews; `resampling.rows` as
    there) whose idea the judge scored. In each split the reviews of every unit are halved
    exactly as for the human-human figure; the judge's ranking picks the top and bottom
    `top_fraction` of units (ties at the cut broken at random), half B predicts "top" above
    its median, and the score is the balanced accuracy, averaged over `n_splits` splits.
    Half A's picks are scored against the same half B, which gives a paired human-human
    value and the difference judge - human.

    The bootstrap resamples units (each replicate the mean of `splits_per_resample`
    splits) for CIs of the judge's accuracy and of the paired difference; the permutation
    null shuffles the judge's scores across units.

    Parameters
    ----------
    frame
        The review frame (module text).
    judge_scores
        One judge run's scores (module text); only `metric`'s rows are read.
    metric
        The review-form metric compared.
    resampling
        Rows, top fraction, splits, bootstrap, permutations, confidence and seed.
    ceiling
        Also compute the human-human value of `inter_reviewer_consistency` on the same
        units with the same options (its `n_permutations` 0).
    ceiling_cache
        A dict shared by several judges: the ceiling is computed once for each metric,
        options and set of judged ideas, and the splits, resamples and permutations of the
        units (none depends on the judge) are recorded by the first judge and replayed by
        the next ones instead of drawn again.

    Returns
    -------
    JudgeConsistency
        The figures; `reason` says why they could not be computed (too few units).
    """
    r = resampling
    judge = judge_idea_scores(judge_scores, metric)
    P, unit_ideas, has_judge = _judged_units(frame, judge, metric, r.rows, ceiling_cache)
    n_units = P.shape[0]
    J = judge.reindex(unit_ideas).to_numpy(float)
    k = int(np.floor(r.top_fraction * n_units))
    out = JudgeConsistency(
        metric=metric,
        rows=r.rows,
        n_units=int(n_units),
        n_reviews=int(np.sum(~np.isnan(P))),
        n_selected=2 * k,
        n_units_without_judge=int((~has_judge).sum()),
        top_fraction=r.top_fraction,
        seed=r.seed,
        n_splits=r.n_splits,
        chance=0.5,
        judge_constant=bool(n_units > 0 and np.ptp(J) == 0),
        ceiling=None,
        reason=None,
    )
    if k < 1:
        out.reason = _too_few_judged_units(n_units, r.top_fraction)
        return out

    rng = np.random.default_rng(r.seed)
    codes = np.unique(np.round(J, _TIE_DECIMALS), return_inverse=True)[1].astype(float)
    # The splits, resamples and permutations of units do not depend on the judge (nor on
    # the confidence level): the first judge of these units and options records them, the
    # next ones replay them.
    cache = ceiling_cache if ceiling_cache is not None else {}
    plan_key = ("splits", replace(r, confidence=0.5), _units_digest(P, unit_ideas))
    plans = cache.get(plan_key) or {"observed": [], "bootstrap": [], "permutations": []}
    acc = _judge_observed(out, P=P, codes=codes, rng=rng, resampling=r, plans=plans)
    _judge_resampling(out, P=P, codes=codes, rng=rng, acc=acc, resampling=r, plans=plans)
    cache.setdefault(plan_key, plans)
    if ceiling:
        out.ceiling = _judge_ceiling(
            frame, judge, metric, resampling=r, ceiling_cache=ceiling_cache
        )
    return out


# ------------------------------------------------------------------------ pairwise


def _orient(a: pd.Series, b: pd.Series) -> tuple[pd.Series, pd.Series, pd.Series]:
    """(x, y, swapped): x the id that sorts first as a string; swapped where x is b."""
    swapped = a.astype(str) > b.astype(str)
    x = a.where(~swapped, b)
    y = b.where(~swapped, a)
    return x, y, swapped


def _validate_pairs(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    require_columns(df, columns)
    if len(df) and (df["idea_a"].astype(str) == df["idea_b"].astype(str)).any():
        raise ValueError(f"{what}: a pair compares an idea with itself")


def judge_pair_preferences(judge_pairs: pd.DataFrame) -> pd.DataFrame:
    """The judge's preference per (dimension, pair), summed over both orders and rounds.

    Each parseable verdict scores +1 for the winner's side, 0 for a tie (the
    scientific-ideation-eval benchmark's summation); the preference is the side with the
    positive margin, "tie" at 0 (which is also what a verdict that flips with the order
    gives). Pairs whose every verdict was unparseable have no preference and are left out.

    Parameters
    ----------
    judge_pairs
        One judge run's pairwise outcomes (module text).

    Returns
    -------
    pandas.DataFrame
        dimension, x, y, margin (x wins - y wins), n_verdicts, n_unparseable, preference
        in {"x", "y", "tie"}.
    """
    _validate_pairs(judge_pairs, JUDGE_PAIR_COLUMNS, "judge_pairs")
    bad = set(judge_pairs["verdict"].dropna()) - set(VERDICTS)
    if bad or judge_pairs["verdict"].isna().any():
        raise ValueError(f"verdict must be one of {VERDICTS}; found {sorted(map(str, bad))}")
    x, y, swapped = _orient(judge_pairs["idea_a"], judge_pairs["idea_b"])
    v = judge_pairs["verdict"]
    a_sign = v.map({"A": 1, "B": -1, "tie": 0, "unparseable": 0}).astype(int)
    df = pd.DataFrame(
        {
            "dimension": judge_pairs["dimension"],
            "x": x,
            "y": y,
            "margin": np.where(swapped, -a_sign, a_sign),
            "parsed": (v != "unparseable").astype(int),
            "unparseable": (v == "unparseable").astype(int),
        }
    )
    g = df.groupby(["dimension", "x", "y"], sort=True).agg(
        margin=("margin", "sum"), n_verdicts=("parsed", "sum"), n_unparseable=("unparseable", "sum")
    )
    g = g[g["n_verdicts"] > 0].reset_index()
    g["preference"] = np.select([g["margin"] > 0, g["margin"] < 0], ["x", "y"], "tie")
    return g


def human_pair_winners(human_pairs: pd.DataFrame) -> pd.DataFrame:
    """Reviewers' pair ratings in canonical orientation.

    Parameters
    ----------
    human_pairs
        The reviewers' pair ratings (module text).

    Returns
    -------
    pandas.DataFrame
        reviewer_id, dimension, x, y, winner in {"x", "y", "tie"}.
    """
    _validate_pairs(human_pairs, HUMAN_PAIR_COLUMNS, "human_pairs")
    bad = set(human_pairs["choice"].dropna()) - set(CHOICES)
    if bad or human_pairs["choice"].isna().any():
        raise ValueError(f"choice must be one of {CHOICES}; found {sorted(map(str, bad))}")
    shown = human_pairs["shown_first"].astype(str)
    a, b = human_pairs["idea_a"], human_pairs["idea_b"]
    if not (shown.eq(a.astype(str)) | shown.eq(b.astype(str))).all():
        raise ValueError("human_pairs: shown_first must be idea_a or idea_b")
    first_is_a = shown.eq(a.astype(str))
    choice = human_pairs["choice"]
    winner_ab = np.select([choice == "tie", (choice == "first") == first_is_a], ["tie", "a"], "b")
    x, y, swapped = _orient(a, b)
    flip = {"a": "y", "b": "x", "tie": "tie"}
    keep = {"a": "x", "b": "y", "tie": "tie"}
    winner = [(flip if s else keep)[w] for w, s in zip(winner_ab, swapped.to_numpy(), strict=True)]
    return pd.DataFrame(
        {
            "reviewer_id": human_pairs["reviewer_id"].to_numpy(),
            "dimension": human_pairs["dimension"].to_numpy(),
            "x": x.to_numpy(),
            "y": y.to_numpy(),
            "winner": winner,
        }
    )


_SWAP = {"x": "y", "y": "x", "tie": "tie"}


def symmetric_kappa(first: Sequence[str], second: Sequence[str]) -> float | None:
    """Cohen's kappa over {"x", "y", "tie"} with each item counted in both orientations.

    Which idea of a pair is called x is arbitrary, and plain kappa moves with that choice
    (through the marginals). Counting every item once as is and once with x and y swapped
    makes the marginals of x and y equal and the value independent of the labelling;
    observed agreement is unchanged. Equals sklearn's cohen_kappa_score on the doubled
    lists.

    Parameters
    ----------
    first, second
        Labels of the same items, in the same order.

    Returns
    -------
    float or None
        Kappa; None when expected agreement is 1 (every label the same).
    """
    f = list(first) + [_SWAP[v] for v in first]
    s = list(second) + [_SWAP[v] for v in second]
    n = len(f)
    if n == 0:
        return None
    idx = {lab: i for i, lab in enumerate(LABELS)}
    cm = np.zeros((3, 3))
    np.add.at(cm, ([idx[v] for v in f], [idx[v] for v in s]), 1.0)
    p_o = np.trace(cm) / n
    p_e = float(cm.sum(1) @ cm.sum(0)) / n**2
    return None if p_e >= 1 - 1e-12 else json_float((p_o - p_e) / (1 - p_e))


@dataclass(frozen=True)
class LabelAgreement:
    """Accuracy and symmetric kappa of two label lists (`label_agreement`).

    Attributes
    ----------
    n, accuracy, kappa
        Every item, the share on which the two lists agree, and the symmetric kappa.
    n_without_ties, accuracy_without_ties, kappa_without_ties
        The same over the items neither list calls a tie.
    confusion
        3 x 3 counts, rows the first list, columns the second, in the order of `labels`.
    labels
        LABELS.
    """

    n: int
    accuracy: float | None
    kappa: float | None
    n_without_ties: int
    accuracy_without_ties: float | None
    kappa_without_ties: float | None
    confusion: list[list[int]]
    labels: list[str]

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report: {n, with_ties: {n, accuracy, kappa},
        without_ties: {n, n_dropped, accuracy, kappa}, confusion, labels}."""
        return {
            "n": self.n,
            "with_ties": {"n": self.n, "accuracy": self.accuracy, "kappa": self.kappa},
            "without_ties": {
                "n": self.n_without_ties,
                "n_dropped": self.n - self.n_without_ties,
                "accuracy": self.accuracy_without_ties,
                "kappa": self.kappa_without_ties,
            },
            "confusion": self.confusion,
            "labels": self.labels,
        }


def label_agreement(first: Sequence[str], second: Sequence[str]) -> LabelAgreement:
    """Accuracy and symmetric kappa of two label lists, with ties and with tied items dropped.

    Parameters
    ----------
    first, second
        Labels in {"x", "y", "tie"} of the same items, in the same order.

    Returns
    -------
    LabelAgreement
        Accuracy and kappa over every item and over the items neither list calls a tie,
        and the confusion counts.
    """
    f, s = np.asarray(first, dtype=object), np.asarray(second, dtype=object)
    n = len(f)
    decisive = (f != "tie") & (s != "tie")
    idx = {lab: i for i, lab in enumerate(LABELS)}
    cm = np.zeros((3, 3), int)
    if n:
        np.add.at(cm, ([idx[v] for v in f], [idx[v] for v in s]), 1)
    nd = int(decisive.sum())
    return LabelAgreement(
        n=n,
        accuracy=json_float(np.mean(f == s)) if n else None,
        kappa=symmetric_kappa(list(f), list(s)),
        n_without_ties=nd,
        accuracy_without_ties=json_float(np.mean(f[decisive] == s[decisive])) if nd else None,
        kappa_without_ties=symmetric_kappa(list(f[decisive]), list(s[decisive])),
        confusion=cm.tolist(),
        labels=list(LABELS),
    )


def _human_mean_preferences(
    prefs: pd.DataFrame, frame: pd.DataFrame, dimension: str
) -> tuple[list[str], list[str], int]:
    means, _ = human_idea_means(frame, dimension)
    mx = prefs["x"].map(means)
    my = prefs["y"].map(means)
    ok = mx.notna() & my.notna()
    dx = np.round(mx[ok].to_numpy(float), _TIE_DECIMALS)
    dy = np.round(my[ok].to_numpy(float), _TIE_DECIMALS)
    human = np.select([dx > dy, dx < dy], ["x", "y"], "tie").tolist()
    return prefs.loc[ok, "preference"].tolist(), human, int((~ok).sum())


def _human_human(winners: pd.DataFrame) -> tuple[list[str], list[str], int]:
    """All unordered reviewer pairs rating the same (dimension, pair), in both rater orders."""
    first: list[str] = []
    second: list[str] = []
    n_pairs = 0
    for _, grp in winners.groupby(["x", "y"], sort=True):
        labels = grp["winner"].tolist()
        if len(labels) < 2:
            continue
        n_pairs += 1
        for i in range(len(labels)):
            for j in range(i + 1, len(labels)):
                first.append(labels[i])
                second.append(labels[j])
    return first, second, n_pairs


@dataclass(frozen=True)
class PairwiseAgreement:
    """A judge's pairwise preferences against the reviewers (`pairwise_agreement`).

    Attributes
    ----------
    dimensions
        The dimensions compared.
    by_dimension
        Dimension → its block as the report shows it (JSON-ready): n_judged_pairs,
        judge_tie_rate, vs_human_ratings, human_human and vs_human_means.
    """

    dimensions: list[str]
    by_dimension: dict[str, dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report."""
        return {"dimensions": self.dimensions, "by_dimension": self.by_dimension}


def pairwise_agreement(
    judge_pairs: pd.DataFrame,
    *,
    human_pairs: pd.DataFrame | None = None,
    frame: pd.DataFrame | None = None,
    dimensions: Sequence[str] | None = None,
) -> PairwiseAgreement:
    """The judge's pairwise preferences against reviewers' pair ratings and review means.

    Per dimension:
    - vs_human_ratings: every reviewer rating of a pair the judge also compared is one item
      (judge preference vs that reviewer's choice);
    - vs_human_means (needs `frame` with the dimension as a metric column): every judged
      pair whose two ideas both have reviews is one item; the humans prefer the idea with
      the higher mean (equal means are a tie);
    - human_human: for pairs rated by >= 2 reviewers, every unordered pair of those
      reviewers is one item; judge_on_same_pairs is the judge against each rating of the
      same pairs, so the two are on equal footing.

    Parameters
    ----------
    judge_pairs
        One judge run's pairwise outcomes (module text).
    human_pairs
        The reviewers' pair ratings; None: no comparison with ratings.
    frame
        The review frame; None: no comparison with review means.
    dimensions
        The dimensions compared; None: every dimension the judge compared.

    Returns
    -------
    PairwiseAgreement
        The dimensions and, per dimension, the report's block {vs_human_ratings,
        vs_human_means, human_human, ...}; each item block is `label_agreement`'s dict
        plus its n, or a reason when it cannot be computed. Ratings of pairs the judge
        never compared are counted in n_ratings_unmatched.
    """
    prefs_all = judge_pair_preferences(judge_pairs)
    winners_all = human_pair_winners(human_pairs) if human_pairs is not None else None
    if dimensions is None:
        dimensions = list(dict.fromkeys(prefs_all["dimension"]))
    by_dim: dict[str, Any] = {}
    for dim in dimensions:
        prefs = prefs_all[prefs_all["dimension"] == dim]
        block: dict[str, Any] = {
            "dimension": dim,
            "n_judged_pairs": len(prefs),
            "judge_tie_rate": json_float((prefs["preference"] == "tie").mean())
            if len(prefs)
            else None,
        }
        if winners_all is None:
            block["vs_human_ratings"] = block["human_human"] = _na("no human pair ratings given")
        else:
            winners = winners_all[winners_all["dimension"] == dim]
            merged = winners.merge(prefs[["x", "y", "preference"]], on=["x", "y"], how="left")
            matched = merged[merged["preference"].notna()]
            vs = label_agreement(
                matched["preference"].tolist(), matched["winner"].tolist()
            ).as_dict()
            vs.update(
                n_pairs=int(matched[["x", "y"]].drop_duplicates().shape[0]),
                n_ratings_unmatched=int(merged["preference"].isna().sum()),
            )
            if not len(matched):
                vs["reason"] = "no pair was both judged and rated by a reviewer"
            block["vs_human_ratings"] = vs
            f, s, n_multi = _human_human(winners)
            # Which of two reviewers is "first" is arbitrary: kappa counts both orders.
            dec = [(a, b) for a, b in zip(f, s, strict=True) if "tie" not in (a, b)]
            fd, sd = [a for a, _ in dec], [b for _, b in dec]
            hh = replace(
                label_agreement(f, s),
                kappa=symmetric_kappa(f + s, s + f),
                kappa_without_ties=symmetric_kappa(fd + sd, sd + fd),
            ).as_dict()
            hh["n_pairs"] = n_multi
            if n_multi == 0:
                hh["reason"] = "no pair was rated by two or more reviewers"
            multi = winners.groupby(["x", "y"])["winner"].transform("size") >= 2
            same = merged[multi.to_numpy() & merged["preference"].notna().to_numpy()]
            hh["judge_on_same_pairs"] = label_agreement(
                same["preference"].tolist(), same["winner"].tolist()
            ).as_dict()
            block["human_human"] = hh
        if frame is None:
            block["vs_human_means"] = _na("no review frame given")
        elif dim not in frame.columns:
            block["vs_human_means"] = _na(f"the review frame has no metric column {dim!r}")
        else:
            j, h, n_missing = _human_mean_preferences(prefs, frame, dim)
            vm = label_agreement(j, h).as_dict()
            vm["n_pairs_without_reviews"] = n_missing
            if not j:
                vm["reason"] = "no judged pair has reviews for both ideas"
            block["vs_human_means"] = vm
        by_dim[dim] = block
    return PairwiseAgreement(dimensions=list(dimensions), by_dimension=by_dim)


# ---------------------------------------------------------------------- top-k overlap


def _top_probability(values: np.ndarray, k: int) -> np.ndarray:
    """P(idea in the top k) when ties at the cut are broken uniformly at random."""
    v = np.round(values, _TIE_DECIMALS)
    cut = np.sort(v)[::-1][k - 1]
    above = v > cut
    at = v == cut
    p = above.astype(float)
    p[at] = (k - above.sum()) / at.sum()
    return p


@dataclass(frozen=True)
class TopKOverlap:
    """How far one judge's top ideas on one metric are the reviewers' (`top_k_overlap`).

    Attributes
    ----------
    metric
        The metric compared.
    n_ideas
        Ideas with both a judge score and a human mean.
    n_reviews
        Reviews of those ideas (each once).
    n_ideas_without_judge, n_ideas_without_reviews
        Ideas reviewed but not judged, and judged but not reviewed (left out).
    k
        Size of each top set used; `k_requested` is what was asked (a share or a count).
    overlap
        Expected number of ideas in both top sets over the tie-breaking draws; None when
        not computable (`reason` says why).
    share
        ``overlap / k``.
    expected_by_chance
        ``k * k / n_ideas``, the overlap of two independent random k-sets.
    lift
        ``overlap / expected_by_chance``.
    p_value
        Hypergeometric P(overlap >= observed, rounded down) under random selection.
    n_tied_at_cut_judge, n_tied_at_cut_human
        Ideas whose place in the top set was decided by a tie at the cut.
    ideas
        Every idea with a chance to be in either top set: idea_id, judge_score,
        human_mean, p_judge_top, p_human_top.
    reason
        Why the overlap cannot be computed; None when it was.
    """

    metric: str
    n_ideas: int
    n_reviews: int
    n_ideas_without_judge: int
    n_ideas_without_reviews: int
    k: int
    k_requested: float | int
    overlap: float | None
    share: float | None = None
    expected_by_chance: float | None = None
    lift: float | None = None
    p_value: float | None = None
    n_tied_at_cut_judge: int | None = None
    n_tied_at_cut_human: int | None = None
    ideas: list[dict[str, Any]] | None = None
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report; one not computed stops at `overlap` (None)
        beside its `reason`."""
        names = [f.name for f in fields(self)]
        if self.overlap is None:
            names = [*names[: names.index("overlap") + 1], "reason"]
        return {name: getattr(self, name) for name in names}


def top_k_overlap(
    frame: pd.DataFrame,
    judge_scores: pd.DataFrame,
    metric: str = "overall",
    *,
    k: float | int = 0.25,
) -> TopKOverlap:
    """How many of the humans' k best ideas are among the judge's k best (Si et al. Table 12).

    Ideas with both a judge score and a human mean take part (n). Ties at the cut are
    broken at random, and the overlap reported is its expectation over those draws (so it
    can be fractional). Chance is k*k/n (two independent random k-sets); p is the
    hypergeometric P(overlap >= observed, rounded down) under random selection.

    Parameters
    ----------
    frame
        The review frame (module text).
    judge_scores
        One judge run's scores (module text).
    metric
        The metric compared.
    k
        Below 1 a share of n (floored, at least 1); an integer >= 1 a count.

    Returns
    -------
    TopKOverlap
        The overlap, its chance level and p-value, and the ideas near either cut; its
        `reason` says why it is None (no common idea, or k not below n).
    """
    common, x, y, info = _common(frame, judge_scores, metric)
    n = len(common)
    if isinstance(k, bool) or k <= 0:
        raise ValueError("k must be a share in (0, 1) or a count >= 1")
    kk = int(k) if k >= 1 else max(1, int(math.floor(k * n)))
    base = {**info, "k": kk, "k_requested": k}
    if n == 0:
        return TopKOverlap(
            **base, overlap=None, reason="no idea has both a judge and a human score"
        )
    if kk >= n:
        return TopKOverlap(**base, overlap=None, reason=f"k = {kk} is not below the {n} ideas")
    pj, ph = _top_probability(x, kk), _top_probability(y, kk)
    overlap = float(pj @ ph)
    chance = kk * kk / n
    show = (pj > 0) | (ph > 0)
    ideas = [
        {
            "idea_id": _py(i),
            "judge_score": json_float(a),
            "human_mean": json_float(b),
            "p_judge_top": json_float(p),
            "p_human_top": json_float(q),
        }
        for i, a, b, p, q in zip(common[show], x[show], y[show], pj[show], ph[show], strict=True)
    ]
    return TopKOverlap(
        **base,
        overlap=overlap,
        share=overlap / kk,
        expected_by_chance=chance,
        lift=overlap / chance,
        p_value=json_float(stats.hypergeom.sf(math.floor(overlap + 1e-9) - 1, n, kk, kk)),
        n_tied_at_cut_judge=int(((pj > 0) & (pj < 1)).sum()),
        n_tied_at_cut_human=int(((ph > 0) & (ph < 1)).sum()),
        ideas=ideas,
        reason=None,
    )


# ------------------------------------------------------------------ diagnostics


def _rate(hits: np.ndarray, what: str) -> dict[str, Any]:
    n = int(hits.size)
    if n == 0:
        return {"n": 0, "rate": None, "p_value": None, "reason": f"no {what}"}
    k = int(hits.sum())
    return {
        "n": n,
        "k": k,
        "rate": k / n,
        "p_value": json_float(stats.binomtest(k, n, 0.5).pvalue),
        "reason": None,
    }


def _winner_ids(pairs: pd.DataFrame) -> pd.Series:
    return pairs["idea_a"].where(pairs["verdict"] == "A", pairs["idea_b"])


def _cost_per_idea(df: pd.DataFrame | None, idea_columns: Sequence[str]) -> dict[str, Any]:
    if df is None or "cost" not in df.columns:
        return {"value": None, "total_cost": None, "n_ideas": None, "reason": NO_COSTS}
    ideas = pd.unique(pd.concat([df[c] for c in idea_columns], ignore_index=True))
    total = float(pd.to_numeric(df["cost"], errors="coerce").fillna(0).sum())
    n = len(ideas)
    return {
        "value": total / n if n else None,
        "total_cost": total,
        "n_ideas": n,
        "reason": None if n else "no ideas judged",
    }


@dataclass(frozen=True)
class JudgeDiagnostics:
    """Biases and failure rates of one judge run (`judge_diagnostics`).

    Attributes
    ----------
    pairwise
        The block of its pairwise outcomes as the report shows it (JSON-ready); None
        without them.
    direct
        The block of its direct scores; None without them.
    """

    pairwise: dict[str, Any] | None
    direct: dict[str, Any] | None

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report: the blocks computed, pairwise first."""
        blocks = {"pairwise": self.pairwise, "direct": self.direct}
        return {name: block for name, block in blocks.items() if block is not None}


def judge_diagnostics(
    *,
    judge_pairs: pd.DataFrame | None = None,
    judge_scores: pd.DataFrame | None = None,
    lengths: Mapping[Any, float] | pd.Series | None = None,
) -> JudgeDiagnostics:
    """Biases and failure rates of one judge run, from whatever of its outputs is given.

    Pairwise (`judge_pairs`):
    - position_consistency: verdicts on the same pair and dimension (and round) shown in
      both orders, matched one to one; consistent when both name the same winner or both
      say tie. n = matched couples with both verdicts parseable.
    - first_position_win_rate: share of decisive verdicts won by the idea shown first
      (0.5 = no position bias), with a two-sided binomial p.
    - longer_text_win_rate: share of decisive verdicts between texts of unequal length won
      by the longer text. Without lengths: None with reason "cannot compute: no text
      lengths".
    - tie_rate and unparseable_rate over all verdicts.
    Direct (`judge_scores`): unparseable_rate over all rows (score NaN).

    Parameters
    ----------
    judge_pairs
        The run's pairwise outcomes (module text), if any.
    judge_scores
        The run's scores (module text), if any.
    lengths
        Idea id → text length, for pairs without len_a / len_b columns.

    Returns
    -------
    JudgeDiagnostics
        The pairwise and/or direct blocks as above, each with cost_per_idea (total `cost`
        over the distinct ideas judged; needs a cost column, else a reason).
    """
    out: dict[str, Any] = {}
    if judge_pairs is not None:
        _validate_pairs(judge_pairs, JUDGE_PAIR_COLUMNS, "judge_pairs")
        jp = judge_pairs.reset_index(drop=True)
        n_all = len(jp)
        parsed = jp[jp["verdict"] != "unparseable"]
        decisive = parsed[parsed["verdict"].isin(["A", "B"])]
        winner = _winner_ids(decisive).astype(str)

        # Position consistency: the i-th showing in one order against the i-th in the other.
        x, y, _ = _orient(parsed["idea_a"], parsed["idea_b"])
        keys = ["dimension", *(["round"] if "round" in parsed.columns else [])]
        result = np.where(
            parsed["verdict"] == "tie",
            "tie",
            _winner_ids(parsed).astype(str),
        )
        first_is_x = parsed["first_shown"].astype(str).to_numpy() == x.astype(str).to_numpy()
        couples = pd.DataFrame(
            {
                **{c: parsed[c].to_numpy() for c in keys},
                "x": x.astype(str).to_numpy(),
                "y": y.astype(str).to_numpy(),
                "first_is_x": first_is_x,
                "result": result,
            }
        )
        couples["nth"] = couples.groupby([*keys, "x", "y", "first_is_x"]).cumcount()
        a = couples[couples["first_is_x"]]
        b = couples[~couples["first_is_x"]]
        both = a.merge(b, on=[*keys, "x", "y", "nth"], suffixes=("_1", "_2"))
        pos = _rate(
            (both["result_1"] == both["result_2"]).to_numpy(),
            "pair judged in both orders with parseable verdicts",
        )
        pos.pop("p_value")
        pos["consistency"] = pos.pop("rate")

        first_win = _rate(
            (winner.to_numpy() == decisive["first_shown"].astype(str).to_numpy()),
            "decisive verdict",
        )

        len_a = len_b = None
        if {"len_a", "len_b"} <= set(jp.columns):
            len_a = pd.to_numeric(decisive["len_a"], errors="coerce")
            len_b = pd.to_numeric(decisive["len_b"], errors="coerce")
        elif lengths is not None:
            lmap = pd.Series(lengths)
            len_a = decisive["idea_a"].map(lmap).astype(float)
            len_b = decisive["idea_b"].map(lmap).astype(float)
        if len_a is None or len_b is None:
            longer: dict[str, Any] = {"n": 0, "rate": None, "p_value": None, "reason": NO_LENGTHS}
        else:
            ok = (len_a.notna() & len_b.notna() & (len_a != len_b)).to_numpy()
            a_longer = (len_a > len_b).to_numpy()
            a_won = (decisive["verdict"] == "A").to_numpy()
            longer = _rate(
                (a_longer == a_won)[ok], "decisive verdict between texts of unequal length"
            )
        out["pairwise"] = {
            "n_verdicts": n_all,
            "n_parseable": len(parsed),
            "n_decisive": len(decisive),
            "unparseable_rate": json_float((jp["verdict"] == "unparseable").mean())
            if n_all
            else None,
            "tie_rate": json_float((parsed["verdict"] == "tie").mean()) if len(parsed) else None,
            "position_consistency": pos,
            "first_position_win_rate": first_win,
            "longer_text_win_rate": longer,
            "cost_per_idea": _cost_per_idea(jp, ["idea_a", "idea_b"]),
        }
    if judge_scores is not None:
        _validate_judge_scores(judge_scores)
        n = len(judge_scores)
        out["direct"] = {
            "n_rows": n,
            "n_unparseable": int(judge_scores["score"].isna().sum()),
            "unparseable_rate": json_float(judge_scores["score"].isna().mean()) if n else None,
            "cost_per_idea": _cost_per_idea(judge_scores, ["idea_id"]),
        }
    if not out:
        raise ValueError("judge_diagnostics needs judge_pairs, judge_scores or both")
    return JudgeDiagnostics(pairwise=out.get("pairwise"), direct=out.get("direct"))


# ---------------------------------------------------------------- Krippendorff


def _alpha_block(df: pd.DataFrame, metric: str, level: str) -> dict[str, Any]:
    rows = unique_reviews(df)
    rows = rows[rows[metric].notna()]
    m = rows.groupby("idea_id").size()
    pairable = m[m >= 2]
    alpha = krippendorff_alpha(df, metric, level, rows="unique")  # type: ignore[arg-type]
    return {
        "alpha": json_float(alpha),
        "n_units": len(pairable),
        "n_values": int(pairable.sum()),
        "reason": None if math.isfinite(alpha) else "no variation or no unit with 2 values",
    }


@dataclass(frozen=True)
class AlphaWithJudges:
    """Krippendorff's alpha among the reviewers and with each judge added
    (`krippendorff_with_judges`).

    Attributes
    ----------
    metric, level
        The metric rated and the level of measurement.
    humans
        {alpha, n_units, n_values, reason} among the reviewers.
    judges
        Judge name → {alpha, n_units, n_values, n_judged_ideas, outside_human_range, delta
        (alpha - the humans' alpha), reason} with that judge as one more rater.
    left_out
        Judge name → why it is not a rater on this metric: per-idea scores on fewer than
        `MIN_IDEAS` reviewed ideas (a ranking-only run, or a metric it did not judge).
    """

    metric: str
    level: str
    humans: dict[str, Any]
    judges: dict[str, dict[str, Any]]
    left_out: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report."""
        return {
            "metric": self.metric,
            "level": self.level,
            "humans": self.humans,
            "judges": self.judges,
            "left_out": self.left_out,
        }


def krippendorff_with_judges(
    frame: pd.DataFrame,
    judges: Mapping[str, pd.DataFrame],
    metric: str = "overall",
    *,
    level: Literal["ordinal", "interval", "nominal"] = "ordinal",
) -> AlphaWithJudges:
    """Krippendorff's alpha among the reviewers, then with each judge as one more rater.

    Units are ideas (each review once); a unit needs two values to count, so adding a
    judge can bring in ideas that had a single review, and n_units / n_values say so. The
    judge's value for an idea is the mean of its parseable samples; judge scores of ideas
    nobody reviewed carry no pairs and are left out. Ordinal alpha compares values by
    their rank in the pooled distribution, so a judge on another scale than the reviewers
    (1-5 against 1-10) should be rescaled first; `outside_human_range` flags it. A judge
    with per-idea scores on fewer than `MIN_IDEAS` reviewed ideas of the metric (a pairwise
    run on a metric it never compared, say) is no rater there: its alpha would be the
    reviewers' own, or rest on one or two ideas, so it is listed in `left_out` instead.

    Parameters
    ----------
    frame
        The review frame (module text).
    judges
        Judge name → that run's scores (module text).
    metric
        The metric rated.
    level
        Krippendorff's level of measurement.

    Returns
    -------
    AlphaWithJudges
        The reviewers' alpha and, per judge, the alpha with that judge as one more rater.
    """
    validate_frame(frame, [metric], require=("review_id", "idea_id"))
    human = _alpha_block(frame, metric, level)
    lo, hi = frame[metric].min(), frame[metric].max()
    with_judges: dict[str, dict[str, Any]] = {}
    left_out: dict[str, str] = {}
    reviewed = set(frame.loc[frame[metric].notna(), "idea_id"])
    for name, scores in judges.items():
        j = judge_idea_scores(scores, metric)
        j = j[j.index.isin(reviewed)]
        if len(j) < MIN_IDEAS:
            left_out[name] = (
                f"the judge scored {'none' if not len(j) else f'only {len(j)}'} of the "
                f"reviewed ideas on {metric} (a rater needs at least {MIN_IDEAS})"
            )
            continue
        extra = pd.DataFrame(
            {
                "review_id": [f"judge:{name}:{i}" for i in j.index],
                "idea_id": j.index,
                "condition": "(judge)",
                metric: j.to_numpy(float),
            }
        )
        combined = pd.concat([frame[["review_id", "idea_id", "condition", metric]], extra])
        block = _alpha_block(combined, metric, level)
        block["n_judged_ideas"] = len(j)
        block["outside_human_range"] = bool(len(j) and ((j < lo).any() or (j > hi).any()))
        block["delta"] = (
            json_float(block["alpha"] - human["alpha"])
            if block["alpha"] is not None and human["alpha"] is not None
            else None
        )
        with_judges[name] = block
    return AlphaWithJudges(
        metric=metric, level=level, humans=human, judges=with_judges, left_out=left_out
    )


# ------------------------------------------------------------------- one judge run


@dataclass(frozen=True)
class Draws:
    """The resampling draws a judge's figures used.

    Attributes
    ----------
    n_units
        The frame's (condition, idea) units.
    n_splits, n_bootstrap, n_permutations, splits_per_resample
        The draws asked for, scaled down in proportion past ``SCALE_UNITS`` units (as the
        report's consistency section does).
    scaled
        Whether they were scaled down.
    """

    n_units: int
    n_splits: int
    n_bootstrap: int
    n_permutations: int
    splits_per_resample: int
    scaled: bool

    @classmethod
    def for_units(cls, resampling: Resampling, n_units: int) -> Draws:
        scale = min(1.0, SCALE_UNITS / max(n_units, 1))
        return cls(
            n_units=n_units,
            n_splits=scaled_draws(resampling.n_splits, n_units),
            n_bootstrap=scaled_draws(resampling.n_bootstrap, n_units),
            n_permutations=scaled_draws(resampling.n_permutations, n_units),
            splits_per_resample=max(1, round(resampling.splits_per_resample * scale)),
            scaled=n_units > SCALE_UNITS,
        )

    def applied(self, resampling: Resampling) -> Resampling:
        """`resampling` with these draws."""
        return replace(
            resampling,
            n_splits=self.n_splits,
            n_bootstrap=self.n_bootstrap,
            n_permutations=self.n_permutations,
            splits_per_resample=self.splits_per_resample,
        )


@dataclass(frozen=True)
class JudgeAgreement:
    """Every per-judge figure of this module for one judge run (`judge_agreement`).

    Attributes
    ----------
    draws
        The resampling draws used.
    absolute
        `absolute_agreement`'s result; None without judge scores.
    consistency
        Metric → `JudgeConsistency`; None without judge scores.
    top_k
        Metric → `TopKOverlap`; None without judge scores.
    pairwise
        `pairwise_agreement`'s result; None without judge pairs.
    diagnostics
        `judge_diagnostics`'s result.
    """

    draws: Draws
    absolute: AbsoluteAgreement | None
    consistency: dict[str, JudgeConsistency] | None
    top_k: dict[str, TopKOverlap] | None
    pairwise: PairwiseAgreement | None
    diagnostics: JudgeDiagnostics

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report (a part that was not computed is absent)."""
        out: dict[str, Any] = {"draws": asdict(self.draws)}
        if self.absolute is not None:
            out["absolute"] = self.absolute.as_dict()
        if self.consistency is not None:
            out["consistency"] = {m: c.as_dict() for m, c in self.consistency.items()}
        if self.top_k is not None:
            out["top_k"] = {m: t.as_dict() for m, t in self.top_k.items()}
        if self.pairwise is not None:
            out["pairwise"] = self.pairwise.as_dict()
        out["diagnostics"] = self.diagnostics.as_dict()
        return out


def judge_agreement(
    frame: pd.DataFrame,
    *,
    judge_scores: pd.DataFrame | None = None,
    judge_pairs: pd.DataFrame | None = None,
    human_pairs: pd.DataFrame | None = None,
    metrics: Sequence[str] | None = None,
    lengths: Mapping[Any, float] | pd.Series | None = None,
    resampling: Resampling = DEFAULT_RESAMPLING,
    top_k: float | int = 0.25,
    ceiling_cache: dict[Any, Any] | None = None,
) -> JudgeAgreement:
    """Every per-judge statistic of this module for one judge run.

    Krippendorff's alpha pools several judges and is computed by
    `krippendorff_with_judges`.

    Parameters
    ----------
    frame
        The review frame (module text).
    judge_scores
        The run's scores (module text); a pairwise run passes its per-idea ratings here.
    judge_pairs
        The run's pairwise outcomes (module text).
    human_pairs
        The reviewers' pair ratings, compared with `judge_pairs`.
    metrics
        The metrics compared; None: every judged metric that is a frame column.
    lengths
        Text length per idea, for the diagnostics' length bias.
    resampling
        The draws asked for, before scaling (`Draws`), and the other options of the
        consistency figures; its seed and confidence also serve the correlations.
    top_k
        The share (or number) of top ideas `top_k_overlap` compares.
    ceiling_cache
        One dict for all judges of a report, so the human ceiling is computed once per
        metric (`judge_consistency`).

    Returns
    -------
    JudgeAgreement
        The absolute agreement, consistency and top-k overlap per metric when
        `judge_scores` is given, the pairwise agreement when `judge_pairs` is given, the
        diagnostics always.
    """
    n_units = int(frame.groupby(["condition", "idea_id"]).ngroups)
    draws = Draws.for_units(resampling, n_units)
    scaled = draws.applied(resampling)
    absolute = consistency = top = None
    if judge_scores is not None:
        used = _metrics_to_use(frame, judge_scores, metrics)
        absolute = absolute_agreement(
            frame,
            judge_scores,
            used,
            n_bootstrap=draws.n_bootstrap,
            confidence=resampling.confidence,
            seed=resampling.seed,
        )
        consistency = {
            m: judge_consistency(
                frame, judge_scores, m, resampling=scaled, ceiling_cache=ceiling_cache
            )
            for m in used
        }
        top = {m: top_k_overlap(frame, judge_scores, m, k=top_k) for m in used}
    pairwise = (
        None
        if judge_pairs is None
        else pairwise_agreement(
            judge_pairs, human_pairs=human_pairs, frame=frame, dimensions=metrics
        )
    )
    return JudgeAgreement(
        draws=draws,
        absolute=absolute,
        consistency=consistency,
        top_k=top,
        pairwise=pairwise,
        diagnostics=judge_diagnostics(
            judge_pairs=judge_pairs, judge_scores=judge_scores, lengths=lengths
        ),
    )
