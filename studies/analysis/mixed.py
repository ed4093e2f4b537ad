"""Crossed mixed-effects models for the report: ``score ~ condition + (1|topic) + ...``.

The public entry point is :func:`fit_mixed`.  It takes the analysis frame (one row per
review x condition), decides which grouping factors the data can identify, and fits the
model with one of two engines:

* ``"statsmodels"``: ``MixedLM`` with a single all-encompassing group and one variance
  component per crossed factor.  It builds dense design matrices, so it is for small
  studies only, and its default L-BFGS start stops at a spurious optimum on the Si et al.
  data while claiming convergence; it is therefore always fitted from several starts
  (optimisers x start values) and the best log-likelihood is kept, with every start's
  log-likelihood recorded and compared.
* ``"sparse"``: our lme4-style engine (:mod:`studies.analysis.lmm_sparse`), which scales
  to 100,000 reviews.

``"auto"`` uses statsmodels for small data and the sparse engine beyond.

Numeric covariates (a reviewer's familiarity or confidence, the length of the rationale)
can enter as further fixed effects: ``metric ~ condition + cov1 + ... + (1|g) ...``.  They
are used as given (not centred).  A covariate that is missing, non-numeric, constant or
collinear with the other fixed effects is refused with a message naming it.

Degrees of freedom: the sparse engine adds Satterthwaite df and t p-values (``df`` and
``p_satterthwaite`` in each fixed-effect row, lmerTest's method) at every size unless
``satterthwaite=False``; the ``p`` column is always the Wald z p-value, and ``df`` is
``None`` where Satterthwaite df were not computed (statsmodels engine, turned off, or a
failed Hessian).
Pure module: no Django imports.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy import stats

from .lmm_sparse import START_AGREE_TOL, design_matrix, fit_lmm
from .rounding import fixed

__all__ = [
    "MixedResult",
    "PreparedMixedData",
    "fit_mixed",
    "prepare_mixed_data",
    "wald_caution",
]


_WALD = "Wald z (normal reference)"

#: Fewer degrees of freedom than this for a fixed effect (Satterthwaite's, or else the
#: residual df: rows minus fixed effects) and the report warns that the Wald z p-value,
#: which takes the df as infinite, is too small; a t with 30 df is close to the normal.
WALD_SMALL_DF = 30
_WALD_SATT = "Wald z (normal reference); Satterthwaite df and t p-values in df / p_satterthwaite"


@dataclass
class MixedResult:
    """A fitted crossed mixed model in the shape the report and the exports use."""

    metric: str
    engine: str
    reml: bool
    baseline: str
    fixed: list[dict[str, Any]]
    variance: dict[str, float]
    loglik: float
    n_obs: int
    n_levels: dict[str, int]
    groups_used: list[str]
    groups_dropped: dict[str, str]
    starts: list[float]
    starts_agree: bool
    converged: bool
    boundary: list[str]
    warnings: list[str]
    p_value_method: str
    fit_seconds: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def term(self, name: str) -> dict[str, Any]:
        """The fixed-effect row called ``name`` (e.g. ``"condition[AI]"``)."""
        for row in self.fixed:
            if row["term"] == name:
                return row
        raise KeyError(f"no fixed effect {name!r}; terms: {[r['term'] for r in self.fixed]}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict; NaN and infinities become ``None``."""
        return _jsonable(asdict(self))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, np.bool_ | bool):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        v = float(obj)
        return v if math.isfinite(v) else None
    return obj


# --------------------------------------------------------------------- data preparation


@dataclass(frozen=True)
class PreparedMixedData:
    """The rows, design and grouping factors one fit uses, and why others were left out."""

    rows: pd.Index
    y: np.ndarray
    condition: np.ndarray
    levels: list[str]
    X: np.ndarray
    fixed_names: list[str]
    groups_used: list[str]
    groups_dropped: dict[str, str]
    group_labels: dict[str, np.ndarray]
    notes: list[str]
    covariates: list[str] = field(default_factory=list)


def _missing_reason(col: str) -> str:
    if col == "reviewer_id":
        return "no reviewer ids in the data"
    return f"no {col} values in the data"


def prepare_mixed_data(
    df: pd.DataFrame,
    metric: str,
    *,
    baseline: str,
    condition_col: str = "condition",
    groups: Sequence[str] = ("topic", "reviewer_id", "idea_id"),
    covariates: Sequence[str] = (),
) -> PreparedMixedData:
    """Validate the frame and decide which grouping factors the data identify.

    ``covariates`` name numeric columns that enter as fixed effects after the condition
    terms (term names are the column names).  Among the rows with a score, a covariate
    must be present, numeric (numbers written as text are accepted) and not constant;
    otherwise a ``ValueError`` names it.

    A grouping column that is absent or entirely empty (``reviewer_id`` in the released
    Si et al. file) is dropped with the reason recorded, as is a factor with a single
    level (confounded with the intercept) or with one row per level (confounded with the
    residual).  Partly missing ids are an error rather than a silent row drop: the rows
    would vanish from the model without anyone noticing.
    """
    if metric not in df.columns:
        raise ValueError(f"no metric column {metric!r} in the data")
    if condition_col not in df.columns:
        raise ValueError(f"no condition column {condition_col!r} in the data")
    if len(df) == 0:
        raise ValueError("the data have no rows")
    covs = _check_covariate_names(df, covariates, metric, condition_col, groups)
    notes: list[str] = []
    cond_all = df[condition_col]
    if isinstance(cond_all.dtype, pd.CategoricalDtype):
        present = set(cond_all.dropna().astype(str))
        empty = [str(c) for c in cond_all.cat.categories if str(c) not in present]
        if empty:
            raise ValueError(
                f"condition(s) with no rows: {', '.join(empty)}; remove unused categories "
                "or collect reviews for them"
            )
    y_all = pd.to_numeric(df[metric], errors="coerce")
    keep = y_all.notna() & cond_all.notna()
    n_missing = int((~keep).sum())
    if n_missing:
        notes.append(f"{n_missing} rows without a {metric} score or condition were left out")
    sub = df.loc[keep]
    if len(sub) == 0:
        raise ValueError(f"no rows have a {metric} score")
    cond = sub[condition_col].astype(str).to_numpy()
    present_levels = list(pd.unique(cond))
    if baseline not in present_levels:
        raise ValueError(
            f"the baseline condition {baseline!r} has no rows with a {metric} score "
            f"(conditions present: {', '.join(sorted(present_levels))})"
        )
    if len(present_levels) < 2:
        raise ValueError(
            f"only the baseline condition {baseline!r} has {metric} scores: there is no "
            "condition effect to estimate"
        )
    cov_values = {c: _covariate_values(sub[c], c, metric) for c in covs}
    design_frame = sub.assign(**cov_values) if covs else sub
    X, names = design_matrix(
        design_frame, condition_col=condition_col, baseline=baseline, covariates=covs
    )
    levels = [baseline] + [lv for lv in present_levels if lv != baseline]

    used: list[str] = []
    dropped: dict[str, str] = {}
    labels: dict[str, np.ndarray] = {}
    n = len(sub)
    for g in groups:
        if g not in sub.columns:
            dropped[g] = _missing_reason(g) if g == "reviewer_id" else f"no column {g!r}"
            continue
        col = sub[g]
        n_null = int(col.isna().sum())
        if n_null == n:
            dropped[g] = _missing_reason(g)
            continue
        if n_null:
            raise ValueError(
                f"{n_null} of {n} rows have no {g}; fill them in or drop those rows first"
            )
        lab = col.astype(str).to_numpy()
        n_lev = len(pd.unique(lab))
        if n_lev < 2:
            dropped[g] = f"only one {g} level ({lab[0]}): its variance is not identifiable"
            continue
        if n_lev >= n:
            dropped[g] = f"every {g} has a single row: its variance is confounded with the residual"
            continue
        used.append(g)
        labels[g] = lab
    return PreparedMixedData(
        rows=sub.index,
        y=y_all.loc[keep].to_numpy(dtype=float),
        condition=cond,
        levels=levels,
        X=X,
        fixed_names=names,
        groups_used=used,
        groups_dropped=dropped,
        group_labels=labels,
        notes=notes,
        covariates=covs,
    )


def _check_covariate_names(
    df: pd.DataFrame,
    covariates: Sequence[str],
    metric: str,
    condition_col: str,
    groups: Sequence[str],
) -> list[str]:
    covs = [covariates] if isinstance(covariates, str) else list(covariates)
    seen: set[str] = set()
    for c in covs:
        if c in seen:
            raise ValueError(f"covariate {c!r} is listed twice")
        seen.add(c)
        if c == metric:
            raise ValueError(f"covariate {c!r} is the metric being modelled")
        if c == condition_col:
            raise ValueError(f"covariate {c!r} is the condition column")
        if c in groups:
            raise ValueError(f"covariate {c!r} is also a grouping factor")
        if c == "Intercept":
            raise ValueError("a covariate cannot be called 'Intercept' (that term name is taken)")
        if c not in df.columns:
            raise ValueError(f"no covariate column {c!r} in the data")
    return covs


def _covariate_values(col: pd.Series, name: str, metric: str) -> pd.Series:
    """``col`` as floats, or a ``ValueError`` naming the covariate and the bad rows."""
    if pd.api.types.is_numeric_dtype(col) and not isinstance(col.dtype, pd.CategoricalDtype):
        vals = col.astype(float)  # includes booleans (0/1) and nullable integers
    else:
        vals = pd.to_numeric(col.astype(object), errors="coerce").astype(float)
        bad = col.notna() & vals.isna()
        if bad.any():
            examples = ", ".join(repr(v) for v in pd.unique(col[bad].astype(str))[:3])
            raise ValueError(
                f"covariate {name!r} has non-numeric values in {int(bad.sum())} of "
                f"{len(col)} rows with a {metric} score (e.g. {examples}); only numeric "
                "covariates can enter the model: encode it as numbers first"
            )
    missing = ~np.isfinite(vals.to_numpy())
    if missing.any():
        rows = ", ".join(str(r) for r in col.index[missing][:5])
        raise ValueError(
            f"covariate {name!r} is missing (or not finite) in {int(missing.sum())} of "
            f"{len(col)} rows with a {metric} score (rows {rows}"
            f"{', ...' if missing.sum() > 5 else ''}); fill it in or drop those rows first"
        )
    if np.ptp(vals.to_numpy()) == 0:
        raise ValueError(
            f"covariate {name!r} is constant ({vals.iloc[0]:g} in every row with a {metric} "
            "score): it is collinear with the intercept and its effect is not estimable"
        )
    return vals


# --------------------------------------------------------------------- entry point


def fit_mixed(
    df: pd.DataFrame,
    metric: str,
    *,
    baseline: str,
    condition_col: str = "condition",
    groups: Sequence[str] = ("topic", "reviewer_id", "idea_id"),
    reml: bool = True,
    engine: str = "auto",
    n_starts: int = 5,
    seed: int = 0,
    covariates: Sequence[str] = (),
    satterthwaite: bool = True,
) -> MixedResult:
    """Fit ``metric ~ condition (baseline explicit) + (1|g)`` for each identifiable ``g``.

    ``covariates`` adds numeric columns as fixed effects (``+ cov1 + cov2``), for both
    engines; see :func:`prepare_mixed_data` for what is refused.

    ``engine``: ``"sparse"`` (our lme4-style profiled fit), ``"statsmodels"`` (MixedLM,
    the reference path) or ``"auto"``, which is the sparse engine: it fits several times
    faster than statsmodels (docs/mixed-models.md), and the tests hold both to lme4.  ``n_starts`` optimiser starts are run and the best
    log-likelihood kept; ``starts`` lists every start's log-likelihood.
    ``satterthwaite=False`` skips the sparse engine's Satterthwaite df (they add about a
    third to the fit's time at 30,000 reviews and a sixth at 100,000).
    """
    if engine not in ("auto", "statsmodels", "sparse"):
        raise ValueError(f"engine must be 'auto', 'statsmodels' or 'sparse', not {engine!r}")
    if n_starts < 1:
        raise ValueError("n_starts must be at least 1")
    prep = prepare_mixed_data(
        df,
        metric,
        baseline=baseline,
        condition_col=condition_col,
        groups=groups,
        covariates=covariates,
    )
    _check_estimable(prep)
    if engine == "auto":
        engine = "sparse"
    t0 = time.perf_counter()
    if engine == "sparse":
        res = _fit_sparse(prep, metric, baseline, reml, n_starts, seed, satterthwaite)
    else:
        res = _fit_statsmodels(prep, metric, baseline, reml, n_starts, seed)
    res.fit_seconds = time.perf_counter() - t0
    if prep.covariates:
        res.details["covariates"] = list(prep.covariates)
    return res


def _check_estimable(prep: PreparedMixedData) -> None:
    """The degenerate cases both engines must refuse with a message, not a traceback."""
    y = prep.y
    n, p = prep.X.shape
    if np.ptp(y) == 0:
        raise ValueError(f"all {n} scores are equal ({y[0]:g}): there is no variation to model")
    rank = np.linalg.matrix_rank(prep.X)
    if rank < p:
        # Name the columns that add nothing to the ones before them (intercept, then
        # conditions, then covariates in the order given): those are the redundant ones.
        redundant = []
        kept: list[int] = []
        for j in range(p):
            if np.linalg.matrix_rank(prep.X[:, [*kept, j]]) > len(kept):
                kept.append(j)
            else:
                redundant.append(prep.fixed_names[j])
        raise ValueError(
            f"the fixed effects are perfectly collinear (rank {rank} < {p} columns: "
            f"{', '.join(prep.fixed_names)}); redundant given the terms before them: "
            f"{', '.join(redundant)}"
        )
    k = len(prep.groups_used)
    if n <= p + k + 1:
        raise ValueError(
            f"fewer rows than parameters: {n} rows for {p} fixed effects, {k} variance "
            "component(s) and the residual variance"
        )


def _fixed_rows(
    names: Sequence[str],
    coef: np.ndarray,
    se: np.ndarray,
    df: np.ndarray | None = None,
    p_t: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    z = coef / se
    p = 2.0 * stats.norm.sf(np.abs(z))
    q = stats.norm.ppf(0.975)
    rows = []
    for j, name in enumerate(names):
        row: dict[str, Any] = {
            "term": name,
            "coef": float(coef[j]),
            "se": float(se[j]),
            "z": float(z[j]),
            "p": float(p[j]),
            "ci_low": float(coef[j] - q * se[j]),
            "ci_high": float(coef[j] + q * se[j]),
            "df": None if df is None else float(df[j]),
        }
        if p_t is not None:
            row["p_satterthwaite"] = float(p_t[j])
        rows.append(row)
    return rows


def _fit_sparse(
    prep: PreparedMixedData,
    metric: str,
    baseline: str,
    reml: bool,
    n_starts: int,
    seed: int,
    satterthwaite: bool,
) -> MixedResult:
    fit = fit_lmm(
        prep.y,
        prep.X,
        prep.group_labels,
        fixed_names=prep.fixed_names,
        reml=reml,
        n_starts=n_starts,
        seed=seed,
        satterthwaite=satterthwaite,
    )
    variance = dict(fit.variances)
    variance["residual"] = fit.sigma2
    dropped = dict(prep.groups_dropped)
    dropped.update(fit.groups_dropped)
    return MixedResult(
        metric=metric,
        engine="sparse",
        reml=reml,
        baseline=baseline,
        fixed=_fixed_rows(fit.fixed_names, fit.coef, fit.se, fit.df, fit.p_satterthwaite),
        variance=variance,
        loglik=fit.loglik,
        n_obs=fit.n_obs,
        n_levels=dict(fit.n_levels),
        groups_used=list(fit.groups_used),
        groups_dropped=dropped,
        starts=[s.loglik for s in fit.starts],
        starts_agree=fit.starts_agree,
        converged=fit.converged,
        boundary=list(fit.boundary),
        warnings=prep.notes + fit.warnings,
        p_value_method=_WALD_SATT if fit.df is not None else _WALD,
        details={
            "backend": fit.backend,
            "theta": fit.theta,
            "evaluations": [s.n_evals for s in fit.starts],
            "stages": [s.stage for s in fit.starts],
            "profiled_factor": fit.extra.get("profiled_factor"),
        },
    )


def _fit_statsmodels(
    prep: PreparedMixedData, metric: str, baseline: str, reml: bool, n_starts: int, seed: int
) -> MixedResult:
    """MixedLM with one group and a variance component per crossed factor, multi-start.

    Start ``i`` pairs an optimiser (L-BFGS, BFGS, CG, Nelder-Mead, Powell in turn) with a
    start for the variance ratios (statsmodels' default first, then draws from ``seed``);
    statsmodels' convergence and boundary warnings are captured per start, not swallowed.
    """
    from statsmodels.regression.mixed_linear_model import MixedLM, MixedLMParams, VCSpec
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    y, X = prep.y, prep.X
    n = len(y)
    names = list(prep.groups_used)
    notes = list(prep.notes)
    if not names:
        raise ValueError("no grouping factor is identifiable; use an ordinary regression instead")
    mats = []
    colnames = []
    n_levels: dict[str, int] = {}
    for g in names:
        codes, uniq = pd.factorize(pd.Series(prep.group_labels[g]), sort=True)
        # Sparse indicator matrices: statsmodels then solves with splu instead of dense
        # inverses, several times faster even at the Si et al. size.
        z = sp.csr_matrix((np.ones(n), (np.arange(n), codes)), shape=(n, len(uniq)))
        mats.append([z])
        colnames.append([[str(u) for u in uniq]])
        n_levels[g] = len(uniq)
    vcs = VCSpec(names, colnames, mats)
    model = MixedLM(y, X, groups=np.zeros(n), exog_vc=vcs, exog_re=None)
    model.exog_names[:] = list(prep.fixed_names)

    # L-BFGS from the default start first (statsmodels' own choice, and the one that
    # stops early on the Si et al. data), then optimisers that proved reliable there.
    methods = ["lbfgs", "bfgs", "cg", "nm", "powell"]
    rng = np.random.default_rng(seed)
    fe0 = np.linalg.lstsq(X, y, rcond=None)[0]
    fits: list[tuple[float, Any, list[str], str]] = []
    for i in range(n_starts):
        method = methods[i % len(methods)]
        start = None
        if i > 0:
            ratios = np.exp(rng.uniform(math.log(0.01), math.log(2.0), len(names)))
            start = MixedLMParams.from_components(
                fe_params=fe0, cov_re=np.zeros((0, 0)), vcomp=ratios
            )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                r = model.fit(reml=reml, method=[method], start_params=start)
            except (np.linalg.LinAlgError, ValueError) as exc:
                fits.append((-math.inf, None, [f"start {i} ({method}) failed: {exc}"], method))
                continue
        msgs = []
        for w in caught:
            kind = (
                "convergence" if issubclass(w.category, ConvergenceWarning) else w.category.__name__
            )
            msgs.append(f"start {i} ({method}): {kind}: {w.message}")
        llf = float(r.llf)
        fits.append((llf if math.isfinite(llf) else -math.inf, r, msgs, method))
    ok = [f for f in fits if f[1] is not None]
    if not ok:
        raise ValueError("statsmodels failed from every start: " + "; ".join(fits[0][2]))
    best = max(ok, key=lambda f: f[0])
    best_llf, r, best_msgs, best_method = best
    start_lls = [f[0] for f in fits]
    agree = all(abs(v - best_llf) <= START_AGREE_TOL / 2 for v in start_lls)
    if not agree:
        notes.append(
            "statsmodels starts disagree: log-likelihoods "
            + ", ".join(fixed(v, 4) for v in start_lls)
            + f"; kept the best ({best_method})"
        )
    # Warnings of the kept start matter; the others are kept for the record, marked as such.
    notes.extend(best_msgs)
    for f in fits:
        if f is not best:
            notes.extend(m + " (start not kept)" for m in f[2])
    k_fe = X.shape[1]
    coef = np.asarray(r.fe_params, dtype=float)
    se = np.asarray(r.bse_fe, dtype=float)[:k_fe]
    vcomp = np.asarray(r.vcomp, dtype=float)
    variance = {g: float(v) for g, v in zip(names, vcomp, strict=True)}
    variance["residual"] = float(r.scale)
    scale = float(r.scale)
    boundary = [g for g, v in zip(names, vcomp, strict=True) if v / scale < 1e-8]
    for g in boundary:
        notes.append(f"boundary (singular) fit: the {g!r} variance is estimated as 0")
    converged = bool(getattr(r, "converged", True)) and not any(
        "convergence" in m for m in best_msgs
    )
    return MixedResult(
        metric=metric,
        engine="statsmodels",
        reml=reml,
        baseline=baseline,
        fixed=_fixed_rows(prep.fixed_names, coef, se),
        variance=variance,
        loglik=best_llf,
        n_obs=n,
        n_levels=n_levels,
        groups_used=names,
        groups_dropped=dict(prep.groups_dropped),
        starts=start_lls,
        starts_agree=agree,
        converged=converged,
        boundary=boundary,
        warnings=notes,
        p_value_method=_WALD,
        details={"best_method": best_method},
    )


def wald_caution(fit: Mapping[str, Any]) -> str | None:
    """One sentence for a fit (`MixedResult.to_dict()`) whose fixed effects other than the
    intercept have fewer than `WALD_SMALL_DF` degrees of freedom, saying the Wald p is
    optimistic and where to read a better one; None for a larger fit or one not made."""
    rows = [r for r in fit.get("fixed") or [] if r.get("term") != "Intercept"]
    if not rows:
        return None
    satt = [r["df"] for r in rows if r.get("df") is not None]
    if satt:
        low = min(satt)
        if low >= WALD_SMALL_DF:
            return None
        return (
            f"At this size (as few as {fixed(low, 1)} Satterthwaite degrees of freedom) the "
            "Wald p-values are optimistic; read the Satterthwaite p in the df / p (Satt.) "
            "column."
        )
    residual = int(fit.get("n_obs") or 0) - len(fit["fixed"])
    if residual >= WALD_SMALL_DF:
        return None
    return (
        f"At this size ({residual} residual degrees of freedom) the Wald p-values are "
        "optimistic, and no Satterthwaite p was computed for this fit."
    )
