"""Small request helpers shared by the view modules."""

from __future__ import annotations

from django.http import HttpRequest


def is_htmx(request: HttpRequest) -> bool:
    """True for a request htmx sent (django-htmx's middleware sets `request.htmx`)."""
    return bool(getattr(request, "htmx", False))
