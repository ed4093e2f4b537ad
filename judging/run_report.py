"""What the run page shows: per-idea tables with intervals, run statistics, plots.

`judge_run_report(run=)` turns a run's rows into plain dicts for the template. Intervals
are the run's own where it has them (Bradley–Terry bootstrap); for direct scoring with
several samples per idea it adds a t interval over the samples; other scores (Swiss wins,
Elo, the pairwise 1–5 score) have none and the table says so with a dash.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import pandas as pd
from django.db.models import F

from studies.analysis.rounding import fixed

from .methods.alignment import alignment_table
from .methods.registry import method_spec
from .models import Formalisation, IdeaRating, JudgeRun, PairwiseOutcome, ReferenceComparison
from .plots import elo_history_plot, ratings_plot

__all__ = ["judge_run_report"]

_FIRST = ("pairwise", "swiss", "elo_rating", "overall", "score")
_LABELS = {
    "pairwise": "Pairwise score (1–5, both orders summed)",
    "swiss": "Swiss wins",
    "bradley_terry": "Bradley–Terry strength (log-odds, centred; 95 % bootstrap CI)",
    "ligbench_novelty": "LigBench novelty (fusion of similarity and the judge's estimate)",
}


def _label(dimension: str) -> str:
    if dimension in _LABELS:
        return _LABELS[dimension]
    if dimension.startswith("elo_"):
        return f"LigBench Elo: {dimension[4:]} (0–5)"
    return dimension.replace("_", " ").capitalize()


#: The x-axis of the ratings plot: the quantity in a few words; the plot's heading on the
#: page (`_label`) says the rest.
_AXES = {
    "pairwise": "score (1–5)",
    "swiss": "wins",
    "bradley_terry": "strength (log-odds)",
    "ligbench_novelty": "novelty",
}


def _axis(dimension: str) -> str:
    if dimension.startswith("elo_"):
        return "Elo score (0–5)"
    return _AXES.get(dimension, "score")


def _t_interval(values: list[float]) -> tuple[float | None, float | None]:
    if len(values) < 2:
        return None, None
    from scipy import stats

    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    half = float(stats.t.ppf(0.975, len(values) - 1)) * sd / math.sqrt(len(values))
    return mean - half, mean + half


def _first_position_win_rate(run: JudgeRun) -> float | None:
    """Share of decisive parsed verdicts won by whatever was shown first (0.5: no bias).

    Counted per stored verdict, so a LigBench call answering three dimensions counts thrice.
    """
    first = decisive = 0
    for o in PairwiseOutcome.objects.filter(run=run).only(
        "verdict", "first_shown_id", "idea_a_id", "idea_b_id"
    ):
        shown = o.shown_winner()
        if shown in ("A", "B"):
            decisive += 1
            first += shown == "A"
    for target_first, verdict in ReferenceComparison.objects.filter(run=run).values_list(
        "target_first", "verdict"
    ):
        if verdict in ("A", "B"):
            decisive += 1
            first += (verdict == "A") == target_first
    return first / decisive if decisive else None


def judge_run_report(*, run: JudgeRun) -> dict[str, Any]:
    ideas = {i.pk: i for i in run.study.ideas.select_related("topic")}

    def name(idea_id: int) -> str:
        idea = ideas.get(idea_id)
        return (idea.title or f"Idea {idea_id}") if idea else f"Idea {idea_id}"

    tables: dict[str, list[dict[str, Any]]] = defaultdict(list)
    elo: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for r in IdeaRating.objects.filter(run=run).order_by(
        "dimension", F("score").desc(nulls_last=True), "idea_id"
    ):
        low, high = r.ci_low, r.ci_high
        history = r.history or []
        note = ""
        if low is None and history and isinstance(history[0], dict) and "samples" in history[0]:
            parsed = [v for v in history[0]["samples"] if v is not None]
            low, high = _t_interval(parsed)
            note = f"{len(parsed)} of {len(history[0]['samples'])} samples parsed"
        if r.dimension.startswith("elo_") and history:
            last = history[-1]
            steps = [h["score"] for h in history[:-1]]
            start = last.get("initial")
            elo[r.dimension][name(r.idea_id)] = ([start] if start is not None else []) + steps
            note = f"{len(steps)} steps, {last.get('stopped')}"
            if last.get("skipped"):
                note += f", {last['skipped']} unparseable"
        if r.dimension == "ligbench_novelty" and history:
            h = history[0]
            s_llm = h.get("s_llm")
            note = f"s_sim {fixed(h['s_sim'], 2)}, s_LLM " + (
                "—" if s_llm is None else fixed(s_llm, 1)
            )
        idea = ideas.get(r.idea_id)
        tables[r.dimension].append(
            {
                "idea_id": r.idea_id,
                "label": name(r.idea_id),
                "topic": idea.topic.name if idea else "",
                "score": r.score,
                "ci_low": low,
                "ci_high": high,
                "note": note,
            }
        )
    order = sorted(
        tables,
        key=lambda d: (
            0 if d in _FIRST else 2 if d == "bradley_terry" else 1,
            _FIRST.index(d) if d in _FIRST else 0,
            d,
        ),
    )
    n_ideas = len({row["idea_id"] for rows in tables.values() for row in rows})
    summary = run.summary or {}
    main = order[0] if order else None
    # No title inside the figure: the page heads it with the first table's heading.
    plot = (
        ratings_plot(tables[main], title=_label(main), xlabel=_axis(main), heading=False)
        if main
        else ""
    )
    elo_plot = ""
    if elo:
        dim = "elo_rating" if "elo_rating" in elo else next(iter(elo))
        elo_plot = elo_history_plot(elo[dim], title=f"{_label(dim)}: score after each step")
    return {
        "tables": [{"dimension": d, "label": _label(d), "rows": tables[d]} for d in order],
        "plot": plot,
        "elo_plot": elo_plot,
        "stats": {
            "ideas": n_ideas,
            "calls": run.http_calls,
            "cache_hits": run.cache_hits,
            "errors": run.errors,
            "unparseable": run.unparseable,
            "unparseable_rate": run.unparseable / run.done_calls if run.done_calls else None,
            "cost": run.cost,
            "cost_per_idea": (run.cost / n_ideas) if n_ideas else None,
            "position_consistency": summary.get("position_consistency"),
            "first_position_win_rate": summary.get("first_position_win_rate")
            if "first_position_win_rate" in summary
            else _first_position_win_rate(run),
        },
        "formalisations": _formalisations(run, name),
        "validation": _validation(summary),
        "alignment": _human_alignment(run),
    }


def _formalisations(run: JudgeRun, name: Any) -> list[dict[str, Any]]:
    if run.method != JudgeRun.Method.LIGBENCH:
        return []
    related: dict[int, list[tuple[int, str]]] = defaultdict(list)
    seen = set()
    for idea_id, rank, title in (
        ReferenceComparison.objects.filter(run=run, idea__isnull=False)
        .order_by("idea_id", "rank")
        .values_list("idea_id", "rank", "reference__title")
    ):
        if (idea_id, rank) not in seen:
            seen.add((idea_id, rank))
            related[idea_id].append((rank, title))
    labels = {
        "main_target": "Main target",
        "core_breakthrough": "Core breakthrough",
        "innovative_methods": "Innovative methods",
        "experimental_design": "Experimental design",
    }
    out = []
    for f in Formalisation.objects.filter(run=run).order_by("idea_id"):
        parts = f.as_dict()
        out.append(
            {
                "label": name(f.idea_id),
                "parts": [(labels[k], parts[k]) for k in labels if k in parts],
                "error": f.parse_error,
                "references": [t for _, t in sorted(related.get(f.idea_id, []))],
            }
        )
    return out


def _validation(summary: dict[str, Any]) -> list[dict[str, Any]]:
    table = summary.get("validation") or {}
    raw = summary.get("raw_accuracy") or {}
    return [{**row, "raw_accuracy": raw.get(dim)} for dim, row in table.items()]


def _human_alignment(run: JudgeRun) -> dict[str, Any] | None:
    """LigBench's human-alignment table: per dimension reviewers rated, how often the order
    of the run's scores agrees with their pair ratings; beside it the judge's accuracy on
    reference pairs from the newest finished validation run of the same judge."""
    spec = method_spec(run.method)
    if not spec.pairs_from_scores or run.status != JudgeRun.Status.DONE:
        return None
    from studies.selectors import human_pair_frame, idea_labels

    human = human_pair_frame(run.study)
    if human is None:
        return None
    labels = idea_labels(run.study)
    to_metric = spec.rating_metrics
    scores = pd.DataFrame(
        [
            {"idea_id": labels.get(i), "metric": to_metric[d], "score": v}
            for i, d, v in IdeaRating.objects.filter(
                run=run, dimension__in=list(to_metric)
            ).values_list("idea_id", "dimension", "score")
            if labels.get(i) is not None
        ],
        columns=["idea_id", "metric", "score"],
    ).astype({"score": float})
    rows = alignment_table(scores, human)
    from_dim = {metric: dim for dim, metric in to_metric.items()}
    validation_run = (
        JudgeRun.objects.filter(
            study=run.study,
            method=JudgeRun.Method.VALIDATION,
            status=JudgeRun.Status.DONE,
            config=run.config,
        )
        .order_by("-finished_at", "-pk")
        .first()
    )
    checked = (validation_run.summary or {}).get("validation", {}) if validation_run else {}
    for row in rows:
        dim = from_dim.get(row["dimension"], "")
        row["judge_dimension"] = _label(dim) if dim else "no counterpart in this run"
        plain = dim.removeprefix("elo_")
        row["validation_accuracy"] = (checked.get(plain) or {}).get("accuracy")
    return {"rows": rows, "validation_run": validation_run.pk if validation_run else None}
