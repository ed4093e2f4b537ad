"""The study team changes a screened reviewer's topics and load for them, and an
infeasible preview says when the reviewers' topics are the cause."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from studies.models import (
    Assignment,
    AuditEvent,
    Condition,
    Idea,
    IdeaCondition,
    Reviewer,
    StudyMember,
    Topic,
)
from studies.services.assignment import assignment_commit, assignment_preview
from studies.services.invitations import RecruitmentError, reviewer_topics_change
from studies.services.study import study_create

# Topic -> (institution of its human idea, of its AI idea). R001 (Uni X) chose only
# Factuality, whose human idea is from Uni X; R002 (Uni Y) chose only Math, whose AI idea
# is from Uni Y: each may review one idea of one condition, and nobody chose Coding.
IDEAS = {
    "Factuality": ("Uni X", "Uni Q"),
    "Math": ("Uni Q", "Uni Y"),
    "Coding": ("Uni Q", "Uni Q"),
}


@pytest.fixture
def walk(db, owner):
    study = study_create(owner=owner, slug="walk", title="Walk study", baseline_condition="")
    study.min_reviews_per_idea, study.max_reviews_per_idea = 1, 4
    study.min_load, study.max_load = 2, 4
    study.save()
    human = Condition.objects.create(study=study, key="Human", label="Human", kind="human")
    ai = Condition.objects.create(study=study, key="AI", label="AI", kind="ai")
    n = 0
    for name, institutions in IDEAS.items():
        topic = Topic.objects.create(study=study, name=name)
        for condition, institution in zip((human, ai), institutions, strict=True):
            n += 1
            idea = Idea.objects.create(
                study=study,
                topic=topic,
                title=f"Idea {n}",
                normalized_text="A proposal.",
                normalization_status=Idea.NormalizationStatus.APPROVED,
                author_institution=institution,
            )
            IdeaCondition.objects.create(
                idea=idea, condition=condition, study=study, external_id=f"I{n}"
            )
    User = get_user_model()
    reviewers = []
    for k, (institution, topic) in enumerate((("Uni X", "Factuality"), ("Uni Y", "Math"))):
        email = f"walk{k}@example.org"
        reviewers.append(
            Reviewer.objects.create(
                study=study,
                user=User.objects.create_user(email, email=email, password="pw-Rev-12345"),
                pseudonym=f"R00{k + 1}",
                email=email,
                institution=institution,
                position="Postdoc",
                major_venue_papers=2,
                topic_preferences=[topic],
                preferred_load=3,
                consent_at=timezone.now(),
                honor_code_at=timezone.now(),
                profile_completed_at=timezone.now(),
                screening=Reviewer.Screening.APPROVED,
            )
        )
    return study, reviewers


def test_the_team_changes_a_screened_reviewers_topics_and_load_with_an_audit_entry(walk, owner):
    study, (r1, _) = walk
    changed = reviewer_topics_change(
        reviewer=r1,
        topics=["Math", "Coding"],
        preferred_load=4,
        actor=owner,
        note="wrote that they know Math",
    )
    assert changed
    r1.refresh_from_db()
    assert r1.topic_preferences == ["Math", "Coding"] and r1.preferred_load == 4
    event = AuditEvent.objects.get(study=study, verb="reviewer_topics_changed")
    assert event.detail == {
        "reviewer": "R001",
        "topics_before": ["Factuality"],
        "topics": ["Math", "Coding"],
        "load_before": 3,
        "load": 4,
        "note": "wrote that they know Math",
    }
    # The same values again change nothing and log nothing.
    assert not reviewer_topics_change(
        reviewer=r1, topics=["Math", "Coding", ""], preferred_load=4, actor=owner
    )
    assert AuditEvent.objects.filter(verb="reviewer_topics_changed").count() == 1


@pytest.mark.parametrize(
    "topics, load, said",
    [
        (["Physics"], 3, "R001: Physics is not a topic of this study."),
        (["Math", "Math"], 3, "R001: choose one topic, or two different ones."),
        ([""], 3, "R001: choose a first-choice topic."),
        (["Math"], 9, "R001: the load must be between 2 and 4 ideas."),
    ],
)
def test_the_change_is_checked_like_the_reviewers_own_profile(walk, owner, topics, load, said):
    _, (r1, _) = walk
    with pytest.raises(RecruitmentError) as caught:
        reviewer_topics_change(reviewer=r1, topics=topics, preferred_load=load, actor=owner)
    assert str(caught.value) == said
    r1.refresh_from_db()
    assert r1.topic_preferences == ["Factuality"] and r1.preferred_load == 3


def test_an_unscreened_or_dropped_reviewer_is_refused(walk, owner):
    _, (r1, r2) = walk
    Reviewer.objects.filter(pk=r1.pk).update(screening=Reviewer.Screening.PENDING)
    with pytest.raises(RecruitmentError, match="not screened yet: the reviewer can still"):
        reviewer_topics_change(reviewer=r1, topics=["Math"], preferred_load=3, actor=owner)
    Reviewer.objects.filter(pk=r2.pk).update(dropped_at=timezone.now())
    with pytest.raises(RecruitmentError, match="R002 has dropped out"):
        reviewer_topics_change(reviewer=r2, topics=["Coding"], preferred_load=3, actor=owner)


def test_once_assigned_the_topics_stay_and_the_load_may_only_grow(walk, owner):
    study, (r1, r2) = walk
    for reviewer, topics in ((r1, ["Math", "Coding"]), (r2, ["Factuality", "Coding"])):
        reviewer_topics_change(reviewer=reviewer, topics=topics, preferred_load=3, actor=owner)
    job, result, _ = assignment_preview(study=study, seed=7)
    assert result.feasible, result.explanation()
    assignment_commit(study=study, job=job)
    held = Assignment.objects.filter(reviewer=r1).count()
    assert held == 3
    with pytest.raises(RecruitmentError, match="R001 already holds 3 assigned ideas chosen"):
        reviewer_topics_change(reviewer=r1, topics=["Coding"], preferred_load=3, actor=owner)
    with pytest.raises(RecruitmentError, match="cannot be lower than that"):
        reviewer_topics_change(
            reviewer=r1, topics=["Math", "Coding"], preferred_load=2, actor=owner
        )
    assert reviewer_topics_change(
        reviewer=r1, topics=["Math", "Coding"], preferred_load=4, actor=owner
    )
    r1.refresh_from_db()
    assert r1.topic_preferences == ["Math", "Coding"] and r1.preferred_load == 4


def test_a_preview_stopped_by_topics_says_so_and_not_that_ideas_were_left_out(walk, owner, client):
    study, _ = walk
    job, result, _ = assignment_preview(study=study, seed=7)
    assert not result.feasible
    assert job.params["remedies"] == ["topics", "named_reviewer", "reviewers", "load", "reviews"]
    client.force_login(owner)
    url = reverse("studies:assignment_preview", args=[study.slug])
    page = client.get(f"{url}?job={job.pk}").content.decode()
    problems = page.split('id="problems"', 1)[1].split("</ul>", 1)[0]
    assert (
        "reviewer R001&#x27;s only topic, Factuality, offers ideas of one condition only (AI)"
        in problems
    )
    assert "no approved reviewer chose its topic, Coding" in problems
    remedies = page.split('id="problem-remedies"', 1)[1].split("</ul>", 1)[0]
    assert 'id="remedy-topics"' in remedies
    assert "if a reviewer named above agrees to another topic or load" in remedies
    assert f'href="{reverse("studies:study_reviewers", args=[study.slug])}"' in remedies
    assert "normalise and sign off" not in remedies and "(s)" not in problems


def test_a_preview_stopped_only_by_an_idea_nobody_may_review_names_no_reviewer_nor_load(
    walk, owner, client
):
    # Factuality's human idea is from R001's institution, and R002 did not choose Factuality.
    study, (r1, r2) = walk
    Reviewer.objects.filter(pk=r1.pk).update(topic_preferences=["Factuality", "Math", "Coding"])
    Reviewer.objects.filter(pk=r2.pk).update(topic_preferences=["Math", "Coding"])
    job, result, _ = assignment_preview(study=study, seed=7)
    assert {p.rule for p in result.problems} == {"idea_reviews"}
    assert job.params["remedies"] == ["topics", "reviewers", "reviews"]
    client.force_login(owner)
    url = reverse("studies:assignment_preview", args=[study.slug])
    page = client.get(f"{url}?job={job.pk}").content.decode()
    remedies = page.split('id="problem-remedies"', 1)[1].split("</ul>", 1)[0]
    assert "named above agrees" not in remedies and "another topic or load" not in remedies
    assert "if a reviewer agrees to take on the topic of an idea named above" in remedies
    assert 'id="remedy-load"' not in remedies and "Largest reviewer load" not in remedies
    assert "reviewers who choose its topic and come from another institution" in remedies
    assert "Fewest reviews per idea" in remedies


def test_a_reviewer_whose_topic_has_no_approved_idea_yet_is_not_told_it_is_not_the_studys(
    walk,
):
    study, (_, r2) = walk
    Idea.objects.filter(study=study, topic__name="Coding").update(
        normalization_status=Idea.NormalizationStatus.PROPOSED
    )
    Reviewer.objects.filter(pk=r2.pk).update(topic_preferences=["Coding"])
    job, _, _ = assignment_preview(study=study, seed=7)
    problems = job.params["problems"]
    assert "reviewer R002's only topic, Coding, has no idea that can be assigned yet" in problems
    assert not any("R002 chose no topic" in p for p in problems)


def test_a_preview_with_ideas_waiting_for_approval_still_offers_to_sign_them_off(walk, owner):
    study, _ = walk
    Idea.objects.filter(study=study, title="Idea 1").update(
        normalization_status=Idea.NormalizationStatus.PROPOSED
    )
    job, _, _ = assignment_preview(study=study, seed=7)
    assert job.params["remedies"][:3] == ["topics", "named_reviewer", "unapproved"]
    assert job.params["unapproved"] == 1


def test_the_reviewers_page_leads_an_editor_to_the_change_and_a_new_preview_works(
    walk, owner, client
):
    study, (r1, r2) = walk
    editor = get_user_model().objects.create_user("ed", password="ed-pass-12345")
    StudyMember.objects.create(study=study, user=editor, role="editor")
    client.force_login(editor)
    url = reverse("studies:reviewer_topics", args=[study.slug, r1.pk])
    listing = client.get(reverse("studies:study_reviewers", args=[study.slug])).content.decode()
    assert f'href="{url}"' in listing
    page = client.get(url).content.decode()
    assert 'id="topics-now">Now: Factuality · load 3' in page
    bad = client.post(url, {"topic_first": "Math", "topic_second": "Math", "preferred_load": 3})
    assert bad.status_code == 400
    assert "Choose a different second topic, or none." in bad.content.decode()
    for reviewer, first in ((r1, "Math"), (r2, "Factuality")):
        response = client.post(
            reverse("studies:reviewer_topics", args=[study.slug, reviewer.pk]),
            {"topic_first": first, "topic_second": "Coding", "preferred_load": 3, "note": "asked"},
        )
        assert response.status_code == 302
    assert AuditEvent.objects.get(
        verb="reviewer_topics_changed", detail__reviewer="R001"
    ).actor == (editor)
    _, result, _ = assignment_preview(study=study, seed=7)
    assert result.feasible, result.explanation()


def test_a_pending_reviewer_is_not_offered_the_change(walk, owner, client):
    study, (r1, _) = walk
    Reviewer.objects.filter(pk=r1.pk).update(screening=Reviewer.Screening.PENDING)
    client.force_login(owner)
    listing = client.get(reverse("studies:study_reviewers", args=[study.slug])).content.decode()
    assert reverse("studies:reviewer_topics", args=[study.slug, r1.pk]) not in listing
    response = client.post(
        reverse("studies:reviewer_topics", args=[study.slug, r1.pk]),
        {"topic_first": "Math", "preferred_load": 3},
    )
    assert response.status_code == 400
    assert "not screened yet" in response.content.decode()
