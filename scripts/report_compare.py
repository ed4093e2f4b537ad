"""Compare two builds of a study's report, file by file and package member by member.

    python scripts/report_compare.py BEFORE_DIR AFTER_DIR

Each folder is what `manage.py study_report SLUG --out DIR` wrote. What a rebuild changes
by itself is set aside: timings, timestamps (`generated_at`, the report's version time,
the audit head's time), the BLAS thread counts, the PDF's creation date and the zip's
archive times. Everything else must be equal. Exit status 0 when the builds agree, 1 with
one line per difference otherwise. Used to show that a refactoring left the report and
the package unchanged.
"""

from __future__ import annotations

import io
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

VOLATILE_KEYS = {"timings", "timing_seconds", "fit_seconds", "generated_at", "runtime"}
# Every build appends its own event to the study's audit log, so the log's length and head
# move by one per build; whether the chain verifies is compared.
AUDIT_MOVES = {"entries", "head"}
VOLATILE_TEXT = [
    # ISO timestamps and the report's own clock readings
    re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?"),
    re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)?( UTC)?"),
    re.compile(r"\d{8}T\d{6}\d*"),
    re.compile(r"(built|took|in) [0-9.]+ ?s\b"),
    re.compile(r"/(CreationDate|ModDate) ?\(D:[^)]*\)"),
    # matplotlib's random ids of clip paths, markers and images in the SVG plots
    re.compile(r"\b(image|p|m)[0-9a-f]{10}\b"),
    # a mixed model's fitting time in its note
    re.compile(r"; [0-9.]+ s\.</p>"),
    re.compile(r"Timings \(s\):[^<]*"),
    # the audit head the HTML states (see AUDIT_MOVES)
    re.compile(r"\d+ entries, the chain verifies; head <code>[0-9a-f]{64}"),
]


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        audit = {"ok", "head", "entries"} <= set(value)
        return {
            k: _strip(v)
            for k, v in value.items()
            if k not in VOLATILE_KEYS and not (audit and k in AUDIT_MOVES)
        }
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _text(body: str) -> str:
    for pattern in VOLATILE_TEXT:
        body = pattern.sub("<time>", body)
    return body


def normalised(name: str, body: bytes) -> Any:
    """The content of one file with what a rebuild changes by itself set aside."""
    if name.endswith(".json"):
        data = _strip(json.loads(body))
        if name.endswith("manifest.json"):
            data.pop("files", None)  # hashes of members compared one by one below
        return data
    if name.endswith(".pdf"):
        return _text(body.decode("latin-1"))
    if name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(body)) as z:
            return {m: normalised(m, z.read(m)) for m in sorted(z.namelist())}
    try:
        return _text(body.decode())
    except UnicodeDecodeError:
        return body


def _pages(name: str, body: Any) -> Any:
    """chromium's PDF is not byte-stable between runs: a PDF is compared by page count."""
    if name.endswith(".pdf"):
        pages = re.findall(r"/Type\s*/Page(?![s\w])", body)
        return f"{len(pages)} pages"
    return body


def differences(before: Path, after: Path) -> list[str]:
    out = []
    names_b = {p.name for p in before.iterdir() if p.is_file()}
    names_a = {p.name for p in after.iterdir() if p.is_file()}
    for name in sorted(names_b ^ names_a):
        out.append(f"{name}: only in {'before' if name in names_b else 'after'}")
    for name in sorted(names_b & names_a):
        b = normalised(name, (before / name).read_bytes())
        a = normalised(name, (after / name).read_bytes())
        if name.endswith(".zip"):
            b = {m: _pages(m, v) for m, v in b.items()}
            a = {m: _pages(m, v) for m, v in a.items()}
            for member in sorted(set(b) ^ set(a)):
                out.append(f"{name}:{member}: only in {'before' if member in b else 'after'}")
            out += [f"{name}:{m}: differs" for m in sorted(set(b) & set(a)) if b[m] != a[m]]
        elif _pages(name, b) != _pages(name, a):
            out.append(f"{name}: differs")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    found = differences(Path(argv[0]), Path(argv[1]))
    for line in found:
        print(line)
    print("identical" if not found else f"{len(found)} difference(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
