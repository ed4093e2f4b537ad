"""One env-driven settings module.

With no environment at all it runs on safe local defaults: SQLite, a filesystem Celery
broker and a file cache under `var/`, mail to the console, DEBUG off (`make run` turns it on
for local use). Every value that production needs comes from the environment; a malformed
value stops start-up with a message naming the variable. No other module reads the
environment or a setting with a default of its own: every setting is defined here.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
# What the processes write (the SQLite database, the secret key, reports, uploads, the
# file broker and cache under var/) is readable by their own user only: files 0600,
# directories 0700, whatever umask the shell had.
os.umask(os.umask(0o077) | 0o077)
VAR_DIR = Path(os.environ.get("IDEAREVIEW_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no)")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from exc


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_url(name: str, default: str, schemes: set[str]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    parts = urlsplit(raw)
    if parts.scheme not in schemes or not parts.netloc:
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not a URL starting with {' or '.join(sorted(schemes))}://"
        )
    return raw


# Off unless turned on: a server started without configuration never shows tracebacks,
# settings or the URL list. `make run` sets DJANGO_DEBUG=1 for local use.
DEBUG = env_bool("DJANGO_DEBUG", False)


def _secret_key() -> str:
    key = os.environ.get("DJANGO_SECRET_KEY")
    if key:
        return key
    # A per-installation key kept under var/, so local use needs no configuration and
    # signed links survive restarts. Several machines must share DJANGO_SECRET_KEY.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        import secrets

        # Created once, atomically: web workers and Celery processes start together.
        tmp = path.with_name(f".secret_key.{os.getpid()}")
        tmp.write_text(secrets.token_urlsafe(50))
        tmp.chmod(0o600)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    # allauth's account and social-account apps hold single sign-on's rows (linked
    # identities); only the OpenID Connect provider's login URLs are mounted
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "accounts",
    "llm",
    "studies",
    "judging",
]

MIDDLEWARE = [
    "ideareview.middleware.proxy_scheme_header",
    "django.middleware.security.SecurityMiddleware",
    "ideareview.middleware.content_security_policy",
    "ideareview.middleware.request_size_limit",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "allauth.account.middleware.AccountMiddleware",
]

ROOT_URLCONF = "ideareview.urls"
WSGI_APPLICATION = "ideareview.wsgi.application"
ASGI_APPLICATION = "ideareview.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]


# How long an SQLite connection waits for another's write before "database is locked".
SQLITE_BUSY_SECONDS = env_int("IDEAREVIEW_SQLITE_BUSY_SECONDS", 20)


# Web process and Celery worker share the file: wait instead of failing, take the write
# lock when a transaction begins (a transaction that read first and then wants to write
# after another connection wrote fails at once, whatever the timeout), and let readers go
# on while one writes (write-ahead log). The same whether the file is the default or named
# by DATABASE_URL=sqlite:///...
SQLITE_OPTIONS = {
    "timeout": SQLITE_BUSY_SECONDS,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
}


def _database() -> dict:
    url = os.environ.get("DATABASE_URL")
    if not url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "ideareview.sqlite3",
            "OPTIONS": dict(SQLITE_OPTIONS),
            # Tests run a Celery worker and a live server in threads beside the test. On
            # Django's default in-memory test database (shared cache) SQLite locks whole
            # tables and fails at once with "database table is locked" instead of waiting,
            # so tests get a file of their own, one per process.
            "TEST": {
                "NAME": str(Path(tempfile.gettempdir()) / f"ideareview-test-{os.getpid()}.sqlite3")
            },
        }
    try:
        config: dict[str, Any] = dict(
            dj_database_url.parse(
                url, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60), conn_health_checks=True
            )
        )
    except Exception as exc:  # the library raises several types for a bad URL
        raise ImproperlyConfigured(f"DATABASE_URL is malformed: {exc}") from exc
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["OPTIONS"] = {**SQLITE_OPTIONS, **(config.get("OPTIONS") or {})}
    pool_size = env_int("DATABASE_POOL_MAX_SIZE", 0)
    if pool_size and config["ENGINE"] == "django.db.backends.postgresql":
        pool = _pool(pool_size)
        options: dict[str, Any] = dict(config.get("OPTIONS") or {})
        config.update(pool, OPTIONS={**options, **pool["OPTIONS"]})
    return config


def _pool(max_size: int) -> dict:
    """psycopg's pool in each process instead of one persistent connection per thread.

    Connections stay bounded either way: without the pool each gunicorn thread keeps at most
    one (workers x threads in all), with it each process keeps at most `max_size` and a
    thread waits up to DATABASE_POOL_TIMEOUT s for one. A connection is checked before it
    is handed out, so a restarted PostgreSQL costs no failed request.
    """
    from psycopg_pool import ConnectionPool

    return {
        "CONN_MAX_AGE": 0,  # the pool keeps the connections; Django must not
        "CONN_HEALTH_CHECKS": False,
        "OPTIONS": {
            "pool": {
                "min_size": 1,
                "max_size": max_size,
                "timeout": env_int("DATABASE_POOL_TIMEOUT", 30),
                "max_idle": 300,
                "check": ConnectionPool.check_connection,
            }
        },
    }


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# New passwords are hashed with Argon2id (argon2-cffi; Django's recommended hasher, at the
# parameters ideareview/hashers.py gives and explains): a login costs a tenth of the CPU
# of PBKDF2 at Django's 1,000,000 iterations, which during a burst of logins starved every
# other request (docs/measurements.md). The others verify passwords hashed before; such a
# hash is re-hashed with Argon2id at the user's next login.
PASSWORD_HASHERS = [
    "ideareview.hashers.Argon2idHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.BCryptSHA256PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]

# How much lower than the server's other work a password check is scheduled (added to
# the nice value of the threads that hash; 0 hashes in the request's own thread). During
# a burst of logins the typing reviewers' requests go first (ideareview/hashers.py).
PASSWORD_HASH_NICENESS = env_int("IDEAREVIEW_PASSWORD_HASH_NICENESS", 10)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_ROOT = VAR_DIR / "media"
REPORTS_ROOT = VAR_DIR / "reports"
# Local scratch folders of report builds (files are made here, then saved into the
# "reports" storage). A build killed by SIGKILL leaves its folder; the next build on the
# same machine removes it (studies/work_folders.py).
JOB_WORK_ROOT = Path(os.environ.get("IDEAREVIEW_JOB_WORK_ROOT", VAR_DIR / "work"))


def env_storage(name: str, backend: str) -> dict[str, Any]:
    """A STORAGES entry from IDEAREVIEW_<NAME>_STORAGE (the backend's dotted path) and
    IDEAREVIEW_<NAME>_STORAGE_OPTIONS (a JSON object of the backend's options)."""
    prefix = f"IDEAREVIEW_{name.upper()}_STORAGE"
    raw = os.environ.get(f"{prefix}_OPTIONS") or "{}"
    try:
        options = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(f"{prefix}_OPTIONS is not JSON: {exc}") from None
    if not isinstance(options, dict):
        raise ImproperlyConfigured(f"{prefix}_OPTIONS={raw!r} is not a JSON object")
    return {"BACKEND": os.environ.get(prefix) or backend, "OPTIONS": options}


# An S3-compatible object store (AWS S3, MinIO, Ceph, Garage...) shared by every web and
# worker machine, through django-storages: IDEAREVIEW_S3_BUCKET turns it on for both
# storages below, uploads under "uploads/" and reports under "reports/" in that bucket.
# The endpoint URL is the store's (empty: AWS S3 itself); the keys default to boto3's own
# chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, an instance role). Self-hosted stores
# usually want path-style addresses (http://host/bucket/key), the default with an endpoint.
S3_BUCKET = os.environ.get("IDEAREVIEW_S3_BUCKET", "")
S3_ENDPOINT_URL = env_url("IDEAREVIEW_S3_ENDPOINT_URL", "", {"http", "https"})
S3_REGION = os.environ.get("IDEAREVIEW_S3_REGION", "")
S3_ACCESS_KEY_ID = os.environ.get("IDEAREVIEW_S3_ACCESS_KEY_ID", "")
S3_SECRET_ACCESS_KEY = os.environ.get("IDEAREVIEW_S3_SECRET_ACCESS_KEY", "")
S3_ADDRESSING_STYLE = os.environ.get(
    "IDEAREVIEW_S3_ADDRESSING_STYLE", "path" if S3_ENDPOINT_URL else "auto"
)
if S3_ADDRESSING_STYLE not in {"auto", "path", "virtual"}:
    raise ImproperlyConfigured(
        f"IDEAREVIEW_S3_ADDRESSING_STYLE={S3_ADDRESSING_STYLE!r}: use auto, path or virtual"
    )
if bool(S3_ACCESS_KEY_ID) != bool(S3_SECRET_ACCESS_KEY):
    raise ImproperlyConfigured(
        "IDEAREVIEW_S3_ACCESS_KEY_ID and IDEAREVIEW_S3_SECRET_ACCESS_KEY go together"
    )


def s3_storage(location: str) -> dict[str, Any]:
    """A STORAGES entry for one folder ("location") of the shared bucket."""
    options: dict[str, Any] = {
        "bucket_name": S3_BUCKET,
        "location": location,
        "addressing_style": S3_ADDRESSING_STYLE,
        # Files are served through Django (permission checks, blinding), never by a link
        # to the bucket, so the bucket stays private.
        "default_acl": None,
    }
    for key, value in [
        ("endpoint_url", S3_ENDPOINT_URL),
        ("region_name", S3_REGION),
        ("access_key", S3_ACCESS_KEY_ID),
        ("secret_key", S3_SECRET_ACCESS_KEY),
    ]:
        if value:
            options[key] = value
    return {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}


def shared_storage(name: str, location: str, local: str) -> dict[str, Any]:
    """The storage `name`: the bucket's folder `location` when IDEAREVIEW_S3_BUCKET is set,
    else IDEAREVIEW_<NAME>_STORAGE (default: the local folder backend `local`)."""
    if not S3_BUCKET:
        return env_storage(name, local)
    explicit = f"IDEAREVIEW_{name.upper()}_STORAGE"
    if os.environ.get(explicit) or os.environ.get(f"{explicit}_OPTIONS"):
        raise ImproperlyConfigured(
            f"IDEAREVIEW_S3_BUCKET and {explicit} both say where the {name!r} storage is: "
            "set one of them"
        )
    return s3_storage(location)


# Files every machine must see go through a named storage, so several machines can share
# one store (docs/deploy.md, "Several machines"): "default" keeps large review uploads
# until their import job reads them (MEDIA_ROOT by default), "reports" holds the report
# files (REPORTS_ROOT by default).
STORAGES = {
    "default": shared_storage("default", "uploads", "django.core.files.storage.FileSystemStorage"),
    "reports": shared_storage("reports", "reports", "studies.storage.ReportsFolderStorage"),
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

EMAIL_BACKEND = os.environ.get(
    "DJANGO_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend"
)
DEFAULT_FROM_EMAIL = os.environ.get("DJANGO_DEFAULT_FROM_EMAIL", "ideareview@localhost")


def _trusted_proxies() -> list[str]:
    import ipaddress

    proxies = env_list("IDEAREVIEW_TRUSTED_PROXIES", [])
    for proxy in proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise ImproperlyConfigured(
                f"IDEAREVIEW_TRUSTED_PROXIES: {proxy!r} is not an address or network"
            ) from None
    return proxies


# --- Researcher accounts (accounts/; docs/deploy.md, "Researchers join").
# An administrator's invitation link to become a researcher lasts this many days, and is
# used once.
IDEAREVIEW_RESEARCHER_INVITATION_DAYS = env_int("IDEAREVIEW_RESEARCHER_INVITATION_DAYS", 14)
# Study owners may invite a colleague who has no account yet from the study's team page
# (the colleague becomes a researcher and joins the team on accepting). Off: only
# administrators make researchers.
IDEAREVIEW_OWNER_INVITES = env_bool("IDEAREVIEW_OWNER_INVITES", False)
# Anyone may ask for a researcher account at /accounts/signup/; it stays inactive until an
# administrator approves it. Off: the page does not exist.
IDEAREVIEW_SIGNUP = env_bool("IDEAREVIEW_SIGNUP", False)
# Password reset links (Django's token: single-use, as it hashes the password) last this
# many seconds.
PASSWORD_RESET_TIMEOUT = env_int("IDEAREVIEW_PASSWORD_RESET_SECONDS", 3 * 24 * 3600)

# Reverse proxies whose X-Forwarded-For is believed (login limits per client address).
IDEAREVIEW_TRUSTED_PROXIES = _trusted_proxies()
# An invitation can only be taken by an account whose email is the invited address.
IDEAREVIEW_INVITATION_BIND_EMAIL = env_bool("IDEAREVIEW_INVITATION_BIND_EMAIL", False)

# Request limits: a file upload (IDEAREVIEW_MAX_UPLOAD_MB) and a form's fields; larger
# requests get a page saying the size and the limit (413). The proxy's limit
# (client_max_body_size) should be a little above the upload limit.
IDEAREVIEW_MAX_UPLOAD_BYTES = env_int("IDEAREVIEW_MAX_UPLOAD_MB", 25) * 2**20
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("IDEAREVIEW_MAX_FORM_KB", 2560) * 2**10
# Uploads larger than this go to a temporary file instead of memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2621440

# Where links in mails point (invitations, reminders): the address reviewers open.
# `make run` sets it to the address it serves (IDEAREVIEW_HOST and IDEAREVIEW_PORT).
IDEAREVIEW_BASE_URL = env_url(
    "IDEAREVIEW_BASE_URL", "http://127.0.0.1:8000", {"http", "https"}
).rstrip("/")

# --- HTTPS and headers. Behind a TLS proxy set DJANGO_SECURE_PROXY_SSL_HEADER=1 (the proxy
# must set X-Forwarded-Proto), IDEAREVIEW_TRUSTED_PROXIES (the proxy's address),
# DJANGO_SECURE_SSL_REDIRECT=1, DJANGO_SECURE_COOKIES=1 and DJANGO_SECURE_HSTS_SECONDS;
# then `manage.py check --deploy` is clean. X-Forwarded-Proto is believed only from the
# trusted proxies (ideareview.middleware.proxy_scheme_header), so the header without them
# would make every request plain HTTP and SSL redirect loop: start-up stops instead.
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https")
    if env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", False)
    else None
)
if SECURE_PROXY_SSL_HEADER and not IDEAREVIEW_TRUSTED_PROXIES:
    raise ImproperlyConfigured(
        "DJANGO_SECURE_PROXY_SSL_HEADER=1 needs IDEAREVIEW_TRUSTED_PROXIES, the address of the "
        "proxy that sets X-Forwarded-Proto (e.g. 127.0.0.1): the header is believed only "
        "from those addresses"
    )
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
# ModelBackend with the logged-in user read by one fixed statement (every request of a
# logged-in user loads it). Sessions name the backend that logged them in, so sessions
# made before this backend was configured log in again once.
AUTHENTICATION_BACKENDS = ["ideareview.backends.UserBackend"]


# --- Single sign-on through OpenID Connect (django-allauth), off unless providers are
# configured. IDEAREVIEW_SSO_PROVIDERS is a JSON list of objects {"id" (in the URL, letters,
# digits, - and _), "name" (on the login button), "server_url" (the issuer, whose
# /.well-known/openid-configuration is read), "client_id", "secret_env" (the environment
# variable holding the client secret)}. The login page then offers one button per
# provider; who may sign in that way is accounts/sso.py's rule (docs/deploy.md).
def _sso_providers() -> list[dict[str, Any]]:
    raw = os.environ.get("IDEAREVIEW_SSO_PROVIDERS", "")
    if not raw.strip():
        return []
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"IDEAREVIEW_SSO_PROVIDERS is not JSON: {exc}") from exc
    if not isinstance(value, list):
        raise ImproperlyConfigured("IDEAREVIEW_SSO_PROVIDERS must be a JSON list of objects")
    apps = []
    needed = {"id", "name", "server_url", "client_id", "secret_env"}
    for i, item in enumerate(value):
        where = f"IDEAREVIEW_SSO_PROVIDERS[{i}]"
        if not isinstance(item, dict) or set(item) != needed:
            raise ImproperlyConfigured(f"{where} needs exactly {sorted(needed)}")
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", str(item["id"])):
            raise ImproperlyConfigured(f"{where}: id may hold letters, digits, - and _")
        parts = urlsplit(str(item["server_url"]))
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ImproperlyConfigured(f"{where}: server_url must be an http(s) URL")
        secret = os.environ.get(str(item["secret_env"]), "")
        if not secret:
            raise ImproperlyConfigured(f"{where}: the variable {item['secret_env']} is empty")
        apps.append(
            {
                "provider_id": item["id"],
                "name": item["name"],
                "client_id": item["client_id"],
                "secret": secret,
                "settings": {"server_url": item["server_url"]},
            }
        )
    return apps


def _sso_origins(providers: dict[str, Any]) -> list[str]:
    """The origins of the providers' servers (where their login buttons lead)."""
    origins = []
    for app in providers.get("openid_connect", {}).get("APPS", []):
        parts = urlsplit(app["settings"]["server_url"])
        origins.append(f"{parts.scheme}://{parts.netloc}")
    return sorted(set(origins))


SOCIALACCOUNT_PROVIDERS = {"openid_connect": {"APPS": _sso_providers(), "OAUTH_PKCE_ENABLED": True}}
SOCIALACCOUNT_ADAPTER = "accounts.sso.SsoAccountAdapter"
ACCOUNT_ADAPTER = "accounts.sso.LocalAccountAdapter"
# A new identity signs in at once (no form of allauth's) when accounts/sso.py allows it.
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_LOGIN_ON_GET = False
SOCIALACCOUNT_EMAIL_VERIFICATION = "none"
SOCIALACCOUNT_STORE_TOKENS = False
ACCOUNT_EMAIL_VERIFICATION = "none"
ACCOUNT_LOGIN_METHODS = {"username", "email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "username*", "password1*", "password2*"]
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
# Sessions are read from the cache (every request reads one), written through to the
# database (a cache restart logs no one out): Django's cached_db, whose login writes the
# new session once (ideareview/sessions.py).
SESSION_ENGINE = "ideareview.sessions"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Sent on every response that does not set its own (the downloadable self-contained report
# carries a policy of its own). No 'unsafe-inline' and no 'unsafe-eval': templates keep
# styles and scripts in static/.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        # a single sign-on button's form is answered with a redirect to its provider
        "form-action " + " ".join(["'self'", *_sso_origins(SOCIALACCOUNT_PROVIDERS)]),
        "frame-ancestors 'none'",
    ]
)
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"
# Error reports (DEBUG pages, mails to ADMINS) also hide passwords inside URL settings such
# as CELERY_BROKER_URL, which Django's default filter shows because of their names.
DEFAULT_EXCEPTION_REPORTER_FILTER = "ideareview.redact.SafeExceptionReporterFilter"


def _caches() -> dict:
    """Login limits count here, so it must be shared by every process that serves logins:
    Redis when several machines serve (CACHE_URL=redis://...; REDIS_URL is read too), a
    file cache under var/ by default (shared by the processes of one machine)."""
    url = os.environ.get("CACHE_URL") or os.environ.get("REDIS_URL") or ""
    if not url:
        return {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    scheme = url.split("://", 1)[0]
    if scheme in {"redis", "rediss"}:
        # one redis-py client per pool, not one per operation (ideareview/cache.py)
        return {"BACKEND": "ideareview.cache.RedisCache", "LOCATION": url}
    if scheme == "file" and url.startswith("file:///"):
        return {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": url[len("file://") :],
        }
    if scheme == "locmem":
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    raise ImproperlyConfigured(
        f"CACHE_URL={url!r}: use redis://host:6379/N, file:///absolute/path or locmem://"
    )


CACHES = {"default": _caches()}

# Celery: a broker that needs no server by default (kombu's filesystem transport).
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
_BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("out", "processed", "control"):
        (_BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_BROKER_DIR / "out"),
        "data_folder_out": str(_BROKER_DIR / "out"),
        "processed_folder": str(_BROKER_DIR / "processed"),
        # broadcast/control messages; kombu's default is ./control in the working directory
        "control_folder": str(_BROKER_DIR / "control"),
        "store_processed": False,
    }
elif CELERY_BROKER_URL.split("://", 1)[0] not in {
    "redis",
    "rediss",
    "amqp",
    "amqps",
    "pyamqp",
    "memory",
}:
    raise ImproperlyConfigured(
        f"CELERY_BROKER_URL={CELERY_BROKER_URL!r}: use redis://, amqp:// or filesystem://"
    )
# The worker logs through LOGGING above (secrets masked) instead of its own handlers.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Job state and progress live in rows (JobRun), so results are not kept by Celery.
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A prefork pool process that dies is reported (WorkerLostError) after the pool waited
# this long for a result it may have sent just before; job state lives in rows, so the
# wait only delays marking its job lost (studies/jobs.py). Celery's default is 10 s.
CELERY_WORKER_LOST_WAIT = 2.0
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 3600)

# Reviewer time: gaps between a reviewer's events longer than this count as this long.
IDEAREVIEW_IDLE_CAP_SECONDS = env_int("IDEAREVIEW_IDLE_CAP_SECONDS", 300)
IDEAREVIEW_INVITATION_MAX_DAYS = env_int("IDEAREVIEW_INVITATION_MAX_DAYS", 90)
# Rationales the owner's progress page embeds per view for the near-duplicate flag (the
# rest wait for the next view or the report; each text is embedded once and kept).
QUALITY_EMBED_PER_VIEW = env_int("IDEAREVIEW_QUALITY_EMBED_PER_VIEW", 64)
# ... and a report build (it runs in the background; a study's distinct rationales).
QUALITY_EMBED_PER_REPORT = env_int("IDEAREVIEW_QUALITY_EMBED_PER_REPORT", 20000)
# The assignment solver's time limit (s).
IDEAREVIEW_ASSIGNMENT_TIME_LIMIT = env_int("IDEAREVIEW_ASSIGNMENT_TIME_LIMIT", 120)
# Draw the report's figures (matplotlib). Off: report.html keeps every table and says the
# figures were not drawn; for a server that should not spend that CPU, and for the test
# suite's report builds that read tables only (tests/conftest.py).
IDEAREVIEW_REPORT_FIGURES = env_bool("IDEAREVIEW_REPORT_FIGURES", True)
# The chromium that prints report.pdf (default: the first of chromium, chromium-browser,
# google-chrome on PATH).
IDEAREVIEW_CHROMIUM = os.environ.get("IDEAREVIEW_CHROMIUM", "")

# Celery beat (started by `make serve`): reminder mails once a day at this hour (UTC).
IDEAREVIEW_REMINDER_HOUR = env_int("IDEAREVIEW_REMINDER_HOUR", 9)
if not 0 <= IDEAREVIEW_REMINDER_HOUR <= 23:
    raise ImproperlyConfigured(f"IDEAREVIEW_REMINDER_HOUR={IDEAREVIEW_REMINDER_HOUR}: use 0-23")
# How often beat releases the places of platform participants idle past their study's
# abandonment time (each arrival also does, for its study).
IDEAREVIEW_PLATFORM_SWEEP_MINUTES = env_int("IDEAREVIEW_PLATFORM_SWEEP_MINUTES", 5)
if IDEAREVIEW_PLATFORM_SWEEP_MINUTES < 1:
    raise ImproperlyConfigured(
        f"IDEAREVIEW_PLATFORM_SWEEP_MINUTES={IDEAREVIEW_PLATFORM_SWEEP_MINUTES}: use 1 or more"
    )
CELERY_BEAT_SCHEDULE = {
    "send-reminders": {
        "task": "studies.tasks.send_reminders",
        "schedule": crontab(hour=IDEAREVIEW_REMINDER_HOUR, minute=0),
    },
    "release-idle-platform-places": {
        "task": "studies.tasks.release_idle_platform_places",
        "schedule": IDEAREVIEW_PLATFORM_SWEEP_MINUTES * 60.0,
    },
}
CELERY_TIMEZONE = TIME_ZONE
# Every beat (one per `make serve`, so one per machine) sends the schedule only while it
# holds the installation's beat lock (ideareview/beat.py); the others try to take it every
# BEAT_LOCK_POLL_SECONDS and so take over within that time when its holder dies.
CELERY_BEAT_SCHEDULER = "ideareview.beat:LockedScheduler"
BEAT_LOCK_POLL_SECONDS = env_int("IDEAREVIEW_BEAT_LOCK_POLL_SECONDS", 5)
if BEAT_LOCK_POLL_SECONDS < 1:
    raise ImproperlyConfigured("IDEAREVIEW_BEAT_LOCK_POLL_SECONDS must be at least 1")

# LLM judges: off until an OpenAI-compatible endpoint is configured.
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
OPENAI_MODEL = os.environ.get("OPENAI_MODEL", "")
# Which model names are reasoning models (a regular expression searched in the model
# name), for judges whose "reasoning" is auto: such a model is sent
# max_completion_tokens instead of max_tokens and no temperature, top_p or penalties,
# which reasoning models refuse. Empty: none is (docs/llm-endpoints.md).
LLM_REASONING_MODELS = os.environ.get(
    "IDEAREVIEW_LLM_REASONING_MODELS", r"^(?:openai/)?(?:o[1-9]|gpt-5(?!-chat))"
)
try:
    re.compile(LLM_REASONING_MODELS)
except re.error as exc:
    raise ImproperlyConfigured(
        f"IDEAREVIEW_LLM_REASONING_MODELS is not a regular expression: {exc}"
    ) from exc

# Batch mode (a judge run with {"batch": true}; docs/llm-endpoints.md): its calls cost
# LLM_BATCH_PRICE_FACTOR times the judge's prices (OpenAI's Batch API: half), and a
# pending batch is polled every LLM_BATCH_POLL_SECONDS.
LLM_BATCH_PRICE_FACTOR = env_float("IDEAREVIEW_LLM_BATCH_PRICE_FACTOR", 0.5)
if not 0 <= LLM_BATCH_PRICE_FACTOR <= 1:
    raise ImproperlyConfigured("IDEAREVIEW_LLM_BATCH_PRICE_FACTOR must be between 0 and 1")
LLM_BATCH_POLL_SECONDS = env_float("IDEAREVIEW_LLM_BATCH_POLL_SECONDS", 30.0)
if LLM_BATCH_POLL_SECONDS <= 0:
    raise ImproperlyConfigured("IDEAREVIEW_LLM_BATCH_POLL_SECONDS must be more than 0")

# Analysis defaults; the report records the values it used.
ANALYSIS_CONSISTENCY_SPLITS = env_int("IDEAREVIEW_CONSISTENCY_SPLITS", 1000)
ANALYSIS_SEED = env_int("IDEAREVIEW_ANALYSIS_SEED", 20240906)
ANALYSIS_MIXED_STARTS = env_int("IDEAREVIEW_MIXED_STARTS", 3)
ANALYSIS_MIXED_ENGINE = os.environ.get("IDEAREVIEW_MIXED_ENGINE", "auto")
if ANALYSIS_MIXED_ENGINE not in {"auto", "statsmodels", "sparse"}:
    raise ImproperlyConfigured(
        f"IDEAREVIEW_MIXED_ENGINE={ANALYSIS_MIXED_ENGINE!r}: use auto, statsmodels or sparse"
    )
# BLAS threads per report job (0: the library's default, one per core). One thread is
# the default: on a machine whose cores are busy, BLAS threads wait for each other and the
# dense factorisations of the models run several times slower (docs/threads.md).
ANALYSIS_BLAS_THREADS = env_int("IDEAREVIEW_BLAS_THREADS", 1)
# The sentence embedder (studies/embeddings.py): a folder holding its weights instead of the
# bundled package's, the BLAS threads one embedding batch may use (at least 1), and how
# many texts' vectors a process keeps so that a text embedded again is not encoded again
# (0: none; a vector is 1.5 KiB).
EMBEDDING_MODEL_DIR = os.environ.get("IDEAREVIEW_EMBEDDING_MODEL_DIR", "")
EMBEDDING_THREADS = env_int("IDEAREVIEW_EMBEDDING_THREADS", 1)
EMBEDDING_CACHE_SIZE = env_int("IDEAREVIEW_EMBEDDING_CACHE_SIZE", 4096)
if EMBEDDING_CACHE_SIZE < 0:
    raise ImproperlyConfigured(
        f"IDEAREVIEW_EMBEDDING_CACHE_SIZE={EMBEDDING_CACHE_SIZE}: use 0 (no cache) or more"
    )
if ANALYSIS_BLAS_THREADS < 0:
    raise ImproperlyConfigured(
        f"IDEAREVIEW_BLAS_THREADS={ANALYSIS_BLAS_THREADS}: use 0 (library default) or more"
    )

# Every log line passes a formatter that replaces the secret key, API keys and URL
# passwords (database, broker, cache) with "********", tracebacks included.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "redacted": {
            "()": "ideareview.redact.RedactingFormatter",
            "format": "[%(asctime)s %(levelname)s %(name)s] %(message)s",
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "redacted"}},
    "root": {"handlers": ["console"], "level": os.environ.get("DJANGO_LOG_LEVEL", "INFO")},
    "loggers": {"django": {"handlers": ["console"], "level": "INFO", "propagate": False}},
}

# Background jobs (studies/jobs.py). The worker that runs a job writes a heartbeat to its
# row every JOB_HEARTBEAT_SECONDS from a thread of its own, whatever the job is doing; a
# running job without one for JOB_LOST_AFTER_SECONDS is marked lost and can be retried.
# Review imports of more than IMPORT_JOB_MIN_ROWS rows run as a job instead of in the
# request. On Redis, a task whose worker died is delivered again after the visibility
# timeout; the job's lease keeps that second delivery from running it twice at once.
# Only a consuming worker moves such a message back to its queue, in a sweep it runs
# every BROKER_RESTORE_SECONDS; kombu's own default scans on every tenth 10 s tick, so
# without this a redelivery waited up to 100 s past the visibility timeout.
JOB_HEARTBEAT_SECONDS = env_int("IDEAREVIEW_JOB_HEARTBEAT_SECONDS", 15)
JOB_LOST_AFTER_SECONDS = env_int("IDEAREVIEW_JOB_LOST_AFTER_SECONDS", 120)
if not 0 < 2 * JOB_HEARTBEAT_SECONDS <= JOB_LOST_AFTER_SECONDS:
    raise ImproperlyConfigured(
        "IDEAREVIEW_JOB_HEARTBEAT_SECONDS must be positive and at most half of "
        "IDEAREVIEW_JOB_LOST_AFTER_SECONDS"
    )
IMPORT_JOB_MIN_ROWS = env_int("IDEAREVIEW_IMPORT_JOB_ROWS", 2000)
BROKER_RESTORE_SECONDS = env_int("IDEAREVIEW_BROKER_RESTORE_SECONDS", 10)
if BROKER_RESTORE_SECONDS < 1:
    raise ImproperlyConfigured("IDEAREVIEW_BROKER_RESTORE_SECONDS must be at least 1")
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **CELERY_BROKER_TRANSPORT_OPTIONS,
        "visibility_timeout": env_int("IDEAREVIEW_BROKER_VISIBILITY_TIMEOUT", 3600),
        "unacked_restore_interval": BROKER_RESTORE_SECONDS,
        "unacked_restore_throttle": 1,  # every sweep scans (one ZRANGE on the broker)
    }


# LLM endpoints (docs/llm-endpoints.md; llm/endpoints.py).
#
# Providers are the administrator's endpoints, each with the key it is paid with:
# IDEAREVIEW_LLM_PROVIDERS is a JSON list of objects {"name", "base_url", "key_env"
# (the environment variable holding its key), optionally "models" (the models judges may
# pick; empty: any) and "spend_cap" (the most all its calls may cost, in its price
# unit)}. A provider's key is sent only to its own scheme, host and port. Without that
# variable, OPENAI_BASE_URL (with OPENAI_API_KEY and OPENAI_MODEL) is the provider
# "default", and with DEBUG on (`make run`) the scripted test server on 127.0.0.1:8765 is
# the provider "local-test-server". A judge with no provider and no base URL uses
# "default". Researchers may also bring an endpoint with their own key, stored encrypted
# with ENDPOINT_KEY_SECRETS (IDEAREVIEW_ENDPOINT_KEY_SECRETS: comma-separated Fernet
# keys, the first encrypts, all decrypt; `manage.py endpoint_keys_rotate` re-encrypts
# under the first). Without it, one key is derived from SECRET_KEY.
def _llm_providers() -> list[dict[str, Any]]:
    raw = os.environ.get("IDEAREVIEW_LLM_PROVIDERS", "")
    if not raw.strip():
        found: list[dict[str, Any]] = []
        if OPENAI_BASE_URL:
            found.append(
                {
                    "name": "default",
                    "base_url": OPENAI_BASE_URL,
                    "key_env": "OPENAI_API_KEY",
                    "models": [OPENAI_MODEL] if OPENAI_MODEL else [],
                }
            )
        if DEBUG:
            found.append(
                {
                    "name": "local-test-server",
                    "base_url": "http://127.0.0.1:8765/v1",
                    "key_env": "IDEAREVIEW_TESTSERVER_KEY",
                }
            )
        raw = json.dumps(found)
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"IDEAREVIEW_LLM_PROVIDERS is not JSON: {exc}") from exc
    if not isinstance(value, list):
        raise ImproperlyConfigured("IDEAREVIEW_LLM_PROVIDERS must be a JSON list of objects")
    providers: list[dict[str, Any]] = []
    for i, item in enumerate(value):
        where = f"IDEAREVIEW_LLM_PROVIDERS[{i}]"
        if not isinstance(item, dict) or not {"name", "base_url", "key_env"} <= set(item):
            raise ImproperlyConfigured(f"{where} needs name, base_url and key_env")
        unknown = set(item) - {"name", "base_url", "key_env", "models", "spend_cap"}
        if unknown:
            raise ImproperlyConfigured(f"{where}: unknown fields {sorted(unknown)}")
        parts = urlsplit(str(item["base_url"]))
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ImproperlyConfigured(f"{where}: base_url must be an http(s) URL")
        models = item.get("models") or []
        if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
            raise ImproperlyConfigured(f"{where}: models must be a list of names")
        cap = item.get("spend_cap")
        if cap is not None and (not isinstance(cap, int | float | str) or float(cap) < 0):
            raise ImproperlyConfigured(f"{where}: spend_cap must be a number, 0 or more")
        providers.append(
            {
                "name": str(item["name"]),
                "base_url": str(item["base_url"]).rstrip("/"),
                "key_env": str(item["key_env"]),
                "models": models,
                "spend_cap": None if cap is None else str(cap),
            }
        )
    names = [p["name"] for p in providers]
    if len(set(names)) != len(names):
        raise ImproperlyConfigured("IDEAREVIEW_LLM_PROVIDERS: provider names must differ")
    return providers


LLM_PROVIDERS = _llm_providers()
ENDPOINT_KEY_SECRETS = env_list("IDEAREVIEW_ENDPOINT_KEY_SECRETS", [])
# Researchers' own endpoints must resolve to globally routable addresses unless the host
# and port are on the host allow-list (entries: host, host:port, host:*, *.domain,
# addresses or networks, e.g. "vllm.lab:8000,10.0.0.0/8:8000"; no port means the
# scheme's default); with IDEAREVIEW_LLM_ONLY_LISTED_HOSTS only listed ones are allowed.
# With DEBUG on, loopback is allowed too.
LLM_HOST_ALLOWLIST = env_list("IDEAREVIEW_LLM_HOST_ALLOWLIST", [])
LLM_ONLY_LISTED_HOSTS = env_bool("IDEAREVIEW_LLM_ONLY_LISTED_HOSTS", False)
