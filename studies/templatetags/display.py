"""Filters that put untrusted or generated markup on a page safely.

Idea text is Markdown written by idea authors (or a model): it is rendered with raw HTML
off and then cleaned by nh3, so no script, handler, frame, style or `javascript:` URL
survives. Plots are matplotlib SVG whose inline `style` attributes and `<style>` element a strict
Content-Security-Policy would block; the same properties as SVG presentation attributes
are allowed and draw the same figure.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import nh3
from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

register = template.Library()

# Single line breaks are kept: most proposals are plain text laid out line by line.
_MD = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable("table")
# Images are left out: a remote image in an idea would call out to its author's server
# each time a reviewer opens it.
_TAGS = nh3.ALLOWED_TAGS - {"img"}
_SVG = re.compile(r"<svg\b.*?</svg>", re.S)
_STYLE = re.compile(r"<style\b.*?</style>", re.S | re.I)
_STYLE_ATTR = re.compile(r'(?<=\s)style="([^"]*)"')


def markdown_clean(text: str) -> str:
    """Markdown to HTML that keeps structure (headings, lists, emphasis, code, links) only."""
    html = _MD.render(text or "")
    return nh3.clean(
        html,
        tags=_TAGS,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


# The same idea is shown to each of its reviewers, on every visit, in the same few
# sections: its HTML is kept per text. The key is the whole text (compared in full, not
# by a digest), so an edited text is rendered anew and never meets another text's HTML;
# the value is markdown_clean's output, which depends on the text alone.
_markdown_cached = functools.lru_cache(maxsize=1024)(markdown_clean)


@register.filter
def markdown(text: Any) -> SafeString:
    return mark_safe(_markdown_cached(str(text or "")))  # noqa: S308 - cleaned by nh3


@register.filter
def proposal_sections(text: Any) -> list[tuple[str, str]]:
    """A proposal's (heading, body) sections, as the reviewer's page splits them."""
    from studies.services.reviews import idea_sections

    return idea_sections(str(text or ""))


def svg_without_css(svg: str) -> str:
    """The same drawing with each `style="a: b; c: d"` as presentation attributes
    (`a="b" c="d"`), which a policy without 'unsafe-inline' allows; matplotlib's own
    stylesheet (`*{stroke-linejoin: round; stroke-linecap: butt}`) moves onto the root."""

    def attrs(match: re.Match[str]) -> str:
        pairs = [d.split(":", 1) for d in match.group(1).split(";") if ":" in d]
        return " ".join(f'{k.strip()}="{escape(v.strip())}"' for k, v in pairs)

    out = _STYLE.sub("", svg)
    out = _STYLE_ATTR.sub(attrs, out)
    return out.replace("<svg ", '<svg stroke-linejoin="round" stroke-linecap="butt" ', 1)


@register.filter
def csp_svg(svg: Any) -> SafeString:
    """One of our own SVG plots, inline, without inline CSS."""
    return mark_safe(svg_without_css(str(svg or "")))  # noqa: S308 - our own plot output


@register.filter
def report_body(html: Any) -> SafeString:
    """The report document's body for the app page: its styles come from
    static/css/report.css, its plots lose their inline CSS."""
    body = _STYLE.sub("", str(html or ""))
    return mark_safe(_SVG.sub(lambda m: svg_without_css(m.group(0)), body))  # noqa: S308
