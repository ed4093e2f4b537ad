"""Preparing a study's ideas before any reviewer sees them.

Intake (files, folders, a paste) into the seven-section template, topic matching across
conditions, near-duplicate detection, style normalization by an LLM with automatic
checks, and the owner's sign-off of every rewrite. Keyword-only `<entity>_<action>`
functions, as in the rest of `studies.services`; the pure parts live in
`studies/protocol` and `studies/embeddings.py`, the HTTP in `llm/client.py`. Opening the
study once its ideas are ready is a study action (`services/study.py`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import random
import secrets
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from llm.client import JudgeNotConfigured, Prepared, lookup, prepare, record
from llm.models import JudgeConfig, LLMCall
from llm.pool import SendPool
from llm.services import judge_config_usable

from .. import csvsafe
from ..analysis.rounding import counted
from ..jobs import (
    job_active,
    job_enqueue,
    job_latest_done,
    job_progress,
    job_start,
)
from ..models import (
    Condition,
    DuplicatePair,
    Idea,
    IdeaCondition,
    IdeaExclusion,
    IdeaRevision,
    IdeaUpload,
    ImportBatch,
    JobRun,
    LeakageExport,
    NormalizationResult,
    Study,
    Topic,
)
from ..protocol.ideafiles import IdeaBatch, IdeaRecord, read_batch, read_pasted, read_path
from ..protocol.normalization import (
    NORMALIZATION_PROMPT,
    NORMALIZATION_PROMPT_VERSION,
    CheckBounds,
    CheckResult,
    check_rewrite,
    clean_model_output,
    normalization_messages,
    prompt_sha256,
)
from ..protocol.template import SECTION_KEYS, parse_sections, render_sections
from ..status import idea_has_text
from ..uploads import upload_from_form
from .audit import audit

PASTED_SOURCE = "pasted proposal"


# --------------------------------------------------------------------------- assignment


def idea_label(idea: Idea, memberships: list[IdeaCondition] | None = None) -> str:
    """The owner-side name of an idea (its external id); reviewers never see it."""
    rows = memberships if memberships is not None else list(idea.memberships.all())
    if rows:
        rows = sorted(rows, key=lambda m: (m.condition.kind != "human", m.condition.key))
        return rows[0].external_id
    return f"idea-{idea.pk}"


NORMALIZATION_JOB = "normalization"
DUPLICATES_JOB = "duplicates"
REVIEWABLE = (Idea.NormalizationStatus.APPROVED, Idea.NormalizationStatus.EDITED)


class PreparationError(ValueError):
    """A preparation step refused; the message is for the owner."""


class StudyNotReady(PreparationError):
    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


def study_ideas(study: Study, *, include_excluded: bool = False) -> QuerySet[Idea]:
    qs = study.ideas.all()
    if not include_excluded:
        qs = qs.filter(exclusion__isnull=True)
    return qs


# --------------------------------------------------------------------------- intake


def topic_add(*, study: Study, name: str, actor: Any = None) -> Topic:
    name = name.strip()
    if not name:
        raise PreparationError("a topic needs a name")
    topic, created = Topic.objects.get_or_create(study=study, name=name)
    if created:
        audit(study=study, actor=actor, verb="topic_added", name=name)
    return topic


def condition_add(*, study: Study, key: str, kind: str, actor: Any = None) -> Condition:
    key = key.strip()
    if not key:
        raise PreparationError("a condition needs a key")
    if kind not in Condition.Kind.values:
        raise PreparationError(f"kind must be one of {', '.join(Condition.Kind.values)}")
    existing = Condition.objects.filter(study=study, key=key).first()
    if existing is not None:
        if existing.kind != kind:
            raise PreparationError(f"condition {key!r} already exists as {existing.kind}")
        return existing
    condition = Condition.objects.create(study=study, key=key, label=key, kind=kind)
    audit(study=study, actor=actor, verb="condition_added", key=key, kind=kind)
    return condition


def condition_set_generating_model(
    *, study: Study, key: str, model: str, actor: Any = None
) -> Condition:
    """Name the model that wrote a condition's ideas ('' clears it). Only the team sees it:
    reviewers' pages, their exports and the de-identified package never carry it."""
    model = model.strip()
    if len(model) > 200:
        raise PreparationError("a model name has at most 200 characters")
    if any(ch in model for ch in "\r\n\t"):
        raise PreparationError("a model name is one line")
    condition = Condition.objects.filter(study=study, key=key).first()
    if condition is None:
        raise PreparationError(f"the study has no condition {key!r}")
    if condition.generating_model != model:
        condition.generating_model = model
        condition.save(update_fields=["generating_model"])
        audit(study=study, actor=actor, verb="condition_model_set", key=key, model=model)
    return condition


def _known(study: Study) -> dict[str, Any]:
    return {
        "known_topics": list(study.topics.values_list("name", flat=True)),
        "known_conditions": list(study.conditions.values_list("key", flat=True)),
        "existing_ids": list(
            IdeaCondition.objects.filter(study=study).values_list("external_id", flat=True)
        ),
    }


def ideas_read_file(*, study: Study, name: str, data: bytes) -> IdeaBatch:
    """Parse an upload against the study's topics, conditions and ids (nothing written)."""
    return read_batch(name, data, **_known(study))


def ideas_read_path(*, study: Study, path: str) -> IdeaBatch:
    return read_path(path, **_known(study))


def ideas_read_pasted(
    *,
    study: Study,
    text: str,
    external_id: str,
    topic: str,
    conditions: Iterable[str] | str,
    title: str = "",
    institution: str = "",
) -> IdeaBatch:
    return read_pasted(
        text,
        external_id=external_id,
        topic=topic,
        conditions=conditions,
        title=title,
        institution=institution,
        **_known(study),
    )


def ideas_import(
    *,
    study: Study,
    batch: IdeaBatch,
    source: str,
    actor: Any = None,
    import_valid_rows: bool = False,
    sha256: str = "",
) -> dict[str, Any]:
    """Write a read batch in one transaction.

    A batch with errors imports nothing unless `import_valid_rows`; then its valid
    records are imported and the errors are kept in the batch summary.
    """
    if batch.errors and not import_valid_rows:
        raise PreparationError(
            f"{counted(len(batch.errors), 'problem')} in {source}: nothing was imported. "
            "Fix them, or choose to import the valid rows."
        )
    if not batch.records:
        raise PreparationError(f"{source}: no idea could be read, nothing to import")
    with transaction.atomic():
        topics = {t.name: t for t in study.topics.all()}
        conditions = {c.key: c for c in study.conditions.all()}
        taken = set(IdeaCondition.objects.filter(study=study).values_list("external_id", flat=True))
        clash = sorted({r.external_id for r in batch.records} & taken)
        if clash:
            # Someone imported the same ids since the batch was read.
            raise PreparationError(f"external ids already in the study: {', '.join(clash[:10])}")
        created: list[Idea] = []
        for rec in batch.records:
            idea = Idea.objects.create(
                study=study,
                topic=topics[rec.topic],
                title=rec.title[:500],
                raw_text=rec.text,
                sections=dict(rec.parsed.sections),
                author_institution=rec.institution[:300],
                author_contact=rec.author_contact[:300],
            )
            IdeaCondition.objects.bulk_create(
                [
                    IdeaCondition(
                        idea=idea,
                        condition=conditions[c],
                        study=study,
                        external_id=_membership_id(rec, c, i),
                    )
                    for i, c in enumerate(rec.conditions)
                ]
            )
            created.append(idea)
        summary = {
            "ideas": len(created),
            "errors": [str(p) for p in batch.errors],
            "warnings": [str(p) for p in batch.warnings],
            "skipped_rows": len(batch.errors),
            "incomplete": sum(1 for r in batch.records if not r.parsed.is_complete),
        }
        ImportBatch.objects.create(
            study=study,
            kind="ideas",
            filename=source[:300],
            sha256=sha256,
            summary=summary,
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        if study.status == Study.Status.DRAFT:
            study.status = Study.Status.PREPARING
            study.save(update_fields=["status", "updated_at"])
        audit(
            study=study,
            actor=actor,
            verb="ideas_imported",
            source=source,
            ideas=len(created),
            skipped=len(batch.errors),
        )
    return summary


@dataclass
class IdeaImportOutcome:
    """What importing one upload or one paste did: the batch as read, and the import's
    summary, or why nothing was imported (`refused`, a message for the owner; empty when
    the batch's own problems stopped it)."""

    batch: IdeaBatch
    summary: dict[str, Any] | None = None
    refused: str = ""
    staged: IdeaUpload | None = None


def ideas_import_upload(*, study: Study, cleaned: dict[str, Any], actor: Any) -> IdeaImportOutcome:
    """Read the file a valid upload form names (new, or the one kept before) and import it
    when it reads cleanly or the owner asked for its valid rows; the kept file is deleted
    in the import's transaction. Raises `UploadGone` when the kept file has expired."""
    staged = upload_from_form(study=study, cleaned=cleaned, actor=actor)
    batch = ideas_read_file(study=study, name=staged.name, data=bytes(staged.data))
    valid_only = bool(cleaned.get("import_valid_rows"))
    if not (batch.records and (batch.ok or valid_only)):
        return IdeaImportOutcome(batch=batch, staged=staged)
    try:
        with transaction.atomic():
            summary = ideas_import(
                study=study,
                batch=batch,
                source=staged.name,
                actor=actor,
                import_valid_rows=valid_only,
                sha256=staged.sha256,
            )
            staged.delete()
    except PreparationError as exc:
        return IdeaImportOutcome(batch=batch, refused=str(exc), staged=staged)
    return IdeaImportOutcome(batch=batch, summary=summary, staged=staged)


def ideas_import_pasted(*, study: Study, cleaned: dict[str, Any], actor: Any) -> IdeaImportOutcome:
    """Read one pasted proposal (a valid paste form's data) and import it if it reads
    cleanly."""
    batch = ideas_read_pasted(
        study=study,
        text=cleaned["text"],
        external_id=cleaned["external_id"],
        topic=cleaned["topic"],
        conditions=cleaned["conditions"],
        title=cleaned["title"],
        institution=cleaned["institution"],
    )
    if not batch.ok:
        return IdeaImportOutcome(batch=batch)
    try:
        summary = ideas_import(study=study, batch=batch, source=PASTED_SOURCE, actor=actor)
    except PreparationError as exc:
        return IdeaImportOutcome(batch=batch, refused=str(exc))
    return IdeaImportOutcome(batch=batch, summary=summary)


def _membership_id(rec: IdeaRecord, condition: str, index: int) -> str:
    # External ids are unique per study across memberships: an idea in two conditions
    # keeps its id in the first and gets "<id>@<condition>" in the others.
    return rec.external_id if index == 0 else f"{rec.external_id}@{condition}"[:200]


def idea_sections_update(*, idea: Idea, sections: dict[str, str], actor: Any = None) -> Idea:
    """The owner's in-place fix: the text becomes the template rendering of `sections`.

    A rewrite of the old text no longer matches, so a proposed (not yet approved)
    normalization is set back; approved text stays until the owner re-runs or rejects.
    """
    if idea.is_text_locked():
        raise PreparationError("reviewers already have this idea: its text can no longer change")
    cleaned = {k: (sections.get(k) or "").strip() for k in SECTION_KEYS}
    text = render_sections(cleaned, include_missing=True)
    parsed = parse_sections(text)
    before = idea.section_status()
    idea.raw_text = text.strip()
    idea.sections = dict(parsed.sections)
    if cleaned.get("title"):
        idea.title = cleaned["title"].splitlines()[0][:500]
    fields = ["raw_text", "sections", "title"]
    if idea.normalization_status == Idea.NormalizationStatus.PROPOSED:
        idea.normalization_status = Idea.NormalizationStatus.NONE
        idea.normalized_text = ""
        idea.normalization_flags = []
        fields += ["normalization_status", "normalized_text", "normalization_flags"]
        NormalizationResult.objects.filter(
            idea=idea, status=NormalizationResult.Status.PROPOSED
        ).update(status=NormalizationResult.Status.SUPERSEDED)
    idea.save(update_fields=fields)
    audit(
        study=idea.study,
        actor=actor,
        verb="idea_sections_edited",
        idea=idea.pk,
        missing_before=before["missing"] + before["empty"],
        missing_after=idea.section_status()["missing"] + idea.section_status()["empty"],
    )
    return idea


# --------------------------------------------------------------------------- topic matching


@dataclass
class TopicTable:
    topics: list[str]
    conditions: list[str]
    counts: dict[str, dict[str, int]]
    unbalanced: list[str]
    excluded: int

    @property
    def balanced(self) -> bool:
        return not self.unbalanced

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "topic": t,
                "counts": [self.counts[t][c] for c in self.conditions],
                "balanced": t not in self.unbalanced,
            }
            for t in self.topics
        ]

    def totals(self) -> list[int]:
        return [sum(self.counts[t][c] for t in self.topics) for c in self.conditions]


def idea_conditions_by_id(study: Study) -> dict[int, list[str]]:
    out: dict[int, list[str]] = defaultdict(list)
    for idea_id, key in IdeaCondition.objects.filter(
        study=study, idea__exclusion__isnull=True
    ).values_list("idea_id", "condition__key"):
        out[idea_id].append(key)
    return out


def topic_matching_table(*, study: Study) -> TopicTable:
    """Ideas per topic × condition (left-out ideas not counted; an idea in two
    conditions counts in both)."""
    conditions = list(study.conditions.order_by("key").values_list("key", flat=True))
    topics = list(study.topics.order_by("name").values_list("name", flat=True))
    counts = {t: dict.fromkeys(conditions, 0) for t in topics}
    member = idea_conditions_by_id(study)
    for idea_id, topic in study_ideas(study).values_list("id", "topic__name"):
        for c in member.get(idea_id, []):
            counts[topic][c] += 1
    unbalanced = [t for t in topics if len(set(counts[t].values())) > 1]
    return TopicTable(
        topics=topics,
        conditions=conditions,
        counts=counts,
        unbalanced=unbalanced,
        excluded=IdeaExclusion.objects.filter(study=study).count(),
    )


def topic_matching_propose(*, study: Study, seed: int) -> list[Idea]:
    """Ideas to leave out so every topic has as many ideas in each condition as its
    smallest condition has: drawn at random with `seed`, so the owner can reproduce it.

    An idea in several conditions is left out only when all of them have a surplus.
    """
    rng = random.Random(seed)
    member = idea_conditions_by_id(study)
    table = topic_matching_table(study=study)
    by_topic: dict[str, list[Idea]] = defaultdict(list)
    for idea in study_ideas(study).select_related("topic").order_by("pk"):
        by_topic[idea.topic.name].append(idea)
    chosen: list[Idea] = []
    for topic in table.unbalanced:
        counts = dict(table.counts[topic])
        target = min(counts.values())
        ideas = list(by_topic[topic])
        rng.shuffle(ideas)
        for idea in ideas:
            conds = member.get(idea.pk, [])
            if conds and all(counts[c] > target for c in conds):
                chosen.append(idea)
                for c in conds:
                    counts[c] -= 1
    return sorted(chosen, key=lambda i: i.pk)


def ideas_exclude(
    *,
    study: Study,
    ideas: Sequence[Idea],
    reason: str,
    actor: Any = None,
    seed: int | None = None,
) -> int:
    with transaction.atomic():
        n = 0
        for idea in ideas:
            if idea.study_id != study.pk:
                raise PreparationError("idea of another study")
            _, created = IdeaExclusion.objects.get_or_create(
                idea=idea,
                defaults={
                    "study": study,
                    "reason": reason[:300],
                    "seed": seed,
                    "created_by": actor if getattr(actor, "pk", None) else None,
                },
            )
            n += int(created)
        audit(
            study=study,
            actor=actor,
            verb="ideas_excluded",
            ideas=[i.pk for i in ideas],
            reason=reason,
            seed=seed,
        )
    return n


def idea_include(*, idea: Idea, actor: Any = None) -> None:
    deleted, _ = IdeaExclusion.objects.filter(idea=idea).delete()
    if deleted:
        audit(study=idea.study, actor=actor, verb="idea_included", idea=idea.pk)


# --------------------------------------------------------------------------- duplicates


def _idea_text(idea: Idea) -> str:
    sections = "\n".join(str(v or "") for v in (idea.sections or {}).values()).strip()
    return idea.raw_text or idea.normalized_text or sections or idea.title


def _ideas_with_text(study: Study) -> list[Idea]:
    """The study's ideas that have a text to compare (ideas that came with imported
    reviews may have none: their titles alone would all look alike)."""
    return [i for i in study_ideas(study).order_by("pk") if idea_has_text(i)]


def duplicates_problem(study: Study) -> str:
    """Why the duplicate check cannot run, in the owner's words; "" when it can."""
    n = len(_ideas_with_text(study))
    if n >= 2:
        return ""
    has = "no idea of this study has" if n == 0 else "only one idea of this study has"
    return f"There is nothing to compare: {has} a text of its own, and the check compares texts."


def duplicates_enqueue(*, study: Study, threshold: float = 0.8, actor: Any = None) -> JobRun:
    running = job_active(study=study, kind=DUPLICATES_JOB)
    if running is not None:
        return running
    if not 0 < threshold < 1:
        raise PreparationError("the threshold is a cosine between 0 and 1")
    problem = duplicates_problem(study)
    if problem:
        raise PreparationError(problem)
    job = job_start(
        study=study,
        kind=DUPLICATES_JOB,
        actor=actor,
        total=len(_ideas_with_text(study)),
        threshold=threshold,
    )
    job_enqueue(job=job)
    return job


def duplicates_find(*, job: JobRun, batch: int = 16) -> int:
    """Embed every idea that has a text (progress per batch) and store the pairs above
    the threshold."""
    from ..embeddings import embed, near_duplicates

    study = job.study
    ideas = _ideas_with_text(study)
    member = idea_conditions_by_id(study)
    total = len(ideas)
    job_progress(job=job, done=0, total=total, message="embedding ideas")
    vectors = np.zeros((total, 384), dtype=np.float32)
    for start in range(0, total, batch):
        chunk = ideas[start : start + batch]
        vectors[start : start + len(chunk)] = embed([_idea_text(i) for i in chunk])
        job_progress(
            job=job, done=start + len(chunk), message=f"embedded {start + len(chunk)} of {total}"
        )
    threshold = float(job.params.get("threshold", 0.8))
    pairs = near_duplicates(
        [i.pk for i in ideas],
        vectors,
        threshold=threshold,
        groups=[member.get(i.pk) or ["—"] for i in ideas],
    )
    DuplicatePair.objects.bulk_create(
        [
            DuplicatePair(
                job=job,
                study=study,
                idea_a_id=min(int(p.id_a), int(p.id_b)),  # type: ignore[call-overload]
                idea_b_id=max(int(p.id_a), int(p.id_b)),  # type: ignore[call-overload]
                cosine=p.cosine,
                scope=p.scope,
            )
            for p in pairs
        ]
    )
    job.message = f"{counted(len(pairs), 'pair')} above {threshold:.2f}"
    job.save(update_fields=["message"])
    return len(pairs)


# --------------------------------------------------------------------------- normalization


def normalization_config_choose(
    *, study: Study, config: JudgeConfig | None, actor: Any = None
) -> None:
    if not judge_config_usable(config, study):
        raise PreparationError("choose one of this study's judges")
    study.normalization_config = config
    study.save(update_fields=["normalization_config", "updated_at"])
    audit(
        study=study,
        actor=actor,
        verb="normalization_config_chosen",
        config=config.name if config else None,
    )


def normalization_problem(study: Study) -> str:
    """Why normalization cannot run now, in the owner's words; "" when it can."""
    config = study.normalization_config
    if config is None:
        return "Choose or create a judge config for normalization first."
    if config.disabled_reason:
        return f"The judge config “{config.name}” is disabled: {config.disabled_reason}"
    if not config.is_configured():
        return (
            f"No OpenAI-compatible endpoint is configured for “{config.name}”: choose a "
            "provider and a model, or give your own endpoint's base URL and model."
        )
    return ""


def _pending(study: Study, idea_ids: Sequence[int] | None, rerun: bool) -> list[Idea]:
    """Ideas a job still has to normalise. Approved text is never normalised again; a
    proposed rewrite is redone only when the owner asked for a re-run of that idea. An
    idea with no text (one that came with imported reviews) has nothing to rewrite: a call
    for it could only fail, so it waits until someone enters its text."""
    qs = study_ideas(study).order_by("pk").exclude(normalization_status__in=REVIEWABLE)
    if idea_ids is not None:
        qs = qs.filter(pk__in=idea_ids)
    if not rerun:
        qs = qs.filter(normalization_status=Idea.NormalizationStatus.NONE)
    return [idea for idea in qs if idea.raw_text.strip()]


def normalization_waiting(study: Study) -> int:
    """How many ideas a new normalization job would send: the page offers the job only
    for these, so ideas without text are not counted as work to do."""
    return len(_pending(study, None, False))


def normalization_enqueue(
    *,
    study: Study,
    actor: Any = None,
    idea_ids: Sequence[int] | None = None,
    rerun: bool = False,
) -> JobRun:
    """Start (or resume) normalization: a job over every idea still without a rewrite."""
    problem = normalization_problem(study)
    if problem:
        raise PreparationError(problem)
    active = job_active(study=study, kind=NORMALIZATION_JOB)
    if active is not None:
        return active
    pending = _pending(study, idea_ids, rerun)
    if not pending:
        raise PreparationError(
            "every selected idea already has a rewrite or approved text, or has no text to "
            "rewrite (enter it with Fix sections on the ideas page)"
        )
    job = job_start(
        study=study,
        kind=NORMALIZATION_JOB,
        actor=actor,
        total=len(pending),
        config_id=study.normalization_config_id,
        idea_ids=[i.pk for i in pending],
        rerun=rerun,
        prompt_version=NORMALIZATION_PROMPT_VERSION,
    )
    audit(
        study=study,
        actor=actor,
        verb="normalization_started",
        job=job.pk,
        ideas=len(pending),
        rerun=rerun,
    )
    job_enqueue(job=job)
    return job


_REFUSALS = ("i'm sorry", "i am sorry", "i cannot", "i can't", "i can not", "as an ai")


def output_problem(text: str, response: dict[str, Any] | None) -> str:
    """An LLM failure that is not an HTTP error: empty, truncated or refused output."""
    if not text.strip():
        return "empty output"
    choices = (response or {}).get("choices") or []
    if choices and choices[0].get("finish_reason") == "length":
        return "truncated output (the model hit its token limit)"
    head = text.strip()[:200].lower()
    if head.startswith(_REFUSALS) and not parse_sections(text).found[1:]:
        return "the model refused: " + text.strip()[:200]
    return ""


@dataclass
class _Item:
    idea: Idea
    salt: str
    prepared: Prepared


@dataclass
class NormalizationOutcome:
    proposed: int = 0
    failed: int = 0
    flagged: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)


def _salt(idea: Idea, rerun: bool) -> str:
    # A re-run must not be answered from the cache with the rewrite just rejected.
    if not rerun:
        return ""
    n = NormalizationResult.objects.filter(idea=idea).exclude(
        status=NormalizationResult.Status.FAILED
    )
    return f"rerun-{n.count()}"


# Threads for the automatic checks of one job: the embedding is numpy with one BLAS
# thread per call, so two checks use two cores where there are two.
CHECK_THREADS = max(1, min(2, os.cpu_count() or 1))


@contextlib.contextmanager
def _blas_single_threaded() -> Iterator[None]:
    """Hold the BLAS thread limit for the whole job: each embedding call sets and restores
    it, and with two check threads one restoring it under the other's feet let BLAS
    threads spin against each other."""
    from ..embeddings import _blas_controller, _blas_threads

    with _blas_controller().limit(limits=_blas_threads(), user_api="blas"):
        yield


def normalization_run(
    *,
    job: JobRun,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
    bounds: CheckBounds | None = None,
) -> NormalizationOutcome:
    """Normalise the job's ideas, `config.concurrency` calls at a time.

    HTTP runs in the LLM layer's send pool (the one judge runs use); every database write
    stays on this thread. Ideas that got approved text or a rewrite meanwhile are skipped,
    so re-delivering the job (a crashed worker, acks_late) resumes it without normalising
    anything twice.
    """
    if embed is None:
        from ..embeddings import embed as embed_texts

        embed = embed_texts
    study = job.study
    config = JudgeConfig.objects.filter(pk=job.params.get("config_id")).first()
    if config is None or not config.is_configured():
        raise JudgeNotConfigured("the job's judge config is gone or has no endpoint")
    rerun = bool(job.params.get("rerun"))
    ideas = _pending(study, job.params.get("idea_ids"), rerun)
    already = len(job.params.get("idea_ids") or []) - len(ideas)
    outcome = NormalizationOutcome(skipped=max(0, already))
    done = outcome.skipped
    total = job.total or len(ideas)
    job_progress(
        job=job, done=done, total=total, message=f"normalising {counted(len(ideas), 'idea')}"
    )
    queue = list(ideas)
    # The automatic checks embed the original and the rewrite, which costs real CPU per
    # idea. Run on this thread, they kept it from refilling the HTTP slots and the job ran
    # far past its latency bound (bench/normalization.py; docs/measurements.md). They run on their own
    # threads instead (pure functions, no ORM), overlapping the requests on the wire.
    checking: dict[Future[list[CheckResult]], tuple[_Item, LLMCall]] = {}

    def finish(item: _Item, call: LLMCall, checks: list[CheckResult] | None) -> None:
        nonlocal done
        _store(item.idea, call, job, config, item.prepared, embed, bounds, outcome, checks)
        done += 1

    def settle(item: _Item, call: LLMCall) -> None:
        text, error = _usable(call)
        if error:
            finish(item, call, None)
        else:
            future = checker.submit(
                check_rewrite, item.idea.raw_text, text, embed=embed, bounds=bounds
            )
            checking[future] = (item, call)

    with (
        _blas_single_threaded(),
        SendPool[_Item](config.concurrency, name="normalize") as pool,
        ThreadPoolExecutor(
            max_workers=CHECK_THREADS, thread_name_prefix="normalize-check"
        ) as checker,
    ):
        while queue or pool or checking:
            while queue and pool.has_room():
                idea = queue.pop(0)
                salt = _salt(idea, rerun)
                prepared = prepare(
                    config,
                    normalization_messages(idea.raw_text),
                    prompt_version=NORMALIZATION_PROMPT_VERSION,
                    salt=salt,
                    study_id=study.pk,
                )
                hit = lookup(prepared)
                if hit is not None:
                    settle(_Item(idea, salt, prepared), hit)
                    continue
                pool.submit(prepared, _Item(idea, salt, prepared))
            if not pool and not checking:
                continue
            before = done
            finished = pool.wait(also=checking)
            for item, prepared, attempt in pool.returned(finished):
                settle(item, record(prepared, attempt))
            for future in finished:
                if future in checking:
                    item, call = checking.pop(future)
                    finish(item, call, future.result())
            if done != before:
                job_progress(
                    job=job,
                    done=done,
                    message=f"{done} of {total}: {outcome.proposed} rewritten, "
                    f"{outcome.flagged} flagged, {outcome.failed} failed",
                )
    job.message = (
        f"{outcome.proposed} rewritten ({outcome.flagged} flagged), {outcome.failed} failed"
        + (f", {outcome.skipped} skipped" if outcome.skipped else "")
    )[:300]
    job.save(update_fields=["message"])
    return outcome


def _usable(call: LLMCall) -> tuple[str, str]:
    """The call's rewrite and, when it cannot be used, why (marked on the call once)."""
    text = clean_model_output(call.response_text or "")
    error = call.error
    if not error:
        error = output_problem(text, call.response)
        if error:
            # A refusal or an empty answer is a failed call: it must not answer the
            # resumed job from the cache (only calls without an error do).
            call.error = f"unusable output: {error}"
            LLMCall.objects.filter(pk=call.pk).update(error=call.error)
    return text, error


def _store(
    idea: Idea,
    call: LLMCall,
    job: JobRun,
    config: JudgeConfig,
    prepared: Prepared,
    embed: Callable[[Sequence[str]], np.ndarray],
    bounds: CheckBounds | None,
    outcome: NormalizationOutcome,
    checks: list[CheckResult] | None = None,
) -> NormalizationResult:
    """Store a call's rewrite with its checks (run here unless `checks` are given)."""
    text, error = _usable(call)
    result = NormalizationResult(
        idea=idea,
        job=job,
        config=config,
        call=call,
        prompt_version=NORMALIZATION_PROMPT_VERSION,
        prompt_hash=prompt_sha256(NORMALIZATION_PROMPT),
        model=prepared.model,
        source_text=idea.raw_text,
        output_text=text,
        attempts=call.attempts,
    )
    with transaction.atomic():
        idea = Idea.objects.select_for_update().get(pk=idea.pk)
        if idea.normalization_status in REVIEWABLE:
            outcome.skipped += 1
            return result  # approved meanwhile: never replaced by a job
        NormalizationResult.objects.filter(
            idea=idea, status=NormalizationResult.Status.PROPOSED
        ).update(status=NormalizationResult.Status.SUPERSEDED)
        if error:
            result.status = NormalizationResult.Status.FAILED
            result.error = error
            result.save()
            idea.normalization_flags = ["llm_error"]
            idea.save(update_fields=["normalization_flags"])
            outcome.failed += 1
            outcome.errors.append(f"idea {idea.pk}: {error}")
            return result
        if checks is None:
            checks = check_rewrite(idea.raw_text, text, embed=embed, bounds=bounds)
        result.checks = [
            {"name": c.name, "passed": c.passed, "detail": c.detail, "lost": list(c.lost)}
            for c in checks
        ]
        result.failed_checks = [c.name for c in checks if not c.passed]
        result.status = NormalizationResult.Status.PROPOSED
        result.save()
        idea.normalized_text = text
        idea.normalization_status = Idea.NormalizationStatus.PROPOSED
        idea.normalization_flags = result.failed_checks
        idea.save(update_fields=["normalized_text", "normalization_status", "normalization_flags"])
    outcome.proposed += 1
    outcome.flagged += bool(result.failed_checks)
    return result


def latest_result(idea: Idea) -> NormalizationResult | None:
    return (
        NormalizationResult.objects.filter(idea=idea)
        .exclude(status=NormalizationResult.Status.SUPERSEDED)
        .select_related("call", "decided_by")
        .first()
    )


def _decidable(idea: Idea) -> NormalizationResult:
    if idea.is_excluded():
        raise PreparationError("this idea is left out of the study; include it first")
    if idea.is_text_locked():
        raise PreparationError(
            "reviewers already have this idea: its approved text can no longer change"
        )
    result = latest_result(idea)
    if result is None or result.status == NormalizationResult.Status.FAILED:
        raise PreparationError("there is no rewrite to decide on: run normalization first")
    return result


def _revise(idea: Idea, text: str, kind: str, result: NormalizationResult, actor: Any) -> int:
    last = idea.revisions.order_by("-number").first()
    number = (last.number if last else 0) + 1
    IdeaRevision.objects.create(
        idea=idea,
        number=number,
        text=text,
        kind=kind,
        result=result,
        created_by=actor if getattr(actor, "pk", None) else None,
    )
    return number


def normalization_approve(*, idea: Idea, actor: Any) -> Idea:
    """Approve the current rewrite as it stands: this text is what reviewers will see."""
    with transaction.atomic():
        idea = Idea.objects.select_for_update().get(pk=idea.pk)
        result = _decidable(idea)
        if result.status in (
            NormalizationResult.Status.APPROVED,
            NormalizationResult.Status.EDITED,
        ):
            return idea
        if result.status == NormalizationResult.Status.REJECTED:
            raise PreparationError("this rewrite was rejected: re-run normalization")
        now = timezone.now()
        result.status = NormalizationResult.Status.APPROVED
        result.final_text = result.output_text
        result.decided_by, result.decided_at = actor, now
        result.save()
        idea.normalized_text = result.output_text
        idea.normalization_status = Idea.NormalizationStatus.APPROVED
        idea.save(update_fields=["normalized_text", "normalization_status"])
        number = _revise(idea, result.output_text, "approved", result, actor)
        audit(
            study=idea.study,
            actor=actor,
            verb="normalization_approved",
            idea=idea.pk,
            result=result.pk,
            revision=number,
            failed_checks=result.failed_checks,
        )
    return idea


def normalization_edit(
    *,
    idea: Idea,
    text: str,
    actor: Any,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
) -> Idea:
    """Approve the owner's edit of the rewrite; the checks are run again on the edit."""
    text = text.replace("\r\n", "\n").strip()
    if not text:
        raise PreparationError("the edited text is empty")
    if embed is None:
        from ..embeddings import embed as embed_texts

        embed = embed_texts
    with transaction.atomic():
        idea = Idea.objects.select_for_update().get(pk=idea.pk)
        result = _decidable(idea)
        checks = check_rewrite(idea.raw_text, text, embed=embed)
        now = timezone.now()
        if result.status in (
            NormalizationResult.Status.APPROVED,
            NormalizationResult.Status.EDITED,
        ):
            # A later edit of approved text: a new result row keeps the old decision intact.
            result.pk = None
            result.created_at = now
        result.status = NormalizationResult.Status.EDITED
        result.final_text = text
        result.checks = [
            {"name": c.name, "passed": c.passed, "detail": c.detail, "lost": list(c.lost)}
            for c in checks
        ]
        result.failed_checks = [c.name for c in checks if not c.passed]
        result.decided_by, result.decided_at = actor, now
        result.save()
        idea.normalized_text = text
        idea.normalization_status = Idea.NormalizationStatus.EDITED
        idea.normalization_flags = result.failed_checks
        idea.save(update_fields=["normalized_text", "normalization_status", "normalization_flags"])
        number = _revise(idea, text, "edited", result, actor)
        audit(
            study=idea.study,
            actor=actor,
            verb="normalization_edited",
            idea=idea.pk,
            result=result.pk,
            revision=number,
            failed_checks=result.failed_checks,
        )
    return idea


def normalization_reject(*, idea: Idea, actor: Any, reason: str = "") -> Idea:
    """Reject the rewrite: the idea has no reviewable text until a re-run is approved."""
    with transaction.atomic():
        idea = Idea.objects.select_for_update().get(pk=idea.pk)
        result = _decidable(idea)
        result.status = NormalizationResult.Status.REJECTED
        result.decision_note = reason.strip()
        result.decided_by, result.decided_at = actor, timezone.now()
        result.save()
        idea.normalization_status = Idea.NormalizationStatus.REJECTED
        idea.normalized_text = ""
        idea.save(update_fields=["normalization_status", "normalized_text"])
        audit(
            study=idea.study,
            actor=actor,
            verb="normalization_rejected",
            idea=idea.pk,
            result=result.pk,
            reason=reason.strip(),
        )
    return idea


def normalization_rerun(*, idea: Idea, actor: Any) -> JobRun:
    """A fresh rewrite of one idea (not from the cache). Approved ideas are left alone:
    reject or edit them instead."""
    if idea.normalization_status in REVIEWABLE:
        raise PreparationError("this idea's text is approved; edit it, or reject it first")
    if idea.is_excluded():
        raise PreparationError("this idea is left out of the study; include it first")
    job = normalization_enqueue(study=idea.study, actor=actor, idea_ids=[idea.pk], rerun=True)
    audit(study=idea.study, actor=actor, verb="normalization_rerun", idea=idea.pk, job=job.pk)
    return job


def signoff_queue(study: Study) -> list[int]:
    """Ideas waiting for a decision, flagged ones first."""
    ideas = study_ideas(study).filter(normalization_status=Idea.NormalizationStatus.PROPOSED)
    return [i.pk for i in sorted(ideas, key=lambda i: (not i.normalization_flags, i.pk))]


def signoff_passed(study: Study) -> list[Idea]:
    """Ideas whose current rewrite waits for a decision and passed every automatic check
    (the checks ran and none failed), in import order: what "approve all" approves."""
    results = NormalizationResult.objects.filter(status=NormalizationResult.Status.PROPOSED)
    ideas = (
        study_ideas(study)
        .filter(normalization_status=Idea.NormalizationStatus.PROPOSED)
        .select_related("topic")
        .prefetch_related(
            Prefetch("normalization_results", queryset=results, to_attr="proposed"),
            "memberships",
        )
        .order_by("pk")
    )
    return [
        i
        for i in ideas
        if not i.normalization_flags
        and i.proposed  # type: ignore[attr-defined]
        and all(r.checks and not r.failed_checks for r in i.proposed)  # type: ignore[attr-defined]
    ]


def signoff_token(ideas: Iterable[Idea]) -> str:
    """A digest of exactly which ideas the owner was shown, so the confirmation approves
    those and nothing that changed (a re-run, a new flag) after the page was drawn."""
    ids = ",".join(str(pk) for pk in sorted(i.pk for i in ideas))
    return hashlib.sha256(ids.encode()).hexdigest()[:32]


def normalization_approve_passed(*, study: Study, actor: Any, token: str) -> list[Idea]:
    """Approve, in one go, every rewrite that passed every check (see `signoff_passed`).

    `token` is `signoff_token` of the list the owner confirmed; if the list has changed
    since, nothing is approved. Each idea gets its own approval audit event as with a
    single sign-off, and one event records the bulk decision."""
    with transaction.atomic():
        Study.objects.select_for_update().get(pk=study.pk)
        ideas = signoff_passed(study)
        if not ideas:
            raise PreparationError("no rewrite waiting for sign-off passed every check")
        if token != signoff_token(ideas):
            raise PreparationError(
                f"the list changed since you looked (now {counted(len(ideas), 'idea')}): "
                "check it again before approving"
            )
        for idea in ideas:
            normalization_approve(idea=idea, actor=actor)
        audit(
            study=study,
            actor=actor,
            verb="normalization_approved_passed",
            n=len(ideas),
            ideas=[i.pk for i in ideas],
        )
    return ideas


def normalization_overview(study: Study) -> dict[str, Any]:
    ideas = list(
        study_ideas(study)
        .select_related("topic")
        .prefetch_related(
            Prefetch(
                "normalization_results",
                queryset=NormalizationResult.objects.exclude(
                    status=NormalizationResult.Status.SUPERSEDED
                ),
            ),
            "memberships__condition",
        )
        .order_by("pk")
    )

    counts = Counter(i.normalization_status for i in ideas)
    rows = []
    for idea in ideas:
        results = list(idea.normalization_results.all())
        rows.append(
            {"idea": idea, "label": idea_label(idea), "result": results[0] if results else None}
        )
    return {
        "rows": rows,
        "counts": {s.label: counts.get(s.value, 0) for s in Idea.NormalizationStatus},
        "flagged": sum(1 for i in ideas if i.normalization_flags),
        "approved": sum(counts.get(s, 0) for s in REVIEWABLE),
        "total": len(ideas),
    }


# --------------------------------------------------------------------------- leakage export


def leakage_export_create(
    *, study: Study, actor: Any = None, seed: int | None = None
) -> LeakageExport:
    """Shuffle the approved texts under random codes for a blind "who wrote this?" test.

    The texts file carries only codes and texts; the key (code → idea, conditions, kind)
    stays with the owner in this row and its own download.
    """
    seed = seed if seed is not None else secrets.randbits(32)
    ideas = list(
        study_ideas(study)
        .filter(normalization_status__in=REVIEWABLE)
        .prefetch_related("memberships__condition")
        .order_by("pk")
    )
    if not ideas:
        raise PreparationError("no idea has approved normalised text yet")
    rng = random.Random(seed)
    rng.shuffle(ideas)
    codes = rng.sample(range(1000, 10000), len(ideas)) if len(ideas) < 9000 else None
    key = []
    for n, idea in enumerate(ideas):
        conds = sorted(m.condition.key for m in idea.memberships.all())
        kinds = sorted({m.condition.kind for m in idea.memberships.all()})
        key.append(
            {
                "code": f"T{codes[n] if codes else n + 1}",
                "idea_id": idea.pk,
                "public_id": str(idea.public_id),
                "conditions": conds,
                "kind": "+".join(kinds),
            }
        )
    export = LeakageExport.objects.create(
        study=study, seed=seed, key=key, created_by=actor if getattr(actor, "pk", None) else None
    )
    audit(study=study, actor=actor, verb="leakage_export_created", export=export.pk, seed=seed)
    return export


def leakage_csv(export: LeakageExport, kind: str) -> str:
    out = io.StringIO()
    writer = csvsafe.writer(out)
    if kind == "texts":
        texts = dict(
            Idea.objects.filter(pk__in=[k["idea_id"] for k in export.key]).values_list(
                "pk", "normalized_text"
            )
        )
        writer.writerow(["code", "text", "guess (human or ai)"])
        for k in export.key:
            writer.writerow([k["code"], texts.get(k["idea_id"], ""), ""])
    elif kind == "key":
        writer.writerow(["code", "idea_id", "public_id", "conditions", "kind"])
        for k in export.key:
            writer.writerow(
                [k["code"], k["idea_id"], k["public_id"], ";".join(k["conditions"]), k["kind"]]
            )
    else:
        raise ValueError(kind)
    return out.getvalue()


# --------------------------------------------------------------------------- leakage check

LEAKAGE_JOB = "leakage"
LEAKAGE_SIDES = (("before", "raw text"), ("after", "approved normalised text"))


@dataclass
class LeakageSample:
    """The texts of one side of the check, each with its source (human or ai)."""

    idea_ids: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {"human": self.labels.count("human"), "ai": self.labels.count("ai")}


def leakage_samples(study: Study) -> tuple[dict[str, LeakageSample], list[str]]:
    """Raw text of every included idea ("before") and approved text ("after"), each
    labelled with its conditions' kind; notes say which ideas could not be labelled."""
    samples = {"before": LeakageSample(), "after": LeakageSample()}
    notes: list[str] = []
    mixed: list[int] = []
    unlabelled: list[int] = []
    textless: list[int] = []
    ideas = study_ideas(study).prefetch_related("memberships__condition").order_by("pk")
    for idea in ideas:
        kinds = {m.condition.kind for m in idea.memberships.all()}
        if len(kinds) != 1:
            (mixed if kinds else unlabelled).append(idea.pk)
            continue
        label = "ai" if kinds == {Condition.Kind.AI} else "human"
        texts = {}
        if idea.raw_text.strip():
            texts["before"] = idea.raw_text
        else:
            # An idea that came with imported reviews and no text has no style to read.
            textless.append(idea.pk)
        if idea.normalization_status in REVIEWABLE and idea.normalized_text.strip():
            texts["after"] = idea.normalized_text
        for side, text in texts.items():
            samples[side].idea_ids.append(idea.pk)
            samples[side].texts.append(text)
            samples[side].labels.append(label)
    if mixed:
        notes.append(
            f"{counted(len(mixed), 'idea')} in both a human and an AI condition "
            f"{'is' if len(mixed) == 1 else 'are'} left out"
        )
    if unlabelled:
        notes.append(
            f"{counted(len(unlabelled), 'idea')} in no condition "
            f"{'is' if len(unlabelled) == 1 else 'are'} left out"
        )
    if textless:
        notes.append(
            f"{counted(len(textless), 'idea')} without a raw text "
            f"{'is' if len(textless) == 1 else 'are'} left out of “before”"
        )
    before, after = len(samples["before"].texts), len(samples["after"].texts)
    if after < before:
        notes.append(
            f"only {after} of {counted(before, 'idea')} {'has' if after == 1 else 'have'} "
            "approved text: “after” covers those, "
            + ("“before” all of them" if not textless else "“before” those with a raw text")
        )
    return samples, notes


def _leakage_folds(sample: LeakageSample, folds: int) -> tuple[int, str]:
    """Folds to use (fewer than asked when a source is small), or 0 and why not."""
    from ..analysis.leakage import LeakageError, check_sample, max_folds

    k = max_folds(sample.labels, limit=folds)
    if k == 0:
        try:
            check_sample(sample.texts, sample.labels, 2)
        except LeakageError as exc:
            return 0, str(exc)
    return k, ""


def leakage_check_plan(study: Study, *, folds: int = 5) -> dict[str, Any]:
    """What a check would compute now: per side the counts, the folds or why it cannot."""
    samples, notes = leakage_samples(study)
    sides = {}
    for side, label in LEAKAGE_SIDES:
        k, problem = _leakage_folds(samples[side], folds)
        sides[side] = {"label": label, "counts": samples[side].counts(), "folds": k}
        sides[side]["problem"] = problem
    return {"sides": sides, "notes": notes, "ready": any(s["folds"] for s in sides.values())}


def leakage_check_enqueue(
    *,
    study: Study,
    actor: Any = None,
    seed: int | None = None,
    folds: int = 5,
    n_permutations: int = 100,
    n_bootstrap: int = 2000,
    llm: bool = False,
) -> JobRun:
    """Start the classifier check (or return the one already running). With `llm`, the
    study's normalization model is also asked to guess each text's source."""
    active = job_active(study=study, kind=LEAKAGE_JOB)
    if active is not None:
        return active
    plan = leakage_check_plan(study, folds=folds)
    if not plan["ready"]:
        raise PreparationError(
            "The leakage check cannot run yet: " + plan["sides"]["before"]["problem"]
        )
    config_id = None
    if llm:
        problem = normalization_problem(study)
        if problem:
            raise PreparationError("No model to ask: " + problem)
        config_id = study.normalization_config_id
    seed = seed if seed is not None else secrets.randbelow(10**6)
    runs = [s for s in plan["sides"].values() if s["folds"]]
    calls = sum(s["counts"]["human"] + s["counts"]["ai"] for s in runs) if llm else 0
    job = job_start(
        study=study,
        kind=LEAKAGE_JOB,
        actor=actor,
        total=len(runs) * (1 + n_permutations) + calls,
        seed=seed,
        folds=folds,
        n_permutations=n_permutations,
        n_bootstrap=n_bootstrap,
        llm_config_id=config_id,
    )
    audit(study=study, actor=actor, verb="leakage_check_started", job=job.pk, seed=seed)
    job_enqueue(job=job)
    return job


def leakage_check_run(*, job: JobRun) -> dict[str, Any]:
    """Run the classifier on raw and on approved text; the result goes to `job.params`."""
    from ..analysis.leakage import LeakageError, leakage_classifier

    p = job.params
    samples, notes = leakage_samples(job.study)
    n_perm = int(p.get("n_permutations", 100))
    result: dict[str, Any] = {"notes": notes}
    offset = 0
    folds = int(p.get("folds", 5))
    runnable = [
        samples[side] for side, _ in LEAKAGE_SIDES if _leakage_folds(samples[side], folds)[0]
    ]
    total = len(runnable) * (1 + n_perm)
    if p.get("llm_config_id"):
        total += sum(len(sample.texts) for sample in runnable)
    job_progress(job=job, done=0, total=max(total, 1), message="reading texts")
    for side, label in LEAKAGE_SIDES:
        sample = samples[side]
        k, problem = _leakage_folds(sample, int(p.get("folds", 5)))
        if not k:
            result[side] = {"error": problem, "counts": sample.counts(), "label": label}
            continue
        if k < int(p.get("folds", 5)):
            result.setdefault("fold_notes", []).append(
                f"{label}: {k}-fold, as a source has fewer than {2 * int(p.get('folds', 5))} ideas"
            )
        base = offset

        def progress(done: int, total: int, message: str, base: int = base) -> None:
            job_progress(job=job, done=base + done, message=message)

        try:
            estimate = leakage_classifier(
                sample.texts,
                sample.labels,
                folds=k,
                seed=int(p.get("seed", 0)),
                n_bootstrap=int(p.get("n_bootstrap", 2000)),
                n_permutations=n_perm,
                name=side,
                progress=progress,
            )
        except LeakageError as exc:
            result[side] = {"error": str(exc), "counts": sample.counts(), "label": label}
            continue
        result[side] = {**estimate.to_dict(), "label": label}
        offset += 1 + n_perm
        if p.get("llm_config_id"):
            result[side]["llm"] = _leakage_llm(job, sample, side, offset)
            offset += len(sample.texts)
    job.params = {**p, "result": result}
    before, after = result.get("before", {}), result.get("after", {})
    job.message = (
        f"AUC before {before['auc']:.2f}" if "auc" in before else "before: not computed"
    ) + (f", after {after['auc']:.2f}" if "auc" in after else ", after: not computed")
    job.total = max(offset, 1)
    job.save(update_fields=["params", "message", "total"])
    audit(
        study=job.study,
        actor=None,
        verb="leakage_check_finished",
        job=job.pk,
        auc_before=before.get("auc"),
        auc_after=after.get("auc"),
    )
    return result


def _leakage_llm(job: JobRun, sample: LeakageSample, side: str, offset: int) -> dict[str, Any]:
    """Ask the model for P(AI) of every text, `concurrency` at a time; score the guesses
    like the classifier. A call that fails or gives no number counts as a coin flip."""
    from ..analysis.leakage import (
        SOURCE_GUESS_PROMPT_VERSION,
        LeakageError,
        auc_with_ci,
        parse_source_guess,
        source_guess_messages,
    )

    config = JudgeConfig.objects.filter(pk=job.params.get("llm_config_id")).first()
    if config is None or not config.is_configured():
        return {"error": "the judge config is gone or has no endpoint"}
    guesses: list[float | None] = [None] * len(sample.texts)
    call_ids: list[int] = []  # the study's calls: its export and its delete find them here
    done = 0
    queue = list(enumerate(sample.texts))
    with SendPool[int](config.concurrency, name="leakage") as pool:
        while queue or pool:
            while queue and pool.has_room():
                i, text = queue.pop(0)
                prepared = prepare(
                    config,
                    source_guess_messages(text),
                    prompt_version=SOURCE_GUESS_PROMPT_VERSION,
                    study_id=job.study_id,
                )
                hit = lookup(prepared)
                if hit is not None:
                    guesses[i] = parse_source_guess(hit.response_text or "")
                    call_ids.append(hit.pk)
                    done += 1
                else:
                    pool.submit(prepared, i)
            for i, prepared, attempt in pool.returned(pool.wait()):
                guess = None if attempt.error else parse_source_guess(attempt.text)
                call = record(
                    prepared,
                    attempt,
                    parsed=None if guess is None else {"p_ai": guess},
                    parse_error="" if guess is not None or attempt.error else "no AI probability",
                )
                call_ids.append(call.pk)
                guesses[i] = guess
                done += 1
            job_progress(
                job=job,
                done=offset + done,
                message=f"{side}: the model guessed {counted(done, 'source')}",
            )
    answered = sum(g is not None for g in guesses)
    try:
        estimate = auc_with_ci(
            sample.labels,
            [0.5 if g is None else g for g in guesses],
            n_bootstrap=int(job.params.get("n_bootstrap", 2000)),
            seed=int(job.params.get("seed", 0)),
        )
    except LeakageError as exc:
        return {"error": str(exc)}
    return {
        "model": config.resolved_model(),
        "config": config.name,
        "answered": answered,
        "failed": len(guesses) - answered,
        "auc": round(estimate.auc, 4),
        "ci_low": round(estimate.ci_low, 4),
        "ci_high": round(estimate.ci_high, 4),
        "p_value": estimate.p_value,
        "prompt_version": SOURCE_GUESS_PROMPT_VERSION,
        "call_ids": sorted(call_ids),
    }


def leakage_call_ids(study: Study) -> set[int]:
    """The LLM calls the study's leakage checks made or reused (the model's guesses)."""
    ids: set[int] = set()
    for params in JobRun.objects.filter(study=study, kind=LEAKAGE_JOB).values_list(
        "params", flat=True
    ):
        result = (params or {}).get("result") or {}
        for side in result.values():
            if isinstance(side, dict) and isinstance(side.get("llm"), dict):
                ids.update(int(k) for k in side["llm"].get("call_ids", ()))
    return ids


def leakage_side_reading(side: dict[str, Any]) -> tuple[str, str]:
    """The reading (``easy``, ``too_few``, ...) and the owner's words for one side of a
    stored check, from its numbers (so a check stored with older wording reads the same
    as a new one)."""
    from ..analysis.leakage import reading, verdict

    if side.get("auc") is None or side.get("ci_low") is None or side.get("ci_high") is None:
        return "not_computed", "not computed"
    numbers = (float(side["auc"]), float(side["ci_low"]), float(side["ci_high"]))
    words = verdict(*numbers, n_ai=side.get("n_ai"), n_human=side.get("n_human"))
    return reading(*numbers), words


def leakage_check_latest(study: Study) -> JobRun | None:
    return job_latest_done(study=study, kind=LEAKAGE_JOB)
