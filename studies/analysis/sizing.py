"""The power of one planned test over study designs, and the smallest design that reaches it.

The score model is the one `simulate.py` draws from (and the mixed model fits),

    score = mean + effect[condition] + topic + idea + reviewer + residual,

with the variance components of a :class:`ScoreModel`. A :class:`Design` is what a
researcher chooses: ideas per condition, reviews per idea and each reviewer's load (the
number of reviewers follows); its reviews are laid out by `simulate.draw_layout`, the
simulation engine's assignment.

:class:`PowerEngine` estimates the power of one test (Test 1 ``by_review``, Test 2
``by_idea``, Test 3 ``by_reviewer`` or the mixed model's condition coefficient,
``mixed``) for condition 1 against the baseline, condition 0. For Tests 1-3 it simulates:
per design it draws ``n_reps`` standard-normal effects once (common random numbers) and
keeps, per replication, the group means and centred Gram matrices of each random
component on the test's units (reviews, idea means or per-reviewer differences). Every
statistic of those tests is a linear function of the components (the means) or a quadratic
form in them (the sums of squares), so the t statistic of any score model is a few array
operations away: searching many designs for many score models (a bootstrap) re-uses the
draws instead of simulating again, and every score model sees the same noise, so the
Monte Carlo error largely cancels when two models are compared.

Test 1's reviews are the only units at the level of the residual. Rather than drawing a
residual per review, the group mean of the residuals and its centred sum of squares are
drawn from their joint law: with ``g`` the centred non-residual part of the scores of one
group of ``n`` reviews and ``e`` the residuals, ``sum((g + e - mean)^2)`` equals
``(|g| + s a)^2 + s^2 c`` with ``a`` standard normal and ``c`` chi-square on ``n - 2``
degrees of freedom, independent of each other and of the residual mean (project ``e`` on
the direction of ``g``). That is exact in distribution, for every ``s``.

The mixed model's p-value is a Wald z of the condition coefficient. With the variance
components known, the generalised least-squares estimate is normal with a variance that
depends on the design alone, so its power is computed, not simulated, on each drawn
layout (the variance through Woodbury's identity with the ideas eliminated first, their
block being diagonal). The fitted model estimates the components, which makes its real
power a little different in small studies (docs/power.md).

:func:`smallest_design` finds, for one design shape (reviews per idea, load), the fewest
ideas per condition whose power reaches the target: power rises with the number of ideas,
so it gallops then bisects over a geometric grid of idea counts instead of trying them all.

Pure module: no Django imports.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
from scipy import special, stats

from .plan import TESTS
from .simulate import Layout, draw_layout

__all__ = [
    "SIZING_ALTERNATIVES",
    "TESTS",
    "Design",
    "MixedLayout",
    "PowerEngine",
    "ScoreModel",
    "SearchResult",
    "cheapest",
    "gls_variance",
    "ideas_grid",
    "mixed_layout",
    "smallest_design",
]

#: The alternative of condition 1 against the baseline: "greater" means condition > baseline.
SIZING_ALTERNATIVES = ("two-sided", "greater", "less")
#: The ratio between neighbouring idea counts the search tries (after the small counts,
#: where every integer is tried): finer than the Monte Carlo error of a few hundred reps.
GRID_RATIO = 1.06


@dataclass(frozen=True)
class ScoreModel:
    """Variance components of the score model and the compared condition's effect."""

    var_topic: float
    var_idea: float
    var_reviewer: float
    var_residual: float
    effect: float

    def __post_init__(self) -> None:
        for name in ("var_topic", "var_idea", "var_reviewer"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not self.var_residual > 0:
            raise ValueError(f"var_residual must be > 0, got {self.var_residual}")
        if not math.isfinite(self.effect):
            raise ValueError(f"effect must be a finite number, got {self.effect}")

    def sds(self) -> tuple[float, float, float, float]:
        """Standard deviations of (topic, idea, reviewer, residual)."""
        return (
            math.sqrt(self.var_topic),
            math.sqrt(self.var_idea),
            math.sqrt(self.var_reviewer),
            math.sqrt(self.var_residual),
        )


@dataclass(frozen=True)
class Design:
    """A study's size: ideas per condition, reviews per idea, reviews per reviewer.

    The number of reviewers follows from the load: the reviews divided by the load,
    rounded up (a few reviewers then take one review fewer).
    """

    ideas_per_condition: int
    reviews_per_idea: int
    load: int
    n_conditions: int = 2
    n_topics: int = 1

    @property
    def n_ideas(self) -> int:
        return self.ideas_per_condition * self.n_conditions

    @property
    def n_reviews(self) -> int:
        return self.n_ideas * self.reviews_per_idea

    @property
    def n_reviewers(self) -> int:
        return -(-self.n_reviews // self.load)

    @property
    def load_min(self) -> int:
        """The fewest reviews a reviewer writes: the reviews spread as evenly as the
        load allows, from this many to `load` each."""
        return max(1, min(self.load, self.n_reviews // self.n_reviewers))

    def check(self) -> None:
        """ValueError when the design cannot be laid out, saying which number is wrong."""
        if self.n_conditions < 2:
            raise ValueError("a design needs the baseline and at least one other condition")
        if self.ideas_per_condition < 2:
            raise ValueError(f"ideas_per_condition must be >= 2, got {self.ideas_per_condition}")
        if self.reviews_per_idea < 1 or self.load < 1 or self.n_topics < 1:
            raise ValueError("reviews_per_idea, load and n_topics must be >= 1")
        if self.load > self.n_ideas:
            raise ValueError(
                f"a load of {self.load} exceeds the {self.n_ideas} ideas a reviewer could see"
            )
        # With the load at most the ideas, there are always as many reviewers as
        # reviews per idea: reviews / load >= reviews / ideas.

    def layout(self, rng: np.random.Generator) -> Layout:
        self.check()
        n_rev = self.n_reviewers
        return draw_layout(
            n_reviewers=n_rev,
            n_ideas_per_condition=self.ideas_per_condition,
            n_conditions=self.n_conditions,
            reviews_per_idea=self.reviews_per_idea,
            n_topics=self.n_topics,
            load=(self.load_min, self.load),
            rng=rng,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "ideas_per_condition": self.ideas_per_condition,
            "reviews_per_idea": self.reviews_per_idea,
            "load": self.load,
            "n_conditions": self.n_conditions,
            "n_topics": self.n_topics,
            "n_ideas": self.n_ideas,
            "n_reviews": self.n_reviews,
            "n_reviewers": self.n_reviewers,
            "load_min": self.load_min,
        }


# ------------------------------------------------------------------ per-design statistics


@dataclass
class _Group:
    """One group's units over all replications: count, component means, centred Gram."""

    n: np.ndarray  # (R,)
    mean: np.ndarray  # (R, J)
    gram: np.ndarray  # (R, J, J)
    # Test 1 only: the residual's mean, direction and chi-square draws (see the module doc).
    resid: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


def _moments(units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Means (R, J) and centred Gram matrices (R, J, J) of components (R, J, n)."""
    mean = units.mean(axis=2)
    centred = units - mean[..., None]
    return mean, np.einsum("rjn,rkn->rjk", centred, centred)


def _sparse(
    rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int], weights: np.ndarray | None = None
) -> sp.csr_matrix:
    """A CSR matrix from (row, col, weight) triples without duplicates, built directly:
    scipy's general constructor sorts and sums duplicates, which costs more here than
    the whole rest of a design's preparation."""
    order = np.argsort(rows, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=shape[0]))])
    data = np.ones(len(rows)) if weights is None else np.asarray(weights, float)[order]
    return sp.csr_matrix((data, cols[order], indptr), shape=shape)


def _indicator(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    return _sparse(rows, cols, shape)


def _draws(lay: Layout, reps: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    n_ideas = len(lay.idea_condition)
    return (
        rng.standard_normal((reps, lay.n_topics)),
        rng.standard_normal((reps, n_ideas)),
        rng.standard_normal((reps, lay.n_reviewers)),
    )


def _review_groups(lay: Layout, reps: int, rng: np.random.Generator) -> list[_Group]:
    """Test 1: components (topic, idea, reviewer) of each review of condition 1 and 0."""
    z_t, z_i, z_r = _draws(lay, reps, rng)
    cond = lay.idea_condition[lay.idea]
    out = []
    for c in (1, 0):
        rows = np.flatnonzero(cond == c)
        n = len(rows)
        units = np.stack(
            [
                z_t[:, lay.idea_topic[lay.idea[rows]]],
                z_i[:, lay.idea[rows]],
                z_r[:, lay.reviewer[rows]],
            ],
            axis=1,
        )
        mean, gram = _moments(units)
        resid = (
            rng.standard_normal(reps) / math.sqrt(n),
            rng.standard_normal(reps),
            rng.chisquare(n - 2, reps) if n > 2 else np.zeros(reps),
        )
        out.append(_Group(np.full(reps, n), mean, gram, resid))
    return out


def _idea_groups(lay: Layout, reps: int, rng: np.random.Generator) -> list[_Group]:
    """Test 2: components (topic, idea, reviewer mean, residual mean) of each idea mean."""
    z_t, z_i, z_r = _draws(lay, reps, rng)
    n_ideas = len(lay.idea_condition)
    k = np.bincount(lay.idea, minlength=n_ideas).astype(float)
    average = _sparse(lay.idea, lay.reviewer, (n_ideas, lay.n_reviewers), 1.0 / k[lay.idea])
    reviewer_mean = (average @ z_r.T).T
    resid_mean = rng.standard_normal((reps, n_ideas)) / np.sqrt(k)
    out = []
    for c in (1, 0):
        ideas = np.flatnonzero(lay.idea_condition == c)
        units = np.stack(
            [
                z_t[:, lay.idea_topic[ideas]],
                z_i[:, ideas],
                reviewer_mean[:, ideas],
                resid_mean[:, ideas],
            ],
            axis=1,
        )
        mean, gram = _moments(units)
        out.append(_Group(np.full(reps, len(ideas)), mean, gram))
    return out


def _reviewer_groups(lay: Layout, reps: int, rng: np.random.Generator) -> list[_Group]:
    """Test 3: components (topic, idea, residual) of each reviewer's difference of means.

    The reviewer's own effect cancels in the difference, so it has no component.
    """
    z_t, z_i, _ = _draws(lay, reps, rng)
    n_ideas = len(lay.idea_condition)
    cond = lay.idea_condition[lay.idea]
    on = np.bincount(lay.reviewer, weights=cond == 1, minlength=lay.n_reviewers)
    off = np.bincount(lay.reviewer, weights=cond == 0, minlength=lay.n_reviewers)
    both = np.flatnonzero((on > 0) & (off > 0))
    with np.errstate(divide="ignore"):
        weight = np.where(cond == 1, 1.0 / on[lay.reviewer], 0.0) - np.where(
            cond == 0, 1.0 / off[lay.reviewer], 0.0
        )
    contrast = _sparse(lay.reviewer, lay.idea, (lay.n_reviewers, n_ideas), weight)[both]
    to_topic = _indicator(np.arange(n_ideas), lay.idea_topic, (n_ideas, lay.n_topics))
    resid_sd = np.sqrt(1.0 / on[both] + 1.0 / off[both])
    units = np.stack(
        [
            ((contrast @ to_topic) @ z_t.T).T,
            (contrast @ z_i.T).T,
            rng.standard_normal((reps, len(both))) * resid_sd,
        ],
        axis=1,
    )
    mean, gram = _moments(units)
    return [_Group(np.full(reps, len(both)), mean, gram)]


_GROUPS = {"by_review": _review_groups, "by_idea": _idea_groups, "by_reviewer": _reviewer_groups}


def _concat(parts: Sequence[list[_Group]]) -> list[_Group]:
    out = []
    for j in range(len(parts[0])):
        gs = [p[j] for p in parts]
        resid = None
        if gs[0].resid is not None:
            resid = tuple(np.concatenate([g.resid[i] for g in gs]) for i in range(3))  # type: ignore[index]
        out.append(
            _Group(
                np.concatenate([g.n for g in gs]),
                np.concatenate([g.mean for g in gs]),
                np.concatenate([g.gram for g in gs]),
                resid,  # type: ignore[arg-type]
            )
        )
    return out


@dataclass
class MixedLayout:
    """The counts a layout's GLS variance needs, whatever the variance components.

    ``zz``, ``iz`` and ``w`` are ``Z'Z``, ``Z_idea'Z`` and ``Z'X`` for ``Z`` the topic and
    reviewer indicators side by side; ``columns`` says which columns are whose. ``zz`` is
    kept sparse (its reviewer block is diagonal): an engine keeps hundreds of layouts.
    """

    xtx: np.ndarray
    k: np.ndarray  # reviews per idea
    w_idea: np.ndarray  # Z_idea' X
    zz: sp.csr_matrix
    iz: sp.csc_matrix
    w: np.ndarray
    columns: dict[str, np.ndarray]


def mixed_layout(lay: Layout) -> MixedLayout:
    n = len(lay.idea)
    n_ideas = len(lay.idea_condition)
    n_cond = int(lay.idea_condition.max()) + 1
    cond = lay.idea_condition[lay.idea]
    X = np.column_stack([np.ones(n)] + [(cond == c).astype(float) for c in range(1, n_cond)])
    z_idea = _indicator(np.arange(n), lay.idea, (n, n_ideas))
    z = sp.hstack(
        [
            _indicator(np.arange(n), lay.idea_topic[lay.idea], (n, lay.n_topics)),
            _indicator(np.arange(n), lay.reviewer, (n, lay.n_reviewers)),
        ]
    ).tocsr()
    columns = {
        "topic": np.arange(lay.n_topics),
        "reviewer": lay.n_topics + np.arange(lay.n_reviewers),
    }
    return MixedLayout(
        xtx=X.T @ X,
        k=np.asarray(z_idea.sum(axis=0)).ravel(),
        w_idea=z_idea.T @ X,
        zz=(z.T @ z).tocsr(),
        iz=(z_idea.T @ z).tocsc(),
        w=z.T @ X,
        columns=columns,
    )


def gls_variance(ml: MixedLayout, model: ScoreModel) -> float:
    """Variance of the GLS estimate of condition 1's coefficient with known components.

    ``X' V^-1 X = (X'X - W' M^-1 W) / s_e^2`` (Woodbury) with ``W = Z'X`` and ``M = Z'Z +
    diag(s_e^2 / s_g^2)`` over the random effects that are present; the idea block of
    ``M`` is diagonal and is eliminated first (a Schur complement over topics and
    reviewers is all that is factorised).
    """
    ve = model.var_residual
    present = [
        (g, v) for g, v in (("topic", model.var_topic), ("reviewer", model.var_reviewer)) if v > 0
    ]
    q = np.zeros_like(ml.xtx)
    if model.var_idea > 0:
        d = ml.k + ve / model.var_idea
        q += ml.w_idea.T @ (ml.w_idea / d[:, None])
    if present:
        sel = np.concatenate([ml.columns[g] for g, _ in present])
        ridge = np.concatenate([np.full(len(ml.columns[g]), ve / v) for g, v in present])
        e = ml.zz[sel][:, sel].toarray() + np.diag(ridge)
        w = ml.w[sel]
        if model.var_idea > 0:
            b = ml.iz[:, sel]
            b_scaled = sp.diags(1.0 / d) @ b
            e = e - (b.T @ b_scaled).toarray()
            w = w - b_scaled.T @ ml.w_idea
        q += w.T @ la.cho_solve(la.cho_factor(e), w)
    info = (ml.xtx - q) / ve
    return float(np.linalg.inv(info)[1, 1])


# ------------------------------------------------------------------ the engine


def _p_values(t: np.ndarray, df: np.ndarray, alternative: str) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        if alternative == "greater":
            return special.stdtr(df, -t)
        if alternative == "less":
            return special.stdtr(df, t)
        return 2 * special.stdtr(df, -np.abs(t))


def _quad(s: np.ndarray, gram: np.ndarray) -> np.ndarray:
    return np.einsum("j,rjk,k->r", s, gram, s)  # faster than two matmuls on stacks this small


class PowerEngine:
    """Power of one test for condition 1 against the baseline, design by design.

    ``n_reps`` replications per design spread over ``n_layouts`` assignments drawn by the
    simulation engine. A design's draws depend only on ``seed`` and the design, so two
    engines with the same seed give the same answers, and every score model evaluated on a
    design sees the same draws. Designs are kept once drawn (``cache_size`` of them).
    """

    def __init__(
        self,
        test: str,
        *,
        n_reps: int = 400,
        n_layouts: int = 4,
        seed: int = 0,
        cache_size: int = 400,
    ) -> None:
        if test not in TESTS:
            raise ValueError(f"unknown test {test!r}; choose from {', '.join(TESTS)}")
        if n_reps < n_layouts or n_layouts < 1:
            raise ValueError("n_layouts must be >= 1 and n_reps at least n_layouts")
        self.test = test
        self.n_reps = n_reps
        self.n_layouts = n_layouts
        self.seed = seed
        self.cache_size = cache_size
        self._cache: dict[Design, Any] = {}

    def _rng(self, design: Design, part: int) -> np.random.Generator:
        d = design
        key = [self.seed, d.ideas_per_condition, d.reviews_per_idea, d.load]
        return np.random.default_rng([*key, d.n_conditions, d.n_topics, part])

    def _prepare(self, design: Design) -> Any:
        if design in self._cache:
            return self._cache[design]
        if len(self._cache) >= self.cache_size:
            self._cache.pop(next(iter(self._cache)))
        if self.test == "mixed":
            built: Any = [
                mixed_layout(design.layout(self._rng(design, i))) for i in range(self.n_layouts)
            ]
        else:
            sizes = np.diff(np.linspace(0, self.n_reps, self.n_layouts + 1).astype(int))
            parts = []
            for i, reps in enumerate(sizes):
                rng = self._rng(design, i)
                parts.append(_GROUPS[self.test](design.layout(rng), int(reps), rng))
            built = _concat(parts)
        self._cache[design] = built
        return built

    def power(self, design: Design, model: ScoreModel, *, alpha: float, alternative: str) -> float:
        """The share of replications (for ``mixed``: the mean over layouts of the exact
        power) in which the test rejects at ``alpha`` in the ``alternative``'s direction.
        A replication whose statistic cannot be computed counts as not rejecting."""
        if alternative not in SIZING_ALTERNATIVES:
            raise ValueError(f"alternative must be one of {', '.join(SIZING_ALTERNATIVES)}")
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
        built = self._prepare(design)
        if self.test == "mixed":
            return float(np.mean([_wald_power(ml, model, alpha, alternative) for ml in built]))
        st, si, sr, se = model.sds()
        if self.test == "by_reviewer":
            t, dof = _one_sample_t(built[0], np.array([st, si, se]), model.effect)
        elif self.test == "by_idea":
            t, dof = _welch_t(built, np.array([st, si, sr, se]), model.effect, None)
        else:
            t, dof = _welch_t(built, np.array([st, si, sr]), model.effect, se)
        p = _p_values(t, dof, alternative)
        return float(np.mean(np.nan_to_num(p, nan=1.0) <= alpha))

    def mc_se(self, power: float) -> float:
        """Monte Carlo standard error of a power estimate (0 for the computed Wald power)."""
        if self.test == "mixed":
            return 0.0
        return math.sqrt(max(power * (1 - power), 0.0) / self.n_reps)


def _group_stats(
    g: _Group, s: np.ndarray, shift: float, se: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """(mean, sample variance) of one group's units under component SDs ``s``."""
    mean = shift + g.mean @ s
    ss = _quad(s, g.gram)
    if se is not None and g.resid is not None:
        e_mean, direction, chi = g.resid
        mean = mean + se * e_mean
        ss = (np.sqrt(np.maximum(ss, 0)) + se * direction) ** 2 + se**2 * chi
    with np.errstate(invalid="ignore", divide="ignore"):
        return mean, ss / (g.n - 1)


def _welch_t(
    groups: list[_Group], s: np.ndarray, effect: float, se: float | None
) -> tuple[np.ndarray, np.ndarray]:
    a, b = groups
    ma, va = _group_stats(a, s, effect, se)
    mb, vb = _group_stats(b, s, 0.0, se)
    with np.errstate(invalid="ignore", divide="ignore"):
        wa, wb = va / a.n, vb / b.n
        t = (ma - mb) / np.sqrt(wa + wb)
        dof = (wa + wb) ** 2 / (wa**2 / (a.n - 1) + wb**2 / (b.n - 1))
    return t, dof


def _one_sample_t(g: _Group, s: np.ndarray, effect: float) -> tuple[np.ndarray, np.ndarray]:
    mean, var = _group_stats(g, s, effect, None)
    with np.errstate(invalid="ignore", divide="ignore"):
        return mean / np.sqrt(var / g.n), (g.n - 1).astype(float)


def _wald_power(ml: MixedLayout, model: ScoreModel, alpha: float, alternative: str) -> float:
    shift = model.effect / math.sqrt(gls_variance(ml, model))
    if alternative == "two-sided":
        z = stats.norm.isf(alpha / 2)
        return float(stats.norm.sf(z - shift) + stats.norm.cdf(-z - shift))
    z = stats.norm.isf(alpha)
    return float(stats.norm.sf(z - (shift if alternative == "greater" else -shift)))


# ------------------------------------------------------------------ the search


def ideas_grid(low: int, high: int, ratio: float = GRID_RATIO) -> np.ndarray:
    """Idea counts from ``low`` to ``high``: every integer while steps of ``ratio`` are
    below one, then a geometric sequence (and ``high`` itself)."""
    if low < 1 or high < low:
        raise ValueError(f"need 1 <= low <= high, got {low}, {high}")
    values = [low]
    while values[-1] < high:
        values.append(min(high, max(values[-1] + 1, math.ceil(values[-1] * ratio))))
    return np.array(values, dtype=int)


@dataclass(frozen=True)
class SearchResult:
    """The smallest design of one shape that reaches the target power.

    ``design`` is the first grid design that reaches it (None: none up to the cap);
    ``ideas`` the idea count per condition where the power curve crosses the target,
    interpolated between the grid points around the crossing (probit power against log
    ideas; ``inf`` when the cap is not enough); ``evaluated`` every (ideas, power) tried.
    """

    reviews_per_idea: int
    load: int
    design: Design | None
    ideas: float
    power: float | None
    evaluated: tuple[tuple[int, float], ...]

    @property
    def reviews(self) -> float:
        """The interpolated number of reviews (the cost): ideas x conditions x reviews/idea."""
        if self.design is None:
            return math.inf
        return self.ideas * self.design.n_conditions * self.reviews_per_idea


def _crossing(m_a: int, p_a: float, m_b: int, p_b: float, target: float, reps: int) -> float:
    clip = 0.5 / max(reps, 1)
    za, zb = (stats.norm.ppf(min(max(p, clip), 1 - clip)) for p in (p_a, p_b))
    zt = stats.norm.ppf(target)
    if not zb > za:
        return float(m_b)
    frac = min(max((zt - za) / (zb - za), 0.0), 1.0)
    return float(math.exp(math.log(m_a) + frac * (math.log(m_b) - math.log(m_a))))


def smallest_design(
    engine: PowerEngine,
    model: ScoreModel,
    *,
    reviews_per_idea: int,
    load: int,
    n_conditions: int,
    n_topics: int,
    alpha: float,
    alternative: str,
    target: float = 0.8,
    max_ideas_per_condition: int = 2000,
    start: int | None = None,
) -> SearchResult:
    """The fewest ideas per condition of this shape whose power reaches ``target``.

    Gallops from ``start`` (an idea count; the grid's smallest by default) up or down in
    doubling steps until the target is bracketed, then bisects: about ``2 log2`` of the
    grid's length evaluations, whichever the answer.
    """
    if not 0 < target < 1:
        raise ValueError(f"the target power must be between 0 and 1, got {target}")
    low = max(2, -(-load // n_conditions))
    grid = ideas_grid(low, max(low, max_ideas_per_condition))
    tried: dict[int, float] = {}

    def design(i: int) -> Design:
        return Design(int(grid[i]), reviews_per_idea, load, n_conditions, n_topics)

    def passes(i: int) -> bool:
        if i not in tried:
            tried[i] = engine.power(design(i), model, alpha=alpha, alternative=alternative)
        return tried[i] >= target

    i = 0 if start is None else int(np.clip(np.searchsorted(grid, start), 0, len(grid) - 1))
    step = 1
    if passes(i):
        hi, lo = i, -1  # lo = -1: the grid's smallest count already passes
        while hi > 0:  # gallop down to a failing count
            below = max(0, hi - step)
            if not passes(below):
                lo = below
                break
            hi, step = below, step * 2
    else:
        lo = i
        while True:  # gallop up to a passing count
            if lo == len(grid) - 1:
                return _result(reviews_per_idea, load, None, math.inf, None, tried, grid)
            above = min(len(grid) - 1, lo + step)
            if passes(above):
                hi = above
                break
            lo, step = above, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    if lo < 0:
        ideas = float(grid[hi])
    else:
        ideas = _crossing(int(grid[lo]), tried[lo], int(grid[hi]), tried[hi], target, engine.n_reps)
    return _result(reviews_per_idea, load, design(hi), ideas, tried[hi], tried, grid)


def _result(
    k: int,
    load: int,
    design: Design | None,
    ideas: float,
    power: float | None,
    tried: dict[int, float],
    grid: np.ndarray,
) -> SearchResult:
    evaluated = tuple(sorted((int(grid[i]), p) for i, p in tried.items()))
    return SearchResult(k, load, design, ideas, power, evaluated)


def cheapest(results: Iterable[SearchResult]) -> SearchResult | None:
    """The result with the fewest (interpolated) reviews; fewer reviewers break ties."""
    reached = [r for r in results if r.design is not None]
    if not reached:
        return None
    return min(reached, key=lambda r: (r.reviews, r.design.n_reviewers if r.design else 0))
