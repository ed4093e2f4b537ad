"""Counts in user-facing text agree with their number ("1 idea", "3 ideas"), never the
"idea(s)" form: the pages, and the string literals of the views and services, which hold
the flash messages, job lines and mails. "(s)" after a space stays allowed: it means
seconds ("Timings (s)")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from studies.analysis.rounding import counted

ROOT = Path(__file__).resolve().parent.parent
WORD_S = re.compile(r"\w\(s\)")
TEMPLATE_DIRS = ("studies/templates", "judging/templates", "templates", "accounts/templates")
PYTHON_DIRS = ("studies/views", "studies/services", "judging/services", "accounts")
PYTHON_FILES = ("judging/views.py",)


def _python_files() -> list[Path]:
    files = [ROOT / f for f in PYTHON_FILES]
    for d in PYTHON_DIRS:
        files += [p for p in (ROOT / d).rglob("*.py") if "migrations" not in p.parts]
    return sorted(files)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants, which speak to developers, not users."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
        ):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _word_s_literals(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and WORD_S.search(node.value)
    ]


def test_no_template_writes_a_count_as_word_s():
    templates = [
        p for d in TEMPLATE_DIRS for p in (ROOT / d).rglob("*") if p.suffix in {".html", ".txt"}
    ]
    assert templates, "no templates found: the scan looks in the wrong place"
    bad = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()[:80]}"
        for p in templates
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if WORD_S.search(line)
    ]
    assert not bad, "write '1 idea' / '3 ideas' ({{ n|pluralize }}), not 'idea(s)':\n" + "\n".join(
        bad
    )


def test_no_view_or_service_string_writes_a_count_as_word_s():
    bad = [
        f"{p.relative_to(ROOT)}:{line}: {text.strip()[:80]}"
        for p in _python_files()
        for line, text in _word_s_literals(p.read_text(encoding="utf-8"))
    ]
    assert not bad, "write counted(n, 'idea'), not 'idea(s)':\n" + "\n".join(bad)


def test_the_scan_sees_f_string_parts_and_skips_docstrings_and_seconds():
    source = '"""Sends n mail(s)."""\nx = f"{n} idea(s) sent"\ny = "Timings (s)"\n'
    assert [line for line, _ in _word_s_literals(source)] == [2]


@pytest.mark.parametrize(
    ("n", "word", "plural", "expected"),
    [
        (1, "idea", None, "1 idea"),
        (0, "idea", None, "0 ideas"),
        (3, "idea", None, "3 ideas"),
        (1, "reply", "replies", "1 reply"),
        (2, "reply", "replies", "2 replies"),
        (2, "open review", None, "2 open reviews"),
    ],
)
def test_counted_puts_the_noun_in_the_number_of_the_count(n, word, plural, expected):
    assert counted(n, word, plural) == expected
