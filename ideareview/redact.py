"""Secrets never reach a page or a log line.

The values come from settings (secret key, API key, database, broker and cache passwords),
and any `scheme://user:password@host` in a message loses its password, so a traceback that
quotes a connection URL is safe too.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import unquote, urlsplit

from django.views.debug import SafeExceptionReporterFilter as DjangoFilter

MASK = "********"
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)(?P<pw>[^@\s]+)(?=@)")


def _url_password(url: str) -> str:
    try:
        password = urlsplit(url).password
    except ValueError:
        return ""
    return unquote(password) if password else ""


def secret_values() -> list[str]:
    """The configured secrets, longest first (so no secret is left half-masked)."""
    from django.conf import settings

    values = [
        settings.SECRET_KEY,
        settings.OPENAI_API_KEY,
        settings.S3_SECRET_ACCESS_KEY,
        str(settings.DATABASES["default"].get("PASSWORD") or ""),
        _url_password(str(settings.CELERY_BROKER_URL)),
    ]
    for cache in settings.CACHES.values():
        location = cache.get("LOCATION")
        if isinstance(location, str):
            values.append(_url_password(location))
    # Too short a value would mask ordinary words; real secrets are longer.
    return sorted({v for v in values if len(v) >= 4}, key=len, reverse=True)


def redact(text: str) -> str:
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
    for value in secret_values():
        text = text.replace(value, MASK)
    return text


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class SafeExceptionReporterFilter(DjangoFilter):
    """Django's filter, and URL-valued settings lose their passwords."""

    def cleanse_setting(self, key: Any, value: Any) -> Any:
        cleansed = super().cleanse_setting(key, value)
        if isinstance(cleansed, str):
            return redact(cleansed)
        return cleansed
