"""A closed study's progress page: the reviews still open when it closed were never
submitted, the page no longer refreshes itself, and a study without pair tasks shows
no pair count."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from studies.models import Assignment
from studies.services.study import study_close
from tests.factories import make_review_study

pytestmark = pytest.mark.django_db


def test_a_closed_study_says_its_open_reviews_were_not_submitted(owner):
    study = make_review_study(owner, slug="shut").study
    n = Assignment.objects.filter(study=study).count()
    assert n > 0
    client = Client()
    client.force_login(owner)
    url = reverse("studies:study_progress", args=[study.slug])
    page = client.get(url).content.decode()
    assert f"0</strong> of {n} submitted · {n} open" in page and "updates every 10 s" in page
    study_close(study=study)
    page = client.get(url).content.decode()
    assert f"0</strong> of {n} submitted · {n} not submitted when the study closed" in page
    assert "updates every 10 s" not in page and 'hx-trigger="every 10s"' not in page
    assert "Pair ratings" not in page
