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
from studies.recruitment import assignment_commit, assignment_preview
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


# --- A study to assign and review: two topics, three conditions (one idea in two),
# distinctive author institutions and external ids, approved reviewers with ranked topics.
# Shared by the recruitment, owner-page, blinding, payment and browser tests.

CONDITIONS = {"Human_Experts": "human", "AI_Ideas": "ai", "AI_Rerank": "ai"}
CONDITION_LABELS = ["Human experts", "AI ideas", "AI ideas reranked"]
INSTITUTIONS = ["Quillfeather Institute", "Marlowe University"]
TOPICS = ["Bias", "Coding"]
# Titles carry no number, so nothing on a reviewer's page hints at the import order.
TITLE_WORDS = [
    "dates",
    "units",
    "names",
    "maps",
    "tables",
    "clocks",
    "prices",
    "rivers",
    "songs",
    "tools",
    "trees",
]

BLIND_IDEA_TEXT = """Title: {title}
Problem Statement: Language models often give answers that sound right but are not. {filler}
Motivation: Prior prompting methods ignore how confident the model is about each step.
Proposed Method: Ask the model to critique its own draft, then revise with the critique.
Step-by-Step Experiment Plan: 1. Gather benchmark questions. 2. Run the baseline. 3. Run the method.
Test Case Examples: A question about dates where the baseline fails and the method succeeds.
Fallback Plan: If it fails, analyse the critiques to see which errors they miss."""


@dataclass
class SeededStudy:
    study: Study
    owner: object
    reviewers: list[Reviewer]
    users: list[object]
    ideas: list[Idea]
    unassigned: Reviewer | None = None
    secrets: list[str] = field(default_factory=list)


def rationale(n: int = 30, word: str = "solid") -> str:
    return " ".join([word] * n)


def full_answers(study: Study, score: int = 6) -> dict[str, str]:
    data: dict[str, str] = {}
    for m in study.form_definition().metrics:
        data[m.key] = str(score)
        data[f"{m.key}_rationale"] = rationale()
    data.update(familiarity="3", confidence="4", minutes="25")
    return data


def cleaned(study: Study, score: int = 6) -> dict:
    from studies.review_forms import ReviewAnswersForm

    form = ReviewAnswersForm(full_answers(study, score), definition=study.form_definition())
    assert form.is_valid(), form.errors
    return form.cleaned_data


def make_review_study(owner, *, slug: str = "blind", n_reviewers: int = 6, commit: bool = True):
    """A small study with approved reviewers and (optionally) a committed assignment."""
    study = study_create(owner=owner, slug=slug, title="Blind study", baseline_condition="")
    study.min_reviews_per_idea = 1
    study.max_reviews_per_idea = 3
    study.min_load = 2
    study.max_load = 4
    study.save()
    conds = {
        key: Condition.objects.create(study=study, key=key, label=label, kind=kind)
        for (key, kind), label in zip(CONDITIONS.items(), CONDITION_LABELS, strict=True)
    }
    topics = {name: Topic.objects.create(study=study, name=name) for name in TOPICS}
    ideas: list[Idea] = []
    n = 0
    for t, topic in enumerate(TOPICS):
        plan = [
            ("Human_Experts",),
            ("Human_Experts",),
            ("AI_Ideas",),
            ("AI_Ideas", "AI_Rerank"),
            ("AI_Rerank",),
        ]
        for k, memberships in enumerate(plan):
            n += 1
            human = memberships == ("Human_Experts",)
            idea = Idea.objects.create(
                study=study,
                topic=topics[topic],
                title=f"Raw title {n}",
                normalized_text=BLIND_IDEA_TEXT.format(
                    title=f"Self-critique for {topic.lower()}: {TITLE_WORDS[(3 * n) % len(TITLE_WORDS)]}",
                    filler="We study this carefully.",
                ),
                normalization_status=Idea.NormalizationStatus.APPROVED,
                author_institution=INSTITUTIONS[(t + k) % 2] if human else "",
            )
            for c in memberships:
                IdeaCondition.objects.create(
                    idea=idea, condition=conds[c], study=study, external_id=f"XID-{c}-{n:02d}"
                )
            ideas.append(idea)
    User = get_user_model()
    reviewers, users = [], []
    for j in range(n_reviewers):
        user = User.objects.create_user(
            f"rev{slug}{j}@example.org", email=f"rev{slug}{j}@example.org", password="pw-Rev-12345"
        )
        reviewer = Reviewer.objects.create(
            study=study,
            user=user,
            pseudonym=f"R{j + 1:03d}",
            email=user.email,
            institution=INSTITUTIONS[j % 2] if j < 2 else f"Other Lab {j}",
            position="Postdoc",
            major_venue_papers=2,
            topic_preferences=[TOPICS[j % 2], TOPICS[(j + 1) % 2]] if j % 3 else [TOPICS[j % 2]],
            preferred_load=3,
            consent_at=timezone.now(),
            honor_code_at=timezone.now(),
            profile_completed_at=timezone.now(),
            screening=Reviewer.Screening.APPROVED,
        )
        reviewers.append(reviewer)
        users.append(user)
    if commit:
        job, result, _ = assignment_preview(study=study, seed=7)
        assert result.feasible, result.explanation()
        assignment_commit(study=study, job=job)
    study.refresh_from_db()
    secrets = [*CONDITIONS, *CONDITION_LABELS, *INSTITUTIONS]
    secrets += list(IdeaCondition.objects.filter(study=study).values_list("external_id", flat=True))
    secrets += [i.title for i in ideas]
    return SeededStudy(study, owner, reviewers, users, ideas, secrets=secrets)
