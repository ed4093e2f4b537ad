"""Read-side queries that turn rows into the analysis inputs (pure DataFrames)."""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from .models import IdeaCondition, Review, ReviewScore, Study


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
