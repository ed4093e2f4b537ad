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

from .methods.pairwise import PairCall, summarise_pairwise
from .methods.panel import MEASURES, member_means, panel_agreement, panel_scores
from .methods.registry import method_spec
from .models import JudgeRun, Judgment, PairwiseOutcome
from .services.base import pair_call, panel_outcomes

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
    scores = _pair_scores(run, labels) if run.method == "pairwise" else _direct_scores(run, labels)
    human = reviewer_means_by_idea(run.study)
    metrics = []
    for metric, (members, panel) in sorted(scores.items()):
        result = panel_agreement(human.get(metric, {}), members, panel, n_boot=n_boot, seed=run.pk)
        metrics.append({"metric": metric, **result, "rows": _table(result, labels)})
    return {
        "members": labels,
        "metrics": metrics,
        "measures": [{"key": m, "label": MEASURE_LABELS[m]} for m in MEASURES],
        "n_boot": n_boot,
    }


Scores = dict[str, tuple[dict[str, dict[Any, float]], dict[Any, float]]]
"""Per metric: each member's score by idea (by the member's label), and the panel's."""


def _direct_scores(run: JudgeRun, labels: list[str]) -> Scores:
    """Each member's mean of its parseable samples per idea; the panel's, their mean."""
    rows: dict[str, dict[int, list[tuple[Hashable, int, float | None]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for member, idea_id, metric, sample, score in Judgment.objects.filter(run=run).values_list(
        "member", "idea_id", "metric", "sample", "score"
    ):
        rows[metric][member].append((idea_id, sample, score))
    out: Scores = {}
    for metric in rows:
        members = {
            label: member_means(rows[metric].get(seat, [])) for seat, label in enumerate(labels)
        }
        out[metric] = (members, panel_scores(members))
    return out


def _pair_scores(run: JudgeRun, labels: list[str]) -> Scores:
    """Each member's 1–5 pairwise score of every idea from its own verdicts, and the
    panel's from its combined verdicts, on the form metric the method's ratings stand for
    (its registry entry's `rating_metrics`)."""
    by_seat: dict[int, list[PairCall]] = defaultdict(list)
    for o in PairwiseOutcome.objects.filter(run=run):
        by_seat[o.member].append(pair_call(o))

    def scored(calls: list[PairCall]) -> dict[Any, float]:
        return {i: v for i, v in summarise_pairwise(calls).scores.items() if v is not None}

    members = {label: scored(by_seat.get(seat, [])) for seat, label in enumerate(labels)}
    panel = scored([pair_call(o) for o in panel_outcomes(run)])
    metric = method_spec(run.method).rating_metrics.get("pairwise", "overall")
    return {metric: (members, panel)}


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
