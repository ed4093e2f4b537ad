"""Optional cross-check of our mixed models against R's ``lme4::lmer``.

R is not a dependency of ideareview: this module exists so that tests, benchmarks and a
sceptical analyst can confirm that our engines reproduce the reference implementation.
Each call starts ``Rscript`` once (R start-up costs about a second), so several fits are
batched into one run: the data go to a temporary CSV, the jobs to a JSON spec, and R writes
one JSON result per job, which is turned into the same :class:`MixedResult` shape the
Python engines return (``engine="lme4"``, R's own fit time in ``fit_seconds``).

A job may add numeric covariates as further fixed effects (``y ~ condition + cov1 + ...``)
and may ask for lmerTest's Satterthwaite degrees of freedom (``satterthwaite=True``): that
job is then fitted with ``lmerTest::lmer`` (the same lme4 fit, plus lmerTest's Hessian of
the deviance over ``(theta, sigma)``), and ``summary(fit, ddf = "Satterthwaite")`` fills
each fixed-effect row's ``df`` and ``p_satterthwaite``.  lmerTest is loaded only when some
job asks for it, so plain lme4 checks keep working where it is not installed.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from .mixed import MixedResult, prepare_mixed_data

__all__ = [
    "ClmmFit",
    "ClmmJob",
    "RJob",
    "clmm_fit_many",
    "lme4_fit",
    "lme4_fit_many",
    "lmertest_unavailable_reason",
    "ordinal_unavailable_reason",
    "r_available",
    "r_unavailable_reason",
]

_R_SCRIPT = r"""
suppressPackageStartupMessages({library(lme4); library(jsonlite)})
args <- commandArgs(trailingOnly = TRUE)
spec <- fromJSON(args[1], simplifyVector = FALSE)
if (any(vapply(spec$jobs, function(j) isTRUE(j$satterthwaite), logical(1)))) {
  suppressPackageStartupMessages(library(lmerTest))
}
dat <- read.csv(spec$csv, stringsAsFactors = FALSE, colClasses = "character")
out <- list()
for (job in spec$jobs) {
  d <- data.frame(y = as.numeric(dat[[job$metric]]))
  d$condition <- factor(dat[[job$condition_col]], levels = unlist(job$levels))
  gcols <- unlist(job$group_cols)
  for (g in gcols) d[[g]] <- factor(dat[[g]])
  xcols <- unlist(job$covariate_cols)
  for (x in xcols) d[[x]] <- as.numeric(dat[[x]])
  d <- d[!is.na(d$y), , drop = FALSE]
  rhs <- paste0("(1 | ", gcols, ")", collapse = " + ")
  form <- as.formula(paste("y ~", paste(c("condition", xcols, rhs), collapse = " + ")))
  satt <- isTRUE(job$satterthwaite)
  t0 <- proc.time()[["elapsed"]]
  if (satt) {
    # lmerTest::lmer is lme4::lmer plus the Hessian and Jacobian Satterthwaite needs.
    fit <- lmerTest::lmer(form, data = d, REML = isTRUE(job$reml))
  } else {
    fit <- lme4::lmer(form, data = d, REML = isTRUE(job$reml))
  }
  secs <- proc.time()[["elapsed"]] - t0
  vc <- as.data.frame(VarCorr(fit))
  df_satt <- list()
  p_satt <- list()
  if (satt) {
    cf <- if (inherits(fit, "lmerModLmerTest")) {
      summary(fit, ddf = "Satterthwaite")$coefficients
    } else {
      NULL
    }
    if (!is.null(cf) && "df" %in% colnames(cf)) {
      df_satt <- unname(cf[, "df"])
      p_satt <- unname(cf[, "Pr(>|t|)"])
    } else {
      cf <- summary(as(fit, "lmerMod"))$coefficients
    }
  } else {
    cf <- summary(fit)$coefficients
  }
  msgs <- fit@optinfo$conv$lme4$messages
  out[[length(out) + 1]] <- list(
    id = job$id, terms = rownames(cf), coef = unname(cf[, 1]), se = unname(cf[, 2]),
    df = df_satt, p_satt = p_satt,
    vc_grp = vc$grp, vc_var = vc$vcov,
    loglik = as.numeric(logLik(fit)), n_obs = nobs(fit),
    ngrps_names = names(ngrps(fit)), ngrps = unname(ngrps(fit)),
    theta = unname(getME(fit, "theta")), seconds = secs,
    messages = if (is.null(msgs)) list() else as.list(msgs),
    singular = isSingular(fit)
  )
}
writeLines(toJSON(out, auto_unbox = TRUE, digits = NA, na = "null"), spec$out)
"""


@dataclass(frozen=True)
class RJob:
    """One ``lmer`` fit to run in a batch.

    ``covariates`` are numeric columns entered as fixed effects after the condition, as
    :func:`~studies.analysis.mixed.fit_mixed` does; ``satterthwaite`` fits with
    ``lmerTest::lmer`` and returns its Satterthwaite df and t p-values.
    """

    metric: str
    baseline: str
    reml: bool = True
    condition_col: str = "condition"
    groups: tuple[str, ...] = ("topic", "reviewer_id", "idea_id")
    covariates: tuple[str, ...] = ()
    satterthwaite: bool = False


def _r_probe(expr: str, missing: str) -> str | None:
    """Run one R expression that quits with status 0 when what it checks is there."""
    exe = shutil.which("Rscript")
    if exe is None:
        return "Rscript is not on PATH (install r-base-core and r-cran-lme4)"
    try:
        proc = subprocess.run([exe, "-e", expr], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Rscript failed to start: {exc}"
    return missing if proc.returncode != 0 else None


@functools.cache
def r_unavailable_reason() -> str | None:
    """Why lme4 cannot be used here, or ``None`` when ``Rscript`` with lme4 works."""
    return _r_probe(
        "quit(status = !(requireNamespace('lme4', quietly = TRUE) && "
        "requireNamespace('jsonlite', quietly = TRUE)))",
        "R is installed but lme4 or jsonlite is missing (apt-get install r-cran-lme4)",
    )


@functools.cache
def lmertest_unavailable_reason() -> str | None:
    """Why lmerTest cannot be used here, or ``None`` when it can (R with lme4 first)."""
    return r_unavailable_reason() or _r_probe(
        "quit(status = !requireNamespace('lmerTest', quietly = TRUE))",
        "R and lme4 are installed but lmerTest is missing (apt-get install r-cran-lmertest)",
    )


def r_available() -> bool:
    """True when ``Rscript`` and the lme4 and jsonlite packages are installed."""
    return r_unavailable_reason() is None


def lme4_fit(df: pd.DataFrame, metric: str, *, baseline: str, **kwargs: Any) -> MixedResult:
    """Fit one model with lme4 (see :func:`lme4_fit_many` for batching)."""
    job = RJob(metric=metric, baseline=baseline, **kwargs)
    return lme4_fit_many(df, [job])[0]


def lme4_fit_many(
    df: pd.DataFrame, jobs: Sequence[RJob], *, timeout: float = 3600.0
) -> list[MixedResult]:
    """Run every job in one ``Rscript`` process; results come back in job order.

    The grouping columns each job uses are decided exactly as in :func:`fit_mixed`
    (missing or single-level factors are dropped with the same reasons), so a comparison
    is always between the same two models.
    """
    reason = r_unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"lme4 is unavailable: {reason}")
    if any(job.satterthwaite for job in jobs):
        reason = lmertest_unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"a job asks for Satterthwaite df but {reason}")
    with tempfile.TemporaryDirectory(prefix="ideareview-lme4-") as tmp:
        tmpdir = Path(tmp)
        columns: dict[str, pd.Series] = {}
        specs: list[dict[str, Any]] = []
        prepared = []
        for i, job in enumerate(jobs):
            prep = prepare_mixed_data(
                df,
                job.metric,
                baseline=job.baseline,
                condition_col=job.condition_col,
                groups=job.groups,
                covariates=job.covariates,
            )
            prepared.append(prep)
            # R wants syntactic column names; the mapping stays on this side.
            ycol = f"y{i}"
            columns[ycol] = pd.Series(np.nan, index=df.index)
            columns[ycol].loc[prep.rows] = prep.y
            ccol = f"c{i}"
            columns[ccol] = pd.Series("", index=df.index)
            columns[ccol].loc[prep.rows] = prep.condition
            gcols: list[str] = []
            for g in prep.groups_used:
                gname = f"g{i}_{len(gcols)}"
                columns[gname] = pd.Series("", index=df.index)
                columns[gname].loc[prep.rows] = prep.group_labels[g]
                gcols.append(gname)
            # Covariates go over as the design's own columns, after intercept and condition.
            xcols: list[str] = []
            first_cov = len(prep.fixed_names) - len(job.covariates)
            for j in range(len(job.covariates)):
                xname = f"x{i}_{j}"
                columns[xname] = pd.Series(np.nan, index=df.index)
                columns[xname].loc[prep.rows] = prep.X[:, first_cov + j]
                xcols.append(xname)
            specs.append(
                {
                    "id": i,
                    "metric": ycol,
                    "condition_col": ccol,
                    "levels": prep.levels,
                    "group_cols": gcols,
                    "covariate_cols": xcols,
                    "reml": bool(job.reml),
                    "satterthwaite": bool(job.satterthwaite),
                }
            )
        csv_path = tmpdir / "data.csv"
        pd.DataFrame(columns).to_csv(csv_path, index=False)
        out_path = tmpdir / "out.json"
        spec_path = tmpdir / "spec.json"
        spec_path.write_text(
            json.dumps({"csv": str(csv_path), "out": str(out_path), "jobs": specs})
        )
        script = tmpdir / "fit.R"
        script.write_text(_R_SCRIPT)
        env = dict(os.environ)
        proc = subprocess.run(
            ["Rscript", "--vanilla", str(script), str(spec_path)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
        )
        if proc.returncode != 0 or not out_path.exists():
            raise RuntimeError(f"Rscript failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        raw = json.loads(out_path.read_text())
    return [_to_result(job, prep, r) for job, prep, r in zip(jobs, prepared, raw, strict=True)]


def _to_result(job: RJob, prep: Any, r: dict[str, Any]) -> MixedResult:
    names = prep.fixed_names
    coef = np.asarray(r["coef"], dtype=float)
    se = np.asarray(r["se"], dtype=float)
    if len(coef) != len(names):
        raise RuntimeError(f"lme4 returned terms {r['terms']} for {names}")
    z = coef / se
    p = 2 * stats.norm.sf(np.abs(z))
    q = stats.norm.ppf(0.975)
    fixed = [
        {
            "term": name,
            "coef": float(c),
            "se": float(s),
            "z": float(zz),
            "p": float(pp),
            "ci_low": float(c - q * s),
            "ci_high": float(c + q * s),
            "df": None,
        }
        for name, c, s, zz, pp in zip(names, coef, se, z, p, strict=True)
    ]
    df_satt = _as_list(r.get("df", []))
    p_satt = _as_list(r.get("p_satt", []))
    method = "Wald z (normal)"
    if job.satterthwaite:
        if len(df_satt) == len(names):
            for row, d, pt in zip(fixed, df_satt, p_satt, strict=True):
                row["df"] = None if d is None else float(d)
                row["p_satterthwaite"] = None if pt is None else float(pt)
            method = "Wald z (normal); lmerTest Satterthwaite df and t p-values"
        else:
            method = "Wald z (normal); lmerTest could not compute Satterthwaite df"
    col_to_group = {f"g{r['id']}_{j}": g for j, g in enumerate(prep.groups_used)}
    variance: dict[str, float] = {}
    for grp, var in zip(_as_list(r["vc_grp"]), _as_list(r["vc_var"]), strict=True):
        key = "residual" if grp == "Residual" else col_to_group[grp]
        variance[key] = float(var)
    n_levels = {
        col_to_group[g]: int(v)
        for g, v in zip(_as_list(r["ngrps_names"]), _as_list(r["ngrps"]), strict=True)
    }
    thetas = _as_list(r["theta"])
    # lme4 orders random-effect terms by decreasing number of levels.
    order = [col_to_group[g] for g in _as_list(r["ngrps_names"])]
    boundary = [g for g, t in zip(order, thetas, strict=True) if float(t) < 1e-4]
    msgs = [str(m) for m in _as_list(r.get("messages", []))]
    return MixedResult(
        metric=job.metric,
        engine="lme4",
        reml=job.reml,
        baseline=job.baseline,
        fixed=fixed,
        variance=variance,
        loglik=float(r["loglik"]),
        n_obs=int(r["n_obs"]),
        n_levels=n_levels,
        groups_used=list(prep.groups_used),
        groups_dropped=dict(prep.groups_dropped),
        starts=[float(r["loglik"])],
        starts_agree=True,
        converged=not msgs,
        boundary=boundary,
        warnings=msgs,
        p_value_method=method,
        fit_seconds=float(r["seconds"]),
    )


def _as_list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else [x]


# ------------------------------------------------------------------ ordinal::clmm

_CLMM_SCRIPT = r"""
suppressPackageStartupMessages({library(ordinal); library(jsonlite)})
args <- commandArgs(trailingOnly = TRUE)
spec <- fromJSON(args[1], simplifyVector = FALSE)
dat <- read.csv(spec$csv, stringsAsFactors = FALSE, colClasses = "character")
out <- list()
for (job in spec$jobs) {
  d <- data.frame(y = as.numeric(dat[[job$metric]]))
  d$condition <- factor(dat[[job$condition_col]], levels = unlist(job$levels))
  gcols <- unlist(job$group_cols)
  for (g in gcols) d[[g]] <- factor(dat[[g]])
  d <- d[!is.na(d$y), , drop = FALSE]
  d$y <- factor(d$y, ordered = TRUE)
  rhs <- paste0("(1 | ", gcols, ")", collapse = " + ")
  form <- as.formula(paste("y ~ condition +", rhs))
  t0 <- proc.time()[["elapsed"]]
  fit <- clmm(form, data = d, link = "logit", threshold = "flexible",
              control = clmm.control(gradTol = job$grad_tol))
  secs <- proc.time()[["elapsed"]] - t0
  st <- unlist(fit$ST)
  out[[length(out) + 1]] <- list(
    id = job$id, alpha_names = names(fit$alpha), alpha = unname(fit$alpha),
    beta_names = names(fit$beta), beta = unname(fit$beta),
    se = unname(sqrt(diag(vcov(fit)))[seq_len(length(fit$alpha) + length(fit$beta))]),
    st_names = names(st), st = unname(st), loglik = as.numeric(logLik(fit)),
    n_obs = nrow(d), seconds = secs
  )
}
writeLines(toJSON(out, auto_unbox = TRUE, digits = NA, na = "null"), spec$out)
"""


@dataclass(frozen=True)
class ClmmJob:
    """One ``ordinal::clmm`` fit: ``ordered(metric) ~ condition + (1|g) ...``, logit link."""

    metric: str
    baseline: str
    condition_col: str = "condition"
    groups: tuple[str, ...] = ("reviewer_id", "idea_id")
    grad_tol: float = 1e-8


@dataclass(frozen=True)
class ClmmFit:
    """One ``ordinal::clmm`` fit as R returned it (`clmm_fit_many`).

    Attributes
    ----------
    engine
        ``"ordinal::clmm"``.
    thresholds, fixed
        Lists of ``{term, coef, se}``; fixed terms named as
        :func:`~studies.analysis.ordinal.fit_ordinal` names them.
    sd
        Random-intercept SD per grouping factor.
    loglik, n_obs
        The log-likelihood and the rows fitted.
    fit_seconds
        R's own fit time.
    """

    engine: str
    thresholds: list[dict[str, Any]]
    fixed: list[dict[str, Any]]
    sd: dict[str, float]
    loglik: float
    n_obs: int
    fit_seconds: float


@functools.cache
def ordinal_unavailable_reason() -> str | None:
    """Why ``ordinal::clmm`` cannot be used here, or ``None`` when it can."""
    return _r_probe(
        "quit(status = !(requireNamespace('ordinal', quietly = TRUE) && "
        "requireNamespace('jsonlite', quietly = TRUE)))",
        "R is installed but ordinal or jsonlite is missing (apt-get install r-cran-ordinal)",
    )


def clmm_fit_many(
    df: pd.DataFrame, jobs: Sequence[ClmmJob], *, timeout: float = 3600.0
) -> list[ClmmFit]:
    """Run every clmm job in one ``Rscript`` process; results come back in job order.

    Parameters
    ----------
    df
        The review frame holding every job's columns.
    jobs
        The fits to run.
    timeout
        Seconds the ``Rscript`` process may take.

    Returns
    -------
    list of ClmmFit
        One fit per job, in job order.
    """
    reason = ordinal_unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"ordinal::clmm is unavailable: {reason}")
    columns: dict[str, pd.Series] = {}
    specs: list[dict[str, Any]] = []
    prepared = []
    for i, job in enumerate(jobs):
        prep = prepare_mixed_data(
            df, job.metric, baseline=job.baseline, condition_col=job.condition_col,
            groups=job.groups,
        )  # fmt: skip
        prepared.append(prep)
        columns[f"y{i}"] = pd.Series(np.nan, index=df.index)
        columns[f"y{i}"].loc[prep.rows] = prep.y
        columns[f"c{i}"] = pd.Series("", index=df.index)
        columns[f"c{i}"].loc[prep.rows] = prep.condition
        gcols = []
        for j, g in enumerate(prep.groups_used):
            columns[f"g{i}_{j}"] = pd.Series("", index=df.index)
            columns[f"g{i}_{j}"].loc[prep.rows] = prep.group_labels[g]
            gcols.append(f"g{i}_{j}")
        specs.append(
            {
                "id": i, "metric": f"y{i}", "condition_col": f"c{i}", "levels": prep.levels,
                "group_cols": gcols, "grad_tol": job.grad_tol,
            }
        )  # fmt: skip
    raw = _run_r(_CLMM_SCRIPT, pd.DataFrame(columns), specs, timeout=timeout)
    return [_clmm_result(p, r) for p, r in zip(prepared, raw, strict=True)]


def _run_r(
    script: str, data: pd.DataFrame, specs: list[dict[str, Any]], *, timeout: float
) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="ideareview-r-") as tmp:
        tmpdir = Path(tmp)
        csv_path, out_path = tmpdir / "data.csv", tmpdir / "out.json"
        data.to_csv(csv_path, index=False)
        spec_path = tmpdir / "spec.json"
        spec_path.write_text(
            json.dumps({"csv": str(csv_path), "out": str(out_path), "jobs": specs})
        )
        script_path = tmpdir / "fit.R"
        script_path.write_text(script)
        proc = subprocess.run(
            ["Rscript", "--vanilla", str(script_path), str(spec_path)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0 or not out_path.exists():
            raise RuntimeError(f"Rscript failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        return list(json.loads(out_path.read_text()))


def _clmm_result(prep: Any, r: dict[str, Any]) -> ClmmFit:
    alpha = [float(a) for a in _as_list(r["alpha"])]
    beta = [float(b) for b in _as_list(r["beta"])]
    se = [float(s) for s in _as_list(r["se"])]
    # R names the condition terms "conditionAI"; ours are "condition[AI]" in the same order.
    by_level = {f"condition{lv}": f"condition[{lv}]" for lv in prep.levels}
    names = [by_level[str(n)] for n in _as_list(r["beta_names"])]
    col_to_group = {f"g{r['id']}_{j}": g for j, g in enumerate(prep.groups_used)}
    return ClmmFit(
        engine="ordinal::clmm",
        thresholds=[
            {"term": str(n), "coef": a, "se": s}
            for n, a, s in zip(_as_list(r["alpha_names"]), alpha, se, strict=False)
        ],
        fixed=[
            {"term": n, "coef": b, "se": s}
            for n, b, s in zip(names, beta, se[len(alpha) :], strict=True)
        ],
        sd={
            col_to_group[str(n)]: float(v)
            for n, v in zip(_as_list(r["st_names"]), _as_list(r["st"]), strict=True)
        },
        loglik=float(r["loglik"]),
        n_obs=int(r["n_obs"]),
        fit_seconds=float(r["seconds"]),
    )
