"""The delete page says what goes and offers the study file first; the study file is the
owner's alone, and taking it is audited."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from studies.analysis.rounding import counted
from studies.models import AuditEvent, Study, StudyMember
from tests.factories import make_pilot_study

pytestmark = pytest.mark.django_db


def test_the_delete_page_lists_what_goes_and_offers_the_export_first(owner):
    study = make_pilot_study(owner, slug="doomed", n_per_condition=3)
    c = Client()
    c.force_login(owner)
    page = c.get(reverse("studies:study_delete", args=[study.slug])).content.decode()
    export_url = reverse("studies:study_export", args=[study.slug])
    assert export_url in page and page.index(export_url) < page.index('id="study-delete"')
    assert "6 ideas" in page and counted(study.reviews.count(), "review") in page
    assert "LLM call" in page and "audit log" in page

    response = c.get(export_url)
    assert response.status_code == 200 and "doomed-study.json" in response["Content-Disposition"]
    data = json.loads(response.content)
    assert data["study"] == "doomed" and data["sections"]["studies.review"]
    assert AuditEvent.objects.filter(study=study, verb="study_exported").exists()

    wrong = c.post(reverse("studies:study_delete", args=[study.slug]), {"confirm": "nope"})
    assert wrong.status_code == 400 and Study.objects.filter(slug="doomed").exists()
    done = c.post(reverse("studies:study_delete", args=[study.slug]), {"confirm": "doomed"})
    assert done.status_code == 302 and not Study.objects.filter(slug="doomed").exists()


def test_only_owners_take_the_study_file(owner):
    study = make_pilot_study(owner, slug="kept", n_per_condition=2)
    editor = get_user_model().objects.create_user("editor", password="editor-pass-123")
    StudyMember.objects.create(study=study, user=editor, role=StudyMember.Role.EDITOR)
    stranger = get_user_model().objects.create_user("stranger", password="stranger-pass-123")
    url = reverse("studies:study_export", args=[study.slug])
    c = Client()
    c.force_login(editor)
    assert c.get(url).status_code in (403, 404)
    c.force_login(stranger)
    assert c.get(url).status_code == 404
    assert not AuditEvent.objects.filter(verb="study_exported").exists()
