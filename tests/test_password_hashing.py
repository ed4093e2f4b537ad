"""Passwords as production hashes them (the test run itself uses MD5 for speed): new
ones with Argon2id at ideareview/hashers.py's parameters, and a password hashed before
(PBKDF2, or Argon2 at Django's parameters) still logs in and is re-hashed on the way."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import (
    Argon2PasswordHasher,
    PBKDF2PasswordHasher,
    identify_hasher,
)
from django.test import Client
from django.urls import reverse

import ideareview.settings as configured


@pytest.fixture
def production_hashers(settings):
    settings.PASSWORD_HASHERS = configured.PASSWORD_HASHERS


def test_new_passwords_get_argon2id_at_the_configured_parameters(db, production_hashers):
    user = get_user_model().objects.create_user("new", password="Fresh-pass-2024")
    assert identify_hasher(user.password).algorithm == "argon2"
    assert user.password.startswith("argon2$argon2id$v=19$m=19456,t=2,p=1$")
    assert user.check_password("Fresh-pass-2024") and not user.check_password("fresh-pass-2024")


def test_a_pbkdf2_password_still_logs_in_and_is_rehashed_with_argon2(db, production_hashers):
    user = get_user_model().objects.create_user("old")
    # As stored before Argon2 came first (fewer iterations than Django's, to keep the
    # test fast: the upgrade happens for any PBKDF2 hash).
    hasher = PBKDF2PasswordHasher()
    user.password = hasher.encode("Older-pass-2023", hasher.salt(), iterations=1000)
    user.save(update_fields=["password"])
    client = Client()
    wrong = client.post(reverse("login"), {"username": "old", "password": "older-pass-2023"})
    assert wrong.status_code == 400 and "_auth_user_id" not in client.session
    user.refresh_from_db()
    assert identify_hasher(user.password).algorithm == "pbkdf2_sha256"
    response = client.post(reverse("login"), {"username": "old", "password": "Older-pass-2023"})
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(user.pk)
    user.refresh_from_db()
    assert user.password.startswith("argon2$argon2id$v=19$m=19456,t=2,p=1$")
    assert user.check_password("Older-pass-2023")


def test_an_argon2_hash_at_django_parameters_logs_in_and_is_brought_to_ours(db, production_hashers):
    user = get_user_model().objects.create_user("argon")
    hasher = Argon2PasswordHasher()
    user.password = hasher.encode("Argon-pass-2023", hasher.salt())
    user.save(update_fields=["password"])
    assert "$m=102400,t=2,p=8$" in user.password
    client = Client()
    response = client.post(reverse("login"), {"username": "argon", "password": "Argon-pass-2023"})
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(user.pk)
    user.refresh_from_db()
    assert user.password.startswith("argon2$argon2id$v=19$m=19456,t=2,p=1$")


def _priority_of_the_thread_that_hashes(monkeypatch) -> list[tuple[str, int]]:
    """Patch argon2's hash and verify to record the name and nice value of the thread
    each runs on, around the real call."""
    import os
    import threading

    import argon2

    seen: list[tuple[str, int]] = []

    def where() -> None:
        tid = threading.get_native_id()
        seen.append((threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, tid)))

    real_hash, real_verify = argon2.low_level.hash_secret, argon2.PasswordHasher.verify

    def hash_secret(*args, **kwargs):
        where()
        return real_hash(*args, **kwargs)

    def verify(self, *args, **kwargs):
        where()
        return real_verify(self, *args, **kwargs)

    monkeypatch.setattr(argon2.low_level, "hash_secret", hash_secret)
    monkeypatch.setattr(argon2.PasswordHasher, "verify", verify)
    return seen


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="per-thread nice")
def test_a_login_hashes_on_a_thread_of_lower_priority_and_the_request_keeps_its_own(
    db, production_hashers, settings, monkeypatch
):
    import os
    import threading

    settings.PASSWORD_HASH_NICENESS = 7
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen = _priority_of_the_thread_that_hashes(monkeypatch)
    user = get_user_model().objects.create_user("low", password="Quiet-pass-2024")
    client = Client()
    response = client.post(reverse("login"), {"username": "low", "password": "Quiet-pass-2024"})
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(user.pk)
    wrong = client.post(reverse("login"), {"username": "low", "password": "quiet-pass-2024"})
    assert wrong.status_code == 400
    # Creating the user hashed once, each login verified once.
    assert len(seen) == 3
    expected = min(19, mine + 7)
    for name, nice in seen:
        assert name.startswith("password-hash") and nice == expected
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine


def test_with_the_setting_at_zero_the_request_thread_hashes(
    db, production_hashers, settings, monkeypatch
):
    import threading

    settings.PASSWORD_HASH_NICENESS = 0
    seen = _priority_of_the_thread_that_hashes(monkeypatch)
    user = get_user_model().objects.create_user("here", password="Inline-pass-2024")
    assert user.check_password("Inline-pass-2024")
    assert [name for name, _ in seen] == [threading.current_thread().name] * 2
