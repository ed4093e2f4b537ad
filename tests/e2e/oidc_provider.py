"""A real OpenID Connect provider for the single sign-on test: django-oauth-toolkit with
OIDC on, as a tiny Django project of its own in a separate process on loopback.

    python -m tests.e2e.oidc_provider CONFIG_JSON

CONFIG_JSON names the database file ("database"), the client ({"client_id", "client_secret", "redirect_uri"}) and the
users ({"username", "password", "email", "first_name", "last_name"}); the process prints
the port it listens on, then serves until killed. Its cookies
have names of their own (both servers are on 127.0.0.1, and cookies do not tell ports
apart)."""

from __future__ import annotations

import json
import sys
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import django
from django.conf import settings

LOGIN_PAGE = (
    "<!doctype html><title>Loopback provider</title><h1>Loopback identity provider</h1>"
    '<form method="post">{% csrf_token %}{{ form.as_p }}'
    '<button type="submit">Sign in at the provider</button></form>'
)


def _private_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def configure(database: str) -> None:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="loopback-provider-only",
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "oauth2_provider",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
        ],
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": database,
            }
        },
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "OPTIONS": {
                    "loaders": [
                        (
                            "django.template.loaders.locmem.Loader",
                            {"registration/login.html": LOGIN_PAGE},
                        ),
                        "django.template.loaders.app_directories.Loader",
                    ],
                    "context_processors": ["django.template.context_processors.request"],
                },
            }
        ],
        # tables made straight from the models (migrate --run-syncdb): faster to start
        MIGRATION_MODULES={
            a: None for a in ("auth", "contenttypes", "sessions", "oauth2_provider")
        },
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        SESSION_COOKIE_NAME="provider_session",
        CSRF_COOKIE_NAME="provider_csrf",
        LOGIN_URL="/login/",
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        OAUTH2_PROVIDER={
            "OIDC_ENABLED": True,
            "OIDC_RSA_PRIVATE_KEY": _private_key(),
            "OAUTH2_VALIDATOR_CLASS": f"{__name__}.EmailClaims",
            "SCOPES": {"openid": "OpenID", "profile": "Profile", "email": "Email"},
            "PKCE_REQUIRED": True,
        },
    )
    django.setup()


def _validator_class() -> type:
    from oauth2_provider.oauth2_validators import OAuth2Validator

    class Validator(OAuth2Validator):
        """The address, vouched for (the provider's users are made by the test)."""

        def get_additional_claims(self, request):  # type: ignore[no-untyped-def]
            user = request.user
            return {
                "email": user.email,
                "email_verified": True,
                "given_name": user.first_name,
                "family_name": user.last_name,
            }

    return Validator


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    # The settings name the validator by dotted path; it is made once Django is set up.
    if name == "EmailClaims":
        return _validator_class()
    if name == "urlpatterns":
        from django.contrib.auth import views as auth_views
        from django.urls import include, path

        return [
            path("login/", auth_views.LoginView.as_view()),
            path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
        ]
    raise AttributeError(name)


def seed(config: dict) -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0, run_syncdb=True)
    User = get_user_model()
    for u in config["users"]:
        User.objects.create_user(**u)
    Application.objects.create(
        name="ideareview",
        client_id=config["client_id"],
        client_secret=config["client_secret"],
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=config["redirect_uri"],
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def main() -> None:
    config = json.loads(sys.argv[1])
    configure(config["database"])
    seed(config)
    from django.core.wsgi import get_wsgi_application

    server = make_server(
        "127.0.0.1", 0, get_wsgi_application(), server_class=_Server, handler_class=_Quiet
    )
    print(server.server_port, flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # until the test closes our input (or kills us)
    server.shutdown()


if __name__ == "__main__":
    main()
