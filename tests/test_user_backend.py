"""The authentication backend's get_user reads the user with a fixed statement: it must
give what Django's ModelBackend gives, field for field, and refuse what it refuses."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.test import Client
from django.utils import timezone

from ideareview.backends import UserBackend


@pytest.fixture
def user(db):
    made = get_user_model().objects.create_user(
        "reader", email="reader@example.org", password="Reader-pass-123", first_name="Ré"
    )
    get_user_model().objects.filter(pk=made.pk).update(
        last_login=timezone.now() - timedelta(days=2, microseconds=17)
    )
    return made


def test_get_user_gives_every_field_model_backend_gives(user):
    ours, django = UserBackend().get_user(user.pk), ModelBackend().get_user(user.pk)
    assert ours is not None and django is not None
    for field in get_user_model()._meta.concrete_fields:
        assert getattr(ours, field.attname) == getattr(django, field.attname), field.name
    assert ours.last_login.tzinfo is not None
    assert ours.get_session_auth_hash() == django.get_session_auth_hash()
    # the instance is a saved row: saving it updates, never inserts a second user
    ours.first_name = "Changed"
    ours.save(update_fields=["first_name"])
    assert get_user_model().objects.get(pk=user.pk).first_name == "Changed"


def test_get_user_refuses_an_inactive_or_missing_user(user):
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)
    assert UserBackend().get_user(user.pk) is None
    assert UserBackend().get_user(user.pk + 1000) is None
    assert UserBackend().get_user("not a number") is None


def test_a_password_change_ends_other_sessions(user):
    """Django checks each request's session against the password hash the backend loaded;
    with the row read by hand that check must still log the old session out."""
    client = Client()
    assert client.login(username="reader", password="Reader-pass-123")
    assert client.get("/studies/r/home/").status_code == 200
    user.set_password("Another-pass-456")
    user.save()
    response = client.get("/studies/r/home/")
    assert response.status_code == 302 and "login" in response["Location"]
