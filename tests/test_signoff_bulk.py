"""Approving in one go every rewrite that passed every automatic check: the count on the
page, the confirmation, exactly the confirmed list, the audit trail, and who may do it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from studies import services
from studies.models import (
    AuditEvent,
    Condition,
    Idea,
    IdeaCondition,
    IdeaRevision,
    NormalizationResult,
    StudyMember,
    Topic,
)
from studies.services.study import study_create

PASSED = [{"name": "numbers", "passed": True, "detail": "", "lost": []}]
FAILED = [{"name": "numbers", "passed": False, "detail": "lost 42", "lost": ["42"]}]


def proposed_idea(study, topic, cond, key: str, checks: list[dict]) -> Idea:
    """An idea whose current rewrite waits for sign-off with the given check results."""
    failed = [c["name"] for c in checks if not c["passed"]]
    idea = Idea.objects.create(
        study=study,
        topic=topic,
        title=f"Idea {key}",
        raw_text=f"Original text {key}",
        normalized_text=f"Rewritten text {key}",
        normalization_status=Idea.NormalizationStatus.PROPOSED,
        normalization_flags=failed,
    )
    IdeaCondition.objects.create(idea=idea, condition=cond, study=study, external_id=key)
    NormalizationResult.objects.create(
        idea=idea,
        prompt_version="v1",
        prompt_hash="x",
        source_text=idea.raw_text,
        output_text=idea.normalized_text,
        checks=checks,
        failed_checks=failed,
    )
    return idea


@pytest.fixture
def waiting(db, owner):
    study = study_create(owner=owner, slug="bulk", title="Bulk sign-off")
    topic = Topic.objects.create(study=study, name="Factuality")
    cond = Condition.objects.create(study=study, key="Human", kind=Condition.Kind.HUMAN)
    ideas = {
        "ok-1": proposed_idea(study, topic, cond, "ok-1", PASSED),
        "ok-2": proposed_idea(study, topic, cond, "ok-2", PASSED),
        "flagged": proposed_idea(study, topic, cond, "flagged", PASSED + FAILED),
        # A rewrite whose checks never ran has not passed them.
        "unchecked": proposed_idea(study, topic, cond, "unchecked", []),
    }
    return study, ideas


def test_only_rewrites_that_passed_every_check_are_offered(waiting):
    study, ideas = waiting
    assert [i.pk for i in services.signoff_passed(study)] == [ideas["ok-1"].pk, ideas["ok-2"].pk]


def test_owner_sees_the_count_confirms_and_exactly_those_are_approved_and_audited(
    client, waiting, owner
):
    study, ideas = waiting
    client.force_login(owner)
    page = client.get(reverse("studies:normalization", args=[study.slug])).content.decode()
    assert "Approve all 2 that passed every check" in page
    # The table names ideas by their labels and numbers rows; no database ids.
    assert "<td>ok-1</td>" in page and f"<td>{ideas['ok-1'].pk}</td>" not in page
    confirm = client.get(reverse("studies:signoff_approve_passed", args=[study.slug]))
    body = confirm.content.decode()
    assert "<strong>2</strong> of the 4 rewrites" in body
    assert "ok-1" in body and "ok-2" in body and "flagged" not in body
    token = confirm.context["token"]

    url = reverse("studies:signoff_approve_passed", args=[study.slug])
    # Without the confirmation box nothing happens.
    client.post(url, {"token": token})
    assert Idea.objects.filter(normalization_status="approved").count() == 0

    response = client.post(url, {"token": token, "confirm": "yes"})
    assert response.status_code == 302
    status = dict(Idea.objects.values_list("title", "normalization_status"))
    assert status == {
        "Idea ok-1": "approved",
        "Idea ok-2": "approved",
        "Idea flagged": "proposed",
        "Idea unchecked": "proposed",
    }
    assert Idea.objects.get(pk=ideas["ok-1"].pk).reviewable_text() == "Rewritten text ok-1"
    assert IdeaRevision.objects.filter(idea=ideas["ok-2"]).count() == 1
    bulk = AuditEvent.objects.get(verb="normalization_approved_passed")
    assert bulk.actor == owner and bulk.detail["n"] == 2
    assert sorted(bulk.detail["ideas"]) == sorted([ideas["ok-1"].pk, ideas["ok-2"].pk])
    assert AuditEvent.objects.filter(verb="normalization_approved").count() == 2
    # Per-idea sign-off of the rest still works.
    client.post(
        reverse("studies:idea_decide", args=[study.slug, ideas["flagged"].pk]),
        {"action": "approve"},
    )
    assert Idea.objects.get(pk=ideas["flagged"].pk).normalization_status == "approved"


def test_a_list_that_changed_after_the_confirmation_page_approves_nothing(waiting, owner):
    study, ideas = waiting
    token = services.signoff_token(services.signoff_passed(study))
    topic, cond = ideas["ok-1"].topic, Condition.objects.get(study=study)
    proposed_idea(study, topic, cond, "ok-3", PASSED)
    with pytest.raises(services.PreparationError, match="now 3 idea"):
        services.normalization_approve_passed(study=study, actor=owner, token=token)
    assert not Idea.objects.filter(normalization_status="approved").exists()
    assert not AuditEvent.objects.filter(verb="normalization_approved_passed").exists()


def test_another_researcher_gets_404_and_anonymous_is_sent_to_log_in(waiting, other_researcher):
    study, _ = waiting
    url = reverse("studies:signoff_approve_passed", args=[study.slug])
    c = Client()
    c.force_login(other_researcher)
    assert c.get(url).status_code == 404
    token = services.signoff_token(services.signoff_passed(study))
    assert c.post(url, {"token": token, "confirm": "yes"}).status_code == 404
    assert Client().get(url).status_code == 302
    assert not Idea.objects.filter(normalization_status="approved").exists()


def test_a_viewer_sees_the_list_but_cannot_approve(waiting):
    study, _ = waiting
    viewer = get_user_model().objects.create_user("viewer", password="viewer-pass-123")
    StudyMember.objects.create(study=study, user=viewer, role="viewer")
    c = Client()
    c.force_login(viewer)
    url = reverse("studies:signoff_approve_passed", args=[study.slug])
    page = c.get(url)
    assert page.status_code == 200 and "ok-1" in page.content.decode()
    assert 'name="confirm"' not in page.content.decode()
    token = services.signoff_token(services.signoff_passed(study))
    assert c.post(url, {"token": token, "confirm": "yes"}).status_code == 403
    assert not Idea.objects.filter(normalization_status="approved").exists()
