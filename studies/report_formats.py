"""The report's export formats: one list that the writer (`report_files.py`), the downloads
(`views/study.py`), the report page and the package (`package.py`) all read.

A built-in format is written by `report_files._write_files` itself; a new one brings a
`write` function (a pure writer from the report dict and the review frame to text or
bytes, e.g. in `studies/analysis/`), and is then written, listed in `report["files"]`
under its key, offered for download and put into the package with no other change. The
report's CSV tables are not formats: the report lists them itself (`files.csv`).

A text format (`text=True`) passes the pseudonym swap on its way into the package; a
binary one enters as it is, and must say it holds no idea ids (`ids_free=True`) unless
it is one of the built-in documents rendered from the report (the PDF).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

Writer = Callable[[dict[str, Any], pd.DataFrame], str | bytes]


@dataclass(frozen=True)
class ReportFormat:
    key: str
    """The key under `report["files"]` that names the file (None when it was not made)."""
    name: str
    """The file's name in the report's folder, and in the package under `report/`."""
    label: str
    """The download link's text."""
    text: bool
    """Text that may hold idea ids: the package swaps them for pseudonyms."""
    ids_free: bool = False
    """Declared free of idea ids: enters the package unchanged (binary formats)."""
    attachment: bool = True
    """Downloaded as a file (False: shown in the browser)."""
    write: Writer | None = None
    """A new format's writer; the built-in ones are written by `report_files`."""


REPORT_FORMATS: list[ReportFormat] = [
    ReportFormat("html", "report.html", "report.html", text=True, attachment=False),
    ReportFormat("json", "report.json", "report.json", text=True),
    ReportFormat("pdf", "report.pdf", "report.pdf", text=False),
    ReportFormat("package", "package.zip", "reproducibility package (zip)", text=False),
]
"""Every document a report has, in the order the report page offers them."""

TABLE_SUFFIX = ".csv"
"""The report's tables (`files.csv`): text, swapped in the package."""


def report_format(name: str) -> ReportFormat | None:
    """The format of the file `name`, or None (a table, or no report file)."""
    return next((f for f in REPORT_FORMATS if f.name == name), None)


def document_names() -> set[str]:
    return {f.name for f in REPORT_FORMATS}
