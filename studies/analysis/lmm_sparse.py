"""Linear mixed models with crossed random intercepts, fitted the lme4 way.

The model is ``y = X beta + sum_j Z_j b_j + e`` with ``b_j ~ N(0, sigma^2 theta_j^2 I)`` and
``e ~ N(0, sigma^2 I)``: one random intercept per level of any number of crossed grouping
factors (topic, reviewer, idea, ...).  Following Bates, Maechler, Bolker & Walker (2015,
J. Stat. Softw. 67(1), "Fitting linear mixed-effects models using lme4") the relative
covariance factor ``Lambda_theta`` is diagonal (``theta_j = sigma_j / sigma`` repeated over
the levels of factor ``j``), ``beta`` and ``sigma^2`` are profiled out, and the REML or ML
deviance is minimised over ``theta >= 0`` alone.  The only expensive step per evaluation is
the Cholesky factorisation of ``A = Lambda' Z' Z Lambda + I``.

Why a Schur complement: with intercepts only, every diagonal block ``Z_j' Z_j`` of ``Z'Z``
is diagonal (level counts).  Eliminating the factor with the most levels (ideas) is
therefore free, and what is left to factorise is the much smaller
``S = Lambda_r (N_r - theta_0^2 M' diag(1 / (theta_0^2 n_0 + 1)) M) Lambda_r + I`` over the
remaining levels (reviewers, topics), with ``M = Z_0' Z_r``.  Its sparsity pattern does not
depend on ``theta``, so the values are rebuilt each evaluation by one ``bincount`` and the
symbolic work (ordering) is done once.  ``S`` is factorised densely (LAPACK) while small,
by CHOLMOD (``scikit-sparse``) when that is installed, and by SuperLU with a symmetric
fill-reducing ordering otherwise.

Nothing here imports Django: inputs are arrays, outputs a frozen dataclass.
"""

from __future__ import annotations

import heapq
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.linalg as la
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy import optimize, stats
from scipy.linalg.lapack import dpotrf as _dpotrf
from scipy.linalg.lapack import dpotrs as _dpotrs

try:  # CHOLMOD is optional: it only makes large crossed designs faster.
    from sksparse import cholmod as _cholmod  # type: ignore[import-not-found]
except Exception:  # pragma: no cover - depends on the machine
    _cholmod = None

__all__ = [
    "LMMFit",
    "StartResult",
    "available_backends",
    "design_matrix",
    "fit_lmm",
]

#: Below this many non-eliminated levels a dense LAPACK Cholesky beats sparse ones.
DENSE_MAX = 150
#: Above this many levels the hybrid factorisation is used even when CHOLMOD is present.
HYBRID_MIN = 2000
#: The hybrid factorisation eliminates levels sparsely while their degree is at most this.
HYBRID_TAU = 96
#: COBYQA trust-region radii over theta (lme4's bobyqa uses 0.2 and 2e-7 on its scale).
_TR_RADIUS = 0.5
_TR_FINAL = 1e-6
#: Studies with at least this many rows explore extra optimiser starts on a subsample.
EXPLORE_MIN_ROWS = 15_000
#: Two starts whose deviances differ by less than this reached the same optimum.
START_AGREE_TOL = 2e-3  # deviance = -2 loglik, so this is 1e-3 on the log-likelihood
#: A variance ratio theta_j below this is reported as a boundary (singular) fit.
BOUNDARY_TOL = 1e-4


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class StartResult:
    """One optimiser run: where it started, where it stopped, and how good that was."""

    theta0: list[float]
    theta: list[float]
    deviance: float
    loglik: float
    converged: bool
    n_evals: int
    message: str
    #: "full data"; "subsample" (explored on a subsample, shares start 1's fit); or
    #: "subsample, then full data" (explored, landed elsewhere, refined on all rows).
    stage: str = "full data"


@dataclass(frozen=True)
class LMMFit:
    """A fitted crossed random-intercept model (the best of several starts).

    ``loglik`` is what lme4's ``logLik()`` prints: the REML criterion for REML fits, the
    log-likelihood for ML fits.  ``se`` comes from ``sigma^2 (R_X' R_X)^{-1}`` at the
    optimum, which is lme4's ``vcov()``.  ``p`` is the two-sided Wald z p-value;
    ``df`` and ``p_satterthwaite`` hold Satterthwaite degrees of freedom and t p-values
    when they could be computed (``None`` otherwise).
    """

    fixed_names: list[str]
    coef: np.ndarray
    se: np.ndarray
    vcov: np.ndarray
    z: np.ndarray
    p: np.ndarray
    df: np.ndarray | None
    p_satterthwaite: np.ndarray | None
    theta: dict[str, float]
    sigma2: float
    variances: dict[str, float]
    loglik: float
    deviance: float
    reml: bool
    n_obs: int
    n_levels: dict[str, int]
    groups_used: list[str]
    groups_dropped: dict[str, str]
    converged: bool
    boundary: list[str]
    starts: list[StartResult]
    starts_agree: bool
    warnings: list[str]
    backend: str
    fit_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def residual_variance(self) -> float:
        return self.sigma2


# ------------------------------------------------------------------ design matrix


def design_matrix(
    df: pd.DataFrame,
    *,
    condition_col: str = "condition",
    baseline: str,
    covariates: Sequence[str] = (),
) -> tuple[np.ndarray, list[str]]:
    """Treatment-coded fixed-effects design: intercept, one column per non-baseline level.

    The baseline is explicit because the alphabetical default would make ``AI`` the
    reference in the Si et al. data.  Levels keep their order of first appearance after
    the baseline so that term names (``condition[AI]``) are stable across metrics.
    Numeric covariates are appended as they are (centre them yourself if you want the
    intercept to stay interpretable).
    """
    if condition_col not in df.columns:
        raise ValueError(f"no column {condition_col!r} in the data")
    cond = df[condition_col]
    if cond.isna().any():
        raise ValueError(f"{int(cond.isna().sum())} rows have no {condition_col}")
    levels = list(pd.unique(cond.astype(str)))
    if baseline not in levels:
        raise ValueError(
            f"the baseline condition {baseline!r} has no rows (conditions present: "
            f"{', '.join(sorted(levels)) or 'none'})"
        )
    others = [lv for lv in levels if lv != baseline]
    n = len(df)
    cols = [np.ones(n)]
    names = ["Intercept"]
    cond_s = cond.astype(str).to_numpy()
    for lv in others:
        cols.append((cond_s == lv).astype(float))
        names.append(f"{condition_col}[{lv}]")
    for cov in covariates:
        if cov not in df.columns:
            raise ValueError(f"no covariate column {cov!r} in the data")
        x = pd.to_numeric(df[cov], errors="coerce").to_numpy(dtype=float)
        if not np.all(np.isfinite(x)):
            raise ValueError(f"covariate {cov!r} has missing or non-numeric values")
        cols.append(x)
        names.append(cov)
    return np.column_stack(cols), names


# ------------------------------------------------------------------ factorisations


def available_backends() -> list[str]:
    """Factorisations usable for the reduced system on this machine."""
    return ["dense", "hybrid", "splu"] + (["cholmod"] if _cholmod is not None else [])


class _SymFactor:
    """Cholesky-like factorisation of the SPD Schur complement ``S``: logdet and solve.

    The sparsity pattern is fixed at construction (CSC, sorted, explicit zeros kept) and
    only ``data`` changes between calls, so symbolic analysis is paid once.
    """

    def __init__(self, pattern: sp.csc_matrix, backend: str) -> None:
        self.pattern = pattern
        self.backend = backend
        self._rows = pattern.indices
        self._cols = np.repeat(np.arange(pattern.shape[1]), np.diff(pattern.indptr))
        self._factor: Any = None
        self._perm: np.ndarray | None = None
        if backend == "cholmod":
            assert _cholmod is not None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._factor = _cholmod.analyze(pattern, mode="auto")
        elif backend == "splu":
            # One symmetric minimum-degree ordering, reused for every evaluation.
            self._perm = _symmetric_ordering(pattern)

    def factorize(self, data: np.ndarray) -> float:
        """Factorise ``S`` with the given values; return ``log det S``."""
        m = self.pattern.shape[0]
        if self.backend == "dense":
            dense = np.zeros((m, m))
            dense[self._rows, self._cols] = data
            c, lower = la.cho_factor(dense, lower=True, check_finite=False, overwrite_a=True)
            self._factor = (c, lower)
            return float(2.0 * np.log(np.diag(c)).sum())
        mat = sp.csc_matrix((data, self.pattern.indices, self.pattern.indptr), shape=(m, m))
        if self.backend == "cholmod":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._factor.cholesky_inplace(mat)
            return float(self._factor.logdet())
        perm = self._perm
        assert perm is not None
        pm = mat[perm][:, perm].tocsc()
        lu = spla.splu(
            pm,
            permc_spec="NATURAL",
            diag_pivot_thresh=0.0,
            options={"SymmetricMode": True},
        )
        self._factor = lu
        diag = lu.U.diagonal()
        if np.any(diag <= 0):
            raise np.linalg.LinAlgError("Schur complement not positive definite")
        return float(np.log(diag).sum())

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        if self.backend == "dense":
            return la.cho_solve(self._factor, rhs, check_finite=False)
        if self.backend == "cholmod":
            return np.asarray(self._factor(rhs))
        perm = self._perm
        assert perm is not None
        out = np.empty_like(rhs)
        out[perm] = self._factor.solve(np.ascontiguousarray(rhs[perm]))
        return out


class _HybridFactor:
    """Exact Cholesky of ``S``: sparse elimination of low-degree levels, then a dense core.

    In a random crossed design the reviewer graph left after eliminating ideas is an
    expander: any elimination order ends in a dense block over a large share of the
    reviewers (about 3,200 of 7,000 at 30,000 reviews), and that block costs almost all the
    flops.  So the symbolic phase runs an exact minimum-degree elimination and stops once
    every remaining level has more than ``tau`` neighbours; the remaining "core" (always
    including small factors such as topics, whose levels touch everything) is then one
    dense matrix.  Numerically, the sparse columns are eliminated level by level of their
    elimination tree (columns on one level never update each other, so each level is a
    handful of vectorised numpy operations), their rank-one updates are accumulated into
    the dense Schur complement, and the core is factorised by LAPACK ``dpotrf`` from the
    BLAS that numpy/scipy ship (a tuned OpenBLAS, several times faster than a reference
    BLAS under CHOLMOD's supernodal code).  Nothing is approximated: ``log det S`` and the
    solves are those of the exact Cholesky factor, in float64.
    """

    def __init__(self, pattern: sp.csc_matrix, tau: int | None = None) -> None:
        m = pattern.shape[0]
        self.m = m
        csr = pattern.tocsr()
        indptr, indices = csr.indptr, csr.indices
        adj: list[set[int] | None] = [
            set(indices[indptr[i] : indptr[i + 1]].tolist()) - {i} for i in range(m)
        ]
        if tau is None:
            tau = HYBRID_TAU
        # -- symbolic: exact minimum degree, stopped at degree > tau ----------------------
        heap = [(len(a), v) for v, a in enumerate(adj) if a is not None]
        heapq.heapify(heap)
        eliminated = np.zeros(m, dtype=bool)
        order: list[int] = []
        struct: list[list[int]] = []
        while heap:
            d, v = heapq.heappop(heap)
            av = adj[v]
            if eliminated[v] or av is None or d != len(av):
                continue
            if d > tau:
                break
            eliminated[v] = True
            order.append(v)
            struct.append(list(av))
            for u in av:
                au = adj[u]
                assert au is not None
                au.discard(v)
                au |= av
                au.discard(u)
                heapq.heappush(heap, (len(au), u))
            adj[v] = None
        del adj, heap
        s = len(order)
        core = np.flatnonzero(~eliminated)
        n_core = core.size
        self.n_sparse, self.n_core = s, n_core
        node_of_rank = np.concatenate([np.asarray(order, dtype=np.int64), core])
        rank = np.empty(m, dtype=np.int64)
        rank[node_of_rank] = np.arange(m)
        self.node_of_rank = node_of_rank
        # Column structure of L for the sparse columns, rows in rank order.
        deg = np.array([len(st) for st in struct], dtype=np.int64)
        nbr = (
            rank[np.fromiter((u for st in struct for u in st), dtype=np.int64, count=deg.sum())]
            if s
            else np.zeros(0, dtype=np.int64)
        )
        colptr = np.concatenate([[0], np.cumsum(deg + 1)])  # slot 0 of a column: diagonal
        owner_all = np.repeat(np.arange(s), deg)
        # sort each column's rows by rank
        key = owner_all * m + nbr
        srt = np.argsort(key, kind="stable")
        nbr = nbr[srt]
        self.nbr = nbr
        off_slot = np.arange(nbr.size) + np.repeat(np.arange(s) + 1, deg)  # skip diagonals
        diag_slot = colptr[:-1]
        self.n_slots = int(colptr[-1])
        slot_keys = np.empty(self.n_slots, dtype=np.int64)
        slot_keys[diag_slot] = np.arange(s) * m + np.arange(s)
        slot_keys[off_slot] = owner_all * m + nbr
        self._slot_keys = slot_keys  # sorted: column-major, rows ascending

        def target(row_rank: np.ndarray, col_rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """Positions of (row >= col) entries: sparse slots, or the core's flat index."""
            is_core = col_rank >= s
            pos = np.empty(row_rank.size, dtype=np.int64)
            k = col_rank[~is_core] * m + row_rank[~is_core]
            p = np.searchsorted(slot_keys, k)
            if p.size and not np.array_equal(slot_keys[np.minimum(p, slot_keys.size - 1)], k):
                raise AssertionError("entry outside the symbolic structure")
            pos[~is_core] = p
            pos[is_core] = (col_rank[is_core] - s) * n_core + (row_rank[is_core] - s)
            return pos, is_core

        # Where the values of S go.
        pr = rank[pattern.indices]
        pc = rank[np.repeat(np.arange(m), np.diff(pattern.indptr))]
        low = pr >= pc
        src = np.flatnonzero(low)
        pos, is_core = target(pr[low], pc[low])
        self._init_sparse = (src[~is_core], pos[~is_core])
        self._init_core = (src[is_core], pos[is_core])
        # Level schedule of the elimination tree (children before parents).
        level = np.zeros(s, dtype=np.int64)
        first = np.full(s, m, dtype=np.int64)
        if nbr.size:
            np.minimum.at(first, owner_all[srt], nbr)
        for v in range(s):
            par = first[v]
            if par < s and level[par] < level[v] + 1:
                level[par] = level[v] + 1
        self.levels: list[dict[str, np.ndarray]] = []
        off_start = colptr[:-1] - np.arange(s)  # start of column v's rows in ``nbr``
        for lv in range(int(level.max()) + 1 if s else 0):
            cols = np.flatnonzero(level == lv)
            dg = deg[cols]
            owner = np.repeat(np.arange(cols.size), dg)
            within = np.arange(owner.size) - np.repeat(np.cumsum(dg) - dg, dg)
            flat = np.repeat(off_start[cols], dg) + within  # index into nbr
            rows = nbr[flat]
            # all pairs (i >= j) within each column's structure
            npair = dg * (dg + 1) // 2
            base = np.repeat(np.cumsum(dg) - dg, npair)
            t = np.arange(npair.sum()) - np.repeat(np.cumsum(npair) - npair, npair)
            ii = np.floor((np.sqrt(8.0 * t + 1.0) - 1.0) / 2.0).astype(np.int64)
            ii += (ii + 1) * (ii + 2) // 2 <= t  # guard against rounding
            ii -= ii * (ii + 1) // 2 > t
            jj = t - ii * (ii + 1) // 2
            pi, pj = base + ii, base + jj
            tpos, tcore = target(rows[pi], rows[pj])
            entry: dict[str, np.ndarray] = {
                "cols": cols,
                "diag": diag_slot[cols],
                "off": off_slot[flat],
                "owner": owner,
                "rows": rows,
            }
            for tag, sel in (("s", ~tcore), ("c", tcore)):
                uq, inv = np.unique(tpos[sel], return_inverse=True)
                entry[f"pi_{tag}"], entry[f"pj_{tag}"] = pi[sel], pj[sel]
                entry[f"ut_{tag}"], entry[f"inv_{tag}"] = uq, inv
            uq, inv = np.unique(rows, return_inverse=True)
            entry["ut_rows"], entry["inv_rows"] = uq, inv
            self.levels.append(entry)
        self._vals = np.zeros(self.n_slots)
        self._core = np.zeros((n_core, n_core), order="F")

    def factorize(self, data: np.ndarray) -> float:
        vals = self._vals
        vals[:] = 0.0
        core = self._core
        core[...] = 0.0
        cflat = core.T.reshape(-1)  # view: index col * n_core + row
        src, pos = self._init_sparse
        vals[pos] = data[src]
        src, pos = self._init_core
        cflat[pos] = data[src]
        logdet = 0.0
        for e in self.levels:
            d = vals[e["diag"]]
            if np.any(d <= 0):
                raise np.linalg.LinAlgError("Schur complement not positive definite")
            sq = np.sqrt(d)
            vals[e["diag"]] = sq
            logdet += float(np.log(d).sum())
            lv = vals[e["off"]] / sq[e["owner"]]
            vals[e["off"]] = lv
            if e["ut_s"].size:
                vals[e["ut_s"]] -= np.bincount(
                    e["inv_s"], lv[e["pi_s"]] * lv[e["pj_s"]], minlength=e["ut_s"].size
                )
            if e["ut_c"].size:
                cflat[e["ut_c"]] -= np.bincount(
                    e["inv_c"], lv[e["pi_c"]] * lv[e["pj_c"]], minlength=e["ut_c"].size
                )
        if self.n_core:
            c, info = _dpotrf(core, lower=1, overwrite_a=1, clean=0)
            if info != 0:
                raise np.linalg.LinAlgError("Schur complement not positive definite")
            self._core = c
            logdet += float(2.0 * np.log(np.diag(c)).sum())
        return logdet

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        one = rhs.ndim == 1
        b = rhs.reshape(self.m, -1)[self.node_of_rank].astype(float, copy=True)
        vals, ncol = self._vals, b.shape[1]
        for e in self.levels:  # forward: L z = b
            z = b[e["cols"]] / vals[e["diag"]][:, None]
            b[e["cols"]] = z
            w = vals[e["off"]]
            for c in range(ncol):
                b[e["ut_rows"], c] -= np.bincount(
                    e["inv_rows"], w * z[e["owner"], c], minlength=e["ut_rows"].size
                )
        s = self.n_sparse
        if self.n_core:
            x_core, info = _dpotrs(self._core, b[s:], lower=1)
            if info != 0:  # pragma: no cover - dpotrs only fails on bad arguments
                raise np.linalg.LinAlgError("dense solve failed")
            b[s:] = x_core
        for e in reversed(self.levels):  # backward: L' x = z
            w = vals[e["off"]]
            nv = e["cols"].size
            acc = np.empty((nv, ncol))
            for c in range(ncol):
                acc[:, c] = np.bincount(e["owner"], w * b[e["rows"], c], minlength=nv)
            b[e["cols"]] = (b[e["cols"]] - acc) / vals[e["diag"]][:, None]
        out = np.empty_like(b)
        out[self.node_of_rank] = b
        return out[:, 0] if one else out


def _symmetric_ordering(pattern: sp.csc_matrix) -> np.ndarray:
    """A fill-reducing symmetric ordering from SuperLU's minimum degree on A'+A."""
    m = pattern.shape[0]
    probe = sp.csc_matrix(
        (np.ones_like(pattern.data), pattern.indices, pattern.indptr), shape=(m, m)
    ) + sp.eye(m, format="csc") * (m + 1.0)
    lu = spla.splu(
        probe.tocsc(),
        permc_spec="MMD_AT_PLUS_A",
        diag_pivot_thresh=0.0,
        options={"SymmetricMode": True},
    )
    return np.asarray(lu.perm_c)


# ------------------------------------------------------------------ the problem


class _Problem:
    """Precomputed cross-products and the profiled deviance as a function of theta."""

    def __init__(
        self,
        y: np.ndarray,
        X: np.ndarray,
        codes: list[np.ndarray],
        n_levels: list[int],
        reml: bool,
        backend: str,
    ) -> None:
        self.y = y
        self.X = X
        self.n, self.p = X.shape
        self.reml = reml
        self.k = len(codes)
        self.XtX = X.T @ X
        self.Xty = X.T @ y
        n = self.n
        # Factor 0 in this (internal) order has the most levels and is eliminated.
        self.order = sorted(range(self.k), key=lambda j: -n_levels[j])
        self.codes = [codes[j] for j in self.order]
        self.q = [n_levels[j] for j in self.order]
        self.offsets = np.concatenate([[0], np.cumsum(self.q)]).astype(int)
        qtot = int(self.offsets[-1])
        self.qtot = qtot
        if self.k == 0:
            self.backend = "none"
            return
        cols = np.concatenate(
            [c + off for c, off in zip(self.codes, self.offsets[:-1], strict=True)]
        )
        rows = np.tile(np.arange(n), self.k)
        self.Z = sp.csr_matrix((np.ones(n * self.k), (rows, cols)), shape=(n, qtot))
        ZtyX = self.Z.T @ np.column_stack([y, X])  # q x (1+p)
        self.Zty = ZtyX[:, 0]
        self.ZtX = ZtyX[:, 1:]
        self.fac_of_level = np.repeat(np.arange(self.k), self.q)

        q0 = self.q[0]
        self.q0 = q0
        self.n0 = np.bincount(self.codes[0], minlength=q0).astype(float)
        m = qtot - q0
        self.m = m
        if m == 0:
            self.backend = "none"
            return
        Z0 = self.Z[:, :q0]
        Zr = self.Z[:, q0:]
        self.M = (Z0.T @ Zr).tocsr()  # q0 x m counts
        self.M.sort_indices()
        Nr = (Zr.T @ Zr).tocsc()
        # Pattern of S = pattern(Nr) U pattern(M'M) (+ diagonal); values rebuilt per theta.
        MtM = (self.M.T @ self.M).tocsc()
        pat = (abs(Nr) + abs(MtM) + sp.eye(m, format="csc")).tocsc()
        pat.sort_indices()
        pat.data[:] = 0.0
        self.pattern = pat
        pos_lookup = _PatternIndex(pat)
        pr = pat.indices
        pc = np.repeat(np.arange(m), np.diff(pat.indptr))
        self.pat_rows, self.pat_cols = pr, pc
        self.pat_diag = pr == pc
        nr_coo = Nr.tocoo()
        self.nr_pos = pos_lookup.find(nr_coo.row, nr_coo.col)
        self.nr_val = nr_coo.data.astype(float)
        # Every pair (a, b) of levels sharing a row i of M contributes -w_i M_ia M_ib.
        indptr, idx, val = self.M.indptr, self.M.indices, self.M.data.astype(float)
        counts = np.diff(indptr)
        pair_i = np.repeat(np.arange(q0), counts**2)
        starts = np.repeat(indptr[:-1], counts**2)
        within = np.arange(pair_i.size) - np.repeat(np.cumsum(counts**2) - counts**2, counts**2)
        cnt_rep = np.repeat(counts, counts**2)
        ia = starts + within // np.maximum(cnt_rep, 1)
        ib = starts + within % np.maximum(cnt_rep, 1)
        self.pair_i = pair_i
        self.pair_pos = pos_lookup.find(idx[ia], idx[ib])
        self.pair_val = val[ia] * val[ib]
        if backend == "auto":
            if m <= DENSE_MAX:
                backend = "dense"
            elif m <= HYBRID_MIN and _cholmod is not None:
                backend = "cholmod"
            else:
                backend = "hybrid"
        if backend not in available_backends():
            raise ValueError(f"backend {backend!r} is not available here: {available_backends()}")
        self.backend = backend
        self.factor: _SymFactor | _HybridFactor = (
            _HybridFactor(pat) if backend == "hybrid" else _SymFactor(pat, backend)
        )

    # -- one evaluation -------------------------------------------------------------

    def lam(self, theta: np.ndarray) -> np.ndarray:
        return np.repeat(theta, self.q)

    def solve_parts(self, theta: np.ndarray) -> dict[str, Any]:
        """Penalised least squares at ``theta``: everything the deviance needs."""
        y, X = self.y, self.X
        if self.k == 0:
            logdet_a = 0.0
            rxtrx = self.XtX.copy()
            rhs = self.Xty.copy()
            x_y = x_x = None
        else:
            lam = self.lam(theta)
            b = lam[:, None] * np.column_stack([self.Zty, self.ZtX])  # q x (1+p)
            sol, logdet_a = self._solve_a(theta, lam, b)
            x_y, x_x = sol[:, 0], sol[:, 1:]
            rxtrx = self.XtX - b[:, 1:].T @ x_x
            rhs = self.Xty - b[:, 1:].T @ x_y
        rxtrx = 0.5 * (rxtrx + rxtrx.T)
        try:
            crx = la.cho_factor(rxtrx, lower=True, check_finite=False)
        except la.LinAlgError as exc:  # pragma: no cover - rank checked up front
            raise np.linalg.LinAlgError("fixed-effects cross-product is singular") from exc
        beta = la.cho_solve(crx, rhs, check_finite=False)
        resid = y - X @ beta
        if self.k == 0:
            u = np.zeros(0)
        else:
            u = x_y - x_x @ beta
            resid = resid - self.Z @ (self.lam(theta) * u)
        pwrss = float(resid @ resid + u @ u)
        logdet_rx = float(2.0 * np.log(np.diag(crx[0])).sum())
        return {
            "beta": beta,
            "u": u,
            "pwrss": pwrss,
            "logdet_a": logdet_a,
            "logdet_rx": logdet_rx,
            "rxtrx_factor": crx,
        }

    def _solve_a(
        self, theta: np.ndarray, lam: np.ndarray, b: np.ndarray
    ) -> tuple[np.ndarray, float]:
        """Solve ``A x = b`` by eliminating factor 0; also return ``log det A``."""
        q0 = self.q0
        t0 = theta[0]
        d0 = t0 * t0 * self.n0 + 1.0
        logdet = float(np.log(d0).sum())
        b0 = b[:q0]
        if self.m == 0:
            return b0 / d0[:, None], logdet
        lam_r = lam[q0:]
        w = t0 * t0 / d0
        g = np.bincount(self.nr_pos, weights=self.nr_val, minlength=self.pattern.nnz)
        g -= np.bincount(
            self.pair_pos, weights=w[self.pair_i] * self.pair_val, minlength=self.pattern.nnz
        )
        s_data = lam_r[self.pat_rows] * lam_r[self.pat_cols] * g
        s_data[self.pat_diag] += 1.0
        logdet += self.factor.factorize(s_data)
        # A_0r = t0 * M * diag(lam_r)
        t = b[q0:] - t0 * lam_r[:, None] * (self.M.T @ (b0 / d0[:, None]))
        x_r = self.factor.solve(t)
        x0 = (b0 - t0 * (self.M @ (lam_r[:, None] * x_r))) / d0[:, None]
        return np.vstack([x0, x_r]), logdet

    def deviance(self, theta: np.ndarray) -> float:
        parts = self.solve_parts(np.abs(np.asarray(theta, dtype=float)))
        return self._deviance_from(parts)

    def _deviance_from(self, parts: Mapping[str, Any]) -> float:
        n, p = self.n, self.p
        pw = parts["pwrss"]
        if self.reml:
            nmp = n - p
            return (
                parts["logdet_a"]
                + parts["logdet_rx"]
                + nmp * (1.0 + math.log(2.0 * math.pi * pw / nmp))
            )
        return parts["logdet_a"] + n * (1.0 + math.log(2.0 * math.pi * pw / n))

    def deviance_unprofiled(self, theta: np.ndarray, sigma: float) -> float:
        """REML/ML deviance at (theta, sigma), sigma not profiled (for Satterthwaite)."""
        parts = self.solve_parts(np.abs(theta))
        s2 = sigma * sigma
        dof = self.n - self.p if self.reml else self.n
        extra = parts["logdet_rx"] if self.reml else 0.0
        return parts["logdet_a"] + extra + dof * math.log(2 * math.pi * s2) + parts["pwrss"] / s2


class _PatternIndex:
    """Map (row, col) pairs to positions in a CSC pattern's data array."""

    def __init__(self, pat: sp.csc_matrix) -> None:
        m = pat.shape[0]
        cols = np.repeat(np.arange(pat.shape[1]), np.diff(pat.indptr))
        self._keys = cols.astype(np.int64) * m + pat.indices.astype(np.int64)
        self._m = m  # keys are sorted because CSC is column-major with sorted indices

    def find(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        keys = np.asarray(cols, dtype=np.int64) * self._m + np.asarray(rows, dtype=np.int64)
        pos = np.searchsorted(self._keys, keys)
        if pos.size and not np.array_equal(self._keys[np.minimum(pos, self._keys.size - 1)], keys):
            raise AssertionError("entry outside the symbolic pattern")
        return pos


# ------------------------------------------------------------------ fitting


def _check_inputs(y: np.ndarray, X: np.ndarray, fixed_names: Sequence[str]) -> None:
    n = y.shape[0]
    if n == 0:
        raise ValueError("no observations to fit")
    if X.shape[0] != n:
        raise ValueError(f"X has {X.shape[0]} rows but y has {n}")
    if not np.all(np.isfinite(y)):
        raise ValueError("the response has missing or non-finite values; drop those rows first")
    if not np.all(np.isfinite(X)):
        raise ValueError("the fixed-effects design has missing or non-finite values")
    if np.ptp(y) == 0:
        raise ValueError(f"all {n} scores are equal ({y[0]:g}): there is no variation to model")
    p = X.shape[1]
    for j in range(p):
        if not np.any(X[:, j]):
            raise ValueError(
                f"fixed effect {fixed_names[j]!r} is zero in every row (a condition with no rows?)"
            )
    rank = np.linalg.matrix_rank(X)
    if rank < p:
        # Name the columns that a pivoted QR leaves out: those are the redundant ones.
        _, _, piv = la.qr(X, mode="economic", pivoting=True)
        dropped = [fixed_names[j] for j in sorted(piv[rank:])]
        raise ValueError(
            f"the fixed effects are perfectly collinear (rank {rank} < {p} columns); "
            f"redundant: {', '.join(dropped)}"
        )


def fit_lmm(
    y: np.ndarray | Sequence[float],
    X: np.ndarray,
    groups: Mapping[str, Sequence[Any] | np.ndarray | pd.Series],
    *,
    fixed_names: Sequence[str] | None = None,
    reml: bool = True,
    n_starts: int = 3,
    seed: int = 0,
    backend: str = "auto",
    satterthwaite: bool | None = None,
) -> LMMFit:
    """Fit ``y ~ X + (1|g_1) + ... + (1|g_k)`` by (RE)ML with several optimiser starts.

    ``groups`` maps each factor's name to its level label per row.  A factor with a single
    level, or with one observation per level, cannot be told apart from the intercept or
    the residual; it is dropped with a warning (recorded in ``groups_dropped``) rather than
    refused, because the rest of the model is still well defined.

    The first start is lme4's (``theta = 1``); further starts are drawn log-uniformly in
    [0.05, 3] from ``seed``.  The best deviance wins; ``starts_agree`` says whether every
    start ended within 1e-3 log-likelihood units of it.

    ``satterthwaite`` (default: when the data have at most 20,000 rows) adds
    Satterthwaite degrees of freedom from a finite-difference Hessian of the unprofiled
    deviance, as lmerTest does; it costs about ``2 (k+1)^2`` extra evaluations.
    """
    t_start = time.perf_counter()
    y = np.asarray(y, dtype=float).ravel()
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError("X must be a 2-d design matrix")
    names = list(fixed_names) if fixed_names is not None else [f"x{j}" for j in range(X.shape[1])]
    if len(names) != X.shape[1]:
        raise ValueError("fixed_names must name every column of X")
    _check_inputs(y, X, names)
    n, p = X.shape
    notes: list[str] = []

    codes: list[np.ndarray] = []
    levels: list[int] = []
    used: list[str] = []
    dropped: dict[str, str] = {}
    for name, labels in groups.items():
        lab = pd.Series(np.asarray(labels, dtype=object))
        if len(lab) != n:
            raise ValueError(f"grouping factor {name!r} has {len(lab)} labels for {n} rows")
        if lab.isna().any():
            raise ValueError(f"grouping factor {name!r} has {int(lab.isna().sum())} missing labels")
        c, uniq = pd.factorize(lab, sort=True)
        if len(uniq) < 2:
            dropped[name] = "only one level: its variance is confounded with the intercept"
        elif len(uniq) >= n:
            dropped[name] = (
                "one observation per level: its variance is confounded with the residual"
            )
        else:
            codes.append(c.astype(np.int64))
            levels.append(len(uniq))
            used.append(name)
    for name, reason in dropped.items():
        notes.append(f"grouping factor {name!r} dropped: {reason}")
    k = len(used)
    n_params = p + k + 1
    if n <= n_params:
        raise ValueError(
            f"fewer rows than parameters: {n} rows for {p} fixed effects, {k} variance "
            f"component(s) and the residual variance"
        )
    if n - p < 1 and reml:
        raise ValueError("REML needs more rows than fixed effects")
    if k == 0:
        notes.append("no grouping factor left: this is an ordinary least-squares fit")

    prob = _Problem(y, X, codes, levels, reml, backend)
    # Map internal (sorted) order back to the caller's order.
    inv = np.empty(k, dtype=int)
    inv[prob.order] = np.arange(k)

    def to_internal(theta_user: np.ndarray) -> np.ndarray:
        return np.asarray(theta_user, dtype=float)[prob.order]

    rng = np.random.default_rng(seed)
    starts_user: list[np.ndarray] = [np.ones(k)]
    for _ in range(max(0, n_starts - 1)):
        starts_user.append(np.exp(rng.uniform(math.log(0.05), math.log(3.0), k)))

    runs: list[StartResult] = []
    best_theta_int: np.ndarray | None = None
    best_dev = math.inf
    sub = (
        _subsample_problem(y, X, codes, levels, prob.order[0], reml, rng)
        if k > 0 and len(starts_user) > 1 and n >= EXPLORE_MIN_ROWS
        else None
    )
    explore_note: dict[str, Any] = {}
    if sub is not None:
        # Large study: every start is first run on a subsample (cheap: the dense core of
        # the factorisation grows with the cube of the study size).  Starts that reach the
        # same subsample optimum as the first start share its full-data fit; any start
        # that lands elsewhere is refined on the full data from where it stopped.
        sub_res = [_optimise(sub, np.asarray(th0, dtype=float)[sub.order]) for th0 in starts_user]
        for r in sub_res:  # subsample's internal factor order -> the full problem's
            th_user = np.empty(k)
            th_user[sub.order] = np.abs(r["theta"])
            r["theta"] = to_internal(th_user)
        explore_note = {
            "rows": int(sub.n),
            "deviances": [float(r["deviance"]) for r in sub_res],
            "evaluations": [int(r["n_evals"]) for r in sub_res],
        }
        plan: list[tuple[np.ndarray, np.ndarray, str, float, bool]] = []
        for i, th0 in enumerate(starts_user):
            same = abs(sub_res[i]["deviance"] - sub_res[0]["deviance"]) <= START_AGREE_TOL
            if i == 0:
                plan.append((th0, to_internal(th0), "full data", _TR_RADIUS, False))
            elif same:
                plan.append((th0, sub_res[i]["theta"], "subsample", 0.0, True))
            else:
                start = np.maximum(np.abs(sub_res[i]["theta"]), 1e-3)
                plan.append((th0, start, "subsample, then full data", 0.1, False))
    else:
        plan = [
            (th0, to_internal(th0), "full data", _TR_RADIUS, False)
            for th0 in (starts_user if k > 0 else [np.zeros(0)])
        ]
    first: dict[str, Any] | None = None
    for i, (th0, start_int, stage, radius, shared) in enumerate(plan):
        if shared:
            assert first is not None
            res = dict(first)
            res["n_evals"] = explore_note["evaluations"][i]
            res["message"] = (
                f"run on a {sub.n if sub else 0}-row subsample: same optimum as start 1 "
                "there, so it shares start 1's full-data fit"
            )
        else:
            res = _optimise(prob, start_int, radius=radius)
            if sub is not None:
                res["n_evals"] += explore_note["evaluations"][i]
        if i == 0:
            first = res
        theta_user = np.abs(res["theta"])[inv] if k else np.zeros(0)
        runs.append(
            StartResult(
                theta0=[float(v) for v in th0],
                theta=[float(v) for v in theta_user],
                deviance=float(res["deviance"]),
                loglik=float(-0.5 * res["deviance"]),
                converged=bool(res["converged"]),
                n_evals=int(res["n_evals"]),
                message=str(res["message"]),
                stage=stage,
            )
        )
        if res["deviance"] < best_dev:
            best_dev = float(res["deviance"])
            best_theta_int = np.abs(res["theta"])
    if sub is not None:
        n_same = sum(1 for r in runs[1:] if r.stage == "subsample")
        notes.append(
            f"{len(runs) - 1} extra optimiser start(s) were explored on a random "
            f"{sub.n}-row subsample (all reviews of a quarter of the "
            f"{[*groups][prob.order[0]]!r} levels); {n_same} reached the first start's "
            "optimum there and share its full-data fit"
        )
    assert best_theta_int is not None
    agree = all(abs(r.deviance - best_dev) <= START_AGREE_TOL for r in runs)
    if not agree:
        spread = max(r.deviance for r in runs) - best_dev
        notes.append(
            f"optimiser starts disagree (log-likelihoods span {spread / 2:.4g}); "
            f"the best of {len(runs)} is kept"
        )
    best_run = min(runs, key=lambda r: r.deviance)
    converged = best_run.converged
    if not converged:
        notes.append(f"the best start did not report convergence: {best_run.message}")

    parts = prob.solve_parts(best_theta_int)
    dof = n - p if reml else n
    sigma2 = parts["pwrss"] / dof
    crx = parts["rxtrx_factor"]
    vcov = sigma2 * la.cho_solve(crx, np.eye(p), check_finite=False)
    beta = parts["beta"]
    se = np.sqrt(np.diag(vcov))
    z = beta / se
    pz = 2.0 * stats.norm.sf(np.abs(z))
    theta_user = best_theta_int[inv] if k else np.zeros(0)
    variances = {name: float(sigma2 * theta_user[j] ** 2) for j, name in enumerate(used)}
    boundary = [name for j, name in enumerate(used) if theta_user[j] < BOUNDARY_TOL]
    for name in boundary:
        notes.append(f"boundary (singular) fit: the {name!r} variance is estimated as 0")

    do_satt = satterthwaite if satterthwaite is not None else n <= 20_000
    df_arr: np.ndarray | None = None
    p_t: np.ndarray | None = None
    if do_satt and k > 0:
        try:
            df_arr = _satterthwaite(
                prob, best_theta_int, math.sqrt(sigma2), boundary_mask=best_theta_int < BOUNDARY_TOL
            )
            p_t = 2.0 * stats.t.sf(np.abs(z), df_arr)
        except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
            notes.append(f"Satterthwaite df unavailable ({exc}); p-values are Wald z")
            df_arr = p_t = None

    return LMMFit(
        fixed_names=names,
        coef=beta,
        se=se,
        vcov=vcov,
        z=z,
        p=pz,
        df=df_arr,
        p_satterthwaite=p_t,
        theta={name: float(theta_user[j]) for j, name in enumerate(used)},
        sigma2=float(sigma2),
        variances=variances,
        loglik=float(-0.5 * best_dev),
        deviance=float(best_dev),
        reml=reml,
        n_obs=n,
        n_levels={name: levels[j] for j, name in enumerate(used)},
        groups_used=used,
        groups_dropped=dropped,
        converged=converged,
        boundary=boundary,
        starts=runs,
        starts_agree=agree,
        warnings=notes,
        backend=prob.backend,
        fit_seconds=time.perf_counter() - t_start,
        extra={"explore": explore_note} if explore_note else {},
    )


def _subsample_problem(
    y: np.ndarray,
    X: np.ndarray,
    codes: list[np.ndarray],
    levels: list[int],
    largest: int,
    reml: bool,
    rng: np.random.Generator,
    fraction: float = 0.25,
) -> _Problem | None:
    """The same model on all rows of a random ``fraction`` of the largest factor's levels.

    Returns ``None`` when the subsample would be degenerate (a factor left with one
    level, a fixed effect lost, too few rows), in which case every start runs on all rows.
    """
    keep_level = rng.random(levels[largest]) < fraction
    rows = keep_level[codes[largest]]
    n_sub = int(rows.sum())
    if n_sub <= X.shape[1] + len(codes) + 10:
        return None
    Xs = X[rows]
    if np.linalg.matrix_rank(Xs) < X.shape[1] or np.ptp(y[rows]) == 0:
        return None
    sub_codes: list[np.ndarray] = []
    sub_levels: list[int] = []
    for c in codes:
        uniq, cs = np.unique(c[rows], return_inverse=True)
        if uniq.size < 2 or uniq.size >= n_sub:
            return None
        sub_codes.append(cs.astype(np.int64))
        sub_levels.append(int(uniq.size))
    return _Problem(y[rows], Xs, sub_codes, sub_levels, reml, "auto")


def _optimise(prob: _Problem, theta0: np.ndarray, *, radius: float = 0.5) -> dict[str, Any]:
    """Minimise the profiled deviance over theta >= 0 from one start.

    COBYQA (Ragonneau & Zhang's successor of Powell's BOBYQA, the optimiser lme4 uses) is
    derivative-free and models the deviance quadratically.  That matters: the deviance
    depends on theta only through theta^2, so its gradient is exactly zero on the bound
    theta_j = 0 and a gradient method (L-BFGS-B) that steps onto the bound stops there
    "converged" even when the optimum is interior -- the same trap statsmodels falls into
    on the Si et al. data.  Convergence is then checked the way lme4 does: the Newton step
    implied by a central-difference gradient and curvature must be tiny.
    """
    k = theta0.size
    if k == 0:
        dev = prob.deviance(theta0)
        return {
            "theta": theta0,
            "deviance": dev,
            "converged": True,
            "n_evals": 1,
            "message": "no variance parameters",
        }
    n_evals = 0

    def f(th: np.ndarray) -> float:
        nonlocal n_evals
        n_evals += 1
        return prob.deviance(th)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = optimize.minimize(
                f,
                np.maximum(theta0, 1e-3),
                method="COBYQA",
                bounds=optimize.Bounds(np.zeros(k), np.full(k, np.inf)),
                options={
                    "maxfev": 300 * k,
                    "initial_tr_radius": radius,
                    "final_tr_radius": _TR_FINAL,
                },
            )
    except (np.linalg.LinAlgError, FloatingPointError, ValueError) as exc:
        return {
            "theta": theta0,
            "deviance": math.inf,
            "converged": False,
            "n_evals": n_evals,
            "message": f"numerical failure: {exc}",
        }
    theta = np.clip(np.asarray(res.x, dtype=float), 0.0, None)
    dev = float(f(theta))
    # Central differences straddle the bound legitimately: the deviance is even in theta_j.
    worst = 0.0
    for j in range(k):
        h = 1e-4 * max(1.0, theta[j])
        e = np.zeros(k)
        e[j] = h
        fp, fm = f(theta + e), f(theta - e)
        g = (fp - fm) / (2 * h)
        curv = (fp - 2 * dev + fm) / (h * h)
        if theta[j] <= 0 and curv >= 0:
            continue  # a minimum on the bound: the zero gradient is genuine
        step = abs(g) / curv if curv > 0 else math.inf
        worst = max(worst, min(abs(g), step))
    converged = bool(res.success) and worst < 2e-3
    message = str(res.message)
    if bool(res.success) and not converged:
        message += f" (but the gradient check fails: scaled gradient {worst:.2g})"
    return {
        "theta": theta,
        "deviance": dev,
        "converged": converged,
        "n_evals": n_evals,
        "message": message,
    }


def _satterthwaite(
    prob: _Problem, theta: np.ndarray, sigma: float, *, boundary_mask: np.ndarray
) -> np.ndarray:
    """Satterthwaite df for each fixed coefficient, lmerTest-style.

    The variance parameters are ``(theta, sigma)``; their asymptotic covariance is
    ``2 H^{-1}`` with ``H`` the Hessian of the unprofiled deviance, and the gradient of
    ``Var(beta_j) = sigma^2 [(R_X'R_X)^{-1}]_jj`` is taken by central differences.  Boundary
    parameters are held fixed (as if known), the usual convention.
    """
    free = np.flatnonzero(~boundary_mask)
    par0 = np.concatenate([theta[free], [sigma]])
    npar = par0.size

    def unpack(par: np.ndarray) -> tuple[np.ndarray, float]:
        th = theta.copy()
        th[free] = par[:-1]
        return th, float(par[-1])

    def dev(par: np.ndarray) -> float:
        th, s = unpack(par)
        return prob.deviance_unprofiled(th, s)

    def vbeta(par: np.ndarray) -> np.ndarray:
        th, s = unpack(par)
        crx = prob.solve_parts(np.abs(th))["rxtrx_factor"]
        return s * s * np.diag(la.cho_solve(crx, np.eye(prob.p), check_finite=False))

    h = 1e-4 * np.maximum(1.0, np.abs(par0))
    hess = np.empty((npar, npar))
    f0 = dev(par0)
    for i in range(npar):
        for j in range(i, npar):
            if i == j:
                e = np.zeros(npar)
                e[i] = h[i]
                val = (dev(par0 + e) - 2 * f0 + dev(par0 - e)) / h[i] ** 2
            else:
                ei = np.zeros(npar)
                ej = np.zeros(npar)
                ei[i] = h[i]
                ej[j] = h[j]
                val = (
                    dev(par0 + ei + ej)
                    - dev(par0 + ei - ej)
                    - dev(par0 - ei + ej)
                    + dev(par0 - ei - ej)
                ) / (4 * h[i] * h[j])
            hess[i, j] = hess[j, i] = val
    cov_par = 2.0 * np.linalg.inv(hess)
    jac = np.empty((prob.p, npar))
    for i in range(npar):
        e = np.zeros(npar)
        e[i] = h[i]
        jac[:, i] = (vbeta(par0 + e) - vbeta(par0 - e)) / (2 * h[i])
    v = vbeta(par0)
    denom = np.einsum("ji,ik,jk->j", jac, cov_par, jac)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = 2.0 * v**2 / denom
    return np.where(np.isfinite(df) & (df > 0), df, np.nan)
