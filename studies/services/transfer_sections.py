"""The study file's sections (`transfer_section_register`) and shared models
(`transfer_shared_register`): judging registers its rows here at start-up, in a module of
its own so that registering loads neither the study file's reader and writer nor the
services around them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import models

from .. import models as m


@dataclass(frozen=True)
class StudySection:
    """Rows of one model that belong to a study."""

    model: type[models.Model]
    rows: Callable[[m.Study], models.QuerySet]
    # Rewrites the serialized rows before they leave (personal data out), or None.
    scrub: Callable[[list[dict[str, Any]]], None] | None = None
    # Ids of shared rows inside JSON fields: (field, key in its object, shared model).
    json_refs: tuple[tuple[str, str, type[models.Model]], ...] = ()
    # Of rows whose ids this database holds already, those that are the same row (their
    # fields after the shared keys are mapped, as the database has them) are kept and
    # not written: rows a study refers to that outlive it (a corpus's papers).
    same_if: tuple[str, ...] = ()


@dataclass(frozen=True)
class SharedModel:
    """An installation-wide model referenced by study rows, written by natural key."""

    model: type[models.Model]
    key: tuple[str, ...]  # the fields that identify a row across installations
    fields: tuple[str, ...]  # what is written and created (besides the key)
    # The key files of an earlier version wrote, still read (a corpus by name alone).
    legacy_key: tuple[str, ...] = ()


MOVED_LABELS = {"judging.judgeconfig": "llm.judgeconfig", "judging.llmcall": "llm.llmcall"}
"""Models that moved app since files were written: their old labels still read."""

STUDY_SECTIONS: list[StudySection] = []
SHARED_MODELS: dict[str, SharedModel] = {}


def transfer_section_register(
    model: type[models.Model],
    rows: Callable[..., Any],
    scrub: Callable[[list[dict[str, Any]]], None] | None = None,
    *,
    json_refs: tuple[tuple[str, str, type[models.Model]], ...] = (),
    same_if: tuple[str, ...] = (),
) -> None:
    if all(s.model is not model for s in STUDY_SECTIONS):
        STUDY_SECTIONS.append(StudySection(model, rows, scrub, json_refs, same_if))


def transfer_shared_register(
    model: type[models.Model],
    *,
    key: tuple[str, ...],
    fields: tuple[str, ...],
    legacy_key: tuple[str, ...] = (),
) -> None:
    SHARED_MODELS[model._meta.label_lower] = SharedModel(model, key, fields, legacy_key)


def _platform_ids_scrub(rows: list[dict[str, Any]]) -> None:
    """A platform participant's ids are personal data: the file names them by their
    reviewer's pseudonym, and carries no session id and no resume secret."""
    pseudonyms = dict(
        m.Reviewer.objects.filter(pk__in=[r["fields"]["reviewer"] for r in rows]).values_list(
            "pk", "pseudonym"
        )
    )
    for row in rows:
        fields = row["fields"]
        fields["participant_id"] = pseudonyms.get(fields["reviewer"], f"P{row['pk']}")
        fields["platform_study_id"] = ""
        fields["session_id"] = ""
        fields["secret"] = ""


def _register_studies() -> None:
    by_study = [
        m.Study,
        m.StudyMember,
        m.Topic,
        m.Condition,
        m.Idea,
        m.IdeaCondition,
        m.Reviewer,
        m.Invitation,
        m.Assignment,
        m.Review,
        m.PairTask,
        m.ImportBatch,
        m.JobRun,
        m.StudyReport,
        m.AuditEvent,
        m.IdeaUpload,
        m.IdeaExclusion,
        m.DuplicatePair,
        m.LeakageExport,
    ]
    transfer_section_register(m.Study, lambda s: m.Study.objects.filter(pk=s.pk))
    for model in by_study[1:]:
        transfer_section_register(model, lambda s, model=model: model.objects.filter(study=s))
    transfer_section_register(m.PlatformLink, lambda s: m.PlatformLink.objects.filter(study=s))
    transfer_section_register(
        m.PlatformParticipant,
        lambda s: m.PlatformParticipant.objects.filter(study=s),
        scrub=_platform_ids_scrub,
    )
    transfer_section_register(
        m.ReviewAcceptance, lambda s: m.ReviewAcceptance.objects.filter(review__study=s)
    )
    transfer_section_register(
        m.ReviewScore, lambda s: m.ReviewScore.objects.filter(review__study=s)
    )
    transfer_section_register(
        m.ReviewRevision, lambda s: m.ReviewRevision.objects.filter(review__study=s)
    )
    transfer_section_register(
        m.PairJudgment, lambda s: m.PairJudgment.objects.filter(task__study=s)
    )
    transfer_section_register(
        m.NormalizationResult, lambda s: m.NormalizationResult.objects.filter(idea__study=s)
    )
    transfer_section_register(
        m.IdeaRevision, lambda s: m.IdeaRevision.objects.filter(idea__study=s)
    )
    transfer_section_register(
        m.RationaleEmbedding, lambda s: m.RationaleEmbedding.objects.filter(review__study=s)
    )
    user = get_user_model()
    transfer_shared_register(
        user,
        key=("username",),
        fields=("email", "first_name", "last_name", "is_active", "date_joined"),
    )
    transfer_shared_register(m.ReviewForm, key=("key", "version"), fields=("title", "definition"))


# Studies' own sections first, whoever imports the registry first: a file lists the study
# before the rows that refer to it, and judging's sections (registered from its app's
# ready()) after them.
_register_studies()
