"""`json.loads` with a nesting limit, for every JSON text that comes from outside.

Python's decoder recurses once per level: a few thousand `[` exhaust the stack (a 500 in
a view, a crash in a worker). The depth is measured first, in one pass without recursion,
and a text nested deeper than `max_depth` is refused with `json.JSONDecodeError`, so the
callers' existing handling of bad JSON names the file, line or field.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


def nesting_depth(text: str, stop_at: int | None = None) -> tuple[int, int]:
    """The deepest nesting of arrays and objects (string contents do not count) and the
    position where it is first reached; counting stops once `stop_at` is reached."""
    depth = deepest = where = 0
    for match in _BRACKET.finditer(_STRING.sub(_blank, text)):
        if match.group() in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, match.start()
                if stop_at is not None and deepest >= stop_at:
                    break
        else:
            depth -= 1
    return deepest, where


def _blank(match: re.Match[str]) -> str:
    # Keeps positions: the error's line and column still point into the original text.
    return " " * len(match.group())


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH, **kwargs: Any) -> Any:
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8")
    deepest, where = nesting_depth(text, stop_at=max_depth + 1)
    if deepest > max_depth:
        raise json.JSONDecodeError(f"nested deeper than {max_depth} levels", text, where)
    return json.loads(text, **kwargs)
