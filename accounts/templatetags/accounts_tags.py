"""The log-in page's extras: single sign-on buttons and the sign-up link."""

from __future__ import annotations

from django import template
from django.conf import settings

from ..sso import sso_providers as configured_providers

register = template.Library()


@register.simple_tag
def sso_providers() -> list[dict[str, str]]:
    return configured_providers()


@register.simple_tag
def signup_open() -> bool:
    return bool(settings.IDEAREVIEW_SIGNUP)
