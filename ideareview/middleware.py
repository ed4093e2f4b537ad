"""Our middleware: the proxy's scheme header believed only from the proxy, the request
size limit, and the response headers Django's SecurityMiddleware does not set
(Content-Security-Policy and Permissions-Policy).

A dozen lines of our own rather than django-csp: one fixed policy from settings, no nonces
(templates carry no inline scripts or styles at all), no new dependency. A response that
sets its own policy keeps it (the self-contained report document does).
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


@functools.lru_cache(maxsize=8)
def _networks(proxies: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(ipaddress.ip_network(p, strict=False) for p in proxies)


def trusted_proxy(address: str) -> bool:
    """True when `address` is one of IDEAREVIEW_TRUSTED_PROXIES (an address or a network)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in _networks(tuple(settings.IDEAREVIEW_TRUSTED_PROXIES)))


def proxy_scheme_header(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """Drop the SECURE_PROXY_SSL_HEADER header (X-Forwarded-Proto) unless the request
    comes from a trusted proxy. Django believes that header from anyone, so a client that
    reached gunicorn's port directly over plain HTTP could claim HTTPS: no redirect to
    HTTPS, HSTS and https:// links on a plain connection. gunicorn already ignores the
    header from other addresses (forwarded_allow_ips), so without it the request's scheme
    is gunicorn's. First in MIDDLEWARE: SecurityMiddleware's redirect reads the scheme."""

    def middleware(request: HttpRequest) -> HttpResponse:
        header = settings.SECURE_PROXY_SSL_HEADER
        if header and not trusted_proxy(request.META.get("REMOTE_ADDR", "")):
            request.META.pop(header[0], None)
        return get_response(request)

    return middleware


def content_security_policy(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        response.headers.setdefault("Permissions-Policy", settings.PERMISSIONS_POLICY)
        return response

    return middleware


def request_size_limit(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """Refuse a request body over IDEAREVIEW_MAX_UPLOAD_BYTES before anything reads it
    (Django's own DATA_UPLOAD_MAX_MEMORY_SIZE covers form fields but not files)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > settings.IDEAREVIEW_MAX_UPLOAD_BYTES:
            return too_large(request, size=length, limit=settings.IDEAREVIEW_MAX_UPLOAD_BYTES)
        return get_response(request)

    return middleware


def too_large(request: HttpRequest, *, size: int | None, limit: int) -> HttpResponse:
    response = render(
        request,
        "413.html",
        {"size_mb": None if size is None else size / 2**20, "limit_mb": limit / 2**20},
        status=413,
    )
    # The unread body must not be taken for the next request on this connection.
    response["Connection"] = "close"
    return response
