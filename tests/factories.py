"""Test builders (DESIGN.md rule 15). Plain functions that write rows directly, so a test
or a benchmark gets a study in review without running the recruitment pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.utils import timezone

from studies.models import (
    Assignment,
    Condition,
    Idea,
    IdeaCondition,
    Reviewer,
    Study,
    Topic,
)
from studies.services import study_create

IDEA_TEXT = """# {title}

## Problem Statement
Language models state wrong facts with confidence. {filler}

## Motivation
Checking each claim against retrieved text is slow; a cheaper signal would help.

## Proposed Method
Ask the model to list its claims, rate each one, and revise the weakest.

## Step-by-Step Experiment Plan
1. Collect questions. 2. Generate answers. 3. Compare against references.

## Test Case Examples
A question about a historical date, answered before and after the revision step.

## Fallback Plan
If ratings are uninformative, analyse which claims the model revises.
"""


@dataclass
class ReviewStudy:
    study: Study
    reviewers: list[Reviewer]
    users: list[Any]
    ideas: list[Idea]
    password: str
    assignments: dict[int, list[Assignment]] = field(default_factory=dict)


def review_study(
    owner: Any,
    *,
    slug: str = "inreview",
    n_reviewers: int = 3,
    n_ideas: int = 4,
    per_reviewer: int = 2,
    password: str = "Reviewer-pass-2024",
) -> ReviewStudy:
    """A study in review: one topic, a human and an AI condition, approved ideas, and
    approved reviewers (consented, profile done) with `per_reviewer` pending assignments
    each, ideas dealt round robin. Every reviewer's password is `password` (hashed once)."""
    study = study_create(owner=owner, slug=slug, title=f"Study {slug}", baseline_condition="Human")
    Study.objects.filter(pk=study.pk).update(status=Study.Status.REVIEWING)
    study.refresh_from_db()
    topic = Topic.objects.create(study=study, name="Factuality")
    conditions = [
        Condition.objects.create(study=study, key="Human", label="Human", kind="human"),
        Condition.objects.create(study=study, key="AI", label="AI", kind="ai"),
    ]
    ideas = []
    for n in range(n_ideas):
        idea = Idea.objects.create(
            study=study,
            topic=topic,
            title=f"Idea {n + 1}",
            normalized_text=IDEA_TEXT.format(title=f"Idea {n + 1}", filler="We measure it."),
            normalization_status=Idea.NormalizationStatus.APPROVED,
        )
        IdeaCondition.objects.create(
            idea=idea, condition=conditions[n % 2], study=study, external_id=f"X{n + 1:04d}"
        )
        ideas.append(idea)
    hashed = make_password(password)
    now = timezone.now()
    User = get_user_model()
    users = User.objects.bulk_create(
        User(username=f"{slug}-r{j}@example.org", email=f"{slug}-r{j}@example.org", password=hashed)
        for j in range(n_reviewers)
    )
    reviewers = Reviewer.objects.bulk_create(
        Reviewer(
            study=study,
            user=user,
            pseudonym=f"R{j + 1:03d}",
            email=user.email,
            institution=f"Lab {j}",
            topic_preferences=["Factuality"],
            preferred_load=per_reviewer,
            consent_at=now,
            honor_code_at=now,
            profile_completed_at=now,
            screening=Reviewer.Screening.APPROVED,
        )
        for j, user in enumerate(users)
    )
    rows = [
        Assignment(study=study, reviewer=reviewer, idea=ideas[(j * per_reviewer + k) % n_ideas])
        for j, reviewer in enumerate(reviewers)
        for k in range(per_reviewer)
    ]
    Assignment.objects.bulk_create(rows)
    result = ReviewStudy(study, reviewers, users, ideas, password)
    for a in Assignment.objects.filter(study=study).order_by("pk"):
        result.assignments.setdefault(a.reviewer_id, []).append(a)
    return result


def review_answers(study: Study, *, score: int = 6, words: int = 30) -> dict[str, str]:
    """A complete, valid submission of the study's review form."""
    definition = study.form_definition()
    data: dict[str, str] = {}
    for m in definition.metrics:
        data[m.key] = str(min(max(score, m.minimum), m.maximum))
        if m.rationale:
            data[f"{m.key}_rationale"] = " ".join(
                ["solid"] * max(words, definition.rationale_words(m))
            )
    for q in definition.questions:
        data[q.key] = str(q.minimum)
    data["minutes"] = "25"
    return data
