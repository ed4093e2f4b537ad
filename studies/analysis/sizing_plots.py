"""The power-curve figure of a pilot sizing, as an inline SVG.

Same conventions as `plots.py` (whose style settings it reuses): a plain input (the dict
of `PilotSizing.to_dict`, so a stored result can be drawn again), one `<svg>` string out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .plots import PALETTE, _svg, pyplot
from .rounding import percent_text

__all__ = ["power_curve_svg"]

_TESTS = {
    "by_review": "Test 1 (reviews)",
    "by_idea": "Test 2 (idea means)",
    "by_reviewer": "Test 3 (per reviewer)",
    "mixed": "mixed model",
}


def power_curve_svg(result: Mapping[str, Any]) -> str:
    """Power against ideas per condition (log scale), one line per number of reviews per
    idea; the recommended shape drawn solid with the band its bootstrap pilots span, the
    target power dotted, the recommended design marked with its interval shaded. The top
    axis counts the recommended shape's reviewers."""
    curve = list(result.get("curve") or [])
    design = result.get("design")
    level = float(result.get("level", 0.9))
    best_k = design["reviews_per_idea"] if design else None
    fig, ax = pyplot().subplots(figsize=(6.4, 3.3))
    for i, k in enumerate(sorted({r["reviews_per_idea"] for r in curve})):
        rows = sorted(
            (r for r in curve if r["reviews_per_idea"] == k), key=lambda r: r["ideas_per_condition"]
        )
        x = [r["ideas_per_condition"] for r in rows]
        color = PALETTE[i % len(PALETTE)]
        if k == best_k:
            band = [(r["band_low"], r["band_high"]) for r in rows]
            if all(lo is not None and hi is not None for lo, hi in band):
                ax.fill_between(
                    x,
                    [lo for lo, _ in band],
                    [hi for _, hi in band],
                    color=color,
                    alpha=0.2,
                    lw=0,
                    label=f"{percent_text(level, 0)} of bootstrap pilots",
                )
            ax.plot(x, [r["power"] for r in rows], color=color, lw=2, label=f"{k} reviews per idea")
        else:
            ax.plot(
                x, [r["power"] for r in rows], color=color, lw=1, ls="--",
                label=f"{k} reviews per idea",
            )  # fmt: skip
    ax.axhline(
        result["target_power"], color="#777777", lw=0.8, ls=":",
        label=f"target power {result['target_power']:g}",
    )  # fmt: skip
    if design:
        interval = result.get("interval_ideas_per_condition") or [None, None]
        _mark_design(ax, design, interval, x_max=_x_max(curve), level=level)
    ax.set_xscale("log")
    _plain_ticks(ax.xaxis)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("ideas per condition")
    ax.set_ylabel("power")
    if design:
        per_idea = design["n_conditions"] * design["reviews_per_idea"] / design["load"]
        top = ax.secondary_xaxis("top", functions=(lambda m: m * per_idea, lambda r: r / per_idea))
        _plain_ticks(top.xaxis)
        top.set_xlabel(
            f"reviewers ({design['reviews_per_idea']} reviews per idea, {design['load']} each)"
        )
    estimate = result.get("estimate") or {}
    h = estimate.get("hypothesis") or {}
    title = (
        f"{_TESTS.get(h.get('test', ''), h.get('test', ''))}, {h.get('metric', '')}: "
        f"{h.get('condition', '')} vs {h.get('baseline', '')} at α = {result['alpha']:.3g}"
    )
    ax.set_title(title)
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig, f"Power curve: {title}")


def _plain_ticks(axis: Any) -> None:
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _x_max(curve: list[Mapping[str, Any]]) -> float:
    return max((r["ideas_per_condition"] for r in curve), default=1.0)


def _mark_design(
    ax: Any,
    design: Mapping[str, Any],
    interval: list[float | None],
    *,
    x_max: float,
    level: float,
) -> None:
    m = design["ideas_per_condition"]
    lo, hi = interval
    if lo is not None:
        right = hi if hi is not None and math.isfinite(hi) else x_max
        ax.axvspan(
            lo,
            right,
            color="#999999",
            alpha=0.15,
            lw=0,
            label=f"{percent_text(level, 0)} interval of its ideas",
        )
    ax.axvline(m, color="#333333", lw=1)
    ax.annotate(
        f"{m} ideas per condition\n{design['n_reviewers']} reviewers, {design['n_reviews']} reviews",
        (m, 0.04),
        textcoords="offset points",
        xytext=(4, 0),
        fontsize=7.5,
    )
