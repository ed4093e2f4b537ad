"""Report figures as inline SVG strings (matplotlib, no display, no files).

Each function takes plain tables and returns one `<svg>` element, so the same figure goes
into the self-contained HTML file, the web page and, later, a PDF.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from .rounding import fixed

#: Above this many markers in one panel a scatter's markers become one bitmap.
RASTER_POINTS = 2000
#: Resolution of those bitmaps: sharp at the report's size, on screen and printed.
RASTER_DPI = 200

PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3"]
STYLE = {
    "svg.fonttype": "none",  # text stays text: searchable, small, crisp
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 10,
    "figure.dpi": 100,
}


# A page that draws its figures on every request (a finished run's, an assignment
# preview's) is opened again and again with the same inputs: drawing a figure is
# matplotlib's work, looking it up is a dictionary's. Bounded, so a long-running process
# does not grow.
MEMO_SIZE = 64
Drawn = TypeVar("Drawn")


def memoised(draw: Callable[..., Drawn]) -> Callable[..., Drawn]:
    """`draw` remembering its last MEMO_SIZE figures, keyed by its arguments (as JSON), so
    changed inputs draw anew. Thread-safe: a web process serves pages from several
    threads. Every caller gets the one stored result, so `draw` returns strings or other
    immutable values. The decorated function's `memo` is the store (tests clear it)."""
    memo: OrderedDict[str, Drawn] = OrderedDict()
    lock = threading.Lock()

    @functools.wraps(draw)
    def cached(*args: Any, **kwargs: Any) -> Drawn:
        key = hashlib.sha256(
            json.dumps([args, kwargs], sort_keys=True, default=str).encode()
        ).hexdigest()
        with lock:
            if key in memo:
                memo.move_to_end(key)
                return memo[key]
        drawn = draw(*args, **kwargs)
        with lock:
            memo[key] = drawn
            while len(memo) > MEMO_SIZE:
                memo.popitem(last=False)
        return drawn

    cached.memo = memo  # type: ignore[attr-defined]
    return cached


@functools.cache
def pyplot() -> Any:
    """matplotlib's pyplot on its file-only backend with the figures' style, imported by the
    first figure drawn. Every figure of the app (the report's and the judge pages') comes
    through here, so all share one style. Importing pyplot is one of the costliest imports
    of the app, which a web or worker process that draws nothing does not pay at start-up
    (docs/measurements.md)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.style.use(STYLE)
    return plt


def _svg(fig: Any, title: str, *, dpi: float | None = None) -> str:
    """The figure as one `<svg>` element; `dpi` sets the resolution of any rasterized
    artist (vector parts are unaffected)."""
    buf = io.StringIO()
    fig.savefig(
        buf,
        format="svg",
        bbox_inches="tight",
        metadata={"Date": None, "Title": title},
        dpi=dpi or "figure",
    )
    pyplot().close(fig)
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
    scales: Mapping[str, Sequence[int]] | None = None,
) -> str:
    """Share of reviews at each score level, per condition, one panel per metric; each
    panel spans its metric's scale from `scales` (metric -> (minimum, maximum)), else
    `lo`-`hi`."""
    colors = _colors(conditions)
    n = len(metrics)
    fig, axes = pyplot().subplots(1, n, figsize=(3.0 * n, 2.6), sharey=True, squeeze=False)
    width = 0.8 / max(len(conditions), 1)
    for ax, metric in zip(axes[0], metrics, strict=True):
        m_lo, m_hi = (scales or {}).get(metric, (lo, hi))
        levels = np.arange(m_lo, m_hi + 1)
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
    fig, ax = pyplot().subplots(figsize=(6.4, 0.45 * len(topics) + 1.0))
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
    fig, ax = pyplot().subplots(figsize=(0.75 * len(labels) + 1.6, 0.65 * len(labels) + 0.8))
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
                "" if np.isnan(v) else fixed(v, 2),
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
    fig, ax = pyplot().subplots(figsize=(6.4, 0.32 * len(rows) + 1.0))
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
    fig, ax = pyplot().subplots(figsize=(5.0, 2.4))
    ax.hist(np.asarray(values, dtype=float), bins=30, color=PALETTE[0], alpha=0.85)
    for i, (label, x) in enumerate((reference or {}).items()):
        ax.axvline(x, color=PALETTE[(i + 1) % len(PALETTE)], ls="--", lw=1, label=label)
    if reference:
        ax.legend(frameon=False, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("splits")
    return _svg(fig, xlabel)


def judge_scatter(
    points: pd.DataFrame | Sequence[Mapping[str, Any]], metrics: Sequence[str]
) -> str:
    """Judge score against the human mean per idea, one panel per metric, one colour per
    judge. `points` (a table or records) hold judge (label), metric, judge_score,
    human_mean.

    A panel's markers are drawn as one embedded bitmap once it holds more than
    `RASTER_POINTS` of them (axes, labels and legend stay vector text): tens of thousands
    of vector circles make the HTML megabytes long and the PDF slow to print."""
    columns = ["judge", "metric", "judge_score", "human_mean"]
    table = (
        points[columns]
        if isinstance(points, pd.DataFrame)
        else pd.DataFrame(list(points), columns=columns)
    )
    present = set(table["metric"].unique())
    metrics = [m for m in metrics if m in present]
    if not metrics:
        return ""
    judges = list(dict.fromkeys(table["judge"].unique()))
    colors = {j: PALETTE[i % len(PALETTE)] for i, j in enumerate(judges)}
    groups = {key: part for key, part in table.groupby(["metric", "judge"], sort=False)}
    n = len(metrics)
    fig, axes = pyplot().subplots(1, n, figsize=(2.9 * n, 2.7), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        panel = [groups[(metric, j)] for j in judges if (metric, j) in groups]
        raster = sum(len(part) for part in panel) > RASTER_POINTS
        for part in panel:
            j = part["judge"].iat[0]
            ax.scatter(
                part["judge_score"].to_numpy(float),
                part["human_mean"].to_numpy(float),
                s=9,
                alpha=0.6,
                color=colors[j],
                label=f"{j} (n={len(part)})",
                rasterized=raster,
            )
        ax.set_title(metric)
        ax.set_xlabel("judge score")
    axes[0][0].set_ylabel("human mean per idea")
    axes[0][-1].legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig, "Judge score vs human mean", dpi=RASTER_DPI)


def agreement_bars(
    rows: Sequence[Mapping[str, Any]], metrics: Sequence[str], *, ceiling: Mapping[str, Any]
) -> str:
    """Balanced accuracy per judge and metric with 95 % CIs; the human ceiling per metric as
    a shaded band (its CI) with a line (its value); 50 % chance dashed.

    `rows`: label, cells {metric: {value, ci_low, ci_high}}; `ceiling`: {metric: cell}."""
    rows = [r for r in rows if any((r["cells"].get(m) or {}).get("value") for m in metrics)]
    fig, ax = pyplot().subplots(figsize=(max(4.8, 1.3 * len(metrics) + 2.4), 2.9))
    width = 0.8 / max(len(rows), 1)
    for i, m in enumerate(metrics):
        c = ceiling.get(m) or {}
        if c.get("value") is not None:
            lo, hi = c.get("ci_low"), c.get("ci_high")
            if lo is not None and hi is not None:
                ax.fill_between([i - 0.45, i + 0.45], lo, hi, color="#bbb", alpha=0.45, lw=0)
            ax.plot(
                [i - 0.45, i + 0.45],
                [c["value"]] * 2,
                color="#555",
                lw=1.5,
                label="human ceiling (95% CI)" if i == 0 else None,
            )
    for k, r in enumerate(rows):
        xs, ys, err_lo, err_hi = [], [], [], []
        for i, m in enumerate(metrics):
            cell = r["cells"].get(m) or {}
            if cell.get("value") is None:
                continue
            v = cell["value"]
            xs.append(i + (k - (len(rows) - 1) / 2) * width)
            ys.append(v)
            # A bootstrap percentile interval need not contain the point estimate (few
            # draws, a skewed statistic): the bar then shows no whisker on that side.
            err_lo.append(max(0.0, v - cell["ci_low"]) if cell.get("ci_low") is not None else 0)
            err_hi.append(max(0.0, cell["ci_high"] - v) if cell.get("ci_high") is not None else 0)
        ax.bar(xs, ys, width * 0.9, color=PALETTE[k % len(PALETTE)], label=r["label"], alpha=0.85)
        ax.errorbar(xs, ys, yerr=[err_lo, err_hi], fmt="none", ecolor="#222", lw=0.8, capsize=2)
    ax.axhline(0.5, color="#888", ls="--", lw=0.8, label="chance")
    ax.set_xticks(range(len(metrics)))
    ax.set_xticklabels(metrics)
    ax.set_ylim(0.2, 1.0)
    ax.set_ylabel("balanced accuracy")
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig, "Agreement with the reviewers against the human ceiling")


def confusion_matrices(blocks: Sequence[Mapping[str, Any]]) -> str:
    """One 3 x 3 count matrix per block: rows the judge's preference, columns the humans'
    (labels x = the id that sorts first, y = the other, tie). `blocks`: title, matrix."""
    if not blocks:
        return ""
    n = len(blocks)
    fig, axes = pyplot().subplots(1, n, figsize=(2.6 * n, 2.6), squeeze=False)
    labels = ["first id", "second id", "tie"]
    for ax, b in zip(axes[0], blocks, strict=True):
        m = np.asarray(b["matrix"], dtype=float)
        ax.imshow(m, cmap="Blues")
        for i in range(3):
            for j in range(3):
                ax.text(
                    j,
                    i,
                    f"{int(m[i, j])}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if m[i, j] > m.max() * 0.6 else "black",
                )
        ax.set_xticks(range(3))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_yticks(range(3))
        ax.set_yticklabels(labels, fontsize=7)
        ax.set_xlabel(b.get("xlabel", "humans"))
        ax.set_ylabel("judge")
        ax.set_title(b["title"], fontsize=8)
    return _svg(fig, "Pairwise confusion matrices")
