"""Sample files for every import page (reviews, ideas, invitations), in CSV and JSONL.

Each sample is built for the study it is downloaded from: review samples carry one
column per metric of the study's form (scores inside each metric's own scale, rationale
columns only where the form asks for one) and name the study's conditions and topics, so
a downloaded sample imports as it is. The column tables here are also what the pages and
docs/import-*.md list as required and optional.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

from . import csvsafe
from .protocol.forms import FormDefinition
from .protocol.template import SECTIONS, render_sections

FORMATS = ("csv", "jsonl")
SAMPLE_KINDS = ("reviews", "ideas", "invitations")

# (column, required, meaning) per import page; the review metrics are added per form.
REVIEW_COLUMNS: tuple[tuple[str, bool, str], ...] = (
    ("idea_id", True, "the idea's id in its condition"),
    ("condition", True, "the condition key (Human, AI, …)"),
    ("topic", True, "the topic name"),
    ("reviewer_id", False, "any reviewer id; stored as a pseudonym"),
    ("review_id", False, "rows sharing it are one review counted in several conditions"),
    ("title", False, "the idea's title"),
    ("institution", False, "the idea author's institution"),
    ("familiarity", False, "1–5, or text starting with the number"),
    ("confidence", False, "1–5, or text starting with the number"),
    ("minutes", False, "time spent, e.g. 30 or '30 min'"),
    ("consent", False, "yes / no"),
    ("honor_code", False, "yes / no"),
    ("timestamp", False, "kept as given"),
)
IDEA_FILE_COLUMNS: tuple[tuple[str, bool, str], ...] = (
    ("external_id", True, "the idea's id (also accepted as id or idea_id); unique in the study"),
    ("topic", True, "a topic of the study"),
    ("condition", True, "a condition of the study; several separated by ';'"),
    (
        "text",
        True,
        "the proposal as Markdown (also accepted as proposal or body), or one column per "
        "template section instead: " + ", ".join(s.key for s in SECTIONS),
    ),
    ("title", False, "the idea's title (else the proposal's Title section)"),
    ("institution", False, "the author's institution (also author_institution, affiliation)"),
    (
        "author_contact",
        False,
        "whom to pay for the idea, e.g. an e-mail (also author_email, contact); owners only",
    ),
)
INVITATION_COLUMNS: tuple[tuple[str, bool, str], ...] = (
    ("email", True, "the reviewer's email address"),
    ("name", False, "how the invitation greets them"),
)


def review_columns(form: FormDefinition) -> list[tuple[str, bool, str]]:
    """The review file's columns for `form`: the fixed ones and each metric's."""
    rows = list(REVIEW_COLUMNS[:3])
    for m in form.metrics:
        rows.append((m.key, True, f"{m.label}: a whole number {m.range_text()}"))
        if m.rationale:
            need = "required" if m.rationale_required else "optional"
            rows.append((f"{m.key}_rationale", False, f"{m.label} rationale ({need} on the form)"))
    return rows + list(REVIEW_COLUMNS[3:])


def _mid(lo: int, hi: int, step: int) -> int:
    return lo + (hi - lo) * (step + 1) // 4


def review_sample_rows(
    form: FormDefinition, *, conditions: Sequence[str], topics: Sequence[str]
) -> list[dict[str, Any]]:
    """Two ideas per condition (at most three conditions), two reviews each."""
    rows: list[dict[str, Any]] = []
    topic = topics[0] if topics else "Topic A"
    for c, cond in enumerate(conditions[:3] or ["Human", "AI"]):
        for i in range(2):
            for r in range(2):
                step = (c + i + r) % 3
                row: dict[str, Any] = {
                    "idea_id": f"{cond}-{i + 1}",
                    "condition": cond,
                    "topic": topic,
                    "reviewer_id": f"reviewer-{(i + r + c) % 3 + 1}",
                    "review_id": f"review-{len(rows) + 1}",
                }
                for m in form.metrics:
                    row[m.key] = _mid(m.minimum, m.maximum, step)
                    if m.rationale:
                        row[f"{m.key}_rationale"] = (
                            f"Why this {m.label.lower()} score: the reviewer's reasons go here."
                        )
                row["familiarity"] = 3
                row["confidence"] = 4
                row["minutes"] = 30 + 5 * step
                rows.append(row)
    return rows


def idea_sample_rows(*, conditions: Sequence[str], topics: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    topic = topics[0] if topics else "Topic A"
    for c, cond in enumerate(conditions[:3] or ["Human", "AI"]):
        title = f"Sample idea {c + 1}"
        sections = {
            s.key: (title if s.key == "title" else f"{s.guidance} (sample text)") for s in SECTIONS
        }
        rows.append(
            {
                "external_id": f"sample-{c + 1}",
                "title": title,
                "topic": topic,
                "condition": cond,
                "text": render_sections(sections),
                # Not example.org's institution: the sample invitations are at
                # example.org, and the assignment keeps reviewers off their own
                # institution's ideas, so the two samples together must be assignable.
                "institution": "Sample University",
                "author_contact": "author@sample.example" if c == 0 else "",
            }
        )
    return rows


def invitation_sample_rows() -> list[dict[str, Any]]:
    return [
        {"name": "Ada Example", "email": "ada@example.org"},
        {"name": "", "email": "reviewer@example.org"},
    ]


def sample_file(rows: Sequence[dict[str, Any]], fmt: str) -> bytes:
    """`rows` as a CSV (header row) or JSONL file."""
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
    if fmt != "csv":
        raise ValueError(f"unknown sample format {fmt!r} (csv or jsonl)")
    out = io.StringIO()
    writer = csvsafe.dict_writer(out, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()
