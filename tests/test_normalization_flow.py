"""Style normalization end to end: a job against the scripted OpenAI-compatible server
over HTTP (retries, timeouts, refusals, resume), the automatic checks flagging a rewrite
that lost a number or a model name, and the owner's sign-off with its permissions."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client
from django.urls import reverse

from judging.testserver import Rules, TestServer
from llm.models import JudgeConfig, LLMCall
from studies import services
from studies.models import (
    Assignment,
    AuditEvent,
    Idea,
    IdeaRevision,
    JobRun,
    NormalizationResult,
    Reviewer,
    Study,
)
from studies.protocol.normalization import NORMALIZATION_PROMPT_VERSION, prompt_sha256
from studies.tasks import normalize_ideas
from tests.factories import TEXTS, make_prep_study


@pytest.fixture
def server():
    with TestServer(Rules()) as s:
        yield s


@pytest.fixture
def config(db, server):
    return JudgeConfig.objects.create(
        name="scripted-normalizer",
        base_url=server.base_url,
        model="scripted-1",
        api_key_env="IDEAREVIEW_TEST_KEY",
        concurrency=3,
        timeout_seconds=5,
        max_attempts=3,
        backoff_seconds=0.001,
    )


@pytest.fixture
def prep(db, owner, config):
    study, ideas = make_prep_study(owner)
    study.normalization_config = config
    study.save()
    return study, ideas


def run_job(study, owner, capture, **kw) -> JobRun:
    """Enqueue as the view does, then run the Celery task in this process."""
    with capture(execute=False) as callbacks:
        job = services.normalization_enqueue(study=study, actor=owner, **kw)
    assert len(callbacks) == 1  # the task is sent only once the job row is committed
    normalize_ideas(job.pk)
    job.refresh_from_db()
    return job


def fresh(idea: Idea) -> Idea:
    idea.refresh_from_db()
    return idea


def test_the_job_rewrites_over_http_with_retries_and_flags_a_lost_number_and_model_name(
    prep, owner, server, django_capture_on_commit_callbacks, monkeypatch
):
    study, ideas = prep
    server.rules.script = [429, 500]
    server.rules.normalize_drop = ["GPT-4", "42"]
    seen: list[int] = []
    real_progress = services.job_progress

    def spy(*, job, done, total=None, message=""):
        seen.append(done)
        real_progress(job=job, done=done, total=total, message=message)

    monkeypatch.setattr("studies.services.ideas.job_progress", spy)
    job = run_job(study, owner, django_capture_on_commit_callbacks)

    assert job.status == JobRun.Status.DONE and job.done == job.total == 3
    assert seen[0] == 0 and seen[-1] == 3 and sorted(seen) == seen
    assert "3 rewritten (2 flagged), 0 failed" in job.message
    assert server.statuses[429] == 1 and server.statuses[500] == 1 and server.answered == 3

    gpt, number, clean = (fresh(ideas[k]) for k in ("gpt", "number", "clean"))
    assert {i.normalization_status for i in (gpt, number, clean)} == {"proposed"}
    assert "names" in gpt.normalization_flags
    assert number.normalization_flags == ["numbers"]
    assert clean.normalization_flags == []
    result = NormalizationResult.objects.get(idea=gpt)
    lost = {c["name"]: c["lost"] for c in result.checks if not c["passed"]}
    assert "GPT-4" in lost["names"]
    assert [c["name"] for c in result.checks][-1] == "similarity"
    assert result.prompt_version == NORMALIZATION_PROMPT_VERSION
    assert result.prompt_hash == prompt_sha256()
    assert result.model == "scripted-1" and result.call is not None
    assert result.call.prompt_version == NORMALIZATION_PROMPT_VERSION
    assert sum(r.attempts for r in NormalizationResult.objects.all()) == 5
    # nothing reaches reviewers before sign-off
    assert all(fresh(i).reviewable_text() == "" for i in ideas.values())


def test_failures_are_recorded_per_idea_and_a_resumed_job_finishes_the_rest(
    prep, owner, server, config, django_capture_on_commit_callbacks
):
    study, ideas = prep
    config.max_attempts = 2
    config.concurrency = 1  # requests in idea order, so the first idea gets both 429s
    config.timeout_seconds = 0.3
    config.save()
    server.rules.fail_first = 2  # one idea gets 429 twice: out of attempts
    server.rules.normalize_refuse_when = "Vote over samples"
    job = run_job(study, owner, django_capture_on_commit_callbacks)
    assert job.status == "done"
    results = {r.idea.title: r for r in NormalizationResult.objects.select_related("idea")}
    failed = [r for r in results.values() if r.status == "failed"]
    assert {r.idea.title for r in failed} >= {"number"}
    assert "refused" in results["number"].error
    assert any("HTTP 429" in r.error for r in failed)
    assert all(fresh(r.idea).normalization_flags == ["llm_error"] for r in failed)
    assert all(fresh(r.idea).normalization_status == "none" for r in failed)
    page = Client()
    page.force_login(owner)
    body = page.get(reverse("studies:normalization", args=[study.slug])).content.decode()
    assert "HTTP 429" in body and "refused" in body

    # resume: only the ideas without a rewrite go out again; a timeout is retried
    server.rules.fail_first = 0
    server.rules.normalize_refuse_when = ""
    server.rules.slow_every = 1
    server.rules.slow_latency = 0.5
    server.reset_counts()
    proposed_before = {i.pk for i in ideas.values() if fresh(i).normalization_status == "proposed"}
    job2 = run_job(study, owner, django_capture_on_commit_callbacks)
    assert job2.total == len(failed)
    assert all("timed out" in r.error for r in NormalizationResult.objects.filter(job=job2))
    server.rules.slow_every = 0
    server.reset_counts()
    job3 = run_job(study, owner, django_capture_on_commit_callbacks)
    assert job3.status == "done" and server.answered == len(failed)
    assert {fresh(i).normalization_status for i in ideas.values()} == {"proposed"}
    assert proposed_before.isdisjoint(set(job3.params["idea_ids"]))


def test_an_idea_without_text_is_not_sent_to_the_model(
    prep, owner, server, django_capture_on_commit_callbacks
):
    """An idea that came with imported reviews has a title and no text: a call for it
    could only come back empty and count as a failure."""
    study, ideas = prep
    any_idea = next(iter(ideas.values()))
    empty = Idea.objects.create(study=study, topic=any_idea.topic, title="No text here")
    job = run_job(study, owner, django_capture_on_commit_callbacks)
    assert job.status == "done"
    assert empty.pk not in job.params["idea_ids"]
    assert server.answered == len(ideas)
    assert fresh(empty).normalization_status == Idea.NormalizationStatus.NONE
    assert "failed" not in job.message or ", 0 failed" in job.message


def test_an_approved_idea_is_never_normalised_again(
    prep, owner, server, django_capture_on_commit_callbacks
):
    study, ideas = prep
    run_job(study, owner, django_capture_on_commit_callbacks)
    services.normalization_approve(idea=ideas["clean"], actor=owner)
    requests = server.requests
    with pytest.raises(services.PreparationError, match="already has a rewrite"):
        services.normalization_enqueue(study=study, actor=owner)
    with pytest.raises(services.PreparationError, match="approved"):
        services.normalization_rerun(idea=fresh(ideas["clean"]), actor=owner)
    # a re-run of another idea goes out fresh (not from the cache) and leaves "clean" alone
    job = services.normalization_rerun(idea=ideas["gpt"], actor=owner)
    normalize_ideas(job.pk)
    assert server.requests == requests + 1
    assert fresh(ideas["clean"]).normalization_status == "approved"
    statuses = list(
        NormalizationResult.objects.filter(idea=ideas["gpt"]).values_list("status", flat=True)
    )
    assert sorted(statuses) == ["proposed", "superseded"]


def test_sign_off_approve_edit_reject_and_rerun_through_the_web_are_audited(
    prep, owner, server, django_capture_on_commit_callbacks
):
    study, ideas = prep
    server.rules.normalize_drop = ["GPT-4"]
    run_job(study, owner, django_capture_on_commit_callbacks)
    c = Client()
    c.force_login(owner)

    def decide(idea, **data):
        return c.post(reverse("studies:idea_decide", args=[study.slug, idea.pk]), data)

    page = c.get(reverse("studies:idea_signoff", args=[study.slug, ideas["gpt"].pk]))
    body = page.content.decode()
    assert body.index('id="failed-checks"') < body.index('id="diff-original"')
    assert "missing names: GPT-4" in body and "<del>GPT-4 </del>" in body

    assert decide(ideas["clean"], action="approve").status_code == 302
    clean = fresh(ideas["clean"])
    assert clean.normalization_status == "approved"
    assert clean.reviewable_text() == clean.normalized_text != ""
    assert IdeaRevision.objects.get(idea=clean).number == 1

    edited = TEXTS["gpt"].replace("twice", "two times")
    decide(ideas["gpt"], action="edit", text=edited)
    gpt = fresh(ideas["gpt"])
    assert gpt.normalization_status == "edited" and gpt.reviewable_text() == edited.strip()
    assert gpt.normalization_flags == []  # the edit kept GPT-4, so the re-run checks pass
    # a later edit makes a new version, the first decision stays on record
    decide(ideas["gpt"], action="edit", text=edited + "\nOne more line.")
    assert list(gpt.revisions.values_list("number", flat=True)) == [1, 2]
    assert NormalizationResult.objects.filter(idea=gpt, status="edited").count() == 2

    decide(ideas["number"], action="reject", reason="lost the 42")
    number = fresh(ideas["number"])
    assert number.normalization_status == "rejected" and number.reviewable_text() == ""
    with django_capture_on_commit_callbacks(execute=False):
        decide(number, action="rerun")
    job = JobRun.objects.filter(kind="normalization").first()
    assert job.params["rerun"] is True and job.params["idea_ids"] == [number.pk]

    verbs = list(AuditEvent.objects.filter(study=study).values_list("verb", flat=True))
    for verb in [
        "normalization_approved",
        "normalization_edited",
        "normalization_rejected",
        "normalization_rerun",
    ]:
        assert verb in verbs
    assert AuditEvent.objects.get(verb="normalization_rejected").actor == owner


def test_another_researcher_can_neither_see_nor_decide_a_sign_off(
    prep, owner, other_researcher, django_capture_on_commit_callbacks
):
    study, ideas = prep
    run_job(study, owner, django_capture_on_commit_callbacks)
    c = Client()
    c.force_login(other_researcher)
    idea = ideas["clean"]
    assert c.get(reverse("studies:idea_signoff", args=[study.slug, idea.pk])).status_code == 404
    response = c.post(
        reverse("studies:idea_decide", args=[study.slug, idea.pk]), {"action": "approve"}
    )
    assert response.status_code == 404
    assert c.post(reverse("studies:normalization_start", args=[study.slug])).status_code == 404
    assert fresh(idea).normalization_status == "proposed"
    anonymous = Client().get(reverse("studies:idea_signoff", args=[study.slug, idea.pk]))
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]


def test_approved_text_cannot_change_once_reviewers_have_the_idea(
    prep, owner, django_capture_on_commit_callbacks
):
    study, ideas = prep
    run_job(study, owner, django_capture_on_commit_callbacks)
    idea = services.normalization_approve(idea=ideas["clean"], actor=owner)
    reviewer = Reviewer.objects.create(study=study, pseudonym="R001")
    Assignment.objects.create(study=study, reviewer=reviewer, idea=idea)
    # Committed but not open: no reviewer has read it, so it may still change.
    assert not fresh(idea).is_text_locked()
    Study.objects.filter(pk=study.pk).update(status=Study.Status.REVIEWING)
    idea = fresh(idea)
    with pytest.raises(services.PreparationError, match="reviewers already have"):
        services.normalization_edit(idea=idea, text="Another text.", actor=owner)
    with pytest.raises(services.PreparationError, match="reviewers already have"):
        services.normalization_reject(idea=idea, actor=owner)
    assert fresh(idea).revisions.count() == 1


def test_the_page_says_clearly_when_no_endpoint_is_configured(db, owner, settings):
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_MODEL = ""
    settings.LLM_PROVIDERS = []
    study, _ = make_prep_study(owner)
    c = Client()
    c.force_login(owner)
    url = reverse("studies:normalization", args=[study.slug])
    assert "Choose or create a judge config" in c.get(url).content.decode()
    form = {"form": "create", "name": "no-endpoint", "concurrency": 2, "timeout_seconds": 30}
    response = c.post(reverse("studies:normalization_config", args=[study.slug]), form, follow=True)
    assert "Choose a provider, or give your own endpoint" in response.content.decode()
    study.refresh_from_db()
    assert study.normalization_config is None
    # a config written around the form, naming no endpoint (the default provider, absent)
    config = JudgeConfig.objects.create(name="no-endpoint", created_by=owner, study=study)
    c.post(reverse("studies:normalization_config", args=[study.slug]), {"config": config.pk})
    study.refresh_from_db()
    assert study.normalization_config.name == "no-endpoint"
    body = c.get(url).content.decode()
    assert "No OpenAI-compatible endpoint is configured" in body
    c.post(reverse("studies:normalization_start", args=[study.slug]))
    assert not JobRun.objects.filter(kind="normalization").exists()
    assert LLMCall.objects.count() == 0


def test_the_run_button_answers_htmx_with_a_progress_bar(
    prep, owner, django_capture_on_commit_callbacks
):
    study, _ = prep
    c = Client()
    c.force_login(owner)
    with django_capture_on_commit_callbacks(execute=False):
        response = c.post(
            reverse("studies:normalization_start", args=[study.slug]), HTTP_HX_REQUEST="true"
        )
    body = response.content.decode()
    job = JobRun.objects.get(kind="normalization")
    poll = reverse("studies:job_status", args=[study.slug, job.pk])
    assert "<progress" in body and f'hx-get="{poll}"' in body and f'href="{poll}"' in body
    normalize_ideas(job.pk)
    done = c.get(poll, HTTP_HX_REQUEST="true")
    assert done["HX-Refresh"] == "true" and "hx-trigger" not in done.content.decode()


def test_the_leakage_export_shuffles_approved_texts_and_keeps_the_key_apart(
    prep, owner, django_capture_on_commit_callbacks
):
    study, ideas = prep
    run_job(study, owner, django_capture_on_commit_callbacks)
    for key in ("clean", "number"):
        services.normalization_approve(idea=ideas[key], actor=owner)
    c = Client()
    c.force_login(owner)
    c.post(reverse("studies:leakage", args=[study.slug]))
    export = study.leakage_exports.get()
    texts = c.get(reverse("studies:leakage_download", args=[study.slug, export.pk, "texts"]))
    rows = list(csv.DictReader(io.StringIO(texts.content.decode())))
    assert len(rows) == 2 and set(rows[0]) == {"code", "text", "guess (human or ai)"}
    assert all("Human" not in r["text"] for r in rows)
    key = c.get(reverse("studies:leakage_download", args=[study.slug, export.pk, "key"]))
    key_rows = list(csv.DictReader(io.StringIO(key.content.decode())))
    assert {r["code"] for r in key_rows} == {r["code"] for r in rows}
    assert {r["kind"] for r in key_rows} == {"human", "ai"}
