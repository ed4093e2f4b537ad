"""Provider behaviours over real HTTP against the scripted server: reasoning models,
structured outputs with their fallback, and the answering model and fingerprint."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.template.loader import render_to_string
from django.urls import reverse

from judging.methods import schemas
from judging.methods.prompts import pairwise_messages
from judging.models import JudgeRun, Judgment, PairwiseOutcome
from judging.run_calls import run_calls
from judging.services import judge_run_create, judge_run_execute
from judging.services.ratings import RUN_RATINGS
from judging.testserver import Rules, TestServer, conforms
from llm.client import complete, reasoning_parameters
from llm.models import JudgeConfig, LLMCall

Status = JudgeRun.Status
MESSAGES = pairwise_messages("A short idea.", "A somewhat longer idea than the other one.")


def run(study, method, judge, **kw):
    return judge_run_execute(run=judge_run_create(study=study, method=method, config=judge, **kw))


@pytest.fixture
def reasoning_server():
    """A server that treats o-series names as reasoning models, as OpenAI does."""
    with TestServer(Rules(reasoning_models=r"^o\d", reasoning_tokens=40)) as server:
        yield server


def _judge(server, **fields):
    values = {
        "name": "judge",
        "base_url": server.base_url,
        "model": "scripted-1",
        "parameters": {"temperature": 0, "max_tokens": 300},
        "price_input_per_million": "1.00",
        "price_output_per_million": "2.00",
        "timeout_seconds": 5,
        "max_attempts": 2,
        "backoff_seconds": 0.001,
        **fields,
    }
    return JudgeConfig.objects.create(**values)


# --- reasoning models ----------------------------------------------------------------


def test_the_reasoning_rewrite_renames_the_token_limit_and_drops_sampling():
    params = {"temperature": 0.7, "top_p": 0.9, "max_tokens": 500, "seed": 3}
    assert reasoning_parameters(params) == {"max_completion_tokens": 500, "seed": 3}
    # An explicit max_completion_tokens wins over a renamed max_tokens.
    both = {"max_tokens": 500, "max_completion_tokens": 2000}
    assert reasoning_parameters(both) == {"max_completion_tokens": 2000}


def test_a_reasoning_model_gets_max_completion_tokens_and_its_reasoning_is_counted(
    db, reasoning_server
):
    judge = _judge(reasoning_server, model="o3-mini")
    assert judge.is_reasoning_model()  # by the default rule of settings
    call = complete(judge, MESSAGES, prompt_version="pairwise@1")
    assert call.ok, call.error
    assert reasoning_server.statuses == {200: 1}
    sent = call.request
    assert sent["max_completion_tokens"] == 300
    assert "max_tokens" not in sent and "temperature" not in sent
    assert call.reasoning_tokens == 40
    # Reasoning tokens are output tokens, billed as such.
    assert call.output_tokens == len(call.response_text) // 4 + 1 + 40
    expected = (Decimal(call.input_tokens) * 1 + Decimal(call.output_tokens) * 2) / 1_000_000
    assert call.cost == expected


def test_the_server_refuses_temperature_from_a_reasoning_model_as_providers_do(
    db, reasoning_server
):
    # The same model, declared not a reasoning model: sent as any model and refused.
    judge = _judge(reasoning_server, model="o3-mini", reasoning=JudgeConfig.Reasoning.NO)
    call = complete(judge, MESSAGES)
    assert call.error.startswith("HTTP 400") and "temperature" in call.error
    assert call.status_code == 400 and call.attempts == 1  # a 400 is not retried
    assert reasoning_server.statuses == {400: 1}


def test_a_judge_can_say_it_is_a_reasoning_model_whatever_its_name(db):
    with TestServer(Rules(reasoning_models="house-model")) as server:
        judge = _judge(server, model="house-model-7")
        assert not judge.is_reasoning_model()
        assert complete(judge, MESSAGES).status_code == 400
        judge.reasoning = JudgeConfig.Reasoning.YES
        judge.save()
        call = complete(judge, MESSAGES)
        assert call.ok and call.reasoning_tokens == 48


def test_the_rule_for_reasoning_model_names_is_a_setting(db, settings, reasoning_server):
    judge = _judge(reasoning_server, model="o3-mini")
    settings.LLM_REASONING_MODELS = ""
    assert not judge.is_reasoning_model()
    settings.LLM_REASONING_MODELS = r"^o\d"
    assert judge.is_reasoning_model()
    assert not _judge(reasoning_server, name="other", model="gpt-4o").is_reasoning_model()


def test_a_run_on_a_reasoning_model_counts_its_reasoning_tokens(client, study, reasoning_server):
    judge = _judge(reasoning_server, model="o1")
    r = run(study, "pairwise", judge)
    assert r.status == Status.DONE, r.message
    assert reasoning_server.statuses == {200: 12}
    calls = LLMCall.objects.filter(run=r)
    assert all("temperature" not in c.request for c in calls)
    tokens = run_calls(r)["tokens"]
    assert tokens["calls"] == 12 and tokens["reasoning_tokens"] == 12 * 40
    assert tokens["output_tokens"] == sum(c.output_tokens for c in calls)
    assert tokens["cost"] == r.cost
    client.force_login(get_user_model().objects.get(username="judge-owner"))
    page = client.get(reverse("judging:run_detail", args=[study.slug, r.pk])).content.decode()
    assert f'id="tokens-reasoning">{12 * 40}<' in page
    assert "treated as a reasoning model" in page


# --- structured outputs ----------------------------------------------------------------


def test_every_schema_is_strict_and_accepts_what_its_parser_accepts():
    form = schemas.form_scores_schema({"novelty": (1, 10), "feasibility": (1, 5)})
    ok = {
        "novelty": {"score": 7, "rationale": "r"},
        "feasibility": {"score": 5, "rationale": "r"},
    }
    assert conforms(ok, form)
    assert not conforms({**ok, "novelty": {"score": 11, "rationale": "r"}}, form)
    assert not conforms({"novelty": ok["novelty"]}, form)
    assert conforms({"winner": "tie", "rationale": ""}, schemas.pairwise_schema())
    assert not conforms({"winner": "tie", "rationale": ""}, schemas.pairwise_schema(ties=False))
    fmt = schemas.response_format("pairwise", schemas.pairwise_schema())
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True


def test_direct_scoring_under_a_schema_is_parsed_even_where_free_text_was_garbage(study, scripted):
    scripted.rules.garbage_rate = 1.0  # every free-text answer is unparseable
    judge = _judge(scripted, structured_outputs=True)
    r = run(study, "direct", judge)
    assert r.status == Status.DONE, r.message
    assert r.unparseable == 0
    assert scripted.schemas == {"direct_scoring": 6} and scripted.statuses == {200: 6}
    metrics = study.form_definition().metric_keys
    call = LLMCall.objects.filter(run=r).first()
    schema = call.request["response_format"]["json_schema"]["schema"]
    assert sorted(schema["properties"]) == sorted(metrics)
    assert conforms(json.loads(call.response_text), schema)
    assert Judgment.objects.filter(run=r, score__isnull=True).count() == 0
    assert r.summary["structured_outputs"] == {"used": True, "refused": ""}
    # Without structured outputs the same faults make every answer unparseable.
    plain = run(study, "direct", _judge(scripted, name="plain"))
    assert plain.unparseable == 6


def test_pairwise_under_a_schema_gives_the_verdicts_the_tags_give(study, scripted):
    tagged = run(study, "pairwise", _judge(scripted, name="tags"))
    structured = run(study, "pairwise", _judge(scripted, name="json", structured_outputs=True))
    assert structured.status == Status.DONE and structured.unparseable == 0
    assert scripted.schemas == {"pairwise": 12}
    answers = [json.loads(c.response_text) for c in LLMCall.objects.filter(run=structured)]
    assert {a["winner"] for a in answers} <= {"A", "B"}

    def verdicts(r):
        rows = PairwiseOutcome.objects.filter(run=r)
        return sorted((o.idea_a_id, o.idea_b_id, o.first_shown_id, o.verdict) for o in rows)

    assert verdicts(structured) == verdicts(tagged)


def test_an_endpoint_that_refuses_schemas_is_asked_without_one_for_the_rest_of_the_run(study):
    with TestServer(Rules(json_schema="refuse")) as server:
        judge = _judge(server, structured_outputs=True, concurrency=1)
        r = run(study, "direct", judge)
        assert r.status == Status.DONE, r.message
        assert r.unparseable == 0 and r.errors == 0
        # A refusal, then the fallback; once the run has booked it, calls go without a
        # schema. The pool (width 1) is refilled before a returned call is booked, so
        # one more call may have gone out with the schema meanwhile; no third.
        refusals = server.statuses[400]
        assert 1 <= refusals <= 2 and server.statuses[200] == 6
        assert server.schemas == {"direct_scoring": refusals}
        assert "json_schema" in server.refusals[0]
        assert all("response_format" not in c.request for c in LLMCall.objects.filter(run=r))
        refused = r.summary["structured_outputs"]
        assert refused["used"] is False and refused["refused"].startswith("HTTP 400")


def test_the_server_refuses_a_schema_that_strict_mode_would_refuse(db, scripted):
    loose = {"type": "object", "properties": {"winner": {"type": "string"}}}
    judge = _judge(scripted)
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": loose}}
    judge.parameters = {"temperature": 0, "response_format": fmt}
    judge.save()
    call = complete(judge, MESSAGES)
    # Refused, then asked again without the schema: answered as free text.
    assert call.ok and call.response_text == "[[B]]"
    assert "additionalProperties" in scripted.refusals[0]
    assert "response_format" not in call.request


# --- the model that answered and its fingerprint -------------------------------------


def test_the_answering_model_and_fingerprint_are_stored_and_shown(client, study):
    rules = Rules(served_model="{model}-2025-01-31", system_fingerprint="fp_first")
    with TestServer(rules) as server:
        judge = _judge(server, model="gpt-4o")
        r = judge_run_create(study=study, method="pairwise", config=judge)
        r = judge_run_execute(run=r)
        assert r.status == Status.DONE, r.message
        call = LLMCall.objects.filter(run=r).first()
        assert call.response_model == "gpt-4o-2025-01-31"
        assert call.system_fingerprint == "fp_first"
        # The provider changes its set-up in the middle of a second run.
        server.rules.system_fingerprint = "fp_second"
        other = run(study, "direct", judge)
    models = run_calls(other)["models"]
    assert models == [
        {
            "requested": "gpt-4o",
            "answered": "gpt-4o-2025-01-31",
            "fingerprint": "fp_second",
            "calls": 6,
        }
    ]
    assert [m["fingerprint"] for m in run_calls(r)["models"]] == ["fp_first"]
    owner = get_user_model().objects.get(username="judge-owner")
    client.force_login(owner)
    page = client.get(reverse("judging:run_detail", args=[study.slug, r.pk])).content.decode()
    assert 'id="answering-models"' in page
    assert "gpt-4o-2025-01-31" in page and "fp_first" in page and "fp_second" not in page
    inputs = {
        j.info["run_id"]: j.info
        for j in RUN_RATINGS.judge_inputs(study, ["novelty"], panel_bootstrap=100)
    }
    assert inputs[r.pk]["answering_models"][0]["fingerprint"] == "fp_first"
    assert inputs[other.pk]["answering_models"][0]["calls"] == 6
    # The report's judge table, from the same inputs.
    judges = [
        {"label": j.label, "method": j.method, "model": j.model, "available": True, "info": j.info}
        for j in RUN_RATINGS.judge_inputs(study, ["novelty"], panel_bootstrap=100)
    ]
    report = render_to_string(
        "studies/report_document.html", {"r": {"agreement": {"judges": judges}}, "fig": {}}
    )
    assert "answered by gpt-4o-2025-01-31, fingerprint fp_first (12 calls)" in report
    assert "answered by gpt-4o-2025-01-31, fingerprint fp_second (6 calls)" in report


def test_a_run_answered_from_the_cache_names_the_models_of_the_calls_it_used(study, scripted):
    judge = _judge(scripted)
    first = run(study, "pairwise", judge)
    again = run(study, "pairwise", judge)
    assert again.http_calls == 0 and again.cache_hits == 12
    assert run_calls(again)["tokens"]["calls"] == 0
    assert run_calls(again)["models"] == run_calls(first)["models"]
    assert run_calls(first)["models"][0]["answered"] == "scripted-1"


# --- batch mode ------------------------------------------------------------------------


class SimulatedCrash(BaseException):
    """Like a killed worker: not an Exception, so nothing in the run catches it."""


@pytest.fixture
def quick_polls(settings):
    settings.LLM_BATCH_POLL_SECONDS = 0.001


def test_a_batch_run_goes_through_the_batch_api_and_costs_the_batch_price(
    study, scripted, quick_polls
):
    scripted.rules.batch_polls = 2
    batched = run(study, "pairwise", _judge(scripted, name="b"), params={"batch": True})
    assert batched.status == Status.DONE, batched.message
    assert list(scripted.batches) == ["batch_1"]
    assert scripted.batches["batch_1"]["status"] == "completed"
    assert scripted.statuses == {200: 12}  # every line answered inside the batch
    assert batched.summary["batches"] == [
        {"batch": "batch_1", "calls": 12, "status": "done", "remote_status": "completed"}
    ]
    calls = list(LLMCall.objects.filter(run=batched))
    assert len(calls) == 12 and all(c.ok for c in calls)
    full = sum(
        (Decimal(c.input_tokens) * 1 + Decimal(c.output_tokens) * 2) / 1_000_000 for c in calls
    )
    assert batched.cost == full / 2 and batched.cost > 0
    # The same judge's verdicts, one call at a time (another model name: no cache hits).
    single = run(study, "pairwise", _judge(scripted, name="s", model="scripted-2"))
    assert single.cost > batched.cost

    def verdicts(r):
        rows = PairwiseOutcome.objects.filter(run=r)
        return sorted((o.idea_a_id, o.idea_b_id, o.first_shown_id, o.verdict) for o in rows)

    assert verdicts(batched) == verdicts(single)


def test_a_pending_batch_survives_a_worker_restart(study, scripted, quick_polls, monkeypatch):
    import judging.services.batch as batch_mode
    from judging.services import judge_run_resume
    from llm.models import LLMBatch

    scripted.rules.batch_polls = 2

    def killed(seconds):
        raise SimulatedCrash

    monkeypatch.setattr(batch_mode, "sleep", killed)
    r = judge_run_create(
        study=study, method="direct", config=_judge(scripted), params={"batch": True}
    )
    with pytest.raises(SimulatedCrash):
        judge_run_execute(run=r)
    r.refresh_from_db()
    assert r.status == Status.RUNNING  # as a killed worker leaves it
    pending = LLMBatch.objects.get(run=r)
    assert pending.status == LLMBatch.Status.PENDING and pending.batch_id == "batch_1"
    assert len(pending.requests) == 6 and not LLMCall.objects.filter(run=r).exists()

    monkeypatch.setattr(batch_mode, "sleep", lambda seconds: None)
    r = judge_run_execute(run=judge_run_resume(run=r, force=True))
    assert r.status == Status.DONE, r.message
    assert list(scripted.batches) == ["batch_1"]  # polled again, never sent twice
    assert scripted.statuses == {200: 6}
    assert Judgment.objects.filter(run=r, score__isnull=False).exists()
    assert r.http_calls == 6 and r.done_calls == 6
    pending.refresh_from_db()
    assert pending.status == LLMBatch.Status.DONE and pending.output_file_id


def test_cancelling_a_batch_run_cancels_its_batch(study, scripted, quick_polls, monkeypatch):
    import judging.services.batch as batch_mode
    from judging.services import judge_run_cancel
    from llm.models import LLMBatch

    scripted.rules.batch_polls = 100
    r = judge_run_create(
        study=study, method="direct", config=_judge(scripted), params={"batch": True}
    )
    monkeypatch.setattr(batch_mode, "sleep", lambda seconds: judge_run_cancel(run=r))
    r = judge_run_execute(run=r)
    assert r.status == Status.CANCELLED
    assert scripted.batches["batch_1"]["status"] == "cancelled"
    assert LLMBatch.objects.get(run=r).status == LLMBatch.Status.CANCELLED
    assert scripted.statuses == {}  # nothing was answered, nothing paid


def test_a_batch_holds_no_more_calls_than_the_budget_leaves(study, scripted, quick_polls):
    r = run(study, "direct", _judge(scripted), params={"batch": True}, budget_calls=4)
    assert r.status == Status.BUDGET, r.message
    assert r.http_calls == 4 and r.summary["batches"][0]["calls"] == 4
    assert len(scripted.batches) == 1


def test_batch_mode_is_for_runs_that_make_calls(study):
    from judging.services import JudgeRunRefused

    with pytest.raises(JudgeRunRefused, match="no batch mode"):
        judge_run_create(study=study, method="baseline_random", params={"batch": True})
    with pytest.raises(JudgeRunRefused, match="true or false"):
        judge_run_create(study=study, method="direct", params={"batch": "yes"})


def test_the_judge_form_saves_reasoning_and_structured_outputs(client, study):
    owner = get_user_model().objects.get(username="judge-owner")
    client.force_login(owner)
    url = reverse("judging:config_create", args=[study.slug])
    form = {
        "name": "o-series",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "o3",
        "parameters": '{"max_tokens": 100}',
        "price_input_per_million": "1",
        "price_output_per_million": "4",
        "concurrency": "2",
        "timeout_seconds": "60",
        "max_attempts": "3",
        "backoff_seconds": "1",
    }
    assert client.post(url, form).status_code == 302
    plain = JudgeConfig.objects.get(name="o-series")
    assert plain.reasoning == JudgeConfig.Reasoning.AUTO and not plain.structured_outputs
    made = client.post(
        url, {**form, "name": "declared", "reasoning": "no", "structured_outputs": "on"}
    )
    assert made.status_code == 302
    declared = JudgeConfig.objects.get(name="declared")
    assert declared.reasoning == JudgeConfig.Reasoning.NO and declared.structured_outputs
    assert client.post(url, {**form, "name": "x", "reasoning": "maybe"}).status_code == 400
    listed = client.get(url).content.decode()
    row = listed[listed.index(">declared</a>") :]
    row = row[: row.index("</tr>")]
    assert 'class="pill">JSON schema' in row and "reasoning</span>" not in row
    first = listed[listed.index(">o-series</a>") :]
    assert 'class="pill">reasoning' in first[: first.index("</tr>")]


def test_a_batch_whose_answers_were_all_booked_before_a_restart_is_closed(
    study, scripted, quick_polls, monkeypatch
):
    from judging.services import judge_run_resume
    from llm.models import LLMBatch

    r = run(study, "direct", _judge(scripted), params={"batch": True})
    assert r.status == Status.DONE
    # As if the worker died after booking every answer of its batch but before closing
    # it, with a unit outside that batch still to do.
    LLMBatch.objects.filter(run=r).update(
        status=LLMBatch.Status.PENDING, requests={"direct_scoring.0": "booked already"}
    )
    idea = study.ideas.order_by("pk").first()
    Judgment.objects.filter(run=r, idea=idea).delete()
    LLMCall.objects.filter(run=r, judgments=None).delete()  # so it is asked again
    JudgeRun.objects.filter(pk=r.pk).update(done_calls=5)
    r = judge_run_execute(run=judge_run_resume(run=r, force=True))
    assert r.status == Status.DONE, r.message
    assert list(LLMBatch.objects.filter(run=r).values_list("status", flat=True)) == [
        "done",
        "done",
    ]
    assert len(scripted.batches) == 2 and r.summary["batches"][1]["calls"] == 1
