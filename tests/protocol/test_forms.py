"""Review forms as data: the file format's validation and the built-in forms' facts."""

from __future__ import annotations

import json
import re

import pytest

from studies.protocol.forms import (
    BUILTIN_FORMS,
    EXECUTION_FORM,
    SI2024_FORM,
    SI2024_V1_FORM,
    FormDefinition,
    FormFileError,
    builtin_form,
    form_parse_json,
    form_validate,
)


def minimal_form(**metric) -> dict:
    return {
        "key": "mini",
        "version": 1,
        "title": "A small form",
        "metrics": [
            {
                "key": "quality",
                "label": "Quality",
                "minimum": 1,
                "maximum": 5,
                "anchors": {"1": "Poor", "5": "Excellent"},
                **metric,
            }
        ],
    }


def test_a_minimal_form_file_reads_with_sparse_anchors_and_the_standard_questions():
    form = form_validate(minimal_form())
    scale = form.metric("quality")
    assert (scale.minimum, scale.maximum) == (1, 5)
    assert scale.anchors == {1: "Poor", 5: "Excellent"}
    assert scale.anchor(3) == ""
    assert scale.rationale_mode == "required"
    assert form.familiarity.key == "familiarity" and form.confidence.maximum == 5
    assert form.min_rationale_words == 25


def test_every_built_in_form_survives_its_own_file_format_unchanged():
    for form in BUILTIN_FORMS:
        assert form_parse_json(form.to_json(), source=form.key) == form
        assert FormDefinition.from_dict(form.to_dict()) == form


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"minimum": 5, "maximum": 5}, "metric 'quality' (metrics[1]): 'minimum' (5) must be below"),
        ({"anchors": {"7": "Too high"}}, "metric 'quality' (metrics[1]): anchor level 7 is outside the scale 1–5"),
        ({"anchors": {"two": "x"}}, "metric 'quality' (metrics[1]): anchor level 'two' is not a whole number"),
        ({"anchors": {"2": ""}}, "metric 'quality' (metrics[1]): the anchor of level 2 must be non-empty"),
        ({"rationale": "sometimes"}, "metric 'quality' (metrics[1]): 'rationale' must be one of required, optional, none"),
        ({"label": ""}, "metric 'quality' (metrics[1]): 'label' is missing or empty"),
        ({"scale": [1, 5]}, "metric 'quality' (metrics[1]): unknown field(s) scale"),
        ({"min_rationale_words": -3}, "metric 'quality' (metrics[1]): 'min_rationale_words' must be"),
        ({"key": "Quality!"}, "metric 'Quality!' (metrics[1]): 'key' must be lower-case"),
        ({"key": "familiarity"}, "metric 'familiarity' (metrics[1]): the key 'familiarity' is reserved"),
        ({"key": "novelty_rationale"}, "the key 'novelty_rationale' is reserved"),
    ],
)  # fmt: skip
def test_a_bad_metric_is_refused_naming_the_metric_and_field(change, message):
    with pytest.raises(FormFileError) as exc:
        form_validate(minimal_form(**change), source="mine.json")
    assert any(message in p for p in exc.value.problems), exc.value.problems
    assert str(exc.value).startswith("mine.json: ")


def test_form_level_problems_are_all_listed_at_once():
    data = minimal_form()
    data.update({"version": 0, "key": "Bad Key", "colour": "red", "min_rationale_words": "ten"})
    data["metrics"].append(dict(data["metrics"][0]))
    with pytest.raises(FormFileError) as exc:
        form_validate(data)
    text = "\n".join(exc.value.problems)
    assert "unknown top-level field(s) colour" in text
    assert "'version' must be a whole number of at least 1" in text
    assert "'key' must be lower-case letters" in text
    assert "'min_rationale_words' must be a whole number" in text
    assert "metric 'quality' (metrics[2]): the key 'quality' appears twice" in text


def test_a_question_may_be_redefined_but_takes_no_rationale():
    data = minimal_form()
    data["confidence"] = {"label": "Sure?", "minimum": 1, "maximum": 3, "rationale": "required"}
    with pytest.raises(FormFileError, match="question 'confidence': this question takes no"):
        form_validate(data)
    data["confidence"]["rationale"] = "none"
    assert form_validate(data).confidence.maximum == 3


def test_not_json_and_not_an_object_are_refused_with_the_position():
    with pytest.raises(FormFileError, match=r"(?s)f.json: .*not valid JSON: .* line 1, column 2"):
        form_parse_json("{oops", source="f.json")
    with pytest.raises(FormFileError, match="one JSON object"):
        form_parse_json("[1, 2]")
    with pytest.raises(FormFileError, match="'metrics' must be a non-empty list"):
        form_validate({**minimal_form(), "metrics": []})


def test_built_in_names_pick_the_newest_version_unless_one_is_named():
    assert builtin_form("si2024") is SI2024_FORM
    assert builtin_form("si2024@1") is SI2024_V1_FORM
    assert builtin_form("execution") is EXECUTION_FORM
    with pytest.raises(KeyError, match="built-ins: execution, si2024"):
        builtin_form("nope")


# --- the protocol's review form: every fact of each anchored level -------------------
# The facts of the protocol's review form (Si, Yang & Hashimoto, Appendix E) as phrases
# that must appear in our wording, per metric and level ("question" is the prompt).
SI_FACTS: dict[str, dict[int | str, list[str]]] = {
    "novelty": {
        "question": ["creative", "different from existing work", "new insight"],
        1: ["not novel at all", "existing ideas are the same"],
        5: ["somewhat novel", "differs from existing ideas", "not enough", "new paper"],
        6: ["reasonably novel", "notable", "probably enough", "new paper"],
        10: ["very novel", "all existing ideas", "very interesting", "clever"],
    },
    "feasibility": {
        "question": ["typical cs phd student", "1–2 months", "abundant openai/anthropic api",
                     "limited gpu compute"],
        1: ["impossible"],
        10: ["easy", "whole proposed project", "within a few days",
             "without advanced technical skills"],
    },
    "effectiveness": {
        "question": ["work well", "better than existing baselines"],
        1: ["extremely unlikely", "major flaws", "definitely will not work well"],
        10: ["definitely effective", "very confident", "outperform existing methods",
             "significant margins", "many benchmarks"],
    },
    "excitement": {
        "question": ["exciting", "impactful", "full project", "change the field",
                     "very influential"],
        1: ["poor", "cannot identify a contribution", "not interesting at all",
            "fight to have it rejected", "any major ai conference"],
        6: ["leaning positive", "exciting enough to be accepted at a major ai conference",
            "some weaknesses", "somewhat incremental"],
        10: ["transformative", "change the research field profoundly", "best paper award",
             "major ai conferences"],
    },
    "overall": {
        5: ["decent idea", "some weaknesses", "not exciting enough", "marginally below",
            "acceptance threshold of major ai conferences"],
        6: ["marginally above", "acceptance threshold of major ai conferences"],
        7: ["good idea", "would be accepted by major ai conferences"],
        8: ["top 50%", "all published ideas on this topic", "major ai conferences",
            "clear accept"],
        9: ["top 15%", "all published ideas on this topic", "major ai conferences",
            "strong accept"],
        10: ["top 5%", "all published ideas on this topic", "major ai conferences",
             "seminal paper"],
    },
}  # fmt: skip


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower())


def test_the_si2024_form_follows_the_protocols_order_and_scales():
    # The protocol's five metrics, in its order (a later version may add others).
    protocol = ["novelty", "feasibility", "effectiveness", "excitement", "overall"]
    assert [k for k in SI2024_FORM.metric_keys if k in protocol] == protocol
    assert all(
        (SI2024_FORM.metric(k).minimum, SI2024_FORM.metric(k).maximum) == (1, 10) for k in protocol
    )
    assert all(SI2024_FORM.metric(k).rationale_mode == "required" for k in protocol)
    assert (SI2024_FORM.familiarity.minimum, SI2024_FORM.familiarity.maximum) == (1, 5)
    assert (SI2024_FORM.confidence.minimum, SI2024_FORM.confidence.maximum) == (1, 5)
    pledge = _norm(SI2024_FORM.honor_code)
    assert all(tool in pledge for tool in ("chatgpt", "claude", "gemini", "any other ai tool"))
    # a new version: studies on the first one keep it
    assert SI2024_FORM.key == SI2024_V1_FORM.key and SI2024_FORM.version > SI2024_V1_FORM.version


@pytest.mark.parametrize("metric", list(SI_FACTS))
def test_every_anchored_level_of_the_si2024_form_keeps_the_protocols_facts(metric):
    scale = SI2024_FORM.metric(metric)
    for level, phrases in SI_FACTS[metric].items():
        text = _norm(scale.question if level == "question" else scale.anchor(int(level)))
        missing = [p for p in phrases if p not in text]
        assert not missing, f"{metric} {level}: {text!r} lacks {missing}"


def test_the_si2024_form_anchors_no_level_the_protocol_leaves_open():
    for metric, facts in SI_FACTS.items():
        levels = {k for k in facts if k != "question"}
        assert set(SI2024_FORM.metric(metric).anchors) == levels, metric


def test_the_execution_form_has_six_ten_point_metrics_with_rationales_and_code_quality():
    keys = EXECUTION_FORM.metric_keys
    assert keys == [
        "novelty",
        "excitement",
        "soundness",
        "effectiveness",
        "overall",
        "faithfulness",
        "code_quality",
    ]
    for m in EXECUTION_FORM.metrics[:-1]:
        assert (m.minimum, m.maximum, m.rationale_mode) == (1, 10, "required"), m.key
    code = EXECUTION_FORM.metric("code_quality")
    assert (code.minimum, code.maximum, code.rationale_mode) == (1, 5, "none")
    assert EXECUTION_FORM.rationale_words(code) == 0
    assert json.loads(EXECUTION_FORM.to_json())["metrics"][-1]["rationale"] == "none"


# --- attention checks ------------------------------------------------------------------


def form_with_check(**check) -> dict:
    data = minimal_form()
    data["metrics"].append({"key": "clarity", "label": "Clarity", "minimum": 1, "maximum": 5})
    data["attention_checks"] = [
        {
            "key": "careful",
            "label": "Careful reading",
            "question": "To show you are reading each question, choose 2 here.",
            "minimum": 1,
            "maximum": 5,
            "expected": 2,
            "after": "quality",
            **check,
        }
    ]
    return data


def test_an_attention_check_is_an_item_on_the_page_but_never_a_metric():
    form = form_validate(form_with_check())
    assert form.metric_keys == ["quality", "clarity"]
    assert [i.key for i in form.items()] == ["quality", "careful", "clarity"]
    check = form.attention_checks[0]
    assert check.scale.rationale_mode == "none"
    assert check.passed("2") and check.passed(2) and not check.passed(3)
    assert not check.passed("") and not check.passed(None)
    # Without `after` it comes last; the file format round-trips it.
    data = form_with_check()
    del data["attention_checks"][0]["after"]
    last = form_validate(data)
    assert [i.key for i in last.items()] == ["quality", "clarity", "careful"]
    assert FormDefinition.from_dict(form.to_dict()) == form
    assert form_parse_json(form.to_json()) == form
    # A form without checks writes what it always wrote.
    assert "attention_checks" not in form_validate(minimal_form()).to_dict()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"expected": 7}, "attention check 'careful' (attention_checks[1]): 'expected' must be the instructed answer, a whole number within 1–5"),
        ({"expected": "2"}, "'expected' must be the instructed answer"),
        ({"after": "novelty"}, "'after' must name a metric of this form"),
        ({"key": "quality"}, "the key 'quality' is taken by a metric, question or column"),
        ({"key": "confidence"}, "the key 'confidence' is taken"),
        ({"rationale": "required"}, "an attention check takes no rationale"),
        ({"label": ""}, "attention check 'careful' (attention_checks[1]): 'label' is missing"),
    ],
)  # fmt: skip
def test_a_bad_attention_check_is_refused_naming_the_check_and_field(change, message):
    with pytest.raises(FormFileError) as exc:
        form_validate(form_with_check(**change))
    assert any(message in p for p in exc.value.problems), exc.value.problems
