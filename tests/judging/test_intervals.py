"""Intervals on the judge pages: one formatter, a true minus sign, one dash when missing."""

from __future__ import annotations

from django.template.loader import render_to_string

from judging.methods.reliability import reliability_plot

MINUS = "\u2212"


def test_the_style_table_writes_intervals_low_to_high_and_a_missing_one_as_one_dash():
    block = {
        "dimension": "overall",
        "games": 40,
        "ratings": [
            {
                "condition": "AI",
                "raw": {"value": 0.1, "low": None, "high": None},
                "style_controlled": {"value": -0.9, "low": -1.666, "high": -0.055},
            }
        ],
        "beta": [{"feature": "length", "value": -0.72, "low": -19.0, "high": 7.8}],
    }
    page = render_to_string("judging/_style_bt.html", {"blocks": [block]})
    assert f"<td>{MINUS}1.666 to {MINUS}0.055</td>" in page
    assert "<td>—</td>" in page and "—–—" not in page
    assert f"({MINUS}19.00 to 7.80)" in page and "-19.00" not in page


def test_the_calibration_plot_writes_a_falling_line_with_a_minus():
    judge = {i: float(i) for i in range(1, 9)}
    human = {i: 10.1 - 0.72 * i for i in judge}
    svg = reliability_plot(judge, human)
    assert f"fit: 10.10 {MINUS} 0.72·judge" in svg and "+ -0.72" not in svg
