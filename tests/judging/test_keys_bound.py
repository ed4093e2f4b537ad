"""The administrator's key goes only to its provider: a researcher's judge pointed at a
capture server on loopback never hands it the key, whatever the config says, and a
prepared call whose URL was changed after the check is refused at send time. Researchers'
own keys are encrypted at rest, used only by their own judges, and rotate.

Every server here listens on 127.0.0.1; nothing connects anywhere else."""

from __future__ import annotations

import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.fernet import Fernet
from django.apps import apps as django_apps
from django.core.management import call_command
from django.urls import reverse

from judging.methods.prompts import pairwise_messages
from llm import endpoints
from llm.client import JudgeNotConfigured, complete, prepare, send
from llm.keystore import endpoint_key_save, endpoint_key_value
from llm.models import EndpointKey, JudgeConfig
from studies.services.study import study_create

ADMIN_KEY = "sk-admin-0123456789abcdef-SECRET"
MESSAGES = pairwise_messages("A short idea.", "A longer idea than the other one.")


class Capture:
    """A loopback server that records every request's headers and answers a completion."""

    def __init__(self) -> None:
        self.headers: list[dict[str, str]] = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the handler API)
                capture.headers.append({k.lower(): v for k, v in self.headers.items()})
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": "A"},
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def authorizations(self) -> list[str]:
        return [h.get("authorization", "") for h in self.headers]


@pytest.fixture
def servers(settings, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", ADMIN_KEY)
    settings.OPENAI_API_KEY = ADMIN_KEY
    provider, capture = Capture(), Capture()
    settings.LLM_PROVIDERS = [
        {
            "name": "default",
            "base_url": provider.url,
            "key_env": "OPENAI_API_KEY",
            "models": ["m"],
            "spend_cap": None,
        }
    ]
    settings.LLM_HOST_ALLOWLIST = ["127.0.0.1:*"]
    endpoints.endpoint_checks_forget()
    yield provider, capture
    provider.server.shutdown()
    capture.server.shutdown()
    endpoints.endpoint_checks_forget()


def test_a_capture_server_named_in_a_researchers_judge_never_gets_the_admin_key(
    servers, client, owner
):
    provider, capture = servers
    study = study_create(owner=owner, slug="leak")
    client.force_login(owner)
    url = reverse("judging:config_create", args=[study.slug])
    form = {
        "name": "mine",
        "provider": "",
        "base_url": capture.url,
        "model": "m",
        # what the old form took: the administrator's variable, default of the old field
        "api_key_env": "OPENAI_API_KEY",
        "parameters": "{}",
        "price_input_per_million": "0",
        "price_output_per_million": "0",
        "concurrency": "1",
        "timeout_seconds": "5",
        "max_attempts": "1",
        "backoff_seconds": "0",
    }
    assert client.post(url, form).status_code == 302
    # a provider with the capture server's URL beside it is refused by the form
    body = client.post(url, {**form, "name": "both", "provider": "default"}).content.decode()
    assert "Leave this empty with a provider" in body
    mine = JudgeConfig.objects.get(name="mine")
    call = complete(mine, MESSAGES)
    assert not call.error
    # a row naming a provider and a URL (written around the form) goes to the provider
    both = JudgeConfig.objects.create(
        name="both", provider="default", base_url=capture.url, model="m", api_key_env="X"
    )
    assert not complete(both, pairwise_messages("x", "yy")).error
    assert capture.authorizations() == ["Bearer not-needed"]
    assert ADMIN_KEY not in json.dumps(capture.headers)
    assert provider.authorizations() == [f"Bearer {ADMIN_KEY}"]


def test_a_prepared_provider_call_sent_elsewhere_is_refused_at_send_time(servers, db):
    provider, capture = servers
    config = JudgeConfig.objects.create(name="p", provider="default", model="m", max_attempts=1)
    prepared = prepare(config, MESSAGES)
    assert prepared.api_key == ADMIN_KEY
    moved = dataclasses.replace(prepared, base_url=capture.url)
    attempt = send(moved)
    assert "refused" in attempt.error
    assert capture.headers == [] and provider.headers == []


def test_a_provider_allows_only_its_models_and_a_missing_one_says_so(servers, db):
    config = JudgeConfig.objects.create(name="p", provider="default", model="gpt-other")
    with pytest.raises(JudgeNotConfigured, match="allows the models m"):
        prepare(config, MESSAGES)
    gone = JudgeConfig.objects.create(name="g", provider="nope", model="m")
    with pytest.raises(JudgeNotConfigured, match="no provider 'nope'"):
        prepare(gone, MESSAGES)


def test_a_providers_spending_cap_stops_calls(servers, db, settings):
    provider, _ = servers
    settings.LLM_PROVIDERS = [{**settings.LLM_PROVIDERS[0], "spend_cap": "0.000001"}]
    config = JudgeConfig.objects.create(
        name="p", provider="default", model="m", price_input_per_million=1000
    )
    from llm.client import BudgetExhausted

    assert not complete(config, MESSAGES).error
    with pytest.raises(BudgetExhausted, match="spending cap"):
        from llm import client as llm_client

        llm_client._spent.clear()
        complete(config, pairwise_messages("other", "ideas"))
    assert len(provider.headers) == 1


def test_a_providers_cap_counts_its_own_calls_not_an_own_endpoint_at_its_url(
    servers, db, owner, settings
):
    """The cap is the administrator's money: calls a researcher made with their own key at
    the provider's very URL are not the provider's spend, and calls recorded before calls
    named their provider still count when their judge (or, the judge gone, the URL) says
    they went to it."""
    from decimal import Decimal

    from llm import client as llm_client
    from llm.client import BudgetExhausted
    from llm.models import LLMCall
    from llm.spend import provider_calls

    provider, _ = servers
    settings.LLM_PROVIDERS = [{**settings.LLM_PROVIDERS[0], "spend_cap": "1.0"}]
    via = JudgeConfig.objects.create(name="via", provider="default", model="m")
    bare = JudgeConfig.objects.create(name="bare", model="m")  # no endpoint: the default
    own = JudgeConfig.objects.create(name="own", base_url=provider.url, model="m", created_by=owner)

    def call(config, cost, provider_name):
        return LLMCall.objects.create(
            cache_key=f"ledger-{LLMCall.objects.count()}",
            config=config,
            base_url=provider.url,
            provider=provider_name,
            model="m",
            request={},
            cost=Decimal(cost),
        )

    call(own, "5", "")  # a researcher's own spend at the provider's URL
    call(own, "5", None)  # the same, recorded before calls named their provider
    llm_client._spent.clear()
    assert llm_client.provider_cap_problem(prepare(via, MESSAGES)) is None
    assert not complete(via, MESSAGES).error
    assert provider_calls("default", provider.url).count() == 1
    call(via, "0.4", None)  # recorded before, its judge names the provider
    call(bare, "0.4", None)  # recorded before, its judge named no endpoint
    call(None, "0.3", None)  # recorded before, the judge since deleted: its URL says
    assert provider_calls("default", provider.url).count() == 4
    llm_client._spent.clear()
    with pytest.raises(BudgetExhausted, match=r"spending cap \(1\.1"):
        complete(via, pairwise_messages("another", "pair"))


def test_a_researchers_key_is_encrypted_used_by_their_judges_only_and_sent(servers, db, owner):
    from django.contrib.auth import get_user_model

    _, capture = servers
    other = get_user_model().objects.create_user("other-researcher", password="x-long-pass")
    key = endpoint_key_save(owner=owner, label="lab", secret="sk-mine-abcdefghijkl")
    assert "sk-mine" not in EndpointKey.objects.get(pk=key.pk).token
    mine = JudgeConfig.objects.create(
        name="mine", base_url=capture.url, model="m", endpoint_key=key, created_by=owner
    )
    assert not complete(mine, MESSAGES).error
    assert capture.authorizations() == ["Bearer sk-mine-abcdefghijkl"]
    theirs = JudgeConfig.objects.create(
        name="theirs", base_url=capture.url, model="m", endpoint_key=key, created_by=other
    )
    with pytest.raises(JudgeNotConfigured, match="belongs to someone else"):
        prepare(theirs, MESSAGES)
    from llm.forms import EndpointFields

    form = EndpointFields(
        {"base_url": capture.url, "model": "m", "endpoint_key": str(key.pk)}, user=other
    )
    assert not form.is_valid() and "endpoint_key" in form.errors


def test_endpoint_keys_rotate_to_the_first_secret(db, owner, settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.ENDPOINT_KEY_SECRETS = [old]
    key = endpoint_key_save(owner=owner, label="lab", secret="sk-rotate-me-123456")
    settings.ENDPOINT_KEY_SECRETS = [new, old]
    call_command("endpoint_keys_rotate")
    settings.ENDPOINT_KEY_SECRETS = [new]
    key.refresh_from_db()
    assert endpoint_key_value(key) == "sk-rotate-me-123456"


def test_existing_configs_migrate_to_providers_or_are_disabled_saying_why(
    servers, db, client, owner
):
    provider, capture = servers
    migration = __import__("llm.migrations.0002_providers_and_endpoint_keys", fromlist=["x"])
    study = study_create(owner=owner, slug="migrated")
    matching = JudgeConfig.objects.create(
        name="matching", base_url=provider.url, model="m", api_key_env="OPENAI_API_KEY"
    )
    leaking = JudgeConfig.objects.create(
        name="leaking",
        base_url=capture.url + "x",
        model="m",
        api_key_env="OPENAI_API_KEY",
        created_by=owner,
        study=study,
    )
    keyless = JudgeConfig.objects.create(name="keyless", base_url=capture.url, model="m")
    migration.configs_to_providers(django_apps, None)
    matching.refresh_from_db()
    leaking.refresh_from_db()
    keyless.refresh_from_db()
    assert matching.provider == "default" and not matching.disabled_reason
    assert "not that key's provider" in leaking.disabled_reason
    assert keyless.provider == "" and not keyless.disabled_reason
    with pytest.raises(JudgeNotConfigured, match="disabled"):
        prepare(leaking, MESSAGES)
    client.force_login(owner)
    page = client.get(reverse("judging:home", args=[study.slug])).content.decode()
    assert "Disabled:" in page and "not that key" in page
    assert capture.headers == []


def test_a_disabled_judge_or_one_with_headers_in_its_parameters_cannot_run(servers, db, owner):
    from judging.services import JudgeRunRefused, judge_run_create
    from tests.factories import review_study

    study = review_study(owner, n_reviewers=1, n_ideas=4, per_reviewer=1).study
    off = JudgeConfig.objects.create(
        name="off",
        provider="default",
        model="m",
        disabled_reason="it leaked",
        created_by=owner,
        study=study,
    )
    with pytest.raises(JudgeRunRefused, match="disabled: it leaked"):
        judge_run_create(study=study, method="pairwise", config=off)
    headers = JudgeConfig.objects.create(
        name="h", provider="default", model="m", parameters={"extra_headers": {"X": "1"}}
    )
    with pytest.raises(JudgeNotConfigured, match="extra_headers"):
        prepare(headers, MESSAGES)
    provider, capture = servers
    assert provider.headers == [] and capture.headers == []
