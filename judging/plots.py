"""Figures for the judge pages as inline SVG strings (matplotlib, no display, no files)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from studies.analysis.plots import memoised, pyplot

from .methods.svg import figure_svg

COLOR = "#2f5da8"
MAX_ROWS = 40


@memoised
def ratings_plot(
    rows: Sequence[Mapping[str, Any]], *, title: str, xlabel: str = "score", heading: bool = True
) -> str:
    """One dot per idea with its interval where there is one, best at the top; `title`
    drawn above it only with `heading` (a page that heads the figure itself passes False)."""
    scored = [r for r in rows if r.get("score") is not None][:MAX_ROWS]
    if not scored:
        return ""
    scored = sorted(scored, key=lambda r: r["score"])
    fig, ax = pyplot().subplots(figsize=(6.4, 0.9 + 0.22 * len(scored)))
    ys = list(range(len(scored)))
    for y, r in zip(ys, scored, strict=True):
        if r.get("ci_low") is not None and r.get("ci_high") is not None:
            ax.plot([r["ci_low"], r["ci_high"]], [y, y], color=COLOR, alpha=0.45, lw=2)
    ax.plot([r["score"] for r in scored], ys, "o", color=COLOR, ms=4)
    ax.set_yticks(ys, [str(r["label"])[:48] for r in scored], fontsize=7)
    ax.set_xlabel(xlabel)
    if heading:
        ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return figure_svg(fig, title)


@memoised
def elo_history_plot(histories: Mapping[str, Sequence[float]], *, title: str) -> str:
    """Each idea's score after each Elo step (step 0 is the initial score)."""
    series = {k: list(v) for k, v in histories.items() if v}
    if not series:
        return ""
    fig, ax = pyplot().subplots(figsize=(6.4, 3.2))
    for label, scores in list(series.items())[:12]:
        ax.plot(range(len(scores)), scores, marker=".", ms=3, lw=1, label=str(label)[:30])
    ax.set_xlabel("comparison step")
    ax.set_ylabel("score (0–5)")
    ax.set_ylim(0, 5)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if len(series) <= 12:
        ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return figure_svg(fig, title)
