"""A whole study survives study_export → an empty database → study_import → study_export:
the two files are identical, and every section (ideas and their text versions, reviewers,
assignments, reviews with revisions, pair ratings, judge runs and their calls) is there."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from django.core.management import CommandError, call_command

from judging.models import JudgeRun
from llm.models import LLMCall
from studies.demo import demo_study_build
from studies.models import Review, ReviewRevision, Study, Topic
from studies.services.audit import audit_chain_check
from tests.factories import FAST

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def demo(settings, tmp_path):
    """The demo study (judge runs, pair ratings, a report) with a cheap report: the round
    trip is about the rows, not the report's statistics."""
    settings.IDEAREVIEW_CHROMIUM = "/nonexistent/chromium"  # no PDF: not what is tested
    demo_study_build(
        slug="demo-t",
        ideas_per_condition=6,
        reviewers=8,
        seed=5,
        out_dir=tmp_path / "report",
        report_options=dataclasses.replace(FAST, ordinal="none"),
    )
    return Study.objects.get(slug="demo-t")


def test_the_demo_study_round_trips_through_an_empty_database_unchanged(demo, tmp_path):
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    call_command("study_export", "demo-t", str(first), stdout=io.StringIO())
    counts = {
        "reviews": Review.objects.count(),
        "revisions": ReviewRevision.objects.count(),
        "runs": JudgeRun.objects.count(),
        "calls": LLMCall.objects.count(),
    }
    data = json.loads(first.read_text())
    for label in (
        "studies.idea",
        "studies.idearevision",
        "studies.normalizationresult",
        "studies.reviewer",
        "studies.assignment",
        "studies.review",
        "studies.reviewrevision",
        "studies.reviewscore",
        "studies.pairtask",
        "studies.pairjudgment",
        "judging.judgerun",
        "llm.llmcall",
        "judging.judgment",
        "judging.pairwiseoutcome",
    ):
        assert data["sections"][label], label
    assert "password" not in first.read_text()

    # A file written before the configs and calls moved to the llm app, under their old
    # labels, reads the same.
    older = tmp_path / "older.json"
    data["shared"]["judging.judgeconfig"] = data["shared"].pop("llm.judgeconfig")
    data["sections"]["judging.llmcall"] = data["sections"].pop("llm.llmcall")
    older.write_text(json.dumps(data))

    before = audit_chain_check(demo)
    call_command("flush", interactive=False, verbosity=0)
    assert not Study.objects.exists() and not LLMCall.objects.exists()
    call_command("study_import", str(older), stdout=io.StringIO())
    call_command("study_export", "demo-t", str(second), stdout=io.StringIO())
    assert second.read_text() == first.read_text()
    assert counts == {
        "reviews": Review.objects.count(),
        "revisions": ReviewRevision.objects.count(),
        "runs": JudgeRun.objects.count(),
        "calls": LLMCall.objects.count(),
    }
    # the restored study works: its owner can open it, and new rows get fresh ids
    study = Study.objects.get(slug="demo-t")
    # its audit log came with it and still verifies to the same head (names, not ids)
    check = audit_chain_check(study)
    assert check.ok and check.entries == before.entries > 0 and check.head == before.head
    assert study.owner.has_usable_password() is False
    assert Review.objects.filter(study=study, status="submitted").count() == counts["reviews"]
    Topic.objects.create(study=study, name="A topic added after the restore")
    LLMCall.objects.create(cache_key="after-restore", request={}, model="m")

    # importing the same file again is refused before anything is written
    with pytest.raises(CommandError, match="exists here already"):
        call_command("study_import", str(first), stdout=io.StringIO())


def test_every_model_of_studies_judging_and_llm_is_in_the_study_file():
    # A new model that a study's rows hang on must be registered, or exports lose it.
    from django.apps import apps

    from studies.services.transfer import SHARED_MODELS, STUDY_SECTIONS

    covered = {s.model for s in STUDY_SECTIONS} | {s.model for s in SHARED_MODELS.values()}
    # A researcher's own endpoint keys never leave the installation (encrypted under its
    # secrets, and a secret either way): a moved judge config arrives without its key.
    # A Batch API request's bookkeeping (file and batch ids at this installation's
    # endpoint account) means nothing elsewhere; its calls travel as calls.
    kept_here = {"llm.EndpointKey", "llm.LLMBatch"}
    missing = [
        model._meta.label
        for app in ("studies", "judging", "llm")
        for model in apps.get_app_config(app).get_models()
        if model not in covered and model._meta.label not in kept_here
    ]
    assert missing == []
    from llm.models import JudgeConfig

    shared = next(s for s in SHARED_MODELS.values() if s.model is JudgeConfig)
    assert "endpoint_key" not in shared.fields


def test_a_deleted_study_leaves_nothing_behind_and_its_export_imports_back(
    demo, owner, tmp_path, settings
):
    from studies.models import AuditEvent, Idea, NormalizationResult
    from studies.services.study import _study_calls, study_create, study_delete
    from studies.storage import reports_storage

    settings.REPORTS_ROOT = tmp_path / "reports"
    storage = reports_storage()
    storage.save("demo-t/20260101T000000/report.json", io.BytesIO(b"{}"))
    export = tmp_path / "before.json"
    call_command("study_export", "demo-t", str(export), stdout=io.StringIO())
    calls = _study_calls(demo)
    # normalization calls carry the ideas' text: they must go with the study
    texts = list(demo.ideas.values_list("raw_text", flat=True))
    holding = [
        c.pk
        for c in LLMCall.objects.filter(pk__in=calls)
        for m in c.request.get("messages", [])
        if any(t.strip()[:60] in str(m.get("content", "")) for t in texts if t.strip())
    ]
    assert len(calls) > 10 and holding

    # another study's row reuses one of the calls (a cache hit across studies)
    other = study_create(owner=owner, slug="other", title="Other")
    shared = LLMCall.objects.filter(pk__in=calls, run__isnull=False).first()
    topic = Topic.objects.create(study=other, name="T")
    kept_by = NormalizationResult.objects.create(
        idea=Idea.objects.create(study=other, topic=topic, title="x"),
        call=shared,
        prompt_version="v",
        prompt_hash="h",
        source_text="x",
    )

    removed = study_delete(study=demo, confirm="demo-t", actor=owner)
    assert removed["calls"] == len(calls) - 1 and removed["calls_kept"] == 1
    assert list(LLMCall.objects.filter(pk__in=calls)) == [shared]
    kept_by.refresh_from_db()
    assert kept_by.call_id == shared.pk
    assert not Study.objects.filter(slug="demo-t").exists()
    assert not storage.exists("demo-t/20260101T000000/report.json")
    event = AuditEvent.objects.get(study__isnull=True, verb="study_deleted")
    assert event.detail["slug"] == "demo-t" and event.detail["calls"] == len(calls) - 1

    # the export taken before the delete imports back into this database, unchanged
    call_command("study_import", str(export), stdout=io.StringIO())
    again = tmp_path / "after.json"
    call_command("study_export", "demo-t", str(again), stdout=io.StringIO())
    assert again.read_text() == export.read_text()
    shared.refresh_from_db()
    assert shared.run is not None  # the reused call has its run back
