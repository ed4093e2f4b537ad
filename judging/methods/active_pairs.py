"""Active pair selection for Bradley–Terry: the next batch of pairs to judge is the one
expected to shrink the ideas' rating intervals most.

The precision a run is after is the **mean width of the 95 % intervals of the centred
log-strengths** (`mean_interval_width`: θ_i − mean θ, Wald intervals from the fitted
model's covariance, `judging.methods.bradley_terry`). Random pairing spends games on
pairs whose outcome is a foregone conclusion and on ideas already well placed; the
selector spends them where they reduce that width most.

One judged game between i and j adds w_ij·u uᵀ to the information matrix, with
u = e_i − e_j and w_ij = p_ij(1 − p_ij) the Fisher information of one Bernoulli
outcome at the current fit's p_ij = σ(θ_i − θ_j). By Sherman–Morrison the covariance C
becomes C − w·(Cu)(Cu)ᵀ / (1 + w·uᵀCu), so the variance of each centred strength m
falls by w·(HCu)_m² / (1 + w·uᵀCu) (H the centring matrix). The gain of a pair is the
fall of the summed interval half-widths to first order, Σ_m Δvar_m / (2·sd_m): a pair
of close strengths (w near ¼) between ideas whose intervals are wide scores highest.
A batch of k pairs is chosen greedily: the best pair, then C updated as if it had been
judged (the update does not depend on the outcome), then the next best, so a batch
does not pile onto one idea. Runs send a batch's calls concurrently and refit after it.

This is the design criterion Chatbot Arena's active sampling rests on (the expected
reduction of the rating intervals; Chiang et al., "Chatbot Arena: An Open Platform for
Evaluating LLMs by Human Preference"), applied to the summed widths rather than to one
pair's own interval, with a batch chosen jointly instead of pairs drawn independently.

Pure and deterministic: the same outcomes, `k` and `seed` give the same pairs (ties,
e.g. before any game, are broken by a seeded coin), so a resumed run asks for the same
batch. A pair is judged at most `max_per_pair` times: an LLM judge asked the same pair
again mostly repeats itself, so repeats do not carry independent information.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Iterable, Sequence

import numpy as np

from judging.methods.bradley_terry import RIDGE, BTFit, fit_bradley_terry

__all__ = [
    "BATCH_SIZE",
    "CRITERIA",
    "MAX_PER_PAIR",
    "PAIRS_PER_IDEA",
    "centred_se",
    "mean_interval_width",
    "pair_budget",
    "random_pairs",
    "select_pairs",
    "shown_order",
]

Id = Hashable
MAX_PER_PAIR = 2
"""Each unordered pair at most twice: once in each order, as the pairwise method judges."""
BATCH_SIZE = 25
"""Pairs chosen per batch by a run (each batch is sent concurrently, then refitted). The
figures in docs/judge-reliability.md were measured with batches of 25; batches of 10
did a little better on three seeds, within the spread between seeds, at less
concurrency and more refits."""
PAIRS_PER_IDEA = 15
"""A run's default budget per group: 15 games per idea, and at most one per pair (half
the calls of a both-order round robin; the cap binds up to 31 ideas). At 100 ideas and
an 80 %-accurate judge the active design's Kendall τ against the truth reached 0.85 at
about 1,500 pairs (docs/judge-reliability.md)."""


def centred_se(fit: BTFit) -> np.ndarray:
    """Standard errors of θ_i − mean θ (the covariance H C H, H the centring matrix)."""
    n = len(fit.ideas)
    h = np.eye(n) - 1.0 / n
    return np.sqrt(np.clip(np.diag(h @ fit.cov @ h), 0.0, None))


def mean_interval_width(fit: BTFit, level: float = 0.95) -> float:
    """Mean width of the `level` Wald intervals of the centred log-strengths."""
    from scipy.stats import norm

    return float(2.0 * norm.ppf(0.5 + level / 2.0) * centred_se(fit).mean())


def _pair_counts(
    comparisons: Sequence[tuple[Id, Id, float]],
    index: dict[Id, int],
    n: int,
    asked: Sequence[tuple[Id, Id]] = (),
) -> np.ndarray:
    counts = np.zeros((n, n), dtype=int)
    for a, b in [(a, b) for a, b, _ in comparisons] + list(asked):
        i, j = index[a], index[b]
        counts[i, j] += 1
        counts[j, i] += 1
    return counts


def pair_budget(n_ideas: int, pairs: int | None = None, max_per_pair: int = MAX_PER_PAIR) -> int:
    """The games a run asks of a group of `n_ideas`: `pairs`, or by default (None)
    PAIRS_PER_IDEA per idea but no more than the number of pairs; never more than
    `max_per_pair` games of every pair, so the budget is always spent in full."""
    if n_ideas < 2:
        return 0
    every = n_ideas * (n_ideas - 1) // 2
    wanted = min(PAIRS_PER_IDEA * n_ideas, every) if pairs is None else int(pairs)
    if wanted < 0:
        raise ValueError("pairs must be non-negative")
    return min(wanted, max_per_pair * every)


def shown_order(
    pair: tuple[Id, Id], asked: Iterable[tuple[Id, Id]], seed: int | str
) -> tuple[Id, Id]:
    """Which of a chosen pair is shown first: the order not yet asked when the pair was
    asked before (its second game is the other order, as in a both-order round robin),
    else a coin seeded by the pair, so a resumed run shows it the same way."""
    a, b = pair
    done = set(asked)
    if (a, b) in done and (b, a) not in done:
        return b, a
    if (b, a) in done and (a, b) not in done:
        return a, b
    flip = random.Random(f"active-order:{seed}:{a}:{b}").random() < 0.5
    return (b, a) if flip else (a, b)


CRITERIA = ("width", "discordant", "density")
"""What a batch is chosen to shrink: "width", the summed interval half-widths (the
default); "discordant", the expected number of pairs of ideas the fit orders wrongly;
"density", the variances of the gaps between ideas, each weighted by how much of its
posterior lies near zero (docs/judge-reliability.md compares them)."""


def _discordance_weights(z: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """a_ml: how much a unit fall of var(θ_m − θ_l) lowers the chance that the fit orders
    m and l wrongly, averaged over the posterior of their true difference.

    With the posterior Δ ~ N(μ, v) and the fit's order sign(μ), P(misordered) =
    Φ(−|μ|/s) (s = √v), whose derivative in v at a fixed gap is φ(x)·|x| / (2v) with
    x = Δ/s. Evaluated at the fitted gap alone it is 0 for ideas the fit cannot yet tell
    apart (μ = 0), which would leave the first games to chance; averaged over the
    posterior, X ~ N(z, 1) with z = μ/s, it is E[φ(X)|X|] / (2v) =
    e^(−z²/4)·[e^(−z²/4)/√π + (z/2)(1 − 2Φ(−z/√2))] / (2√π · 2v). Elementwise in
    z = |μ|/s and s."""
    from scipy.stats import norm

    half = z / 2.0
    mean_abs = np.exp(-(z**2) / 4.0) / math.sqrt(math.pi) + half * (
        1.0 - 2.0 * norm.cdf(-z / math.sqrt(2.0))
    )
    return np.exp(-(z**2) / 4.0) * mean_abs / (2.0 * math.sqrt(math.pi)) / (2.0 * sd**2)


def _density_weights(z: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """a_ml = φ(z)/v with z = |μ|/√v, μ = θ_m − θ_l the fitted gap and v its posterior
    variance: the weight is the density of the fitted gap's posterior N(μ, v) at zero,
    φ(z)/√v, per unit of its standard deviation √v. A unit fall of v lowers √v by
    1/(2√v), so a_ml times the fall of var(θ_m − θ_l) is, to first order, twice that
    density times the fall of the gap's standard deviation: the games go where the gaps
    the fit is least sure of the sign of narrow most. Unlike the derivative of
    P(misordered) at the fitted gap (φ(z)·z / 2v), it is largest, not 0, for ideas the
    fit cannot yet tell apart. Elementwise in z and √v."""
    return np.exp(-(z**2) / 2.0) / math.sqrt(2.0 * math.pi) / sd**2


def _quadratic(cov: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """uᵀ C W C u for every u = e_i − e_j, with W = diag(weights) as a matrix."""
    b = cov @ weights @ cov
    d = np.diag(b)
    return d[:, None] + d[None, :] - 2.0 * b


def _gain_quadratic(cov: np.ndarray, theta: np.ndarray, criterion: str) -> np.ndarray:
    """For each pair (i, j): the criterion's first-order fall per unit of
    c = w / (1 + w·uᵀCu), i.e. Σ_m a_m·((HCu)_m)² ("width", a_m = 1 / (2·sd_m) of the
    centred strengths) or Σ_{m<l} a_ml·((Cu)_m − (Cu)_l)² ("discordant" and "density",
    a_ml from `_discordance_weights` and `_density_weights`)."""
    n = len(theta)
    if criterion == "width":
        h = np.eye(n) - 1.0 / n
        a = h @ cov  # column i is H C e_i
        sd = np.sqrt(np.clip(np.diag(a @ h), 1e-300, None))
        b = a.T @ (a / (2.0 * sd)[:, None])
        d = np.diag(b)
        return d[:, None] + d[None, :] - 2.0 * b
    diag = np.diag(cov)
    v = diag[:, None] + diag[None, :] - 2.0 * cov
    sd = np.sqrt(np.clip(v, 1e-12, None))
    z = np.abs(theta[:, None] - theta[None, :]) / sd
    weights = _density_weights if criterion == "density" else _discordance_weights
    a = weights(z, sd)
    np.fill_diagonal(a, 0.0)
    laplacian = np.diag(a.sum(axis=1)) - a  # Σ_{m<l} a_ml (x_m − x_l)² = xᵀ L x
    return _quadratic(cov, laplacian)


def select_pairs(
    comparisons: Iterable[tuple[Id, Id, float]],
    ideas: Sequence[Id],
    k: int,
    *,
    max_per_pair: int = MAX_PER_PAIR,
    ridge: float = RIDGE,
    seed: int | str = 0,
    criterion: str = "width",
    asked: Iterable[tuple[Id, Id]] = (),
) -> list[tuple[Id, Id]]:
    """The next `k` pairs to judge, given the (i, j, score of i) outcomes so far.

    `asked`: pairs asked whose answer gave no outcome (an unparseable one); they count
    towards `max_per_pair` but not in the fit. Returns fewer when fewer pairs are below
    `max_per_pair`. Each pair is (a, b) in the order of `ideas`; which one is shown first
    is the caller's choice (`shown_order`).
    """
    if k < 0 or max_per_pair < 1:
        raise ValueError("k must be non-negative and max_per_pair at least 1")
    if ridge <= 0:
        raise ValueError("active selection needs ridge > 0 (a finite covariance before any game)")
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {', '.join(CRITERIA)}, not {criterion!r}")
    games = list(comparisons)
    fit = fit_bradley_terry(games, ideas, ridge=ridge)
    n = len(fit.ideas)
    index = {idea: m for m, idea in enumerate(fit.ideas)}
    counts = _pair_counts(games, index, n, list(asked))
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    p = 1.0 / (1.0 + np.exp(-(fit.theta[:, None] - fit.theta[None, :])))
    w = p * (1.0 - p)
    cov = fit.cov.copy()
    coin = random.Random(f"active-pairs:{seed}:{len(games)}")
    chosen: list[tuple[Id, Id]] = []
    for _ in range(k):
        free = upper & (counts < max_per_pair)
        if not free.any():
            break
        quad = _gain_quadratic(cov, fit.theta, criterion)
        diag = np.diag(cov)
        v = diag[:, None] + diag[None, :] - 2.0 * cov
        gain = np.where(free, w * quad / (1.0 + w * v), -np.inf)
        best = gain.max()
        ties = np.argwhere(gain >= best - 1e-12 * max(abs(best), 1e-300))
        i, j = (int(x) for x in ties[coin.randrange(len(ties))])
        cu = cov[:, i] - cov[:, j]
        cov -= w[i, j] / (1.0 + w[i, j] * v[i, j]) * np.outer(cu, cu)
        counts[i, j] += 1
        counts[j, i] += 1
        chosen.append((fit.ideas[i], fit.ideas[j]))
    return chosen


def random_pairs(
    comparisons: Iterable[tuple[Id, Id, float]],
    ideas: Sequence[Id],
    k: int,
    *,
    max_per_pair: int = MAX_PER_PAIR,
    seed: int | str = 0,
) -> list[tuple[Id, Id]]:
    """`k` pairs drawn uniformly from those below `max_per_pair` (without replacement
    within the batch): the baseline the active rule is measured against."""
    games = list(comparisons)
    order = list(ideas)
    index = {idea: m for m, idea in enumerate(order)}
    for a, b, _ in games:
        for x in (a, b):
            if x not in index:
                index[x] = len(order)
                order.append(x)
    n = len(order)
    counts = _pair_counts(games, index, n)
    i_up, j_up = np.triu_indices(n, 1)
    free = [
        (int(i), int(j)) for i, j in zip(i_up, j_up, strict=True) if counts[i, j] < max_per_pair
    ]
    picks = random.Random(f"random-pairs:{seed}:{len(games)}").sample(free, min(k, len(free)))
    return [(order[i], order[j]) for i, j in picks]
