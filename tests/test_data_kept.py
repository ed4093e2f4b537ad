"""Reviews and pair ratings are the study's data: deleting the idea, reviewer or
assignment they hang on is refused (in the admin with the reason), and only deleting the
whole study takes them."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db.models import RestrictedError
from django.urls import reverse

from studies.models import Idea, Review, Reviewer, Study


@pytest.fixture
def reviewed(si2024_study):
    """An idea and a reviewer that each have reviews (the release's reviews are
    anonymous, so one reviewer is given two of them)."""
    reviewer = Reviewer.objects.create(study=si2024_study, pseudonym="R900")
    Review.objects.filter(pk__in=Review.objects.values("pk")[:2]).update(reviewer=reviewer)
    return Idea.objects.filter(reviews__isnull=False).first(), reviewer


@pytest.fixture
def admin_client(client, db):
    admin = get_user_model().objects.create_superuser("root", "root@example.org", "root-pass-1")
    client.force_login(admin)
    return client


@pytest.mark.django_db
def test_deleting_an_idea_or_reviewer_with_reviews_is_refused(reviewed):
    idea, reviewer = reviewed
    n = Review.objects.count()
    with pytest.raises(RestrictedError):
        idea.delete()
    with pytest.raises(RestrictedError):
        reviewer.delete()
    assert Review.objects.count() == n and reviewer.reviews.count() == 2


@pytest.mark.django_db
def test_the_admin_says_why_an_idea_or_reviewer_with_reviews_cannot_be_deleted(
    reviewed, admin_client
):
    idea, reviewer = reviewed
    for obj, name in ((idea, "idea"), (reviewer, "reviewer")):
        url = reverse(f"admin:studies_{name}_delete", args=[obj.pk])
        page = admin_client.get(url).content.decode()
        assert f"Cannot delete {name}" in page and "protected related objects" in page
        assert "review " in page
        admin_client.post(url, {"post": "yes"})
        assert type(obj).objects.filter(pk=obj.pk).exists()


@pytest.mark.django_db
def test_deleting_the_whole_study_still_takes_its_reviews(si2024_study, reviewed, owner):
    from studies.services.study import study_delete

    study_delete(study=si2024_study, confirm="si2024", actor=owner)
    assert not Study.objects.filter(slug="si2024").exists()
    assert Review.objects.count() == 0
