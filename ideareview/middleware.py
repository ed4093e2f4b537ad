"""Response headers Django's SecurityMiddleware does not set: Content-Security-Policy and
Permissions-Policy.

A dozen lines of our own rather than django-csp: one fixed policy from settings, no nonces
(templates carry no inline scripts or styles at all), no new dependency. A response that
sets its own policy keeps it (the self-contained report document does).
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


def content_security_policy(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        response.headers.setdefault("Permissions-Policy", settings.PERMISSIONS_POLICY)
        return response

    return middleware
