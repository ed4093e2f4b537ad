"""Reviewer-visible study text that names a condition or a source of ideas."""

from __future__ import annotations

import pytest

from studies.protocol.source_words import source_mentions

CONDITIONS = ["Human", "AI", "AI_Rerank", "Human experts"]


def _terms(text: str, conditions=CONDITIONS) -> list[str]:
    return [m.term for m in source_mentions({"title": text}, conditions=conditions)]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Human vs AI ideas", ["Human vs AI"]),
        ("Human and AI_Rerank ideas", ["Human", "AI_Rerank"]),
        ("Ideas from GPT-4o and people", ["GPT-4o"]),
        ("Which ideas are human-written?", ["human-written"]),  # the longer match wins
        ("Proposals an LLM drafted", ["LLM"]),
        ("AI-generated proposals", ["AI-generated"]),
        ("Reranked AI ideas (ai rerank)", ["AI", "ai rerank"]),
        ("Large language models for maths", ["Large language models"]),
        ("Ideas written by experts", ["written by experts"]),
    ],
)
def test_condition_names_and_source_words_are_found(text, found):
    assert _terms(text) == found


@pytest.mark.parametrize(
    "text",
    [
        "He said the paid email campaign failed",  # "ai" inside words
        "Maintaining factuality in long answers",
        "Retrieval for open-domain QA",
        "Humanities datasets",  # "Human" inside a word
    ],
)
def test_words_inside_other_words_do_not_match(text):
    assert _terms(text) == []


def test_without_conditions_the_source_words_still_match_and_each_span_is_reported_once():
    mentions = source_mentions(
        {"title": "AI ideas", "description": "Some were written by an AI, some by people."},
        conditions=[],
    )
    assert [(m.field, m.term) for m in mentions] == [
        ("title", "AI"),
        ("description", "written by an AI"),
    ]
    assert mentions[0].reason == "names a source of ideas"
    assert "written by an AI" in mentions[1].excerpt


def test_a_condition_match_names_the_condition():
    (mention,) = source_mentions({"topics": "AI_Rerank"}, conditions=["AI_Rerank"])
    assert mention.reason == "names the condition “AI_Rerank”"
