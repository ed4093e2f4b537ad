"""How every number of the report is written: fixed decimals rounded half away from zero.

One definition for the report's templates (`studies/templatetags/report_format.py`) and
for the sentences, table cells and plot labels written in Python, so a number reads the
same wherever it appears. The rounding is done on the number as it is written (its
shortest decimal form): 3.25 shows as 3.3 and 3.75 as 3.8, 2.675 at two places as 2.68.
Python's own formatting (f"{x:.2f}") rounds the binary float to even, which shows 3.25
as 3.2 beside 3.75 as 3.8, and 2.675 as 2.67. Pure: no Django.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Any


def fixed(value: float, digits: int, *, percent: bool = False) -> str:
    """`value` (times 100 when `percent`, in decimal, so 0.0285 is 2.85) with `digits`
    decimals, rounded half away from zero as the module says; infinities and NaN as
    Python writes them."""
    if not math.isfinite(value):
        return f"{100 * value if percent else value:.{digits}f}"
    exact = Decimal(repr(float(value))).scaleb(2 if percent else 0)
    return f"{exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP):f}"


def percent_text(value: float, digits: int = 1) -> str:
    """A share as a percentage: 0.4625 at one decimal is "46.3%"."""
    return f"{fixed(float(value), digits, percent=True)}%"


def p_text(value: float) -> str:
    """A p-value: "1" from 0.9995 up, three decimals down to 0.001, then two significant
    digits in scientific notation."""
    p = float(value)
    if p >= 0.9995:
        return "1"
    if p >= 0.001:
        return fixed(p, 3)
    return f"{p:.2e}"


#: The minus sign of numbers written for reading (U+2212): "−0.72", not the hyphen "-0.72".
MINUS = "\u2212"


def signed_text(text: str) -> str:
    """A number already written (`fixed`, `percent_text`) with a true minus sign for a
    negative one, and no sign at all on one that rounds to zero ("-0.00" is "0.00")."""
    if not text.startswith("-"):
        return text
    if any(ch in "123456789" for ch in text) or "inf" in text:
        return MINUS + text[1:]
    return text[1:]


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def interval_text(low: Any, high: Any, digits: int = 3, *, percent: bool = False) -> str:
    """An interval for reading: "−1.67 to −0.06", each bound with `digits` decimals (as a
    percentage when `percent`) and a true minus sign; a single "—" when either bound is
    missing (None or NaN). Machine-readable files keep the numbers themselves."""
    if _missing(low) or _missing(high):
        return "—"

    def bound(value: Any) -> str:
        v = float(value)
        return signed_text(percent_text(v, digits) if percent else fixed(v, digits))

    return f"{bound(low)} to {bound(high)}"


def line_text(intercept: float, slope: float, x: str, digits: int = 2) -> str:
    """A fitted line a + b·x for reading: "10.10 − 0.72·judge", not "10.10 + -0.72·judge"."""
    a = signed_text(fixed(float(intercept), digits))
    b = signed_text(fixed(float(slope), digits))
    sign, size = ("−", b[1:]) if b.startswith(MINUS) else ("+", b)
    return f"{a} {sign} {size}·{x}"


#: Decimals of each number format a report table cell names (`format`).
CELL_DIGITS = {"pct": 1, "num1": 1, "num2": 2, "num3": 3, "money": 4}


def cell_number(value: Any, fmt: str) -> str:
    """One number of a report table cell in the cell's `format` ("–" when missing):
    pct as a percentage, the others with `CELL_DIGITS` decimals (unknown: three)."""
    if value is None:
        return "–"
    v = float(value)
    if fmt == "pct":
        return percent_text(v, CELL_DIGITS["pct"])
    return fixed(v, CELL_DIGITS.get(fmt, 3))


def cell_text(c: Any) -> str:
    """An agreement-table cell: value (CI as `interval_text`), or "–" when it could not be computed; the
    chance row's value is followed by the range of its random rankings, not a CI."""
    if not c:
        return ""
    fmt = c.get("format", "num3")
    text = signed_text(cell_number(c.get("value"), fmt))
    if c.get("value") is None:
        return text
    digits, percent = CELL_DIGITS.get(fmt, 3), fmt == "pct"
    if c.get("ci_low") is not None and c.get("ci_high") is not None:
        text += f" ({interval_text(c['ci_low'], c['ci_high'], digits, percent=percent)})"
    if c.get("range_low") is not None:
        within = interval_text(c["range_low"], c.get("range_high"), digits, percent=percent)
        text += f" (95 % range {within})"
    if c.get("k") is not None:
        text += f" of {c['k']}"
    return text


def counted(n: int, word: str, plural: str | None = None) -> str:
    """ "1 idea", "3 ideas", "0 ideas": a count with its noun in the right number.

    ``plural`` is for a word that does not just add an "s" ("reply", "replies")."""
    return f"{n} {word if n == 1 else (plural or word + 's')}"
