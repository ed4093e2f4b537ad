"""The judge client against the scripted server over real HTTP."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest

from judging.methods.prompts import pairwise_messages
from judging.models import JudgeRun
from judging.testserver import Rules, TestServer
from llm.client import BudgetExhausted, cache_key, complete, prepare, send
from llm.models import JudgeConfig, LLMCall

MESSAGES = pairwise_messages("A short idea.", "A somewhat longer idea than the other one.")


def test_a_call_is_recorded_with_tokens_latency_cost_and_raw_text(judge, scripted):
    call = complete(judge, MESSAGES, prompt_version="pairwise@1")
    assert scripted.requests == 1
    assert call.ok and call.response_text == "[[B]]"
    assert call.input_tokens > 0 and call.output_tokens > 0
    expected = (Decimal(call.input_tokens) * 1 + Decimal(call.output_tokens) * 2) / 1_000_000
    assert call.cost == expected
    assert call.latency_ms > 0 and call.attempts == 1
    assert call.request["messages"] == MESSAGES and call.request["temperature"] == 0
    assert call.prompt_version == "pairwise@1" and len(call.prompt_hash) == 64
    assert call.response["usage"]["prompt_tokens"] == call.input_tokens


def test_a_cache_hit_makes_no_request(judge, scripted):
    first = complete(judge, MESSAGES)
    second = complete(judge, MESSAGES)
    assert second.pk == first.pk
    assert scripted.requests == 1
    assert LLMCall.objects.count() == 1


def test_the_cache_key_covers_endpoint_model_messages_and_parameters():
    base = cache_key("http://x/v1", "m", MESSAGES, {"temperature": 0})
    assert base == cache_key("http://x/v1/", "m", MESSAGES, {"temperature": 0})
    assert base != cache_key("http://y/v1", "m", MESSAGES, {"temperature": 0})
    assert base != cache_key("http://x/v1", "m2", MESSAGES, {"temperature": 0})
    assert base != cache_key("http://x/v1", "m", MESSAGES[:1], {"temperature": 0})
    assert base != cache_key("http://x/v1", "m", MESSAGES, {"temperature": 1})
    assert base != cache_key("http://x/v1", "m", MESSAGES, {"temperature": 0}, salt="sample=1")


def test_rate_limits_and_server_errors_are_retried_until_an_answer(judge, scripted):
    scripted.rules.script = [429, 429, 500]
    call = complete(judge, MESSAGES)
    assert call.ok and call.response_text == "[[B]]"
    assert call.attempts == 4
    assert scripted.requests == 4
    assert scripted.statuses == {429: 2, 500: 1, 200: 1}


def test_retries_are_bounded_and_a_failed_call_is_stored_but_never_cached(judge, scripted):
    scripted.rules.fail_first = 100
    scripted.rules.fail_status = 503
    call = complete(judge, MESSAGES)
    assert call.error.startswith("HTTP 503") and call.attempts == judge.max_attempts
    assert scripted.requests == judge.max_attempts
    scripted.rules.fail_first = 0
    again = complete(judge, MESSAGES)
    assert again.pk == call.pk and again.ok
    assert again.attempts == judge.max_attempts + 1  # attempts accumulate over retries
    assert scripted.requests == judge.max_attempts + 1


def test_client_errors_other_than_429_are_not_retried(judge, scripted):
    scripted.rules.script = [400]
    call = complete(judge, MESSAGES)
    assert call.error.startswith("HTTP 400") and call.attempts == 1
    assert scripted.requests == 1


def test_timeouts_are_retried_and_recorded_when_they_persist(judge, scripted):
    judge.timeout_seconds = 0.2
    judge.max_attempts = 2
    scripted.rules.slow_every = 1  # every answer takes longer than the client waits
    scripted.rules.slow_latency = 0.5
    call = complete(judge, MESSAGES)
    assert "timed out" in call.error and call.attempts == 2
    assert scripted.requests == 2


def test_the_budget_is_checked_before_a_paid_call_but_not_for_a_cache_hit(judge, scripted, study):
    run = JudgeRun.objects.create(study=study, config=judge, method="pairwise", budget_calls=1)
    complete(judge, MESSAGES, run=run)
    with pytest.raises(BudgetExhausted, match="1 of 1 calls"):
        complete(judge, pairwise_messages("x", "y"), run=run)
    assert complete(judge, MESSAGES, run=run).ok  # cached: free
    assert scripted.requests == 1


def test_a_money_budget_stops_before_it_is_overspent(judge, scripted, study):
    run = JudgeRun.objects.create(
        study=study, config=judge, method="pairwise", budget_cost=Decimal("0.0000001")
    )
    complete(judge, MESSAGES, run=run)
    with pytest.raises(BudgetExhausted, match="spent"):
        complete(judge, pairwise_messages("x", "y"), run=run)


def test_requests_in_flight_to_one_endpoint_never_exceed_the_limit(judge, scripted):
    judge.concurrency = 2
    scripted.rules.latency = 0.15
    prepared = [prepare(judge, pairwise_messages(f"idea {i}", "other")) for i in range(6)]
    threads = [threading.Thread(target=send, args=(p,)) for p in prepared]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert scripted.requests == 6
    assert scripted.max_in_flight == 2


def test_reasoning_blocks_reach_the_store_untouched(judge, scripted):
    scripted.rules.think = True
    call = complete(judge, MESSAGES)
    assert call.response_text.startswith("<think>") and call.response_text.endswith("[[B]]")


def test_the_send_pool_keeps_its_width_on_the_wire_and_returns_each_call_with_its_tag(
    judge, scripted
):
    from llm.pool import SendPool

    judge.concurrency = 10  # the client's per-endpoint limit is not what binds here
    scripted.rules.latency = 0.1
    queue = [(i, prepare(judge, pairwise_messages(f"idea {i}", "other"))) for i in range(7)]
    answered: dict[int, str] = {}
    with SendPool[int](3, name="test") as pool:
        while queue or pool:
            while queue and pool.has_room():
                i, prepared = queue.pop(0)
                pool.submit(prepared, i)
            assert len(pool) <= 3
            for i, _prepared, attempt in pool.returned(pool.wait()):
                assert not attempt.error
                answered[i] = attempt.text
    assert sorted(answered) == list(range(7)) and all(answered.values())
    assert scripted.requests == 7 and scripted.max_in_flight == 3


def test_clients_of_different_endpoints_share_one_tls_context_that_checks_certificates(
    judge, scripted
):
    import ssl

    from llm import client as llm_client

    with TestServer(Rules()) as other:
        second = JudgeConfig.objects.create(
            name="other", base_url=other.base_url, model="m", api_key_env="IDEAREVIEW_TEST_KEY"
        )
        clients = [
            llm_client._client(prepare(config, pairwise_messages("a", "b")))
            for config in (judge, second)
        ]
    assert clients[0] is not clients[1]
    contexts = [c._client._transport._pool._ssl_context for c in clients]
    assert contexts[0] is contexts[1]
    assert contexts[0].verify_mode == ssl.CERT_REQUIRED and contexts[0].check_hostname
