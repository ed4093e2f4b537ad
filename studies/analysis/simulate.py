"""Simulated review studies for planning: how many reviewers and ideas does a design need?

`simulate_study` draws one study from the crossed random-effects model the analysis
assumes,

    score = grand_mean + effect[condition] + topic + idea + reviewer + residual,

with normal effects of the given variances, and returns it in the review-frame contract
(`frame.py`), so every analysis function runs on it unchanged. `power` repeats that and
reports how often each test rejects.

The defaults echo Si et al.'s novelty scores (their Table 17: reviewer variance 0.80, idea
variance 0.41; 49 ideas per condition, 79 reviewers with loads of 2-7). The assignment
ignores reviewers' topic preferences: reviewers and topics are fully crossed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .frame import FLAG_COLUMN, ID_COLUMNS, QUALITY_COLUMNS
from .plan import TESTS

SI2024_LIKE_CONDITIONS: dict[str, float] = {"Human": 0.0, "AI": 0.76, "AI_Rerank": 0.90}
Runner = Callable[[pd.DataFrame], dict[str, float | None]]


def simulate_study(
    *,
    n_reviewers: int = 79,
    n_ideas_per_condition: int = 49,
    conditions: Mapping[str, float] | None = None,
    baseline: str = "Human",
    reviews_per_idea: int | tuple[int, int] = 2,
    n_topics: int = 7,
    var_reviewer: float = 0.80,
    var_idea: float = 0.41,
    var_topic: float = 0.05,
    var_residual: float = 1.9,
    grand_mean: float = 5.0,
    load: tuple[int, int] = (2, 7),
    metrics: Sequence[str] = ("overall",),
    discretize: bool = False,
    seed: int | np.random.Generator | None = 0,
) -> pd.DataFrame:
    """One simulated study as a review frame (one row per review; no idea in two conditions).

    conditions maps each condition to its true effect over the baseline; the baseline is
    added with effect 0 when absent (and must be 0 when given). reviews_per_idea is a
    number or an inclusive (low, high) range drawn per idea. Reviewer loads are drawn in
    the inclusive `load` range and then adjusted to sum to the number of reviews; a design
    whose reviews cannot fit those loads is a ValueError. Each reviewer sees an idea at
    most once and, with a load of 2 or more, at least two conditions. Each metric gets
    its own draw of every random effect. With discretize=True scores are rounded and
    clipped to the 1-10 form scale (which shrinks effects a little, as real forms do).
    familiarity, confidence, minutes and rationale_words are not simulated (NaN).
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    effects = dict(SI2024_LIKE_CONDITIONS if conditions is None else conditions)
    if effects.setdefault(baseline, 0.0) != 0.0:
        raise ValueError(f"the baseline {baseline!r} must have effect 0, got {effects[baseline]}")
    for name, v in {
        "var_reviewer": var_reviewer,
        "var_idea": var_idea,
        "var_topic": var_topic,
        "var_residual": var_residual,
    }.items():
        if v < 0:
            raise ValueError(f"{name} must be >= 0, got {v}")
    cond_names = [baseline, *[c for c in effects if c != baseline]]
    layout = draw_layout(
        n_reviewers=n_reviewers,
        n_ideas_per_condition=n_ideas_per_condition,
        n_conditions=len(cond_names),
        reviews_per_idea=reviews_per_idea,
        n_topics=n_topics,
        load=load,
        rng=rng,
    )
    slots, reviewer = layout.idea, layout.reviewer
    idea_cond, idea_topic = layout.idea_condition, layout.idea_topic
    n_ideas = len(idea_cond)

    n_rows = len(slots)
    data: dict[str, Any] = {
        "row_id": np.arange(n_rows),
        "review_id": [f"r{i}" for i in range(n_rows)],
        "idea_id": [f"idea{k}" for k in slots],
        "condition": [cond_names[c] for c in idea_cond[slots]],
        "topic": [f"topic{t}" for t in idea_topic[slots]],
        "reviewer_id": [f"rev{r}" for r in reviewer],
    }
    shift = np.array([effects[c] for c in cond_names])
    sd = np.sqrt([var_topic, var_idea, var_reviewer, var_residual])
    for metric in metrics:
        score = (
            grand_mean
            + shift[idea_cond[slots]]
            + rng.normal(0, sd[0], n_topics)[idea_topic[slots]]
            + rng.normal(0, sd[1], n_ideas)[slots]
            + rng.normal(0, sd[2], n_reviewers)[reviewer]
            + rng.normal(0, sd[3], n_rows)
        )
        data[metric] = np.clip(np.rint(score), 1, 10) if discretize else score
    for col in QUALITY_COLUMNS:
        data[col] = np.full(n_rows, np.nan)
    data[FLAG_COLUMN] = np.zeros(n_rows, bool)
    df = pd.DataFrame(data)
    return df[[*ID_COLUMNS, *metrics, *QUALITY_COLUMNS, FLAG_COLUMN]]


@dataclass(frozen=True)
class Layout:
    """Who reviews what in one simulated study, as integer codes (no scores).

    ``idea`` and ``reviewer`` hold one entry per review; ``idea_condition`` (0 is the
    baseline) and ``idea_topic`` one per idea. Power calculations draw many score sets on
    one layout without building a frame (`sizing.py`).
    """

    idea: np.ndarray
    reviewer: np.ndarray
    idea_condition: np.ndarray
    idea_topic: np.ndarray
    n_reviewers: int
    n_topics: int


def draw_layout(
    *,
    n_reviewers: int,
    n_ideas_per_condition: int,
    n_conditions: int,
    reviews_per_idea: int | tuple[int, int],
    n_topics: int,
    load: tuple[int, int],
    rng: np.random.Generator,
) -> Layout:
    """The assignment of `simulate_study` (its rules and its draws from `rng`, in order)."""
    if n_topics < 1 or n_ideas_per_condition < 1 or n_reviewers < 1:
        raise ValueError("n_topics, n_ideas_per_condition and n_reviewers must be >= 1")
    n_cond = n_conditions
    n_ideas = n_cond * n_ideas_per_condition
    # Idea k belongs to condition k // n_ideas_per_condition; topics are spread evenly
    # within each condition.
    idea_cond = np.repeat(np.arange(n_cond), n_ideas_per_condition)
    idea_topic = np.concatenate(
        [rng.permutation(np.arange(n_ideas_per_condition) % n_topics) for _ in range(n_cond)]
    )
    # Review order: ideas interleaved by condition in one fixed cycle (c0 c1 c2 c0 c1 ...),
    # each condition's ideas shuffled. Reviewers take consecutive runs of slots, so a run
    # of two or more always spans two conditions and, as the same order repeats for each
    # round of reviews, never holds an idea twice.
    cycle = rng.permutation(n_cond)
    within = np.stack([rng.permutation(n_ideas_per_condition) for _ in range(n_cond)])
    order = (cycle[None, :] * n_ideas_per_condition + within[cycle].T).ravel()

    if isinstance(reviews_per_idea, tuple):
        lo, hi = reviews_per_idea
        counts = rng.integers(lo, hi + 1, size=n_ideas)
    else:
        counts = np.full(n_ideas, int(reviews_per_idea))
    if counts.min() < 1 or counts.max() > n_reviewers:
        raise ValueError("reviews_per_idea must be between 1 and n_reviewers")
    slots = np.concatenate([order[counts[order] > r] for r in range(counts.max())])
    loads = _draw_loads(len(slots), n_reviewers, load, n_ideas, rng)
    reviewer = np.repeat(rng.permutation(n_reviewers), loads)
    _repair(reviewer, slots, idea_cond, rng)
    return Layout(slots, reviewer, idea_cond, idea_topic, n_reviewers, n_topics)


def _draw_loads(
    total: int, n_reviewers: int, load: tuple[int, int], n_ideas: int, rng: np.random.Generator
) -> np.ndarray:
    """Loads in [lo, hi] summing to `total`: everyone gets lo, the rest lands at random."""
    lo, hi = load
    if not 1 <= lo <= hi:
        raise ValueError(f"load must be an increasing range of positive ints, got {load}")
    if hi > n_ideas:
        raise ValueError(f"a load of {hi} exceeds the {n_ideas} ideas a reviewer could see")
    if not n_reviewers * lo <= total <= n_reviewers * hi:
        raise ValueError(
            f"{total} reviews cannot be spread over {n_reviewers} reviewers with loads "
            f"{lo}-{hi} (they hold {n_reviewers * lo}-{n_reviewers * hi})"
        )
    spare = np.repeat(np.arange(n_reviewers), hi - lo)
    extra = rng.choice(spare, size=total - n_reviewers * lo, replace=False)
    return lo + np.bincount(extra, minlength=n_reviewers)


def _repair(
    reviewer: np.ndarray, idea: np.ndarray, idea_cond: np.ndarray, rng: np.random.Generator
) -> None:
    """Swap slots until no reviewer has an idea twice or a load >= 2 in one condition.

    The interleaved order already satisfies both for a fixed reviews_per_idea; this local
    search only mends the seams that a (low, high) range leaves. Works in place.
    """
    several = len(np.unique(idea_cond)) > 1

    def penalty(r: int) -> int:
        mine = idea[reviewer == r]
        dup = len(mine) - len(np.unique(mine))
        mono = several and len(mine) > 1 and len(np.unique(idea_cond[mine])) < 2
        return dup + int(mono)

    # Vectorised first check: the common case has nothing to mend.
    n_r = int(reviewer.max()) + 1
    load = np.bincount(reviewer, minlength=n_r)
    pairs = np.unique(reviewer * (int(idea.max()) + 1) + idea)
    distinct = np.bincount(pairs // (int(idea.max()) + 1), minlength=n_r)
    cond_pairs = np.unique(reviewer * (int(idea_cond.max()) + 1) + idea_cond[idea])
    n_conds = np.bincount(cond_pairs // (int(idea_cond.max()) + 1), minlength=n_r)
    flagged = (distinct < load) | (several & (load > 1) & (n_conds < 2))
    todo = [int(r) for r in np.flatnonzero(flagged)]
    for _ in range(200 * len(idea)):
        while todo and not penalty(todo[-1]):
            todo.pop()
        if not todo:
            return
        r = todo[-1]
        s = rng.choice(np.flatnonzero(reviewer == r))
        t = int(rng.integers(len(idea)))
        r2 = reviewer[t]
        if r2 == r:
            continue
        before = penalty(r) + penalty(r2)
        idea[s], idea[t] = idea[t], idea[s]
        if penalty(r) + penalty(r2) >= before:
            idea[s], idea[t] = idea[t], idea[s]
    raise ValueError("could not find an assignment within the design's constraints")


def _p_for(result: dict[str, Any], condition: str) -> float | None:
    if not result.get("available", True):
        return None
    for comp in result["comparisons"]:
        if comp["condition"] == condition:
            return comp["p_two_sided"]
    return None


def _mixed_p(fit: Any, condition: str) -> float | None:
    for row in fit.fixed:
        if row["term"] == f"condition[{condition}]":
            return row["p"]
    return None


def power(
    *,
    n_reps: int = 200,
    alpha: float = 0.05,
    seed: int = 0,
    tests: Sequence[str] = TESTS,
    metric: str = "overall",
    mixed_options: Mapping[str, Any] | None = None,
    **design: Any,
) -> pd.DataFrame:
    """Share of `n_reps` simulated studies in which each test rejects at `alpha`, per condition.

    `design` takes the keyword arguments of `simulate_study` (not seed or metrics). A
    replication whose test yields no p (e.g. no reviewer saw both conditions, or a mixed
    fit that failed) is left out of that test's denominator, counted in n_valid. The
    p-value is the raw two-sided one: one metric is tested, so there is nothing to
    correct. Asking for "mixed" needs `studies.analysis.mixed` (ImportError otherwise).

    Columns: test, condition, effect (true), n_reps, n_valid, rejections, power, mc_se
    (Monte Carlo SE of power, sqrt(p(1-p)/n_valid)), alpha.
    """
    from . import hypothesis

    unknown = set(tests) - set(TESTS)
    if unknown:
        raise ValueError(f"unknown test(s) {sorted(unknown)}; choose from {TESTS}")
    if {"seed", "metrics"} & design.keys():
        raise ValueError("pass seed to power(), and choose the metric with metric=")
    baseline = design.get("baseline", "Human")
    effects = dict(design.get("conditions") or SI2024_LIKE_CONDITIONS)
    effects.setdefault(baseline, 0.0)
    others = [c for c in effects if c != baseline]

    def t_test(fn: Callable[..., dict[str, Any]]) -> Runner:
        def run(df: pd.DataFrame) -> dict[str, float | None]:
            result = fn(df, [metric], baseline=baseline)
            return {c: _p_for(result, c) for c in others}

        return run

    runners: dict[str, Runner] = {}
    for name, fn in (
        ("by_review", hypothesis.test_by_review),
        ("by_idea", hypothesis.test_by_idea),
        ("by_reviewer", hypothesis.test_by_reviewer),
    ):
        if name in tests:
            runners[name] = t_test(fn)
    if "mixed" in tests:
        from .mixed import fit_mixed  # written separately; heavy, so imported only on demand

        opts = dict(mixed_options or {})

        def run_mixed(df: pd.DataFrame) -> dict[str, float | None]:
            try:
                fit = fit_mixed(df, metric, baseline=baseline, **opts)
            except (ValueError, ArithmeticError, np.linalg.LinAlgError):
                # a degenerate draw is one invalid replication, not a failed power study
                return dict.fromkeys(others)
            return {c: _mixed_p(fit, c) for c in others}

        runners["mixed"] = run_mixed

    rejections = {(t, c): 0 for t in runners for c in others}
    valid = dict.fromkeys(rejections, 0)
    for child in np.random.SeedSequence(seed).spawn(n_reps):
        df = simulate_study(**design, metrics=(metric,), seed=np.random.default_rng(child))
        for name, run in runners.items():
            for cond, p in run(df).items():
                if p is not None and np.isfinite(p):
                    valid[(name, cond)] += 1
                    rejections[(name, cond)] += int(p < alpha)
    out = []
    for (name, cond), n_ok in valid.items():
        share = rejections[(name, cond)] / n_ok if n_ok else np.nan
        out.append(
            {
                "test": name,
                "condition": cond,
                "effect": float(effects[cond]),
                "n_reps": n_reps,
                "n_valid": n_ok,
                "rejections": rejections[(name, cond)],
                "power": share,
                "mc_se": float(np.sqrt(share * (1 - share) / n_ok)) if n_ok else np.nan,
                "alpha": alpha,
            }
        )
    return pd.DataFrame(out)
