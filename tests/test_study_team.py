"""Study parameters' database rules and the study team (memberships and roles)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.urls import reverse

from studies.models import Study, StudyMember
from studies.services.study import study_create


@pytest.fixture
def study(db, owner):
    return study_create(owner=owner, slug="team", title="Team study")


@pytest.mark.django_db
def test_creating_a_study_makes_its_creator_an_owner_member(study, owner):
    member = StudyMember.objects.get(study=study)
    assert member.user == owner and member.role == "owner"
    assert study.role_of(owner) == "owner"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "fields",
    [
        {"min_load": 5, "max_load": 4},
        {"min_load": 0},
        {"min_reviews_per_idea": 5, "max_reviews_per_idea": 4},
        {"min_reviews_per_idea": 0},
        {"invitation_days": 0},
        {"payment_per_review": -1},
        {"payment_bonus": -5},
        {"topic_choice_use": "third"},
    ],
)
def test_the_database_refuses_inconsistent_study_parameters(study, fields):
    with pytest.raises(IntegrityError), transaction.atomic():
        Study.objects.filter(pk=study.pk).update(**fields)


@pytest.mark.django_db
def test_a_user_is_a_member_of_a_study_once(study, owner):
    with pytest.raises(IntegrityError), transaction.atomic():
        StudyMember.objects.create(study=study, user=owner, role="viewer")


@pytest.mark.django_db
def test_a_second_owner_opens_the_study_like_its_creator(client, study):
    co = get_user_model().objects.create_user("co-owner", password="x-pass-123")
    StudyMember.objects.create(study=study, user=co, role="owner")
    client.force_login(co)
    assert client.get(reverse("studies:study_detail", args=[study.slug])).status_code == 200
    listing = client.get(reverse("studies:study_list")).content.decode()
    assert "Team study" in listing


@pytest.mark.django_db
def test_a_rationale_minimum_on_the_study_overrides_the_forms(study):
    assert study.rationale_minimum() == study.form_definition().min_rationale_words
    study.rationale_min_words = 40
    assert study.rationale_minimum() == 40


@pytest.mark.django_db
def test_the_study_list_shows_each_member_their_own_role_once(client, study, owner):
    viewer = get_user_model().objects.create_user("viewer", password="x-pass-123")
    StudyMember.objects.create(study=study, user=viewer, role="viewer")
    client.force_login(viewer)
    page = client.get(reverse("studies:study_list")).content.decode()
    assert page.count("Team study") == 1 and "<td>Viewer</td>" in page
    client.force_login(owner)
    page = client.get(reverse("studies:study_list")).content.decode()
    assert page.count("Team study") == 1 and "<td>Owner</td>" in page


@pytest.mark.django_db
def test_the_study_and_the_members_role_come_in_one_statement(
    rf, study, owner, django_assert_num_queries
):
    from django.core.exceptions import PermissionDenied
    from django.http import Http404

    from studies.views.study import get_study_for_member

    viewer = get_user_model().objects.create_user("team-viewer", password="x-pass-123")
    outsider = get_user_model().objects.create_user("team-outsider", password="x-pass-123")
    StudyMember.objects.create(study=study, user=viewer, role="viewer")
    # Another study whose only member is the outsider: its row must not lend a role.
    study_create(owner=outsider, slug="elsewhere", title="Elsewhere")
    for user, role in ((owner, "owner"), (viewer, "viewer")):
        request = rf.get("/")
        request.user = user
        with django_assert_num_queries(1):
            found = get_study_for_member(request, "team", role="viewer")
        assert found.pk == study.pk and found.member_role == role
        assert found.may.edit == (role == "owner") and found.form_definition()
    request = rf.get("/")
    request.user = viewer
    with pytest.raises(PermissionDenied, match="you are viewer"):
        get_study_for_member(request, "team", role="editor")
    request.user = outsider
    with pytest.raises(Http404):
        get_study_for_member(request, "team", role="viewer")
