"""Our middleware: the request size limit, and the response headers Django's
SecurityMiddleware does not set (Content-Security-Policy and Permissions-Policy).

A dozen lines of our own rather than django-csp: one fixed policy from settings, no nonces
(templates carry no inline scripts or styles at all), no new dependency. A response that
sets its own policy keeps it (the self-contained report document does).
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


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
