"""Text a person typed must not carry control characters.

PostgreSQL refuses NUL in text and JSON (a 500 where a field error belongs), and the other
C0/C1 control characters are invisible, break CSV and JSON consumers and have no place in a
review. Tab, line feed and carriage return are ordinary typing and stay allowed.
"""

from __future__ import annotations

import re

CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def control_character_problem(text: str) -> str | None:
    """None, or a message saying which control character is where."""
    found = CONTROL.search(text)
    if found is None:
        return None
    return (
        f"contains an invisible control character (U+{ord(found.group()):04X}) at character "
        f"{found.start() + 1}; delete it (it often comes with text pasted from a PDF)"
    )
