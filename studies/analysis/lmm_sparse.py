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
symbolic work (ordering) is done once.  The smallest factor (topics), when it has few
levels, is profiled out exactly inside each evaluation (see :class:`_Problem`), so the
optimiser searches two variance ratios instead of three.  The reviewer block of ``S`` is
factorised densely (LAPACK) while small, by CHOLMOD (``scikit-sparse``) when that is
installed, by an exact sparse-then-dense hybrid for large designs, and by SuperLU with a
symmetric fill-reducing ordering as a fallback.

Large studies (``EXPLORE_MIN_ROWS``) are first fitted on a subsample; the full-data fit
then starts from that optimum and is finished by Newton's method on central differences
(about 12 factorisations), with COBYQA as the fallback.

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
from scipy.linalg.lapack import dpotri as _dpotri
from scipy.linalg.lapack import dpotrs as _dpotrs
from scipy.sparse import csgraph

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
#: Trust-region radius for a full-data run that starts from a subsample optimum.
_PILOT_RADIUS = 0.1
#: Grouping factors with at most this many levels (topics, venues) are profiled out
#: exactly inside every evaluation instead of being searched by the optimiser.
SMALL_MAX = 64
#: Studies with at least this many rows run every start on a subsample first.
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
        s = len(order)
        core = np.flatnonzero(~eliminated)
        n_core = core.size
        # The core splits into independent dense blocks when its graph (fill included)
        # does: reviewers who stay inside one topic give one block per topic, and the
        # factorisation costs the sum of the blocks' cubes instead of the core's cube.
        local = np.full(m, -1, dtype=np.int64)
        local[core] = np.arange(n_core)
        core_deg = np.fromiter((len(adj[v] or ()) for v in core), dtype=np.int64, count=n_core)
        ci = np.repeat(np.arange(n_core), core_deg)
        cj = local[
            np.fromiter(
                (u for v in core for u in adj[v] or ()), dtype=np.int64, count=int(core_deg.sum())
            )
        ]
        del adj, heap
        n_blocks, comp = csgraph.connected_components(
            sp.coo_matrix((np.ones(ci.size), (ci, cj)), shape=(n_core, n_core)), directed=False
        )
        by_block = np.argsort(comp, kind="stable")
        core = core[by_block]
        comp = comp[by_block]
        sizes = np.bincount(comp, minlength=n_blocks).astype(np.int64)
        starts = np.cumsum(sizes) - sizes
        bases = np.cumsum(sizes**2) - sizes**2
        self.block_sizes = sizes
        self._blocks = [
            (int(o), int(n), int(b)) for o, n, b in zip(starts, sizes, bases, strict=True)
        ]
        self.n_sparse, self.n_core = s, n_core
        node_of_rank = np.concatenate([np.asarray(order, dtype=np.int64), core])
        rank = np.empty(m, dtype=np.int64)
        rank[node_of_rank] = np.arange(m)
        self.node_of_rank = node_of_rank
        self.rank = rank
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
            rc, cc = row_rank[is_core] - s, col_rank[is_core] - s
            blk = comp[cc]
            if not np.array_equal(comp[rc], blk):
                raise AssertionError("core entry between two independent blocks")
            off, size = starts[blk], sizes[blk]
            pos[is_core] = bases[blk] + (cc - off) * size + (rc - off)
            return pos, is_core

        self._target = target
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
        self._fwd: list[tuple[sp.csr_matrix, np.ndarray]] = []
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
            }
            for tag, sel in (("s", ~tcore), ("c", tcore)):
                uq, inv = np.unique(tpos[sel], return_inverse=True)
                entry[f"pi_{tag}"], entry[f"pj_{tag}"] = pi[sel], pj[sel]
                entry[f"ut_{tag}"], entry[f"inv_{tag}"] = uq, inv
            uq, inv = np.unique(rows, return_inverse=True)
            entry["ut_rows"], entry["inv_rows"] = uq, inv
            # The level's columns of L as a sparse (rows touched x columns) matrix, for
            # solves with many right-hand sides; ``perm`` maps its data to ``off`` order.
            numbered = sp.csr_matrix(
                (np.arange(1, owner.size + 1, dtype=float), (inv, owner)),
                shape=(uq.size, cols.size),
            )
            self._fwd.append((numbered, numbered.data.astype(np.int64) - 1))
            self.levels.append(entry)
        self._vals = np.zeros(self.n_slots)
        self._solve_cache: list[tuple[np.ndarray, np.ndarray]] | None = None
        # The dense blocks, one after the other, each column-major (LAPACK's layout).
        self._buf = np.zeros(int((sizes**2).sum()))

    def _block(self, i: int) -> np.ndarray:
        _, n, base = self._blocks[i]
        return self._buf[base : base + n * n].reshape(n, n, order="F")

    def factorize(self, data: np.ndarray) -> float:
        self._solve_cache = None
        vals = self._vals
        vals[:] = 0.0
        cflat = self._buf
        cflat[:] = 0.0
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
        for e, (fwd, perm) in zip(self.levels, self._fwd, strict=True):
            fwd.data = vals[e["off"]][perm]
        for i in range(len(self._blocks)):
            block = self._block(i)
            c, info = _dpotrf(block, lower=1, overwrite_a=1, clean=0)
            if info != 0:
                raise np.linalg.LinAlgError("Schur complement not positive definite")
            if not np.shares_memory(c, block):  # pragma: no cover - f2py copied it
                block[...] = c
            logdet += float(2.0 * np.log(np.diag(c)).sum())
        return logdet

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        one = rhs.ndim == 1
        b = rhs.reshape(self.m, -1)[self.node_of_rank].astype(float, copy=True)
        vals = self._vals
        for e, (fwd, _) in zip(self.levels, self._fwd, strict=True):  # forward: L z = b
            z = b[e["cols"]] / vals[e["diag"]][:, None]
            b[e["cols"]] = z
            b[e["ut_rows"]] -= fwd @ z
        s = self.n_sparse
        for i, (o, n, _) in enumerate(self._blocks):
            x_core, info = _dpotrs(self._block(i), b[s + o : s + o + n], lower=1)
            if info != 0:  # pragma: no cover - dpotrs only fails on bad arguments
                raise np.linalg.LinAlgError("dense solve failed")
            b[s + o : s + o + n] = x_core
        for e, (fwd, _) in zip(  # backward: L' x = z
            reversed(self.levels), reversed(self._fwd), strict=True
        ):
            acc = fwd.T @ b[e["ut_rows"]]
            b[e["cols"]] = (b[e["cols"]] - acc) / vals[e["diag"]][:, None]
        out = np.empty_like(b)
        out[self.node_of_rank] = b
        return out[:, 0] if one else out

    def solve_vector(self, rhs: np.ndarray) -> np.ndarray:
        """:meth:`solve` for one right-hand side, by ``bincount`` over each level's entries
        (no sparse-matrix products: a deep elimination tree has hundreds of levels, and
        each product's overhead would dwarf its work)."""
        b = rhs[self.node_of_rank].astype(float, copy=True)
        vals = self._vals
        cached = self._solve_cache
        if cached is None:
            cached = [(vals[e["diag"]], vals[e["off"]]) for e in self.levels]
            self._solve_cache = cached
        for e, (d, lv) in zip(self.levels, cached, strict=True):  # forward: L z = b
            z = b[e["cols"]] / d
            b[e["cols"]] = z
            b[e["ut_rows"]] -= np.bincount(e["inv_rows"], lv * z[e["owner"]], e["ut_rows"].size)
        s = self.n_sparse
        for i, (o, n, _) in enumerate(self._blocks):
            x_core, info = _dpotrs(self._block(i), b[s + o : s + o + n], lower=1)
            if info != 0:  # pragma: no cover - dpotrs only fails on bad arguments
                raise np.linalg.LinAlgError("dense solve failed")
            b[s + o : s + o + n] = x_core
        for e, (d, lv) in zip(reversed(self.levels), reversed(cached), strict=True):
            acc = np.bincount(e["owner"], lv * b[e["ut_rows"]][e["inv_rows"]], d.size)
            b[e["cols"]] = (b[e["cols"]] - acc) / d
        out = np.empty_like(b)
        out[self.node_of_rank] = b
        return out

    def inverse_positions(self, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, ...]:
        """Where :meth:`selected_inverse` leaves the ``(rows, cols)`` entries of ``S^-1``.

        Only entries inside the filled pattern are kept (every entry of ``S`` is); the
        answer is for :meth:`inverse_values` and does not change with the values of ``S``.
        """
        r, c = self.rank[np.asarray(rows)], self.rank[np.asarray(cols)]
        pos, is_core = self._target(np.maximum(r, c), np.minimum(r, c))
        return np.flatnonzero(~is_core), pos[~is_core], np.flatnonzero(is_core), pos[is_core]

    def selected_inverse(self) -> tuple[np.ndarray, np.ndarray]:
        """``S^-1`` on the filled pattern of the last :meth:`factorize`, exactly.

        Takahashi's recurrences: with ``S = L L'``, ``u = L[struct(j), j] / L[j, j]`` and
        columns taken from the last to the first, ``Z[i, j] = -sum_k Z[i, k] u_k`` over
        ``k`` in ``struct(j)`` and ``Z[j, j] = 1 / L[j, j]^2 + u' Z[struct(j), j]``; every
        ``Z[i, k]`` needed lies in the pattern and is already known.  The dense core is
        inverted by LAPACK (``dpotri``).  The work is about that of the factorisation.
        """
        vals = self._vals
        zs = np.zeros(self.n_slots)
        zc = self._buf.copy()
        for _, n, base in self._blocks:
            block = zc[base : base + n * n].reshape(n, n, order="F")
            inv, info = _dpotri(block, lower=1, overwrite_c=1)
            if info != 0:  # pragma: no cover - the factor was checked by dpotrf
                raise np.linalg.LinAlgError("dense inverse failed")
            if not np.shares_memory(inv, block):  # pragma: no cover - f2py copied it
                block[...] = inv
        for e in reversed(self.levels):
            d = vals[e["diag"]]
            u = vals[e["off"]] / d[e["owner"]]
            acc = np.zeros(u.size)
            for tag, z_all in (("s", zs), ("c", zc)):
                if not e[f"ut_{tag}"].size:
                    continue
                z = z_all[e[f"ut_{tag}"]][e[f"inv_{tag}"]]
                pi, pj = e[f"pi_{tag}"], e[f"pj_{tag}"]
                acc += np.bincount(pi, z * u[pj], minlength=u.size)
                off = pi != pj
                acc += np.bincount(pj[off], z[off] * u[pi[off]], minlength=u.size)
            zs[e["off"]] = -acc
            zs[e["diag"]] = 1.0 / d**2 + np.bincount(e["owner"], u * acc, minlength=d.size)
        return zs, zc

    @staticmethod
    def inverse_values(
        inverse: tuple[np.ndarray, np.ndarray], where: tuple[np.ndarray, ...]
    ) -> np.ndarray:
        """The entries of ``S^-1`` that :meth:`inverse_positions` located."""
        zs, zc = inverse
        i_s, p_s, i_c, p_c = where
        out = np.empty(i_s.size + i_c.size)
        out[i_s] = zs[p_s]
        out[i_c] = zc[p_c]
        return out


def _cho_factor(a: np.ndarray) -> tuple[np.ndarray, bool]:
    """``la.cho_factor(a, lower=True, check_finite=False)``: the same LAPACK call, without
    scipy's argument handling, which costs more than factorising the few-by-few matrices
    of the inner problem (tens of thousands of times in a large fit)."""
    c, info = _dpotrf(a, lower=1, overwrite_a=0, clean=0)
    if info > 0:
        raise la.LinAlgError(f"{info}-th leading minor of the array is not positive definite")
    if info < 0:  # pragma: no cover - only on bad arguments
        raise ValueError(f"LAPACK potrf: illegal value in argument {-info}")
    return c, True


def _cho_solve(factor: tuple[np.ndarray, bool], b: np.ndarray) -> np.ndarray:
    """``la.cho_solve(factor, b, check_finite=False)`` for a :func:`_cho_factor` factor."""
    x, info = _dpotrs(factor[0], b, lower=1, overwrite_b=0)
    if info != 0:  # pragma: no cover - only on bad arguments
        raise ValueError(f"LAPACK potrs: illegal value in argument {-info}")
    return x


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


class _Outer:
    """What one factorisation leaves for the small factors: everything is ``(1+p)``-sized.

    ``logdet`` is ``log det`` of the eliminated and factorised blocks; ``quad`` is
    ``b' A^{-1} b`` restricted to them (``b = Lambda Z' [y X]``); ``h`` and ``f`` give the
    small factor's contribution for any of its ``theta`` (see :meth:`_Problem.inner`).
    """

    __slots__ = ("f", "h", "logdet", "quad")

    def __init__(self, logdet: float, quad: np.ndarray, h: np.ndarray, f: np.ndarray) -> None:
        self.logdet, self.quad, self.h, self.f = logdet, quad, h, f


class _Problem:
    """Precomputed cross-products and the profiled deviance as a function of theta.

    Factors are handled in three tiers (internal order, most levels first):

    * factor 0 (ideas) is eliminated in closed form: its block of ``A`` is diagonal;
    * the other "outer" factors (reviewers) form ``S11``, the Schur complement that is
      factorised: the one expensive step, and what the outer optimiser searches over;
    * the smallest factor, if it has at most ``SMALL_MAX`` levels (topics), is last.  The
      block ``S11`` does not depend on their ``theta``, and with ``W = S11^{-1} S12`` their
      Schur complement is ``T = I + Lambda_2 H Lambda_2`` with ``H`` fixed by the outer
      ``theta``.  So after one factorisation the deviance is a cheap function of that
      factor's ``theta``, which :meth:`profile` minimises exactly: the outer optimiser
      works in two dimensions instead of three for topic/reviewer/idea models.

    Nothing needs the random effects themselves: ``beta`` and the penalised residual sum
    of squares follow from ``Q = b' A^{-1} b`` (``b = Lambda Z' [y X]``), since
    ``pwrss = y'y - Q_yy - beta' (X'y - Q_xy)`` and ``R_X'R_X = X'X - Q_xx``.
    """

    def __init__(
        self,
        y: np.ndarray,
        X: np.ndarray,
        codes: list[np.ndarray],
        n_levels: list[int],
        reml: bool,
        backend: str,
    ) -> None:
        self.X = X
        self.n, self.p = X.shape
        self.reml = reml
        self.k = len(codes)
        # Work with y minus its least-squares fit on X: the model is the same (beta moves
        # by the OLS coefficients, theta and the deviance do not), and y'y - Q_yy keeps
        # its digits whatever the scores' mean.
        self.beta_ols = np.linalg.lstsq(X, y, rcond=None)[0]
        yw = y - X @ self.beta_ols
        self.yty = float(yw @ yw)
        self.XtX = X.T @ X
        self.Xty = X.T @ yw
        n = self.n
        self.order = sorted(range(self.k), key=lambda j: -n_levels[j])
        self.codes = [codes[j] for j in self.order]
        self.q = [n_levels[j] for j in self.order]
        # At most one factor is profiled (the smallest): its inner problem is then
        # one-dimensional, solved by a grid and Brent's method.
        n_small = 1 if self.k >= 2 and self.q[-1] <= SMALL_MAX else 0
        self.k_outer = self.k - n_small
        self.q_small = self.q[self.k_outer :]
        self.offsets = np.concatenate([[0], np.cumsum(self.q)]).astype(int)
        self._cache: dict[bytes, tuple[_Outer, float, np.ndarray]] = {}
        self.factor: _SymFactor | _HybridFactor | None = None
        self.m1 = self.q2 = self.m = self.q0 = 0
        if self.k == 0:
            self.backend = "none"
            return
        qtot = int(self.offsets[-1])
        cols = np.concatenate(
            [c + off for c, off in zip(self.codes, self.offsets[:-1], strict=True)]
        )
        rows = np.tile(np.arange(n), self.k)
        Z = sp.csr_matrix((np.ones(n * self.k), (rows, cols)), shape=(n, qtot))
        self.c = np.asarray(Z.T @ np.column_stack([yw, X]))  # q x (1+p), unscaled
        q0 = self.q[0]
        self.q0 = q0
        self.n0 = np.bincount(self.codes[0], minlength=q0).astype(float)
        m = qtot - q0
        self.m = m
        self.m1 = int(sum(self.q[1 : self.k_outer]))
        self.q2 = m - self.m1
        m1 = self.m1
        if backend == "auto":
            if m1 <= DENSE_MAX:
                backend = "dense"
            elif m1 <= HYBRID_MIN and _cholmod is not None:
                backend = "cholmod"
            else:
                backend = "hybrid"
        if backend not in available_backends():
            raise ValueError(f"backend {backend!r} is not available here: {available_backends()}")
        self.backend = backend
        if m == 0:
            return
        Z0 = Z[:, :q0]
        Zr = Z[:, q0:]
        self.M = (Z0.T @ Zr).tocsr()  # q0 x m counts
        self.M.sort_indices()
        Nr = (Zr.T @ Zr).tocsc()
        # Pattern of G = N_r - M' W M (+ diagonal); values rebuilt per theta.
        MtM = (self.M.T @ self.M).tocsc()
        pat = (abs(Nr) + abs(MtM) + sp.eye(m, format="csc")).tocsc()
        pat.sort_indices()
        nnz = pat.nnz
        self.nnz = nnz
        pos_lookup = _PatternIndex(pat)
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
        # Split the pattern: S11 (sparse, factorised), G12 and G22 (dense, small factors).
        pr = pat.indices
        pc = np.repeat(np.arange(m), np.diff(pat.indptr))
        blk11 = (pr < m1) & (pc < m1)
        if m1:
            numbered = sp.csc_matrix(
                (np.arange(1, nnz + 1, dtype=float), pat.indices, pat.indptr), shape=(m, m)
            )
            p11 = numbered[:m1, :m1].tocsc()
            p11.sort_indices()
            self.i11 = p11.data.astype(np.int64) - 1  # positions in the full pattern
            r11 = p11.indices
            c11 = np.repeat(np.arange(m1), np.diff(p11.indptr))
            self.r11, self.c11, self.d11 = r11, c11, r11 == c11
            p11.data[:] = 0.0
            self.factor = _HybridFactor(p11) if backend == "hybrid" else _SymFactor(p11, backend)
        blk12 = (pr < m1) & (pc >= m1)
        self.i12, self.r12, self.c12 = np.flatnonzero(blk12), pr[blk12], pc[blk12] - m1
        blk22 = (pr >= m1) & (pc >= m1)
        self.i22, self.r22, self.c22 = np.flatnonzero(blk22), pr[blk22] - m1, pc[blk22] - m1
        assert int(blk11.sum() + 2 * blk12.sum() + blk22.sum()) == nnz

    # -- one factorisation (outer theta) ------------------------------------------------

    def outer(self, theta_outer: np.ndarray) -> _Outer:
        """Eliminate factor 0, factorise ``S11``; return what the small factors need."""
        p1 = 1 + self.p
        if self.k == 0:
            return _Outer(0.0, np.zeros((p1, p1)), np.zeros((0, 0)), np.zeros((0, p1)))
        q0, m1 = self.q0, self.m1
        t0 = float(theta_outer[0])
        d0 = t0 * t0 * self.n0 + 1.0
        logdet = float(np.log(d0).sum())
        c0d = self.c[:q0] / d0[:, None]
        quad = t0 * t0 * (self.c[:q0].T @ c0d)
        if self.m == 0:
            return _Outer(logdet, quad, np.zeros((0, 0)), np.zeros((0, p1)))
        w = t0 * t0 / d0
        g = np.bincount(self.nr_pos, weights=self.nr_val, minlength=self.nnz)
        g -= np.bincount(self.pair_pos, weights=w[self.pair_i] * self.pair_val, minlength=self.nnz)
        e = self.c[q0:] - t0 * t0 * (self.M.T @ c0d)  # reduced right-hand sides, unscaled
        q2 = self.q2
        g12 = np.zeros((m1, q2))
        g12[self.r12, self.c12] = g[self.i12]
        h = np.zeros((q2, q2))
        h[self.r22, self.c22] = g[self.i22]
        f = e[m1:]
        if m1:
            assert self.factor is not None
            lam1 = np.repeat(np.asarray(theta_outer[1:], dtype=float), self.q[1 : self.k_outer])
            s11 = lam1[self.r11] * lam1[self.c11] * g[self.i11]
            s11[self.d11] += 1.0
            logdet += self.factor.factorize(s11)
            t1 = lam1[:, None] * e[:m1]
            g12 *= lam1[:, None]
            sol = self.factor.solve(np.hstack([t1, g12]) if q2 else t1)
            u1 = sol[:, :p1]
            quad = quad + t1.T @ u1
            if q2:
                h -= g12.T @ sol[:, p1:]
                f = f - g12.T @ u1
        return _Outer(logdet, quad, 0.5 * (h + h.T), f)

    def inner(self, state: _Outer, theta_small: np.ndarray) -> dict[str, Any]:
        """The deviance's ingredients at the small factor's ``theta`` (cheap)."""
        rows = cols = None
        if self.q2:
            lam2 = np.repeat(np.asarray(theta_small, dtype=float), self.q_small)
            rows, cols = lam2[:, None], lam2[None, :]
        beta, pwrss, logdet_a, crx = self._reduce(state, rows, cols)
        return {
            "beta": beta + self.beta_ols,
            "pwrss": pwrss,
            "logdet_a": logdet_a,
            "logdet_rx": float(2.0 * np.log(crx[0].diagonal()).sum()),
            "rxtrx_factor": crx,
        }

    def _reduce(
        self, state: _Outer, scale_rows: Any, scale_cols: Any
    ) -> tuple[np.ndarray, float, float, tuple[np.ndarray, bool]]:
        """Beta (centred), the PWRSS, log|A| and the fixed effects' Cholesky factor, with
        the small factor's levels scaled by ``scale_rows`` (a column) and ``scale_cols``
        (a row), or both by one float when every level shares its scale: the same
        products either way."""
        logdet_a, quad = state.logdet, state.quad
        if self.q2:
            t = scale_rows * state.h * scale_cols
            t.flat[:: t.shape[0] + 1] += 1.0  # the diagonal
            ct = _cho_factor(t)
            logdet_a += float(2.0 * np.log(ct[0].diagonal()).sum())
            g2 = scale_rows * state.f
            quad = quad + g2.T @ _cho_solve(ct, g2)
        rxtrx = self.XtX - quad[1:, 1:]
        rhs = self.Xty - quad[1:, 0]
        rxtrx = 0.5 * (rxtrx + rxtrx.T)
        try:
            crx = _cho_factor(rxtrx)
        except la.LinAlgError as exc:  # pragma: no cover - rank checked up front
            raise np.linalg.LinAlgError("fixed-effects cross-product is singular") from exc
        beta = _cho_solve(crx, rhs)
        pwrss = self.yty - float(quad[0, 0]) - float(beta @ rhs)
        if not pwrss > 0:
            raise FloatingPointError("penalised residual sum of squares is not positive")
        return beta, pwrss, logdet_a, crx

    # -- deviances ------------------------------------------------------------------------

    def _state(self, theta_outer: np.ndarray) -> _Outer:
        key = np.asarray(theta_outer, dtype=float).tobytes()
        hit = self._cache.get(key)
        if hit is not None:
            return hit[0]
        state = self.outer(theta_outer)
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[key] = (state, math.nan, np.zeros(0))
        return state

    def solve_parts(self, theta: np.ndarray) -> dict[str, Any]:
        """Everything the deviance needs at the full ``theta`` (internal order)."""
        theta = np.abs(np.asarray(theta, dtype=float))
        state = self._state(theta[: self.k_outer])
        return self.inner(state, theta[self.k_outer :])

    def deviance(self, theta: np.ndarray) -> float:
        return self._deviance_from(self.solve_parts(theta))

    def profile(self, theta_outer: np.ndarray) -> tuple[float, np.ndarray]:
        """Deviance at ``theta_outer`` minimised over the small factor's ``theta``."""
        theta_outer = np.abs(np.asarray(theta_outer, dtype=float))
        key = theta_outer.tobytes()
        hit = self._cache.get(key)
        if hit is not None and not math.isnan(hit[1]):
            return hit[1], hit[2]
        state = hit[0] if hit is not None else self.outer(theta_outer)
        n_small = self.k - self.k_outer
        if n_small == 0:
            dev, th_s = self._deviance_from(self.inner(state, np.zeros(0))), np.zeros(0)
        else:
            dev, th_s = self._minimise_small(state)
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[key] = (state, dev, th_s)
        return dev, th_s

    def _minimise_small(self, state: _Outer) -> tuple[float, np.ndarray]:
        """Exact inner minimisation over the small factor (evaluations cost microseconds).

        A log grid first (the inner curve can be flat or have its minimum on the bound),
        then Brent's method inside the bracket around the best grid point.
        """

        # One small factor: its levels share one scale, a float (`inner` without the
        # parts only the fit needs).
        assert len(self.q_small) == 1

        def h(t: float) -> float:
            lam = float(abs(t))
            try:
                _, pwrss, logdet_a, crx = self._reduce(state, lam, lam)
            except (np.linalg.LinAlgError, FloatingPointError):
                return math.inf
            logdet_rx = float(2.0 * np.log(crx[0].diagonal()).sum())
            return self._deviance_of(pwrss, logdet_a, logdet_rx)

        grid = np.concatenate([[0.0], np.geomspace(1e-3, 30.0, 28)])
        vals = np.array([h(t) for t in grid])
        i = int(np.argmin(vals))
        while i == grid.size - 1 and grid[-1] < 1e4:
            more = grid[-1] * np.geomspace(2.0, 16.0, 4)
            grid = np.concatenate([grid, more])
            vals = np.concatenate([vals, [h(t) for t in more]])
            i = int(np.argmin(vals))
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        res = optimize.minimize_scalar(
            h, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10 * max(1.0, hi)}
        )
        best_t, best_v = float(grid[i]), float(vals[i])
        if res.fun < best_v:
            best_t, best_v = float(res.x), float(res.fun)
        return best_v, np.array([best_t])

    def _deviance_from(self, parts: Mapping[str, Any]) -> float:
        return self._deviance_of(parts["pwrss"], parts["logdet_a"], parts["logdet_rx"])

    def _deviance_of(self, pw: float, logdet_a: float, logdet_rx: float) -> float:
        n, p = self.n, self.p
        if self.reml:
            nmp = n - p
            return logdet_a + logdet_rx + nmp * (1.0 + math.log(2.0 * math.pi * pw / nmp))
        return logdet_a + n * (1.0 + math.log(2.0 * math.pi * pw / n))

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
    satterthwaite: bool = True,
) -> LMMFit:
    """Fit ``y ~ X + (1|g_1) + ... + (1|g_k)`` by (RE)ML with several optimiser starts.

    ``groups`` maps each factor's name to its level label per row.  A factor with a single
    level, or with one observation per level, cannot be told apart from the intercept or
    the residual; it is dropped with a warning (recorded in ``groups_dropped``) rather than
    refused, because the rest of the model is still well defined.

    The first start is lme4's (``theta = 1``); further starts are drawn log-uniformly in
    [0.05, 3] from ``seed``.  The best deviance wins; ``starts_agree`` says whether every
    start ended within 1e-3 log-likelihood units of it.  From ``EXPLORE_MIN_ROWS`` rows
    on, every start runs on a subsample first and the first start continues on all rows
    from its subsample optimum (``StartResult.stage`` and ``warnings`` say so).

    ``satterthwaite`` (on by default) adds Satterthwaite degrees of freedom from a
    finite-difference Hessian of the unprofiled deviance, as lmerTest does.  That takes
    about ``2 (k+1)^2`` extra evaluations, but only those that move a large factor's
    ``theta`` need a new factorisation (the states are cached by the outer ``theta``): 8
    more for topic, reviewer and idea (their cost is in docs/mixed-models.md).
    """
    t_start = time.perf_counter()
    y = np.asarray(y, dtype=float).ravel()
    # One memory layout for every caller: BLAS sums in a layout-dependent order, and the
    # same design must give the same fit to the last digit whichever way it was built.
    X = np.ascontiguousarray(X, dtype=float)
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
        if k > 0 and n >= EXPLORE_MIN_ROWS
        else None
    )
    explore_note: dict[str, Any] = {}
    if sub is not None:
        # Large study: every start is first run on a subsample (cheap: the dense core of
        # the factorisation grows with the cube of the study size).  The first start then
        # continues on the full data from its subsample optimum with a small trust region
        # (a pilot fit: far fewer full-data factorisations than starting from theta = 1).
        # Starts that reach the same subsample optimum as the first start share its
        # full-data fit; any start that lands elsewhere is refined on the full data.
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
                start = np.maximum(np.abs(sub_res[0]["theta"]), 1e-3)
                plan.append((th0, start, "subsample, then full data", _PILOT_RADIUS, False))
            elif same:
                plan.append((th0, sub_res[i]["theta"], "subsample", 0.0, True))
            else:
                start = np.maximum(np.abs(sub_res[i]["theta"]), 1e-3)
                plan.append((th0, start, "subsample, then full data", _PILOT_RADIUS, False))
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
            res = _optimise(prob, start_int, radius=radius, newton=stage != "full data")
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
            f"every optimiser start was first run on a random {sub.n}-row subsample (all "
            f"reviews of a quarter of the {[*groups][prob.order[0]]!r} levels); the first "
            "start continued on all rows from its subsample optimum"
            + (
                f", and {n_same} of the {len(runs) - 1} other start(s) reached the same "
                "optimum there and share its full-data fit"
                if len(runs) > 1
                else ""
            )
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

    df_arr: np.ndarray | None = None
    p_t: np.ndarray | None = None
    if satterthwaite and k > 0:
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
        extra={
            **({"explore": explore_note} if explore_note else {}),
            # the factor whose theta is minimised exactly inside every evaluation
            "profiled_factor": used[prob.order[-1]] if prob.k_outer < k else None,
        },
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


def _axis_differences(
    f: Any, x: np.ndarray, fx: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Steps, f(x + h e_j), gradient and curvature by central differences on each axis.

    The steps straddle the bound theta_j = 0 legitimately: the deviance is even in theta_j.
    """
    h = 1e-4 * np.maximum(1.0, x)
    eye = np.diag(h)
    fp = np.array([f(x + eye[j]) for j in range(x.size)])
    fm = np.array([f(x - eye[j]) for j in range(x.size)])
    return h, fp, (fp - fm) / (2 * h), (fp - 2 * fx + fm) / h**2


def _scaled_gradient(x: np.ndarray, g: np.ndarray, curv: np.ndarray) -> float:
    """lme4's convergence measure: per axis the smaller of |gradient| and the Newton step.

    An axis at the bound with non-negative curvature is a genuine minimum on the bound
    (its zero gradient says nothing) and is skipped.
    """
    worst = 0.0
    for xj, gj, cj in zip(x, g, curv, strict=True):
        if xj <= 0 and cj >= 0:
            continue
        step = abs(gj) / cj if cj > 0 else math.inf
        worst = max(worst, min(abs(gj), step))
    return worst


def _newton(f: Any, x0: np.ndarray, max_iter: int = 6) -> tuple[np.ndarray, float, bool, str]:
    """Newton's method with a central-difference gradient and Hessian, from a warm start.

    Used on the full data after a subsample fit has placed ``x0`` near the optimum, where
    it needs about 12 factorisations in two dimensions (COBYQA needs about 27).  Each
    round costs ``2k`` axis points around the current point (gradient and curvatures by
    central differences); the ``k(k-1)/2`` mixed derivatives are measured in the first
    round and kept, as they change slowly near the optimum.  It stops as converged when the Newton step is below 1e-3 (relative) and the
    lme4-style scaled gradient below 2e-3, after taking that last step if it lowers the
    deviance.  Anything unusual -- a Hessian that is not positive definite, a step that
    does not lower the deviance, no convergence in ``max_iter`` rounds -- returns
    ``converged=False`` and the caller falls back to COBYQA from the best point.
    """
    k = x0.size
    x = np.abs(np.asarray(x0, dtype=float))
    fx = f(x)
    cross: np.ndarray | None = None
    for _ in range(max_iter):
        h, fp, g, curv = _axis_differences(f, x, fx)
        eye = np.diag(h)
        if cross is None:  # mixed second derivatives: measured in the first round only
            cross = np.zeros((k, k))
            for i in range(k):
                for j in range(i + 1, k):
                    fij = f(x + eye[i] + eye[j])
                    cross[i, j] = cross[j, i] = (fij - fp[i] - fp[j] + fx) / (h[i] * h[j])
        hess = cross + np.diag(curv)
        if not np.all(np.isfinite(hess)) or np.linalg.eigvalsh(hess).min() <= 0:
            return x, fx, False, "Newton: the Hessian is not positive definite here"
        step = -np.linalg.solve(hess, g)
        scaled = np.abs(step) / np.maximum(1.0, x)
        done = scaled.max() < 1e-3 and _scaled_gradient(x, g, curv) < 2e-3
        for shrink in (1.0, 0.5, 0.25, 0.125):
            xn = np.abs(x + shrink * step)  # the deviance is even in each theta_j
            fn = f(xn)
            if fn <= fx:
                x, fx = xn, fn
                break
        else:
            if done:  # already at the optimum to within the finite differences
                return x, fx, True, "Newton: converged (the last step did not improve)"
            return x, fx, False, "Newton: no step lowered the deviance"
        if done:
            return x, fx, True, "Newton: converged (step and scaled gradient below tolerance)"
    return x, fx, False, f"Newton: not converged in {max_iter} rounds"


def _optimise(
    prob: _Problem, theta0: np.ndarray, *, radius: float = 0.5, newton: bool = False
) -> dict[str, Any]:
    """Minimise the profiled deviance over theta >= 0 from one start (internal order).

    The optimiser searches the outer ``theta`` (ideas, reviewers); the small factor's
    ``theta`` are minimised exactly inside each evaluation (:meth:`_Problem.profile`), so
    ``theta0``'s small-factor part is not used.

    COBYQA (Ragonneau & Zhang's successor of Powell's BOBYQA, the optimiser lme4 uses) is
    derivative-free and models the deviance quadratically.  That matters: the deviance
    depends on theta only through theta^2, so its gradient is exactly zero on the bound
    theta_j = 0 and a gradient method (L-BFGS-B) that steps onto the bound stops there
    "converged" even when the optimum is interior -- the same trap statsmodels falls into
    on the Si et al. data.  Convergence is then checked the way lme4 does, on every
    component of theta: the Newton step implied by a central-difference gradient and
    curvature must be tiny.
    """
    k, ko = prob.k, prob.k_outer
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
    seen: set[bytes] = set()

    def count(th_outer: np.ndarray) -> None:
        nonlocal n_evals
        key = np.abs(np.asarray(th_outer, dtype=float)).tobytes()
        if key not in seen:  # count factorisations, not cache hits
            seen.add(key)
            n_evals += 1

    def f(th_outer: np.ndarray) -> float:
        count(th_outer)
        return prob.profile(th_outer)[0]

    def full(th: np.ndarray) -> float:
        # The deviance at this full theta needs the factorisation at its outer part (cached
        # for later profiles), not the inner search over the small factor that the
        # profiled deviance runs there.
        count(th[:ko])
        return prob.deviance(th)

    if newton:
        try:
            x, _, ok, why = _newton(f, np.maximum(theta0[:ko], 1e-3))
        except (np.linalg.LinAlgError, FloatingPointError, ValueError) as exc:
            x, ok, why = theta0[:ko], False, f"Newton: numerical failure ({exc})"
        if ok:
            dev, th_small = prob.profile(x)
            return {
                "theta": np.concatenate([x, th_small]),
                "deviance": float(dev),
                "converged": True,
                "n_evals": n_evals,
                "message": why,
            }
        theta0 = np.concatenate([x, theta0[ko:]])  # COBYQA goes on from Newton's best
        radius = min(radius, _PILOT_RADIUS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = optimize.minimize(
                f,
                np.maximum(theta0[:ko], 1e-3),
                method="COBYQA",
                bounds=optimize.Bounds(np.zeros(ko), np.full(ko, np.inf)),
                options={
                    "maxfev": 300 * ko,
                    "initial_tr_radius": radius,
                    "final_tr_radius": _TR_FINAL,
                },
            )
        th_outer = np.clip(np.asarray(res.x, dtype=float), 0.0, None)
        dev, th_small = prob.profile(th_outer)
        f(th_outer)
        theta = np.concatenate([th_outer, th_small])
        # lme4's check on every theta_j; perturbing the profiled factor reuses the cached
        # factorisation.
        _, _, g, curv = _axis_differences(full, theta, dev)
        worst = _scaled_gradient(theta, g, curv)
    except (np.linalg.LinAlgError, FloatingPointError, ValueError) as exc:
        return {
            "theta": theta0,
            "deviance": math.inf,
            "converged": False,
            "n_evals": n_evals,
            "message": f"numerical failure: {exc}",
        }
    converged = bool(res.success) and worst < 2e-3
    message = str(res.message)
    if bool(res.success) and not converged:
        message += f" (but the gradient check fails: scaled gradient {worst:.2g})"
    return {
        "theta": theta,
        "deviance": float(dev),
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
