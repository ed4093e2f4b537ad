"""An ordinal check beside the linear mixed model: a cumulative-link mixed model.

Review scores are ordered categories (1-10, 1-5), and the linear mixed model treats them
as interval data.  This module fits the cumulative-logit model R's ``ordinal::clmm`` fits,

    logit P(Y <= j) = theta_j - x'beta - sum_g sigma_g b_g[level],   b ~ N(0, I),

with one threshold ``theta_j`` between each pair of adjacent levels *observed* in the data,
the condition (treatment coded against the baseline) as fixed effect, and crossed random
intercepts (reviewer, idea, ...).  Positive ``beta`` means higher scores than the baseline.

The marginal likelihood is approximated as ``clmm`` does by default (Laplace): for given
parameters the conditional mode ``b_hat`` of ``h(b) = -log p(y | b) + b'b / 2`` is found by
Newton's method, and ``-log L ~ h(b_hat) + log det(H) / 2`` with ``H = I + M'WM`` the exact
Hessian of ``h`` (``M = Z Lambda``, ``W`` the per-review curvature).

What makes it fast is the gradient: the derivative of the Laplace approximation with
respect to the thresholds, coefficients and log-SDs is computed exactly (envelope theorem
for ``h``, and ``tr(H^-1 dH)`` for the determinant, where ``H`` also moves through
``b_hat``), so the outer optimiser (L-BFGS, then Newton on differences of that gradient,
which also gives the standard errors) needs no finite differences of the likelihood.
``H`` is handled like the linear engine's matrix: the factor with the most levels (ideas)
has a diagonal block, which is eliminated; with a single factor ``H`` is diagonal.  The
Schur complement over the remaining levels (reviewers) is factorised densely (LAPACK)
while small and otherwise kept sparse (:class:`_SparseSchur`): its pattern is fixed by
who reviewed what, it is factorised by the linear engine's exact sparse-then-dense
Cholesky, and the traces in the gradient read its inverse only where it has entries (a
selected inverse), so memory and time grow with the reviews, not with reviewers squared.

Pure module: no Django imports.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.linalg as la
import scipy.sparse as sp
from scipy import optimize, stats
from scipy.special import expit

from .lmm_sparse import _HybridFactor, _PatternIndex
from .mixed import _jsonable, prepare_mixed_data

__all__ = ["OrdinalResult", "fit_ordinal"]

#: A random-effect SD below this is reported as on the boundary (zero).
BOUNDARY_SD = 1e-4
#: Inner Newton iterations stop when the largest gradient entry of ``h`` is below this.
_INNER_TOL = 1e-10
#: Up to this many levels outside the largest factor (reviewers) the ``auto`` engine
#: factorises their Schur complement densely (LAPACK); beyond, sparsely.
DENSE_MAX_LEVELS = 150
#: The dense engine, when asked for, refuses more levels than this rather than
#: allocating gigabytes.
MAX_DENSE_LEVELS = 6000
#: Fewer reviews than this per estimated parameter (thresholds, condition effects,
#: random-effect SDs) and the model is not fitted: the thresholds of a handful of reviews
#: are not identified, and the optimiser wanders to where probabilities underflow.
MIN_REVIEWS_PER_PARAMETER = 5


@dataclass
class OrdinalResult:
    """A fitted cumulative-link mixed model in the shape the report uses."""

    metric: str
    baseline: str
    link: str
    levels: list[str]
    thresholds: list[dict[str, Any]]
    fixed: list[dict[str, Any]]
    sd: dict[str, float]
    loglik: float
    n_obs: int
    n_levels: dict[str, int]
    groups_used: list[str]
    groups_dropped: dict[str, str]
    converged: bool
    boundary: list[str]
    max_gradient: float
    iterations: int
    warnings: list[str]
    fit_seconds: float
    engine: str = "ideareview-clmm"
    details: dict[str, Any] = field(default_factory=dict)

    def term(self, name: str) -> dict[str, Any]:
        for row in self.fixed:
            if row["term"] == name:
                return row
        raise KeyError(f"no fixed effect {name!r}; terms: {[r['term'] for r in self.fixed]}")

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))


# ------------------------------------------------------------------ per-review pieces


def _logistic_derivs(x: np.ndarray) -> tuple[np.ndarray, ...]:
    """F, f = F', g = f', g' = f'' of the logistic distribution (zero at +-inf)."""
    F = expit(x)
    f = F * (1.0 - F)
    g = f * (1.0 - 2.0 * F)
    g1 = f * (1.0 - 2.0 * F) ** 2 - 2.0 * f * f
    return F, f, g, g1


def _probability(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """F(a) - F(c), computed on the side of zero where it does not cancel."""
    hi = c > 0
    return np.where(hi, expit(-c) - expit(-a), expit(a) - expit(c))


@dataclass
class _Pieces:
    """Log-probability of each review and its derivatives along eta and the thresholds."""

    logp: np.ndarray
    d1: np.ndarray  # D l, with D = d/da + d/dc = -d/deta
    w: np.ndarray  # -D^2 l: curvature (Hessian weight) of each review
    d3: np.ndarray  # D^3 l = dw/deta
    la: np.ndarray  # dl/da
    lc: np.ndarray  # dl/dc
    a_d1: np.ndarray  # d(Dl)/da
    c_d1: np.ndarray  # d(Dl)/dc
    a_d2: np.ndarray  # d(D^2 l)/da
    c_d2: np.ndarray  # d(D^2 l)/dc


def _pieces(a: np.ndarray, c: np.ndarray, *, full: bool) -> _Pieces:
    """A review whose probability underflows to zero gets log-probability -inf (every
    caller rejects such a point) and finite placeholder derivatives, not 0/0."""
    P = _probability(a, c)
    with np.errstate(divide="ignore"):
        logp = np.log(P)
    P = np.where(P > 0, P, 1.0)  # only for the quotients below
    _, fa, ga, g1a = _logistic_derivs(a)
    _, fc, gc, g1c = _logistic_derivs(c)
    d1 = (fa - fc) / P
    p2 = (ga - gc) / P
    w = d1 * d1 - p2
    if not full:
        empty = np.empty(0)
        return _Pieces(logp, d1, w, empty, empty, empty, empty, empty, empty, empty)
    d3 = (g1a - g1c) / P - 3.0 * d1 * p2 + 2.0 * d1**3
    return _Pieces(
        logp=logp,
        d1=d1,
        w=w,
        d3=d3,
        la=fa / P,
        lc=-fc / P,
        a_d1=(ga - d1 * fa) / P,
        c_d1=(-gc + d1 * fc) / P,
        a_d2=(g1a - p2 * fa - 2.0 * d1 * ga + 2.0 * d1 * d1 * fa) / P,
        c_d2=(-g1c + p2 * fc + 2.0 * d1 * gc - 2.0 * d1 * d1 * fc) / P,
    )


# ------------------------------------------------------------------ the Laplace problem


class _Clmm:
    """The data of one fit and the Laplace approximation with its exact gradient.

    Parameters are ``psi = (theta (K-1), beta (p), log sigma (G))``.  Factor 0 is the one
    with the most levels; its block of ``H`` is diagonal and is eliminated.
    """

    def __init__(
        self,
        y: np.ndarray,
        X: np.ndarray,
        codes: list[np.ndarray],
        sizes: list[int],
        engine: str = "dense",
    ):
        if engine not in ("dense", "sparse"):
            raise ValueError(f"engine must be 'dense' or 'sparse', not {engine!r}")
        self.y = y
        self.X = X
        self.n, self.p = X.shape
        self.K = int(y.max()) + 1
        order = np.argsort([-s for s in sizes], kind="stable")
        self.order = [int(i) for i in order]
        self.codes = [codes[i] for i in self.order]
        self.sizes = [sizes[i] for i in self.order]
        self.G = len(self.codes)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes[1:])]).astype(int)
        self.qR = int(sum(self.sizes[1:]))
        self.upper = y <= self.K - 2  # reviews whose category has a finite upper threshold
        self.lower = y >= 1
        self.b = np.zeros(int(sum(self.sizes)))
        # Every review's cell in the dense blocks is fixed: flat indices computed once.
        rcols = [self.offsets[g - 1] + self.codes[g] for g in range(1, self.G)]
        self._rcols = rcols
        self._pairs = [(g, h) for g in range(1, self.G) for h in range(1, self.G)]
        self.engine = engine if self.qR else "none"  # one factor: H is diagonal
        self.n_evals = 0
        if self.engine == "dense":
            self._dm_index = [rcols[g - 1] * self.qR + rcols[h - 1] for g, h in self._pairs]
        else:
            self._sparse = _SparseSchur(self.codes, self.sizes, rcols)

    # -- helpers over the stacked random effects b = (b_0, b_R)
    def _split(self, b: np.ndarray) -> list[np.ndarray]:
        out = [b[: self.sizes[0]]]
        start = self.sizes[0]
        for s in self.sizes[1:]:
            out.append(b[start : start + s])
            start += s
        return out

    def _Mb(self, sig: np.ndarray, b: np.ndarray) -> np.ndarray:
        """M b: each review's sum of sigma_g b_g[level]."""
        parts = self._split(b)
        return sum(sig[g] * parts[g][self.codes[g]] for g in range(self.G))  # type: ignore[return-value]

    def _Mt(self, sig: np.ndarray, v: np.ndarray) -> np.ndarray:
        """M' v."""
        return np.concatenate(
            [sig[g] * np.bincount(self.codes[g], v, self.sizes[g]) for g in range(self.G)]
        )

    def _ac(self, theta: np.ndarray, eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ext = np.concatenate([[-np.inf], theta, [np.inf]])
        return ext[self.y + 1] - eta, ext[self.y] - eta

    # -- H = I + M'WM by its Schur complement
    def _factor(self, sig: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, Any, Any]:
        A = 1.0 + sig[0] ** 2 * np.bincount(self.codes[0], w, self.sizes[0])
        if not np.all(A > 0):  # w >= 0 in exact arithmetic; rounding in the far tails
            raise np.linalg.LinAlgError("H is not positive definite")
        if self.qR == 0:
            return A, None, None
        if self.engine == "sparse":
            return A, sig, self._sparse.factorize(sig, w, A)
        q0, qR = self.sizes[0], self.qR
        rows = np.concatenate([self.codes[0]] * (self.G - 1))
        cols = np.concatenate(self._rcols)
        vals = np.concatenate([sig[0] * sig[g] * w for g in range(1, self.G)])
        B = sp.csr_matrix((vals, (rows, cols)), shape=(q0, qR))
        Dm = np.zeros(qR * qR)
        for (g, h), idx in zip(self._pairs, self._dm_index, strict=True):
            Dm += np.bincount(idx, sig[g] * sig[h] * w, qR * qR)
        S = Dm.reshape(qR, qR)
        S[np.diag_indices(qR)] += 1.0
        AiB = sp.diags(1.0 / A) @ B
        S -= (B.T @ AiB).toarray()
        return A, B, la.cho_factor(S, lower=True, check_finite=False)

    def _solve(self, F: tuple[np.ndarray, Any, Any], r: np.ndarray) -> np.ndarray:
        A, B, cho = F
        q0 = self.sizes[0]
        if cho is None:
            return r / A
        r0, rR = r[:q0], r[q0:]
        if self.engine == "sparse":
            return self._sparse.solve(B, cho, A, r0, rR)
        xR = la.cho_solve(cho, rR - B.T @ (r0 / A), check_finite=False)
        x0 = (r0 - B @ xR) / A
        return np.concatenate([x0, xR])

    def _logdet(self, F: tuple[np.ndarray, Any, Any]) -> float:
        A, _, cho = F
        out = float(np.log(A).sum())
        if cho is not None:
            out += (
                cho.logdet
                if self.engine == "sparse"
                else 2.0 * float(np.log(np.diag(cho[0])).sum())
            )
        return out

    # -- the conditional mode
    def _mode(self, theta: np.ndarray, beta: np.ndarray, sig: np.ndarray) -> tuple[Any, ...] | None:
        """Newton's method for b_hat, warm-started at the last mode; halves bad steps."""
        xb = self.X @ beta
        b = self.b.copy()

        def state(b: np.ndarray) -> tuple[float, _Pieces]:
            a, c = self._ac(theta, xb + self._Mb(sig, b))
            pc = _pieces(a, c, full=False)
            return float(-pc.logp.sum() + 0.5 * b @ b), pc

        h, pc = state(b)
        if not math.isfinite(h):
            b = np.zeros_like(b)
            h, pc = state(b)
            if not math.isfinite(h):
                return None
        for _ in range(100):
            grad = self._Mt(sig, pc.d1) + b
            if np.max(np.abs(grad)) < _INNER_TOL:
                break
            F = self._factor(sig, pc.w)
            step = self._solve(F, grad)
            t = 1.0
            for _ in range(60):
                h_new, pc_new = state(b - t * step)
                if h_new <= h + 1e-12 * abs(h):
                    break
                t *= 0.5
            else:
                break
            b, h, pc = b - t * step, h_new, pc_new
            if t * np.max(np.abs(step)) < 1e-13:
                break
        self.b = b
        return b, h, pc

    def value(self, psi: np.ndarray) -> float:
        theta, beta, sig = self.unpack(psi)
        if np.any(np.diff(theta) <= 0):
            return math.inf
        got = self._mode(theta, beta, sig)
        if got is None:
            return math.inf
        _, h, pc = got
        return h + 0.5 * self._logdet(self._factor(sig, pc.w))

    def unpack(self, psi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = self.K - 1
        return psi[:k], psi[k : k + self.p], np.exp(psi[k + self.p :])

    def value_and_grad(self, psi: np.ndarray) -> tuple[float, np.ndarray]:
        """-log L (Laplace) and its exact gradient in ``psi``."""
        self.n_evals += 1
        theta, beta, sig = self.unpack(psi)
        if np.any(np.diff(theta) <= 0):
            return math.inf, np.zeros_like(psi)
        got = self._mode(theta, beta, sig)
        if got is None:
            return math.inf, np.zeros_like(psi)
        b, h, _ = got
        xb = self.X @ beta
        a, c = self._ac(theta, xb + self._Mb(sig, b))
        pc = _pieces(a, c, full=True)
        F = self._factor(sig, pc.w)
        value = h + 0.5 * self._logdet(F)
        hdiag, lev = self._inverse_parts(F, sig)
        xi = self._solve(F, self._Mt(sig, lev * pc.d3))
        mxi = self._Mb(sig, xi)
        # Per review: what its eta contributes through h, log det H and b_hat.
        common = pc.d1 + 0.5 * lev * pc.d3 - 0.5 * mxi * pc.w
        upper = -pc.la - 0.5 * lev * pc.a_d2 - 0.5 * mxi * pc.a_d1
        lower = -pc.lc - 0.5 * lev * pc.c_d2 - 0.5 * mxi * pc.c_d1
        k = self.K - 1
        g_theta = np.bincount(self.y[self.upper], upper[self.upper], k) + np.bincount(
            self.y[self.lower] - 1, lower[self.lower], k
        )
        g_beta = self.X.T @ common
        parts_b = self._split(b)
        parts_xi = self._split(xi)
        parts_h = self._split(hdiag)
        g_tau = np.empty(self.G)
        for g in range(self.G):
            e = sig[g] * parts_b[g][self.codes[g]]
            g_tau[g] = (
                e @ common
                + self.sizes[g]
                - parts_h[g].sum()
                - 0.5 * sig[g] * (parts_xi[g][self.codes[g]] @ pc.d1)
            )
        return value, np.concatenate([g_theta, g_beta, g_tau])

    def _inverse_parts(
        self, F: tuple[np.ndarray, Any, Any], sig: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """diag(H^-1) and each review's leverage m_i' H^-1 m_i."""
        A, B, cho = F
        c0 = self.codes[0]
        if cho is None:
            hdiag = 1.0 / A
            return hdiag, sig[0] ** 2 * hdiag[c0]
        if self.engine == "sparse":
            return self._sparse.inverse_parts(cho, A, sig)
        Sinv = la.cho_solve(cho, np.eye(self.qR), check_finite=False)
        AiB = sp.diags(1.0 / A) @ B
        G = np.asarray(AiB @ Sinv)  # A^-1 B S^-1, the (0, R) block of -H^-1
        d0 = 1.0 / A + np.asarray(AiB.multiply(G).sum(axis=1)).ravel()
        hdiag = np.concatenate([d0, np.diag(Sinv)])
        lev = sig[0] ** 2 * d0[c0]
        for g in range(1, self.G):
            cg = self._rcols[g - 1]
            lev -= 2.0 * sig[0] * sig[g] * G[c0, cg]
            for h in range(1, self.G):
                lev += sig[g] * sig[h] * Sinv[cg, self._rcols[h - 1]]
        return hdiag, lev


def _same_level_pairs(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair (i, j) of rows with the same level, (i, i) included."""
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=size)
    starts = np.cumsum(counts) - counts
    n_of = counts[codes[order]]
    first = np.repeat(order, n_of)
    within = np.arange(first.size) - np.repeat(np.cumsum(n_of) - n_of, n_of)
    second = order[np.repeat(starts[codes[order]], n_of) + within]
    return first, second


@dataclass
class _SparseState:
    """One factorisation of the reviewers' Schur complement."""

    factor: _HybridFactor
    logdet: float
    weights: list[np.ndarray]  # per factor g >= 1: sigma_0 sigma_g w of each review


class _SparseSchur:
    """The Schur complement ``S = I + D - B' A^-1 B`` over the levels outside factor 0,
    kept sparse.

    ``D`` (the other factors' block of ``M'WM``) has an entry where one review carries
    both levels, and ``B' A^-1 B`` one where two reviews of the same level of factor 0
    (an idea) carry them; so ``S``'s pattern is fixed by the design, its values are one
    ``bincount`` per evaluation, and the symbolic work (fill-reducing elimination order,
    dense core) is done once.  The factorisation is the linear engine's exact hybrid
    (sparse elimination, then a dense core); the gradient's traces need ``S^-1`` only
    where ``S`` has entries, which its selected inverse gives without forming ``S^-1``.
    """

    def __init__(self, codes: list[np.ndarray], sizes: list[int], rcols: list[np.ndarray]):
        self.c0, self.q0 = codes[0], sizes[0]
        self.qR = int(sum(sizes[1:]))
        self.rcols = rcols
        self.n = self.c0.size
        first, second = _same_level_pairs(self.c0, self.q0)
        self.first, self.second = first, second
        self.gh = [(g, h) for g in range(len(rcols)) for h in range(len(rcols))]
        diag = np.arange(self.qR)
        rows = [diag] + [rcols[g] for g, _ in self.gh] + [rcols[g][first] for g, _ in self.gh]
        cols = [diag] + [rcols[h] for _, h in self.gh] + [rcols[h][second] for _, h in self.gh]
        r, c = np.concatenate(rows), np.concatenate(cols)
        pattern = sp.csc_matrix((np.ones(r.size), (r, c)), shape=(self.qR, self.qR))
        pattern.sum_duplicates()
        pattern.sort_indices()
        self.nnz = pattern.nnz
        self._pos = _PatternIndex(pattern).find(r, c)
        self._factor = _HybridFactor(pattern)
        f = self._factor
        # Where the gradient reads S^-1: the diagonal, each review's own pair of levels,
        # and each pair of reviews that share a level of factor 0.
        self._at_diag = f.inverse_positions(diag, diag)
        self._at_review = [f.inverse_positions(rcols[g], rcols[h]) for g, h in self.gh]
        self._at_pair = [f.inverse_positions(rcols[h][second], rcols[g][first]) for g, h in self.gh]

    def factorize(self, sig: np.ndarray, w: np.ndarray, A: np.ndarray) -> _SparseState:
        beta = [sig[0] * sig[g + 1] * w for g in range(len(self.rcols))]
        pair = w[self.first] * w[self.second] * (sig[0] ** 2 / A[self.c0[self.first]])
        data = [np.ones(self.qR)]
        data += [sig[g + 1] * sig[h + 1] * w for g, h in self.gh]
        data += [-sig[g + 1] * sig[h + 1] * pair for g, h in self.gh]
        values = np.bincount(self._pos, np.concatenate(data), minlength=self.nnz)
        logdet = self._factor.factorize(values)
        return _SparseState(self._factor, logdet, beta)

    def _bt(self, st: _SparseState, v0: np.ndarray) -> np.ndarray:
        """B' v0 over the levels outside factor 0."""
        v = v0[self.c0]
        return sum(  # type: ignore[return-value]
            np.bincount(rc, b * v, self.qR) for rc, b in zip(self.rcols, st.weights, strict=True)
        )

    def solve(
        self, _: Any, st: _SparseState, A: np.ndarray, r0: np.ndarray, rR: np.ndarray
    ) -> np.ndarray:
        xR = st.factor.solve_vector(rR - self._bt(st, r0 / A))
        bx = sum(b * xR[rc] for rc, b in zip(self.rcols, st.weights, strict=True))
        x0 = (r0 - np.bincount(self.c0, bx, self.q0)) / A
        return np.concatenate([x0, xR])

    def inverse_parts(
        self, st: _SparseState, A: np.ndarray, sig: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """diag(H^-1) and each review's leverage m_i' H^-1 m_i, as the dense path's."""
        inv = st.factor.selected_inverse()
        value = st.factor.inverse_values
        k = len(self.rcols)
        Ai = 1.0 / A[self.c0]
        # G = A^-1 B S^-1 at (level of factor 0, level of factor g) of each review.
        Gi = [np.zeros(self.n) for _ in range(k)]
        for (g, h), where in zip(self.gh, self._at_pair, strict=True):
            Gi[g] += np.bincount(self.first, st.weights[h][self.second] * value(inv, where), self.n)
        Gi = [G * Ai for G in Gi]
        d0 = (
            1.0 / A
            + np.bincount(self.c0, sum(b * G for b, G in zip(st.weights, Gi, strict=True)), self.q0)
            / A
        )
        lev = sig[0] ** 2 * d0[self.c0]
        for g in range(k):
            lev -= 2.0 * sig[0] * sig[g + 1] * Gi[g]
        for (g, h), where in zip(self.gh, self._at_review, strict=True):
            lev += sig[g + 1] * sig[h + 1] * value(inv, where)
        return np.concatenate([d0, value(inv, self._at_diag)]), lev


# ------------------------------------------------------------------ optimisation


def _to_internal(psi: np.ndarray, k: int) -> np.ndarray:
    """Thresholds as the first one and log gaps, so every trial point is ordered."""
    out = psi.copy()
    out[1:k] = np.log(np.diff(psi[:k]))
    return out


def _from_internal(x: np.ndarray, k: int) -> np.ndarray:
    out = x.copy()
    out[:k] = x[0] + np.concatenate([[0.0], np.cumsum(np.exp(x[1:k]))])
    return out


def _internal_grad(x: np.ndarray, g: np.ndarray, k: int) -> np.ndarray:
    out = g.copy()
    tail = np.cumsum(g[:k][::-1])[::-1]  # sum over j >= i of dL/dtheta_j
    out[0] = tail[0]
    out[1:k] = tail[1:] * np.exp(x[1:k])
    return out


def _start(y: np.ndarray, K: int, p: int, G: int) -> np.ndarray:
    """Thresholds from the cumulative proportions, no effects, SDs of 1 (log 0)."""
    cum = np.cumsum(np.bincount(y, minlength=K))[:-1] / len(y)
    theta = np.log(cum / (1.0 - cum))
    return np.concatenate([theta, np.zeros(p), np.zeros(G)])


def _evaluate(prob: _Clmm, psi: np.ndarray) -> tuple[float, np.ndarray]:
    """-log L and its gradient; infinite (and a zero gradient) where either is not finite
    or ``H`` cannot be factorised, so the optimiser backs off from such a point."""
    try:
        v, g = prob.value_and_grad(psi)
    except np.linalg.LinAlgError:
        return math.inf, np.zeros_like(psi)
    if not (math.isfinite(v) and np.all(np.isfinite(g))):
        return math.inf, np.zeros_like(psi)
    return v, g


def _value(prob: _Clmm, psi: np.ndarray) -> float:
    """-log L alone, infinite where ``H`` cannot be factorised."""
    try:
        return prob.value(psi)
    except np.linalg.LinAlgError:
        return math.inf


def _hessian(prob: _Clmm, psi: np.ndarray, step: float = 1e-4) -> np.ndarray:
    """Central differences of the exact gradient, symmetrised."""
    m = len(psi)
    H = np.empty((m, m))
    for j in range(m):
        e = np.zeros(m)
        e[j] = step
        H[:, j] = (_evaluate(prob, psi + e)[1] - _evaluate(prob, psi - e)[1]) / (2 * step)
    return 0.5 * (H + H.T)


def _optimise(prob: _Clmm, psi0: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, list[str]]:
    k = prob.K - 1
    warnings: list[str] = []

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        v, g = _evaluate(prob, _from_internal(x, k))
        if not math.isfinite(v):
            return 1e300, np.zeros_like(x)
        return v, _internal_grad(x, g, k)

    res = optimize.minimize(
        fun,
        _to_internal(psi0, k),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 2000, "gtol": 1e-9, "ftol": 1e-15, "maxcor": 30},
    )
    psi = _from_internal(res.x, k)
    iterations = int(res.nit)
    # Newton polish in the natural parameters when L-BFGS stopped short; the last
    # Hessian is kept for the standard errors.  A log-SD heading to -inf is left where
    # L-BFGS put it: the Hessian is not positive definite there.
    H = _hessian(prob, psi)
    for _ in range(5):
        v, g = _evaluate(prob, psi)
        if not math.isfinite(v) or np.max(np.abs(g)) < 1e-7:
            break
        try:
            step = np.linalg.solve(H, g)
        except np.linalg.LinAlgError:
            break
        if not np.all(np.isfinite(step)) or np.linalg.eigvalsh(H).min() <= 0:
            break
        t = 1.0
        while t > 1e-4 and _value(prob, psi - t * step) > v:
            t *= 0.5
        if t <= 1e-4:
            break
        psi = psi - t * step
        H = _hessian(prob, psi)
        iterations += 1
    if not res.success:
        warnings.append(f"L-BFGS stopped: {res.message}")
    return psi, H, iterations, warnings


# ------------------------------------------------------------------ entry point


def fit_ordinal(
    df: pd.DataFrame,
    metric: str,
    *,
    baseline: str,
    condition_col: str = "condition",
    groups: Sequence[str] = ("reviewer_id", "idea_id"),
    engine: str = "auto",
) -> OrdinalResult:
    """Fit ``ordered(metric) ~ condition + (1|g)`` for each identifiable grouping factor.

    The grouping factors the data cannot identify are dropped with the reasons
    :func:`~studies.analysis.mixed.prepare_mixed_data` gives (``reviewer_id`` in a release
    without reviewer ids).  Scores must be whole numbers; only the levels observed get
    thresholds, as ``clmm`` does with an ordered factor of the scores.
    """
    t0 = time.perf_counter()
    prep = prepare_mixed_data(
        df, metric, baseline=baseline, condition_col=condition_col, groups=groups
    )
    if not prep.groups_used:
        raise ValueError(f"no grouping factor is identifiable for {metric}: nothing to fit")
    scores = prep.y
    if np.any(scores != np.round(scores)):
        raise ValueError(f"{metric} has non-integer scores: an ordinal model needs levels")
    observed = np.unique(scores)
    if len(observed) < 3:
        raise ValueError(f"{metric} has {len(observed)} observed level(s); need at least 3")
    y = np.searchsorted(observed, scores).astype(np.intp)
    codes, sizes = [], []
    for g in prep.groups_used:
        c, uniq = pd.factorize(prep.group_labels[g])
        codes.append(c.astype(np.intp))
        sizes.append(len(uniq))
    _check_size(metric, n=len(y), levels=len(observed), p=prep.X.shape[1] - 1, G=len(sizes))
    outside = sum(sizes) - max(sizes)
    if engine == "auto":
        engine = "dense" if outside <= DENSE_MAX_LEVELS else "sparse"
    if engine == "dense" and outside > MAX_DENSE_LEVELS:
        raise ValueError(
            f"{outside} levels outside the largest factor: more than the ordinal model's "
            f"dense limit of {MAX_DENSE_LEVELS}"
        )
    X = prep.X[:, 1:]  # the thresholds carry the intercept
    prob = _Clmm(y, X, codes, sizes, engine=engine)
    psi0 = _start(y, prob.K, prob.p, prob.G)
    psi, H, iterations, warns = _optimise(prob, psi0)
    value, grad = _evaluate(prob, psi)
    if not math.isfinite(value):
        raise ValueError(
            f"{metric}: the optimiser found no parameters with a finite likelihood "
            "(scores that separate the conditions completely can do this)"
        )
    return _result(
        prep=prep,
        metric=metric,
        baseline=baseline,
        observed=observed,
        prob=prob,
        psi=psi,
        value=value,
        grad=grad,
        H=H,
        iterations=iterations,
        warns=warns,
        seconds=time.perf_counter() - t0,
    )


def _check_size(metric: str, *, n: int, levels: int, p: int, G: int) -> None:
    """Refuse data too small for the model, saying why (`MIN_REVIEWS_PER_PARAMETER`)."""
    n_params = (levels - 1) + p + G
    needed = MIN_REVIEWS_PER_PARAMETER * n_params
    if n < needed:
        raise ValueError(
            f"too few reviews: {metric} has {n} review(s) for {n_params} parameters "
            f"({levels - 1} thresholds between its {levels} observed score levels, {p} "
            f"condition effect(s), {G} random-effect SD(s)); the ordinal model needs at "
            f"least {MIN_REVIEWS_PER_PARAMETER} reviews per parameter, here {needed}"
        )


def _level_name(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _result(
    *,
    prep: Any,
    metric: str,
    baseline: str,
    observed: np.ndarray,
    prob: _Clmm,
    psi: np.ndarray,
    value: float,
    grad: np.ndarray,
    H: np.ndarray,
    iterations: int,
    warns: list[str],
    seconds: float,
) -> OrdinalResult:
    k, p = prob.K - 1, prob.p
    theta, beta, sig = prob.unpack(psi)
    try:
        cov = np.linalg.inv(H)
        se = np.sqrt(np.where(np.diag(cov) > 0, np.diag(cov), np.nan))
    except np.linalg.LinAlgError:
        se = np.full(len(psi), np.nan)
        warns.append("the Hessian is singular: no standard errors")
    names = [_level_name(v) for v in observed]
    thresholds = [
        {"term": f"{names[j]}|{names[j + 1]}", "coef": float(theta[j]), "se": float(se[j])}
        for j in range(k)
    ]
    q = stats.norm.ppf(0.975)
    fixed = []
    for j, name in enumerate(prep.fixed_names[1:]):
        b, s = float(beta[j]), float(se[k + j])
        z = b / s
        fixed.append(
            {
                "term": name,
                "coef": b,
                "se": s,
                "z": z,
                "p": float(2 * stats.norm.sf(abs(z))),
                "ci_low": b - q * s,
                "ci_high": b + q * s,
                "odds_ratio": math.exp(b),
            }
        )
    groups = [prep.groups_used[i] for i in prob.order]
    sd = {g: float(s) for g, s in zip(groups, sig, strict=True)}
    boundary = [g for g, s in sd.items() if s < BOUNDARY_SD]
    max_grad = float(np.max(np.abs(grad[: k + p])))
    if boundary:
        warns.append(f"random-effect SD at the boundary (zero): {', '.join(boundary)}")
    return OrdinalResult(
        metric=metric,
        baseline=baseline,
        link="logit",
        levels=names,
        thresholds=thresholds,
        fixed=fixed,
        sd=sd,
        loglik=-float(value),
        n_obs=int(prob.n),
        n_levels=dict(zip(groups, prob.sizes, strict=True)),
        groups_used=list(prep.groups_used),
        groups_dropped=dict(prep.groups_dropped),
        converged=max_grad < 1e-4,
        boundary=boundary,
        max_gradient=max_grad,
        iterations=iterations,
        warnings=warns,
        fit_seconds=seconds,
        details={"schur": prob.engine},
    )
