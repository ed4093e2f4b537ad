"""lme4-style formulas for the crossed random-intercept engine.

``fit_formula("overall ~ C(condition, contr.treatment('Human')) * familiarity
+ (1 | topic) + (1 | reviewer_id) + (1 | idea_id)", frame)`` fits what ``lmer`` would fit
with the same formula: the fixed part goes through formulaic (Wilkinson notation:
interactions, ``C(...)`` contrasts, transforms such as ``np.log(x)``), each ``(1 | g)`` is
a crossed random intercept, and :func:`studies.analysis.lmm_sparse.fit_lmm` does the rest.

Only random intercepts are supported (the engine's ``Lambda`` is diagonal): a random slope
``(x | g)``, a correlated or nested term is refused with a message that says so, as are
missing values (nothing is dropped silently).  Pure module: no Django imports.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from .lmm_sparse import LMMFit, fit_lmm

__all__ = ["fit_formula", "parse_formula"]

_RANDOM = re.compile(r"\(([^()]*)\|([^()]*)\)")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def parse_formula(formula: str) -> tuple[str, str, list[str]]:
    """Split ``y ~ fixed + (1 | g) ...`` into (response, fixed part, grouping columns)."""
    if formula.count("~") != 1:
        raise ValueError(f"a formula needs exactly one '~' (response ~ terms): {formula!r}")
    lhs, rhs = (part.strip() for part in formula.split("~"))
    if not _NAME.match(lhs):
        raise ValueError(f"the response must be one column name, not {lhs!r}")
    groups: list[str] = []
    for match in _RANDOM.finditer(rhs):
        expr, group = match.group(1).strip(), match.group(2).strip()
        if group.startswith("|"):
            raise ValueError(
                f"({expr} || {group.lstrip('|').strip()}): uncorrelated random terms are not "
                "supported; only random intercepts (1 | g)"
            )
        if expr != "1":
            raise ValueError(
                f"random term ({expr} | {group}): only random intercepts (1 | {group}) are "
                "supported (the engine has one variance per grouping factor)"
            )
        if not _NAME.match(group):
            raise ValueError(
                f"grouping factor {group!r} in (1 | {group}): nested or interacting groups "
                "are not supported; make a column that labels the combined groups"
            )
        if group in groups:
            raise ValueError(f"(1 | {group}) appears twice")
        groups.append(group)
    fixed = _RANDOM.sub(" ", rhs)
    if "|" in fixed:
        raise ValueError(f"a '|' outside a random term '(1 | g)' in {formula!r}")
    terms = [t.strip() for t in fixed.split("+")]
    fixed = " + ".join(t for t in terms if t) or "1"
    return lhs, fixed, groups


def fit_formula(
    formula: str,
    data: pd.DataFrame,
    **options: Any,
) -> LMMFit:
    """Fit an lme4-style random-intercept formula to ``data`` (see the module docstring).

    ``options`` go to :func:`~studies.analysis.lmm_sparse.fit_lmm` unchanged (``reml``,
    ``n_starts``, ``seed``, ``backend``, ``satterthwaite``), with its defaults, so the two
    front ends cannot drift apart."""
    import formulaic  # heavy import, only needed here

    response, fixed, groups = parse_formula(formula)
    if not groups:
        raise ValueError(f"no random intercept '(1 | g)' in {formula!r}: this is not a mixed model")
    for col in [response, *groups]:
        if col not in data.columns:
            raise ValueError(f"no column {col!r} in the data (formula {formula!r})")
    y = pd.to_numeric(data[response], errors="coerce")
    bad = y.isna() & data[response].notna()
    if bad.any():
        raise ValueError(
            f"response {response!r} is not numeric in {int(bad.sum())} rows "
            f"(e.g. row {data.index[bad][0]!r})"
        )
    for col in [response, *groups]:
        missing = data[col].isna()
        if missing.any():
            raise ValueError(
                f"column {col!r} is missing in {int(missing.sum())} of {len(data)} rows "
                f"(first: row {data.index[missing][0]!r}); drop or fill those rows first"
            )
    try:
        X = formulaic.model_matrix(fixed, data, na_action="raise")
    except Exception as exc:  # formulaic raises several types; the message is what matters
        raise ValueError(f"fixed part {fixed!r} of the formula: {exc}") from exc
    names = [str(c) for c in X.columns]
    group_labels: dict[str, Any] = {g: data[g].to_numpy() for g in groups}
    return fit_lmm(
        y.to_numpy(dtype=float),
        np.asarray(X, dtype=float),
        group_labels,
        fixed_names=names,
        **options,
    )
