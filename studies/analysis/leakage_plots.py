"""The style-leakage figure as an inline SVG: ROC curves and AUCs before/after normalization.

Same conventions as `plots.py` (whose style settings it reuses): plain inputs, one `<svg>`
string out, no files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .plots import PALETTE, _svg, pyplot
from .rounding import fixed

__all__ = ["leakage_svg"]


def leakage_svg(results: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """`results`: (label, result dict from `LeakageResult.to_dict`) pairs, in order.

    Left: each side's out-of-fold ROC curve against the chance diagonal. Right: each
    side's AUC with its CI against 0.5 (chance) and 1 (the source is obvious).
    """
    shown = [(label, r) for label, r in results if r.get("auc") is not None]
    fig, (roc_ax, auc_ax) = pyplot().subplots(
        1, 2, figsize=(6.4, 2.6), gridspec_kw={"width_ratios": [1, 1.15]}
    )
    roc_ax.plot([0, 1], [0, 1], color="#999999", lw=0.8, ls=":")
    for i, (label, r) in enumerate(shown):
        points = r.get("roc") or []
        if points:
            fpr, tpr = zip(*points, strict=True)
            roc_ax.plot(fpr, tpr, color=PALETTE[i % len(PALETTE)], lw=1.5, label=label)
    roc_ax.set_xlim(0, 1)
    roc_ax.set_ylim(0, 1.02)
    roc_ax.set_aspect("equal")
    roc_ax.set_xlabel("human ideas called AI")
    roc_ax.set_ylabel("AI ideas called AI")
    roc_ax.set_title("ROC (out of fold)")
    if shown:
        roc_ax.legend(frameon=False, fontsize=8, loc="lower right")

    auc_ax.axvline(0.5, color="#999999", lw=0.8, ls=":")
    for i, (_label, r) in enumerate(shown):
        auc, lo, hi = float(r["auc"]), r.get("ci_low"), r.get("ci_high")
        err = None
        if lo is not None and hi is not None and not math.isnan(float(lo)):
            err = [[max(0.0, auc - float(lo))], [max(0.0, float(hi) - auc)]]
        auc_ax.errorbar(
            [auc],
            [i],
            xerr=err,
            fmt="o",
            ms=5,
            capsize=3,
            lw=1.2,
            color=PALETTE[i % len(PALETTE)],
        )
        auc_ax.annotate(
            fixed(auc, 2), (auc, i), textcoords="offset points", xytext=(0, 6), ha="center"
        )
    auc_ax.set_yticks(range(len(shown)))
    auc_ax.set_yticklabels([label for label, _ in shown])
    auc_ax.set_ylim(-0.7, max(len(shown), 1) - 0.3)
    auc_ax.invert_yaxis()
    auc_ax.set_xlim(0, 1.02)
    auc_ax.set_xlabel("AUC (95% CI); 0.5 = chance")
    auc_ax.set_title("Can the source be told?")
    fig.tight_layout()
    return _svg(fig, "Style leakage before and after normalization")
