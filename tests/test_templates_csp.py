"""Templates are ready for a strict Content-Security-Policy: no inline styles or handlers.

A policy without 'unsafe-inline' refuses `<style>` elements, `style=` attributes and
`on…=` handler attributes; styles and scripts live in static/. The downloadable report
document is the one exception: a self-contained file carries its own CSS.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE_DIRS = [ROOT / "templates", ROOT / "studies" / "templates", ROOT / "judging" / "templates"]
EXEMPT = {"report_document.html"}
FORBIDDEN = {
    "<style> element": re.compile(r"<style", re.I),
    "style attribute": re.compile(r"\sstyle=", re.I),
    "inline handler": re.compile(r"\son[a-z]+=", re.I),
    "inline script": re.compile(r"<script(?![^>]*\ssrc=)[^>]*>", re.I),
    "javascript: URL": re.compile(r"javascript:", re.I),
}


def templates() -> list[Path]:
    found = [p for d in TEMPLATE_DIRS for p in d.rglob("*") if p.is_file()]
    return sorted(p for p in found if p.name not in EXEMPT)


def test_the_scan_sees_every_app_template():
    names = {p.name for p in templates()}
    assert {"base.html", "review.html", "run_detail.html", "leakage.html"} <= names
    assert len(names) > 30


def test_no_template_carries_inline_styles_handlers_or_scripts():
    problems = []
    for path in templates():
        text = path.read_text()
        for what, pattern in FORBIDDEN.items():
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not problems, "\n".join(problems)


def test_htmx_is_told_not_to_inject_its_indicator_styles():
    base = (ROOT / "templates" / "base.html").read_text()
    assert '"includeIndicatorStyles": false' in base
    css = (ROOT / "static" / "css" / "app.css").read_text()
    assert ".htmx-indicator" in css
