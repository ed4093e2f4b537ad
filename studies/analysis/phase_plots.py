"""The phase comparison's slope chart as an inline SVG.

Same conventions as `plots.py` (whose style settings it reuses): plain inputs, one `<svg>`
string out, no files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .plots import _colors, _svg, pyplot

__all__ = ["phase_slopes"]


def phase_slopes(
    ideas: pd.DataFrame,
    *,
    metrics: Sequence[str],
    conditions: Sequence[str],
    labels: tuple[str, str] = ("first", "second"),
    scales: Mapping[str, Sequence[int]] | None = None,
) -> str:
    """Each idea's mean in the first and the second phase, joined, one panel per metric.

    Parameters
    ----------
    ideas:
        The comparison's idea table (``PhaseComparison.ideas``: idea, condition, metric,
        mean_first, mean_second).
    metrics, conditions:
        The panels, and the conditions in legend order (the baseline first).
    labels:
        The phases' names, written under the two ends of each line.
    scales:
        ``metric -> (minimum, maximum)``: each panel's y axis spans its metric's scale.

    Returns
    -------
    str
        One ``<svg>`` element. A thin line per idea in its condition's colour; a thick
        line with points per condition joins the means of its ideas' means, so a steeper
        fall of one condition is seen at once.
    """
    colors = _colors(conditions)
    n = len(metrics)
    fig, axes = pyplot().subplots(1, n, figsize=(2.3 * n + 0.8, 3.0), sharey=False, squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        part = ideas[(ideas["metric"] == metric)].dropna(subset=["mean_first", "mean_second"])
        for cond in conditions:
            rows = part[part["condition"] == cond]
            for a, b in zip(rows["mean_first"], rows["mean_second"], strict=True):
                ax.plot([0, 1], [a, b], color=colors[cond], lw=0.7, alpha=0.35)
        for j, cond in enumerate(conditions):
            rows = part[part["condition"] == cond]
            if rows.empty:
                continue
            means = [rows["mean_first"].mean(), rows["mean_second"].mean()]
            # A small offset keeps equal condition means from hiding each other.
            x = np.array([0.0, 1.0]) + (j - (len(conditions) - 1) / 2) * 0.03
            ax.plot(
                x,
                means,
                color=colors[cond],
                lw=2.6,
                marker="o",
                ms=5,
                label=f"{cond} ({len(rows)} ideas)",
            )
        lo, hi = (scales or {}).get(metric, (None, None))
        if lo is not None and hi is not None:
            ax.set_ylim(lo - 0.3, hi + 0.3)
        ax.set_xlim(-0.25, 1.25)
        ax.set_xticks([0, 1])
        ax.set_xticklabels(list(labels))
        ax.set_title(metric)
    axes[0][0].set_ylabel("mean score per idea")
    axes[0][-1].legend(
        title="thick: condition mean",
        title_fontsize=8,
        frameon=False,
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
    )
    return _svg(fig, f"Per-idea means, {labels[0]} and {labels[1]}")
