"""The method registry is the one place that says what a judge method is."""

from __future__ import annotations

from django.utils.module_loading import import_string

from judging.methods.prompts import pairwise_messages
from judging.methods.registry import METHODS, SCORES
from judging.models import JudgeRun
from llm.client import prepare, send
from studies.judge_ratings import judge_ratings_provider


def test_every_stored_method_has_one_registry_entry_with_the_same_label():
    assert {k: s.label for k, s in METHODS.items()} == dict(JudgeRun.Method.choices)


def test_the_method_constraint_admits_exactly_the_registry_s_methods():
    (check,) = [c for c in JudgeRun._meta.constraints if c.name == "judge_run_method_valid"]
    assert check.condition.children == [("method__in", list(METHODS))]


def test_every_entry_names_a_driver_that_exists():
    for spec in METHODS.values():
        assert callable(import_string(spec.driver.replace(":", ".")))


def test_baselines_are_exactly_the_methods_that_call_no_llm():
    assert {k for k, s in METHODS.items() if s.baseline} == set(JudgeRun.BASELINES)


def test_judging_fills_the_ratings_interface_studies_defines():
    provider = judge_ratings_provider()
    assert provider is not None and type(provider).__module__.startswith("judging.")


def test_the_test_server_answers_by_the_method_key_the_request_carries(judge, scripted):
    msgs = pairwise_messages("A short idea.", "A somewhat longer idea than the other one.")
    as_pairwise = send(prepare(judge, msgs, prompt_version="pairwise@1"))
    assert as_pairwise.text == "[[B]]"
    # The same wording sent as another kind of request is answered as that kind.
    other = prepare(judge, msgs, prompt_version="pairwise@1", method_key="ligbench_comparison")
    assert send(other).text != "[[B]]"
    # The key is not part of the cache key: the messages decide what is asked.
    assert other.cache_key == prepare(judge, msgs).cache_key


def test_every_method_that_judges_ideas_maps_onto_the_form_for_agreement():
    # A method missing here would silently drop out of the report's agreement section.
    for spec in METHODS.values():
        if spec.judges_ideas and spec.agreement != SCORES:
            assert spec.rating_metrics, spec.key
