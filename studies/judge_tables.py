"""The judges' reliability figures as the report's tidy CSVs, read from report.json's
`agreement.judges[].info` (docs/report-schema.md), so a spreadsheet gets every number
the HTML shows: `judge_panel.csv` (a panel run's members', its own and panel − best
member's agreement with the reviewers, and accuracy on their pair ratings) and
`judge_reliability.csv` (each run's reliability panel: calibration, style control,
self-preference, repetition), and `judge_configs.csv` (each judge config's panel pooled
over its finished runs in the study, from `agreement.judge_configs`: agreement with the
reviewers' means, calibration, accuracy on their pair ratings, self-preference,
repetition).

Pure: a dict in, frames out. It reads the documented report dict, not judging's code,
which studies never imports.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd

__all__ = [
    "JUDGE_CONFIG_COLUMNS",
    "JUDGE_PANEL_COLUMNS",
    "JUDGE_RELIABILITY_COLUMNS",
    "judge_tables",
]

JUDGE_PANEL_COLUMNS = [
    "judge",
    "run_id",
    "figure",
    "metric",
    "measure",
    "of",
    "kind",
    "best_member",
    "value",
    "ci_low",
    "ci_high",
    "n",
    "n_ideas",
]
# A reliability figure's judge and human values, as both reliability tables give them.
FIGURE_COLUMNS = [
    "value",
    "ci_low",
    "ci_high",
    "n",
    "human_value",
    "human_ci_low",
    "human_ci_high",
    "human_n",
]
JUDGE_RELIABILITY_COLUMNS = ["judge", "run_id", "figure", "on", "item", *FIGURE_COLUMNS]

JUDGE_CONFIG_COLUMNS = [
    "judge",
    "config_id",
    "name",
    "figure",
    "source",
    "on",
    "item",
    *FIGURE_COLUMNS,
    "n_runs",
    "n_boot",
]


def _judges(report: dict[str, Any]) -> list[dict[str, Any]]:
    return list((report.get("agreement") or {}).get("judges") or [])


def _est(e: dict[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    e = e or {}
    return {
        f"{prefix}value": e.get("value"),
        f"{prefix}ci_low": e.get("low"),
        f"{prefix}ci_high": e.get("high"),
        f"{prefix}n": e.get("n"),
    }


def _figure_rows(fig: dict[str, Any], base: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each member's, the panel's and panel − best member's estimate of one measure, and
    the reviewers' against each other where the figure has it (pair ratings)."""
    for label, est in fig["members"].items():
        yield {**base, "of": label, "kind": "member", "best_member": None, **_est(est)}
    if fig.get("reviewers") is not None:
        yield {
            **base,
            "of": "reviewers, one against another",
            "kind": "reviewers",
            "best_member": None,
            **_est(fig["reviewers"]),
        }
    if fig.get("panel") is None:
        return
    best = fig.get("best_member")
    yield {**base, "of": "panel", "kind": "panel", "best_member": best, **_est(fig["panel"])}
    yield {
        **base,
        "of": f"panel − {best or '—'}",
        "kind": "difference",
        "best_member": best,
        **_est(fig.get("difference")),
    }


def _panel_rows(judge: dict[str, Any]) -> Iterator[dict[str, Any]]:
    panel = (judge.get("info") or {}).get("panel")
    if not panel:
        return
    who = {"judge": judge.get("key"), "run_id": judge["info"].get("run_id")}
    for block in panel.get("metrics") or []:
        for measure, fig in block["measures"].items():
            base = {**who, "figure": "agreement_with_reviewer_means", "metric": block["metric"]}
            yield from _figure_rows(fig, {**base, "measure": measure, "n_ideas": block["n_ideas"]})
    for block in panel.get("pair_accuracy") or []:
        for measure, fig in block["measures"].items():
            base = {**who, "figure": "accuracy_on_pair_ratings", "metric": block["dimension"]}
            yield from _figure_rows(fig, {**base, "measure": measure, "n_ideas": block["n_ideas"]})


def _reliability_rows(judge: dict[str, Any]) -> Iterator[dict[str, Any]]:
    reliability = (judge.get("info") or {}).get("reliability")
    if not reliability:
        return
    who = {"judge": judge.get("key"), "run_id": judge["info"].get("run_id")}
    for r in reliability.get("rows") or []:
        yield {
            **who,
            "figure": r["figure"],
            "on": r["on"],
            "item": r["item"],
            **_est(r.get("judge")),
            **_est(r.get("human"), "human_"),
        }


def _config_rows(config: dict[str, Any]) -> Iterator[dict[str, Any]]:
    who = {"judge": config.get("key"), "config_id": config.get("config_id"), "name": config.get("name")}  # fmt: skip
    after = {"n_runs": len(config.get("runs") or []), "n_boot": config.get("n_boot")}
    for r in config.get("rows") or []:
        yield {
            **who,
            "figure": r["figure"],
            "source": r.get("source"),
            "on": r["on"],
            "item": r["item"],
            **_est(r.get("judge")),
            **_est(r.get("human"), "human_"),
            **after,
        }


def judge_tables(report: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """`judge_panel`, `judge_reliability` and `judge_configs` frames, each only when some
    run (or judge config) has rows."""
    judges = _judges(report)
    out = {}
    panel = [row for j in judges for row in _panel_rows(j)]
    if panel:
        out["judge_panel"] = pd.DataFrame(panel, columns=JUDGE_PANEL_COLUMNS)
    reliability = [row for j in judges for row in _reliability_rows(j)]
    if reliability:
        out["judge_reliability"] = pd.DataFrame(reliability, columns=JUDGE_RELIABILITY_COLUMNS)
    configs = (report.get("agreement") or {}).get("judge_configs") or []
    config_rows = [row for c in configs for row in _config_rows(c)]
    if config_rows:
        out["judge_configs"] = pd.DataFrame(config_rows, columns=JUDGE_CONFIG_COLUMNS)
    return out
