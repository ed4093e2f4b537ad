"""Verdict grammars: good answers parse, every bad one is Unparseable with a reason."""

from __future__ import annotations

import json

import pytest

from judging.methods import prompts
from judging.methods.parsing import (
    AbsoluteScore,
    DimensionVerdicts,
    FormalisedParts,
    FormScores,
    PairwiseVerdict,
    Unparseable,
    parse_absolute_score,
    parse_dimension_verdicts,
    parse_form_scores,
    parse_formalisation,
    parse_pairwise,
    strip_think,
)

RANGES = {"novelty": (1, 10), "feasibility": (1, 10)}


def form_answer(**overrides: object) -> str:
    obj: dict[str, object] = {
        "novelty": {"score": 7, "rationale": "New angle."},
        "feasibility": {"score": 4, "rationale": "Needs a lot of compute."},
    }
    obj.update(overrides)
    return json.dumps(obj)


# --- think blocks ---------------------------------------------------------------------


def test_think_blocks_are_removed_before_parsing():
    assert strip_think("<think>maybe [[B]]</think>\n[[A]]") == "[[A]]"


def test_a_lone_closing_think_tag_drops_the_reasoning_before_it():
    assert strip_think("reasoning about [[B]]...</think> [[A]]") == "[[A]]"


def test_an_unclosed_think_block_is_unparseable():
    result = parse_pairwise("<think>I lean towards [[A]] but")
    assert isinstance(result, Unparseable)
    assert "never closed" in result.reason


def test_unparseable_is_falsy_and_keeps_the_raw_answer():
    result = parse_pairwise("no idea")
    assert not result
    assert result.raw == "no idea"


# --- form scores ----------------------------------------------------------------------


def test_a_well_formed_form_answer_parses_into_scores_and_rationales():
    result = parse_form_scores(form_answer(), RANGES)
    assert isinstance(result, FormScores)
    assert result.scores["novelty"].score == 7
    assert result.scores["feasibility"].rationale == "Needs a lot of compute."


def test_a_form_answer_inside_a_json_fence_and_after_thinking_parses():
    raw = "<think>hmm</think>\n```json\n" + form_answer() + "\n```"
    assert isinstance(parse_form_scores(raw, RANGES), FormScores)


@pytest.mark.parametrize(
    ("raw", "reason_part"),
    [
        ("Here is my review: " + form_answer(), "not a JSON object"),
        (form_answer() + " Hope this helps.", "not a JSON object"),
        ("[1, 2]", "expected a JSON object"),
        ("", "empty"),
        (json.dumps({"novelty": {"score": 7, "rationale": "x"}}), "missing metrics: feasibility"),
        (form_answer(overall={"score": 5, "rationale": "x"}), "unknown metrics: overall"),
        (form_answer(novelty={"score": 11, "rationale": "x"}), "outside 1–10"),
        (form_answer(novelty={"score": 0, "rationale": "x"}), "outside 1–10"),
        (form_answer(novelty={"score": 7.5, "rationale": "x"}), "not an integer"),
        (form_answer(novelty={"score": "7", "rationale": "x"}), "not an integer"),
        (form_answer(novelty={"score": True, "rationale": "x"}), "not an integer"),
        (form_answer(novelty={"score": 7}), "exactly the keys score and rationale"),
        (form_answer(novelty={"score": 7, "rationale": 3}), "rationale is not a string"),
        (form_answer(novelty=7), "expected an object"),
        (
            '{"novelty": {"score": 7, "rationale": "a"}, "novelty": {"score": 2, "rationale": '
            '"b"}, "feasibility": {"score": 4, "rationale": "c"}}',
            "duplicate key 'novelty'",
        ),
    ],
)
def test_a_bad_form_answer_is_unparseable_with_a_reason(raw, reason_part):
    result = parse_form_scores(raw, RANGES)
    assert isinstance(result, Unparseable)
    assert reason_part in result.reason


# --- pairwise -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "winner"),
    [
        ("[[A]]", "A"),
        ("  [[B]]\n", "B"),
        ("[[TIE]]", "tie"),
        ("[[tie]]", "tie"),
        ("Idea B has a clearer plan. [[B]]", "B"),
        ('{"winner": "A"}', "A"),
        ('{"winner": "tie", "rationale": "equal"}', "tie"),
        ('```json\n{"winner": "B"}\n```', "B"),
        ("<think>[[A]] or [[B]]?</think>[[B]]", "B"),
    ],
)
def test_a_single_pairwise_tag_or_json_winner_parses(raw, winner):
    assert parse_pairwise(raw) == PairwiseVerdict(winner)


@pytest.mark.parametrize(
    ("raw", "reason_part"),
    [
        ("A is better.", "no [[A]], [[B]] or [[TIE]] tag"),
        ("[[A]] ... on reflection [[B]]", "2 tags found"),
        ("[[A]] [[A]]", "2 tags found"),
        ("[[C]]", "unknown tag"),
        ("[[A or B]]", "unknown tag"),
        ('{"winner": "C"}', "is not A, B or tie"),
        ('{"winner": 1}', "is not A, B or tie"),
        ('{"choice": "A"}', "no 'winner' key"),
        ('{"winner": "A", "confidence": 0.9}', "unexpected keys"),
        ('{"winner": "A"', "not a JSON object"),
        ("", "empty"),
    ],
)
def test_a_bad_pairwise_answer_is_unparseable_never_a_verdict(raw, reason_part):
    result = parse_pairwise(raw)
    assert isinstance(result, Unparseable)
    assert reason_part in result.reason


# --- formalisation --------------------------------------------------------------------

PARTS = {
    "main_target": "Make retrieval robust.",
    "core_breakthrough": "A new loss.",
    "innovative_methods": ["Contrastive pairs", "Hard negatives"],
    "experimental_design": "BEIR, three baselines.",
}


def test_a_four_part_formalisation_parses_and_joins_listed_methods():
    result = parse_formalisation(json.dumps(PARTS))
    assert isinstance(result, FormalisedParts)
    assert result.innovative_methods == "Contrastive pairs; Hard negatives"
    assert result.as_dict()["main_target"] == "Make retrieval robust."


def test_formalisation_keys_written_as_titles_are_accepted():
    titled = {k.replace("_", " ").title(): v for k, v in PARTS.items()}
    assert isinstance(parse_formalisation(json.dumps(titled)), FormalisedParts)


@pytest.mark.parametrize(
    ("obj", "reason_part"),
    [
        ({k: v for k, v in PARTS.items() if k != "core_breakthrough"}, "missing parts"),
        ({**PARTS, "novelty": "high"}, "unknown parts"),
        ({**PARTS, "main_target": ""}, "main_target is empty"),
        ({**PARTS, "main_target": 3}, "main_target is empty or not text"),
        ({**PARTS, "innovative_methods": []}, "innovative_methods is empty"),
        ({**PARTS, "Main Target": "again"}, "given twice"),
    ],
)
def test_a_bad_formalisation_is_unparseable_with_a_reason(obj, reason_part):
    result = parse_formalisation(json.dumps(obj))
    assert isinstance(result, Unparseable)
    assert reason_part in result.reason


def test_a_formalisation_given_as_a_bare_list_is_unparseable():
    result = parse_formalisation(json.dumps(list(PARTS.values())))
    assert isinstance(result, Unparseable)
    assert "expected a JSON object" in result.reason


# --- absolute scores ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "score"),
    [("4", 4), (" 1 ", 1), ("[[5]]", 5), ("Clear and feasible. [[3]]", 3), ('{"score": 2}', 2)],
)
def test_an_absolute_score_parses_from_a_bare_integer_a_tag_or_json(raw, score):
    assert parse_absolute_score(raw) == AbsoluteScore(score=score)


def test_an_absolute_score_keeps_its_json_rationale():
    result = parse_absolute_score('{"score": 4, "rationale": " solid "}')
    assert result == AbsoluteScore(4, "solid")


@pytest.mark.parametrize(
    ("raw", "reason_part"),
    [
        ("6", "outside 1–5"),
        ("0", "outside 1–5"),
        ("4.5", "no score"),
        ("four", "no score"),
        ("I would say 4 out of 5", "no score"),
        ("[[4]] [[5]]", "2 tags found"),
        ("[[high]]", "not an integer"),
        ('{"score": 4.0}', "not an integer"),
        ('{"score": "4"}', "not an integer"),
        ('{"rating": 4}', "no 'score' key"),
        ('{"score": 4, "notes": "x"}', "unexpected keys"),
    ],
)
def test_a_bad_absolute_score_is_unparseable_with_a_reason(raw, reason_part):
    result = parse_absolute_score(raw)
    assert isinstance(result, Unparseable)
    assert reason_part in result.reason


def test_the_absolute_range_is_a_parameter():
    assert parse_absolute_score("0", low=0, high=5) == AbsoluteScore(0)


# --- LigBench per-dimension verdicts -------------------------------------------------

DIMS = ("rating", "contribution", "soundness")


def test_dimension_verdicts_give_elo_outcomes_for_either_side():
    result = parse_dimension_verdicts(
        '{"rating": "A", "contribution": "tie", "soundness": "B"}', DIMS
    )
    assert isinstance(result, DimensionVerdicts)
    assert [result.outcome_for(d) for d in DIMS] == [1.0, 0.5, 0.0]
    assert [result.outcome_for(d, side="B") for d in DIMS] == [0.0, 0.5, 1.0]


@pytest.mark.parametrize(
    ("raw", "reason_part"),
    [
        ('{"rating": "A", "contribution": "tie"}', "missing dimensions: soundness"),
        ('{"rating": "A", "contribution": "B", "soundness": "A", "x": "A"}', "unknown"),
        ('{"rating": 1, "contribution": "B", "soundness": "A"}', "rating: 1 is not"),
        ("[1, 0, 0.5]", "expected a JSON object"),
    ],
)
def test_a_bad_dimension_answer_is_unparseable_as_a_whole(raw, reason_part):
    result = parse_dimension_verdicts(raw, DIMS)
    assert isinstance(result, Unparseable)
    assert reason_part in result.reason


# --- prompts (templates and hashes) --------------------------------------------------

FORM = [
    {"key": "novelty", "low": 1, "high": 10, "anchors": {1: "Not novel", 10: "Very novel"}},
    {"key": "feasibility", "low": 1, "high": 10, "anchors": {1: "Impossible"}},
]


def test_prompt_hash_is_stable_and_ignores_key_order_but_not_content():
    a = [{"role": "user", "content": "x"}]
    b = [{"content": "x", "role": "user"}]
    assert prompt_hash_of(a) == prompt_hash_of(b)
    assert len(prompt_hash_of(a)) == 64
    assert prompt_hash_of(a) != prompt_hash_of([{"role": "user", "content": "y"}])


def prompt_hash_of(messages):
    return prompts.prompt_hash(messages)


def test_every_template_has_a_name_and_a_version():
    assert set(prompts.PROMPT_TEMPLATES) >= {
        "direct_scoring",
        "absolute",
        "pairwise",
        "swiss",
        "ligbench_formalisation",
        "ligbench_comparison",
    }
    assert all(t.version for t in prompts.PROMPT_TEMPLATES.values())


def test_direct_scoring_prompt_lists_metrics_ranges_and_anchors():
    messages = prompts.direct_scoring_messages("An idea with {braces} and $dollars.", FORM)
    user = messages[1]["content"]
    assert "novelty: integer from 1 to 10" in user
    assert "10: Very novel" in user
    assert "{braces} and $dollars" in user
    assert prompts.form_ranges(FORM) == {"novelty": (1, 10), "feasibility": (1, 10)}


def test_pairwise_and_swiss_prompts_show_both_ideas_and_ask_for_a_tag():
    for messages in (
        prompts.pairwise_messages("first idea", "second idea", "novelty"),
        prompts.swiss_messages("first idea", "second idea"),
    ):
        user = messages[1]["content"]
        assert user.index("first idea") < user.index("second idea")
        assert "[[A]]" in user and "[[B]]" in user


def test_ligbench_prompts_render_the_four_parts_and_the_dimensions():
    parts = parse_formalisation(json.dumps(PARTS))
    user = prompts.ligbench_comparison_messages(parts, PARTS)[1]["content"]
    assert "Main target: Make retrieval robust." in user
    assert "rating, contribution, soundness" in user
    assert "0 to 5" in prompts.ligbench_novelty_messages(parts)[1]["content"]
    assert "main_target" in prompts.formalisation_messages("idea")[1]["content"]


def test_a_missing_template_value_is_an_error():
    with pytest.raises(KeyError):
        prompts.PAIRWISE.render(idea_a="x")
