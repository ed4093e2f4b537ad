"""Active pair selection and the empirical-Bayes prior for Bradley–Terry.

The selector's choice is checked against brute forces written here: for every candidate
pair, the information matrix with that game added is inverted directly (no
Sherman–Morrison), and the first-order fall of the summed interval half-widths ("width"),
of the expected number of misordered pairs ("discordant", its weights integrated
numerically) or of the gaps' variances weighted by their posterior density at zero
("density") computed from it. The prior's λ is checked against a Laplace evidence computed here with scipy's
optimiser and a finite-difference Hessian.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import trapezoid
from scipy.optimize import minimize, minimize_scalar
from scipy.stats import kendalltau, norm

from judging.methods.active_pairs import (
    centred_se,
    mean_interval_width,
    pair_budget,
    random_pairs,
    select_pairs,
    shown_order,
)
from judging.methods.bradley_terry import estimate_ridge, fit_bradley_terry


def _games(seed: int, n: int = 8, m: int = 40, spread: float = 1.2):
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, spread, n)
    games = []
    for _ in range(m):
        a, b = (int(x) for x in rng.choice(n, 2, replace=False))
        p = 1 / (1 + math.exp(-(theta[a] - theta[b])))
        games.append((a, b, float(rng.random() < p)))
    return games, theta


def _brute_force_gains(games, ideas, ridge, extra=()):
    """Gain of each pair given `extra` pairs already chosen in the batch."""
    fit = fit_bradley_terry(games, ideas, ridge=ridge)
    n = len(fit.ideas)
    theta = fit.theta
    w = lambda i, j: (p := 1 / (1 + math.exp(-(theta[i] - theta[j])))) * (1 - p)  # noqa: E731
    info = np.linalg.inv(fit.cov)
    for i, j in extra:
        u = np.zeros(n)
        u[i], u[j] = 1, -1
        info = info + w(i, j) * np.outer(u, u)
    h = np.eye(n) - 1 / n
    before = np.diag(h @ np.linalg.inv(info) @ h)
    gains = {}
    for i in range(n):
        for j in range(i + 1, n):
            u = np.zeros(n)
            u[i], u[j] = 1, -1
            after = np.diag(h @ np.linalg.inv(info + w(i, j) * np.outer(u, u)) @ h)
            gains[(i, j)] = float(((before - after) / (2 * np.sqrt(before))).sum())
    return gains


def _brute_force_pair_weights(games, ideas, ridge, extra, weight):
    """Σ over pairs of ideas (m, l) of weight(z, v) × the fall of var(θ_m − θ_l) that a
    game of each candidate pair brings, every covariance by inverting the information
    matrix (z = abs(θ̂_m − θ̂_l)/√v, v = var(θ_m − θ_l) given `extra`)."""
    fit = fit_bradley_terry(games, ideas, ridge=ridge)
    n = len(fit.ideas)
    theta = fit.theta
    w = lambda i, j: (p := 1 / (1 + math.exp(-(theta[i] - theta[j])))) * (1 - p)  # noqa: E731
    info = np.linalg.inv(fit.cov)
    for i, j in extra:
        u = np.zeros(n)
        u[i], u[j] = 1, -1
        info = info + w(i, j) * np.outer(u, u)
    cov = np.linalg.inv(info)

    def var_diff(c, m, k):
        return c[m, m] + c[k, k] - 2 * c[m, k]

    weights = {}
    for m in range(n):
        for k in range(m + 1, n):
            v = var_diff(cov, m, k)
            weights[(m, k)] = weight(abs(theta[m] - theta[k]) / math.sqrt(v), v)
    gains = {}
    for i in range(n):
        for j in range(i + 1, n):
            u = np.zeros(n)
            u[i], u[j] = 1, -1
            after = np.linalg.inv(info + w(i, j) * np.outer(u, u))
            gains[(i, j)] = sum(
                a * (var_diff(cov, m, k) - var_diff(after, m, k)) for (m, k), a in weights.items()
            )
    return gains


def _brute_force_discordance(games, ideas, ridge, extra=()):
    """Gain of each pair for the "discordant" criterion: the fall of var(θ_m − θ_l) for
    every pair of ideas, each weighted by E[φ(X)·|X|] / (2·var) with X ~ N(Δθ/sd, 1),
    the expectation taken by numerical integration."""
    grid = np.linspace(-15, 15, 6001)  # the trapezoidal rule on a fine grid

    def weight(z, v):
        return trapezoid(norm.pdf(grid) * np.abs(grid) * norm.pdf(grid - z), grid) / (2 * v)

    return _brute_force_pair_weights(games, ideas, ridge, extra, weight)


def _brute_force_density(games, ideas, ridge, extra=()):
    """Gain of each pair for the "density" criterion: the fall of var(θ_m − θ_l) for every
    pair of ideas, each weighted by the density of N(Δθ, var) at 0 divided by its sd."""

    def weight(z, v):
        sd = math.sqrt(v)
        return norm.pdf(0.0, loc=z * sd, scale=sd) / sd

    return _brute_force_pair_weights(games, ideas, ridge, extra, weight)


@pytest.mark.parametrize(
    ("criterion", "brute_force"),
    [
        ("width", _brute_force_gains),
        ("discordant", _brute_force_discordance),
        ("density", _brute_force_density),
    ],
)
def test_the_first_pair_is_the_one_whose_game_shrinks_the_criterion_most(criterion, brute_force):
    games, _ = _games(0)
    ideas = list(range(8))
    gains = brute_force(games, ideas, ridge=0.3)
    best = max(gains, key=gains.get)
    assert select_pairs(games, ideas, 1, ridge=0.3, criterion=criterion) == [best]


@pytest.mark.parametrize(
    ("criterion", "brute_force"),
    [
        ("width", _brute_force_gains),
        ("discordant", _brute_force_discordance),
        ("density", _brute_force_density),
    ],
)
def test_a_batch_is_chosen_greedily_as_if_the_earlier_pairs_were_judged(criterion, brute_force):
    games, _ = _games(1)
    ideas = list(range(8))
    batch = select_pairs(games, ideas, 3, ridge=0.3, criterion=criterion)
    for k in range(1, 3):
        gains = brute_force(games, ideas, 0.3, extra=batch[:k])
        assert batch[k] == max(gains, key=gains.get)


def test_the_density_criterion_weighs_each_gap_by_its_posterior_density_at_zero_per_sd():
    # A world on which the other weights screened beside φ(z)/v (φ(z)/√v, φ(z)/v^1.5,
    # φ(z)·z/2v, Φ(−z)/v, φ(z/2)/v, 1/v and the posterior-averaged "discordant" ones)
    # each choose a different batch of four.
    games, _ = _games(6)
    ideas = list(range(8))
    batch = select_pairs(games, ideas, 4, ridge=0.3, criterion="density")
    for k in range(4):
        gains = _brute_force_density(games, ideas, 0.3, extra=batch[:k])
        assert batch[k] == max(gains, key=gains.get)


def test_on_a_three_idea_chain_the_game_between_its_ends_carries_most_information():
    # 0 – 1 – 2, each link judged twice and split: θ̂ = 0, so every game has Fisher
    # information w = ¼, and with λ = 1 the information matrix is I + ½·L (L the path's
    # Laplacian), whose inverse, worked out by hand (determinant 15/4), is:
    games = [(0, 1, 1.0), (0, 1, 0.0), (1, 2, 1.0), (1, 2, 0.0)]
    cov = np.array([[11, 3, 1], [3, 9, 3], [1, 3, 11]]) / 15
    fit = fit_bradley_terry(games, [0, 1, 2], ridge=1.0)
    assert fit.theta == pytest.approx(np.zeros(3), abs=1e-12)
    assert fit.cov == pytest.approx(cov)
    h = np.eye(3) - 1 / 3
    sd = np.sqrt(np.diag(h @ cov @ h))
    falls = {}
    for i, j in ((0, 1), (0, 2), (1, 2)):
        u = np.zeros(3)
        u[i], u[j] = 1, -1
        after = np.linalg.inv(np.linalg.inv(cov) + 0.25 * np.outer(u, u))
        fall = sd**2 - np.diag(h @ after @ h)
        falls[(i, j)] = float((fall / (2 * sd)).sum())
    # var(θ_0 − θ_2) = 4/3 against 14/15 for a link: the ends are the least tied pair.
    assert max(falls, key=falls.get) == (0, 2)
    assert falls[(0, 2)] > 1.2 * max(falls[(0, 1)], falls[(1, 2)])
    assert select_pairs(games, [0, 1, 2], 1, ridge=1.0) == [(0, 2)]


def _simulate(design: str, seed: int, n: int = 16, batch: int = 8, rounds: int = 12):
    """Kendall τ after each batch on a seeded world (the better idea wins 80 % of random
    pairs); both designs see the same strengths and the same stream of verdict draws."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1.64, n)
    draws = np.random.default_rng([seed, 1])
    games: list[tuple[int, int, float]] = []
    ridge, taus = 1.0, []
    for _ in range(rounds):
        if design == "active":
            pairs = select_pairs(games, range(n), batch, ridge=ridge, seed=seed)
        else:
            pairs = random_pairs(games, range(n), batch, seed=seed)
        for a, b in pairs:
            p = 1 / (1 + math.exp(-(theta[a] - theta[b])))
            games.append((a, b, float(draws.random() < p)))
        ridge = estimate_ridge(games, range(n))
        taus.append(kendalltau(fit_bradley_terry(games, range(n), ridge=ridge).theta, theta)[0])
    return taus


def test_the_active_schedule_reaches_the_precision_target_with_fewer_pairs_than_random():
    # The documented measure, Kendall τ between fitted and true strengths, on a small
    # scale: the first batch at which the seed-mean τ reaches the target.
    seeds, target = range(4), 0.65

    def batches_needed(design):
        curves = np.array([_simulate(design, seed) for seed in seeds])
        reached = np.flatnonzero(curves.mean(axis=0) >= target)
        return int(reached[0]) + 1 if reached.size else math.inf

    active, rand = batches_needed("active"), batches_needed("random")
    assert active < rand


def test_an_unknown_criterion_is_refused():
    with pytest.raises(ValueError, match="criterion must be one of width, discordant, density"):
        select_pairs([], [1, 2], 1, criterion="entropy")


def _connected(n: int, edges) -> bool:
    seen, stack = {0}, [0]
    while stack:
        u = stack.pop()
        for a, b in edges:
            for x, y in ((a, b), (b, a)):
                if x == u and y not in seen:
                    seen.add(y)
                    stack.append(y)
    return len(seen) == n


@pytest.mark.parametrize("criterion", ["width", "discordant", "density"])
def test_before_any_game_the_first_batch_connects_or_pairs_off_the_ideas_by_the_prior(criterion):
    ideas = list(range(10))
    # Near-flat prior: the ideas' levels are unknown until they are linked, so the first
    # n − 1 games form a spanning tree.
    tree = select_pairs([], ideas, 9, criterion=criterion)
    assert _connected(10, tree) and len({frozenset(p) for p in tree}) == 9
    # A proper prior bounds every idea's variance: the first n/2 games meet every idea once.
    matching = select_pairs([], ideas, 5, ridge=1.0, criterion=criterion)
    assert sorted(x for pair in matching for x in pair) == ideas
    assert matching == select_pairs([], ideas, 5, ridge=1.0, criterion=criterion)
    other = select_pairs([], ideas, 5, ridge=1.0, seed=7, criterion=criterion)
    assert {frozenset(p) for p in matching} != {frozenset(p) for p in other}


def test_pairs_at_their_cap_are_not_chosen_and_the_batch_shrinks_when_none_are_left():
    games = [(0, 1, 1.0), (1, 0, 1.0), (0, 2, 0.0)]
    picks = select_pairs(games, [0, 1, 2], 5, max_per_pair=2)
    assert {frozenset(p) for p in picks} <= {frozenset((0, 2)), frozenset((1, 2))}
    assert len(picks) == 3  # (0, 2) once more, (1, 2) twice
    assert random_pairs(games, [0, 1, 2], 5, max_per_pair=2) != []
    assert len(random_pairs(games, [0, 1, 2], 5, max_per_pair=1)) == 1


def test_pairs_asked_without_an_outcome_count_against_the_cap_but_not_in_the_fit():
    games = [(0, 1, 1.0)]
    # (0, 1) was asked once more and answered unparseably: it is at its cap of two.
    picks = select_pairs(games, [0, 1, 2], 4, max_per_pair=2, asked=[(1, 0)])
    assert frozenset((0, 1)) not in {frozenset(p) for p in picks} and len(picks) == 4
    # The fit, and so the choice when the cap does not bind, is that of the games alone.
    assert select_pairs(games, [0, 1, 2], 1, max_per_pair=3, asked=[(1, 0)]) == select_pairs(
        games, [0, 1, 2], 1, max_per_pair=3
    )


def test_a_run_s_budget_is_fifteen_games_per_idea_at_most_one_per_pair_unless_given():
    assert pair_budget(100) == 1500
    assert pair_budget(10) == 45  # one game per pair
    assert pair_budget(10, 80) == 80
    assert pair_budget(10, 1000) == 90  # both orders of every pair
    assert pair_budget(1) == pair_budget(0, 10) == 0


def test_a_pair_asked_before_is_shown_the_other_way_round_else_by_a_seeded_coin():
    assert shown_order((3, 5), [(3, 5)], seed=0) == (5, 3)
    assert shown_order((3, 5), [(5, 3), (1, 2)], seed=0) == (3, 5)
    fresh = [shown_order((a, a + 1), [], seed=0) for a in range(40)]
    assert fresh == [shown_order((a, a + 1), [], seed=0) for a in range(40)]
    assert {f[0] < f[1] for f in fresh} == {True, False}  # both sides come first


def test_the_mean_interval_width_is_the_wald_width_of_the_centred_strengths():
    games, _ = _games(2)
    fit = fit_bradley_terry(games, list(range(8)), ridge=0.5)
    n = 8
    h = np.eye(n) - 1 / n
    se = np.sqrt(np.diag(h @ fit.cov @ h))
    assert centred_se(fit) == pytest.approx(se)
    assert mean_interval_width(fit) == pytest.approx(2 * 1.959964 * se.mean(), rel=1e-6)


def _evidence(games, n, lam):
    """Laplace log evidence by scipy's optimiser and a finite-difference Hessian."""

    def nll(theta):
        out = 0.0
        for a, b, s in games:
            d = theta[a] - theta[b]
            out += s * np.logaddexp(0, -d) + (1 - s) * np.logaddexp(0, d)
        return out

    def objective(theta):
        return nll(theta) + 0.5 * lam * theta @ theta

    res = minimize(objective, np.zeros(n), method="BFGS", options={"gtol": 1e-9})
    eps = 1e-4
    hess = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            e_i, e_j = np.eye(n)[i] * eps, np.eye(n)[j] * eps
            hess[i, j] = (
                objective(res.x + e_i + e_j)
                - objective(res.x + e_i - e_j)
                - objective(res.x - e_i + e_j)
                + objective(res.x - e_i - e_j)
            ) / (4 * eps**2)
    return -res.fun + 0.5 * n * math.log(lam) - 0.5 * np.linalg.slogdet(hess)[1]


def test_the_estimated_prior_maximises_the_laplace_evidence():
    games, _ = _games(3, n=6, m=60)
    lam = estimate_ridge(games, list(range(6)))
    best = minimize_scalar(
        lambda log_lam: -_evidence(games, 6, math.exp(log_lam)),
        bounds=(math.log(1e-3), math.log(1e3)),
        method="bounded",
        options={"xatol": 1e-3},
    )
    assert math.log(lam) == pytest.approx(best.x, abs=0.02)


def test_with_many_games_the_estimated_prior_sd_is_near_the_true_spread():
    games, theta = _games(4, n=40, m=4000, spread=1.5)
    lam = estimate_ridge(games, list(range(40)))
    assert 1 / math.sqrt(lam) == pytest.approx(np.std(theta, ddof=1), rel=0.15)


def test_without_games_the_evidence_is_flat_and_the_stated_prior_is_kept():
    assert estimate_ridge([], ["a", "b", "c"]) == 1.0
    assert estimate_ridge([], ["a", "b"], without_games=0.25) == 0.25
    # Games that cannot tell the ideas apart (every game a tie) pull σ to the tight end.
    ties = [("a", "b", 0.5), ("b", "c", 0.5), ("a", "c", 0.5)] * 5
    assert estimate_ridge(ties, ["a", "b", "c"]) == pytest.approx(1e3, rel=0.05)
