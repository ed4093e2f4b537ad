"""Read-side queries that turn rows into the analysis inputs (pure DataFrames)."""

from __future__ import annotations

from collections import defaultdict

import pandas as pd
from django.db.models import Avg

from .analysis.report import JudgeData
from .judge_ratings import judge_ratings_provider
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
    Reviews of gold ideas are never analysed (they test the reviewer, not a condition).
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
        Review.objects.filter(
            study=study, status=Review.Status.SUBMITTED, idea__gold_ranges__isnull=True
        )
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


def reviewer_means_by_idea(study: Study) -> dict[str, dict[int, float]]:
    """The reviewers' mean score of each idea per metric, over the study's submitted
    reviews: {metric: {idea id: mean}}. Gold ideas are left out, as the analysis leaves
    them out."""
    rows = (
        ReviewScore.objects.filter(
            review__study=study,
            review__status=Review.Status.SUBMITTED,
            review__idea__gold_ranges__isnull=True,
        )
        .values("metric", "review__idea_id")
        .annotate(mean=Avg("score"))
    )
    out: dict[str, dict[int, float]] = {}
    for r in rows:
        out.setdefault(r["metric"], {})[r["review__idea_id"]] = float(r["mean"])
    return out


def idea_text(idea: Idea, source: str = "normalized") -> str:
    """What a judge sees: the signed-off text reviewers see, or the raw text if asked."""
    return idea.reviewable_text() if source == "normalized" else idea.raw_text


def idea_lengths(study: Study, labels: dict[int, str], source: str) -> dict[str, float] | None:
    """Characters of the text a judge saw, per idea label; None when no idea has text."""
    lengths = {
        labels[i.pk]: float(len(idea_text(i, source)))
        for i in Idea.objects.filter(study=study)
        if i.pk in labels
    }
    return lengths if any(v > 0 for v in lengths.values()) else None


def judge_inputs(study: Study, metrics: list[str], *, panel_bootstrap: int) -> list[JudgeData]:
    """Every finished judge run of the study as agreement-module inputs, from the judge
    ratings provider (`studies.judge_ratings`); none when no provider is registered."""
    provider = judge_ratings_provider()
    if provider is None:
        return []
    return provider.judge_inputs(study, metrics, panel_bootstrap=panel_bootstrap)


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
    provider = judge_ratings_provider()
    return provider.baseline_availability(study) if provider else {}
