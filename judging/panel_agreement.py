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

from studies.models import PairJudgment, PairTask, Study
from studies.selectors import reviewer_means_by_idea

from .methods.pairwise import PairCall, summarise_pairwise
from .methods.panel import (
    MEASURES,
    PAIR_MEASURES,
    member_means,
    pair_accuracy,
    pair_preferences,
    panel_agreement,
    panel_scores,
)
from .methods.registry import method_spec
from .models import JudgeRun, Judgment, PairwiseOutcome
from .services.base import pair_call, panel_outcomes

MEASURE_LABELS = {"spearman": "Spearman ρ", "kendall": "Kendall τ-b", "pearson": "Pearson r"}
REVIEWERS = "reviewers, one against another"
"""The row of the reviewers' own agreement beside the judges' accuracy on pair ratings."""
PAIR_MEASURE_LABELS = {"with_ties": "accuracy", "without_ties": "accuracy, ties left out"}


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
        "pair_accuracy": _pair_accuracy(run, labels, n_boot) if run.method == "pairwise" else [],
        "pair_measures": [{"key": m, "label": PAIR_MEASURE_LABELS[m]} for m in PAIR_MEASURES],
    }


def reviewer_pair_ratings(study: Study) -> list[tuple[str, int, int, str]]:
    """The reviewers' submitted pair ratings, one (dimension, x, y, winner) per rating,
    x the smaller idea id and winner "x", "y" or "tie" (`judging.methods.panel.pair_accuracy`'s
    input). Gold ideas are never in pair tasks; they are left out here all the same."""
    out = []
    for a, b, dim, winner in PairJudgment.objects.filter(
        task__study=study,
        task__status=PairTask.Status.SUBMITTED,
        task__idea_a__gold_ranges__isnull=True,
        task__idea_b__gold_ranges__isnull=True,
    ).values_list("task__idea_a_id", "task__idea_b_id", "dimension", "winner"):
        if winner not in ("a", "b", "tie"):
            continue
        x, y = sorted((a, b))
        side = "tie" if winner == "tie" else "x" if (winner == "a") == (a == x) else "y"
        out.append((dim, x, y, side))
    return out


def pair_accuracy_blocks(
    ratings: list[tuple[str, int, int, str]],
    members: dict[str, dict[Any, str]],
    panel: dict[Any, str] | None,
    *,
    n_boot: int,
    seed: int,
) -> list[dict[str, Any]]:
    """`pair_accuracy` per dimension the judges compared on (the reviewers' ratings of that
    dimension), with the page's rows."""
    dims = sorted({k[0] for prefs in members.values() for k in prefs})
    labels = list(members)
    out = []
    for dim in dims:
        mine = [r for r in ratings if r[0] == dim]
        result = pair_accuracy(mine, members, panel, n_boot=n_boot, seed=seed)
        out.append(
            {
                "dimension": dim,
                **result,
                "rows": [
                    *_rows(result, labels, PAIR_MEASURES, panel is not None),
                    {
                        "of": REVIEWERS,
                        "kind": "reviewers",
                        "cells": [result["measures"][m]["reviewers"] for m in PAIR_MEASURES],
                    },
                ],
            }
        )
    return out


def _pair_accuracy(run: JudgeRun, labels: list[str], n_boot: int) -> list[dict[str, Any]]:
    """Each member's and the panel's accuracy on the reviewers' pair ratings: a member's
    preferences from its own verdicts, the panel's from its combined ones."""
    by_seat: dict[int, list[tuple[Hashable, Hashable, Hashable, str]]] = defaultdict(list)
    for seat, a, b, dim, verdict in PairwiseOutcome.objects.filter(run=run).values_list(
        "member", "idea_a_id", "idea_b_id", "dimension", "verdict"
    ):
        by_seat[seat].append((dim, a, b, verdict))
    members = {label: pair_preferences(by_seat.get(seat, [])) for seat, label in enumerate(labels)}
    panel = pair_preferences(
        (o.dimension, o.idea_a_id, o.idea_b_id, o.verdict) for o in panel_outcomes(run)
    )
    return pair_accuracy_blocks(
        reviewer_pair_ratings(run.study), members, panel, n_boot=n_boot, seed=run.pk
    )


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
    return _rows(result, labels, MEASURES, True)


def _rows(
    result: dict[str, Any], labels: list[str], measures: Any, with_panel: bool
) -> list[dict[str, Any]]:
    figures = result["measures"]
    rows = [
        {"of": label, "kind": "member", "cells": [figures[m]["members"][label] for m in measures]}
        for label in labels
    ]
    if not with_panel:
        return rows
    rows.append({"of": "panel", "kind": "panel", "cells": [figures[m]["panel"] for m in measures]})
    rows.append(
        {
            "of": "panel − best member",
            "kind": "difference",
            "cells": [
                {**figures[m]["difference"], "best": figures[m]["best_member"]} for m in measures
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
    for block in panel.get("pair_accuracy") or []:
        out.extend(pair_accuracy_rows(block))
    return out


def pair_accuracy_rows(block: dict[str, Any]) -> list[dict[str, Any]]:
    """One dimension's accuracy figures as flat rows (measure `pair_accuracy_<measure>`):
    each judge, the panel and panel − best member when there is a panel, then the
    reviewers against each other on the same pairs."""
    out = []
    for measure, fig in block["measures"].items():
        base = {"metric": block["dimension"], "measure": f"pair_accuracy_{measure}"}
        base["n_ideas"] = block["n_ideas"]
        for label, est in fig["members"].items():
            out.append({**base, "of": label, "kind": "member", **est})
        if fig["panel"] is not None:
            out.append({**base, "of": "panel", "kind": "panel", **fig["panel"]})
            best = fig["best_member"] or "—"
            out.append({**base, "of": f"panel − {best}", "kind": "difference", **fig["difference"]})
        out.append({**base, "of": REVIEWERS, "kind": "reviewers", **fig["reviewers"]})
    return out
