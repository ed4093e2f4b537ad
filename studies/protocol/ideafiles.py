"""Reading a batch of ideas: CSV, JSONL, Markdown files (a folder or a zip), or one paste.

The owner of a study brings ideas from wherever they were written: a spreadsheet export,
a JSONL dump from an ideation agent, a folder of Markdown files. Every way in ends in the
same :class:`IdeaBatch`: the records that can be imported, and a problem for every file
and row that cannot, worded so the owner knows which line to fix. Row-level trouble never
raises, so the caller can offer "import the valid rows"; a file that cannot be read at all
(not UTF-8, not a zip, a zip that tries to write outside its folder) is one problem for
the whole file.

Pure Python: no Django imports.
"""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from studies.protocol.template import (
    SECTION_KEYS,
    SECTIONS,
    ParsedProposal,
    match_heading,
    parse_sections,
    render_sections,
)

from . import jsonsafe

__all__ = [
    "ERROR",
    "WARNING",
    "FrontMatterError",
    "IdeaBatch",
    "IdeaRecord",
    "ImportLimits",
    "ImportProblem",
    "parse_front_matter",
    "read_batch",
    "read_path",
    "read_pasted",
    "split_conditions",
]

ERROR = "error"
WARNING = "warning"

MARKDOWN_SUFFIXES = (".md", ".markdown", ".txt")

# Column (or front-matter key) spellings -> field. Compared after lowercasing and
# turning spaces and hyphens into underscores.
_FIELD_ALIASES: dict[str, str] = {
    "external_id": "external_id",
    "id": "external_id",
    "idea_id": "external_id",
    "title": "title",
    "topic": "topic",
    "condition": "conditions",
    "conditions": "conditions",
    "text": "text",
    "proposal": "text",
    "body": "text",
    "author_institution": "institution",
    "institution": "institution",
    "affiliation": "institution",
    "author_contact": "author_contact",
    "author_email": "author_contact",
    "contact": "author_contact",
}


@dataclass(frozen=True)
class ImportLimits:
    """Bounds on what one upload may hold; a zip past them is refused whole."""

    max_files: int = 2000
    # One Markdown file holds one idea: at most max_idea_chars characters of up to four
    # UTF-8 bytes each, and its front matter.
    max_file_bytes: int = 4 * 60_000 + 16_384
    max_total_bytes: int = 100_000_000
    # One proposal's text; the protocol's template runs to a few thousand words.
    max_idea_chars: int = 60_000
    # How many times a zip member may expand: prose compresses three to five times, a
    # zip bomb thousands. Checked on the archive's directory, before anything is read.
    max_ratio: int = 100


@dataclass(frozen=True)
class ImportProblem:
    """Why a file or row was not imported (``error``) or needs a look (``warning``).

    ``row`` is the spreadsheet row for CSV (the header is row 1), the line for JSONL and
    Markdown front matter, and None for the file as a whole.
    """

    source: str
    message: str
    row: int | None = None
    level: str = ERROR

    @property
    def where(self) -> str:
        if self.row is None:
            return self.source
        unit = "row" if self.source.lower().endswith(".csv") else "line"
        return f"{self.source}, {unit} {self.row}"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True)
class IdeaRecord:
    """One idea ready to import. ``text`` is the proposal as written (or as rendered from
    section columns); ``parsed`` is its split into template sections."""

    external_id: str
    title: str
    topic: str
    conditions: tuple[str, ...]
    text: str
    institution: str
    source: str
    row: int | None
    parsed: ParsedProposal = field(repr=False, compare=False)
    # Whom to pay for the idea (optional; never shown to reviewers).
    author_contact: str = ""


@dataclass
class IdeaBatch:
    records: list[IdeaRecord] = field(default_factory=list)
    problems: list[ImportProblem] = field(default_factory=list)

    @property
    def errors(self) -> list[ImportProblem]:
        return [p for p in self.problems if p.level == ERROR]

    @property
    def warnings(self) -> list[ImportProblem]:
        return [p for p in self.problems if p.level == WARNING]

    @property
    def ok(self) -> bool:
        """Nothing was refused: importing the batch imports everything in it."""
        return not self.errors

    def extend(self, other: IdeaBatch) -> None:
        self.records.extend(other.records)
        self.problems.extend(other.problems)


class FrontMatterError(ValueError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


# --- shared row handling -------------------------------------------------------------------


def split_conditions(value: Any) -> tuple[str, ...]:
    """``"Human; AI"``, ``"[Human, AI]"`` or a list -> ``("Human", "AI")``."""
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        parts = [str(v) for v in value]
    else:
        text = str(value).strip()
        if text.startswith("[") and text.endswith("]"):
            parts = text[1:-1].split(",")
        else:
            parts = text.split(";")
    cleaned = (p.strip().strip("\"'").strip() for p in parts)
    return tuple(dict.fromkeys(p for p in cleaned if p))


def _column_key(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip().lower())


def _section_for_column(name: str) -> str | None:
    key = _column_key(name)
    if key in SECTION_KEYS:
        return key
    hit = match_heading(name)
    return hit[0] if hit and not hit[1] and hit[0] != "title" else None


class _Context:
    """What the batch knows while it reads: the study's sets and the ids seen so far."""

    def __init__(
        self,
        known_topics: Iterable[str] | None,
        known_conditions: Iterable[str] | None,
        existing_ids: Iterable[str],
        max_idea_chars: int = ImportLimits.max_idea_chars,
    ) -> None:
        self.max_idea_chars = max_idea_chars
        self.topics = _canonical_map(known_topics)
        self.conditions = _canonical_map(known_conditions)
        self.existing = {str(i) for i in existing_ids}
        self.seen: dict[str, str] = {}  # external id -> where it was first seen

    @staticmethod
    def resolve(value: str, known: dict[str, str] | None) -> str | None:
        """The study's spelling of ``value`` (matched ignoring case); None if unknown."""
        if known is None:
            return value
        return known.get(value.casefold())


def _canonical_map(values: Iterable[str] | None) -> dict[str, str] | None:
    if values is None:
        return None
    return {str(v).casefold(): str(v) for v in values}


def _known_list(known: dict[str, str]) -> str:
    return ", ".join(sorted(known.values())) or "none defined"


def _build_record(
    fields: Mapping[str, Any],
    sections: Mapping[str, str],
    *,
    source: str,
    row: int | None,
    ctx: _Context,
    batch: IdeaBatch,
) -> None:
    """Validate one idea; append a record or the problems that stop it."""
    errors: list[str] = []

    def err(msg: str) -> None:
        errors.append(msg)

    external_id = str(fields.get("external_id") or "").strip()
    text = str(fields.get("text") or "")
    filled = {k: str(v).strip() for k, v in sections.items() if v is not None and str(v).strip()}
    if text.strip() and filled:
        batch.problems.append(
            ImportProblem(
                source, "both a text and section columns: the text was used", row, WARNING
            )
        )
    elif not text.strip() and filled:
        title_field = str(fields.get("title") or "").strip()
        if title_field and "title" not in filled:
            filled["title"] = title_field
        text = render_sections(filled)
    text = text.replace("\r\n", "\n").strip()
    if len(text) > ctx.max_idea_chars:
        which = f"idea '{external_id}'" if external_id else "the idea"
        err(
            f"{which} is {len(text):,} characters long, more than the limit of "
            f"{ctx.max_idea_chars:,} per idea"
        )

    if not external_id:
        err("missing external id (column external_id, id or idea_id)")
    elif external_id in ctx.existing:
        err(f"external id '{external_id}' already exists in this study")
    elif external_id in ctx.seen:
        err(f"duplicate external id '{external_id}' (first at {ctx.seen[external_id]})")

    topic_raw = str(fields.get("topic") or "").strip()
    topic = ""
    if not topic_raw:
        err("missing topic")
    else:
        resolved = ctx.resolve(topic_raw, ctx.topics)
        if resolved is None:
            assert ctx.topics is not None
            err(f"unknown topic '{topic_raw}' (known: {_known_list(ctx.topics)})")
        else:
            topic = resolved

    conditions_raw = split_conditions(fields.get("conditions"))
    conditions: list[str] = []
    if not conditions_raw:
        err("missing condition")
    for c in conditions_raw:
        resolved = ctx.resolve(c, ctx.conditions)
        if resolved is None:
            assert ctx.conditions is not None
            err(f"unknown condition '{c}' (known: {_known_list(ctx.conditions)})")
        elif resolved not in conditions:
            conditions.append(resolved)

    parsed = parse_sections(text)
    if not text or not any(v.strip() for v in parsed.sections.values()) and not parsed.preamble:
        err("empty proposal")

    title = str(fields.get("title") or "").strip() or parsed.sections.get("title", "").strip()
    title = title.splitlines()[0].strip() if title else ""

    if errors:
        for msg in errors:
            batch.problems.append(ImportProblem(source, msg, row, ERROR))
        # An id that failed for another reason still counts as taken in this batch.
        if external_id and external_id not in ctx.seen:
            ctx.seen[external_id] = _where(source, row)
        return
    ctx.seen[external_id] = _where(source, row)
    batch.records.append(
        IdeaRecord(
            external_id=external_id,
            title=title,
            topic=topic,
            conditions=tuple(conditions),
            text=text,
            institution=str(fields.get("institution") or "").strip(),
            author_contact=str(fields.get("author_contact") or "").strip(),
            source=source,
            row=row,
            parsed=parsed,
        )
    )


def _where(source: str, row: int | None) -> str:
    return ImportProblem(source, "", row).where


def _split_fields(
    raw: Mapping[str, Any], source: str, row: int | None, batch: IdeaBatch, warned: set[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    fields: dict[str, Any] = {}
    sections: dict[str, str] = {}
    for name, value in raw.items():
        if name is None:
            continue
        if name == "sections" and isinstance(value, Mapping):
            for k, v in value.items():
                key = _section_for_column(str(k)) or (
                    "title" if _column_key(str(k)) == "title" else None
                )
                if key:
                    sections[key] = "" if v is None else str(v)
                elif str(k) not in warned:
                    warned.add(str(k))
                    batch.problems.append(
                        ImportProblem(source, f"unknown section '{k}' ignored", row, WARNING)
                    )
            continue
        key = _FIELD_ALIASES.get(_column_key(str(name)))
        if key:
            fields[key] = value
            continue
        section = _section_for_column(str(name))
        if section:
            sections[section] = "" if value is None else str(value)
            continue
        if str(name) not in warned:
            warned.add(str(name))
            batch.problems.append(ImportProblem(source, f"column '{name}' ignored", None, WARNING))
    return fields, sections


# --- decoding ------------------------------------------------------------------------------


def _decode(data: bytes, source: str, batch: IdeaBatch) -> str | None:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        batch.problems.append(
            ImportProblem(
                source,
                f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                "save it as UTF-8 and upload again",
            )
        )
        return None
    if "\x00" in text:
        batch.problems.append(ImportProblem(source, "binary file (contains NUL bytes)"))
        return None
    return text


# --- CSV and JSONL -------------------------------------------------------------------------


def _read_csv(text: str, source: str, ctx: _Context, batch: IdeaBatch) -> None:
    # The csv module refuses cells past its own limit (128 KiB) with a message that names
    # neither the idea nor our limit; no cell can be longer than the file, and the idea's
    # length is checked against ours with a message that does. The limit only ever rises.
    if csv.field_size_limit() < len(text) + 1:
        csv.field_size_limit(len(text) + 1)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames or []
    except csv.Error as exc:
        batch.problems.append(ImportProblem(source, f"not a readable CSV file: {exc}"))
        return
    if not header:
        batch.problems.append(ImportProblem(source, "empty file: no header row"))
        return
    keys = {_FIELD_ALIASES.get(_column_key(h)) for h in header}
    has_sections = any(_section_for_column(h) for h in header)
    if "text" not in keys and not has_sections:
        batch.problems.append(
            ImportProblem(
                source,
                "no proposal column: add 'text' or one column per section "
                f"({', '.join(s.heading for s in SECTIONS[1:])})",
            )
        )
        return
    warned: set[str] = set()
    rows = 0
    try:
        for record in reader:
            rows += 1
            row = rows + 1  # spreadsheet numbering: the header is row 1
            if None in record:
                batch.problems.append(
                    ImportProblem(source, "more cells than header columns", row, ERROR)
                )
                continue
            if all(not (v or "").strip() for v in record.values()):
                continue
            fields, sections = _split_fields(record, source, row, batch, warned)
            _build_record(fields, sections, source=source, row=row, ctx=ctx, batch=batch)
    except csv.Error as exc:
        batch.problems.append(ImportProblem(source, f"CSV error: {exc}", rows + 2))


def _read_jsonl(text: str, source: str, ctx: _Context, batch: IdeaBatch) -> None:
    warned: set[str] = set()
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = jsonsafe.loads(line)
        except json.JSONDecodeError as exc:
            batch.problems.append(ImportProblem(source, f"not valid JSON: {exc.msg}", number))
            continue
        if not isinstance(obj, dict):
            batch.problems.append(ImportProblem(source, "each line must be a JSON object", number))
            continue
        fields, sections = _split_fields(obj, source, number, batch, warned)
        _build_record(fields, sections, source=source, row=number, ctx=ctx, batch=batch)


# --- Markdown with front matter ------------------------------------------------------------

_FM_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_\-]*)\s*:(.*)$")


def parse_front_matter(text: str) -> tuple[dict[str, str], str, int]:
    """Split ``---``-fenced ``key: value`` lines from the body.

    Returns (fields, body, line where the body starts). A file without a leading ``---``
    has no front matter. Deliberately not YAML: one ``key: value`` per line, values taken
    as text (matching quotes removed), ``#`` comments and blank lines allowed; anything
    else is an error naming its line, so a typo cannot silently change a field.
    """
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text, 1
    fields: dict[str, str] = {}
    for i in range(1, len(lines)):
        raw = lines[i].rstrip("\r")
        stripped = raw.strip()
        number = i + 1
        if stripped == "---":
            return fields, "\n".join(lines[i + 1 :]), number + 1
        if not stripped or stripped.startswith("#"):
            continue
        if raw[:1].isspace():
            raise FrontMatterError(number, "indented lines (nested values) are not supported")
        m = _FM_KEY.match(stripped)
        if not m:
            raise FrontMatterError(number, f"expected 'key: value', got {stripped[:40]!r}")
        key, value = m.group(1).lower(), m.group(2).strip()
        if key in fields:
            raise FrontMatterError(number, f"'{key}' given twice")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        fields[key] = value
    raise FrontMatterError(1, "front matter opened with '---' is never closed")


def _read_markdown(
    text: str, source: str, ctx: _Context, batch: IdeaBatch, default_id: str
) -> None:
    try:
        meta, body, _ = parse_front_matter(text)
    except FrontMatterError as exc:
        batch.problems.append(ImportProblem(source, f"front matter: {exc.message}", exc.line))
        return
    warned: set[str] = set()
    fields, _sections = _split_fields(meta, source, None, batch, warned)
    fields.setdefault("external_id", default_id)
    fields["text"] = body
    _build_record(fields, {}, source=source, row=None, ctx=ctx, batch=batch)


# --- zip and folders -----------------------------------------------------------------------


def _unsafe_member(info: zipfile.ZipInfo) -> str | None:
    name = info.filename
    if "\\" in name:
        return "backslash in path"
    path = PurePosixPath(name)
    if path.is_absolute() or re.match(r"^[A-Za-z]:", name):
        return "absolute path"
    if ".." in path.parts:
        return "path leaves the archive folder"
    mode = (info.external_attr >> 16) & 0o170000
    if mode == 0o120000:
        return "symbolic link"
    return None


def _zip_member_refused(infos: list[zipfile.ZipInfo], limits: ImportLimits) -> str:
    """Why the archive is refused whole by its directory alone ('' if it is not): a
    member that expands more than max_ratio times, or a Markdown member larger than an
    idea may be."""
    for info in infos:
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > 4096 and ratio > limits.max_ratio:
            return (
                f"'{info.filename}' expands {ratio:,.0f} times ({info.compress_size:,} to "
                f"{info.file_size:,} bytes), more than the limit of {limits.max_ratio}"
            )
    return ""


def _skipped_name(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return any(p.startswith(".") or p == "__MACOSX" for p in parts)


def _read_zip(
    data: bytes, source: str, ctx: _Context, batch: IdeaBatch, limits: ImportLimits
) -> None:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        batch.problems.append(ImportProblem(source, "not a valid zip archive"))
        return
    with archive:
        infos = [i for i in archive.infolist() if not i.is_dir()]
        for info in infos:
            why = _unsafe_member(info)
            if why:
                batch.problems.append(
                    ImportProblem(
                        source, f"refused: unsafe entry '{info.filename}' ({why}); nothing read"
                    )
                )
                return
        if len(infos) > limits.max_files:
            batch.problems.append(
                ImportProblem(
                    source,
                    f"refused: {len(infos)} files, more than the limit of {limits.max_files}",
                )
            )
            return
        total = sum(i.file_size for i in infos)
        if total > limits.max_total_bytes:
            batch.problems.append(
                ImportProblem(
                    source,
                    f"refused: {total:,} bytes uncompressed, more than the limit of "
                    f"{limits.max_total_bytes:,}",
                )
            )
            return
        refused = _zip_member_refused(infos, limits)
        if refused:
            batch.problems.append(ImportProblem(source, f"refused: {refused}; nothing read"))
            return
        for info in sorted(infos, key=lambda i: i.filename):
            name = info.filename
            where = f"{source}:{name}"
            if _skipped_name(name):
                continue
            if not name.lower().endswith(MARKDOWN_SUFFIXES):
                batch.problems.append(
                    ImportProblem(where, "not a Markdown file: skipped", None, WARNING)
                )
                continue
            if info.file_size > limits.max_file_bytes:
                batch.problems.append(
                    ImportProblem(
                        where,
                        f"file too large ({info.file_size:,} bytes; limit "
                        f"{limits.max_file_bytes:,})",
                    )
                )
                continue
            with archive.open(info) as fh:
                # The sizes in the directory can lie; never read past the limit.
                content = fh.read(limits.max_file_bytes + 1)
            if len(content) > limits.max_file_bytes:
                batch.problems.append(ImportProblem(where, "file too large"))
                continue
            text = _decode(content, where, batch)
            if text is not None:
                _read_markdown(text, where, ctx, batch, PurePosixPath(name).stem)


# --- entry points --------------------------------------------------------------------------


def read_batch(
    name: str,
    data: bytes,
    *,
    known_topics: Iterable[str] | None = None,
    known_conditions: Iterable[str] | None = None,
    existing_ids: Iterable[str] = (),
    limits: ImportLimits | None = None,
) -> IdeaBatch:
    """Read one uploaded file, chosen by its name's suffix.

    ``.csv``, ``.jsonl``/``.ndjson``, ``.zip`` of Markdown files, or one ``.md``/``.txt``
    file. ``known_topics`` and ``known_conditions`` are the study's (matched ignoring
    case and returned in the study's spelling); None accepts any value. ``existing_ids``
    are external ids already in the study.
    """
    limits = limits or ImportLimits()
    ctx = _Context(known_topics, known_conditions, existing_ids, limits.max_idea_chars)
    batch = IdeaBatch()
    _read_one(name, data, ctx, batch, limits)
    return batch


def _read_one(
    name: str, data: bytes, ctx: _Context, batch: IdeaBatch, limits: ImportLimits
) -> None:
    lower = name.lower()
    if lower.endswith(".zip"):
        _read_zip(data, name, ctx, batch, limits)
        return
    if len(data) > limits.max_total_bytes:
        batch.problems.append(ImportProblem(name, f"file too large ({len(data):,} bytes)"))
        return
    if not lower.endswith((".csv", ".jsonl", ".ndjson", *MARKDOWN_SUFFIXES)):
        batch.problems.append(
            ImportProblem(name, "unsupported file type: use .csv, .jsonl, .zip or .md")
        )
        return
    text = _decode(data, name, batch)
    if text is None:
        return
    if lower.endswith(".csv"):
        _read_csv(text, name, ctx, batch)
    elif lower.endswith((".jsonl", ".ndjson")):
        _read_jsonl(text, name, ctx, batch)
    else:
        if len(data) > limits.max_file_bytes:
            batch.problems.append(ImportProblem(name, f"file too large ({len(data):,} bytes)"))
            return
        _read_markdown(text, name, ctx, batch, PurePosixPath(name).stem)


def read_path(
    path: str | Path,
    *,
    known_topics: Iterable[str] | None = None,
    known_conditions: Iterable[str] | None = None,
    existing_ids: Iterable[str] = (),
    limits: ImportLimits | None = None,
) -> IdeaBatch:
    """Read a file, or every Markdown file under a folder (for ``manage.py import_ideas``).

    Symbolic links are not followed out of the folder. Sources are named relative to it.
    """
    root = Path(path)
    limits = limits or ImportLimits()
    ctx = _Context(known_topics, known_conditions, existing_ids, limits.max_idea_chars)
    batch = IdeaBatch()
    if not root.exists():
        batch.problems.append(ImportProblem(str(root), "no such file or folder"))
        return batch
    if root.is_file():
        _read_one(root.name, root.read_bytes(), ctx, batch, limits)
        return batch
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not _skipped_name(p.relative_to(root).as_posix())
    )
    if len(files) > limits.max_files:
        batch.problems.append(
            ImportProblem(
                str(root), f"{len(files)} files, more than the limit of {limits.max_files}"
            )
        )
        return batch
    resolved_root = root.resolve()
    for p in files:
        rel = p.relative_to(root).as_posix()
        if not p.resolve().is_relative_to(resolved_root):
            batch.problems.append(ImportProblem(rel, "symbolic link out of the folder: skipped"))
            continue
        if not p.name.lower().endswith(MARKDOWN_SUFFIXES):
            batch.problems.append(ImportProblem(rel, "not a Markdown file: skipped", None, WARNING))
            continue
        if p.stat().st_size > limits.max_file_bytes:
            batch.problems.append(
                ImportProblem(rel, f"file too large ({p.stat().st_size:,} bytes)")
            )
            continue
        text = _decode(p.read_bytes(), rel, batch)
        if text is not None:
            _read_markdown(text, rel, ctx, batch, p.stem)
    return batch


def read_pasted(
    text: str,
    *,
    external_id: str,
    topic: str,
    conditions: Iterable[str] | str,
    title: str = "",
    institution: str = "",
    known_topics: Iterable[str] | None = None,
    known_conditions: Iterable[str] | None = None,
    existing_ids: Iterable[str] = (),
) -> IdeaBatch:
    """One proposal pasted into the web form, its metadata from the form's fields.

    Front matter at the top of the paste is honoured for fields the form left blank.
    """
    ctx = _Context(known_topics, known_conditions, existing_ids)
    batch = IdeaBatch()
    source = "pasted proposal"
    try:
        meta, body, _ = parse_front_matter(text.replace("\r\n", "\n"))
    except FrontMatterError as exc:
        batch.problems.append(ImportProblem(source, f"front matter: {exc.message}", exc.line))
        return batch
    meta_fields, _ = _split_fields(meta, source, None, batch, set())
    given = {
        "external_id": external_id,
        "title": title,
        "topic": topic,
        "conditions": conditions if isinstance(conditions, str) else list(conditions),
        "institution": institution,
    }
    fields = {k: v for k, v in meta_fields.items() if v}
    fields.update({k: v for k, v in given.items() if v})
    fields["text"] = body
    _build_record(fields, {}, source=source, row=None, ctx=ctx, batch=batch)
    return batch
