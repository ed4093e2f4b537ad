"""The judge reliability panel's statistics: repetition stability, self-preference,
Bradley–Terry with style control and the calibration of direct scores.

Every figure comes with a percentile bootstrap interval over its natural unit (the
prompt asked again, the idea; figures on pairs resample the ideas, `vertex_bootstrap`,
because pairs that share an idea are not independent), so the same function gives the
human–human figure when it is fed reviewers instead of repeated calls (e.g. the
within-idea SD of reviewers' scores beside the judge's repetition SD). Definitions and
references: docs/judge-reliability.md.

- `identical_share`: of the answers to one prompt, the share of pairs of answers that are
  identical (one pair when a prompt was asked twice), averaged over prompts.
- `score_sd`: the pooled within-prompt SD of scores, √(Σ_i Σ_r (x_ir − x̄_i)² / Σ_i (r_i − 1)),
  the within-subject SD of Bland & Altman.
- `self_preference`: on pairs of one idea from the judge's model family and one from
  another, the judge's score for its own family's idea (1 win, ½ tie, 0 loss, averaged
  over the calls on the pair), the reviewers' score for the same idea on the same pairs,
  and their paired difference (judge − human): preference beyond what the reviewers see.
- `fit_style_bt`: logit P(a beats b) = θ_g(a) − θ_g(b) + Σ_k β_k·d_k (+ a first-position
  term), with g the group rated (condition or generating model), d_k the normalised
  difference (f_a − f_b)/(f_a + f_b) of each style feature (length in words, markdown
  density, list items; `style_covariates`), as Chatbot Arena's style control does: θ is the
  rating with style held equal, β the pull of each feature.
- `calibration`: the least-squares line human mean = a + b·judge score over ideas (b = 1
  and a = 0 when the judge's scores mean what the reviewers' do), and
  `reliability_plot`, the binned means with the line and the diagonal.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from judging.methods.bradley_terry import RIDGE
from judging.methods.svg import figure_svg
from studies.analysis.plots import pyplot
from studies.analysis.rounding import line_text

__all__ = [
    "N_BOOT",
    "STYLE_COVARIATES",
    "Estimate",
    "SelfPreference",
    "StyleFit",
    "bootstrap_interval",
    "calibration",
    "fit_style_bt",
    "identical_share",
    "model_family",
    "reliability_bins",
    "reliability_plot",
    "score_sd",
    "self_preference",
    "style_bt_intervals",
    "style_differences",
    "style_covariates",
    "vertex_bootstrap",
]

Id = Hashable
N_BOOT = 1000
STYLE_COVARIATES = ("length", "markdown_density", "list_items")
VIF_LIMIT = 10.0
"""The variance inflation above which a style coefficient is reported as not separable
from the other columns (the usual rule of thumb for regression designs)."""


@dataclass(frozen=True)
class Estimate:
    """A figure with its percentile bootstrap interval over `n` units."""

    value: float
    low: float
    high: float
    n: int
    level: float = 0.95

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def bootstrap_interval(
    units: Sequence[Any] | np.ndarray,
    statistic: Callable[[Any], float],
    *,
    n_boot: int = N_BOOT,
    level: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """`statistic` of `units` with the percentile interval of its value over `n_boot`
    resamples of the units with replacement; NaN bounds with fewer than two units or
    when no resample gives a finite value. An array's units are its rows, and the
    statistic is given an array of resampled rows."""
    n = len(units)
    value = statistic(units) if n else math.nan
    if n < 2 or n_boot < 1:
        return Estimate(value, math.nan, math.nan, n, level)
    rng = np.random.default_rng(seed)
    if isinstance(units, np.ndarray):
        draws = np.array([statistic(units[rng.integers(0, n, n)]) for _ in range(n_boot)])
    else:
        draws = np.array(
            [statistic([units[k] for k in rng.integers(0, n, n)]) for _ in range(n_boot)]
        )
    draws = draws[np.isfinite(draws)]
    if not len(draws):
        return Estimate(value, math.nan, math.nan, n, level)
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(draws, [tail, 100.0 - tail])
    return Estimate(float(value), float(low), float(high), n, level)


def vertex_bootstrap(
    endpoints: Sequence[tuple[Id, Id]],
    statistic: Callable[[np.ndarray], float],
    *,
    n_boot: int = N_BOOT,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of `statistic(weights)` when the ideas, not the games, are
    resampled: each resample draws the ideas with replacement and weights every game by
    the product of its two ideas' multiplicities (the vertex bootstrap of Snijders &
    Borgatti). Games that share an idea share its unmodelled quality; resampling games
    as if independent gives intervals too narrow."""
    ids = sorted({x for pair in endpoints for x in pair}, key=repr)
    index = {x: k for k, x in enumerate(ids)}
    a = np.array([index[p[0]] for p in endpoints], dtype=int)
    b = np.array([index[p[1]] for p in endpoints], dtype=int)
    if len(ids) < 2 or n_boot < 1:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        m = np.bincount(rng.integers(0, len(ids), len(ids)), minlength=len(ids)).astype(float)
        weights = m[a] * m[b]
        if weights.sum() > 0:
            draws.append(statistic(weights))
    finite = np.array([d for d in draws if math.isfinite(d)])
    if not len(finite):
        return math.nan, math.nan
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    return float(low), float(high)


# --- repetition stability ------------------------------------------------------------


def _agreement(answers: Sequence[Hashable]) -> float:
    pairs = list(itertools.combinations(answers, 2))
    return sum(a == b for a, b in pairs) / len(pairs)


def identical_share(
    answers: Mapping[Hashable, Sequence[Hashable | None]],
    *,
    n_boot: int = N_BOOT,
    level: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """Mean over prompts of the share of identical pairs among a prompt's answers.

    `answers` maps a prompt (or a pair shown to several reviewers) to its answers; None
    (unparseable) is left out, and prompts with fewer than two answers left are skipped.
    """
    shares = [
        _agreement(kept)
        for kept in ([a for a in group if a is not None] for group in answers.values())
        if len(kept) >= 2
    ]
    return bootstrap_interval(
        np.array(shares, dtype=float),
        lambda xs: float(np.mean(xs)),
        n_boot=n_boot,
        level=level,
        seed=seed,
    )


def _pooled_sd(rows: np.ndarray) -> float:
    """√(Σ sums of squares / Σ degrees of freedom) over rows of (sum of squares, df)."""
    df = float(rows[:, 1].sum())
    return math.sqrt(float(rows[:, 0].sum()) / df) if df else math.nan


def score_sd(
    scores: Mapping[Hashable, Sequence[float | None]],
    *,
    n_boot: int = N_BOOT,
    level: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """The pooled within-prompt SD of repeated scores (prompts resampled as units)."""
    rows = [
        (float(((g - g.mean()) ** 2).sum()), len(g) - 1.0)
        for g in (
            np.array([float(x) for x in group if x is not None], dtype=float)
            for group in scores.values()
        )
        if len(g) >= 2
    ]
    units = np.array(rows, dtype=float).reshape(-1, 2)
    return bootstrap_interval(units, _pooled_sd, n_boot=n_boot, level=level, seed=seed)


# --- self-preference -----------------------------------------------------------------

_FAMILIES = (
    ("openai", r"^(gpt|o\d|chatgpt|text-davinci|davinci)"),
    ("anthropic", r"^claude"),
    ("google", r"^(gemini|gemma|palm|bard)"),
    ("meta", r"^(llama|meta-llama|codellama)"),
    ("mistral", r"^(mistral|mixtral|codestral|ministral|magistral|pixtral)"),
    ("alibaba", r"^(qwen|qwq)"),
    ("deepseek", r"^deepseek"),
    ("xai", r"^grok"),
    ("cohere", r"^(command|c4ai|aya)"),
    ("microsoft", r"^phi"),
)


def model_family(model: str) -> str:
    """The family a model name belongs to ("openai", "anthropic", …), read from its name
    after any provider prefix ("openrouter/anthropic/claude-3.5" → "anthropic"); a name no
    rule knows is its own family (lower-cased, version and date suffixes kept)."""
    name = model.strip().lower()
    leaf = name.rsplit("/", 1)[-1]
    for family, pattern in _FAMILIES:
        if re.match(pattern, leaf):
            return family
    return leaf


@dataclass(frozen=True)
class SelfPreference:
    """The judge's and the reviewers' score for the judge's own family's idea."""

    judge: Estimate
    human: Estimate
    """On the pairs the reviewers rated."""
    difference: Estimate
    """Judge − human on the pairs with both: preference beyond what the reviewers see."""


def self_preference(
    pairs: Sequence[tuple[Id, Id, float | None, float | None]],
    *,
    n_boot: int = N_BOOT,
    level: float = 0.95,
    seed: int = 0,
) -> SelfPreference:
    """From (own-family idea, other idea, judge score, human score) per mixed pair, the
    scores being the own-family idea's mean result (1 win, ½ tie, 0 loss) or None when
    that side gave no verdict. Intervals by the vertex bootstrap (ideas resampled)."""

    def figure(select: Callable[[float | None, float | None], float | None]) -> Estimate:
        kept = [(o, x, v) for o, x, j, h in pairs if (v := select(j, h)) is not None]
        values = np.array([v for _, _, v in kept], dtype=float)
        if not len(values):
            return Estimate(math.nan, math.nan, math.nan, 0, level)
        low, high = vertex_bootstrap(
            [(o, x) for o, x, _ in kept],
            lambda w: float(np.average(values, weights=w)),
            n_boot=n_boot,
            level=level,
            seed=seed,
        )
        return Estimate(float(values.mean()), low, high, len(values), level)

    return SelfPreference(
        judge=figure(lambda j, h: j),
        human=figure(lambda j, h: h),
        difference=figure(lambda j, h: None if j is None or h is None else j - h),
    )


# --- Bradley–Terry with style control --------------------------------------------------

_MARKUP = re.compile(
    r"^\s{0,3}#{1,6}\s|\*\*[^*\n]+\*\*|__[^_\n]+__|(?<![*\w])\*[^*\s][^*\n]*\*(?!\*)|`[^`\n]+`"
    r"|\[[^\]\n]+\]\([^)\n]+\)",
    re.MULTILINE,
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S", re.MULTILINE)


def style_covariates(text: str) -> dict[str, float]:
    """Length in words; markdown density: headings, bold, italic, inline code and links
    per 100 words; list items: lines that start a bulleted or numbered item."""
    words = len(text.split())
    marks = len(_MARKUP.findall(text))
    return {
        "length": float(words),
        "markdown_density": 100.0 * marks / words if words else 0.0,
        "list_items": float(len(_LIST_ITEM.findall(text))),
    }


def style_differences(
    a: Mapping[str, float], b: Mapping[str, float], features: Sequence[str] = STYLE_COVARIATES
) -> np.ndarray:
    """(f_a − f_b)/(f_a + f_b) per feature, 0 where both are 0: in [−1, 1] whatever the
    feature's unit."""
    out = np.zeros(len(features))
    for k, name in enumerate(features):
        fa, fb = float(a[name]), float(b[name])
        out[k] = (fa - fb) / (fa + fb) if fa + fb else 0.0
    return out


@dataclass(frozen=True)
class StyleFit:
    rated: tuple[Hashable, ...]
    """What the ratings are of: the groups (conditions, generating models), or the ideas."""
    theta: np.ndarray
    """Centred log-strengths with style held equal, in the order of `rated`."""
    beta: dict[str, float]
    """Each style feature's coefficient (NaN when it never differs within a game), and
    "position" when fitted."""
    cov: np.ndarray
    """Covariance of (θ, β) from the observed information (θ before centring)."""
    log_likelihood: float
    vif: dict[str, float] = field(default_factory=dict)
    """Each style feature's variance inflation in the design: 1 / (1 − R²) of its
    differences regressed on the other columns (the rated groups, the other features, the
    position). 1 is no overlap; above `VIF_LIMIT` the feature's own pull cannot be told
    apart from the others'; inf when it is a combination of them. NaN for the position (a
    constant) and for a feature that never differs."""

    @property
    def strengths(self) -> dict[Hashable, float]:
        return dict(zip(self.rated, self.theta.tolist(), strict=True))

    @property
    def beta_se(self) -> dict[str, float]:
        n = len(self.rated)
        sd = np.sqrt(np.clip(np.diag(self.cov)[n:], 0.0, None))  # NaN stays NaN
        return dict(zip(self.beta, sd.tolist(), strict=True))


def _style_design(
    comparisons: Sequence[tuple[Id, Id, float]],
    features: Mapping[Id, Mapping[str, float]],
    group_of: Callable[[Id], Hashable],
    rated: Sequence[Hashable],
    names: Sequence[str],
    position: bool,
) -> tuple[list[Hashable], np.ndarray, np.ndarray]:
    order = list(rated)
    index = {r: k for k, r in enumerate(order)}
    for g, (a, b, _) in enumerate(comparisons):
        for idea in (a, b):
            if idea not in features:
                raise ValueError(f"game {g}: no style features for idea {idea!r}")
            if group_of(idea) not in index:
                index[group_of(idea)] = len(order)
                order.append(group_of(idea))
    n, p = len(order), len(names)
    x = np.zeros((len(comparisons), n + p + int(position)))
    y = np.zeros(len(comparisons))
    for g, (a, b, s) in enumerate(comparisons):
        if s not in (0.0, 0.5, 1.0):
            raise ValueError(f"game {g}: result must be 0, 0.5 or 1, got {s!r}")
        x[g, index[group_of(a)]] += 1.0
        x[g, index[group_of(b)]] -= 1.0
        x[g, n : n + p] = style_differences(features[a], features[b], names)
        if position:
            x[g, n + p] = 1.0
        y[g] = s
    return order, x, y


def fit_style_bt(
    comparisons: Sequence[tuple[Id, Id, float]],
    features: Mapping[Id, Mapping[str, float]],
    groups: Mapping[Id, Hashable] | None = None,
    *,
    rated: Sequence[Hashable] = (),
    names: Sequence[str] = STYLE_COVARIATES,
    position: bool = True,
    ridge: float = RIDGE,
    weights: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> StyleFit:
    """Bradley–Terry with style covariates by Newton's method: the logistic regression of
    each game's result (a tie is half a win) on ±1 indicators of what is rated, the style
    differences of the two ideas and, with `position`, an intercept: the log-odds toward
    the idea shown first (each comparison is (first, second, result of first)), which an
    LLM judge often has and which would otherwise blur the other coefficients.

    `groups` maps each idea to what is rated (its condition or generating model), as
    Chatbot Arena rates models from battles between their answers; style then varies
    within each rated group, which is what identifies β. Without `groups` each idea is
    rated on its own, and since an idea's style is fixed, β is identified only by the
    curvature of the normalised differences: use that for checks, not for reports.
    `ridge` penalises θ only (λ/2·Σθ², as in `fit_bradley_terry`); with 0 the common
    shift of θ is fixed by centring. `weights` (one per game) count games that many
    times (the bootstrap's resamples).
    """
    games = list(comparisons)
    group_of = (lambda idea: groups[idea]) if groups is not None else (lambda idea: idea)
    order, x, y = _style_design(games, features, group_of, rated, names, position)
    coefficients = [*names, "position"] if position else list(names)
    w = np.ones(len(games)) if weights is None else np.asarray(weights, dtype=float)
    return _fit_design(order, coefficients, x, y, w, ridge, tol, max_iter)


def _fit_design(
    order: Sequence[Hashable],
    coefficients: Sequence[str],
    x: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray,
    ridge: float,
    tol: float = 1e-10,
    max_iter: int = 100,
    start: np.ndarray | None = None,
    summaries: bool = True,
) -> StyleFit:
    """The fit of a style design. Without `summaries` (a bootstrap refit, which reads θ
    and β only) the log-likelihood and the variance inflation factors are left out."""
    n = len(order)
    # A covariate that never differs within a game (e.g. no markdown left after style
    # normalisation) is not identified: it is left out and reported as NaN.
    kept = np.r_[np.ones(n, dtype=bool), np.abs(x[weights > 0, n:]).sum(axis=0) > 0]
    penalty = np.diag(np.r_[np.full(n, ridge), np.zeros(int(kept[n:].sum()))])
    warm = None if start is None or not np.isfinite(start[kept]).all() else start[kept]
    params, info = _newton(x[:, kept], y, weights, penalty, tol, max_iter, warm)
    cov = np.full((len(kept), len(kept)), np.nan)
    cov[np.ix_(kept, kept)] = np.linalg.pinv(info) if ridge == 0 else np.linalg.inv(info)
    full = np.full(len(kept), np.nan)
    full[kept] = params
    return StyleFit(
        rated=tuple(order),
        theta=full[:n] - full[:n].mean(),
        beta=dict(zip(coefficients, full[n:].tolist(), strict=True)),
        cov=cov,
        log_likelihood=_loglik(x[:, kept], y, weights, params) if summaries else math.nan,
        vif=_variance_inflation(x, weights, n, coefficients) if summaries else {},
    )


def _variance_inflation(
    x: np.ndarray, weights: np.ndarray, n: int, coefficients: Sequence[str]
) -> dict[str, float]:
    """1 / (1 − R²_j) of the least-squares regression of style column j on the design's
    other columns and a constant, the games counted `weights` times: a property of which
    ideas met in which games, not of the verdicts (a judge whose verdicts follow a feature
    without exception inflates the fitted variances, not this)."""
    w = np.asarray(weights, dtype=float)
    rows = w > 0
    xw, root = x[rows], np.sqrt(w[rows])
    out: dict[str, float] = {}
    for k, name in enumerate(coefficients):
        col = xw[:, n + k]
        mean = float(w[rows] @ col) / float(w[rows].sum())
        total = float(w[rows] @ (col - mean) ** 2)
        if total <= 1e-12:  # a constant column (the position) or one that never varies
            out[name] = math.nan
            continue
        others = np.c_[np.delete(xw, n + k, axis=1), np.ones(len(col))]
        coef = np.linalg.lstsq(others * root[:, None], col * root, rcond=None)[0]
        residual = float(w[rows] @ (col - others @ coef) ** 2)
        out[name] = total / residual if residual > 1e-12 * total else math.inf
    return out


def _loglik(x: np.ndarray, y: np.ndarray, weights: np.ndarray, params: np.ndarray) -> float:
    eta = x @ params
    return float(-(weights * (y * np.logaddexp(0, -eta) + (1 - y) * np.logaddexp(0, eta))).sum())


def _sigmoid(eta: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-eta); a game the fit predicts with near certainty (eta below about -709)
    overflows e^-eta to infinity, which gives its probability's limit, 0: not an error."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-eta))


def _newton(
    x: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray,
    penalty: np.ndarray,
    tol: float,
    max_iter: int,
    start: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The penalised logistic fit by Newton with step halving: (parameters, information).
    The objective is concave, so the start (zero, or a nearby fit's) only changes the
    number of steps."""
    params = np.zeros(x.shape[1]) if start is None else start.copy()

    def objective(p: np.ndarray) -> float:
        return _loglik(x, y, weights, p) - 0.5 * float(p @ penalty @ p)

    current: float | None = None  # the objective at `params`, when the search computed it
    for _ in range(max_iter):
        prob = _sigmoid(x @ params)
        grad = x.T @ (weights * (y - prob)) - penalty @ params
        info = x.T @ (x * (weights * prob * (1 - prob))[:, None]) + penalty
        step = np.linalg.lstsq(info, grad, rcond=None)[0]
        if current is None:
            current = objective(params)
        t, accepted = 1.0, None
        while t > 1e-8:
            trial = objective(params + t * step)
            if not trial < current - 1e-12:
                accepted = trial
                break
            t /= 2
        params = params + t * step
        current = accepted  # the step taken is the point just evaluated, unless t ran out
        if np.max(np.abs(t * step)) < tol:
            break
    prob = _sigmoid(x @ params)
    return params, x.T @ (x * (weights * prob * (1 - prob))[:, None]) + penalty


def style_bt_intervals(
    comparisons: Sequence[tuple[Id, Id, float]],
    features: Mapping[Id, Mapping[str, float]],
    groups: Mapping[Id, Hashable] | None = None,
    *,
    rated: Sequence[Hashable] = (),
    names: Sequence[str] = STYLE_COVARIATES,
    position: bool = True,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
    ridge: float = RIDGE,
) -> tuple[StyleFit, dict[Hashable, Estimate], dict[str, Estimate]]:
    """The fit, and vertex-bootstrap intervals (ideas resampled, `vertex_bootstrap`) of
    every centred θ and every β."""
    games = list(comparisons)
    fit = fit_style_bt(
        games, features, groups, rated=rated, names=names, position=position, ridge=ridge
    )
    group_of = (lambda idea: groups[idea]) if groups is not None else (lambda idea: idea)
    order, x, y = _style_design(games, features, group_of, fit.rated, names, position)
    values = np.r_[fit.theta, list(fit.beta.values())]
    draws: list[np.ndarray] = []

    # The full fit's parameters (before centring θ) start each refit.
    full = _fit_design(order, list(fit.beta), x, y, np.ones(len(games)), ridge, summaries=False)
    start = np.r_[full.theta, list(full.beta.values())]

    def refit(weights: np.ndarray) -> float:
        try:
            boot = _fit_design(
                order, list(fit.beta), x, y, weights, ridge, start=start, summaries=False
            )
        except (np.linalg.LinAlgError, FloatingPointError, ValueError):
            # A resample that leaves a coefficient unidentified (few ideas, a feature
            # that no longer varies) gives no draw; the interval uses the others.
            draws.append(np.full(len(values), np.nan))
            return 0.0
        draws.append(np.r_[boot.theta, list(boot.beta.values())])
        return 0.0

    vertex_bootstrap([(a, b) for a, b, _ in games], refit, n_boot=n_boot, seed=seed)
    stacked = np.array(draws) if draws else np.full((1, len(values)), np.nan)
    tail = (1.0 - level) / 2.0 * 100.0
    low = np.full(len(values), np.nan)
    high = np.full(len(values), np.nan)
    finite = np.isfinite(stacked).any(axis=0)
    if finite.any():
        low[finite], high[finite] = np.nanpercentile(
            stacked[:, finite], [tail, 100.0 - tail], axis=0
        )
    estimates = [
        Estimate(float(v), float(lo), float(hi), len(games), level)
        for v, lo, hi in zip(values, low, high, strict=True)
    ]
    n = len(fit.rated)
    return (
        fit,
        dict(zip(fit.rated, estimates[:n], strict=True)),
        dict(zip(fit.beta, estimates[n:], strict=True)),
    )


# --- calibration of direct scores ------------------------------------------------------


def _line(xy: np.ndarray) -> tuple[float, float]:
    x, y = xy[:, 0], xy[:, 1]
    sxx = float(((x - x.mean()) ** 2).sum())
    if sxx == 0:
        return math.nan, math.nan
    slope = float(((x - x.mean()) * (y - y.mean())).sum()) / sxx
    return float(y.mean() - slope * x.mean()), slope


def calibration(
    judge: Mapping[Id, float],
    human: Mapping[Id, float],
    *,
    n_boot: int = N_BOOT,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """human mean = a + b·judge score over the ideas both scored: a and b with the
    classical t intervals and percentile bootstrap intervals (ideas resampled).

    Returns {"n", "intercept", "slope" (Estimates, bootstrap), "intercept_t",
    "slope_t" ((low, high) from the t distribution), "residual_sd"}.
    """
    ids = [i for i in judge if i in human and judge[i] is not None and human[i] is not None]
    xy = np.array([(float(judge[i]), float(human[i])) for i in ids], dtype=float).reshape(-1, 2)
    n = len(xy)
    intercept = bootstrap_interval(xy, lambda d: _line(d)[0], n_boot=n_boot, level=level, seed=seed)
    slope = bootstrap_interval(xy, lambda d: _line(d)[1], n_boot=n_boot, level=level, seed=seed)
    out: dict[str, Any] = {"n": n, "intercept": intercept, "slope": slope}
    if n < 3 or not math.isfinite(slope.value):
        return {**out, "intercept_t": None, "slope_t": None, "residual_sd": math.nan}
    x, y = xy[:, 0], xy[:, 1]
    resid = y - (intercept.value + slope.value * x)
    s2 = float(resid @ resid) / (n - 2)
    sxx = float(((x - x.mean()) ** 2).sum())
    se_b = math.sqrt(s2 / sxx)
    se_a = math.sqrt(s2 * (1.0 / n + x.mean() ** 2 / sxx))
    q = float(student_t.ppf(0.5 + level / 2.0, n - 2))
    return {
        **out,
        "intercept_t": (intercept.value - q * se_a, intercept.value + q * se_a),
        "slope_t": (slope.value - q * se_b, slope.value + q * se_b),
        "residual_sd": math.sqrt(s2),
    }


def reliability_bins(
    judge: Mapping[Id, float], human: Mapping[Id, float], *, bins: int = 6, level: float = 0.95
) -> list[dict[str, float]]:
    """Ideas in `bins` groups of about equal size by judge score: each group's mean judge
    score, mean human score and the t interval of the latter."""
    ids = sorted((i for i in judge if i in human), key=lambda i: (float(judge[i]), str(i)))
    rows = []
    for chunk in np.array_split(np.arange(len(ids)), max(1, min(bins, len(ids)))):
        if not len(chunk):
            continue
        xs = np.array([float(judge[ids[k]]) for k in chunk])
        ys = np.array([float(human[ids[k]]) for k in chunk])
        half = math.nan
        if len(ys) > 1:
            q = float(student_t.ppf(0.5 + level / 2.0, len(ys) - 1))
            half = q * float(ys.std(ddof=1)) / math.sqrt(len(ys))
        rows.append(
            {
                "judge": float(xs.mean()),
                "human": float(ys.mean()),
                "low": float(ys.mean() - half),
                "high": float(ys.mean() + half),
                "n": len(ys),
            }
        )
    return rows


def reliability_plot(
    judge: Mapping[Id, float],
    human: Mapping[Id, float],
    *,
    title: str = "Calibration of the judge's scores",
    bins: int = 6,
    scale: tuple[float, float] | None = None,
) -> str:
    """The reliability plot as an inline `<svg>`: each idea faint, the binned means with
    their intervals, the fitted line and the diagonal (perfect calibration); "" with
    fewer than three ideas scored by both."""
    ids = [i for i in judge if i in human]
    if len(ids) < 3:
        return ""
    fit = calibration(judge, human, n_boot=0)
    xs = np.array([float(judge[i]) for i in ids])
    ys = np.array([float(human[i]) for i in ids])
    lo, hi = scale or (float(min(xs.min(), ys.min())), float(max(xs.max(), ys.max())))
    fig, ax = pyplot().subplots(figsize=(4.6, 4.2))
    ax.plot([lo, hi], [lo, hi], color="#999999", lw=1, ls="--", label="perfect calibration")
    ax.plot(xs, ys, "o", color="#2f5da8", alpha=0.18, ms=3)
    rows = reliability_bins(judge, human, bins=bins)
    ax.errorbar(
        [r["judge"] for r in rows],
        [r["human"] for r in rows],
        yerr=[
            [r["human"] - r["low"] if math.isfinite(r["low"]) else 0 for r in rows],
            [r["high"] - r["human"] if math.isfinite(r["high"]) else 0 for r in rows],
        ],
        fmt="o",
        color="#2f5da8",
        capsize=3,
        label="binned mean (95 % CI)",
    )
    a, b = fit["intercept"].value, fit["slope"].value
    if math.isfinite(b):
        ax.plot(
            [lo, hi],
            [a + b * lo, a + b * hi],
            color="#c44e52",
            lw=1.5,
            label=f"fit: {line_text(a, b, 'judge')}",
        )
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("judge score")
    ax.set_ylabel("human mean score")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=7, frameon=False)
    return figure_svg(fig, title)
