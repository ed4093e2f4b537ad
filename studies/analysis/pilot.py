"""A study sized from a pilot: estimate the score model, find the design, show the doubt.

From a pilot's (or a finished study's) review frame, :func:`estimate_pilot` fits the
crossed mixed model of the report (``metric ~ condition + (1|topic) + (1|reviewer) +
(1|idea)``, REML, through :func:`mixed.fit_mixed`) and reads off the variance components
and the condition effect of the primary hypothesis. :func:`size_from_pilot` then asks
`sizing.py` for the cheapest design (fewest reviews) whose power for that hypothesis
reaches the target, for each number of reviews per idea offered, and repeats the search
on a parametric bootstrap of the pilot: pilots of the pilot's own layout are drawn from
the estimated model, re-fitted, and each re-fit is sized again. The spread of those sizes
is the doubt a small pilot leaves, shown as a percentile interval.

The effect can be the pilot's estimate or, better, the smallest effect worth detecting
(``effect=``): a pilot's effect estimate is so noisy that the size it implies is mostly
noise (docs/power.md has the figures). The variance components are what a pilot measures
well enough.

The bootstrap's re-fits use a dense profiled-REML fit (:class:`DenseReml`, lme4's
formulation as in :mod:`lmm_sparse`), because a pilot's random-effect levels are few: it
reaches the same optimum as :func:`lmm_sparse.fit_lmm` (the tests check that) at a small
fraction of its cost per fit, and hundreds of re-fits are needed. Pilots with more than
``PILOT_DENSE_MAX_LEVELS`` levels are re-fitted with :func:`lmm_sparse.fit_lmm` instead.

Pure module: no Django imports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize
from scipy.linalg.lapack import dpotrf as _dpotrf
from scipy.linalg.lapack import dtrtrs as _dtrtrs

from .frame import has_reviewer_ids, json_float
from .mixed import fit_mixed, prepare_mixed_data
from .plan import AnalysisPlan, ComparisonLevel, comparison_level
from .sizing import (
    SIZING_ALTERNATIVES,
    TESTS,
    Design,
    PowerEngine,
    ScoreModel,
    SearchResult,
    cheapest,
    smallest_design,
)

__all__ = [
    "DenseReml",
    "PilotEstimate",
    "PilotSizing",
    "PrimaryHypothesis",
    "estimate_pilot",
    "size_for_model",
    "size_from_pilot",
    "size_from_plan",
]

#: Above this many random-effect levels the bootstrap re-fits with the sparse engine.
PILOT_DENSE_MAX_LEVELS = 1500
#: The grouping factors of the pilot's model, by their names in the review frame.
_GROUPS = {"topic": "topic", "reviewer": "reviewer_id"}
FractionProgress = Callable[[float, str], None]


@dataclass(frozen=True)
class PrimaryHypothesis:
    """The comparison a study is sized for: ``condition`` against ``baseline`` on
    ``metric`` with ``test``; ``alternative`` "greater" means condition > baseline."""

    metric: str
    test: str
    condition: str
    baseline: str
    alternative: str = "two-sided"

    def __post_init__(self) -> None:
        if self.test not in TESTS:
            raise ValueError(f"test: {self.test!r} is not one of {', '.join(TESTS)}")
        if self.alternative not in SIZING_ALTERNATIVES:
            raise ValueError(
                f"alternative: {self.alternative!r} is not one of {', '.join(SIZING_ALTERNATIVES)}"
            )
        if self.condition == self.baseline:
            raise ValueError("the condition and the baseline must differ")


# ------------------------------------------------------------------ dense REML


class DenseReml:
    """Profiled REML (or ML) fits of ``y ~ X + (1|g1) + ...`` for many responses.

    lme4's formulation (Bates et al. 2015): ``A = Lambda Z'Z Lambda + I`` is factorised
    for each relative covariance ``theta``, ``beta`` and ``sigma^2`` are profiled out, and
    the deviance is minimised over ``theta >= 0`` (L-BFGS-B). Every factor is dense, so
    it is only for designs with few levels, such as pilots.
    """

    def __init__(self, X: np.ndarray, codes: Sequence[np.ndarray], *, reml: bool = True) -> None:
        X = np.asarray(X, dtype=float)
        self.n, self.p = X.shape
        self.k = len(codes)
        blocks, owner = [], []
        for j, c in enumerate(codes):
            c = np.asarray(c)
            _, inverse = np.unique(c, return_inverse=True)
            width = int(inverse.max()) + 1
            z = np.zeros((self.n, width))
            z[np.arange(self.n), inverse] = 1.0
            blocks.append(z)
            owner.append(np.full(width, j))
        self.Z = np.hstack(blocks) if blocks else np.zeros((self.n, 0))
        self.owner = np.concatenate(owner) if owner else np.zeros(0, dtype=int)
        self.X = X
        self.ZtZ = self.Z.T @ self.Z
        self.ZtX = self.Z.T @ X
        self.XtX = X.T @ X
        self.reml = reml
        self.dof = self.n - self.p if reml else self.n
        self._diag = np.diag_indices(self.Z.shape[1])

    def _parts(
        self, theta: np.ndarray, zty: np.ndarray, xty: np.ndarray, yty: float
    ) -> tuple[float, np.ndarray, float]:
        """(deviance, beta, penalised residual sum of squares) at ``theta``.

        LAPACK is called directly: scipy.linalg's checking wrappers cost more than the
        factorisations of a pilot-sized problem.
        """
        lam = theta[self.owner]
        a = lam[:, None] * self.ZtZ * lam[None, :]
        a[self._diag] += 1.0
        chol, info = _dpotrf(a, lower=1, clean=1)
        if info:
            return math.inf, np.zeros(self.p), math.nan
        rhs = np.column_stack([lam * zty, lam[:, None] * self.ZtX])
        sol, _ = _dtrtrs(chol, rhs, lower=1)
        cu, rzx = sol[:, 0], sol[:, 1:]
        rx, info = _dpotrf(self.XtX - rzx.T @ rzx, lower=1, clean=1)
        if info:
            return math.inf, np.zeros(self.p), math.nan
        cb, _ = _dtrtrs(rx, xty - rzx.T @ cu, lower=1)
        r2 = float(yty - cu @ cu - cb @ cb)
        logdet = 2 * np.log(np.diag(chol)).sum()
        if self.reml:
            logdet += 2 * np.log(np.diag(rx)).sum()
        dev = logdet + self.dof * (1 + math.log(2 * math.pi * max(r2, 1e-300) / self.dof))
        beta, _ = _dtrtrs(rx, cb, lower=1, trans=1)
        return float(dev), beta, r2

    def fit(
        self,
        Y: np.ndarray,
        theta0: Sequence[float] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Fit each column of ``Y``: (theta (B, k), sigma^2 (B,), beta (B, p), deviance (B,)).

        ``theta0`` (one start for every column; lme4's ``theta = 1`` by default) should be
        the generating model's ``theta`` in a parametric bootstrap: each fit then starts
        near its optimum. ``progress(done, total)`` is told every 5 columns.
        """
        Y = np.asarray(Y, dtype=float).reshape(self.n, -1)
        zty, xty, yty = self.Z.T @ Y, self.X.T @ Y, (Y * Y).sum(axis=0)
        start = np.ones(self.k) if theta0 is None else np.asarray(theta0, dtype=float)
        n_fit = Y.shape[1]
        thetas, sigma2 = np.zeros((n_fit, self.k)), np.zeros(n_fit)
        betas, devs = np.zeros((n_fit, self.p)), np.zeros(n_fit)
        for b in range(n_fit):
            if progress is not None and b % 5 == 0:
                progress(b, n_fit)
            args = (zty[:, b], xty[:, b], float(yty[b]))
            theta = start
            if self.k:
                # Searched over theta^2: the deviance is even in each theta, so at
                # theta_j = 0 its theta-gradient vanishes and a bounded quasi-Newton
                # search that steps onto the bound stops there; in theta^2 the gradient
                # at the bound says whether the optimum is really there.
                res = optimize.minimize(
                    lambda psi, args=args: self._parts(np.sqrt(psi), *args)[0],
                    start**2,
                    method="L-BFGS-B",
                    bounds=[(0.0, None)] * self.k,
                    options={"ftol": 1e-12, "gtol": 1e-7},
                )
                theta = np.sqrt(res.x)
            devs[b], betas[b], r2 = self._parts(theta, *args)
            thetas[b], sigma2[b] = theta, r2 / self.dof
        return thetas, sigma2, betas, devs


# ------------------------------------------------------------------ the estimate


@dataclass(frozen=True)
class _PilotData:
    """The pilot's rows as the model sees them, for the bootstrap."""

    X: np.ndarray
    codes: dict[str, np.ndarray]  # "topic" / "reviewer" / "idea" -> codes, the groups used
    beta: np.ndarray
    term: int  # column of X holding the hypothesis's condition


@dataclass(frozen=True)
class PilotEstimate:
    """What a pilot says about the score model of one metric.

    ``model`` holds the REML variance components (a component the data cannot identify,
    such as the reviewer without reviewer ids, is 0 and named in ``notes``) and the
    condition's coefficient as the effect; ``effect_se`` its standard error.
    """

    hypothesis: PrimaryHypothesis
    model: ScoreModel
    effect_se: float
    conditions: tuple[str, ...]  # baseline first
    n_reviews: int
    n_ideas: int
    n_reviewers: int
    n_topics: int
    reviews_per_idea: float
    load: float | None  # median reviews per reviewer (None without reviewer ids)
    groups_used: tuple[str, ...]
    notes: tuple[str, ...]
    data: _PilotData = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        m = self.model
        return {
            "hypothesis": self.hypothesis.__dict__.copy(),
            "variances": {
                "topic": m.var_topic,
                "idea": m.var_idea,
                "reviewer": m.var_reviewer,
                "residual": m.var_residual,
            },
            "effect": m.effect,
            "effect_se": json_float(self.effect_se),
            "conditions": list(self.conditions),
            "n_reviews": self.n_reviews,
            "n_ideas": self.n_ideas,
            "n_reviewers": self.n_reviewers,
            "n_topics": self.n_topics,
            "reviews_per_idea": self.reviews_per_idea,
            "load": self.load,
            "groups_used": list(self.groups_used),
            "notes": list(self.notes),
        }

    def bootstrap(
        self,
        n_boot: int,
        *,
        seed: int = 0,
        effect: float | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> tuple[list[ScoreModel], int]:
        """Score models re-fitted on ``n_boot`` pilots drawn from this estimate (same
        rows, topics, ideas and reviewers; new effects and residuals); and the number of
        re-fits that failed. With ``effect`` the models carry that effect instead of the
        re-fitted one."""
        d = self.data
        rng = np.random.default_rng([seed, 7])
        m = self.model
        var = {"topic": m.var_topic, "reviewer": m.var_reviewer, "idea": m.var_idea}
        Y = np.repeat((d.X @ d.beta)[:, None], n_boot, axis=1)
        for g, codes in d.codes.items():
            levels = int(codes.max()) + 1
            Y += math.sqrt(var[g]) * rng.standard_normal((levels, n_boot))[codes]
        Y += math.sqrt(m.var_residual) * rng.standard_normal(Y.shape)
        names = list(d.codes)
        start = [math.sqrt(var[g] / m.var_residual) for g in names]
        thetas, sigma2, betas = _refit(d, Y, start, progress)
        out, failed = [], 0
        for b in range(n_boot):
            v = {g: thetas[b, j] ** 2 * sigma2[b] for j, g in enumerate(names)}
            try:
                out.append(
                    ScoreModel(
                        var_topic=v.get("topic", 0.0),
                        var_idea=v.get("idea", 0.0),
                        var_reviewer=v.get("reviewer", 0.0),
                        var_residual=float(sigma2[b]),
                        effect=float(betas[b, d.term]) if effect is None else effect,
                    )
                )
            except ValueError:
                failed += 1
        return out, failed


def _refit(
    d: _PilotData,
    Y: np.ndarray,
    theta0: list[float],
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    codes = list(d.codes.values())
    if sum(int(c.max()) + 1 for c in codes) <= PILOT_DENSE_MAX_LEVELS:
        thetas, sigma2, betas, _ = DenseReml(d.X, codes).fit(Y, theta0, progress)
        return thetas, sigma2, betas
    from .lmm_sparse import fit_lmm

    thetas = np.zeros((Y.shape[1], len(codes)))
    sigma2, betas = np.zeros(Y.shape[1]), np.zeros((Y.shape[1], d.X.shape[1]))
    for b in range(Y.shape[1]):
        if progress is not None and b % 5 == 0:
            progress(b, Y.shape[1])
        try:
            fit = fit_lmm(Y[:, b], d.X, d.codes, n_starts=1, satterthwaite=False)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            sigma2[b] = math.nan  # a failed re-fit, counted as such by the caller
            continue
        thetas[b] = [fit.theta.get(g, 0.0) for g in d.codes]
        sigma2[b], betas[b] = fit.sigma2, fit.coef
    return thetas, sigma2, betas


def estimate_pilot(
    frame: pd.DataFrame, hypothesis: PrimaryHypothesis, *, n_starts: int = 3, seed: int = 0
) -> PilotEstimate:
    """Fit the pilot's crossed mixed model for the hypothesis's metric (REML).

    ``frame`` is the report's review frame (one row per review x condition). The idea
    unit is the per-condition id (``source_idea_id``) when the frame has one, as in the
    report's main fit. Raises ValueError when the frame lacks the metric, the baseline
    or the condition, or when Test 3 is asked for without reviewer ids.
    """
    h = hypothesis
    for cond in (h.baseline, h.condition):
        if cond not in set(frame["condition"].dropna()):
            raise ValueError(f"the pilot has no reviews in condition {cond!r}")
    if h.test == "by_reviewer" and not has_reviewer_ids(frame):
        raise ValueError(
            "Test 3 (by_reviewer) needs reviewer ids, and this pilot has none: size for "
            "another test, or collect a pilot that records who reviewed what"
        )
    idea_unit = (
        "source_idea_id"
        if "source_idea_id" in frame and frame["source_idea_id"].notna().all()
        else "idea_id"
    )
    groups = ("topic", "reviewer_id", idea_unit)
    fit = fit_mixed(
        frame, h.metric, baseline=h.baseline, groups=groups, n_starts=n_starts, seed=seed,
        satterthwaite=False,
    )  # fmt: skip
    prep = prepare_mixed_data(frame, h.metric, baseline=h.baseline, groups=groups)
    term = f"condition[{h.condition}]"
    row = fit.term(term)
    names = {"topic": "topic", "reviewer_id": "reviewer", idea_unit: "idea"}
    var = {names[g]: float(v) for g, v in fit.variance.items() if g in names}
    used = [g for g in fit.groups_used]
    notes = list(fit.warnings)
    for g, why in fit.groups_dropped.items():
        notes.append(f"the {names.get(g, g)} variance is taken as 0: {why}")
    rows = frame.loc[prep.rows]
    reviews = rows.drop_duplicates("review_id") if "review_id" in rows else rows
    load = None
    if has_reviewer_ids(rows):
        load = float(reviews.groupby("reviewer_id").size().median())
    codes = {names[g]: pd.factorize(pd.Series(prep.group_labels[g]), sort=True)[0] for g in used}
    return PilotEstimate(
        hypothesis=h,
        model=ScoreModel(
            var_topic=var.get("topic", 0.0),
            var_idea=var.get("idea", 0.0),
            var_reviewer=var.get("reviewer", 0.0),
            var_residual=float(fit.variance["residual"]),
            effect=float(row["coef"]),
        ),
        effect_se=float(row["se"]),
        conditions=tuple(prep.levels),
        n_reviews=len(reviews),
        n_ideas=int(rows[idea_unit].nunique()),
        n_reviewers=int(rows["reviewer_id"].nunique()) if load is not None else 0,
        n_topics=max(1, int(rows["topic"].nunique())),
        reviews_per_idea=float(rows.groupby(idea_unit).size().mean()),
        load=load,
        groups_used=tuple(names[g] for g in used),
        notes=tuple(notes),
        data=_PilotData(prep.X, codes, _fixed(fit), prep.fixed_names.index(term)),
    )


def _fixed(fit: Any) -> np.ndarray:
    return np.array([row["coef"] for row in fit.fixed], dtype=float)


# ------------------------------------------------------------------ the sizing


def _whole(ideas: float) -> int | None:
    """A crossing rounded up to whole ideas (None when no design reaches the power)."""
    return math.ceil(ideas) if math.isfinite(ideas) else None


def _whole_reviews(r: SearchResult) -> int | None:
    """The reviews of the whole design at a shape's crossing."""
    whole = _whole(r.ideas)
    if whole is None or r.design is None:
        return None
    return whole * r.design.n_conditions * r.reviews_per_idea


@dataclass(frozen=True)
class PilotSizing:
    """The recommended design, the doubt about it, and the power curves behind it.

    ``size`` is the cost of the recommended design in reviews, interpolated where the
    power curve crosses the target (``design`` rounds its ideas up); ``interval`` the
    ``level`` percentile interval of that size over the bootstrap pilots (each sized
    afresh, its cheapest shape chosen again), ``math.inf`` where the cap was not enough;
    ``ideas_interval`` the same for the recommended shape's ideas per condition.
    """

    estimate: PilotEstimate
    model: ScoreModel  # the model sized for: the estimate, with the given effect if any
    effect_given: bool
    target_power: float
    alpha: float
    alternative: str
    level: float
    design: Design | None
    size: float
    power: float | None
    mc_se: float
    interval: tuple[float, float]
    ideas_interval: tuple[float, float]
    shapes: tuple[SearchResult, ...]
    boot_sizes: np.ndarray = field(repr=False, compare=False)
    boot_ideas: np.ndarray = field(repr=False, compare=False)
    boot_failed: int
    curve: pd.DataFrame = field(repr=False, compare=False)
    plan_level: ComparisonLevel | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: numbers as floats or None (an unreachable size is None)."""
        shapes = [
            {
                "reviews_per_idea": r.reviews_per_idea,
                "load": r.load,
                "ideas_per_condition": json_float(r.ideas),
                "reviews": json_float(r.reviews),
                # The crossing rounded up to whole ideas, as the chosen design is.
                "whole_ideas_per_condition": _whole(r.ideas),
                "whole_reviews": _whole_reviews(r),
                "design": r.design.as_dict() if r.design else None,
                "power": json_float(r.power),
            }
            for r in self.shapes
        ]
        return {
            "estimate": self.estimate.to_dict(),
            "effect": self.model.effect,
            "effect_given": self.effect_given,
            "target_power": self.target_power,
            "alpha": self.alpha,
            "alternative": self.alternative,
            "plan_level": self.plan_level.as_dict() if self.plan_level else None,
            "design": self.design.as_dict() if self.design else None,
            "size_reviews": json_float(self.size),
            "power": json_float(self.power),
            "mc_se": json_float(self.mc_se),
            "level": self.level,
            "interval_reviews": [json_float(x) for x in self.interval],
            "interval_ideas_per_condition": [json_float(x) for x in self.ideas_interval],
            "bootstrap": {
                "n": int(len(self.boot_sizes)),
                "failed_fits": self.boot_failed,
                "beyond_cap": int(np.isinf(self.boot_sizes).sum()),
            },
            "shapes": shapes,
            "curve": [
                {k: json_float(v) if isinstance(v, float) else v for k, v in row.items()}
                for row in self.curve.to_dict(orient="records")
            ],
            "settings": dict(self.settings),
        }


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    """The ``level`` percentile interval; order statistics, so that an infinite size
    (beyond the cap) is a bound rather than a NaN."""
    if len(values) == 0:
        return (math.nan, math.nan)
    q = [(1 - level) / 2, (1 + level) / 2]
    lo, hi = np.quantile(values, q, method="inverted_cdf")
    return float(lo), float(hi)


@dataclass
class _Sizer:
    """One search per offered shape, for any score model (shared engine and draws)."""

    engine: PowerEngine
    shapes: tuple[int, ...]  # reviews per idea
    load: int
    n_conditions: int
    n_topics: int
    alpha: float
    alternative: str
    target: float
    cap: int

    def search(
        self, model: ScoreModel, starts: Mapping[int, float] | None = None
    ) -> list[SearchResult]:
        out = []
        for k in self.shapes:
            start = (starts or {}).get(k)
            out.append(
                smallest_design(
                    self.engine, model, reviews_per_idea=k, load=self.load,
                    n_conditions=self.n_conditions, n_topics=self.n_topics, alpha=self.alpha,
                    alternative=self.alternative, target=self.target,
                    max_ideas_per_condition=self.cap,
                    start=None if start is None or not math.isfinite(start) else int(start),
                )
            )  # fmt: skip
        return out

    def design(self, k: int, ideas: int) -> Design:
        return Design(ideas, k, self.load, self.n_conditions, self.n_topics)


def size_from_pilot(
    frame: pd.DataFrame,
    hypothesis: PrimaryHypothesis,
    *,
    alpha: float,
    power: float = 0.8,
    effect: float | None = None,
    reviews_per_idea: Sequence[int] = (2, 3, 4),
    load: int | None = None,
    n_boot: int = 200,
    level: float = 0.9,
    n_reps: int = 400,
    n_layouts: int = 4,
    max_ideas_per_condition: int = 2000,
    n_starts: int = 3,
    seed: int = 0,
    progress: FractionProgress | None = None,
    plan_level: ComparisonLevel | None = None,
    curve_points: int = 14,
    engine: PowerEngine | None = None,
) -> PilotSizing:
    """The cheapest design whose power for ``hypothesis`` at ``alpha`` reaches ``power``.

    ``alpha`` is the level the test is run at, after the plan's correction (see
    :func:`size_from_plan`). ``effect`` is the effect to detect (condition minus
    baseline); None takes the pilot's estimate. Designs keep the pilot's conditions and
    topics, offer each of ``reviews_per_idea``, and give each reviewer ``load`` reviews
    (default: the pilot's median load). ``n_boot`` bootstrap pilots give the ``level``
    interval; ``n_reps`` replications per design estimate each power; the power curve
    has ``curve_points`` idea counts per shape (0: no curve). An ``engine`` (for the
    hypothesis's test) replaces ``n_reps``, ``n_layouts`` and ``seed`` for the power
    calculations and keeps its drawn designs for the next call.
    """
    say = progress or (lambda _f, _m: None)
    if not 0 < power < 1 or not 0 < level < 1:
        raise ValueError("power and level must be between 0 and 1")
    if not reviews_per_idea or min(reviews_per_idea) < 1:
        raise ValueError("reviews_per_idea must list at least one count >= 1")
    say(0.0, "fitting the pilot's mixed model")
    est = estimate_pilot(frame, hypothesis, n_starts=n_starts, seed=seed)
    if load is None:
        if est.load is None:
            raise ValueError("the pilot has no reviewer ids: give the reviewers' load")
        load = max(1, round(est.load))
    model = est.model if effect is None else replace(est.model, effect=float(effect))
    engine = engine or PowerEngine(hypothesis.test, n_reps=n_reps, n_layouts=n_layouts, seed=seed)
    if engine.test != hypothesis.test:
        raise ValueError(
            f"the engine computes {engine.test}, the hypothesis asks for {hypothesis.test}"
        )
    sizer = _Sizer(
        engine, tuple(sorted(set(int(k) for k in reviews_per_idea))), int(load),
        len(est.conditions), est.n_topics, alpha, hypothesis.alternative, power,
        max_ideas_per_condition,
    )  # fmt: skip
    say(0.05, "searching the designs")
    shapes = sizer.search(model)
    best = cheapest(shapes)
    starts = {r.reviews_per_idea: r.ideas for r in shapes}
    say(0.1, f"bootstrap: re-fitting {n_boot} simulated pilots")

    def refitted(done: int, total: int) -> None:
        say(0.1 + 0.4 * done / total, f"bootstrap: re-fitted {done} of {total} simulated pilots")

    boot_models, failed = est.bootstrap(n_boot, seed=seed, effect=effect, progress=refitted)
    sizes, ideas = np.full(len(boot_models), math.inf), np.full(len(boot_models), math.inf)
    for b, bm in enumerate(boot_models):
        found = sizer.search(bm, starts)
        own = cheapest(found)
        sizes[b] = own.reviews if own else math.inf
        if best is not None:
            ideas[b] = next(r.ideas for r in found if r.reviews_per_idea == best.reviews_per_idea)
        if b % 10 == 9:
            say(
                0.5 + 0.4 * (b + 1) / len(boot_models),
                f"bootstrap: sized {b + 1} of {n_boot} simulated pilots",
            )
    say(0.9, "drawing the power curves")
    design = None if best is None else sizer.design(best.reviews_per_idea, math.ceil(best.ideas))
    pw = None
    if design is not None:
        pw = sizer.engine.power(design, model, alpha=alpha, alternative=hypothesis.alternative)
    curve = _curve(sizer, model, boot_models, best, ideas, level, curve_points)
    say(1.0, "done")
    return PilotSizing(
        estimate=est, model=model, effect_given=effect is not None, target_power=power,
        alpha=alpha, alternative=hypothesis.alternative, level=level, design=design,
        size=best.reviews if best else math.inf, power=pw,
        mc_se=sizer.engine.mc_se(pw) if pw is not None else math.nan,
        interval=_percentiles(sizes, level), ideas_interval=_percentiles(ideas, level),
        shapes=tuple(shapes), boot_sizes=sizes, boot_ideas=ideas, boot_failed=failed,
        curve=curve, plan_level=plan_level,
        settings={
            "reviews_per_idea": list(sizer.shapes), "load": sizer.load, "n_boot": n_boot,
            "n_reps": engine.n_reps, "n_layouts": engine.n_layouts, "seed": seed,
            "engine_seed": engine.seed,
            "max_ideas_per_condition": max_ideas_per_condition,
        },
    )  # fmt: skip


def _curve(
    sizer: _Sizer,
    model: ScoreModel,
    boot: Sequence[ScoreModel],
    best: SearchResult | None,
    boot_ideas: np.ndarray,
    level: float,
    points: int = 14,
) -> pd.DataFrame:
    """Power against ideas per condition for each shape (the estimate), with the
    bootstrap band for the recommended shape: one row per (shape, ideas)."""
    low = max(2, -(-sizer.load // sizer.n_conditions))
    finite = boot_ideas[np.isfinite(boot_ideas)]
    top = max(
        [low * 4.0]
        + ([best.ideas * 2.0] if best else [])
        + ([float(np.quantile(finite, (1 + level) / 2)) * 1.2] if len(finite) else [])
    )
    top = min(top, float(sizer.cap))
    grid = np.unique(np.round(np.geomspace(low, max(top, low + 1), points)).astype(int))
    rows: list[dict[str, Any]] = []
    if points < 1:
        return pd.DataFrame(rows)
    for k in sizer.shapes:
        for m in grid:
            d = sizer.design(k, int(m))
            p = sizer.engine.power(d, model, alpha=sizer.alpha, alternative=sizer.alternative)
            row: dict[str, Any] = {
                "reviews_per_idea": k, "ideas_per_condition": int(m),
                "reviewers": d.n_reviewers, "reviews": d.n_reviews, "power": p,
                "band_low": None, "band_high": None,
            }  # fmt: skip
            if best is not None and k == best.reviews_per_idea and boot:
                ps = [
                    sizer.engine.power(d, bm, alpha=sizer.alpha, alternative=sizer.alternative)
                    for bm in boot
                ]
                row["band_low"], row["band_high"] = (
                    float(x) for x in np.quantile(ps, [(1 - level) / 2, (1 + level) / 2])
                )
            rows.append(row)
    return pd.DataFrame(rows)


def size_from_plan(
    frame: pd.DataFrame,
    plan: AnalysisPlan,
    *,
    metric: str,
    test: str,
    condition: str,
    baseline: str,
    metrics: Sequence[str],
    **options: Any,
) -> PilotSizing:
    """:func:`size_from_pilot` at the level and in the direction the plan tests the
    comparison (its family's correction over the plan's metrics, tests and the pilot's
    conditions; :func:`plan.comparison_level`)."""
    conditions = sorted(set(frame["condition"].dropna().astype(str)))
    lv = comparison_level(
        plan, test=test, metric=metric, condition=condition, baseline=baseline,
        metrics=metrics, conditions=conditions,
    )  # fmt: skip
    h = PrimaryHypothesis(metric, test, condition, baseline, lv.alternative)
    return size_from_pilot(frame, h, alpha=lv.level, plan_level=lv, **options)


def size_for_model(
    model: ScoreModel,
    *,
    test: str,
    alpha: float,
    alternative: str = "two-sided",
    power: float = 0.8,
    reviews_per_idea: Sequence[int] = (2, 3, 4),
    load: int,
    n_conditions: int = 2,
    n_topics: int = 1,
    n_reps: int = 400,
    n_layouts: int = 4,
    max_ideas_per_condition: int = 2000,
    seed: int = 0,
    engine: PowerEngine | None = None,
) -> tuple[SearchResult | None, list[SearchResult]]:
    """The cheapest design for a known score model, and every shape's search: the same
    machinery :func:`size_from_pilot` uses (with the same ``seed``, the same draws)."""
    sizer = _Sizer(
        engine or PowerEngine(test, n_reps=n_reps, n_layouts=n_layouts, seed=seed),
        tuple(sorted(set(int(k) for k in reviews_per_idea))), int(load), n_conditions,
        n_topics, alpha, alternative, power, max_ideas_per_condition,
    )  # fmt: skip
    shapes = sizer.search(model)
    return cheapest(shapes), shapes
