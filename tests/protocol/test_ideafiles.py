"""Reading idea batches: every format in, every problem out with its file and row."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from studies.protocol.ideafiles import (
    WARNING,
    FrontMatterError,
    ImportLimits,
    parse_front_matter,
    read_batch,
    read_pasted,
    read_path,
    split_conditions,
)
from studies.protocol.template import render_sections

TOPICS = ["Factuality", "Multilingual"]
CONDITIONS = ["Human", "AI", "AI_Rerank"]
KNOWN = {"known_topics": TOPICS, "known_conditions": CONDITIONS}

PROPOSAL = render_sections(
    {
        "title": "Self-Checked Answers",
        "problem_statement": "Models state wrong facts.",
        "motivation": "Checks are rare.",
        "proposed_method": "Verify each claim.",
        "experiment_plan": "Run on PopQA.",
        "test_cases": "Q: who? A: them.",
        "fallback_plan": "Analyse failures.",
    }
)


def csv_bytes(rows: list[list[str]]) -> bytes:
    import csv

    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    return buf.getvalue().encode("utf-8")


def messages(batch) -> list[str]:
    return [str(p) for p in batch.problems]


HEADER = ["external_id", "title", "topic", "condition", "text", "author_institution"]


def test_a_clean_csv_imports_every_row_with_parsed_sections():
    data = csv_bytes(
        [
            HEADER,
            ["H1", "", "Factuality", "Human", PROPOSAL, "Stanford"],
            ["A1", "Own title", "multilingual", "AI; AI_Rerank", PROPOSAL, ""],
        ]
    )
    batch = read_batch("ideas.csv", data, **KNOWN)
    assert batch.ok and batch.problems == []
    h1, a1 = batch.records
    assert (h1.external_id, h1.title, h1.topic, h1.conditions) == (
        "H1",
        "Self-Checked Answers",
        "Factuality",
        ("Human",),
    )
    assert h1.institution == "Stanford" and h1.parsed.is_complete
    assert a1.title == "Own title"
    assert a1.topic == "Multilingual"  # the study's spelling
    assert a1.conditions == ("AI", "AI_Rerank")


def test_csv_with_one_column_per_section_is_rendered_into_the_template():
    header = ["id", "topic", "conditions", "Title", "Problem Statement", "Motivation"]
    header += ["Proposed Method", "Experiment Plan", "Test Cases", "Fallback Plan"]
    row = ["X1", "Factuality", "Human", "T", "P", "M", "PM", "E", "TC", "F"]
    batch = read_batch("ideas.csv", csv_bytes([header, row]), **KNOWN)
    (record,) = batch.records
    assert record.parsed.is_clean
    assert record.parsed.sections["experiment_plan"] == "E"
    assert record.title == "T"
    assert "## 5. Step-by-Step Experiment Plan" in record.text


def test_unknown_topic_and_condition_are_reported_with_the_row_and_known_values():
    data = csv_bytes(
        [
            HEADER,
            ["H1", "", "Factuality", "Human", PROPOSAL, ""],
            ["H2", "", "Robotics", "Human; Oracle", PROPOSAL, ""],
        ]
    )
    batch = read_batch("ideas.csv", data, **KNOWN)
    assert [r.external_id for r in batch.records] == ["H1"]
    assert messages(batch) == [
        "ideas.csv, row 3: unknown topic 'Robotics' (known: Factuality, Multilingual)",
        "ideas.csv, row 3: unknown condition 'Oracle' (known: AI, AI_Rerank, Human)",
    ]
    assert not batch.ok


def test_duplicate_ids_within_the_batch_and_against_the_study_are_reported():
    data = csv_bytes(
        [
            HEADER,
            ["H1", "", "Factuality", "Human", PROPOSAL, ""],
            ["H1", "", "Factuality", "Human", PROPOSAL, ""],
            ["OLD", "", "Factuality", "Human", PROPOSAL, ""],
        ]
    )
    batch = read_batch("ideas.csv", data, existing_ids=["OLD"], **KNOWN)
    assert [r.row for r in batch.records] == [2]
    assert messages(batch) == [
        "ideas.csv, row 3: duplicate external id 'H1' (first at ideas.csv, row 2)",
        "ideas.csv, row 4: external id 'OLD' already exists in this study",
    ]


def test_an_empty_proposal_is_an_error_for_its_row_only():
    data = csv_bytes(
        [
            HEADER,
            ["H1", "", "Factuality", "Human", "   ", ""],
            ["H2", "", "Factuality", "Human", PROPOSAL, ""],
        ]
    )
    batch = read_batch("ideas.csv", data, **KNOWN)
    assert messages(batch) == ["ideas.csv, row 2: empty proposal"]
    assert [r.external_id for r in batch.records] == ["H2"]


def test_a_file_that_is_not_utf8_is_refused_whole_with_the_offending_byte():
    data = csv_bytes([HEADER, ["H1", "", "Factuality", "Human", "caf\u00e9", ""]])
    latin1 = data.decode("utf-8").encode("latin-1")
    batch = read_batch("ideas.csv", latin1, **KNOWN)
    assert batch.records == []
    (problem,) = batch.problems
    assert problem.row is None
    assert str(problem).startswith("ideas.csv: not UTF-8 text (byte 0xe9 at offset")


def test_a_utf8_byte_order_mark_is_accepted():
    data = b"\xef\xbb\xbf" + csv_bytes([HEADER, ["H1", "", "Factuality", "Human", PROPOSAL, ""]])
    assert read_batch("ideas.csv", data, **KNOWN).records[0].external_id == "H1"


def test_a_csv_without_any_proposal_column_is_refused_with_what_to_add():
    batch = read_batch("ideas.csv", csv_bytes([["id", "topic"], ["H1", "Factuality"]]))
    assert "no proposal column: add 'text'" in messages(batch)[0]


def test_unknown_columns_are_warnings_and_do_not_block_the_import():
    data = csv_bytes([HEADER + ["notes"], ["H1", "", "Factuality", "Human", PROPOSAL, "", "x"]])
    batch = read_batch("ideas.csv", data, **KNOWN)
    assert batch.ok and len(batch.records) == 1
    assert [(p.level, p.message) for p in batch.problems] == [(WARNING, "column 'notes' ignored")]


def test_jsonl_rows_accept_condition_lists_and_report_bad_lines_by_number():
    lines = [
        json.dumps(
            {"id": "A1", "topic": "Factuality", "conditions": ["AI", "AI_Rerank"], "text": PROPOSAL}
        ),
        "{not json",
        json.dumps(["a", "list"]),
        "",
        json.dumps(
            {
                "id": "A2",
                "topic": "Factuality",
                "condition": "AI",
                "sections": {"title": "T", "Problem Statement": "P"},
            }
        ),
    ]
    batch = read_batch("ideas.jsonl", "\n".join(lines).encode(), **KNOWN)
    assert [r.conditions for r in batch.records] == [("AI", "AI_Rerank"), ("AI",)]
    assert batch.records[1].parsed.sections["problem_statement"] == "P"
    assert messages(batch) == [
        "ideas.jsonl, line 2: not valid JSON: Expecting property name enclosed in double quotes",
        "ideas.jsonl, line 3: each line must be a JSON object",
    ]


def test_conditions_split_on_semicolons_or_a_bracketed_list():
    assert split_conditions("Human; AI ;") == ("Human", "AI")
    assert split_conditions("[AI, AI_Rerank]") == ("AI", "AI_Rerank")
    assert split_conditions(["AI", "AI"]) == ("AI",)
    assert split_conditions(None) == ()


def md_file(meta: dict[str, str], body: str = PROPOSAL) -> str:
    lines = ["---", *(f"{k}: {v}" for k, v in meta.items()), "---", body]
    return "\n".join(lines)


def test_front_matter_is_parsed_strictly():
    meta, body, start = parse_front_matter('---\nid: H1\n# a comment\ntitle: "A: B"\n---\nBody')
    assert meta == {"id": "H1", "title": "A: B"} and body == "Body" and start == 6
    assert parse_front_matter("No fences here") == ({}, "No fences here", 1)
    for bad, line, why in [
        ("---\nid H1\n---\n", 2, "expected 'key: value'"),
        ("---\nid: 1\nid: 2\n---\n", 3, "'id' given twice"),
        ("---\nid: 1\n", 1, "never closed"),
        ("---\ntags:\n  - a\n---\n", 3, "nested values"),
    ]:
        with pytest.raises(FrontMatterError) as err:
            parse_front_matter(bad)
        assert err.value.line == line and why in err.value.message


def test_a_markdown_file_without_an_id_takes_its_file_name():
    batch = read_batch(
        "h7.md", md_file({"topic": "Factuality", "condition": "Human"}).encode(), **KNOWN
    )
    assert batch.records[0].external_id == "h7"


def make_zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_a_zip_of_markdown_files_reports_each_bad_file_by_its_path():
    good = md_file({"id": "H1", "topic": "Factuality", "condition": "Human"})
    bad_topic = md_file({"id": "H2", "topic": "Chemistry", "condition": "Human"})
    data = make_zip(
        {
            "ideas/h1.md": good.encode(),
            "ideas/h2.md": bad_topic.encode(),
            "ideas/h3.md": b"---\nid: H3\n",
            "ideas/h4.md": "caf\u00e9".encode("latin-1"),
            "ideas/readme.pdf": b"%PDF",
            "__MACOSX/ideas/._h1.md": b"\x00\x01",
        }
    )
    batch = read_batch("batch.zip", data, **KNOWN)
    assert [r.external_id for r in batch.records] == ["H1"]
    assert messages(batch) == [
        "batch.zip:ideas/h2.md: unknown topic 'Chemistry' (known: Factuality, Multilingual)",
        "batch.zip:ideas/h3.md, line 1: front matter: front matter opened with '---' is never closed",
        "batch.zip:ideas/h4.md: not UTF-8 text (byte 0xe9 at offset 3); save it as UTF-8 and upload again",
        "batch.zip:ideas/readme.pdf: not a Markdown file: skipped",
    ]


@pytest.mark.parametrize("name", ["../evil.md", "/etc/evil.md", "a/../../evil.md", "C:/evil.md"])
def test_a_zip_with_an_unsafe_path_is_refused_whole(name):
    good = md_file({"id": "H1", "topic": "Factuality", "condition": "Human"}).encode()
    batch = read_batch("batch.zip", make_zip({"ok.md": good, name: good}), **KNOWN)
    assert batch.records == []
    assert messages(batch)[0].startswith(f"batch.zip: refused: unsafe entry '{name}'")


def test_a_zip_with_too_many_or_too_large_files_is_refused():
    good = md_file({"id": "H1", "topic": "Factuality", "condition": "Human"}).encode()
    many = make_zip({f"{i}.md": good for i in range(4)})
    batch = read_batch("many.zip", many, limits=ImportLimits(max_files=3), **KNOWN)
    assert messages(batch) == ["many.zip: refused: 4 files, more than the limit of 3"]
    big = make_zip({"big.md": good + b"x" * 5000, "ok.md": good})
    batch = read_batch("big.zip", big, limits=ImportLimits(max_file_bytes=4000), **KNOWN)
    assert [r.source for r in batch.records] == ["big.zip:ok.md"]
    assert messages(batch)[0].startswith("big.zip:big.md: file too large (")
    bomb = make_zip({"a.md": b"x" * 300_000})
    batch = read_batch("bomb.zip", bomb, limits=ImportLimits(max_total_bytes=100_000))
    assert "more than the limit of 100,000" in messages(batch)[0]


def test_a_damaged_zip_is_one_problem():
    assert messages(read_batch("x.zip", b"PK not really")) == ["x.zip: not a valid zip archive"]


def test_a_folder_is_read_recursively_and_names_files_relative_to_it(tmp_path):
    (tmp_path / "human").mkdir()
    (tmp_path / "human" / "h1.md").write_text(
        md_file({"topic": "Factuality", "condition": "Human"})
    )
    (tmp_path / "ai.md").write_text(md_file({"id": "A1", "topic": "Space", "condition": "AI"}))
    (tmp_path / ".hidden.md").write_text("ignored")
    batch = read_path(tmp_path, **KNOWN)
    assert [(r.external_id, r.source) for r in batch.records] == [("h1", "human/h1.md")]
    assert messages(batch) == ["ai.md: unknown topic 'Space' (known: Factuality, Multilingual)"]


def test_read_path_reads_a_single_csv_file(tmp_path):
    path = tmp_path / "ideas.csv"
    path.write_bytes(csv_bytes([HEADER, ["H1", "", "Factuality", "Human", PROPOSAL, ""]]))
    assert [r.external_id for r in read_path(path, **KNOWN).records] == ["H1"]


def test_a_pasted_proposal_takes_its_metadata_from_the_form():
    batch = read_pasted(
        PROPOSAL, external_id="P1", topic="factuality", conditions=["Human"], **KNOWN
    )
    (record,) = batch.records
    assert (record.external_id, record.topic, record.title) == (
        "P1",
        "Factuality",
        "Self-Checked Answers",
    )
    empty = read_pasted("  \n", external_id="P2", topic="Factuality", conditions="Human", **KNOWN)
    assert messages(empty) == ["pasted proposal: empty proposal"]


def test_rows_missing_required_fields_say_which():
    data = csv_bytes([HEADER, ["", "", "", "", PROPOSAL, ""]])
    assert messages(read_batch("ideas.csv", data, **KNOWN)) == [
        "ideas.csv, row 2: missing external id (column external_id, id or idea_id)",
        "ideas.csv, row 2: missing topic",
        "ideas.csv, row 2: missing condition",
    ]


def test_without_known_sets_any_topic_and_condition_is_accepted():
    data = csv_bytes([HEADER, ["H1", "", "Anything", "Whatever", PROPOSAL, ""]])
    assert read_batch("ideas.csv", data).ok


def test_an_unsupported_file_type_is_named():
    assert messages(read_batch("ideas.xlsx", b"PK")) == [
        "ideas.xlsx: unsupported file type: use .csv, .jsonl, .zip or .md"
    ]


def test_an_optional_author_contact_column_is_read_when_present():
    data = csv_bytes(
        [
            [*HEADER, "author_contact"],
            ["H1", "", "Factuality", "Human", PROPOSAL, "Stanford", "ada@example.org"],
            ["A1", "", "Factuality", "AI", PROPOSAL, "", ""],
        ]
    )
    batch = read_batch("ideas.csv", data, **KNOWN)
    assert batch.ok and batch.problems == []
    assert [r.author_contact for r in batch.records] == ["ada@example.org", ""]
    without = read_batch(
        "ideas.csv", csv_bytes([HEADER, ["H1", "", "Factuality", "Human", PROPOSAL, ""]]), **KNOWN
    )
    assert without.ok and without.records[0].author_contact == ""


def test_a_zip_bomb_of_markdown_is_refused_by_its_ratio_before_reading(monkeypatch):
    # 50 Markdown files of 2 MB each compress to a few KB each: refused from the
    # directory alone, nothing decompressed.
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for i in range(50):
            z.writestr(f"{i}.md", b"# t\n" + b"a" * 1_990_000)
    bomb = buffer.getvalue()
    assert len(bomb) < 300_000
    opened: list[str] = []
    real_open = zipfile.ZipFile.open

    def recorded(self, name, *args, **kwargs):
        opened.append(str(name))
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", recorded)
    batch = read_batch("bomb.zip", bomb, **KNOWN)
    assert batch.records == []
    assert "expands" in messages(batch)[0] and "nothing read" in messages(batch)[0]
    assert opened == []  # refused before any member was decompressed


def test_a_markdown_member_larger_than_an_idea_may_be_is_refused():
    text = ("word " * 60_000).encode()  # 300,000 bytes: over 60,000 characters whatever
    batch = read_batch(
        "big.zip", make_zip({"big.md": text}), limits=ImportLimits(max_ratio=10**6), **KNOWN
    )
    assert messages(batch)[0].startswith("big.zip:big.md: file too large (")
