"""Safe defaults for a server on the internet: settings, error pages, headers, secrets."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.management import call_command
from django.db import OperationalError
from django.test import Client

# settings on the embedded and production parts (both CI passes)
pytestmark = [pytest.mark.slow, pytest.mark.embedded]

ROOT = Path(__file__).resolve().parents[1]
BROKER_PASSWORD = "br0ker-pa55word-xyz"
DB_PASSWORD = "db-pa55word-xyz"


def _manage(*args: str, env: dict[str, str], var_dir: Path) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CELERY_", "IDEAREVIEW_", "DATABASE_", "CACHE_", "REDIS_"))
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, "IDEAREVIEW_VAR_DIR": str(var_dir), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_with_no_configuration_debug_is_off_and_a_local_key_is_made_once(tmp_path):
    show = "from django.conf import settings as s; print(s.DEBUG, s.SECRET_KEY)"
    first = _manage("shell", "-c", show, env={}, var_dir=tmp_path)
    second = _manage("shell", "-c", show, env={}, var_dir=tmp_path)
    assert first.returncode == 0, first.stderr
    debug, key = first.stdout.splitlines()[-1].split()
    assert debug == "False"
    assert len(key) >= 50
    assert second.stdout.splitlines()[-1] == first.stdout.splitlines()[-1]
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0


DEPLOY_ENV = {
    "DJANGO_SECRET_KEY": "x" * 20 + "a-long-random-production-key-0123456789",
    "DJANGO_ALLOWED_HOSTS": "review.example.org",
    "DJANGO_SECURE_SSL_REDIRECT": "1",
    "DJANGO_SECURE_PROXY_SSL_HEADER": "1",
    "IDEAREVIEW_TRUSTED_PROXIES": "127.0.0.1",
    "DJANGO_SECURE_COOKIES": "1",
    "DJANGO_SECURE_HSTS_SECONDS": "31536000",
    "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "DJANGO_SECURE_HSTS_PRELOAD": "1",
}


def test_check_deploy_is_clean_once_the_https_settings_are_given(tmp_path):
    bare = _manage("check", "--deploy", env={}, var_dir=tmp_path)
    assert "security.W004" in bare.stderr and "security.W008" in bare.stderr
    given = _manage(
        "check", "--deploy", "--fail-level", "WARNING", env=DEPLOY_ENV, var_dir=tmp_path
    )
    assert given.returncode == 0, given.stderr
    assert "no issues" in given.stdout


def test_a_malformed_base_url_stops_start_up_naming_the_variable(tmp_path):
    result = _manage("check", env={"IDEAREVIEW_BASE_URL": "review.example.org"}, var_dir=tmp_path)
    assert result.returncode != 0
    assert "IDEAREVIEW_BASE_URL='review.example.org' is not a URL" in result.stderr


def test_a_negative_embedding_cache_size_stops_start_up_naming_the_variable(tmp_path):
    result = _manage("check", env={"IDEAREVIEW_EMBEDDING_CACHE_SIZE": "-1"}, var_dir=tmp_path)
    assert result.returncode != 0
    assert "IDEAREVIEW_EMBEDDING_CACHE_SIZE=-1: use 0 (no cache) or more" in result.stderr


def test_the_proxy_header_without_trusted_proxies_stops_start_up(tmp_path):
    # Believed from no one, X-Forwarded-Proto would leave every request plain HTTP behind
    # the proxy, and the SSL redirect would send the browser round in circles.
    env = {**DEPLOY_ENV, "IDEAREVIEW_TRUSTED_PROXIES": ""}
    result = _manage("check", env=env, var_dir=tmp_path)
    assert result.returncode != 0
    assert "DJANGO_SECURE_PROXY_SSL_HEADER=1 needs IDEAREVIEW_TRUSTED_PROXIES" in result.stderr


@pytest.fixture
def behind_proxy(settings):
    """The documented HTTPS settings, with the proxy on loopback."""
    settings.ALLOWED_HOSTS = ["review.example.org"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.IDEAREVIEW_TRUSTED_PROXIES = ["127.0.0.1"]
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    return settings


@pytest.mark.django_db
def test_x_forwarded_proto_is_believed_only_from_a_trusted_proxy(behind_proxy):
    # A client that reaches gunicorn's port directly cannot claim HTTPS: it is redirected
    # to HTTPS and gets no HSTS over plain HTTP.
    direct = Client(REMOTE_ADDR="192.0.2.5", HTTP_HOST="review.example.org")
    response = direct.get("/login/", HTTP_X_FORWARDED_PROTO="https")
    assert response.status_code == 301
    assert response["Location"] == "https://review.example.org/login/"
    assert "Strict-Transport-Security" not in response
    # The same header from the proxy is believed.
    proxy = Client(REMOTE_ADDR="127.0.0.1", HTTP_HOST="review.example.org")
    response = proxy.get("/login/", HTTP_X_FORWARDED_PROTO="https")
    assert response.status_code == 200
    assert response["Strict-Transport-Security"] == "max-age=3600"
    assert proxy.get("/login/").status_code == 301  # the proxy's own plain-HTTP request


@pytest.mark.django_db
def test_a_login_through_the_tls_proxy_passes_the_csrf_check(behind_proxy):
    # The browser's Origin names the port; the proxy passes the Host it was sent
    # (nginx: Host $http_host), so the two agree without CSRF_TRUSTED_ORIGINS.
    get_user_model().objects.create_user("ada", password="Proxy-pass-4821")
    https = {"HTTP_X_FORWARDED_PROTO": "https", "HTTP_X_FORWARDED_FOR": "198.51.100.7"}
    browser = Client(
        enforce_csrf_checks=True, REMOTE_ADDR="127.0.0.1", HTTP_HOST="review.example.org:8443"
    )
    page = browser.get("/login/", **https)
    assert page.status_code == 200
    cookie = page.cookies["csrftoken"]
    assert cookie["secure"]
    form = {
        "csrfmiddlewaretoken": cookie.value,
        "username": "ada",
        "password": "Proxy-pass-4821",
    }
    origin = {"HTTP_ORIGIN": "https://review.example.org:8443", **https}
    response = browser.post("/login/", form, **origin)
    assert response.status_code == 302
    session = response.cookies["sessionid"]
    assert session["secure"] and session["httponly"]
    # The same POST from another origin is refused.
    other = {**origin, "HTTP_ORIGIN": "https://evil.example.net"}
    assert browser.post("/login/", form, **other).status_code == 403


def test_no_module_reads_a_setting_with_a_default_of_its_own():
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for package in ("ideareview", "llm", "accounts", "studies", "judging", "bench")
        for path in (ROOT / package).rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if re.search(r"getattr\(\s*settings\b", line)
    ]
    assert offenders == []


@pytest.mark.django_db
def test_reminder_mails_link_to_the_configured_base_url(settings, owner):
    from studies.services.invitations import invitation_create
    from studies.services.study import study_create

    settings.IDEAREVIEW_BASE_URL = "https://review.example.org"
    study = study_create(owner=owner, slug="mailed", baseline_condition="Human")
    invitation_create(study=study, email="late@example.org", send=False)
    mail.outbox.clear()
    call_command("send_reminders", "mailed", stdout=io.StringIO())
    (message,) = mail.outbox
    links = re.findall(r"https?://\S+", message.body)
    assert links and all(link.startswith("https://review.example.org/") for link in links)


@pytest.mark.django_db
def test_the_not_found_page_is_ours_and_lists_no_urls(settings, client):
    settings.DEBUG = False
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    text = response.content.decode()
    assert "Page not found" in text
    assert "URLconf" not in text and "studies/" not in text and "admin/" not in text


@pytest.fixture
def secret_settings(settings):
    settings.DEBUG = False
    settings.CELERY_BROKER_URL = f"redis://:{BROKER_PASSWORD}@127.0.0.1:6379/0"
    # The settings fixture restores top-level settings only: this dict is the live
    # connection's own, so its password is put back as it was (on PostgreSQL every later
    # connection reads it).
    database = settings.DATABASES["default"]
    before = database.get("PASSWORD", "")
    database["PASSWORD"] = DB_PASSWORD
    yield settings
    database["PASSWORD"] = before


class _DatabaseDown:
    def cursor(self):
        raise OperationalError(
            f"could not connect to postgres://ideareview:{DB_PASSWORD}@10.0.0.5/ideareview; "
            f"broker redis://:{BROKER_PASSWORD}@10.0.0.6:6379/0"
        )


@pytest.mark.django_db
def test_a_server_error_shows_our_page_and_logs_no_password(secret_settings, monkeypatch):
    monkeypatch.setattr("studies.health_urls.connection", _DatabaseDown())
    handler = next(h for h in logging.getLogger("django").handlers if h.formatter)
    stream = io.StringIO()
    old = handler.setStream(stream)  # type: ignore[attr-defined]
    try:
        response = Client(raise_request_exception=False).get("/healthz")
    finally:
        handler.setStream(old)  # type: ignore[attr-defined]
    assert response.status_code == 500
    page = response.content.decode()
    assert "Something went wrong" in page
    logged = stream.getvalue()
    assert "OperationalError" in logged and "Traceback" in logged
    for text in (page, logged):
        assert BROKER_PASSWORD not in text
        assert DB_PASSWORD not in text
        assert secret_settings.SECRET_KEY not in text


@pytest.mark.django_db
def test_debug_error_reports_hide_url_passwords_too(secret_settings, rf):
    from django.views.debug import get_default_exception_reporter_filter

    safe = get_default_exception_reporter_filter().get_safe_settings()
    assert BROKER_PASSWORD not in str(safe)
    assert DB_PASSWORD not in str(safe)
    assert "127.0.0.1:6379" in safe["CELERY_BROKER_URL"]


@pytest.mark.django_db
def test_pages_carry_a_strict_content_security_policy_and_the_usual_headers(client):
    response = client.get("/login/")
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in policy
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    assert "camera=()" in response["Permissions-Policy"]


def test_pages_name_an_icon_the_static_files_hold(client):
    """Without one, browsers ask for /favicon.ico on every page and log a 404."""
    import re

    from django.contrib.staticfiles import finders
    from django.templatetags.static import static

    page = client.get("/login/").content.decode()
    (href,) = re.findall(r'<link rel="icon"[^>]* href="([^"]+)"', page)
    assert href == static("img/icon.svg")
    assert finders.find("img/icon.svg")


@pytest.mark.django_db
def test_the_downloaded_report_document_carries_its_own_locked_down_policy(
    client, settings, owner, tmp_path
):
    from django.urls import reverse

    from studies.models import StudyReport
    from studies.services.study import study_create

    settings.REPORTS_ROOT = tmp_path
    study = study_create(owner=owner, slug="doc", baseline_condition="Human")
    (tmp_path / "doc" / "v1").mkdir(parents=True)
    (tmp_path / "doc" / "v1" / "report.html").write_text("<html><style>p{}</style><p>r</p></html>")
    StudyReport.objects.create(study=study, data={}, directory="doc/v1")
    client.force_login(owner)
    response = client.get(reverse("studies:study_report_file", args=["doc", "report.html"]))
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "sandbox" in policy
    assert "script-src" not in policy


S3_ENV = {
    "IDEAREVIEW_S3_BUCKET": "ideareview",
    "IDEAREVIEW_S3_ENDPOINT_URL": "http://127.0.0.1:9000",
    "IDEAREVIEW_S3_REGION": "eu-west-1",
    "IDEAREVIEW_S3_ACCESS_KEY_ID": "access-key-xyz",
    "IDEAREVIEW_S3_SECRET_ACCESS_KEY": "s3-secret-key-xyz",
}


def test_an_s3_bucket_holds_reports_and_uploads_and_a_second_say_stops_start_up(tmp_path):
    show = (
        "from django.conf import settings as s; import json; "
        "print(json.dumps({k: s.STORAGES[k] for k in ('default', 'reports')}))"
    )
    result = _manage("shell", "-c", show, env=S3_ENV, var_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    storages = json.loads(result.stdout.splitlines()[-1])
    for name, folder in (("default", "uploads"), ("reports", "reports")):
        assert storages[name] == {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": "ideareview",
                "location": folder,
                "addressing_style": "path",
                "default_acl": None,
                "endpoint_url": "http://127.0.0.1:9000",
                "region_name": "eu-west-1",
                "access_key": "access-key-xyz",
                "secret_key": "s3-secret-key-xyz",
            },
        }
    both = {**S3_ENV, "IDEAREVIEW_REPORTS_STORAGE": "storages.backends.s3.S3Storage"}
    result = _manage("check", env=both, var_dir=tmp_path)
    assert result.returncode != 0
    assert "IDEAREVIEW_S3_BUCKET and IDEAREVIEW_REPORTS_STORAGE both say" in result.stderr
