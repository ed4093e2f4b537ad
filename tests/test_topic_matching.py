"""Topic matching across conditions gates opening the study; a seeded helper proposes
surplus ideas to leave out; near-duplicates are found by a job with progress."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from studies import services
from studies.models import (
    AuditEvent,
    Condition,
    DuplicatePair,
    Idea,
    IdeaCondition,
    JobRun,
    Topic,
)
from studies.services.study import study_create
from studies.tasks import find_duplicates


def add_idea(study, topic, conditions, n, text="", approved=True):
    idea = Idea.objects.create(
        study=study,
        topic=topic,
        title=f"Idea {n}",
        raw_text=text or f"Idea number {n} about {topic.name}.",
        normalized_text=f"Normalised idea {n}.",
        normalization_status="approved" if approved else "none",
    )
    for i, c in enumerate(conditions):
        IdeaCondition.objects.create(
            idea=idea, condition=c, study=study, external_id=f"e{n}" + ("" if not i else f"@{c}")
        )
    return idea


@pytest.fixture
def unbalanced(db, owner):
    """Bias: Human 3, AI 2 (one idea in both); Coding: Human 1, AI 1."""
    study = study_create(owner=owner, slug="topics", title="Topics")
    bias = Topic.objects.create(study=study, name="Bias")
    coding = Topic.objects.create(study=study, name="Coding")
    human = Condition.objects.create(study=study, key="Human", kind="human")
    ai = Condition.objects.create(study=study, key="AI", kind="ai")
    add_idea(study, bias, [human], 1)
    add_idea(study, bias, [human], 2)
    add_idea(study, bias, [human, ai], 3)
    add_idea(study, bias, [ai], 4)
    add_idea(study, coding, [human], 5)
    add_idea(study, coding, [ai], 6)
    return study


def test_the_table_counts_ideas_per_topic_and_condition(unbalanced):
    table = services.topic_matching_table(study=unbalanced)
    assert table.conditions == ["AI", "Human"]
    assert table.counts == {"Bias": {"AI": 2, "Human": 3}, "Coding": {"AI": 1, "Human": 1}}
    assert table.unbalanced == ["Bias"] and not table.balanced


def test_the_study_cannot_open_while_counts_differ_unless_a_reason_is_recorded(unbalanced, owner):
    with pytest.raises(services.StudyNotReady, match="conditions differ in ideas per topic"):
        services.study_open_for_review(study=unbalanced, actor=owner)
    unbalanced.refresh_from_db()
    assert unbalanced.status == "draft"
    services.study_topic_reason_set(
        study=unbalanced, reason="Pilot: the AI agent made fewer Bias ideas.", actor=owner
    )
    study = services.study_open_for_review(study=unbalanced, actor=owner)
    assert study.status == "reviewing"
    event = AuditEvent.objects.get(verb="study_opened_for_review")
    assert event.detail["topic_mismatch_reason"].startswith("Pilot")


def test_the_seeded_proposal_matches_counts_and_the_owner_applies_it(unbalanced, owner):
    first = services.topic_matching_propose(study=unbalanced, seed=7)
    again = services.topic_matching_propose(study=unbalanced, seed=7)
    assert [i.pk for i in first] == [i.pk for i in again]
    # only a Human-only Bias idea can go: idea 3 is also in AI, which has no surplus
    assert len(first) == 1 and first[0].title in {"Idea 1", "Idea 2"}
    services.ideas_exclude(
        study=unbalanced, ideas=first, reason="topic matching (seed 7)", seed=7, actor=owner
    )
    assert services.topic_matching_table(study=unbalanced).balanced
    assert services.study_open_for_review(study=unbalanced, actor=owner).status == "reviewing"


def test_the_assignment_plan_names_why_each_idea_is_left_out(unbalanced, owner):
    from studies.services.assignment import assignment_plan

    (surplus,) = services.topic_matching_propose(study=unbalanced, seed=7)
    services.ideas_exclude(
        study=unbalanced, ideas=[surplus], reason="topic matching (seed 7)", seed=7, actor=owner
    )
    coding = Topic.objects.get(study=unbalanced, name="Coding")
    add_idea(unbalanced, coding, list(unbalanced.conditions.filter(key="AI")), 7, approved=False)
    notes = assignment_plan(study=unbalanced, seed=1).notes
    assert "1 idea has no approved text yet and is left out" in notes
    assert "1 idea left out by topic matching is not assigned" in notes


def test_the_web_page_shows_the_table_and_the_gate_and_applies_a_proposal(unbalanced, owner):
    c = Client()
    c.force_login(owner)
    url = reverse("studies:topic_matching", args=["topics"])
    page = c.get(url).content.decode()
    assert "counts differ" in page and "Open for review" in page
    response = c.post(reverse("studies:study_open", args=["topics"]), follow=True)
    assert "cannot open for review" in response.content.decode()
    unbalanced.refresh_from_db()
    assert unbalanced.status == "draft"
    proposal = c.get(url, {"seed": 3}).content.decode()
    assert 'id="proposal"' in proposal
    ids = ",".join(str(i.pk) for i in services.topic_matching_propose(study=unbalanced, seed=3))
    c.post(reverse("studies:topic_matching_apply", args=["topics"]), {"seed": 3, "idea_ids": ids})
    assert services.topic_matching_table(study=unbalanced).balanced
    c.post(reverse("studies:study_open", args=["topics"]))
    unbalanced.refresh_from_db()
    assert unbalanced.status == "reviewing"


def test_owner_pages_name_ideas_by_external_id_and_row_never_by_database_id(unbalanced, owner):
    # Push the database ids away from the row numbers 1-6, so neither can pass for the other.
    bias = unbalanced.topics.get(name="Bias")
    Idea.objects.filter(
        pk__in=[add_idea(unbalanced, bias, [], 90 + n).pk for n in range(7)]
    ).delete()
    human = unbalanced.conditions.get(key="Human")
    late = add_idea(unbalanced, bias, [human], 7)
    ideas = list(Idea.objects.filter(study=unbalanced).order_by("pk"))
    c = Client()
    c.force_login(owner)

    listing = c.get(reverse("studies:ideas_list", args=["topics"])).content.decode()
    for row, idea in enumerate(ideas, start=1):
        assert f'<td class="num">{row}</td>' in listing
        assert f"<td>{idea.pk}</td>" not in listing
    # The row an htmx swap puts back carries the number the whole list gave it.
    one = c.get(reverse("studies:idea_row", args=["topics", late.pk]), HTTP_HX_REQUEST="true")
    assert f'<td class="num">{len(ideas)}</td>' in one.content.decode()
    sections = c.get(reverse("studies:idea_sections", args=["topics", late.pk])).content.decode()
    assert "Sections of e7:" in sections and f"idea {late.pk}" not in sections
    edit = c.get(
        reverse("studies:idea_sections", args=["topics", late.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Idea e7</strong>" in edit

    url = reverse("studies:topic_matching", args=["topics"])
    proposal = services.topic_matching_propose(study=unbalanced, seed=3)
    page = c.get(url, {"seed": 3}).content.decode()
    for idea in proposal:
        label = IdeaCondition.objects.filter(idea=idea).order_by("pk")[0].external_id
        assert f"{label} · {idea.title}" in page and f"#{idea.pk}" not in page
    ids = ",".join(str(i.pk) for i in proposal)
    c.post(reverse("studies:topic_matching_apply", args=["topics"]), {"seed": 3, "idea_ids": ids})
    left_out = c.get(url).content.decode()
    assert proposal and all(f"#{i.pk}" not in left_out for i in proposal)
    left_labels = [
        IdeaCondition.objects.filter(idea=i).order_by("pk")[0].external_id for i in proposal
    ]
    assert all(f"<li>{label} · " in left_out for label in left_labels)
    put_back = c.post(reverse("studies:idea_include", args=["topics", proposal[0].pk]), follow=True)
    label = IdeaCondition.objects.filter(idea=proposal[0]).order_by("pk")[0].external_id
    assert f"Idea {label} is back in the study." in put_back.content.decode()


def test_unsigned_ideas_also_keep_the_study_closed(unbalanced, owner):
    services.study_topic_reason_set(study=unbalanced, reason="fine", actor=owner)
    Idea.objects.filter(title="Idea 6").update(normalization_status="proposed")
    with pytest.raises(services.StudyNotReady, match="1 idea has no approved"):
        services.study_open_for_review(study=unbalanced, actor=owner)


def test_another_researcher_cannot_open_or_change_the_study(unbalanced, other_researcher):
    c = Client()
    c.force_login(other_researcher)
    assert c.post(reverse("studies:study_open", args=["topics"])).status_code == 404
    response = c.post(reverse("studies:topic_reason", args=["topics"]), {"reason": "mine"})
    assert response.status_code == 404
    unbalanced.refresh_from_db()
    assert unbalanced.topic_mismatch_reason == "" and unbalanced.status == "draft"


PLANTED_A = (
    "We prompt a language model to list the facts it relies on, retrieve evidence for each "
    "fact, and revise the answer when evidence contradicts a fact."
)
PLANTED_B = (
    "We prompt the language model to list the facts it relies on, retrieve evidence for "
    "every fact, and revise its answer whenever the evidence contradicts one."
)


def test_a_planted_near_duplicate_pair_is_found_by_the_job(
    unbalanced, owner, django_capture_on_commit_callbacks
):
    bias = unbalanced.topics.get(name="Bias")
    human, ai = unbalanced.conditions.get(key="Human"), unbalanced.conditions.get(key="AI")
    a = add_idea(unbalanced, bias, [human], 10, text=PLANTED_A)
    b = add_idea(unbalanced, bias, [ai], 11, text=PLANTED_B)
    add_idea(unbalanced, bias, [ai], 12, text="Bake bread with two cups of flour.")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = services.duplicates_enqueue(study=unbalanced, actor=owner)
    assert len(callbacks) == 1 and job.total == 9
    find_duplicates(job.pk)
    job.refresh_from_db()
    assert job.status == JobRun.Status.DONE and job.done == 9
    pair = DuplicatePair.objects.get(job=job, idea_a=a, idea_b=b)
    assert pair.cosine > 0.8 and pair.scope == "across"
    assert (
        not DuplicatePair.objects.filter(job=job)
        .exclude(pk=pair.pk)
        .filter(idea_b__title="Idea 12")
    )
    c = Client()
    c.force_login(owner)
    page = c.get(reverse("studies:duplicates", args=["topics"])).content.decode()
    # Named by their external ids, as everywhere an owner reads about ideas.
    assert "e10 · Idea 10" in page and "e11 · Idea 11" in page and "across" in page
    assert f"#{a.pk}" not in page and f"#{b.pk}" not in page


def test_the_duplicate_check_leaves_out_ideas_without_text(
    unbalanced, owner, django_capture_on_commit_callbacks
):
    """Two ideas known only by the same title would otherwise come out as a pair at
    cosine 1."""
    bias = unbalanced.topics.get(name="Bias")
    human, ai = unbalanced.conditions.get(key="Human"), unbalanced.conditions.get(key="AI")
    for n, c in ((20, human), (21, ai)):
        bare = Idea.objects.create(study=unbalanced, topic=bias, title="Same title")
        IdeaCondition.objects.create(idea=bare, condition=c, study=unbalanced, external_id=f"e{n}")
    with django_capture_on_commit_callbacks(execute=False):
        job = services.duplicates_enqueue(study=unbalanced, actor=owner)
    assert job.total == 6
    find_duplicates(job.pk)
    job.refresh_from_db()
    assert job.status == JobRun.Status.DONE and job.done == 6
    assert not DuplicatePair.objects.filter(job=job, idea_a__title="Same title")


def test_a_study_whose_ideas_have_no_text_is_not_checked_for_duplicates(si2024_study, owner):
    with pytest.raises(services.PreparationError, match="no idea of this study has a text"):
        services.duplicates_enqueue(study=si2024_study, actor=owner)
    assert not JobRun.objects.filter(study=si2024_study, kind=services.DUPLICATES_JOB)
    c = Client()
    c.force_login(owner)
    url = reverse("studies:duplicates", args=[si2024_study.slug])
    page = c.get(url).content.decode()
    assert "nothing to compare: no idea of this study has a text" in page
    assert "Check for duplicates" not in page and "Not checked yet" not in page
    posted = c.post(reverse("studies:duplicates_run", args=[si2024_study.slug]), {"threshold": 0.8})
    assert posted.status_code == 302
    assert not JobRun.objects.filter(study=si2024_study, kind=services.DUPLICATES_JOB)
    assert "nothing to compare" in c.get(url).content.decode()
