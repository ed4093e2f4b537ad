"""Report figures as inline SVG strings (matplotlib, no display, no files).

Each function takes plain tables and returns one `<svg>` element, so the same figure goes
into the self-contained HTML file, the web page and, later, a PDF.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3"]
plt.rcParams.update(
    {
        "svg.fonttype": "none",  # text stays text: searchable, small, crisp
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.titlesize": 10,
        "figure.dpi": 100,
    }
)


def _svg(fig: Any, title: str) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Title": title})
    plt.close(fig)
    text = buf.getvalue()
    start = text.find("<svg")
    text = text[start:] if start >= 0 else text
    # The RDF metadata block names external vocabularies; the figure needs none of it.
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)


def _colors(conditions: Sequence[str]) -> dict[str, str]:
    return {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(conditions)}


def score_distributions(
    df: pd.DataFrame,
    metrics: Sequence[str],
    conditions: Sequence[str],
    *,
    lo: int = 1,
    hi: int = 10,
) -> str:
    """Share of reviews at each score level, per condition, one panel per metric."""
    colors = _colors(conditions)
    n = len(metrics)
    fig, axes = plt.subplots(1, n, figsize=(3.0 * n, 2.6), sharey=True, squeeze=False)
    levels = np.arange(lo, hi + 1)
    width = 0.8 / max(len(conditions), 1)
    for ax, metric in zip(axes[0], metrics, strict=True):
        for j, cond in enumerate(conditions):
            x = df.loc[df["condition"] == cond, metric].dropna().round().astype(int)
            share = x.value_counts(normalize=True).reindex(levels, fill_value=0.0)
            ax.bar(
                levels + (j - (len(conditions) - 1) / 2) * width,
                share.values,
                width,
                color=colors[cond],
                label=f"{cond} (n={len(x)})",
            )
            if len(x):
                ax.axvline(x.mean(), color=colors[cond], lw=1, ls="--")
        ax.set_title(metric)
        ax.set_xticks(levels)
        ax.set_xlabel("score (dashed: mean)")
    axes[0][0].set_ylabel("share of reviews")
    axes[0][-1].legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig, "Score distributions per condition")


def topic_means(table: pd.DataFrame, metric: str, conditions: Sequence[str]) -> str:
    """Mean and 95 % CI per topic and condition for one metric.

    `table` has columns topic, condition, metric, n, mean, ci_low, ci_high.
    """
    colors = _colors(conditions)
    t = table[table["metric"] == metric]
    topics = sorted(t["topic"].unique())
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(topics) + 1.0))
    offsets = np.linspace(-0.25, 0.25, max(len(conditions), 1))
    for j, cond in enumerate(conditions):
        rows = t[t["condition"] == cond].set_index("topic").reindex(topics)
        y = np.arange(len(topics)) + offsets[j]
        mean = rows["mean"].to_numpy(dtype=float)
        lo = rows["ci_low"].to_numpy(dtype=float)
        hi = rows["ci_high"].to_numpy(dtype=float)
        ok = ~np.isnan(mean)
        err = np.vstack([mean - lo, hi - mean])[:, ok]
        ax.errorbar(
            mean[ok],
            y[ok],
            xerr=np.nan_to_num(err),
            fmt="o",
            ms=4,
            color=colors[cond],
            label=cond,
            capsize=2,
            lw=1,
        )
    ax.set_yticks(np.arange(len(topics)))
    ax.set_yticklabels(topics)
    ax.invert_yaxis()
    ax.set_xlabel(f"mean {metric} score (95% CI)")
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig, f"Per-topic means: {metric}")


def correlation_heatmap(matrix: pd.DataFrame, *, title: str = "") -> str:
    labels = list(matrix.columns)
    values = matrix.to_numpy(dtype=float)
    fig, ax = plt.subplots(figsize=(0.75 * len(labels) + 1.6, 0.65 * len(labels) + 0.8))
    im = ax.imshow(values, vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=35, ha="right")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    for i in range(len(labels)):
        for j in range(len(labels)):
            v = values[i, j]
            ax.text(
                j,
                i,
                "" if np.isnan(v) else f"{v:.2f}",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if abs(v) > 0.6 else "black",
            )
    if title:
        ax.set_title(title)
    fig.colorbar(im, ax=ax, shrink=0.8)
    return _svg(fig, title or "Correlations")


def coefficient_plot(rows: Sequence[Mapping[str, Any]], *, baseline: str) -> str:
    """Forest plot of condition effects (vs the baseline) with 95 % CIs, one row per
    metric × condition. `rows` hold metric, term, coef, ci_low, ci_high."""
    rows = [r for r in rows if r.get("coef") is not None]
    fig, ax = plt.subplots(figsize=(6.4, 0.32 * len(rows) + 1.0))
    terms = sorted({r["term"] for r in rows})
    colors = {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(terms)}
    for i, r in enumerate(rows):
        lo, hi = r.get("ci_low"), r.get("ci_high")
        if lo is not None and hi is not None:
            ax.plot([lo, hi], [i, i], color=colors[r["term"]], lw=1.5)
        ax.plot([r["coef"]], [i], "o", color=colors[r["term"]], ms=4)
    ax.axvline(0, color="#888", lw=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r['metric']}: {r['term']}" for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel(f"difference from {baseline} (mixed model, 95% CI)")
    return _svg(fig, "Mixed-model condition effects")


def histogram(
    values: Sequence[float], *, xlabel: str, reference: Mapping[str, float] | None = None
) -> str:
    fig, ax = plt.subplots(figsize=(5.0, 2.4))
    ax.hist(np.asarray(values, dtype=float), bins=30, color=PALETTE[0], alpha=0.85)
    for i, (label, x) in enumerate((reference or {}).items()):
        ax.axvline(x, color=PALETTE[(i + 1) % len(PALETTE)], ls="--", lw=1, label=label)
    if reference:
        ax.legend(frameon=False, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("splits")
    return _svg(fig, xlabel)
