"""The judge page's figures: drawn once per set of inputs, drawn anew when a run changes."""

from __future__ import annotations

import pytest

from judging import plots
from studies.analysis import plots as report_plots


@pytest.fixture
def drawings(monkeypatch):
    calls = []
    plt = plots.pyplot()
    subplots = plt.subplots

    def counting(*args, **kwargs):
        calls.append(args)
        return subplots(*args, **kwargs)

    monkeypatch.setattr(plt, "subplots", counting)
    plots.ratings_plot.memo.clear()
    plots.elo_history_plot.memo.clear()
    return calls


def _rows(score_b=2.5):
    return [
        {"label": "Idea A", "score": 3.1, "ci_low": 2.0, "ci_high": 4.0},
        {"label": "Idea B", "score": score_b, "ci_low": None, "ci_high": None},
    ]


def test_a_page_opened_again_reuses_the_figure_and_a_changed_run_redraws(drawings):
    first = plots.ratings_plot(_rows(), title="Pairwise", xlabel="score")
    again = plots.ratings_plot(_rows(), title="Pairwise", xlabel="score")
    assert first.startswith("<svg") or "<svg" in first
    assert again == first and len(drawings) == 1
    changed = plots.ratings_plot(_rows(score_b=4.2), title="Pairwise", xlabel="score")
    assert changed != first and len(drawings) == 2
    retitled = plots.ratings_plot(_rows(), title="Swiss wins", xlabel="score")
    assert "Swiss wins" in retitled and len(drawings) == 3


def test_the_memo_stays_bounded(drawings, monkeypatch):
    monkeypatch.setattr(report_plots, "MEMO_SIZE", 3)
    for step in range(6):
        plots.elo_history_plot({"Idea A": [2.0, 2.0 + step / 10]}, title="Elo")
    assert len(plots.elo_history_plot.memo) == 3
    plots.elo_history_plot({"Idea A": [2.0, 2.5]}, title="Elo")  # still held: no drawing
    assert len(drawings) == 6
    plots.elo_history_plot({"Idea A": [2.0, 2.0]}, title="Elo")  # pushed out: drawn again
    assert len(drawings) == 7
