"""The seven-section template: heading variants, what the parser reports, rendering."""

from __future__ import annotations

import pytest

from studies.protocol.template import (
    SECTION_KEYS,
    SECTIONS,
    parse_sections,
    render_sections,
)

FULL = {
    "title": "Retrieval-Checked Answers for Long-Tail Questions",
    "problem_statement": "Models invent facts about rare entities.",
    "motivation": "Retrieval alone does not stop the model from ignoring evidence.",
    "proposed_method": "Ask the model to cite a passage for every claim, then verify it.",
    "experiment_plan": "Step 1: collect PopQA.\nStep 2: compare against plain retrieval.",
    "test_cases": "Input: Who founded the town of Xyz?\nBaseline output: a made-up name.",
    "fallback_plan": "Analyse which claims lack support instead.",
}


def test_the_template_has_the_seven_sections_of_the_protocol_in_order():
    assert [s.heading for s in SECTIONS] == [
        "Title",
        "Problem Statement",
        "Motivation",
        "Proposed Method",
        "Step-by-Step Experiment Plan",
        "Test Case Examples",
        "Fallback Plan",
    ]
    assert all(s.guidance for s in SECTIONS)


def test_rendered_sections_parse_back_to_the_same_text_with_nothing_to_report():
    text = render_sections(FULL)
    parsed = parse_sections(text)
    assert parsed.sections == FULL
    assert parsed.is_clean and parsed.is_complete
    assert text.startswith("## 1. Title\n\nRetrieval-Checked")
    assert "## 5. Step-by-Step Experiment Plan" in text


def test_render_writes_sections_in_template_order_and_refuses_unknown_keys():
    text = render_sections({"fallback_plan": "b", "title": "a"})
    assert text.index("Title") < text.index("Fallback Plan")
    assert "## 7. Fallback Plan" in text
    with pytest.raises(ValueError, match="related_work"):
        render_sections({"related_work": "x"})


def test_render_can_show_every_heading_for_an_editor():
    text = render_sections({"title": "T"}, include_missing=True)
    assert all(s.heading in text for s in SECTIONS)


@pytest.mark.parametrize(
    "heading",
    [
        "# Motivation",
        "## Motivation",
        "### 3. Motivation",
        "3. Motivation",
        "3) Motivation",
        "Section 3: Motivation",
        "MOTIVATION",
        "motivation:",
        "**Motivation**",
        "__Motivation__",
        "**3. Motivation:**",
        "**Motivation**:",
        "III. Motivation",
    ],
)
def test_motivation_is_found_under_every_common_heading_style(heading):
    text = f"Title: A\n\nProblem Statement:\nP.\n\n{heading}\nWhy it matters.\n"
    parsed = parse_sections(text)
    assert parsed.sections["motivation"] == "Why it matters."


@pytest.mark.parametrize(
    ("heading", "key"),
    [
        ("Experiment Plan", "experiment_plan"),
        ("Experiments", "experiment_plan"),
        ("Step-by-step plan", "experiment_plan"),
        ("Step by Step Experimental Plan", "experiment_plan"),
        ("Test Cases", "test_cases"),
        ("Examples", "test_cases"),
        ("Fallback", "fallback_plan"),
        ("Plan B", "fallback_plan"),
        ("Problem", "problem_statement"),
        ("Method", "proposed_method"),
        ("Proposed Approach", "proposed_method"),
    ],
)
def test_synonyms_map_onto_template_sections(heading, key):
    parsed = parse_sections(f"# Title\nT\n\n## {heading}\nbody text\n")
    assert parsed.sections[key] == "body text"


def test_a_heading_with_text_on_the_same_line_keeps_that_text():
    parsed = parse_sections("1. Title: Better Prompts\n2. Problem Statement: Models fail.\n")
    assert parsed.sections["title"] == "Better Prompts"
    assert parsed.sections["problem_statement"] == "Models fail."


def test_guidance_left_in_parentheses_after_a_heading_is_ignored():
    parsed = parse_sections("## Test Case Examples (at least two)\nQ and A\n")
    assert parsed.sections == {"test_cases": "Q and A"}


def test_plan_b_with_its_text_on_the_same_line_is_the_fallback_plan():
    parsed = parse_sections("# Proposed Method\nM\nPlan B: analyse the errors instead.\n")
    assert parsed.sections["fallback_plan"] == "analyse the errors instead."


def test_bold_words_inside_prose_are_not_headings():
    parsed = parse_sections("# Motivation\n**Method** matters more than data here.\n")
    assert "proposed_method" not in parsed.sections
    assert parsed.sections["motivation"] == "**Method** matters more than data here."


def test_a_weak_name_inside_a_later_section_stays_prose():
    text = render_sections(FULL).replace(
        "Baseline output: a made-up name.", "Problem: 2 + 3 = ?\n**Method:** add them."
    )
    parsed = parse_sections(text)
    assert parsed.duplicates == ()
    assert "Problem: 2 + 3 = ?" in parsed.sections["test_cases"]
    assert "**Method:** add them." in parsed.sections["test_cases"]


def test_lines_in_code_fences_are_never_headings():
    text = "# Title\nT\n# Test Cases\n```\n# Motivation\nprint(1)\n```\n"
    parsed = parse_sections(text)
    assert "motivation" not in parsed.sections
    assert "# Motivation" in parsed.sections["test_cases"]


def test_short_text_before_the_first_heading_becomes_the_title():
    parsed = parse_sections("# Self-Checking Translation\n\n## Problem Statement\nP\n")
    assert parsed.sections["title"] == "Self-Checking Translation"
    assert parsed.preamble == ""


def test_long_text_before_the_first_heading_is_flagged_not_lost():
    intro = " ".join(["word"] * 40)
    parsed = parse_sections(f"{intro}\n\n# Title\nT\n")
    assert parsed.preamble == intro
    assert [p.kind for p in parsed.problems][:1] == ["preamble"]
    assert "40 words" in parsed.problems[0].message
    assert parsed.total_words == 41


def test_missing_and_empty_sections_are_reported_by_name():
    parsed = parse_sections("# Title\nT\n# Motivation\n\n# Proposed Method\nM\n")
    assert parsed.missing == ("problem_statement", "experiment_plan", "test_cases", "fallback_plan")
    assert parsed.empty == ("motivation",)
    messages = [p.message for p in parsed.problems]
    assert "missing section: Problem Statement" in messages
    assert "line 3: section Motivation is empty" in messages
    assert not parsed.is_complete


def test_a_repeated_section_is_flagged_and_its_text_kept():
    parsed = parse_sections("# Motivation\nfirst\n# Motivation\nsecond\n")
    assert parsed.duplicates == ("motivation",)
    assert parsed.sections["motivation"] == "first\n\nsecond"
    dup = next(p for p in parsed.problems if p.kind == "duplicate")
    assert dup.line == 3 and "first at line 1" in dup.message


def test_an_unknown_heading_stays_with_the_previous_section_and_is_flagged():
    parsed = parse_sections("## Motivation\nWhy.\n## Related Work\nOld work.\n## Method\nHow.\n")
    assert parsed.unknown_headings == ("Related Work",)
    assert parsed.sections["motivation"] == "Why.\n## Related Work\nOld work."
    unknown = next(p for p in parsed.problems if p.kind == "unknown_heading")
    assert unknown.message == "line 3: unknown heading 'Related Work', kept under Motivation"


def test_subheadings_deeper_than_the_sections_are_plain_text():
    parsed = parse_sections("## Proposed Method\n### Stage one\nA\n### Stage two\nB\n")
    assert parsed.unknown_headings == ()
    assert "### Stage two" in parsed.sections["proposed_method"]


def test_word_counts_are_per_section():
    parsed = parse_sections(render_sections(FULL))
    assert parsed.word_counts["problem_statement"] == 6
    assert set(parsed.word_counts) == set(SECTION_KEYS)
    assert parsed.total_words == sum(parsed.word_counts.values())


def test_free_text_with_no_headings_reports_every_section_missing():
    parsed = parse_sections(" ".join(["idea"] * 100))
    assert parsed.found == ()
    assert len(parsed.missing) == 7
    assert parsed.preamble


def test_windows_line_endings_parse_like_unix_ones():
    text = render_sections(FULL)
    assert parse_sections(text.replace("\n", "\r\n")).sections == FULL
