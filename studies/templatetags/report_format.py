"""Number formatting for reports: fixed decimals for estimates, readable p-values.

The rounding (half away from zero) is `studies.analysis.rounding`'s, shared with the
report's sentences and plot labels written in Python.
"""

from __future__ import annotations

import math
from typing import Any

from django import template

from studies.analysis.plan_voice import stars_for
from studies.analysis.rounding import cell_text, fixed, interval_text, p_text, percent_text

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


@register.filter
def interval(bounds: Any, spec: Any = 3) -> str:
    """An interval of a mapping as `studies.analysis.rounding.interval_text` writes it
    ("−1.67 to −0.06", or "—" when a bound is missing). `spec` is the decimals, or "pct"
    (or "pct0", "pct2") for a percentage with one (none, two), then optionally a comma
    and the keys' prefix: `{{ row|interval:3 }}` reads row.low and row.high (ci_low and
    ci_high when there is no "low"), `{{ c|interval:"2,pearson_ci" }}` reads
    pearson_ci_low and pearson_ci_high."""
    digits_text, _, prefix = str(spec).partition(",")
    digits_text = digits_text.strip()
    percent = digits_text.startswith("pct")
    digits = int(digits_text[3:] or 1) if percent else int(digits_text)
    if not hasattr(bounds, "get"):
        return "—"
    if prefix.strip():
        keys = (f"{prefix.strip()}_low", f"{prefix.strip()}_high")
    else:
        keys = ("low", "high") if "low" in bounds else ("ci_low", "ci_high")
    return interval_text(bounds.get(keys[0]), bounds.get(keys[1]), digits, percent=percent)
