"""A study's judges added, changed and removed are entries of the study's audit chain
(the server's chain for an administrator's judge), written by the judge services whatever
page or command calls them; a key is named by its label, never by its value."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from judging.models import JudgeRun
from llm.keystore import endpoint_key_save
from llm.models import JudgeConfig
from llm.services import (
    JudgeConfigRefused,
    judge_config_create,
    judge_config_delete,
    judge_config_update,
)
from studies.models import AuditEvent
from studies.services.audit import audit_chain_check
from tests.judging.conftest import make_study

pytestmark = pytest.mark.django_db
User = get_user_model()
VERBS = ("judge_config_added", "judge_config_changed", "judge_config_removed")


def _events(study):
    return list(AuditEvent.objects.filter(study=study, verb__in=VERBS).order_by("seq"))


@pytest.fixture
def owner():
    from accounts.roles import researcher_grant

    user = User.objects.create(username="ada")
    researcher_grant(user=user)
    return user


def test_the_owner_adding_and_removing_a_judge_on_the_pages_is_in_the_studys_chain(owner):
    study = make_study(owner, slug="audited")
    client = Client()
    client.force_login(owner)
    form = {
        "name": "lab-judge",
        "provider": "",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m-1",
        "parameters": '{"temperature": 0}',
        "price_input_per_million": "1.5",
        "price_output_per_million": "2",
        "concurrency": "3",
        "timeout_seconds": "30",
        "max_attempts": "2",
        "backoff_seconds": "0.5",
    }
    assert client.post(reverse("judging:config_create", args=[study.slug]), form).status_code == 302
    config = JudgeConfig.objects.get(name="lab-judge")
    added = _events(study)
    assert [e.verb for e in added] == ["judge_config_added"]
    assert added[0].actor == owner
    detail = added[0].detail
    assert detail["config"] == config.pk and detail["name"] == "lab-judge"
    assert detail["base_url"] == "http://127.0.0.1:9/v1" and detail["model"] == "m-1"
    assert detail["parameters"] == {"temperature": 0} and detail["concurrency"] == 3
    assert Decimal(detail["price_input_per_million"]) == Decimal("1.5")

    url = reverse("judging:config_delete", args=[study.slug, config.pk])
    assert client.post(url).status_code == 302
    assert not JudgeConfig.objects.filter(pk=config.pk).exists()
    events = _events(study)
    assert [e.verb for e in events] == ["judge_config_added", "judge_config_removed"]
    assert events[1].detail["config"] == config.pk and events[1].detail["model"] == "m-1"
    # entries of the same chain as the study's other events, and it verifies
    assert events[1].seq > events[0].seq > 1
    check = audit_chain_check(study)
    assert check.ok and check.entries == AuditEvent.objects.filter(study=study).count()


def test_a_change_names_each_changed_field_and_a_change_to_nothing_writes_nothing(owner):
    study = make_study(owner, slug="changed")
    config = judge_config_create(
        name="j", study=study, actor=owner, base_url="http://127.0.0.1:9/v1", model="m-1"
    )
    judge_config_update(
        config=config, actor=owner, model="m-2", concurrency=config.concurrency, name=" j2 "
    )
    config.refresh_from_db()
    assert (config.model, config.name) == ("m-2", "j2")
    changed = _events(study)[-1]
    assert changed.verb == "judge_config_changed" and changed.actor == owner
    assert changed.detail["changed"] == {"model": ["m-1", "m-2"], "name": ["j", "j2"]}
    before = AuditEvent.objects.filter(study=study).count()
    judge_config_update(config=config, actor=owner, model="m-2")
    assert AuditEvent.objects.filter(study=study).count() == before
    assert audit_chain_check(study).ok


def test_a_change_is_refused_for_a_taken_name_or_a_move_and_writes_nothing(owner):
    study = make_study(owner, slug="refused")
    other = make_study(owner, slug="other")
    one = judge_config_create(name="one", study=study, actor=owner, base_url="http://x/v1")
    judge_config_create(name="two", study=study, actor=owner, base_url="http://x/v1")
    n = AuditEvent.objects.filter(study=study).count()
    with pytest.raises(JudgeConfigRefused):
        judge_config_update(config=one, actor=owner, name="two")
    with pytest.raises(ValueError):
        judge_config_update(config=one, actor=owner, study=other)
    assert AuditEvent.objects.filter(study=study).count() == n
    assert JudgeConfig.objects.get(pk=one.pk).name == "one"


def test_a_judge_runs_used_stays_and_its_refused_removal_writes_nothing(owner):
    study = make_study(owner, slug="kept")
    config = judge_config_create(name="used", study=study, actor=owner, base_url="http://x/v1")
    JudgeRun.objects.create(study=study, method="direct", config=config)
    n = AuditEvent.objects.filter(study=study).count()
    with pytest.raises(JudgeConfigRefused):
        judge_config_delete(config=config, actor=owner)
    assert AuditEvent.objects.filter(study=study).count() == n


def test_a_key_is_named_by_its_label_never_its_value(owner):
    study = make_study(owner, slug="keyed")
    key = endpoint_key_save(owner=owner, label="lab key", secret="sk-secret-value-1234567")
    judge_config_create(
        name="keyed", study=study, actor=owner, base_url="http://x/v1", model="m", endpoint_key=key
    )
    entry = _events(study)[-1]
    assert entry.detail["endpoint_key"] == str(key)
    assert "sk-secret" not in str(entry.detail) and key.token not in str(entry.detail)


def test_the_administrators_judge_is_in_the_servers_chain():
    config = judge_config_create(name="shared", base_url="http://x/v1", model="m")
    entry = AuditEvent.objects.get(study__isnull=True, verb="judge_config_added")
    assert entry.detail["config"] == config.pk and entry.actor is None
    judge_config_delete(config=config)
    assert AuditEvent.objects.filter(study__isnull=True, verb="judge_config_removed").count() == 1
    assert audit_chain_check(None).ok


def test_a_judge_made_on_the_normalization_page_is_recorded_too(owner):
    study = make_study(owner, slug="normalized")
    client = Client()
    client.force_login(owner)
    client.post(
        reverse("studies:normalization_config", args=[study.slug]),
        {"form": "create", "name": "norm", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
        | {"concurrency": "2", "timeout_seconds": "30"},
    )
    entry = _events(study)[-1]
    assert entry.verb == "judge_config_added" and entry.detail["name"] == "norm"


def test_a_judge_changed_or_removed_in_djangos_admin_is_recorded_too(owner):
    from django.contrib import admin
    from django.test import RequestFactory

    study = make_study(owner, slug="admined")
    staff = User.objects.create(username="root", is_staff=True, is_superuser=True)
    request = RequestFactory().post("/admin/")
    request.user = staff
    site = admin.site._registry[JudgeConfig]
    config = JudgeConfig(name="by-admin", study=study, base_url="http://x/v1", model="m")
    site.save_model(request, config, None, change=False)
    added = _events(study)[-1]
    assert added.verb == "judge_config_added" and added.actor == staff
    assert added.detail["via"] == "admin" and added.detail["model"] == "m"

    config = JudgeConfig.objects.get(pk=config.pk)
    config.model, config.concurrency = "m2", 9
    site.save_model(request, config, None, change=True)
    changed = _events(study)[-1]
    assert changed.detail["changed"] == {"model": ["m", "m2"], "concurrency": [4, 9]}

    site.delete_queryset(request, JudgeConfig.objects.filter(pk=config.pk))
    assert _events(study)[-1].verb == "judge_config_removed"
    assert not JudgeConfig.objects.filter(pk=config.pk).exists()
    assert audit_chain_check(study).ok
