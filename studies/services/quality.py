"""Quality control of a study's reviews: the rows the flags read, the rationale
embeddings they compare, and the flags themselves (`studies.analysis.quality` computes;
this module reads and caches, and marks gold items). docs/quality.md explains each flag.

The owner's progress page asks for the flags on every view, so embeddings are cached
(`RationaleEmbedding`, keyed by the text's digest) and a page embeds at most
`QUALITY_EMBED_PER_VIEW` new rationales, saying how many are still to compare; the report
embeds them all.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction

from ..analysis.plan import AnalysisPlan
from ..analysis.quality import FLAG_KINDS, Flag, ReviewAnswers, duplicate_flags, review_flags
from ..models import (
    Assignment,
    Idea,
    RationaleEmbedding,
    Review,
    ReviewAcceptance,
    ReviewScore,
    Study,
    StudyReport,
)
from ..protocol.gold import GoldError, GoldIdea, GoldReviewer, gold_assign, gold_ranges_parse
from .audit import audit
from .plans import study_plan


@dataclass(frozen=True)
class StudyQuality:
    flags: list[Flag]
    reviews: list[ReviewAnswers]
    pending: int  # rationales not embedded yet, so not compared

    def by_reviewer(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for f in self.flags:
            out[f.reviewer_id or "(imported: no reviewer)"][f.kind] += 1
        return {r: dict(k) for r, k in sorted(out.items())}


def quality_reviews(study: Study) -> list[ReviewAnswers]:
    """Every submitted review of the study, gold ones marked. A review imported from a
    file has no reviewer here (``reviewer_id`` is empty) and carries the flags it got at
    import; the analysis reads it like any other, so the flags and the exclusion rules do
    too."""
    scores: dict[int, dict[str, float]] = defaultdict(dict)
    rationales: dict[int, dict[str, str]] = defaultdict(dict)
    for review_id, metric, score, rationale in ReviewScore.objects.filter(
        review__study=study, review__status=Review.Status.SUBMITTED
    ).values_list("review_id", "metric", "score", "rationale"):
        scores[review_id][metric] = score
        rationales[review_id][metric] = rationale
    rejected = set(
        ReviewAcceptance.objects.filter(
            review__study=study, decision=ReviewAcceptance.Decision.REJECTED
        ).values_list("review_id", flat=True)
    )
    return [
        ReviewAnswers(
            review_id=str(r.pk),
            reviewer_id=r.reviewer.pseudonym if r.reviewer else "",
            idea_id=str(r.idea_id),
            scores=scores.get(r.pk, {}),
            rationales=rationales.get(r.pk, {}),
            minutes_measured=r.minutes_measured,
            attention=(r.extra or {}).get("attention"),
            gold=r.idea.gold_ranges is not None,
            payment_rejected=r.pk in rejected,
            import_flags=tuple(r.flags or ()),
        )
        for r in Review.objects.filter(study=study, status=Review.Status.SUBMITTED)
        .select_related("reviewer", "idea")
        .order_by("pk")
    ]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def quality_vectors(
    reviews: list[ReviewAnswers], *, min_words: int, limit: int | None
) -> tuple[dict[tuple[str, str], np.ndarray], int]:
    """The embeddings of the rationales long enough to compare, from the cache, embedding
    at most ``limit`` missing ones (None: all); returns them and how many are missing."""
    wanted = {
        (r.review_id, m): text
        for r in reviews
        for m, text in r.rationales.items()
        if len(text.split()) >= min_words
    }
    cached: dict[tuple[str, str], np.ndarray] = {}
    for review_id, metric, digest, vector in RationaleEmbedding.objects.filter(
        review_id__in={int(k[0]) for k in wanted}
    ).values_list("review_id", "metric", "digest", "vector"):
        key = (str(review_id), metric)
        if key in wanted and digest == _digest(wanted[key]):
            cached[key] = np.frombuffer(bytes(vector), dtype=np.float32)
    missing = [k for k in wanted if k not in cached]
    todo = missing if limit is None else missing[:limit]
    if todo:
        from ..embeddings import embed

        # A text pasted into several reviews is embedded once.
        texts = sorted({wanted[k] for k in todo})
        vectors = dict(zip(texts, embed(texts), strict=True))
        for key in todo:
            cached[key] = vectors[wanted[key]]
        _vectors_store({k: (_digest(wanted[k]), cached[k]) for k in todo})
    return cached, len(missing) - len(todo)


def _vectors_store(rows: dict[tuple[str, str], tuple[str, np.ndarray]]) -> None:
    """Replace the stored vectors of these (review, metric) keys; a row another page
    stored meanwhile is kept (the same text gives the same vector)."""
    with transaction.atomic():
        stale = RationaleEmbedding.objects.filter(review_id__in={int(k[0]) for k in rows})
        RationaleEmbedding.objects.filter(
            pk__in=[
                pk
                for pk, r, m in stale.values_list("pk", "review_id", "metric")
                if (str(r), m) in rows
            ]
        ).delete()
        RationaleEmbedding.objects.bulk_create(
            [
                RationaleEmbedding(
                    review_id=int(key[0]),
                    metric=key[1],
                    digest=digest,
                    vector=np.asarray(vec, dtype=np.float32).tobytes(),
                )
                for key, (digest, vec) in rows.items()
            ],
            ignore_conflicts=True,
        )


def study_quality(
    study: Study, *, plan: AnalysisPlan, embed_limit: int | None = None
) -> StudyQuality:
    """Every flag of the study's submitted reviews under the plan's thresholds."""
    definition = study.form_definition()
    reviews = quality_reviews(study)
    gold = {
        str(pk): {m: (float(v[0]), float(v[1])) for m, v in (ranges or {}).items()}
        for pk, ranges in study.ideas.filter(gold_ranges__isnull=False).values_list(
            "pk", "gold_ranges"
        )
    }
    flags = review_flags(
        reviews,
        rules=plan.quality,
        metrics=definition.metric_keys,
        expected={c.key: c.expected for c in definition.attention_checks},
        gold_ranges=gold,
    )
    vectors, pending = quality_vectors(
        reviews, min_words=plan.quality.duplicate_min_words, limit=embed_limit
    )
    flags += duplicate_flags(reviews, vectors, rules=plan.quality)
    flags.sort(key=lambda f: (int(f.review_id), f.kind))
    return StudyQuality(flags=flags, reviews=reviews, pending=pending)


def progress_quality(study: Study) -> dict[str, Any]:
    """What the owner's progress page shows: every flag now, under the current plan's
    thresholds (embedding a bounded number of new rationales per view), one row per
    flagged reviewer, and the leniency of the latest report's mixed model."""
    q = study_quality(study, plan=study_plan(study), embed_limit=settings.QUALITY_EMBED_PER_VIEW)
    kinds = list(FLAG_KINDS)
    rows = [
        {"reviewer": reviewer, "counts": [counts.get(k, 0) for k in kinds]}
        for reviewer, counts in q.by_reviewer().items()
    ]
    latest = StudyReport.objects.filter(study=study).first()
    quality = (latest.data.get("quality") if latest else None) or {}
    leniency = quality.get("leniency") or {}
    return {
        "kinds": kinds,
        "meanings": FLAG_KINDS,
        "flags": q.flags,
        "reviewers": rows,
        "pending": q.pending,
        # A metric whose model has no reviewer effect has no rows: named in one
        # sentence rather than shown as an empty table.
        "leniency": {k: b for k, b in leniency.items() if b.get("rows")},
        "leniency_none": [k for k, b in leniency.items() if not b.get("rows")],
        "leniency_at": latest.created_at if latest and quality else None,
    }


class GoldRefused(ValueError):
    """A gold mark that cannot be set; the message says why."""


def idea_gold_set(*, idea: Idea, ranges: dict[str, Any] | None, actor: Any) -> None:
    """Mark an idea gold with its expected ranges, change them, or (``None``) unmark it.
    Refused once the idea has a review (drafts count): its reviews would move in or out
    of the analysis, and a range set after seeing them tests nothing."""
    study = idea.study
    checked = None
    if ranges is not None:
        try:
            parsed = gold_ranges_parse(ranges, study.form_definition().scales())
        except GoldError as exc:
            raise GoldRefused("; ".join(exc.problems)) from exc
        checked = {m: [lo, hi] for m, (lo, hi) in parsed.items()}
    with transaction.atomic():
        locked = Idea.objects.select_for_update().get(pk=idea.pk)
        if Review.objects.filter(idea=locked).exists():
            raise GoldRefused(
                "This idea has reviews already: whether it is gold, and its ranges, can no "
                "longer change."
            )
        locked.gold_ranges = checked
        locked.save(update_fields=["gold_ranges"])
        audit(study=study, actor=actor, verb="idea_gold_set", idea=idea.pk, ranges=checked)
    idea.gold_ranges = checked


def assignment_gold_pairs(
    *, study: Study, reviewers: list[Any], seed: int
) -> tuple[set[int], list[tuple[int, int]]]:
    """The study's gold idea ids, and the new (reviewer pk, idea pk) gold assignments that
    give each of ``reviewers`` the study's number of gold items (studies.protocol.gold)."""
    gold = list(study.ideas.filter(gold_ranges__isnull=False).select_related("topic"))
    ids = {i.pk for i in gold}
    if not gold or not reviewers:
        return ids, []
    has: dict[int, list[str]] = defaultdict(list)
    for reviewer_id, idea_id in (
        Assignment.objects.filter(study=study, idea_id__in=ids)
        .exclude(status=Assignment.Status.WITHDRAWN)
        .values_list("reviewer_id", "idea_id")
    ):
        has[reviewer_id].append(str(idea_id))
    pairs = gold_assign(
        [
            GoldReviewer(
                id=str(r.pk),
                topics=tuple(r.topic_preferences or ()),
                institution=r.institution,
                has=tuple(has.get(r.pk, ())),
            )
            for r in reviewers
        ],
        [
            GoldIdea(
                id=str(i.pk),
                topic=i.topic.name,
                institutions=(i.author_institution,) if i.author_institution else (),
            )
            for i in gold
        ],
        per_reviewer=study.gold_per_reviewer,
        seed=seed,
    )
    return ids, [(int(r), int(i)) for r, i in pairs]
