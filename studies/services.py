"""Workflows over several models: keyword-only functions named `<entity>_<action>`.

Views, commands and tasks call these; they hold no request or Celery objects.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from django.utils.text import slugify

from .importers import ImportFailed, ParsedImport, Problem

# The job lifecycle lives in .jobs; its functions stay importable from here.
from .jobs import (  # noqa: F401
    job_active,
    job_cancel,
    job_finish,
    job_latest,
    job_mark_if_lost,
    job_progress,
    job_retry,
    job_start,
)
from .models import (
    AuditEvent,
    Condition,
    Idea,
    IdeaCondition,
    ImportBatch,
    JobRun,
    Review,
    ReviewForm,
    ReviewScore,
    Study,
    StudyMember,
    Topic,
)
from .protocol import jsonsafe
from .protocol.auditchain import GENESIS, ChainCheck, chain_verify, entry_hash
from .protocol.forms import DEFAULT_FORM, FormDefinition

log = logging.getLogger(__name__)

# Study slugs that would shadow a page under /studies/.
RESERVED_SLUGS = frozenset({"new"})


# The advisory-lock class that serialises appends to one audit chain on PostgreSQL
# (SQLite's IMMEDIATE transactions serialise every write already).
_AUDIT_LOCK_CLASS = 0x1DEA


def audit(*, study: Study | None, actor: Any, verb: str, **detail: Any) -> AuditEvent:
    """Append an entry to the study's audit chain (the server's without a study)."""
    actor = actor if getattr(actor, "pk", None) else None
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)",
                    [_AUDIT_LOCK_CLASS, study.pk if study is not None else 0],
                )
        chain = (
            AuditEvent.objects.filter(study=study)
            if study
            else AuditEvent.objects.filter(study__isnull=True)
        )
        last = chain.order_by("-seq").values_list("seq", "hash").first()
        seq, prev = (last[0] + 1, last[1]) if last else (1, GENESIS)
        at = timezone.now()
        name = actor.get_username() if actor is not None else ""
        # Round-trip the detail through JSON first: what is hashed is what is stored.
        detail = json.loads(json.dumps(detail))
        return AuditEvent.objects.create(
            study=study,
            actor=actor,
            verb=verb,
            detail=detail,
            at=at,
            seq=seq,
            actor_name=name,
            prev_hash=prev,
            hash=entry_hash(prev=prev, seq=seq, verb=verb, detail=detail, at=at, actor=name),
        )


def audit_chain_check(study: Study | None) -> ChainCheck:
    """Verify the study's audit chain (the server's without a study) from its rows."""
    chain = (
        AuditEvent.objects.filter(study=study)
        if study
        else AuditEvent.objects.filter(study__isnull=True)
    )
    rows = chain.order_by("seq").values(
        "seq", "verb", "detail", "at", "prev_hash", "hash", "actor_name"
    )
    return chain_verify({**row, "actor": row["actor_name"]} for row in rows.iterator())


def review_form_ensure(*, definition: FormDefinition = DEFAULT_FORM) -> ReviewForm:
    """The stored row for a form definition; a changed definition needs a new version."""
    form, created = ReviewForm.objects.get_or_create(
        key=definition.key,
        version=definition.version,
        defaults={"title": definition.title, "definition": definition.to_dict()},
    )
    if not created and form.as_definition() != definition:
        raise ValueError(
            f"review form {definition.key} v{definition.version} already exists with a "
            "different definition; forms are immutable, give the change a new version"
        )
    return form


def study_form_locked_reason(study: Study) -> str:
    """Why the study's review form can no longer change ("" while it can): reviews,
    drafts included, are answers to the form they were written on."""
    n = study.reviews.count()
    if n:
        return (
            f"The study has {n} review(s) on form {study.review_form.key} "
            f"v{study.review_form.version}; its form can no longer change."
        )
    return ""


def study_form_set(*, study: Study, definition: FormDefinition, actor: Any = None) -> ReviewForm:
    """Give the study another review form (stored as its own immutable version); refused
    once the study has reviews."""
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        reason = study_form_locked_reason(locked)
        if reason:
            raise ValueError(reason)
        form = review_form_ensure(definition=definition)
        locked.review_form = form
        locked.save(update_fields=["review_form", "updated_at"])
        audit(
            study=locked,
            actor=actor,
            verb="review_form_set",
            form=definition.key,
            version=definition.version,
        )
    study.review_form = form
    return form


def review_form_next_version(key: str) -> int:
    """The first version number of `key` not stored yet."""
    last = ReviewForm.objects.filter(key=key).order_by("-version").first()
    return 1 if last is None else last.version + 1


def study_create(
    *,
    owner: Any,
    slug: str,
    title: str = "",
    form: FormDefinition = DEFAULT_FORM,
    baseline_condition: str = "",
    description: str = "",
    conditions: Sequence[tuple[str, str]] = (),
    topics: Sequence[str] = (),
) -> Study:
    """A new study owned by `owner` (its first owner member), with its conditions as
    (key, kind) pairs and its topics; the baseline must be one of the conditions given."""
    slug = slugify(slug)
    if not slug:
        raise ValueError("a study needs a slug made of letters, digits, '-' or '_'")
    if slug in RESERVED_SLUGS:
        raise ValueError(f"{slug!r} names a page of the site; choose another slug")
    keys = [key for key, _ in conditions]
    if baseline_condition and keys and baseline_condition not in keys:
        raise ValueError(
            f"the baseline {baseline_condition!r} is not one of the conditions {', '.join(keys)}"
        )
    with transaction.atomic():
        if Study.objects.filter(slug=slug).exists():
            raise ValueError(f"a study with the slug {slug!r} exists already; choose another")
        study = Study.objects.create(
            slug=slug,
            title=title or slug,
            description=description,
            owner=owner,
            review_form=review_form_ensure(definition=form),
            baseline_condition=baseline_condition,
        )
        StudyMember.objects.create(study=study, user=owner, role=StudyMember.Role.OWNER)
        for key, kind in conditions:
            Condition.objects.create(study=study, key=key, label=key, kind=kind)
        for name in dict.fromkeys(t.strip() for t in topics if t.strip()):
            Topic.objects.create(study=study, name=name)
        audit(study=study, actor=owner, verb="study_created", slug=slug)
    return study


def reviews_import(
    *,
    study: Study,
    parsed: ParsedImport,
    kind: str,
    actor: Any = None,
) -> dict[str, Any]:
    """Write a parsed import in one transaction; re-importing the same data changes nothing.

    Ideas are matched by external id, reviews by their content key. Returns the parser's
    data-quality summary extended with what was created and what already existed. The
    stages: the form's metrics, conditions, topics, ideas, reviews, then the batch record.
    """
    _import_check_metrics(study=study, parsed=parsed)
    with transaction.atomic():
        conditions, new_conditions = _import_conditions(study=study, parsed=parsed)
        topics = {t.name: t for t in study.topics.all()}
        new_topics = 0
        for name in parsed.topics:
            if name not in topics:
                topics[name] = Topic.objects.create(study=study, name=name)
                new_topics += 1
        idea_for_ref, new_ideas = _import_ideas(
            study=study, parsed=parsed, conditions=conditions, topics=topics
        )
        reviewers = _reviewers_for(study, parsed)
        new_reviews = _import_reviews(
            study=study, parsed=parsed, idea_for_ref=idea_for_ref, reviewers=reviewers
        )
        summary = dict(parsed.summary)
        summary.update(
            created={
                "conditions": new_conditions,
                "topics": new_topics,
                "ideas": new_ideas,
                "reviews": new_reviews,
                "reviewers": sum(1 for r in reviewers.values() if getattr(r, "_created", False)),
            },
            unchanged_reviews=len(parsed.reviews) - new_reviews,
            changed_anything=bool(new_conditions or new_topics or new_ideas or new_reviews),
        )
        if summary["changed_anything"]:
            _import_record(study=study, parsed=parsed, kind=kind, actor=actor, summary=summary)
    return summary


def _import_check_metrics(*, study: Study, parsed: ParsedImport) -> None:
    """Every metric of the file is one of the study's form."""
    form = study.form_definition()
    missing = [m for m in parsed.metrics if m not in form.metric_keys]
    if missing:
        raise ImportFailed(
            [
                Problem(
                    parsed.source,
                    None,
                    m,
                    f"metric not in the study's form {form.key} v{form.version}",
                )
                for m in missing
            ]
        )


def _import_conditions(*, study: Study, parsed: ParsedImport) -> tuple[dict[str, Condition], int]:
    """The study's conditions with the file's new ones created; a known condition whose
    kind differs in the file is refused."""
    existing_conditions = {c.key: c for c in study.conditions.all()}
    problems = [
        Problem(
            parsed.source,
            None,
            "condition",
            f"condition {key!r} exists as {existing_conditions[key].kind}, the file says {kind_}",
        )
        for key, kind_ in parsed.conditions.items()
        if key in existing_conditions and existing_conditions[key].kind != kind_
    ]
    if problems:
        raise ImportFailed(problems)
    conditions = dict(existing_conditions)
    new_conditions = 0
    for key, kind_ in parsed.conditions.items():
        if key not in conditions:
            conditions[key] = Condition.objects.create(study=study, key=key, label=key, kind=kind_)
            new_conditions += 1
    return conditions, new_conditions


def _import_ideas(
    *,
    study: Study,
    parsed: ParsedImport,
    conditions: dict[str, Condition],
    topics: dict[str, Topic],
) -> tuple[dict[str, Idea], int]:
    """Each parsed idea matched by its external ids or created, with its memberships;
    the idea of every external id, and how many ideas were new."""
    by_external = {
        m.external_id: m
        for m in IdeaCondition.objects.filter(study=study).select_related("idea", "idea__topic")
    }
    idea_for_ref: dict[str, Idea] = {}
    new_ideas = 0
    for pi in parsed.ideas:
        found = {by_external[e].idea for e in pi.external_ids.values() if e in by_external}
        if len(found) > 1:
            raise ImportFailed(
                [
                    Problem(
                        parsed.source,
                        None,
                        "idea_id",
                        f"ids {sorted(pi.external_ids.values())} belong to different ideas already in the study",
                    )
                ]
            )
        if found:
            idea = found.pop()
            if idea.topic.name != pi.topic:
                raise ImportFailed(
                    [
                        Problem(
                            parsed.source,
                            None,
                            "topic",
                            f"idea {next(iter(pi.external_ids.values()))!r} has topic {idea.topic.name!r} in the study, {pi.topic!r} in the file",
                        )
                    ]
                )
        else:
            idea = Idea.objects.create(
                study=study,
                topic=topics[pi.topic],
                title=pi.title,
                author_institution=pi.author_institution,
            )
            new_ideas += 1
        for cond_key, ext in pi.external_ids.items():
            if ext not in by_external:
                by_external[ext] = IdeaCondition.objects.create(
                    idea=idea, condition=conditions[cond_key], study=study, external_id=ext
                )
            idea_for_ref[ext] = idea
    return idea_for_ref, new_ideas


def _import_reviews(
    *,
    study: Study,
    parsed: ParsedImport,
    idea_for_ref: dict[str, Idea],
    reviewers: dict[str, Any],
) -> int:
    """The reviews not already stored (by content key), with their scores; how many."""
    known_keys = set(
        Review.objects.filter(
            study=study, source_key__in=[r.key for r in parsed.reviews]
        ).values_list("source_key", flat=True)
    )
    new_reviews = 0
    scores: list[ReviewScore] = []
    now = timezone.now()
    for pr in parsed.reviews:
        if pr.key in known_keys:
            continue
        review = Review.objects.create(
            study=study,
            idea=idea_for_ref[parsed.review_ideas[pr.key]],
            reviewer=reviewers.get(pr.reviewer_ref) if pr.reviewer_ref else None,
            status=Review.Status.SUBMITTED,
            familiarity=pr.familiarity,
            familiarity_raw=pr.familiarity_raw,
            confidence=pr.confidence,
            confidence_raw=pr.confidence_raw,
            minutes=pr.minutes,
            minutes_raw=pr.minutes_raw,
            consent_raw=pr.consent_raw,
            honor_code_raw=pr.honor_code_raw,
            flags=pr.flags,
            extra={**pr.extra, "source_row": pr.row},
            source_key=pr.key,
            submitted_at=now,
        )
        scores.extend(
            ReviewScore(review=review, metric=m, score=v, rationale=pr.rationales.get(m, ""))
            for m, v in pr.scores.items()
        )
        new_reviews += 1
    ReviewScore.objects.bulk_create(scores)
    return new_reviews


def _import_record(
    *, study: Study, parsed: ParsedImport, kind: str, actor: Any, summary: dict[str, Any]
) -> None:
    """The import batch, the study's baseline when it had none, and the audit event."""
    ImportBatch.objects.create(
        study=study,
        kind=kind,
        filename=parsed.source,
        sha256=parsed.sha256,
        summary=summary,
        created_by=actor if getattr(actor, "pk", None) else None,
    )
    if not study.baseline_condition:
        study.baseline_condition = study.baseline()
        study.save(update_fields=["baseline_condition", "updated_at"])
    audit(
        study=study,
        actor=actor,
        verb="reviews_imported",
        source=parsed.source,
        reviews=summary["created"]["reviews"],
    )


def _reviewers_for(study: Study, parsed: ParsedImport) -> dict[str, Any]:
    """Imported reviewer ids become pseudonymous reviewers (R001, …); names are not kept."""
    from .models import Reviewer

    refs = sorted({r.reviewer_ref for r in parsed.reviews if r.reviewer_ref})
    found = {r.external_id: r for r in Reviewer.objects.filter(study=study, external_id__in=refs)}
    n = Reviewer.objects.filter(study=study).count()
    for ref in refs:
        if ref not in found:
            n += 1
            reviewer = Reviewer.objects.create(
                study=study,
                external_id=ref,
                pseudonym=f"R{n:03d}",
                screening=Reviewer.Screening.APPROVED,
            )
            reviewer._created = True  # type: ignore[attr-defined]
            found[ref] = reviewer
    return found


def reviews_parse(
    *,
    study: Study,
    fmt: str,
    reviews: bytes,
    reviews_name: str,
    titles: bytes | None = None,
    titles_name: str = "",
    mapping: dict[str, str] | None = None,
    human_conditions: list[str] | None = None,
) -> ParsedImport:
    """Parse an upload against the study's form and conditions (nothing is written)."""
    from .importers import (
        RowInput,
        default_mapping,
        mapping_check,
        parse_rows,
        parse_si2024,
        read_table,
        sha256_bytes,
    )

    form = study.form_definition()
    existing = {c.key: c.kind for c in study.conditions.all()}
    if fmt == "si2024":
        return parse_si2024(
            reviews,
            reviews_name=reviews_name,
            form=form,
            titles=titles,
            titles_name=titles_name or "titles.csv",
            known_conditions=existing or None,
        )
    if fmt != "generic":
        raise ValueError(f"unknown import format {fmt!r} (use si2024 or generic)")
    rows = read_table(reviews, reviews_name)
    header: list[str] = list(dict.fromkeys(k for r in rows for k in r))
    mapping_check(mapping or {}, form=form, header=header, name=reviews_name)
    kinds = {c: "human" for c in (human_conditions or [])}
    return parse_rows(
        rows,
        name=reviews_name,
        sha256=sha256_bytes(reviews),
        target=RowInput(
            form=form,
            known_conditions=existing or None,
            condition_kinds=kinds,
        ),
        mapping=default_mapping(header, form.metric_keys, mapping or {}),
        titles=None,
        condition_kind_guess=not human_conditions,
    )


# --------------------------------------------------------------------------- large imports


def import_row_estimate(data: bytes, name: str) -> int:
    """A quick upper estimate of an upload's rows, to decide whether it runs as a job:
    the rows of a JSON file (a list of rows, or columns), else the file's lines."""
    if data.lstrip()[:1] in (b"[", b"{") and not name.lower().endswith(".jsonl"):
        try:
            value = jsonsafe.loads(data)
        except ValueError:  # not JSON, nested too deep, or not UTF-8
            return 0  # the import itself names the problem, at once
        if isinstance(value, dict):
            return max((len(v) for v in value.values() if isinstance(v, list | dict)), default=1)
        return len(value) if isinstance(value, list) else 1
    return data.count(b"\n")


def reviews_import_enqueue(
    *,
    study: Study,
    fmt: str,
    reviews: bytes,
    reviews_name: str,
    titles: bytes | None = None,
    titles_name: str = "",
    mapping: dict[str, str] | None = None,
    human_conditions: list[str] | None = None,
    actor: Any = None,
) -> JobRun:
    """Keep the upload in the default storage and import it in a job (with progress)."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from .jobs import job_enqueue

    folder = f"imports/{study.slug}/{uuid.uuid4().hex}"
    paths = {"reviews_path": default_storage.save(f"{folder}/reviews", ContentFile(reviews))}
    if titles is not None:
        paths["titles_path"] = default_storage.save(f"{folder}/titles", ContentFile(titles))
    job = job_start(
        study=study,
        kind="import",
        actor=actor,
        total=3,
        fmt=fmt,
        reviews_name=reviews_name,
        titles_name=titles_name,
        mapping=mapping or {},
        human_conditions=human_conditions or [],
        **paths,
    )
    return job_enqueue(job=job)


def reviews_import_job(*, job: JobRun) -> dict[str, Any]:
    """The work of an import job: parse the stored upload, write it in one transaction
    (so a retried job imports it whole or not at all; a second run changes nothing), and
    keep the summary or the problems in the job's params."""
    from django.core.files.storage import default_storage

    p = job.params

    def read(key: str) -> bytes | None:
        if not p.get(key):
            return None
        with default_storage.open(p[key], "rb") as fh:
            return fh.read()

    job_progress(job=job, done=0, total=3, message="reading the upload")
    reviews = read("reviews_path") or b""
    job_progress(job=job, done=1, total=3, message="checking every row")
    try:
        parsed = reviews_parse(
            study=job.study,
            fmt=p["fmt"],
            reviews=reviews,
            reviews_name=p["reviews_name"],
            titles=read("titles_path"),
            titles_name=p["titles_name"],
            mapping=p["mapping"],
            human_conditions=p["human_conditions"],
        )
        job_progress(job=job, done=2, total=3, message=f"writing {len(parsed.reviews)} reviews")
        summary = reviews_import(
            study=job.study, parsed=parsed, kind=p["fmt"], actor=job.created_by
        )
    except ImportFailed as exc:
        JobRun.objects.filter(pk=job.pk).update(
            params={**p, "problems": [str(x) for x in exc.problems]}
        )
        raise
    JobRun.objects.filter(pk=job.pk).update(params={**p, "summary": summary})
    for key in ("reviews_path", "titles_path"):
        if p.get(key):
            default_storage.delete(p[key])
    return summary
