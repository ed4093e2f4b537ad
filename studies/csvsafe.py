"""The one way ideareview writes CSV: cells a spreadsheet would run as a formula are
neutralised (OWASP's CSV-injection rules).

A text cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading
`'`, which spreadsheets show as text and never evaluate. Numbers are left alone, whether
they arrive as numbers or as text (`-3`, `+2.5`, `-1e-3` stay numbers a spreadsheet can
sum). Every module that writes CSV uses `writer`, `dict_writer` or `frame_to_csv`; a test
scans the code for any other CSV writer.

No Django imports: the pure analysis code may use it too.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping
from typing import IO, Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(value: Any) -> Any:
    if not isinstance(value, str) or not value.startswith(FORMULA_START):
        return value
    if _NUMBER.fullmatch(value):
        return value
    return "'" + value


def safe_row(row: Iterable[Any]) -> list[Any]:
    return [safe_cell(v) for v in row]


class _SafeWriter:
    def __init__(self, inner: Any):
        self._inner = inner

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._inner.writerow(safe_row(row))

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def writer(f: IO[str], **kwargs: Any) -> _SafeWriter:
    """`csv.writer(f)` whose cells are neutralised."""
    return _SafeWriter(csv.writer(f, **kwargs))


class _SafeDictWriter(csv.DictWriter):
    def writeheader(self) -> Any:
        return self.writer.writerow(safe_row(self.fieldnames))

    def writerow(self, rowdict: Mapping[Any, Any]) -> Any:
        return super().writerow({k: safe_cell(v) for k, v in rowdict.items()})

    def writerows(self, rowdicts: Iterable[Mapping[Any, Any]]) -> None:
        # csv.DictWriter.writerows bypasses writerow
        for rowdict in rowdicts:
            self.writerow(rowdict)


def dict_writer(f: IO[str], fieldnames: list[str], **kwargs: Any) -> csv.DictWriter:
    """`csv.DictWriter(f, fieldnames)` whose cells (and header) are neutralised."""
    return _SafeDictWriter(f, fieldnames, **kwargs)


def frame_to_csv(frame: Any, path_or_buf: Any = None, **kwargs: Any) -> Any:
    """`DataFrame.to_csv` with text cells and column names neutralised; numeric columns
    are written exactly as pandas writes them."""
    safe = frame.copy(deep=False)
    for column in safe.columns:
        if _holds_text(safe[column].dtype):
            safe[column] = safe[column].map(safe_cell)
    safe.columns = [safe_cell(str(c)) for c in safe.columns]
    if _holds_text(safe.index.dtype):
        safe.index = safe.index.map(safe_cell)
    return safe.to_csv(path_or_buf, **kwargs)


def _holds_text(dtype: Any) -> bool:
    """Object, string and categorical columns can hold text; numbers, booleans and dates
    cannot, and are written exactly as pandas writes them."""
    from pandas import CategoricalDtype
    from pandas.api.types import is_object_dtype, is_string_dtype

    return is_object_dtype(dtype) or is_string_dtype(dtype) or isinstance(dtype, CategoricalDtype)


# --------------------------------------------------------------------------- reading

FIELD_LIMIT = 131_072
"""The longest cell an uploaded table may hold (the csv module's own default limit): no
name, email, id or review text is near it."""


class ReadProblem(ValueError):
    """An uploaded table or JSON that cannot be stored; the message names file, row and
    field."""


def stored_text_problem(text: str) -> str:
    """Why PostgreSQL cannot store this text ('' if it can): NUL is refused in text."""
    at = text.find("\x00")
    if at < 0:
        return ""
    return f"contains a NUL character (U+0000) at character {at + 1}, which cannot be stored"


def csv_rows(text: str, source: str) -> list[list[str]]:
    """The rows of CSV text; ReadProblem naming the file, row and field of a cell that is
    unreadable, longer than FIELD_LIMIT or holds a character the database refuses."""
    # The csv module's own limit error names neither row nor field: read with a limit
    # no cell can reach (the whole text), then check our own limit per cell.
    if csv.field_size_limit() < len(text) + 1:
        csv.field_size_limit(len(text) + 1)
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[list[str]] = []
    try:
        for row in reader:
            rows.append(row)
    except csv.Error as exc:
        raise ReadProblem(f"{source}, line {reader.line_num}: not readable CSV ({exc})") from None
    for n, row in enumerate(rows, start=1):
        for i, cell in enumerate(row, start=1):
            if len(cell) > FIELD_LIMIT:
                raise ReadProblem(
                    f"{source}, row {n}, field {i}: {len(cell):,} characters, over the limit "
                    f"of {FIELD_LIMIT:,}"
                )
            problem = stored_text_problem(cell)
            if problem:
                raise ReadProblem(f"{source}, row {n}, field {i}: {problem}")
    return rows


def json_text_problem(value: Any, where: str = "") -> str:
    """The first string (key or value) inside parsed JSON that the database cannot store,
    with its path ('' if none)."""
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            problem = stored_text_problem(item)
            if problem:
                return f"{path or 'the value'} {problem}"
        elif isinstance(item, dict):
            for k, v in item.items():
                key_problem = stored_text_problem(str(k))
                if key_problem:
                    return f"a key in {path or 'the object'} {key_problem}"
                stack.append((f"{path}.{k}" if path else str(k), v))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(item))
    return ""
