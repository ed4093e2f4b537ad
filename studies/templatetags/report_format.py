"""Number formatting for reports: fixed decimals for estimates, readable p-values.

The rounding (half away from zero) is `studies.analysis.rounding`'s, shared with the
report's sentences and plot labels written in Python.
"""

from __future__ import annotations

import math
from typing import Any

from django import template

from studies.analysis.plan_voice import stars_for
from studies.analysis.rounding import cell_text, fixed, p_text, percent_text

register = template.Library()


@register.filter
def num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    try:
        return fixed(float(value), int(digits))
    except (TypeError, ValueError):
        return str(value)


@register.filter
def pval(value: Any) -> str:
    if value is None:
        return "–"
    return p_text(value)


@register.filter
def pct(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    return percent_text(float(value), int(digits))


@register.filter
def stars(value: Any) -> str:
    if value is None:
        return ""
    p = float(value)
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


@register.filter
def plan_stars(value: Any, alpha: Any) -> str:
    """Stars of an adjusted p under the plan's alpha (studies.analysis.plan_voice)."""
    if value is None or alpha is None:
        return ""
    return stars_for(float(value), float(alpha))


FACTOR_LABELS = {
    "source_idea_id": "idea (one id per condition)",
    "idea_id": "idea",
    "reviewer_id": "reviewer",
    "topic": "topic",
    "residual": "residual",
}


@register.filter
def factor(name: str) -> str:
    """A readable label for a grouping column of the analysis frame."""
    return FACTOR_LABELS.get(name, name)


@register.filter
def get(mapping: Any, key: Any) -> Any:
    try:
        return mapping.get(key) if hasattr(mapping, "get") else mapping[key]
    except (KeyError, IndexError, TypeError):
        return None


@register.filter
def cell(c: Any) -> str:
    """An agreement-table cell as `studies.analysis.rounding.cell_text` writes it."""
    return cell_text(c)
