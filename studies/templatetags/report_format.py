"""Number formatting for reports: fixed decimals for estimates, readable p-values.

Every fixed-decimal number is rounded half away from zero, on the number as it is
written (its shortest decimal form): 3.25 shows as 3.3 and 3.75 as 3.8, 2.675 at two
places as 2.68. Python's own formatting rounds the binary float to even, which shows
3.25 as 3.2 beside 3.75 as 3.8 in the same column.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django import template

from studies.analysis.plan_voice import stars_for

register = template.Library()


def fixed(value: float, digits: int, *, percent: bool = False) -> str:
    """`value` (times 100 when `percent`, in decimal, so 0.0285 is 2.85) with `digits`
    decimals, rounded half away from zero as the module says; infinities and NaN as
    Python writes them."""
    if not math.isfinite(value):
        return f"{100 * value if percent else value:.{digits}f}"
    exact = Decimal(repr(float(value))).scaleb(2 if percent else 0)
    return f"{exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP):f}"


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
    p = float(value)
    if p >= 0.9995:
        return "1"
    if p >= 0.001:
        return fixed(p, 3)
    return f"{p:.2e}"


@register.filter
def pct(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    return f"{fixed(float(value), int(digits), percent=True)}%"


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


def _fmt(value: Any, fmt: str) -> str:
    if value is None:
        return "–"
    v = float(value)
    if fmt == "pct":
        return f"{fixed(v, 1, percent=True)}%"
    if fmt == "num1":
        return fixed(v, 1)
    if fmt == "num2":
        return fixed(v, 2)
    if fmt == "money":
        return fixed(v, 4)
    return fixed(v, 3)


@register.filter
def cell(c: Any) -> str:
    """An agreement-table cell: value, [CI], or "–" when it could not be computed; the
    chance row's value is followed by the range of its random rankings, not a CI."""
    if not c:
        return ""
    fmt = c.get("format", "num3")
    text = _fmt(c.get("value"), fmt)
    if c.get("value") is not None and c.get("ci_low") is not None and c.get("ci_high") is not None:
        text += f" [{_fmt(c['ci_low'], fmt)}, {_fmt(c['ci_high'], fmt)}]"
    if c.get("value") is not None and c.get("range_low") is not None:
        text += f" (95 % range {_fmt(c['range_low'], fmt)} to {_fmt(c['range_high'], fmt)})"
    if c.get("k") is not None and c.get("value") is not None:
        text += f" of {c['k']}"
    return text
