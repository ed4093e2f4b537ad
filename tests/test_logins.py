"""Login limits on the shared cache, per account and per client address behind trusted
proxies, the admin login too; invitations bound to the invited address."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.test import Client, override_settings
from django.urls import reverse

from ideareview.throttle import LOGIN_ACCOUNT_LIMIT, LOGIN_PAIR_LIMIT
from tests.conftest import limits_redis_url

pytestmark = pytest.mark.embedded  # limits in the file cache of `make run`

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fast_hashes(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    caches["default"].clear()
    yield
    caches["default"].clear()


def _fail(client: Client, username: str = "ada", url: str = "/login/", **extra) -> int:
    data = {"username": username, "password": "wrong-guess"}
    return client.post(url, data, **extra).status_code


def _failures_in_another_process(
    cache_url: str, tmp_path: Path, n: int, *, address: str, username: str
) -> None:
    """Another server process (another gunicorn worker, another machine) counting
    failed logins of the same account from the same address."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CACHE_", "REDIS_", "IDEAREVIEW_"))
    }
    code = (
        "from ideareview.throttle import login_failed\n"
        f"for _ in range({n}): login_failed(address={address!r}, username={username!r})\n"
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env={**env, "CACHE_URL": cache_url, "IDEAREVIEW_VAR_DIR": str(tmp_path / "other")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.django_db
def test_the_login_page_asks_for_an_email_or_a_username_and_takes_a_username():
    """Researchers' accounts (create_researcher, the demo's) have usernames, not emails."""
    get_user_model().objects.create_user("ada", email="ada@example.org", password="pw-ada-1234")
    client = Client()
    page = client.get("/login/").content.decode()
    assert "Email or username" in page and "<title>Log in" in page
    r = client.post("/login/", {"username": "ada", "password": "pw-ada-1234"})
    assert r.status_code == 302


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["file", "redis"])
@pytest.mark.django_db
def test_failed_logins_in_another_process_count_against_the_same_limit(kind, tmp_path):
    if kind == "file":
        url = f"file://{tmp_path / 'cache'}"
        cache = {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache"}
        cache["LOCATION"] = str(tmp_path / "cache")
    else:
        url = limits_redis_url()
        if url is None:
            pytest.skip("no Redis on 127.0.0.1:6379")
        cache = {"BACKEND": "ideareview.cache.RedisCache", "LOCATION": url}
    # An address and an account of this test's own: the Redis database outlives the run.
    address = f"10.{secrets.randbelow(250)}.{secrets.randbelow(250)}.{secrets.randbelow(250)}"
    username = f"ada-{secrets.token_hex(4)}"
    with override_settings(CACHES={"default": cache}):
        limit = LOGIN_PAIR_LIMIT[0]
        half = limit // 2
        client = Client(REMOTE_ADDR=address)
        assert [_fail(client, username) for _ in range(half)] == [400] * half
        _failures_in_another_process(
            url, tmp_path, limit - half, address=address, username=username
        )
        # The other process's failures count here: the limit is reached, not half of it.
        assert _fail(client, username) == 429


@pytest.mark.django_db
def test_the_right_password_is_refused_once_the_limit_is_reached():
    get_user_model().objects.create_user("ada", password="the-right-one-123")
    client = Client()
    for _ in range(LOGIN_PAIR_LIMIT[0]):
        assert _fail(client) == 400
    response = client.post("/login/", {"username": "ada", "password": "the-right-one-123"})
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_an_account_is_limited_across_addresses():
    a, b = Client(REMOTE_ADDR="10.1.0.1"), Client(REMOTE_ADDR="10.2.0.2")
    for n in range(LOGIN_ACCOUNT_LIMIT[0]):
        client = Client(REMOTE_ADDR=f"10.3.{n // 200}.{n % 200 + 1}")
        assert _fail(client) == 400
    assert _fail(a) == 429 and _fail(b) == 429
    assert _fail(a, username="bob") == 400  # other accounts are untouched


@pytest.mark.django_db
def test_forwarded_for_is_ignored_unless_the_request_comes_from_a_trusted_proxy(settings):
    settings.IDEAREVIEW_TRUSTED_PROXIES = []
    client = Client(REMOTE_ADDR="203.0.113.9")
    for n in range(LOGIN_PAIR_LIMIT[0]):
        # a client that invents a new X-Forwarded-For for every guess
        assert _fail(client, HTTP_X_FORWARDED_FOR=f"198.51.100.{n}") == 400
    assert _fail(client, HTTP_X_FORWARDED_FOR="198.51.100.250") == 429


@pytest.mark.django_db
def test_behind_a_trusted_proxy_each_reviewer_is_counted_on_their_own_address(settings):
    settings.IDEAREVIEW_TRUSTED_PROXIES = ["10.0.0.0/24"]
    proxy = Client(REMOTE_ADDR="10.0.0.2")
    # What a reviewer writes into X-Forwarded-For stays on the left; the proxy appends the
    # address it saw, and that is the one counted.
    for n in range(LOGIN_PAIR_LIMIT[0]):
        assert _fail(proxy, HTTP_X_FORWARDED_FOR=f"1.2.3.{n}, 198.51.100.7") == 400
    assert _fail(proxy, HTTP_X_FORWARDED_FOR="198.51.100.7") == 429
    # two proxies in a row, the inner one trusted too
    assert _fail(proxy, HTTP_X_FORWARDED_FOR="198.51.100.7, 10.0.0.9") == 429
    # everyone else behind the same proxy can still log in
    assert _fail(proxy, HTTP_X_FORWARDED_FOR="198.51.100.8") == 400


@pytest.mark.django_db
def test_the_admin_login_is_limited_too():
    get_user_model().objects.create_superuser("root", password="admin-pass-123")
    client = Client()
    for _ in range(LOGIN_PAIR_LIMIT[0]):
        assert _fail(client, username="root", url="/admin/login/") == 200
    assert _fail(client, username="root", url="/admin/login/") == 429
    response = client.post("/admin/login/", {"username": "root", "password": "admin-pass-123"})
    assert response.status_code == 429


@pytest.mark.django_db
def test_the_admin_login_still_logs_in():
    get_user_model().objects.create_superuser("root", password="admin-pass-123")
    client = Client()
    response = client.post(
        "/admin/login/?next=/admin/", {"username": "root", "password": "admin-pass-123"}
    )
    assert response.status_code == 302
    assert client.get("/admin/").status_code == 200


def _invited(owner, email: str = "ada@example.org") -> str:
    from studies.services.invitations import invitation_create, invitation_token
    from studies.services.study import study_create

    study = study_create(owner=owner, slug="bound", baseline_condition="Human")
    invitation = invitation_create(study=study, email=email, send=False)
    return reverse("studies:invitation_open", args=[invitation_token(invitation)])


def _sign_up(client: Client, url: str, email: str):
    data = {"email": email, "password1": "Long-pass-9876", "password2": "Long-pass-9876"}
    return client.post(url, data)


@pytest.mark.django_db
def test_a_bound_invitation_refuses_another_address_on_sign_up(settings, owner):
    settings.IDEAREVIEW_INVITATION_BIND_EMAIL = True
    url = _invited(owner)
    response = _sign_up(Client(), url, "mallory@example.org")
    assert response.status_code == 400
    assert "sent to another email address" in response.content.decode()
    assert not get_user_model().objects.filter(email="mallory@example.org").exists()
    assert _sign_up(Client(), url, "Ada@Example.org").status_code == 302


@pytest.mark.django_db
def test_a_bound_invitation_refuses_a_logged_in_account_with_another_address(settings, owner):
    from studies.models import Reviewer

    settings.IDEAREVIEW_INVITATION_BIND_EMAIL = True
    url = _invited(owner)
    other = get_user_model().objects.create_user(
        "mallory", email="mallory@example.org", password="x-Pass-1234"
    )
    client = Client()
    client.force_login(other)
    response = client.post(url)
    assert response.status_code == 403
    assert "another address" in response.content.decode()
    assert not Reviewer.objects.filter(user=other).exists()


@pytest.mark.django_db
def test_without_binding_a_forwarded_invitation_still_works(settings, owner):
    settings.IDEAREVIEW_INVITATION_BIND_EMAIL = False
    url = _invited(owner)
    assert _sign_up(Client(), url, "colleague@example.org").status_code == 302
