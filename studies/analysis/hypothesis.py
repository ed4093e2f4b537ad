"""The three significance tests of Si et al., each condition against a baseline.

- Test 1 (`test_by_review`): every review × condition row is a data point. Fast and
  powerful, but treats reviews of one idea, and by one reviewer, as independent.
- Test 2 (`test_by_idea`): the mean score per (condition, idea) is the data point, so an
  idea with four reviews weighs no more than one with two.
- Test 3 (`test_by_reviewer`): each reviewer is their own control: the mean on the
  condition minus the mean on the baseline, one-sample t-test against 0, over reviewers
  who scored both. Needs reviewer ids; without them it says so rather than guessing.

Tests 1 and 2 use Welch's two-sample t-test (`scipy.stats.ttest_ind(equal_var=False)`,
what the released scripts call). The p-values here follow the paper's convention and are
named for it: `p_two_sided`, and `p_two_sided_bonferroni`, which multiplies it by the
number of metrics tested together (capped at 1), as in the paper's tables. A study's
analysis plan may test otherwise (one-sided, another correction); `plan.apply_plan` adds
its p-values beside these, and the report speaks with the plan's.

The two statistics under them, `welch` and `one_sample`, return small result objects
(`WelchTest`, `OneSampleTest`). Each of the three tests returns one report section, a
JSON-ready dict by design (floats, never numpy scalars; NaN -> None), which the report
writes out as it is and the analysis plan adds its columns to:

    {
      "test": "by_review" | "by_idea" | "by_reviewer",
      "unit": "review" | "idea" | "reviewer",
      "available": bool,            # False only when the test cannot be computed at all
      "reason": str | None,         # why not, when available is False
      "baseline": str,
      "conditions": [str, ...],     # the non-baseline conditions compared
      "metrics": [str, ...],
      "published": {                # the paper's convention, which the two p columns follow
        "convention": "Si et al. (2024)",
        "alternative": "two-sided",
        "correction": "bonferroni",
        "n_corrected": int,         # k: the number of metrics each p is corrected over
        "columns": ["p_two_sided", "p_two_sided_bonferroni"],
      },
      "confidence": float,          # level of ci_low / ci_high (0.95)
      "comparisons": [comparison, ...],   # one per metric x condition, metric-major
    }

Each comparison of Tests 1 and 2:

    metric, condition, baseline,
    n, mean, sd                   (the condition; sd with ddof=1)
    n_baseline, mean_baseline, sd_baseline,
    diff                          mean - mean_baseline
    se                            sqrt(sd^2/n + sd_b^2/n_b)
    t, df                         Welch t and Welch-Satterthwaite df
    p_two_sided                   the two-sided p
    p_two_sided_bonferroni        min(1, p_two_sided * k)
    ci_low, ci_high               CI of diff: diff -/+ t_{df, 0.975} * se

Each comparison of Test 3 has the same keys, with n the number of reviewers who scored
both; mean / mean_baseline are the averages of those reviewers' per-reviewer means, diff
is the mean of the per-reviewer differences, sd its SD, sd_baseline None, n_baseline = n,
df = n - 1 and the CI is the one-sample t interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from .frame import has_reviewer_ids, json_float, ordered_conditions, validate_frame

CONFIDENCE_LEVEL = 0.95
PUBLISHED_CONVENTION = "Si et al. (2024)"
_REQUIRED = ("idea_id", "condition")


def _two_sided_p(t: float, dof: float) -> float:
    return float(2 * special.stdtr(dof, -abs(t)))


def _t_quantile(q: float, dof: float) -> float:
    return float(special.stdtrit(dof, q))


@dataclass(frozen=True)
class WelchTest:
    """Welch's t-test of mean(x) - mean(y) (`welch`); NaN where a figure is undefined.

    Attributes
    ----------
    n, mean, sd
        The first sample's size, mean and SD (ddof=1).
    n_baseline, mean_baseline, sd_baseline
        The same of the second sample, the baseline.
    diff
        mean - mean_baseline.
    se
        sqrt(sd^2/n + sd_baseline^2/n_baseline).
    t, df, p
        Welch's t, the Welch-Satterthwaite df and the two-sided p.
    ci_low, ci_high
        The interval of diff at the asked confidence.
    """

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

    def as_dict(self) -> dict[str, Any]:
        """The fields by name, in field order (the comparison rows' keys)."""
        return dict(vars(self))


@dataclass(frozen=True)
class OneSampleTest:
    """One-sample t-test of mean(d) against 0 (`one_sample`); NaN where undefined.

    Attributes
    ----------
    n
        The sample's size.
    diff, sd, se
        Its mean, SD (ddof=1) and the mean's standard error.
    t, df, p
        The t statistic, n - 1 and the two-sided p.
    ci_low, ci_high
        The t interval of the mean at the asked confidence.
    """

    n: int
    diff: float
    sd: float
    se: float
    t: float
    df: float
    p: float
    ci_low: float
    ci_high: float

    def as_dict(self) -> dict[str, Any]:
        """The fields by name, in field order (the comparison rows' keys)."""
        return dict(vars(self))


def welch(x: np.ndarray, y: np.ndarray, *, confidence: float = CONFIDENCE_LEVEL) -> WelchTest:
    """Welch's t-test of mean(x) - mean(y) with the Welch-Satterthwaite df and CI.

    The same statistic as `scipy.stats.ttest_ind(x, y, equal_var=False)` (the released
    scripts' call; the tests check they agree), written out with scipy.special because
    the stats wrapper's per-call overhead dominates power simulations
    (docs/measurements.md).

    Parameters
    ----------
    x
        The condition's values.
    y
        The baseline's values.
    confidence
        Level of the interval, in (0, 1).

    Returns
    -------
    WelchTest
        The two samples' sizes, means and SDs, the difference, t, df, p and interval; the
        statistics are NaN when either sample has fewer than 2 values or both are constant.
    """
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    nx, ny = len(x), len(y)
    mx = float(x.mean()) if nx else np.nan
    my = float(y.mean()) if ny else np.nan
    sx = float(x.std(ddof=1)) if nx > 1 else np.nan
    sy = float(y.std(ddof=1)) if ny > 1 else np.nan
    diff = mx - my
    t = p = dof = se = lo = hi = np.nan
    if nx > 1 and ny > 1:
        vx, vy = sx**2 / nx, sy**2 / ny
        se = float(np.sqrt(vx + vy))
        if se > 0:
            t = diff / se
            dof = (vx + vy) ** 2 / (vx**2 / (nx - 1) + vy**2 / (ny - 1))
            p = _two_sided_p(t, dof)
            half = _t_quantile(0.5 + confidence / 2, dof) * se
            lo, hi = diff - half, diff + half
    return WelchTest(
        n=nx,
        mean=mx,
        sd=sx,
        n_baseline=ny,
        mean_baseline=my,
        sd_baseline=sy,
        diff=diff,
        se=se,
        t=t,
        df=dof,
        p=p,
        ci_low=lo,
        ci_high=hi,
    )


def one_sample(d: np.ndarray, *, confidence: float = CONFIDENCE_LEVEL) -> OneSampleTest:
    """One-sample t-test of mean(d) against 0 with its t interval.

    Parameters
    ----------
    d
        The values (differences) tested against 0.
    confidence
        Level of the interval, in (0, 1).

    Returns
    -------
    OneSampleTest
        n, the mean (as diff), SD, standard error, t, df, p and interval; the statistics
        are NaN with fewer than 2 values or a constant sample.
    """
    d = np.asarray(d, float)
    n = len(d)
    mean = float(d.mean()) if n else np.nan
    sd = float(d.std(ddof=1)) if n > 1 else np.nan
    t = p = se = lo = hi = np.nan
    dof = float(n - 1) if n > 1 else np.nan
    if n > 1:
        se = sd / np.sqrt(n)
        if se > 0:
            t = mean / se
            p = _two_sided_p(t, n - 1)
            half = _t_quantile(0.5 + confidence / 2, n - 1) * se
            lo, hi = mean - half, mean + half
    return OneSampleTest(n=n, diff=mean, sd=sd, se=se, t=t, df=dof, p=p, ci_low=lo, ci_high=hi)


def _envelope(
    test: str, unit: str, baseline: str, conditions: list[str], metrics: Sequence[str]
) -> dict[str, Any]:
    return {
        "test": test,
        "unit": unit,
        "available": True,
        "reason": None,
        "baseline": baseline,
        "conditions": conditions,
        "metrics": list(metrics),
        "published": {
            "convention": PUBLISHED_CONVENTION,
            "alternative": "two-sided",
            "correction": "bonferroni",
            "n_corrected": len(metrics),
            "columns": ["p_two_sided", "p_two_sided_bonferroni"],
        },
        "confidence": CONFIDENCE_LEVEL,
        "comparisons": [],
    }


_KEY_ORDER = (
    "metric", "condition", "baseline", "n", "mean", "sd", "n_baseline", "mean_baseline",
    "sd_baseline", "diff", "se", "t", "df", "p_two_sided", "p_two_sided_bonferroni", "ci_low",
    "ci_high",
)  # fmt: skip


def _finish(result: dict[str, Any], raw: list[dict[str, Any]]) -> dict[str, Any]:
    k = result["published"]["n_corrected"]
    for comp in raw:
        p = comp["p_two_sided"] = comp["p"]
        comp["p_two_sided_bonferroni"] = min(1.0, p * k) if np.isfinite(p) else np.nan
        clean = {
            key: comp[key] if isinstance(comp.get(key), str) else json_float(comp.get(key))
            for key in _KEY_ORDER
        }
        clean["n"], clean["n_baseline"] = int(comp["n"]), int(comp["n_baseline"])
        result["comparisons"].append(clean)
    return result


def _prepare(
    df: pd.DataFrame, metrics: Sequence[str], baseline: str, conditions: Sequence[str] | None
) -> list[str]:
    validate_frame(df, metrics, require=_REQUIRED)
    conds = ordered_conditions(df, conditions, baseline=baseline)
    return conds[1:]


def _cell_means(
    rows: np.ndarray, n_rows: int, cols: np.ndarray, n_cols: int, values: np.ndarray
) -> np.ndarray:
    """Mean of `values` per (row code, column code) cell, NaN where a cell has no value.

    bincount rather than groupby: these tests run thousands of times in power simulations.
    """
    ok = ~np.isnan(values) & (rows >= 0) & (cols >= 0)  # factorize codes NaN ids as -1
    flat = rows[ok] * n_cols + cols[ok]
    size = n_rows * n_cols
    sums = np.bincount(flat, weights=values[ok], minlength=size)
    counts = np.bincount(flat, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sums / counts).reshape(n_rows, n_cols)


def _condition_codes(df: pd.DataFrame, conds: list[str]) -> np.ndarray:
    """Each row's index in `conds` (0 = baseline), -1 for rows of other conditions."""
    codes, uniques = pd.factorize(df["condition"])
    lookup = np.array([conds.index(u) if u in conds else -1 for u in uniques] + [-1])
    return lookup[codes]  # factorize gives -1 for a missing condition: lookup[-1] is -1


def _two_sample(
    groups: dict[str, np.ndarray], metric: str, baseline: str, others: list[str]
) -> list[dict[str, Any]]:
    y = groups[baseline]
    y = y[~np.isnan(y)]
    raw = []
    for cond in others:
        x = groups[cond]
        x = x[~np.isnan(x)]
        raw.append(
            {"metric": metric, "condition": cond, "baseline": baseline, **welch(x, y).as_dict()}
        )
    return raw


def test_by_review(
    df: pd.DataFrame,
    metrics: Sequence[str],
    *,
    baseline: str,
    conditions: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Test 1: Welch t-test with every review × condition row as a point.

    Parameters
    ----------
    df
        The review frame (`frame.py`): idea_id, condition and the metric columns.
    metrics
        The metrics tested; each is one family of the Bonferroni correction.
    baseline
        The condition every other is compared with.
    conditions
        The conditions compared (baseline included); None: every condition of `df`.

    Returns
    -------
    dict
        The report's "by_review" section, JSON-ready, as the module text describes.
    """
    others = _prepare(df, metrics, baseline, conditions)
    conds = [baseline, *others]
    codes = _condition_codes(df, conds)
    raw = []
    for metric in metrics:
        v = df[metric].to_numpy(float)
        groups = {c: v[codes == i] for i, c in enumerate(conds)}
        raw += _two_sample(groups, metric, baseline, others)
    return _finish(_envelope("by_review", "review", baseline, others, metrics), raw)


def test_by_idea(
    df: pd.DataFrame,
    metrics: Sequence[str],
    *,
    baseline: str,
    conditions: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Test 2: Welch t-test on the mean score of each (condition, idea).

    Means skip missing scores per metric, so an idea counts for a metric when at least one
    of its reviews scored it. An idea in two conditions is one point in each.

    Parameters
    ----------
    df
        The review frame (`frame.py`): idea_id, condition and the metric columns.
    metrics
        The metrics tested; each is one family of the Bonferroni correction.
    baseline
        The condition every other is compared with.
    conditions
        The conditions compared (baseline included); None: every condition of `df`.

    Returns
    -------
    dict
        The report's "by_idea" section, JSON-ready, as the module text describes.
    """
    others = _prepare(df, metrics, baseline, conditions)
    conds = [baseline, *others]
    codes = _condition_codes(df, conds)
    ideas, idea_names = pd.factorize(df["idea_id"])
    raw = []
    for metric in metrics:
        means = _cell_means(codes, len(conds), ideas, len(idea_names), df[metric].to_numpy(float))
        groups = {c: means[i] for i, c in enumerate(conds)}  # NaN = idea not in c
        raw += _two_sample(groups, metric, baseline, others)
    return _finish(_envelope("by_idea", "idea", baseline, others, metrics), raw)


NO_REVIEWER_IDS = (
    "the data has no reviewer ids (reviewer identities were not recorded or were removed "
    "before release), so Test 3 (per-reviewer differences) and any reviewer random effect "
    "cannot be computed"
)


def test_by_reviewer(
    df: pd.DataFrame,
    metrics: Sequence[str],
    *,
    baseline: str,
    conditions: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Test 3: per reviewer, mean on the condition minus mean on the baseline, t against 0.

    Only reviewers with at least one score on both sides count, per metric. Rows without a
    reviewer id are left out; if no row has one the result is `available: False`.

    Parameters
    ----------
    df
        The review frame (`frame.py`): idea_id, condition, reviewer_id and the metric columns.
    metrics
        The metrics tested; each is one family of the Bonferroni correction.
    baseline
        The condition every other is compared with.
    conditions
        The conditions compared (baseline included); None: every condition of `df`.

    Returns
    -------
    dict
        The report's "by_reviewer" section, JSON-ready, as the module text describes (available False with a reason when no row has a reviewer id).
    """
    others = _prepare(df, metrics, baseline, conditions)
    result = _envelope("by_reviewer", "reviewer", baseline, others, metrics)
    if not has_reviewer_ids(df):
        result.update(available=False, reason=NO_REVIEWER_IDS)
        return result
    conds = [baseline, *others]
    codes = _condition_codes(df, conds)
    revs, rev_names = pd.factorize(df["reviewer_id"])  # a missing id is -1: left out
    raw = []
    for metric in metrics:
        means = _cell_means(revs, len(rev_names), codes, len(conds), df[metric].to_numpy(float))
        for j, cond in enumerate(others, start=1):
            both = ~np.isnan(means[:, 0]) & ~np.isnan(means[:, j])
            on, off = means[both, j], means[both, 0]
            comp = one_sample(on - off)
            n = comp.n
            raw.append(
                {
                    "metric": metric,
                    "condition": cond,
                    "baseline": baseline,
                    **comp.as_dict(),
                    "mean": float(on.mean()) if n else np.nan,
                    "mean_baseline": float(off.mean()) if n else np.nan,
                    "n_baseline": n,
                    "sd_baseline": np.nan,
                }
            )
    return _finish(result, raw)


def comparisons_frame(result: dict[str, Any]) -> pd.DataFrame:
    """The comparisons of a test result as a DataFrame (for printing and reports)."""
    return pd.DataFrame(result["comparisons"], columns=list(_KEY_ORDER))


# Their names start with "test_"; keep pytest from collecting them where they are imported.
for _f in (test_by_review, test_by_idea, test_by_reviewer):
    _f.__test__ = False  # type: ignore[attr-defined]
