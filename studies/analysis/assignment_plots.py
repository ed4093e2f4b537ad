"""Small plots of an assignment preview, drawn from `protocol.assignment.preview_summary`.

Each is its own SVG (not one wide figure) so that on a phone they stack and stay legible.
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Mapping
from typing import Any

from .plots import PALETTE, _svg, memoised, pyplot
from .rounding import fixed


def _bars(ax: Any, levels: list[int], series: Mapping[str, Counter[int]]) -> None:
    width = 0.8 / max(1, len(series))
    for k, (label, counts) in enumerate(series.items()):
        offset = (k - (len(series) - 1) / 2) * width
        ax.bar(
            [x + offset for x in levels],
            [counts.get(x, 0) for x in levels],
            width,
            label=label,
            color=PALETTE[k % len(PALETTE)],
        )
    ax.set_xticks(levels)
    # Room beside the outer bars, so that one level alone still reads as bars, not a block.
    ax.set_xlim(min(levels) - 0.7, max(levels) + 0.7)
    if len(series) > 1:
        # Above the axes: bars can fill the whole plot, and a legend inside would cover them.
        ax.legend(
            frameon=False, fontsize=8, loc="lower left", bbox_to_anchor=(0, 1), ncol=len(series)
        )


@memoised  # the preview page draws them on every visit
def load_plot(summary: Mapping[str, Any]) -> str:
    rows = summary["reviewers"]
    asked = Counter(r["load_min"] for r in rows)
    got = Counter(r["assigned"] for r in rows)
    fig, ax = pyplot().subplots(figsize=(3.6, 2.4))
    _bars(ax, sorted(set(asked) | set(got)) or [0], {"asked for": asked, "assigned": got})
    ax.set_xlabel("ideas per reviewer")
    ax.set_ylabel("reviewers")
    return _svg(fig, "Reviewer loads: asked for and assigned")


@memoised  # the preview page draws them on every visit
def reviews_per_idea_plot(summary: Mapping[str, Any]) -> str:
    hist = Counter({k: n for k, n in summary["reviews_per_idea"]})
    fig, ax = pyplot().subplots(figsize=(3.6, 2.4))
    _bars(ax, sorted(hist) or [0], {"ideas": hist})
    ax.set_xlabel("reviews per idea")
    ax.set_ylabel("ideas")
    return _svg(fig, "Reviews per idea")


@memoised  # the preview page draws them on every visit
def conditions_plot(summary: Mapping[str, Any]) -> str:
    conds = summary["conditions"]
    series = {
        c: Counter(r["conditions"][k] for r in summary["reviewers"]) for k, c in enumerate(conds)
    }
    levels = sorted({x for counts in series.values() for x in counts}) or [0]
    fig, ax = pyplot().subplots(figsize=(3.6, 2.4))
    _bars(ax, levels, series)
    ax.set_xlabel("ideas of the condition per reviewer")
    ax.set_ylabel("reviewers")
    return _svg(fig, "Conditions per reviewer")


@memoised  # the preview page draws them on every visit
def topic_choice_plot(summary: Mapping[str, Any]) -> str:
    use = summary["topic_choice"]
    fig, ax = pyplot().subplots(figsize=(3.6, 1.6))
    labels = ["first choice", "second choice"]
    values = [use["first"], use["second"]]
    ax.barh(labels, values, color=PALETTE[:2])
    total = sum(values) or 1
    for y, v in enumerate(values):
        ax.text(v, y, f" {v} ({fixed(100 * v / total, 0)} %)", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("reviews by reviewers who chose two topics")
    return _svg(fig, "Topic-choice use")


def _data_uri(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode("ascii")


def assignment_figures(summary: Mapping[str, Any]) -> list[dict[str, str]]:
    """[{title, src}] in the order the preview shows them. Each SVG goes in an <img> as a
    data URI: matplotlib's SVG styles its shapes with style attributes, which the site's
    Content-Security-Policy (no inline styles) would strip from inline SVG, leaving
    black boxes; an image is its own document, outside the page's policy.

    Parameters
    ----------
    summary
        The assignment preview's summary (loads, reviews per idea, conditions per
        reviewer, topic_choice).

    Returns
    -------
    list of dict
        ``{"title", "src"}`` per figure, what the preview template reads as is.
    """
    figures = [
        ("Loads: asked for and assigned", load_plot(summary)),
        ("Reviews per idea", reviews_per_idea_plot(summary)),
        ("Conditions per reviewer", conditions_plot(summary)),
    ]
    # Only reviewers who chose two topics have a second choice to draw from; without any,
    # the plot would be two empty bars on a meaningless axis (the page says why it is left out).
    use = summary["topic_choice"]
    if use["first"] + use["second"]:
        figures.append(("First and second topic choice", topic_choice_plot(summary)))
    return [{"title": title, "src": _data_uri(svg)} for title, svg in figures]
