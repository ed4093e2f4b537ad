"""Read-side queries that turn rows into the analysis inputs (pure DataFrames)."""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from .analysis.report import JudgeData
from .models import Idea, IdeaCondition, PairJudgment, PairTask, Review, ReviewScore, Study


def idea_labels(study: Study) -> dict[int, str]:
    """Idea pk -> the id the review frame uses (its human condition's id first, else the
    first condition's): the same label `review_frame` gives, so judge rows can be joined."""
    memberships: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
    for member in IdeaCondition.objects.filter(study=study).select_related("condition"):
        memberships[member.idea_id].append(
            (member.condition.key, member.condition.kind, member.external_id)
        )
    label: dict[int, str] = {}
    for idea_id, rows in memberships.items():
        rows.sort(key=lambda r: (r[1] != "human", r[0], r[2]))
        label[idea_id] = rows[0][2]
    return label


def review_frame(study: Study) -> pd.DataFrame:
    """One row per submitted review × condition of its idea (the analysis contract).

    An idea in several conditions contributes each of its reviews once per condition, as
    the published tables count them; `review_id` tells the copies apart from new reviews.
    """
    metrics = study.form_definition().metric_keys
    memberships: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
    for member in IdeaCondition.objects.filter(study=study).select_related("condition"):
        memberships[member.idea_id].append(
            (member.condition.key, member.condition.kind, member.external_id)
        )
    label: dict[int, str] = {}
    for idea_id, rows in memberships.items():
        rows.sort(key=lambda r: (r[1] != "human", r[0], r[2]))
        label[idea_id] = rows[0][2]
    scores: dict[int, dict[str, float]] = defaultdict(dict)
    words: dict[int, int] = defaultdict(int)
    for review_id, metric, score, rationale in ReviewScore.objects.filter(
        review__study=study, review__status=Review.Status.SUBMITTED
    ).values_list("review_id", "metric", "score", "rationale"):
        scores[review_id][metric] = score
        words[review_id] += len(rationale.split())
    records = []
    reviews = (
        Review.objects.filter(study=study, status=Review.Status.SUBMITTED)
        .select_related("idea__topic", "reviewer")
        .order_by("id")
    )
    for r in reviews:
        for cond, _kind, ext in memberships.get(r.idea_id, []):
            rec = {
                "review_id": str(r.pk),
                "idea_id": label[r.idea_id],
                "source_idea_id": ext,
                "condition": cond,
                "topic": r.idea.topic.name,
                "reviewer_id": r.reviewer.pseudonym if r.reviewer else None,
                "familiarity": r.familiarity,
                "confidence": r.confidence,
                "minutes": r.minutes,
                "rationale_words": words.get(r.pk, 0),
                "flagged": bool(r.flags),
            }
            for m in metrics:
                rec[m] = scores[r.pk].get(m)
            records.append(rec)
    cols = [
        "row_id",
        "review_id",
        "idea_id",
        "source_idea_id",
        "condition",
        "topic",
        "reviewer_id",
        *metrics,
        "familiarity",
        "confidence",
        "minutes",
        "rationale_words",
        "flagged",
    ]
    df = pd.DataFrame.from_records(records, columns=[c for c in cols if c != "row_id"])
    df.insert(0, "row_id", range(len(df)))
    for c in [*metrics, "familiarity", "confidence", "minutes", "rationale_words"]:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    df["reviewer_id"] = df["reviewer_id"].astype(object).where(df["reviewer_id"].notna(), None)
    return df


# Per-idea ratings of tournament-style runs rate "overall quality" unless the dimension is
# itself a metric of the form; LigBench's "rating" is its overall dimension.
_RATING_METRIC = {"pairwise": "overall", "swiss": "overall", "rating": "overall"}
_SCORE_METHODS = frozenset({"direct", "absolute"})


def idea_lengths(study: Study, labels: dict[int, str], source: str) -> dict[str, float] | None:
    """Characters of the text a judge saw, per idea label; None when no idea has text."""
    from judging.services import idea_text

    lengths = {
        labels[i.pk]: float(len(idea_text(i, source)))
        for i in Idea.objects.filter(study=study)
        if i.pk in labels
    }
    return lengths if any(v > 0 for v in lengths.values()) else None


def judge_inputs(study: Study, metrics: list[str]) -> list[JudgeData]:
    """Every finished (status done) judge run of the study as agreement-module inputs.

    Direct and absolute runs give their Judgment rows (one per sample, NaN = unparseable,
    cost of the call the run paid for); pairwise, Swiss and baseline runs give their
    PairwiseOutcome rows and their per-idea ratings (the summed 1-5 score or Swiss points)
    as scores of the dimension they judged; other runs give the ratings whose dimension is
    a form metric. Validation runs judge reference papers, not the study's ideas: skipped.
    """
    from judging.models import IdeaRating, JudgeRun, Judgment, PairwiseOutcome

    labels = idea_labels(study)
    out: list[JudgeData] = []
    runs = (
        JudgeRun.objects.filter(study=study, status=JudgeRun.Status.DONE)
        .exclude(method=JudgeRun.Method.VALIDATION)
        .select_related("config")
        .order_by("created_at", "pk")
    )
    for run in runs:
        model = run.config.resolved_model() if run.config and not run.is_baseline else ""
        scores = pairs = None
        if run.method in _SCORE_METHODS:
            # One call scores every metric of an idea: its cost is counted once.
            seen: set[int] = set()
            rows = []
            for idea_id, metric, score, sample, call_id, cost, call_run in Judgment.objects.filter(
                run=run
            ).values_list(
                "idea_id", "metric", "score", "sample", "call_id", "call__cost", "call__run_id"
            ):
                paid = cost is not None and call_run == run.pk and call_id not in seen
                if call_id is not None:
                    seen.add(call_id)
                rows.append(
                    {
                        "idea_id": labels.get(idea_id),
                        "metric": metric,
                        "score": float("nan") if score is None else score,
                        "sample": sample,
                        "cost": float(cost) if paid else 0.0,
                    }
                )
            scores = pd.DataFrame(rows, columns=["idea_id", "metric", "score", "sample", "cost"])
        else:
            rows = []
            for idea_id, dim, score in IdeaRating.objects.filter(run=run).values_list(
                "idea_id", "dimension", "score"
            ):
                target = dim if dim in metrics else _RATING_METRIC.get(dim)
                if target is None or target not in metrics:
                    continue
                rows.append(
                    {
                        "idea_id": labels.get(idea_id),
                        "metric": target,
                        "score": float("nan") if score is None else score,
                    }
                )
            scores = pd.DataFrame(rows, columns=["idea_id", "metric", "score"])
            outcome_rows = [
                {
                    "idea_a": labels.get(a),
                    "idea_b": labels.get(b),
                    "first_shown": labels.get(f),
                    "verdict": v,
                    "dimension": d,
                    "round": rnd,
                    "cost": float(cost) if cost is not None and call_run == run.pk else 0.0,
                }
                for a, b, f, v, d, rnd, cost, call_run in PairwiseOutcome.objects.filter(
                    run=run
                ).values_list(
                    "idea_a_id",
                    "idea_b_id",
                    "first_shown_id",
                    "verdict",
                    "dimension",
                    "round",
                    "call__cost",
                    "call__run_id",
                )
            ]
            if outcome_rows:
                pairs = pd.DataFrame(outcome_rows)
        if scores is not None:
            scores = scores[scores["idea_id"].notna()].reset_index(drop=True)
            if scores.empty:
                scores = None
        if pairs is not None:
            pairs = pairs[pairs["idea_a"].notna() & pairs["idea_b"].notna()].reset_index(drop=True)
        label = (
            f"{run.get_method_display()} (run {run.pk})"
            if run.is_baseline
            else f"{run.config.name if run.config else run.method} · {run.method} (run {run.pk})"
        )
        out.append(
            JudgeData(
                key=f"run{run.pk}",
                label=label,
                method=str(run.method),
                baseline=run.is_baseline,
                model=model,
                judge_scores=scores,
                judge_pairs=pairs,
                lengths=idea_lengths(study, labels, str(run.params.get("text", "normalized"))),
                info={
                    "run_id": run.pk,
                    "params": run.params,
                    "cost": float(run.cost),
                    "http_calls": run.http_calls,
                    "finished_at": run.finished_at.isoformat() if run.finished_at else None,
                },
            )
        )
    return out


def human_pair_frame(study: Study) -> pd.DataFrame | None:
    """Reviewers' submitted pair ratings, one row per task x dimension (agreement.py's
    `human_pairs`); None when there are none."""
    labels = idea_labels(study)
    rows = []
    for j in PairJudgment.objects.filter(
        task__study=study, task__status=PairTask.Status.SUBMITTED
    ).select_related("task__reviewer"):
        t = j.task
        a, b = labels.get(t.idea_a_id), labels.get(t.idea_b_id)
        if a is None or b is None:
            continue
        rows.append(
            {
                "reviewer_id": t.reviewer.pseudonym,
                "idea_a": a,
                "idea_b": b,
                "shown_first": a if t.a_on_left else b,
                "dimension": j.dimension,
                "choice": j.choice,
            }
        )
    return pd.DataFrame(rows) if rows else None


def baseline_availability(study: Study) -> dict[str, str | None]:
    """Per no-LLM baseline method: None if it can run on this study, else why not."""
    from judging.models import JudgeRun
    from judging.services import JudgeRunRefused, judge_run_plan

    out: dict[str, str | None] = {}
    for method in (JudgeRun.Method.BASELINE_RANDOM, JudgeRun.Method.BASELINE_LONGER):
        try:
            judge_run_plan(study=study, method=method)
            out[str(method)] = None
        except JudgeRunRefused as exc:
            out[str(method)] = str(exc)
    return out
