"""Login limits that hold: keyed on the account as authentication reads it (NFKC, case
folded), and counted before the password is checked, so parallel guesses cannot exceed
the limit. Run on every cache the project counts in: the local-memory cache of the tests,
the file cache of `make run`, and Redis when it is there."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.cache import caches
from django.test import Client, override_settings

from ideareview.throttle import (
    LOGIN_ACCOUNT_LIMIT,
    LOGIN_ADDRESS_LIMIT,
    LOGIN_PAIR_LIMIT,
    login_attempt,
    login_identity,
)
from tests.conftest import limits_redis_url

pytestmark = pytest.mark.embedded  # counts under parallel attempts in each cache


@pytest.fixture(autouse=True)
def _fast_hashes(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    caches["default"].clear()
    yield
    caches["default"].clear()


def _post(client: Client, username: str, password: str = "wrong-guess") -> int:
    return client.post("/login/", {"username": username, "password": password}).status_code


def test_identity_is_the_account_authentication_finds():
    for variant in ("bf2", "ｂｆ２", "bf２", "ᵇf2", " BF2 ", "Bf2"):
        assert login_identity(variant) == "bf2"


@pytest.mark.django_db
def test_after_a_lock_unicode_variants_of_the_name_are_locked_too():
    get_user_model().objects.create_user("bf2", password="the-right-one-123")
    client = Client()
    for _ in range(LOGIN_PAIR_LIMIT[0]):
        assert _post(client, "bf2") == 400
    for variant in ("ｂｆ２", "bf２", "ᵇf2", "BF2"):
        assert _post(client, variant, "the-right-one-123") == 429
    assert "_auth_user_id" not in client.session


def _caches(tmp_path) -> list[dict]:
    found = [
        {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "limits"},
        {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(tmp_path / "cache"),
        },
    ]
    url = limits_redis_url()
    if url is not None:
        # A prefix of this run's own instead of clear(): Redis' clear() flushes the whole
        # database, which other test processes (and their brokers) share.
        found.append(
            {
                "BACKEND": "ideareview.cache.RedisCache",
                "LOCATION": url,
                "KEY_PREFIX": f"limits-{uuid.uuid4().hex}",
            }
        )
    return found


def test_parallel_attempts_get_exactly_the_limit_counted_through(tmp_path):
    # Each attempt is counted under three keys (the address and account pair, the account,
    # the address) one after another. With more threads than the account's limit (30), a
    # thread whose pair count was within the limit can find the account's count past its
    # own when other threads overtook it, and be refused: fewer than 10 pass, which is
    # allowed ("at most"). Below every other limit, exactly the pair's limit must pass.
    limit = LOGIN_PAIR_LIMIT[0]
    threads_n = min(LOGIN_ACCOUNT_LIMIT[0], LOGIN_ADDRESS_LIMIT[0]) - 5
    assert threads_n > limit
    for cache in _caches(tmp_path):
        with override_settings(CACHES={"default": cache}):
            if "KEY_PREFIX" not in cache:
                caches["default"].clear()
            passed: list[int] = []
            start = threading.Barrier(threads_n)

            # an address of this run's own: other test runs share the Redis database
            address = f"198.51.100.{uuid.uuid4().int % 250}-{uuid.uuid4().hex}"

            def attempt(start: threading.Barrier, passed: list[int], address: str) -> None:
                start.wait()
                if not login_attempt(address=address, username="bf2"):
                    passed.append(1)

            threads = [
                threading.Thread(target=attempt, args=(start, passed, address))
                for _ in range(threads_n)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if "KEY_PREFIX" not in cache:
                caches["default"].clear()
            assert len(passed) == limit, cache["BACKEND"]


@pytest.mark.django_db(transaction=True)
def test_forty_parallel_logins_make_at_most_the_limit_password_checks(monkeypatch):
    get_user_model().objects.create_user("bf2", password="the-right-one-123")
    checks: list[int] = []
    real = ModelBackend.authenticate

    def counted(self, request, username=None, password=None, **kwargs):
        checks.append(1)
        return real(self, request, username=username, password=password, **kwargs)

    monkeypatch.setattr(ModelBackend, "authenticate", counted)
    statuses: list[int] = []
    start = threading.Barrier(40)

    def attempt(i: int) -> None:
        start.wait()
        statuses.append(_post(Client(), ["bf2", "ｂｆ２", "BF2", "ᵇf2"][i % 4]))

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(checks) <= LOGIN_PAIR_LIMIT[0]
    assert statuses.count(429) >= 40 - LOGIN_PAIR_LIMIT[0]
