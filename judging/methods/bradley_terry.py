"""Bradley–Terry strengths from pairwise outcomes, fitted by Newton's method.

Model: P(i beats j) = σ(θ_i − θ_j). A tie counts as half a win for each side, i.e. the
game contributes ½·log σ(θ_i − θ_j) + ½·log σ(θ_j − θ_i) to the log-likelihood.

A small ridge prior (λ/2)·Σθ² is on by default. Without it an undefeated idea has θ = +∞,
and ideas in separate components of the comparison graph have no common origin; with it
every strength is finite and the penalised log-likelihood is strictly concave, so Newton
converges from θ = 0. The default λ = 0.01 is a N(0, 10²) prior on log-strengths: it
moves well-determined strengths negligibly. λ = 0 gives the plain maximum-likelihood fit
(centred to sum 0) and is refused when the MLE does not exist, that is when the
"beat or drew with" graph is not strongly connected.

Standard errors come from the observed information at the optimum (λI added when λ > 0;
with λ = 0, its pseudo-inverse in the sum-to-zero parameterisation). Contrasts θ_i − θ_j
and their standard errors are what to compare; `se` is reported for ideas that played at
least once and is None otherwise.

`estimate_ridge` replaces the fixed λ by one estimated from the data: the prior θ ~ N(0, σ²)
with σ² maximising the Laplace approximation of the outcomes' marginal likelihood
(empirical Bayes). Its intervals are the posterior's, which stay
calibrated when the pairs were chosen from earlier outcomes (active selection): with
λ = 0.01 such designs give intervals far too narrow, because pairs the fit believes far
apart are no longer compared and their overestimated gaps are never corrected
(`judging.methods.active_pairs`, docs/judge-reliability.md).

For display, `ratings` puts strengths on the familiar Elo-point scale (1500 for the
average idea, +400 meaning 10:1 odds) and `win_prob_vs_average` gives the modelled chance
of beating an idea of average strength.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from judging.methods.pairwise import PairCall

__all__ = [
    "RIDGE",
    "BTFit",
    "bootstrap_intervals",
    "comparisons_from_calls",
    "estimate_ridge",
    "fit_bradley_terry",
    "log_evidence",
]

Id = Hashable
RIDGE = 0.01
ELO_POINTS_PER_NAT = 400 / math.log(10)


@dataclass(frozen=True)
class BTFit:
    ideas: tuple[Id, ...]
    theta: np.ndarray
    """Log-strengths, in the order of `ideas`."""
    cov: np.ndarray
    """Covariance of θ from the (penalised) observed information."""
    games: np.ndarray
    """Games each idea played."""
    ridge: float
    iterations: int
    log_likelihood: float
    """Unpenalised log-likelihood at the fitted θ."""

    def _index(self, idea: Id) -> int:
        return self.ideas.index(idea)

    @property
    def strengths(self) -> dict[Id, float]:
        return dict(zip(self.ideas, self.theta.tolist(), strict=True))

    @property
    def se(self) -> dict[Id, float | None]:
        sd = np.sqrt(np.clip(np.diag(self.cov), 0, None))
        return {
            i: (float(s) if g > 0 else None)
            for i, s, g in zip(self.ideas, sd, self.games, strict=True)
        }

    def se_difference(self, a: Id, b: Id) -> float:
        i, j = self._index(a), self._index(b)
        c = self.cov
        return math.sqrt(max(c[i, i] + c[j, j] - 2 * c[i, j], 0.0))

    def probability(self, a: Id, b: Id) -> float:
        """Modelled probability that `a` beats `b`."""
        d = self.theta[self._index(a)] - self.theta[self._index(b)]
        return float(1 / (1 + math.exp(-d)))

    @property
    def ratings(self) -> dict[Id, float]:
        centred = self.theta - self.theta.mean()
        return {
            i: float(1500 + ELO_POINTS_PER_NAT * t)
            for i, t in zip(self.ideas, centred, strict=True)
        }

    @property
    def win_prob_vs_average(self) -> dict[Id, float]:
        centred = self.theta - self.theta.mean()
        return {i: float(1 / (1 + math.exp(-t))) for i, t in zip(self.ideas, centred, strict=True)}

    def ranking(self) -> list[Id]:
        return [self.ideas[k] for k in np.argsort(-self.theta, kind="stable")]


def comparisons_from_calls(calls: Iterable[PairCall]) -> list[tuple[Id, Id, float]]:
    """(first, second, score of first) per parsed call; unparseable calls are left out."""
    score = {"A": 1.0, "B": 0.0, "tie": 0.5}
    return [(c.first, c.second, score[c.winner]) for c in calls if c.winner is not None]


def _strongly_connected(adj: np.ndarray) -> bool:
    n = adj.shape[0]

    def reach(m: np.ndarray) -> int:
        seen = {0}
        stack = [0]
        while stack:
            u = stack.pop()
            for v in np.nonzero(m[u])[0]:
                if int(v) not in seen:
                    seen.add(int(v))
                    stack.append(int(v))
        return len(seen)

    return n <= 1 or (reach(adj) == n and reach(adj.T) == n)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(0.5 * x))


def fit_bradley_terry(
    comparisons: Iterable[tuple[Id, Id, float]],
    ideas: Sequence[Id] = (),
    *,
    ridge: float = RIDGE,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> BTFit:
    """Fit θ from (i, j, s) triples where s ∈ {1, ½, 0} is i's result against j.

    `ideas` fixes the order and may include ideas without games (they get θ = 0 under the
    ridge prior).
    """
    if ridge < 0:
        raise ValueError("ridge must be non-negative")
    order: list[Id] = list(ideas)
    index = {i: k for k, i in enumerate(order)}
    triples = []
    for a, b, s in comparisons:
        if s not in (0.0, 0.5, 1.0):
            raise ValueError(f"result must be 0, 0.5 or 1, got {s!r}")
        if a == b:
            raise ValueError(f"an idea cannot play itself: {a!r}")
        for x in (a, b):
            if x not in index:
                index[x] = len(order)
                order.append(x)
        triples.append((index[a], index[b], float(s)))
    n = len(order)
    # wins[i, j]: points i scored against j; games[i, j]: games between them.
    wins = np.zeros((n, n))
    games = np.zeros((n, n))
    for i, j, s in triples:
        wins[i, j] += s
        wins[j, i] += 1 - s
        games[i, j] += 1
        games[j, i] += 1
    if ridge == 0 and not _strongly_connected(wins > 0):
        raise ValueError(
            "the maximum-likelihood strengths are not finite (some idea never lost or never "
            "won within its component, or the comparison graph is disconnected); use ridge > 0"
        )
    total_wins = wins.sum(axis=1)

    def loglik(theta: np.ndarray) -> float:
        d = theta[:, None] - theta[None, :]
        # log σ(d) = −log(1 + e^(−d)), stable through logaddexp.
        return float(-(wins * np.logaddexp(0, -d)).sum())

    def objective(theta: np.ndarray) -> float:
        return loglik(theta) - 0.5 * ridge * float(theta @ theta)

    theta = np.zeros(n)
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 - the count is reported
        p = _sigmoid(theta[:, None] - theta[None, :])
        grad = total_wins - (games * p).sum(axis=1) - ridge * theta
        w = games * p * (1 - p)
        info = np.diag(w.sum(axis=1)) - w + ridge * np.eye(n)
        if ridge > 0:
            step = np.linalg.solve(info, grad)
        else:
            step = np.linalg.lstsq(info, grad, rcond=None)[0]
        current = objective(theta)
        t = 1.0
        while t > 1e-8 and objective(theta + t * step) < current - 1e-12:
            t /= 2
        theta = theta + t * step
        if ridge == 0:
            theta -= theta.mean()
        if np.max(np.abs(t * step)) < tol:
            break

    p = _sigmoid(theta[:, None] - theta[None, :])
    w = games * p * (1 - p)
    info = np.diag(w.sum(axis=1)) - w + ridge * np.eye(n)
    cov = np.linalg.inv(info) if ridge > 0 else np.linalg.pinv(info)
    return BTFit(
        ideas=tuple(order),
        theta=theta,
        cov=cov,
        games=games.sum(axis=1),
        ridge=ridge,
        iterations=iterations,
        log_likelihood=loglik(theta),
    )


def bootstrap_intervals(
    comparisons: Sequence[tuple[Id, Id, float]],
    ideas: Sequence[Id] = (),
    *,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
    ridge: float = RIDGE,
) -> dict[Id, tuple[float, float]]:
    """Percentile intervals of each idea's centred θ over fits to resampled comparisons.

    Comparisons are resampled with replacement as whole games; θ is centred (mean 0) in
    every fit so the intervals do not wander with the arbitrary origin. Needs ridge > 0:
    a resample can easily leave an idea undefeated.
    """
    if ridge <= 0:
        raise ValueError("bootstrap needs ridge > 0")
    games = list(comparisons)
    base = fit_bradley_terry(games, ideas, ridge=ridge)
    if not games or n_boot < 1:
        return {}
    rng = np.random.default_rng(seed)
    draws = np.empty((n_boot, len(base.ideas)))
    for b in range(n_boot):
        sample = [games[k] for k in rng.integers(0, len(games), len(games))]
        theta = fit_bradley_terry(sample, base.ideas, ridge=ridge).theta
        draws[b] = theta - theta.mean()
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail], axis=0)
    return {i: (float(lo), float(hi)) for i, lo, hi in zip(base.ideas, low, high, strict=True)}


RIDGE_BOUNDS = (1e-3, 1e3)
"""λ stays within these: σ from about 0.03 to 30 log-odds units."""


def log_evidence(fit: BTFit) -> float:
    """Laplace approximation of log p(outcomes | λ) for the prior θ ~ N(0, I/λ):
    ℓ(θ̂) − (λ/2)‖θ̂‖² + (n/2)·log λ − ½·log det(I(θ̂) + λI). The likelihood is flat along
    the common shift, whose prior and posterior terms cancel, so the full space serves."""
    lam = fit.ridge
    if lam <= 0:
        raise ValueError("the evidence needs a proper prior (ridge > 0)")
    n = len(fit.ideas)
    _, logdet = np.linalg.slogdet(np.linalg.inv(fit.cov))
    return float(
        fit.log_likelihood
        - 0.5 * lam * float(fit.theta @ fit.theta)
        + 0.5 * n * math.log(lam)
        - 0.5 * logdet
    )


def estimate_ridge(
    comparisons: Sequence[tuple[Id, Id, float]],
    ideas: Sequence[Id] = (),
    *,
    tol: float = 1e-3,
    without_games: float = 1.0,
) -> float:
    """λ = 1/σ² of the prior θ ~ N(0, σ²) that maximises the Laplace evidence
    (`log_evidence`), searched over log λ within RIDGE_BOUNDS (to `tol` in log λ).

    Empirical Bayes: σ is how far apart the outcomes say the ideas are. With few games it
    may sit at the tight end (nothing yet shows the ideas differ), and every strength is
    then pulled to 0 until the outcomes show otherwise. Without games the evidence is
    flat and `without_games` is returned (1: ideas a few log-odds apart).
    """
    games = list(comparisons)
    if not games:
        return without_games
    lo, hi = (math.log(b) for b in RIDGE_BOUNDS)

    def negative(log_lam: float) -> float:
        return -log_evidence(fit_bradley_terry(games, ideas, ridge=math.exp(log_lam)))

    from scipy.optimize import minimize_scalar  # scipy only when a prior is estimated

    best = minimize_scalar(negative, bounds=(lo, hi), method="bounded", options={"xatol": tol})
    return float(math.exp(best.x))
