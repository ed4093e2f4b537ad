"""How much reviewers agree with one another: split-half balanced accuracy and
Krippendorff's alpha.

Split-half consistency (Si et al., after Beygelzimer et al. 2021): split each idea's
reviews at random into two halves; half A's mean score picks the top and bottom 25 % of
ideas; half B "predicts top" for an idea when its own mean is above the median of half
B's means over all ideas (a tie with the median is a coin flip); the score is the
balanced accuracy of those predictions on the selected ideas. Chance is 50 %.

Which rows count is a parameter because it moves the number:

- `rows="all"` (default): every review x condition row, each (condition, idea) a unit.
  An idea in two conditions is two units carrying copies of the same reviews, as in the
  released data, whose per-condition idea ids differ. This is the reading that comes
  nearest the paper's figure on si2024 (docs/measurements.md, "Split-half consistency").
- `rows="unique"`: each review once, units are `idea_id`.

(All rows with merged idea ids would put both copies of a review inside one idea and
let a review agree with itself, inflating the figure; that combination is not offered.)

Everything runs on a padded units x reviews matrix so that many splits, bootstrap
resamples and permutations are a handful of array operations.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

import numpy as np
import pandas as pd

from .frame import json_float, unique_reviews, validate_frame
from .rounding import percent_text

Rows = Literal["all", "unique"]


@dataclass(frozen=True)
class Resampling:
    """How a split-half consistency figure is drawn and resampled, as one value.

    Parameters
    ----------
    rows
        Which rows count: ``"all"`` (every review x condition row, each (condition, idea)
        a unit) or ``"unique"`` (each review once, units are ideas); see the module text.
    top_fraction
        The share of units picked as top, and as bottom, by one half, in (0, 0.5].
    n_splits
        Random halvings of every unit's reviews averaged for the estimate (>= 1).
    n_bootstrap
        Bootstrap resamples of units for the confidence intervals (0: none).
    n_permutations
        Shuffles of the scores across units for the permutation null (0: none).
    splits_per_resample
        Splits averaged within one bootstrap or permutation replicate (>= 1).
    confidence
        Level of the percentile intervals, in (0, 1).
    seed
        Seed of every random draw; the same seed and options give the same figures.
    """

    rows: Rows = "all"
    top_fraction: float = 0.25
    n_splits: int = 1000
    n_bootstrap: int = 1000
    n_permutations: int = 1000
    splits_per_resample: int = 10
    confidence: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        if self.rows not in ("all", "unique"):
            raise ValueError(f"rows must be 'all' or 'unique', not {self.rows!r}")
        if not 0 < self.confidence < 1:
            raise ValueError("confidence must be in (0, 1)")
        if not 0 < self.top_fraction <= 0.5:
            raise ValueError("top_fraction must be in (0, 0.5]")
        if self.n_splits < 1 or self.splits_per_resample < 1:
            raise ValueError("n_splits and splits_per_resample must be >= 1")
        if self.n_bootstrap < 0 or self.n_permutations < 0:
            raise ValueError("n_bootstrap and n_permutations must be >= 0")

    def keywords(self) -> dict[str, Any]:
        """The options as the keyword arguments of `inter_reviewer_consistency`."""
        return asdict(self)


# Scores closer than this count as tied; far below any gap between means of 1-10 scores.
_TIE_DECIMALS = 9
# Replicates processed at once: at most _CHUNK, and few enough that one (replicates x
# units) plane holds at most _PLANE numbers. A split batch keeps about a dozen such planes
# alive, so this bounds its memory near 200 MB however many ideas a study has (at 10,000
# idea units a 4,096-replicate batch took 1.3 GB). Studies of up to 488 units keep the
# full 4,096 and so the same random draws as before the cap.
_CHUNK = 4096
_PLANE = 2_000_000
# A split batch's arithmetic runs on blocks of about this many (replicate, unit) cells.
_BLOCK = 32_768


def _chunk(units: int) -> int:
    return max(16, min(_CHUNK, _PLANE // max(units, 1)))


def score_matrix(df: pd.DataFrame, metric: str, *, rows: Rows = "all") -> pd.DataFrame:
    """Units x review slots, left-packed, NaN-padded; only units with >= 2 scores.

    The index names the unit: (condition, idea_id) for `rows="all"`, idea_id for
    `rows="unique"`.
    """
    validate_frame(df, [metric], require=("review_id", "idea_id", "condition"))
    if rows == "all":
        data, unit = df, ["condition", "idea_id"]
    elif rows == "unique":
        data, unit = unique_reviews(df), ["idea_id"]
    else:
        raise ValueError(f"rows must be 'all' or 'unique', not {rows!r}")
    data = data[data[metric].notna()]
    slot = data.groupby(unit, sort=True).cumcount()
    wide = data.assign(_slot=slot).pivot_table(
        index=unit, columns="_slot", values=metric, aggfunc="first"
    )
    wide = wide[wide.notna().sum(axis=1) >= 2]
    wide.columns = pd.RangeIndex(wide.shape[1])
    return wide


def _split_batch(
    P: np.ndarray, rng: np.random.Generator, top_fraction: float, repeat: int = 1
) -> np.ndarray:
    """Balanced accuracy of one random split for each replicate in P (slots, reps, units),
    each replicate taken `repeat` times in a row.

    Slot-major so that every step is an operation on whole (reps, units) planes; loops run
    over the few review slots only. What depends on the matrix alone is computed before
    the repeats, and once per unit when P is one matrix broadcast over the replicates
    (the observed splits).
    """
    _, m, units = P.shape
    reps = m * repeat
    base = P[:, :1, :] if P.strides[1] == 0 else P
    valid = ~np.isnan(base)
    n = valid.sum(0)
    X = np.where(valid, base, 0.0)
    total = np.zeros(n.shape)
    for x in X:
        total += x
    # Every draw has a fixed shape, so they are all made first, in the order the steps
    # use them (one call: the same stream as one call per plane); the steps then run on
    # blocks of replicates small enough to stay in cache.
    slots = X.shape[0]
    draws = rng.random((slots + 3, reps, units))
    coin, picks, jitter, coin_b = draws[0], draws[1 : slots + 1], draws[-2], draws[-1]
    k = int(np.floor(top_fraction * units))
    out = np.empty(reps)
    if base.shape[1] == 1:  # one matrix: every replicate sees the same (broadcast) rows
        step = max(1, _BLOCK // max(units, 1))
        for lo in range(0, reps, step):
            hi = min(reps, lo + step)
            out[lo:hi] = _split_block(
                X[:, :1], valid[:, :1], n[:1], total[:1], k,
                coin[lo:hi], picks[:, lo:hi], jitter[lo:hi], coin_b[lo:hi],
            )  # fmt: skip
        return out
    # A replicate taken `repeat` times: its rows are broadcast over the repeats (an axis
    # of length 1) instead of copied, so blocks hold whole replicates.
    per = max(1, _BLOCK // max(units * repeat, 1))
    for i0 in range(0, m, per):
        i1 = min(m, i0 + per)
        lo, hi = i0 * repeat, i1 * repeat
        shape = (i1 - i0, repeat, units)
        out[lo:hi] = _split_block(
            X[:, i0:i1, None], valid[:, i0:i1, None], n[i0:i1, None], total[i0:i1, None], k,
            coin[lo:hi].reshape(shape), picks[:, lo:hi].reshape((slots, *shape)),
            jitter[lo:hi], coin_b[lo:hi],
        )  # fmt: skip
    return out


def _split_block(
    X: np.ndarray,
    valid: np.ndarray,
    n: np.ndarray,
    total: np.ndarray,
    k: int,
    coin: np.ndarray,
    picks: np.ndarray,
    jitter: np.ndarray,
    coin_b: np.ndarray,
) -> np.ndarray:
    """`_split_batch` for a block of replicates, given its draws (see there).

    The split's steps are elementwise, so X, valid, n and total may have length-1 axes
    that broadcast against the draws `coin` and `picks` (replicates, units) or (replicates,
    repeats, units); the ranking steps then see (replicates x repeats, units) rows, in
    the order of `jitter` and `coin_b`."""
    units = coin.shape[-1]
    # Half A gets h of each unit's n reviews, an odd unit's extra one to either half with
    # equal chance; selection sampling (take a slot with probability needed / left) draws
    # a uniformly random h-subset in one pass over the slots.
    h = n // 2 + ((n % 2 == 1) & (coin < 0.5))
    need = h.astype(float)  # small integers, exact as floats
    left = np.array(np.broadcast_to(n, coin.shape), dtype=float)
    sum_a = np.zeros(coin.shape)
    take = np.empty(coin.shape)
    last = len(X) - 1
    for slot, (x, ok, pick) in enumerate(zip(X, valid, picks, strict=True)):
        # A slot every unit fills (the first two always do) needs no mask; after the last
        # slot the counters are not read again.
        full = bool(ok.all())
        took = np.multiply(pick, left, out=take) < need
        if not full:
            took &= ok
        np.add(sum_a, x, out=sum_a, where=took)
        if slot < last:
            need -= took
            if full:
                left -= 1.0
            else:
                left -= ok
    mean_a = (sum_a / h).reshape(-1, units)
    mean_b = ((total - sum_a) / (n - h)).reshape(-1, units)

    # Half A's top and bottom k units, ties broken at random (jitter below the tie grid).
    key_a = np.round(mean_a, _TIE_DECIMALS) + jitter * 10.0 ** -(_TIE_DECIMALS + 1)

    # Half B predicts "top" above its own median; a tie with the median is a coin flip.
    b = np.round(mean_b, _TIE_DECIMALS)
    med = _row_medians(b)
    pred_top = (b > med) | ((b == med) & (coin_b < 0.5))
    top, bottom = _extremes_hits(key_a, pred_top, k)
    return (top / k + bottom / k) / 2


def _row_medians(b: np.ndarray) -> np.ndarray:
    """np.median(b, axis=-1, keepdims=True) for NaN-free rows, from one (vectorised) sort:
    the same two middle values and the same mean of them."""
    units = b.shape[-1]
    srt = np.sort(b, axis=-1)
    mid = units // 2
    if units % 2:
        return srt[:, mid : mid + 1]
    return (srt[:, mid - 1 : mid] + srt[:, mid : mid + 1]) / 2


def _extremes_hits(key: np.ndarray, pred_top: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
    """Per row: how many of the k largest keys are predicted top, and how many of the k
    smallest are not; the units np.argpartition(key, (k - 1, units - k)) would pick.

    Both cuts come from one sort; a row whose key repeats at a cut (so more than k units
    reach it) is settled by argpartition itself, which decides which of the tied units
    it takes."""
    units = key.shape[-1]
    srt = np.sort(key, axis=-1)
    top_set = key >= srt[:, units - k : units - k + 1]
    bottom_set = key <= srt[:, k - 1 : k]
    top = (pred_top & top_set).sum(-1)
    bottom = (bottom_set & ~pred_top).sum(-1)
    tied = np.flatnonzero((top_set.sum(-1) != k) | (bottom_set.sum(-1) != k))
    if tied.size:
        part = np.argpartition(key[tied], (k - 1, units - k), axis=-1)
        pt = pred_top[tied]
        top[tied] = np.take_along_axis(pt, part[:, units - k :], axis=-1).sum(-1)
        bottom[tied] = (~np.take_along_axis(pt, part[:, :k], axis=-1)).sum(-1)
    return top, bottom


def _check(P: np.ndarray, top_fraction: float) -> None:
    if not 0 < top_fraction <= 0.5:
        raise ValueError("top_fraction must be in (0, 0.5]")
    if int(np.floor(top_fraction * P.shape[0])) < 1:
        raise ValueError(
            f"{P.shape[0]} units with >= 2 reviews are too few to pick a top "
            f"{percent_text(top_fraction, 0)} (need at least {int(np.ceil(1 / top_fraction))})"
        )


def split_accuracies(
    P: np.ndarray,
    n_splits: int,
    rng: np.random.Generator,
    *,
    top_fraction: float = 0.25,
) -> np.ndarray:
    """Balanced accuracy of `n_splits` independent random splits of one score matrix."""
    P = np.asarray(P, float)
    _check(P, top_fraction)
    slots = P.T[:, None, :]
    chunk = _chunk(P.shape[0])
    out = [
        _split_batch(
            np.broadcast_to(slots, (P.shape[1], min(chunk, n_splits - s), P.shape[0])),
            rng,
            top_fraction,
        )
        for s in range(0, n_splits, chunk)
    ]
    return np.concatenate(out) if out else np.empty(0)


def _replicate_means(
    make: Any,
    n_reps: int,
    per_rep: int,
    rng: np.random.Generator,
    top_fraction: float,
    units: int,
) -> np.ndarray:
    """Mean accuracy over `per_rep` splits for each of `n_reps` replicate matrices.

    `make(m)` returns m replicate matrices, slot-major (slots, m, units); each is split
    `per_rep` times.
    """
    means = []
    reps_per_chunk = max(1, _chunk(units) // per_rep)
    for s in range(0, n_reps, reps_per_chunk):
        m = min(reps_per_chunk, n_reps - s)
        batch = _split_batch(make(m), rng, top_fraction, repeat=per_rep)
        means.append(batch.reshape(m, per_rep).mean(1))
    return np.concatenate(means) if means else np.empty(0)


@dataclass(frozen=True)
class SplitHalfConsistency:
    """Si et al.'s inter-reviewer consistency of one metric (`inter_reviewer_consistency`).

    Attributes
    ----------
    metric, rows
        The metric split and the row set (`Rows`).
    n_units, n_reviews, n_selected
        Units with >= 2 reviews, their reviews, and the units each split picks (top and
        bottom together).
    top_fraction, seed
        The share picked at each end, and the seed of every draw.
    balanced_accuracy
        The mean over splits, 0-1.
    n_splits, split_sd, split_low, split_high
        The splits, and the SD and 2.5 / 97.5 percentiles of single splits.
    confidence, n_bootstrap, splits_per_resample, ci_low, ci_high
        The percentile bootstrap over units (None without resamples).
    n_permutations, null_mean, null_sd, p_value
        The permutation null (None without permutations).
    chance
        0.5.
    """

    metric: str
    rows: str
    n_units: int
    n_reviews: int
    n_selected: int
    top_fraction: float
    seed: int
    balanced_accuracy: float
    n_splits: int
    split_sd: float | None
    split_low: float | None
    split_high: float | None
    confidence: float
    n_bootstrap: int
    splits_per_resample: int
    ci_low: float | None
    ci_high: float | None
    n_permutations: int
    null_mean: float | None
    null_sd: float | None
    p_value: float | None
    chance: float = 0.5

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report: the fields in order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def inter_reviewer_consistency(
    df: pd.DataFrame,
    metric: str = "overall",
    *,
    rows: Rows = "all",
    top_fraction: float = 0.25,
    n_splits: int = 1000,
    n_bootstrap: int = 1000,
    n_permutations: int = 1000,
    splits_per_resample: int = 10,
    confidence: float = 0.95,
    seed: int = 0,
    splits_out: list[float] | None = None,
) -> SplitHalfConsistency:
    """Split-half balanced accuracy with its split spread, bootstrap CI and permutation p.

    One split is noisy (si2024: roughly 50-65 %), so the estimate is the mean over
    `n_splits` splits. The bootstrap resamples units with replacement and the permutation
    null shuffles all scores across units (destroying any idea effect); each replicate is
    scored by the mean of `splits_per_resample` splits, which keeps them cheap at the
    cost of a slightly wider null and CI (conservative). p = (1 + #null >= observed) /
    (1 + n_permutations). Set n_bootstrap or n_permutations to 0 to skip them.

    Parameters
    ----------
    df
        The review frame (`frame.py`).
    metric
        The metric whose scores are split.
    rows, top_fraction, n_splits, n_bootstrap, n_permutations
        As the fields of `Resampling` (``**resampling.keywords()`` passes one).
    splits_per_resample, confidence, seed
        As the fields of `Resampling`.
    splits_out
        A list that receives the accuracy of each split, when given.

    Returns
    -------
    SplitHalfConsistency
        The mean balanced accuracy over splits with its split spread, the bootstrap
        interval and the permutation p (None where skipped); `as_dict()` is the report's
        JSON.
    """
    if n_splits < 1:
        raise ValueError("n_splits must be >= 1")
    wide = score_matrix(df, metric, rows=rows)
    P = wide.to_numpy(float)
    _check(P, top_fraction)
    n_units = P.shape[0]
    rng = np.random.default_rng(seed)
    acc = split_accuracies(P, n_splits, rng, top_fraction=top_fraction)
    if splits_out is not None:  # the single splits, for a histogram
        splits_out.extend(acc.tolist())
    observed = float(acc.mean())
    tail = (1 - confidence) / 2

    ci_low = ci_high = None
    if n_bootstrap > 0:
        boot = _replicate_means(
            lambda m: P.T[:, rng.integers(0, n_units, size=(m, n_units))],
            n_bootstrap,
            splits_per_resample,
            rng,
            top_fraction,
            n_units,
        )
        ci_low, ci_high = (json_float(v) for v in np.quantile(boot, [tail, 1 - tail]))

    null_mean = null_sd = p_value = None
    if n_permutations > 0:
        valid = ~np.isnan(P.T)
        values = P.T[valid]

        def permuted(m: int) -> np.ndarray:
            out = np.full((P.shape[1], m, n_units), np.nan)
            shuffled = rng.permuted(np.broadcast_to(values, (m, values.size)), axis=1)
            out.transpose(1, 0, 2)[:, valid] = shuffled
            return out

        null = _replicate_means(
            permuted, n_permutations, splits_per_resample, rng, top_fraction, n_units
        )
        null_mean, null_sd = json_float(null.mean()), json_float(null.std(ddof=1))
        p_value = float((1 + np.sum(null >= observed - 1e-12)) / (1 + n_permutations))

    return SplitHalfConsistency(
        metric=metric,
        rows=rows,
        n_units=int(n_units),
        n_reviews=int(np.sum(~np.isnan(P))),
        n_selected=2 * int(np.floor(top_fraction * n_units)),
        top_fraction=top_fraction,
        seed=seed,
        balanced_accuracy=observed,
        n_splits=n_splits,
        split_sd=json_float(acc.std(ddof=1)) if n_splits > 1 else None,
        split_low=json_float(np.quantile(acc, 0.025)),
        split_high=json_float(np.quantile(acc, 0.975)),
        confidence=confidence,
        n_bootstrap=n_bootstrap,
        splits_per_resample=splits_per_resample,
        ci_low=ci_low,
        ci_high=ci_high,
        n_permutations=n_permutations,
        null_mean=null_mean,
        null_sd=null_sd,
        p_value=p_value,
    )


def krippendorff_alpha(
    df: pd.DataFrame,
    metric: str,
    level: Literal["interval", "ordinal", "nominal"] = "interval",
    *,
    rows: Rows = "unique",
) -> float:
    """Krippendorff's alpha with ideas as units, from the coincidence-matrix definition.

    alpha = 1 - D_o / D_e, where D_o is the mean disagreement between values pairable
    within a unit (each unit's pairs weighted 1 / (m_u - 1)) and D_e the disagreement
    expected between any two pairable values. Units with fewer than two scores carry no
    pairs and are ignored, which is what makes alpha usable on a sparse review design.
    `rows="unique"` (default) counts each review once, units idea_id; `rows="all"` uses
    every row with (condition, idea_id) units (the copies then inflate agreement).
    """
    P = score_matrix(df, metric, rows=rows).to_numpy(float)
    values = P[~np.isnan(P)]
    if values.size == 0:
        return float("nan")
    m = (~np.isnan(P)).sum(1)
    n = float(m.sum())
    if level not in ("interval", "ordinal", "nominal"):
        raise ValueError(f"level must be 'interval', 'ordinal' or 'nominal', not {level!r}")
    if level == "nominal":
        # delta = 1 off the diagonal: D_o needs each unit's sum of squared category counts,
        # D_e the pooled one (no categories x categories matrix: a judge's mean scores can
        # make every value its own category).
        cats, codes = np.unique(values, return_inverse=True)
        unit_of = np.repeat(np.arange(P.shape[0], dtype=np.int64), m)
        keys, counts = np.unique(unit_of * len(cats) + codes, return_counts=True)
        same = np.bincount(
            keys // len(cats), weights=counts.astype(float) ** 2, minlength=P.shape[0]
        )  # each unit's sum over categories of (count in the unit)^2
        d_o = float(np.sum((m**2 - same) / (m - 1)))
        marg = np.bincount(codes).astype(float)
        d_e = (n**2 - float(np.sum(marg**2))) / (n - 1)
        return float(1 - d_o / d_e) if d_e > 0 else float("nan")
    if level == "ordinal":
        # The ordinal delta between categories c and k is (t_c - t_k)^2, with t the
        # mid-rank of a category in the pooled values (cumulative count below it plus
        # half its own count); ordinal alpha is then the interval alpha of the mid-ranks.
        cats, codes = np.unique(values, return_inverse=True)
        marg = np.bincount(codes, minlength=len(cats)).astype(float)
        midrank = np.concatenate([[0.0], np.cumsum(marg)[:-1]]) + marg / 2
        P = P.copy()
        P[~np.isnan(P)] = midrank[codes]
        values = P[~np.isnan(P)]
    # Closed form of the squared-difference delta: no values x values matrix needed.
    unit_means = np.nanmean(P, axis=1)
    ss_within = np.nansum((P - unit_means[:, None]) ** 2, axis=1)
    d_o = np.sum(2 * m * ss_within / (m - 1)) / n
    d_e = 2 * np.sum((values - values.mean()) ** 2) / (n - 1)
    return float(1 - d_o / d_e) if d_e > 0 else float("nan")
