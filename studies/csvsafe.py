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
