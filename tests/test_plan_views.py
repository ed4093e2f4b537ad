"""The study's analysis plan page: who may read, edit and freeze it, and what it says."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from studies.models import StudyMember, StudyReport


@pytest.fixture
def study(db, owner):
    from studies.services.study import study_create

    study = study_create(owner=owner, slug="planned", title="Planned", baseline_condition="Human")
    for key, kind in (("Human", "human"), ("AI", "ai")):
        study.conditions.create(key=key, kind=kind)
    return study


def _login(client, user, password):
    assert client.login(username=user.username, password=password)


def test_owner_sees_the_default_plan_with_labelled_json(client, owner, study):
    _login(client, owner, "owner-pass-123")
    page = client.get(reverse("studies:study_plan", args=[study.slug]))
    assert page.status_code == 200
    html = page.content.decode()
    assert '<label for="id_document">Analysis plan (JSON)</label>' in html
    assert "Bonferroni" in html and "Freeze (pre-register)" in html
    assert "style=" not in html and "onclick" not in html


def test_other_researcher_cannot_open_the_plan_page(client, other_researcher, study):
    _login(client, other_researcher, "other-pass-123")
    assert client.get(reverse("studies:study_plan", args=[study.slug])).status_code == 404
    post = client.post(reverse("studies:study_plan_freeze", args=[study.slug]))
    assert post.status_code == 404


def test_saving_a_plan_stores_it_and_a_bad_field_is_named(client, owner, study):
    _login(client, owner, "owner-pass-123")
    url = reverse("studies:study_plan", args=[study.slug])
    good = {"hypotheses": [{"direction": "AI < Human"}], "multiple_testing": {"method": "bh"}}
    assert client.post(url, {"document": json.dumps(good)}).status_code == 302
    study.refresh_from_db()
    assert study.analysis_plan["multiple_testing"]["method"] == "bh"
    bad = client.post(url, {"document": json.dumps({"multiple_testing": {"method": "sidak"}})})
    assert bad.status_code == 400
    assert "multiple_testing.method" in bad.content.decode()
    study.refresh_from_db()
    assert study.analysis_plan["multiple_testing"]["method"] == "bh"


def test_every_wrong_field_of_a_plan_is_named_at_once(client, owner, study):
    """Fields that do not parse and fields the study does not have, in one answer, so
    the owner does not fix one error per save."""
    _login(client, owner, "owner-pass-123")
    url = reverse("studies:study_plan", args=[study.slug])
    plan = {
        "multiple_testing": {"method": "sidak"},
        "primary_metrics": ["clarity"],
        "alpha": 2,
        "hypotheses": [{"direction": "AI < Robots"}],
    }
    bad = client.post(url, {"document": json.dumps(plan)})
    assert bad.status_code == 400
    html = bad.content.decode()
    errors = html[html.index('id="plan-errors"') :]
    errors = errors[: errors.index("</div>")]
    for field in ("multiple_testing.method", "alpha", "primary_metrics", "hypotheses[0]"):
        assert field in errors, field
    assert errors.count("<li>") >= 4
    study.refresh_from_db()
    assert study.analysis_plan in ({}, None) or "primary_metrics" not in study.analysis_plan


def test_viewer_reads_but_cannot_change_or_freeze(client, study, django_user_model):
    viewer = django_user_model.objects.create_user("viewer-p", password="viewer-pass-123")
    StudyMember.objects.create(study=study, user=viewer, role="viewer")
    _login(client, viewer, "viewer-pass-123")
    url = reverse("studies:study_plan", args=[study.slug])
    assert client.get(url).status_code == 200
    assert client.post(url, {"document": "{}"}).status_code == 403
    assert client.post(reverse("studies:study_plan_freeze", args=[study.slug])).status_code == 403


def test_owner_freezes_once_and_not_after_a_report(client, owner, study):
    _login(client, owner, "owner-pass-123")
    freeze = reverse("studies:study_plan_freeze", args=[study.slug])
    client.post(freeze)  # without the ticked confirmation nothing is registered
    study.refresh_from_db()
    assert study.analysis_plan_frozen_at is None
    page = client.get(reverse("studies:study_plan", args=[study.slug])).content.decode()
    assert "Tick the confirmation to freeze the plan" in page
    client.post(freeze, {"confirm": "freeze"})
    study.refresh_from_db()
    assert study.analysis_plan_frozen_at is not None and len(study.analysis_plan_hash) == 64
    client.post(
        reverse("studies:study_plan", args=[study.slug]),
        {"document": json.dumps({"multiple_testing": {"method": "holm"}})},
    )
    page = client.get(reverse("studies:study_plan", args=[study.slug])).content.decode()
    assert 'id="plan-changed"' in page and study.analysis_plan_hash in page


def test_a_plan_cannot_be_frozen_from_the_page_after_a_report(client, owner, study):
    StudyReport.objects.create(study=study, data={}, directory="/nonexistent")
    _login(client, owner, "owner-pass-123")
    client.post(reverse("studies:study_plan_freeze", args=[study.slug]), {"confirm": "freeze"})
    study.refresh_from_db()
    assert study.analysis_plan_frozen_at is None
    page = client.get(reverse("studies:study_plan", args=[study.slug])).content.decode()
    assert "The plan was not frozen" in page and "can no longer be registered" in page


def test_the_status_says_the_plans_sidedness_and_families(client, owner, study):
    """A one-sided Benjamini-Hochberg plan's status names its direction and families, as
    the pre-registration does, instead of reading like the default two-sided plan."""
    from studies.services.study import study_plan_set

    _login(client, owner, "owner-pass-123")
    url = reverse("studies:study_plan", args=[study.slug])
    html = client.get(url).content.decode()
    assert '<li id="plan-directions">Directions: two-sided</li>' in html
    plan = {
        "hypotheses": [{"direction": "AI > Human"}],
        "multiple_testing": {"method": "bh", "families": "per_test"},
    }
    study_plan_set(study=study, source=json.dumps(plan), actor=owner)
    html = client.get(url).content.decode()
    assert '<li id="plan-directions">Directions: one-sided (AI &gt; Human)</li>' in html
    assert (
        '<li id="plan-multiple-testing">Multiple testing: Benjamini–Hochberg, families one '
        "per test, over the metrics and conditions, α = 0.05</li>"
    ) in html
    study_plan_set(
        study=study, source=json.dumps({"multiple_testing": {"method": "none"}}), actor=owner
    )
    html = client.get(url).content.decode()
    assert "families" not in html.split('id="plan-multiple-testing">', 1)[1].split("</li>")[0]


def test_the_plan_page_shows_the_chance_rankings_and_refuses_a_bad_count(client, owner, study):
    _login(client, owner, "owner-pass-123")
    url = reverse("studies:study_plan", args=[study.slug])
    page = client.get(url).content.decode()
    assert "2000 random rankings (the default)" in page
    bad = client.post(url, {"document": json.dumps({"agreement": {"chance_rankings": 10}})})
    assert bad.status_code == 400
    html = bad.content.decode()
    errors = html[html.index('id="plan-errors"') :]
    assert "agreement.chance_rankings: must be a whole number from 200 to 20,000" in errors
    good = {"agreement": {"chance_rankings": 5000}}
    assert client.post(url, {"document": json.dumps(good)}).status_code == 302
    page = client.get(url).content.decode()
    assert "5000 random rankings</li>" in page
