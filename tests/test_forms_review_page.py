"""The reviewer's page follows the study's form: each metric on its own scale, a
rationale box only where the form asks for one, the study's rationale minimum."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from studies.models import Assignment, Condition, Idea, IdeaCondition, Reviewer, Study, Topic
from studies.protocol.forms import EXECUTION_FORM
from studies.services.study import study_create

WORDS = " ".join(["because"] * 30)


@pytest.fixture
def work(db, owner):
    study = study_create(owner=owner, slug="exec-rev", title="Execution", form=EXECUTION_FORM)
    topic = Topic.objects.create(study=study, name="Coding")
    cond = Condition.objects.create(study=study, key="Human", kind="human")
    idea = Idea.objects.create(
        study=study, topic=topic, title="T", normalized_text="## 1. Title\nT"
    )
    IdeaCondition.objects.create(idea=idea, condition=cond, study=study, external_id="H1")
    user = get_user_model().objects.create_user("rx@example.org", password="pw-Rev-12345")
    now = timezone.now()
    reviewer = Reviewer.objects.create(
        study=study,
        user=user,
        pseudonym="R001",
        screening="approved",
        consent_at=now,
        honor_code_at=now,
        profile_completed_at=now,
        topic_preferences=["Coding"],
        preferred_load=2,
    )
    assignment = Assignment.objects.create(study=study, reviewer=reviewer, idea=idea)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.REVIEWING)
    study.refresh_from_db()
    return study, user, assignment


def answers(**override) -> dict[str, str]:
    data = {"familiarity": "3", "confidence": "4"}
    for m in EXECUTION_FORM.metrics:
        data[m.key] = str(m.maximum)
        if m.rationale:
            data[f"{m.key}_rationale"] = WORDS
    data.update(override)
    return data


def test_the_page_shows_each_metric_on_its_scale_and_rationales_only_where_asked(client, work):
    study, user, assignment = work
    client.force_login(user)
    page = client.get(reverse("studies:review_page", args=[assignment.pk])).content.decode()
    assert 'name="code_quality" value="5"' in page and 'name="code_quality" value="6"' not in page
    assert 'name="soundness" value="10"' in page
    assert 'name="soundness_rationale"' in page and 'name="code_quality_rationale"' not in page
    assert 'Code quality <span class="muted">(1–5)</span>' in page


def test_a_review_without_a_code_quality_rationale_is_accepted(client, work):
    study, user, assignment = work
    client.force_login(user)
    r = client.post(reverse("studies:review_submit", args=[assignment.pk]), answers())
    assert r.status_code == 302
    scores = {s.metric: s for s in assignment.review.scores.all()}
    assert set(scores) == set(EXECUTION_FORM.metric_keys)
    assert scores["code_quality"].score == 5 and scores["code_quality"].rationale == ""


def test_a_score_outside_the_metrics_scale_and_a_short_rationale_are_refused(client, work):
    study, user, assignment = work
    study.rationale_min_words = 40
    study.save(update_fields=["rationale_min_words"])
    client.force_login(user)
    r = client.post(
        reverse("studies:review_submit", args=[assignment.pk]), answers(code_quality="7")
    )
    page = r.content.decode()
    assert r.status_code == 400
    assert "Code quality" in page and "7 is not one of the available choices" in page
    assert "Soundness rationale has 30 words; write at least 40." in page
