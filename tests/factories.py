"""Test builders: every test module takes its rows from here. Plain functions that write rows directly, so a test
or a benchmark gets a study in review without running the recruitment pipeline."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.utils import timezone

from judging.models import IdeaRating, JudgeRun, Judgment, PairwiseOutcome
from llm.models import JudgeConfig, LLMCall
from studies.analysis.report import ReportOptions
from studies.models import (
    Assignment,
    Condition,
    Idea,
    IdeaCondition,
    PairJudgment,
    PairTask,
    Review,
    Reviewer,
    ReviewScore,
    Study,
    Topic,
)
from studies.protocol.template import render_sections
from studies.services.assignment import assignment_commit, assignment_preview
from studies.services.study import study_create, study_open_for_review

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
    from studies.reviewer_forms import ReviewAnswersForm

    form = ReviewAnswersForm(full_answers(study, score), definition=study.form_definition())
    assert form.is_valid(), form.errors
    return form.cleaned_data


def make_review_study(owner, *, slug: str = "blind", n_reviewers: int = 6, commit: bool = True):
    """A small study with approved reviewers and (optionally) a committed assignment, then
    opened for review."""
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
        study_open_for_review(study=study)
    study.refresh_from_db()
    secrets = [*CONDITIONS, *CONDITION_LABELS, *INSTITUTIONS]
    secrets += list(IdeaCondition.objects.filter(study=study).values_list("external_id", flat=True))
    secrets += [i.title for i in ideas]
    return SeededStudy(study, owner, reviewers, users, ideas, secrets=secrets)


# Style normalization: three proposals, one naming a model and one a number.


def proposal(title: str, method: str) -> str:
    return render_sections(
        {
            "title": title,
            "problem_statement": "Language models state false facts with confidence.",
            "motivation": "Retrieval helps, but it is slow and often off topic.",
            "proposed_method": method,
            "experiment_plan": "Evaluate on TruthfulQA and report accuracy per category.",
            "test_cases": "Input: who wrote Hamlet? The baseline says Marlowe; ours says "
            "Shakespeare.",
            "fallback_plan": "Analyse where verification fails and why.",
        }
    )


TEXTS = {
    "gpt": proposal("Verify with a stronger model", "Ask GPT-4 to check every claim twice."),
    "number": proposal("Vote over samples", "Sample 42 answers and keep the majority claim."),
    "clean": proposal("Cite as you go", "Make the model cite a passage for each claim."),
}


def make_prep_study(owner, texts: dict[str, str] = TEXTS, slug: str = "norm"):
    study = study_create(owner=owner, slug=slug, title="Normalization study")
    topic = Topic.objects.create(study=study, name="Factuality")
    human = Condition.objects.create(study=study, key="Human", kind=Condition.Kind.HUMAN)
    ai = Condition.objects.create(study=study, key="AI", kind=Condition.Kind.AI)
    ideas = {}
    for n, (key, text) in enumerate(texts.items()):
        idea = Idea.objects.create(
            study=study, topic=topic, title=key, raw_text=text, sections={"title": key}
        )
        IdeaCondition.objects.create(
            idea=idea, condition=human if n % 2 else ai, study=study, external_id=key
        )
        ideas[key] = idea
    return study, ideas


# The report's agreement section: a seeded study with two finished judge runs.

FAST = ReportOptions(
    # One metric's ordinal fit, not every metric's: no test reading FAST's reports reads
    # the ordinal table's rows (tests/analysis and the si2024 report check the model).
    ordinal="primary",
    consistency_splits=100,
    consistency_bootstrap=100,
    consistency_permutations=100,
    mixed_starts=1,
    mixed_engine="sparse",
    agreement_splits=100,
    agreement_bootstrap=100,
    agreement_permutations=100,
    panel_bootstrap=100,
)
SECRET_NAMES = ["Alice Quartermain", "Bob Zebulon", "Carla Nightingale", "Dev Okonkwo"]
SECRET_INSTITUTIONS = ["Grand Fenwick Institute", "Ruritania University"]


@dataclass
class Seeded:
    study: Study
    ideas: list[Idea]
    quality: dict[int, float]
    direct: JudgeRun
    pairwise: JudgeRun


def make_agreement_study(owner, slug: str = "agree", n_per_cell: int = 8) -> Seeded:
    """Two topics x two conditions x `n_per_cell` ideas, 8 named reviewers from named
    institutions, 4 reviews per idea, pair ratings, and two finished judge runs."""
    from studies.services.study import study_create

    rng = random.Random(7)
    study = study_create(
        owner=owner, slug=slug, title="Agreement study", baseline_condition="Human"
    )
    metrics = study.form_definition().metric_keys
    conds = {
        key: Condition.objects.create(study=study, key=key, kind=kind)
        for key, kind in (("Human", "human"), ("AI", "ai"))
    }
    topics = [Topic.objects.create(study=study, name=n) for n in ("Bias", "Factuality")]
    reviewers = [
        Reviewer.objects.create(
            study=study,
            pseudonym=f"R{i + 1:03d}",
            name=SECRET_NAMES[i % 4] + f" {i}",
            email=f"rev{i}@example.org",
            institution=SECRET_INSTITUTIONS[i % 2],
            external_id=f"orcid-0000-{i:04d}",
        )
        for i in range(8)
    ]
    ideas: list[Idea] = []
    quality: dict[int, float] = {}
    for topic in topics:
        for cond_key, cond in conds.items():
            for k in range(n_per_cell):
                q = rng.gauss(5.5 if cond_key == "AI" else 5.0, 1.6)
                words = " ".join(["method"] * rng.randint(80, 400))
                idea = Idea.objects.create(
                    study=study,
                    topic=topic,
                    title=f"Idea {topic.name} {k}",
                    raw_text=f"By {SECRET_NAMES[k % 4]}. {words}",
                    normalized_text=f"Title: idea. {words}",
                    normalization_status=Idea.NormalizationStatus.APPROVED,
                    author_institution=SECRET_INSTITUTIONS[k % 2],
                )
                IdeaCondition.objects.create(
                    idea=idea,
                    condition=cond,
                    study=study,
                    external_id=f"{topic.name}_{k}_{cond_key}",
                )
                ideas.append(idea)
                quality[idea.pk] = q
    for idea in ideas:
        for reviewer in rng.sample(reviewers, 4):
            review = Review.objects.create(
                study=study,
                idea=idea,
                reviewer=reviewer,
                familiarity=rng.randint(1, 5),
                confidence=rng.randint(1, 5),
                minutes=rng.choice([20.0, 30.0, 45.0]),
            )
            ReviewScore.objects.bulk_create(
                [
                    ReviewScore(
                        review=review,
                        metric=m,
                        score=float(min(10, max(1, round(quality[idea.pk] + rng.gauss(0, 1.2))))),
                        rationale="clear enough",
                    )
                    for m in metrics
                ]
            )
    # Reviewer pair ratings: pairs within a topic, each rated by two reviewers.
    by_topic: dict[int, list[Idea]] = {}
    for idea in ideas:
        by_topic.setdefault(idea.topic_id, []).append(idea)
    rated = []
    for members in by_topic.values():
        for _ in range(8):
            a, b = rng.sample(members, 2)
            if (a.pk, b.pk) in rated or (b.pk, a.pk) in rated:
                continue
            rated.append((a.pk, b.pk))
            for reviewer in rng.sample(reviewers, 2):
                left = rng.random() < 0.5
                task = PairTask.objects.create(
                    study=study,
                    reviewer=reviewer,
                    idea_a=a,
                    idea_b=b,
                    a_on_left=left,
                    dimensions=["overall"],
                    status=PairTask.Status.SUBMITTED,
                )
                diff = quality[a.pk] - quality[b.pk] + rng.gauss(0, 1.0)
                winner = "tie" if abs(diff) < 0.3 else ("a" if diff > 0 else "b")
                choice = (
                    "tie" if winner == "tie" else ("first" if (winner == "a") == left else "second")
                )
                PairJudgment.objects.create(
                    task=task, dimension="overall", choice=choice, winner=winner
                )

    config = JudgeConfig.objects.create(
        name="scorer-llm",
        study=study,
        base_url="http://127.0.0.1:9/v1",
        model="test-scorer-1",
        parameters={"temperature": 0.0},
        price_input_per_million=Decimal("1.0"),
    )
    direct = JudgeRun.objects.create(
        study=study,
        config=config,
        method=JudgeRun.Method.DIRECT,
        status=JudgeRun.Status.DONE,
        params={"samples": 1, "text": "normalized"},
        cost=Decimal("0.048"),
    )
    for idea in ideas:
        call = LLMCall.objects.create(
            cache_key=f"direct-{idea.pk}",
            config=config,
            run=direct,
            base_url=config.base_url,
            model=config.model,
            request={"model": config.model, "messages": [{"role": "user", "content": "score"}]},
            response_text='{"overall": 5}',
            prompt_version="direct_scoring@1",
            prompt_hash="0" * 64,
            input_tokens=1000,
            output_tokens=50,
            cost=Decimal("0.0015"),
        )
        for m in metrics:
            Judgment.objects.create(
                run=direct,
                idea=idea,
                metric=m,
                call=call,
                score=float(min(10, max(1, round(quality[idea.pk] + rng.gauss(0, 0.8))))),
            )
    pair_cfg = JudgeConfig.objects.create(
        name="pair-llm", study=study, base_url="http://127.0.0.1:9/v1", model="test-pair-1"
    )
    pairwise = JudgeRun.objects.create(
        study=study,
        config=pair_cfg,
        method=JudgeRun.Method.PAIRWISE,
        status=JudgeRun.Status.DONE,
        params={"text": "normalized"},
    )
    sums: dict[int, int] = {i.pk: 0 for i in ideas}
    for members in by_topic.values():
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                for first in (a, b):
                    diff = quality[a.pk] - quality[b.pk] + rng.gauss(0, 1.0)
                    verdict = "A" if diff > 0 else "B"
                    if rng.random() < 0.1:  # a position bias
                        verdict = "A" if first == a else "B"
                    PairwiseOutcome.objects.create(
                        run=pairwise, idea_a=a, idea_b=b, first_shown=first, verdict=verdict
                    )
                    sums[a.pk] += 1 if verdict == "A" else -1
                    sums[b.pk] += 1 if verdict == "B" else -1
    IdeaRating.objects.bulk_create(
        [
            IdeaRating(run=pairwise, idea_id=pk, dimension="pairwise", score=float(s))
            for pk, s in sums.items()
        ]
    )
    return Seeded(study, ideas, quality, direct, pairwise)


def make_direct_run(
    seeded: Seeded, config: JudgeConfig, *, noise: float, seed: int, panel_with=None
) -> JudgeRun:
    """A finished direct run scoring every idea of `seeded` on every metric from its
    quality plus normal noise of sd `noise`; with `panel_with`, a panel run whose seat 0 is
    that judge and seat 1 `config`, each scoring with its own draws."""
    from judging.models import PanelMember

    rng = random.Random(seed)
    run = JudgeRun.objects.create(
        study=seeded.study, config=panel_with or config, method="direct",
        status=JudgeRun.Status.DONE, params={"samples": 1, "text": "normalized"},
    )  # fmt: skip
    seats = [0]
    if panel_with is not None:
        PanelMember.objects.create(run=run, config=config, seat=1)
        seats = [0, 1]
    metrics = seeded.study.form_definition().metric_keys
    Judgment.objects.bulk_create(
        Judgment(
            run=run,
            member=seat,
            idea=idea,
            metric=m,
            score=float(min(10, max(1, round(seeded.quality[idea.pk] + rng.gauss(0, noise))))),
        )
        for seat in seats
        for idea in seeded.ideas
        for m in metrics
    )
    return run


def make_pilot_study(
    owner, *, slug: str = "pilot", n_per_condition: int = 16, seed: int = 5, effect: float = 0.8
) -> Study:
    """A finished study to size from: one topic, Human and AI ideas, 8 named reviewers,
    3 reviews per idea, scores from idea, reviewer and residual effects with AI
    ``effect`` points above Human on every metric (reviewer ids present)."""
    rng = random.Random(seed)
    study = study_create(
        owner=owner,
        slug=slug,
        title="Pilot",
        baseline_condition="Human",
        conditions=[("Human", "human"), ("AI", "ai")],
        topics=["Factuality"],
    )
    topic = study.topics.get()
    metrics = study.form_definition().metric_keys
    reviewers = [
        Reviewer.objects.create(study=study, pseudonym=f"R{i + 1:03d}", email=f"p{i}@example.org")
        for i in range(8)
    ]
    leniency = {r.pk: rng.gauss(0, 0.6) for r in reviewers}
    for cond in study.conditions.all():
        for k in range(n_per_condition):
            idea = Idea.objects.create(study=study, topic=topic, title=f"{cond.key} {k}")
            IdeaCondition.objects.create(
                idea=idea, condition=cond, study=study, external_id=f"{cond.key}_{k}"
            )
            quality = 5.0 + (effect if cond.key == "AI" else 0.0) + rng.gauss(0, 0.8)
            for reviewer in rng.sample(reviewers, 3):
                review = Review.objects.create(study=study, idea=idea, reviewer=reviewer)
                ReviewScore.objects.bulk_create(
                    ReviewScore(
                        review=review,
                        metric=m,
                        score=float(quality + leniency[reviewer.pk] + rng.gauss(0, 1.0)),
                        rationale="",
                    )
                    for m in metrics
                )
    return study


def make_judged_study(owner, slug: str = "judged") -> Study:
    """Eight approved ideas, four Human and four AI, of growing length: a judge run of one
    call per idea (judge-run fault tests)."""
    study = study_create(owner=owner, slug=slug, title=slug.title())
    topic = Topic.objects.create(study=study, name="T")
    kinds = [Condition.objects.create(study=study, key=k, kind=k.lower()) for k in ("Human", "AI")]
    for n in range(8):
        text = f"Idea {n}: ask the model to check its own answer. " * (n + 1)
        idea = Idea.objects.create(
            study=study,
            topic=topic,
            title=f"Idea {n}",
            raw_text=text,
            normalized_text=text,
            normalization_status=Idea.NormalizationStatus.APPROVED,
        )
        IdeaCondition.objects.create(
            idea=idea, condition=kinds[n % 2], study=study, external_id=f"x{n}"
        )
    return study


# Participant platforms: a study open for review whose arrival link is on.

PLATFORM_COMPLETION_URL = "https://platform.example/submissions/complete"
PLATFORM_CODE = "C1A2B3C4"


def make_platform_study(owner, *, slug: str = "crowd", places: int = 2, abandon_minutes: int = 30):
    """The review study (ten ideas, no reviewers), open for review, with Prolific's link
    enabled: `places` places, completion URL and code set."""
    from studies.services.platform import platform_link_set

    seeded = make_review_study(owner, slug=slug, n_reviewers=0, commit=False)
    study = seeded.study
    study_open_for_review(study=study)
    platform_link_set(
        study=study,
        data={
            "enabled": True,
            "platform": "Prolific",
            "participant_param": "PROLIFIC_PID",
            "study_param": "STUDY_ID",
            "session_param": "SESSION_ID",
            "platform_study_id": "",
            "places": places,
            "abandon_minutes": abandon_minutes,
            "completion_url": PLATFORM_COMPLETION_URL,
            "completion_code": PLATFORM_CODE,
            "code_param": "cc",
        },
        actor=owner,
    )
    study.refresh_from_db()
    return seeded


def platform_profile(topic: str = "Bias", *, papers: int = 2, load: int = 2) -> dict[str, Any]:
    """A participant's profile as the profile form cleans it."""
    return {
        "institution": "Crowd Lab",
        "position": "Postdoc",
        "major_venue_papers": papers,
        "scholar_url": "",
        "reviewing_experience": "",
        "topic_first": topic,
        "topic_second": "",
        "preferred_load": load,
    }


def pair_ratings_add(study: Study, ratings: Sequence[tuple[int, int, str]], dimension="overall"):
    """Submitted pair ratings: one reviewer (made here, one per rating of the same pair)
    per (idea_a id, idea_b id, winner "a", "b" or "tie"); the pair is shown with idea_a on
    the left every other time."""
    from studies.models import PairJudgment, PairTask, Reviewer

    count: dict[tuple[int, int], int] = {}
    for k, (a, b, winner) in enumerate(ratings):
        seat = count[(a, b)] = count.get((a, b), 0) + 1
        reviewer, _ = Reviewer.objects.get_or_create(
            study=study, pseudonym=f"PR{seat}", defaults={"email": f"pr{seat}@example.org"}
        )
        left = k % 2 == 0
        task = PairTask.objects.create(
            study=study, reviewer=reviewer, idea_a_id=a, idea_b_id=b, a_on_left=left,
            dimensions=[dimension], status=PairTask.Status.SUBMITTED,
        )  # fmt: skip
        choice = "tie" if winner == "tie" else ("first" if (winner == "a") == left else "second")
        PairJudgment.objects.create(task=task, dimension=dimension, choice=choice, winner=winner)
