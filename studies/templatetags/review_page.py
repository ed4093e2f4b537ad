"""The review page's answer scales.

A scale's radio buttons (one per level, up to a hundred and one) were most of the page's
template work, and they are the same on every visit: the form's levels and anchors, with
the reviewer's answer checked. They are rendered by their own template
(studies/reviewer/_scale_levels.html) and kept per (key, levels, answer), which is all
that template reads; only an answer that is one of the levels, or none, is kept, so
what the cache holds is bounded by the forms themselves.
"""

from __future__ import annotations

import functools
from typing import Any

from django import template
from django.template.loader import get_template
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

LEVELS_TEMPLATE = "studies/reviewer/_scale_levels.html"


def levels_html(key: str, levels: Any, checked: Any) -> SafeString:
    """A scale's radio buttons: one per (level, anchor) of `levels`, `checked` ticked."""
    html = get_template(LEVELS_TEMPLATE).render({"key": key, "levels": levels, "checked": checked})
    return mark_safe(html)  # noqa: S308 - a template's output, escaped by the template


_levels_cached = functools.lru_cache(maxsize=1024)(levels_html)


@register.simple_tag
def scale_levels(scale: dict[str, Any]) -> SafeString:
    """The radio buttons of one scale of the review page's context (`key`, `levels` as
    (level, anchor) pairs, `value` the answer shown)."""
    key, levels, checked = scale["key"], scale["levels"], scale["value"]
    if (
        isinstance(key, str)
        and isinstance(levels, tuple)
        and isinstance(checked, str)
        and (checked == "" or any(checked == level for level, _ in levels))
    ):
        return _levels_cached(key, levels, checked)
    return levels_html(key, levels, checked)
