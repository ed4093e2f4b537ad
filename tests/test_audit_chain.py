"""The audit log as a hash chain: entries link to the one before, a later edit, removal
or insertion shows, the head is printed in reports and packages, owners read the log and
its check on a page, and existing logs were chained by the migration."""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse

from studies.models import AuditEvent, StudyMember
from studies.protocol.auditchain import GENESIS, chain_verify, entry_hash
from studies.services.audit import audit, audit_chain_check
from studies.services.study import study_create

pytestmark = pytest.mark.embedded  # the chain under each database's locks, and its migration


def _study(owner, slug="chain"):
    return study_create(
        owner=owner,
        slug=slug,
        title="Chain",
        baseline_condition="Human",
        conditions=[("Human", "human"), ("AI", "ai")],
    )


def test_an_entry_hash_is_sha256_of_the_previous_hash_and_the_canonical_entry():
    at = datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    detail = {"b": 2, "a": [1, "é"]}
    text = (
        GENESIS
        + '\n{"actor":"ana","at":"2026-05-01T12:00:00.123456+00:00","detail":{"a":[1,"é"],"b":2},'
        '"seq":1,"verb":"study_created"}'
    )
    expected = hashlib.sha256(text.encode()).hexdigest()
    got = entry_hash(prev=GENESIS, seq=1, verb="study_created", detail=detail, at=at, actor="ana")
    assert got == expected
    entries = [
        {"seq": 1, "verb": "study_created", "detail": detail, "at": at, "actor": "ana",
         "prev_hash": GENESIS, "hash": got},
    ]  # fmt: skip
    assert chain_verify(entries).ok and chain_verify(entries).head == got
    assert chain_verify([]).ok and chain_verify([]).head == GENESIS


@pytest.mark.django_db
def test_appends_chain_and_any_later_edit_removal_or_insertion_breaks_the_chain(owner):
    study = _study(owner)
    for k in range(5):
        audit(study=study, actor=owner, verb="thing_done", k=k, note="ok")
    rows = list(AuditEvent.objects.filter(study=study).order_by("seq"))
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    assert all(b.prev_hash == a.hash for a, b in zip(rows, rows[1:], strict=False))
    assert rows[-1].actor_name == "owner"
    good = audit_chain_check(study)
    assert good.ok and good.head == rows[-1].hash and good.entries == len(rows)

    # an edited detail
    target = rows[2]
    AuditEvent.objects.filter(pk=target.pk).update(detail={**target.detail, "note": "edited"})
    bad = audit_chain_check(study)
    assert not bad.ok and bad.broken_at == target.seq and "changed" in bad.problem
    AuditEvent.objects.filter(pk=target.pk).update(detail=target.detail)
    assert audit_chain_check(study).ok

    # an edited actor name, or time
    AuditEvent.objects.filter(pk=target.pk).update(actor_name="someone else")
    assert audit_chain_check(study).broken_at == target.seq
    AuditEvent.objects.filter(pk=target.pk).update(actor_name=target.actor_name)

    # a removed entry
    AuditEvent.objects.filter(pk=rows[1].pk).delete()
    bad = audit_chain_check(study)
    assert not bad.ok and bad.broken_at == rows[2].seq and "missing" in bad.problem


@pytest.mark.django_db
def test_chains_are_per_study_and_the_servers_own_events_chain_apart(owner):
    a, b = _study(owner, "a"), _study(owner, "b")
    audit(study=a, actor=owner, verb="x")
    audit(study=None, actor=owner, verb="server_thing")
    audit(study=b, actor=None, verb="y")
    assert audit_chain_check(a).ok and audit_chain_check(b).ok and audit_chain_check(None).ok
    first_b = AuditEvent.objects.filter(study=b).order_by("seq").first()
    assert first_b.seq == 1 and first_b.prev_hash == GENESIS
    assert AuditEvent.objects.get(verb="y").actor_name == ""


@pytest.mark.django_db(transaction=True)
def test_parallel_appends_to_one_chain_neither_collide_nor_fork(owner):
    study = _study(owner, "busy")
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for k in range(5):
                audit(study=study, actor=None, verb="parallel", thread=n, k=k)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    check = audit_chain_check(study)
    assert check.ok and AuditEvent.objects.filter(study=study, verb="parallel").count() == 30


@pytest.mark.django_db
def test_owners_read_the_log_and_its_check_others_do_not(owner):
    study = _study(owner, "readable")
    audit(study=study, actor=owner, verb="plan_frozen", hash="abc")
    c = Client()
    c.force_login(owner)
    settings_page = c.get(reverse("studies:study_settings", args=[study.slug])).content.decode()
    url = reverse("studies:study_audit", args=[study.slug])
    assert url in settings_page
    page = c.get(url).content.decode()
    assert 'id="audit-ok"' in page and audit_chain_check(study).head in page
    assert "plan_frozen" in page and "hash: abc" in page

    AuditEvent.objects.filter(study=study, verb="plan_frozen").update(detail={"hash": "xyz"})
    page = c.get(url).content.decode()
    assert 'id="audit-broken"' in page and "changed after it was written" in page

    editor = get_user_model().objects.create_user("editor", password="editor-pass-123")
    StudyMember.objects.create(study=study, user=editor, role=StudyMember.Role.EDITOR)
    c.force_login(editor)
    assert c.get(url).status_code in (403, 404)
    stranger = get_user_model().objects.create_user("stranger", password="stranger-pass-123")
    c.force_login(stranger)
    assert c.get(url).status_code == 404


@pytest.mark.slow  # migrates back and forth
@pytest.mark.django_db(transaction=True)
def test_the_migration_chains_the_entries_written_before_it(owner):
    executor = MigrationExecutor(connection)
    before = [("studies", "0014_reviewer_payment_handle")]
    # every app's leaves: going back unapplies other apps' migrations that depend on
    # studies, and later tests in this process need them applied again
    after = executor.loader.graph.leaf_nodes()
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    Study = old.get_model("studies", "Study")
    Event = old.get_model("studies", "AuditEvent")
    form = old.get_model("studies", "ReviewForm").objects.first() or old.get_model(
        "studies", "ReviewForm"
    ).objects.create(key="f", version=1, title="f", definition={})
    study = Study.objects.create(slug="old", title="Old", owner_id=owner.pk, review_form=form)
    for k in range(3):
        Event.objects.create(study=study, actor_id=owner.pk, verb="old_event", detail={"k": k})
    Event.objects.create(study=None, actor_id=None, verb="server_event", detail={})
    executor = MigrationExecutor(connection)
    executor.migrate(after)

    from studies.models import Study as NewStudy

    check = audit_chain_check(NewStudy.objects.get(slug="old"))
    assert check.ok and check.entries == 3
    rows = AuditEvent.objects.filter(study__slug="old").order_by("seq")
    assert [r.detail["k"] for r in rows] == [0, 1, 2] and rows[0].actor_name == "owner"
    assert audit_chain_check(None).ok
    # and new entries continue the chain
    audit(study=NewStudy.objects.get(slug="old"), actor=owner, verb="new_event")
    assert audit_chain_check(NewStudy.objects.get(slug="old")).entries == 4
    assert json.loads(json.dumps(rows[0].detail)) == {"k": 0}


@pytest.mark.django_db
def test_a_judge_run_enters_the_log_with_its_endpoint_and_model(owner):
    from judging.services.runs import judge_run_cancel, judge_run_create
    from llm.models import JudgeConfig
    from tests.factories import make_pilot_study

    study = make_pilot_study(owner, slug="judged", n_per_condition=3)
    study.ideas.update(normalized_text="An idea.", normalization_status="approved")
    config = JudgeConfig.objects.create(
        name="local judge", base_url="http://127.0.0.1:9/v1", model="judge-model"
    )
    run = judge_run_create(study=study, method="direct", config=config, actor=owner)
    event = AuditEvent.objects.get(study=study, verb="judge_run_created")
    assert event.detail["run"] == run.pk and event.detail["model"] == "judge-model"
    assert event.detail["endpoint"] == "http://127.0.0.1:9/v1" and event.actor_name == "owner"
    judge_run_cancel(run=run)
    assert AuditEvent.objects.filter(study=study, verb="judge_run_cancelled").exists()
    assert audit_chain_check(study).ok
