"""A whole study survives study_export → an empty database → study_import → study_export:
the two files are identical, and every section (ideas and their text versions, reviewers,
assignments, reviews with revisions, pair ratings, judge runs and their calls) is there."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from judging.llm.models import LLMCall
from judging.models import JudgeRun
from studies.models import Review, ReviewRevision, Study, Topic

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def demo(settings, tmp_path):
    settings.IDEAREVIEW_CHROMIUM = "/nonexistent/chromium"  # no PDF: not what is tested
    call_command(
        "demo_study",
        "--slug",
        "demo-t",
        "--ideas-per-condition",
        "6",
        "--reviewers",
        "8",
        "--seed",
        "5",
        "--out",
        str(tmp_path / "report"),
        stdout=io.StringIO(),
        stderr=io.StringIO(),
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

    from studies.transfer import SHARED_MODELS, STUDY_SECTIONS

    covered = {s.model for s in STUDY_SECTIONS} | {s.model for s in SHARED_MODELS.values()}
    missing = [
        model._meta.label
        for app in ("studies", "judging", "llm")
        for model in apps.get_app_config(app).get_models()
        if model not in covered
    ]
    assert missing == []
