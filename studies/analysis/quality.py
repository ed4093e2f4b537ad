"""Quality control of reviews: flags, exclusion by the plan's rules, reviewers' leniency,
and the plan's primary tests with and without the excluded reviews.

A flag says why one review (or every review of one reviewer) deserves a second look:

* ``fast``: the server-measured time on the review is below the plan's floor;
* ``straight_line``: every metric of the review got the same score;
* ``duplicate_own`` / ``duplicate_other``: a rationale is nearly identical (cosine of
  the sentence embeddings at or above the threshold) to one in another review by the
  same reviewer, or by another reviewer;
* ``attention``: an attention check of the form was answered other than instructed;
* ``gold``: a gold idea got a score outside the range its owner expects.

Exclusion rules (the plan's ``quality.exclude``) name a flag and a unit: ``review``
removes the flagged review, ``reviewer`` every review of a reviewer with that flag
(a gold miss says something about the reviewer, not about a review in the analysis, so
its unit is always the reviewer). :func:`exclusions` says which rule removed what.

Pure module: no Django imports. The caller embeds the rationales.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy import stats
from scipy.sparse.linalg import splu

from .mixed import prepare_mixed_data
from .plan import AnalysisPlan, apply_plan
from .quality_rules import FLAG_KINDS, UNITS, ExclusionRule, QualityRules
from .rounding import fixed

__all__ = [
    "FLAG_KINDS",
    "UNITS",
    "Flag",
    "QualityRules",
    "ReviewAnswers",
    "ExclusionRule",
    "duplicate_flags",
    "exclusions",
    "gold_flags",
    "review_flags",
    "reviewer_leniency",
]


@dataclass(frozen=True)
class ReviewAnswers:
    """One submitted review as the flags read it."""

    review_id: str
    reviewer_id: str
    idea_id: str
    scores: Mapping[str, float]
    rationales: Mapping[str, str] = field(default_factory=dict)
    minutes_measured: float | None = None
    # Check key -> answer; None when the review never saw the checks (an imported one).
    attention: Mapping[str, Any] | None = None
    gold: bool = False
    # The study team refused to pay for it. Only the fact is read (never the reason, the
    # owner's own words): the plan's exclusion rules decide whether it is analysed.
    payment_rejected: bool = False
    # What the review file's row was flagged with at import (a consent or pledge
    # problem); such reviews are kept, and the report counts them.
    import_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Flag:
    review_id: str
    reviewer_id: str
    kind: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {
            "review_id": self.review_id,
            "reviewer_id": self.reviewer_id,
            "kind": self.kind,
            "detail": self.detail,
        }


def review_flags(
    reviews: Sequence[ReviewAnswers],
    *,
    rules: QualityRules,
    metrics: Sequence[str],
    expected: Mapping[str, int],
    gold_ranges: Mapping[str, Mapping[str, tuple[float, float]]] | None = None,
) -> list[Flag]:
    """The flags each review raises by itself: time, straight-lining, attention checks
    (``expected``: check key -> instructed answer; a review without answers, such as an
    imported one, is not checked, while a missing answer fails), gold ranges (idea id ->
    metric -> (low, high), inclusive) and a rejection for payment. Duplicates need
    embeddings: :func:`duplicate_flags`."""
    out: list[Flag] = []
    for r in reviews:
        if r.minutes_measured is not None and r.minutes_measured < rules.min_minutes:
            out.append(
                Flag(r.review_id, r.reviewer_id, "fast",
                     f"{fixed(r.minutes_measured, 1)} min measured, floor {rules.min_minutes:g}")
            )  # fmt: skip
        values = [r.scores[m] for m in metrics if r.scores.get(m) is not None]
        if len(values) >= max(2, rules.straight_line_items) and len(set(values)) == 1:
            out.append(
                Flag(r.review_id, r.reviewer_id, "straight_line",
                     f"{values[0]:g} on all {len(values)} metrics")
            )  # fmt: skip
        answers = r.attention
        failed = [
            f"{key}: answered {answers.get(key, 'nothing')}, instructed {want}"
            for key, want in expected.items()
            if answers is not None and _answer(answers.get(key)) != want
        ]
        if failed:
            out.append(Flag(r.review_id, r.reviewer_id, "attention", "; ".join(failed)))
        if r.gold:
            out += gold_flags(r, (gold_ranges or {}).get(r.idea_id, {}))
        if r.payment_rejected:
            out.append(Flag(r.review_id, r.reviewer_id, "rejected", "rejected for payment"))
    return out


def _answer(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def gold_flags(review: ReviewAnswers, ranges: Mapping[str, tuple[float, float]]) -> list[Flag]:
    """One flag for a gold review with any score outside its expected range (a metric
    left unanswered is no miss)."""
    misses = [
        f"{m} {review.scores[m]:g} outside {lo:g}–{hi:g}"
        for m, (lo, hi) in ranges.items()
        if review.scores.get(m) is not None and not lo <= review.scores[m] <= hi
    ]
    if not misses:
        return []
    return [Flag(review.review_id, review.reviewer_id, "gold", "; ".join(misses))]


def duplicate_flags(
    reviews: Sequence[ReviewAnswers],
    vectors: Mapping[tuple[str, str], np.ndarray],
    *,
    rules: QualityRules,
    block: int = 1024,
) -> list[Flag]:
    """Rationales of different reviews whose embeddings' cosine is at least the plan's
    threshold. ``vectors`` maps (review id, metric) to the rationale's embedding; only
    rationales of at least ``duplicate_min_words`` words are compared. Both reviews of a
    pair are flagged, ``duplicate_own`` when they are by the same reviewer."""
    by_id = {r.review_id: r for r in reviews}
    keys = [
        k
        for k in vectors
        if k[0] in by_id
        and len(by_id[k[0]].rationales.get(k[1], "").split()) >= rules.duplicate_min_words
    ]
    if len(keys) < 2:
        return []
    mat = np.asarray([vectors[k] for k in keys], dtype=np.float64)
    norms = np.linalg.norm(mat, axis=1)
    mat = mat / np.where(norms > 0, norms, 1.0)[:, None]
    found: dict[tuple[str, str], tuple[float, str, str]] = {}
    for start in range(0, len(keys), block):
        sims = mat[start : start + block] @ mat[start:].T
        rows, cols = np.nonzero(sims >= rules.duplicate_cosine - 1e-9)
        for r, c in zip(rows, cols, strict=True):
            i, j = start + int(r), start + int(c)
            if j <= i or keys[i][0] == keys[j][0]:
                continue
            a, b = by_id[keys[i][0]], by_id[keys[j][0]]
            # Imported reviews name no reviewer (empty id): never "their own" duplicate.
            same = bool(a.reviewer_id) and a.reviewer_id == b.reviewer_id
            kind = "duplicate_own" if same else "duplicate_other"
            cos = float(sims[r, c])
            for me, other, metric in ((a, b, keys[j][1]), (b, a, keys[i][1])):
                mine = keys[i][1] if me is a else keys[j][1]
                best = found.get((me.review_id, kind))
                if best is None or cos > best[0]:
                    found[(me.review_id, kind)] = (
                        cos,
                        f"{mine} rationale ~ review {other.review_id}'s {metric} "
                        f"(cosine {fixed(min(cos, 1.0), 3)})",
                        me.reviewer_id,
                    )
    return [
        Flag(review_id, reviewer, kind, detail)
        for (review_id, kind), (_cos, detail, reviewer) in sorted(found.items())
    ]


# ----------------------------------------------------------------------------- exclusion


@dataclass(frozen=True)
class Exclusions:
    """Which analysed reviews the exclusion rules remove (`exclusions`).

    Attributes
    ----------
    analysed
        The analysed reviews (gold reviews are never analysed).
    removed
        Every review id removed by any rule, in natural order.
    kept
        The analysed reviews no rule removes.
    rules
        Per rule, as the report shows it: rule (its name), flag, unit, reviews (how many
        it removes), only_this_rule (how many only it removes) and review_ids.
    flagged_at_import, flagged_at_import_kept
        The analysed reviews flagged when their file was imported (a consent or pledge
        problem), and how many of them no rule removes.
    """

    analysed: int
    removed: list[str]
    kept: int
    rules: list[dict[str, Any]]
    flagged_at_import: int = 0
    flagged_at_import_kept: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report's exclusion block."""
        return {
            "analysed": self.analysed,
            "removed": self.removed,
            "kept": self.kept,
            "rules": self.rules,
            "flagged_at_import": self.flagged_at_import,
            "flagged_at_import_kept": self.flagged_at_import_kept,
        }


def exclusions(
    flags: Iterable[Flag], rules: Sequence[ExclusionRule], reviews: Sequence[ReviewAnswers]
) -> Exclusions:
    """Which analysed reviews (gold reviews are never analysed) each rule removes.

    Parameters
    ----------
    flags
        The study's quality flags.
    rules
        The exclusion rules in force.
    reviews
        Every review's answers (gold ones included, and left out).

    Returns
    -------
    Exclusions
        The reviews removed by any rule and, per rule, the reviews it removes, how many,
        and how many only it removes.
    """
    flags = list(flags)
    analysed = [r for r in reviews if not r.gold]
    by_reviewer: dict[str, list[str]] = defaultdict(list)
    for r in analysed:
        if r.reviewer_id:
            by_reviewer[r.reviewer_id].append(r.review_id)
    analysed_ids = {r.review_id for r in analysed}
    per_rule: list[tuple[ExclusionRule, set[str]]] = []
    for rule in rules:
        hits = [f for f in flags if f.kind == rule.flag]
        if rule.unit == "reviewer":
            # A review with no reviewer (imported) is its own whole reviewer.
            ids = {
                rid
                for f in hits
                for rid in (by_reviewer.get(f.reviewer_id, []) if f.reviewer_id else [f.review_id])
            } & analysed_ids
        else:
            ids = {f.review_id for f in hits} & analysed_ids
        per_rule.append((rule, ids))
    removed = set().union(*(ids for _, ids in per_rule)) if per_rule else set()
    rows = []
    for rule, ids in per_rule:
        others = set().union(*(o for r2, o in per_rule if r2 != rule)) if per_rule else set()
        rows.append(
            {
                "rule": rule.name,
                "flag": rule.flag,
                "unit": rule.unit,
                "reviews": len(ids),
                "only_this_rule": len(ids - others),
                "review_ids": sorted(ids, key=_natural),
            }
        )
    at_import = {r.review_id for r in analysed if r.import_flags}
    return Exclusions(
        analysed=len(analysed_ids),
        removed=sorted(removed, key=_natural),
        kept=len(analysed_ids - removed),
        rules=rows,
        flagged_at_import=len(at_import),
        flagged_at_import_kept=len(at_import - removed),
    )


def _natural(text: str) -> tuple[int, int, str]:
    """Review ids in numeric order when they are numbers."""
    return (0, int(text), "") if text.isdigit() else (1, 0, text)


# ----------------------------------------------------------------------------- leniency


def reviewer_leniency(
    df: pd.DataFrame,
    fit: Mapping[str, Any],
    *,
    metric: str,
    baseline: str,
    groups: Sequence[str],
    covariates: Sequence[str] = (),
    level: float = 0.95,
) -> pd.DataFrame:
    """Each reviewer's random effect in a fitted mixed model (their leniency: how many
    points above the model's prediction they score) with its interval.

    The effects are the conditional modes (BLUPs) at the fit's fixed effects and
    variances, and the interval is effect ± z·sd with the conditional variance of the
    effect given the data (lme4's ``condVar``): with ``A = Z'Z/σ² + diag(1/τ²_g)``, the
    effects are ``A⁻¹ Z'(y − Xβ)/σ²`` and their variances the diagonal of ``A⁻¹``.
    ``flag`` is ``lenient`` or ``severe`` when the interval excludes 0. Empty when the
    fit failed or has no reviewer effect.
    """
    cols = ["reviewer_id", "effect", "sd", "low", "high", "reviews", "flag"]
    variance = fit.get("variance") or {}
    if "error" in fit or "reviewer_id" not in variance:
        return pd.DataFrame(columns=cols)
    prep = prepare_mixed_data(df, metric, baseline=baseline, groups=groups, covariates=covariates)
    coef = {row["term"]: row["coef"] for row in fit.get("fixed") or []}
    beta = np.array([coef.get(name, 0.0) for name in prep.fixed_names], dtype=float)
    resid = prep.y - prep.X @ beta
    sigma2 = float(variance["residual"])
    n = len(prep.y)
    blocks, offsets, levels = [], {}, {}
    at = 0
    for g in prep.groups_used:
        tau2 = float(variance.get(g) or 0.0)
        codes, uniq = pd.factorize(pd.Series(prep.group_labels[g]), sort=True)
        levels[g] = [str(u) for u in uniq]
        if tau2 <= 0:
            continue  # a variance at 0: the effects are 0, exactly
        z = sp.csr_matrix((np.ones(n), (np.arange(n), codes)), shape=(n, len(uniq)))
        blocks.append((z, tau2))
        offsets[g] = at
        at += len(uniq)
    reviewers = levels.get("reviewer_id", [])
    counts = pd.Series(prep.group_labels.get("reviewer_id", [])).value_counts()
    z_crit = float(stats.norm.ppf(0.5 + level / 2))
    if "reviewer_id" not in offsets:
        effect = np.zeros(len(reviewers))
        sd = np.zeros(len(reviewers))
    else:
        Z = sp.hstack([b for b, _ in blocks]).tocsc()
        prior = np.concatenate([np.full(b.shape[1], 1.0 / t) for b, t in blocks])
        A = (Z.T @ Z) / sigma2 + sp.diags(prior)
        lu = splu(A.tocsc())
        modes = lu.solve(np.asarray(Z.T @ resid / sigma2, dtype=float))
        start = offsets["reviewer_id"]
        effect = modes[start : start + len(reviewers)]
        sd = np.empty(len(reviewers))
        for lo in range(0, len(reviewers), 256):
            hi = min(lo + 256, len(reviewers))
            rhs = np.zeros((A.shape[0], hi - lo))
            rhs[start + np.arange(lo, hi), np.arange(hi - lo)] = 1.0
            sol = lu.solve(rhs)
            sd[lo:hi] = np.sqrt(np.maximum(sol[start + np.arange(lo, hi), np.arange(hi - lo)], 0))
    low, high = effect - z_crit * sd, effect + z_crit * sd
    flag = np.where(low > 0, "lenient", np.where(high < 0, "severe", ""))
    out = pd.DataFrame(
        {
            "reviewer_id": reviewers,
            "effect": effect,
            "sd": sd,
            "low": low,
            "high": high,
            "reviews": [int(counts.get(r, 0)) for r in reviewers],
            "flag": flag,
        },
        columns=cols,
    )
    return out.sort_values("effect", ascending=False, kind="stable").reset_index(drop=True)


# ----------------------------------------------------------------------------- with/without


def primary_metrics(plan: AnalysisPlan, metrics: Sequence[str]) -> list[str]:
    """The metrics whose tests the with/without table shows: the plan's primary metrics,
    else its primary test's metric, else every metric it tests."""
    if plan.primary_metrics:
        return list(plan.primary_metrics)
    if plan.primary is not None:
        return [plan.primary.metric]
    return plan.metrics(metrics)


def with_without(
    tests_with: Mapping[str, dict[str, Any]],
    tests_without: Mapping[str, dict[str, Any]],
    *,
    plan: AnalysisPlan,
    metrics: Sequence[str],
    emptied: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The plan's primary comparisons on all reviews and without the excluded ones, side
    by side: each side corrected as the plan corrects it (its own families, computed on
    its own data), so a decision that changes shows as a changed ``reject``.

    ``emptied`` names the conditions the exclusion left without a review (condition ->
    the sentence to show): a row comparing such a condition, or against such a
    baseline, keeps its figures on all reviews, has none on the kept side, says why in
    ``kept_note``, and ``changed`` is None (no decision to compare). So does a row the
    kept side has no result for (a mixed model that failed on the kept reviews): a
    missing decision is not a changed one.

    Parameters
    ----------
    tests_with, tests_without
        Test name → its report section (`hypothesis`, `plan.mixed_comparisons`), on all
        reviews and on the kept ones.
    plan
        The analysis plan whose primary comparisons and corrections are shown.
    metrics
        The report's metrics.
    emptied
        Condition → why the kept side has no review of it.

    Returns
    -------
    list of dict
        The report's with/without rows, JSON-ready by design (they are written out as
        they are): test, metric, condition, diff / n / p_adjusted / reject on each side
        (``_all``, ``_kept``), changed and kept_note.
    """
    import copy

    def side(tests: Mapping[str, dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
        tests = copy.deepcopy(dict(tests))
        apply_plan(tests, plan, metrics=metrics)
        out = {}
        for name, result in tests.items():
            for row in (result or {}).get("comparisons", []):
                out[(name, row["metric"], row["condition"])] = row
        return out

    a, b = side(tests_with), side(tests_without)
    wanted = set(primary_metrics(plan, metrics))
    rows = []
    for key in sorted(a, key=lambda k: (plan.tests.index(k[0]) if k[0] in plan.tests else 99, k)):
        test, metric, condition = key
        if test not in plan.tests or metric not in wanted:
            continue
        mine, theirs = a[key], b.get(key, {})
        gone = (emptied or {}).get(condition) or (emptied or {}).get(mine.get("baseline", ""))
        if not gone and key not in b:
            gone = "no result on the kept reviews (the test could not be computed on them)"
        rows.append(
            {
                "test": test,
                "metric": metric,
                "condition": condition,
                **{f"{k}_all": mine.get(k) for k in _SIDE},
                **{f"{k}_kept": None if gone else theirs.get(k) for k in _SIDE},
                "changed": None if gone else bool(mine.get("reject")) != bool(theirs.get("reject")),
                "kept_note": gone or "",
            }
        )
    return rows


_SIDE = ("diff", "n", "p_adjusted", "reject")
