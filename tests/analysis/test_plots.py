"""The report's plots draw from the numbers they are given, whatever their shape."""

from studies.analysis import plots


def test_agreement_bars_draw_an_interval_that_misses_its_estimate():
    # A bootstrap percentile interval from few draws may lie wholly above (or below) the
    # point estimate; matplotlib refuses negative whisker lengths.
    rows = [
        {"label": "judge A", "cells": {"overall": {"value": 0.6, "ci_low": 0.62, "ci_high": 0.8}}},
        {"label": "judge B", "cells": {"overall": {"value": 0.7, "ci_low": 0.5, "ci_high": 0.65}}},
    ]
    ceiling = {"overall": {"value": 0.75, "ci_low": 0.7, "ci_high": 0.8}}
    svg = plots.agreement_bars(rows, ["overall"], ceiling=ceiling)
    assert svg.lstrip().startswith("<") and "judge A" in svg and "judge B" in svg
