"""Error views: a request whose form data is too large gets the friendly 413 page instead
of a bare 400."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views import defaults

from .middleware import too_large


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if isinstance(exception, RequestDataTooBig):
        return too_large(request, size=None, limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    return defaults.bad_request(request, exception)
