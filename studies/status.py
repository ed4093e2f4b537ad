"""What a study is, read from its rows alone: its status as a person reads it, and
whether its reviews (and ideas without text) came from an imported review file.

A light module: it imports the models and nothing else of the app, so the services
(`services.study` refuses to open a study of imported reviews), the owner's step list
(`overview`), the views and the header's template tag all read one answer, and a process
that imports any of them at start-up loads no analysis library.
"""

from __future__ import annotations

from dataclasses import dataclass

from .models import Assignment, Idea, ImportBatch, Review, Study
from .services.errors import ImportedStudyRefused

IMPORTED_STATUS = "Imported reviews"
# What a study of imported reviews does not do, completing "so it ..." in the refusal.
INVITES = "invites no reviewers"
SCREENS = "screens no reviewers"
ASSIGNS = "has no assignment"
PAIRS = "has no pair tasks"
PAYS = "pays no reviewers"


def review_file_imported(study: Study) -> bool:
    """A review file (not an idea file) was imported into the study."""
    return ImportBatch.objects.filter(study=study).exclude(kind="ideas").exists()


def imported_review_count(study: Study) -> int:
    """Submitted reviews that came from a review file rather than an assignment."""
    if not review_file_imported(study):
        return 0
    return Review.objects.filter(
        study=study, status=Review.Status.SUBMITTED, assignment__isnull=True
    ).count()


@dataclass(frozen=True)
class StudyStatus:
    """What the header says the study is, and whether "Open for review" can be offered."""

    label: str
    imported: bool
    can_open: bool


def study_status(study: Study) -> StudyStatus:
    """The status a person reads. A study of imported reviews with no assignment of its
    own is an analysis of reviewing done elsewhere: "Draft" would ask for preparation
    that can never happen, and opening it could never succeed (its ideas have no
    signed-off text), so it reads "Imported reviews" and is not offered the opening.
    A study its owner closed still reads "Closed"."""
    status = Study.Status(study.status)
    if status not in (Study.Status.DRAFT, Study.Status.PREPARING):
        return StudyStatus(status.label, False, False)
    imported = (
        not Assignment.objects.filter(study=study)
        .exclude(status=Assignment.Status.WITHDRAWN)
        .exists()
        and imported_review_count(study) > 0
    )
    if imported:
        return StudyStatus(IMPORTED_STATUS, True, False)
    return StudyStatus(status.label, False, True)


def refuse_if_imported(study: Study, what: str) -> None:
    """Raise `ImportedStudyRefused` (``what``: "sends no reminders") when the study holds
    imported reviews: every service that acts on reviewing here calls it, so a page, a
    command or a task is refused alike."""
    if study_status(study).imported:
        raise ImportedStudyRefused(what)


def idea_has_text(idea: Idea) -> bool:
    """The idea has some text of its own: a raw text, a rewrite or a non-empty section."""
    sections = idea.sections or {}
    return bool(
        idea.raw_text.strip()
        or idea.normalized_text.strip()
        or any(str(v or "").strip() for v in sections.values())
    )


def ideas_without_text(study: Study) -> set[int]:
    """Ids of the ideas that came with imported reviews and have no text at all (no
    raw text, no section, no rewrite): a review file names its ideas but does not carry
    them. The ideas page and the "Sections complete" step say so instead of counting
    them as ideas with missing sections, which no one could fill in from the file."""
    if not review_file_imported(study):
        return set()
    candidates = (
        Idea.objects.filter(
            study=study,
            raw_text="",
            normalized_text="",
            reviews__status=Review.Status.SUBMITTED,
            reviews__assignment__isnull=True,
        )
        .distinct()
        .only("raw_text", "normalized_text", "sections")
    )
    return {idea.pk for idea in candidates if not idea_has_text(idea)}
