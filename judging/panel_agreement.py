"""A panel run's agreement with the reviewers: per member, for the panel, and panel − best
member, each with a bootstrap interval over ideas (docs/judge-reliability.md, "Judge
panels").

This module reads the rows (the members' judgments, the reviewers' mean scores) and hands
them to the pure `judging.methods.panel`; the run page's reliability panel, its CSV and
the study report show the result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from typing import Any

from studies.selectors import reviewer_means_by_idea

from .methods.panel import MEASURES, member_means, panel_agreement, panel_scores
from .models import JudgeRun, Judgment

MEASURE_LABELS = {"spearman": "Spearman ρ", "kendall": "Kendall τ-b", "pearson": "Pearson r"}


def member_labels(run: JudgeRun) -> list[str]:
    """The panel's judges by seat, by name (a seat number added where two share one: a
    team's judge may carry the name of an administrator's)."""
    names = [c.name for c in run.panel_configs()]
    return [n if names.count(n) == 1 else f"{n} (seat {k})" for k, n in enumerate(names)]


def run_panel_agreement(run: JudgeRun, *, n_boot: int) -> dict[str, Any] | None:
    """Per metric the members' and the panel's agreement with the reviewers' mean score,
    and panel − best member; None for a run that is not a panel. Intervals resample the
    ideas every member and the reviewers scored, seeded by the run's id."""
    labels = member_labels(run)
    if len(labels) < 2:
        return None
    rows: dict[str, dict[int, list[tuple[Hashable, int, float | None]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for member, idea_id, metric, sample, score in Judgment.objects.filter(run=run).values_list(
        "member", "idea_id", "metric", "sample", "score"
    ):
        rows[metric][member].append((idea_id, sample, score))
    human = reviewer_means_by_idea(run.study)
    metrics = []
    for metric in sorted(rows):
        members = {
            label: member_means(rows[metric].get(seat, [])) for seat, label in enumerate(labels)
        }
        result = panel_agreement(
            human.get(metric, {}), members, panel_scores(members), n_boot=n_boot, seed=run.pk
        )
        metrics.append({"metric": metric, **result, "rows": _table(result, labels)})
    return {
        "members": labels,
        "metrics": metrics,
        "measures": [{"key": m, "label": MEASURE_LABELS[m]} for m in MEASURES],
        "n_boot": n_boot,
    }


def _table(result: dict[str, Any], labels: list[str]) -> list[dict[str, Any]]:
    """One metric's figures as the page's rows (each member, the panel, panel − best
    member), one cell per measure."""
    measures = result["measures"]
    rows = [
        {"of": label, "kind": "member", "cells": [measures[m]["members"][label] for m in MEASURES]}
        for label in labels
    ]
    rows.append({"of": "panel", "kind": "panel", "cells": [measures[m]["panel"] for m in MEASURES]})
    rows.append(
        {
            "of": "panel − best member",
            "kind": "difference",
            "cells": [
                {**measures[m]["difference"], "best": measures[m]["best_member"]} for m in MEASURES
            ],
        }
    )
    return rows


def panel_rows(panel: dict[str, Any]) -> list[dict[str, Any]]:
    """The figures as flat rows (metric, measure, of whom, estimate), for the CSV and the
    pages: each member, the panel, then panel − best member."""
    out = []
    for block in panel["metrics"]:
        for measure, fig in block["measures"].items():
            base = {"metric": block["metric"], "measure": measure, "n_ideas": block["n_ideas"]}
            for label, est in fig["members"].items():
                out.append({**base, "of": label, "kind": "member", **est})
            out.append({**base, "of": "panel", "kind": "panel", **fig["panel"]})
            best = fig["best_member"] or "—"
            out.append({**base, "of": f"panel − {best}", "kind": "difference", **fig["difference"]})
    return out
