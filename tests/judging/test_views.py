"""The owner's judge pages against the personas, the run page's polling, results."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from judging.models import JudgeRun, ReferenceCorpus
from judging.services import judge_run_create, judge_run_execute
from llm.models import EndpointKey, JudgeConfig
from studies.models import AuditEvent, Reviewer
from tests.judging.conftest import make_study

CORPUS = Path(__file__).parent / "data" / "references.json"
Status = JudgeRun.Status


@pytest.fixture
def owned(db, owner):
    return make_study(owner, slug="owned")


@pytest.fixture
def a_run(owned):
    return judge_run_create(study=owned, method="baseline_random")


@pytest.fixture
def reviewer_user(db, owned):
    user = get_user_model().objects.create_user("rev", password="rev-pass-123")
    Reviewer.objects.create(study=owned, user=user, pseudonym="R1")
    return user


def get_urls(slug, run_id):
    return [
        reverse("judging:home", args=[slug]),
        reverse("judging:config_create", args=[slug]),
        reverse("judging:run_create", args=[slug]),
        reverse("judging:run_detail", args=[slug, run_id]),
        reverse("judging:corpora", args=[slug]),
    ]


def post_urls(slug, run_id):
    return [
        reverse("judging:config_create", args=[slug]),
        reverse("judging:run_create", args=[slug]),
        reverse("judging:run_cancel", args=[slug, run_id]),
        reverse("judging:run_resume", args=[slug, run_id]),
        reverse("judging:corpora", args=[slug]),
    ]


def test_the_owner_opens_every_judging_page(client, owner, owned, a_run):
    client.force_login(owner)
    for url in get_urls(owned.slug, a_run.pk):
        response = client.get(url)
        assert response.status_code == 200, url
        assert "LLM judges" in response.content.decode()  # the owner nav links here


@pytest.mark.parametrize("persona", ["other_researcher", "reviewer_user"])
def test_other_researchers_and_reviewers_get_404_on_every_judging_view(
    client, request, persona, owned, a_run
):
    client.force_login(request.getfixturevalue(persona))
    for url in get_urls(owned.slug, a_run.pk):
        assert client.get(url).status_code == 404, url
    for url in post_urls(owned.slug, a_run.pk):
        assert client.post(url, {"name": "x", "method": "baseline_random"}).status_code == 404
    assert JudgeRun.objects.count() == 1 and not JudgeConfig.objects.exists()


def test_anonymous_visitors_are_sent_to_log_in(client, owned, a_run):
    for url in get_urls(owned.slug, a_run.pk) + post_urls(owned.slug, a_run.pk):
        response = client.post(url) if url in post_urls(owned.slug, a_run.pk) else client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"], url


def test_a_run_of_another_study_is_404_even_for_an_owner(client, owner, owned, other_researcher):
    theirs = make_study(other_researcher, slug="theirs")
    run = judge_run_create(study=theirs, method="baseline_random")
    client.force_login(owner)
    assert client.get(reverse("judging:run_detail", args=[owned.slug, run.pk])).status_code == 404


def test_a_judge_is_saved_with_a_saved_key_never_a_key_in_the_config(client, owner, owned):
    client.force_login(owner)
    keys = reverse("judging:key_create", args=[owned.slug])
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    response = client.post(keys, {"label": "my lab key", "secret": secret})
    assert response.status_code == 302
    page = client.get(reverse("judging:config_create", args=[owned.slug])).content.decode()
    assert "my lab key" in page and "abcdefghijklmnop" not in page  # never shown again
    key = EndpointKey.objects.get(owner=owner)
    assert "abcdefghijklmnop" not in key.token
    url = reverse("judging:config_create", args=[owned.slug])
    form = {
        "name": "local",
        "provider": "",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "endpoint_key": str(key.pk),
        "parameters": '{"temperature": 0}',
        "price_input_per_million": "1",
        "price_output_per_million": "2",
        "concurrency": "4",
        "timeout_seconds": "30",
        "max_attempts": "3",
        "backoff_seconds": "0.5",
    }
    response = client.post(url, {**form, "parameters": '{"api_key": "x"}'})
    assert "must not carry credentials" in response.content.decode()
    response = client.post(url, {**form, "parameters": '{"extra_headers": {"X": "1"}}'})
    assert "extra_headers" in response.content.decode() and "cannot be set here" in (
        response.content.decode()
    )
    response = client.post(url, {**form, "parameters": '{"temprature": 0}'})
    assert "not a parameter" in response.content.decode()
    assert not JudgeConfig.objects.exists()
    response = client.post(url, form)
    assert response.status_code == 302
    config = JudgeConfig.objects.get(name="local")
    assert config.endpoint_key == key and config.created_by == owner
    page = client.get(reverse("judging:home", args=[owned.slug])).content.decode()
    assert "the saved key my lab key" in page and "abcdefghijklmnop" not in page
    # removable: the judge then sends no key
    client.post(reverse("judging:key_delete", args=[owned.slug, key.pk]))
    assert not EndpointKey.objects.exists()
    config.refresh_from_db()
    assert config.endpoint_key is None


def test_the_api_key_field_is_a_text_name_and_keys_never_reach_the_page(
    client, owner, owned, monkeypatch
):
    from llm.keystore import endpoint_key_save

    key = endpoint_key_save(owner=owner, label="k", secret="sk-very-secret-value-123")
    JudgeConfig.objects.create(
        name="j", base_url="http://x/v1", model="m", endpoint_key=key, created_by=owner
    )
    client.force_login(owner)
    for url in get_urls(owned.slug, judge_run_create(study=owned, method="baseline_random").pk):
        assert "sk-very-secret" not in client.get(url).content.decode()


def test_creating_a_run_queues_it_and_shows_the_progress_page(
    client, owner, owned, django_capture_on_commit_callbacks
):
    client.force_login(owner)
    url = reverse("judging:run_create", args=[owned.slug])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(
            url, {"method": "baseline_longer", "params": '{"seed": 3}', "budget_calls": "100"}
        )
    run = JudgeRun.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"/runs/{run.pk}/")
    assert len(callbacks) == 1  # the Celery task, sent once the transaction commits
    assert run.params["seed"] == 3 and run.budget_calls == 100 and run.total_calls == 12
    page = client.get(response["Location"]).content.decode()
    assert 'hx-trigger="every 1s"' in page and "0 / 12" in page


def test_the_run_forms_judge_choice_starts_with_a_plain_prompt(client, owner, owned):
    client.force_login(owner)
    page = client.get(reverse("judging:run_create", args=[owned.slug])).content.decode()
    select = page.split('name="config"', 1)[1].split("</select>", 1)[0]
    assert '<option value="" selected>Choose a judge</option>' in select
    assert "-----" not in page


def test_a_refused_run_says_why_on_the_form(client, owner, owned):
    client.force_login(owner)
    url = reverse("judging:run_create", args=[owned.slug])
    response = client.post(url, {"method": "pairwise"})
    assert "needs a judge config" in response.content.decode()
    response = client.post(url, {"method": "swiss", "params": "{bad"})
    assert "not JSON" in response.content.decode()
    response = client.post(url, {"method": "swiss", "params": '{"nope": 1}'})
    assert "unknown parameters for swiss: nope" in response.content.decode()
    assert not JudgeRun.objects.exists()


def test_a_run_over_ideas_without_text_is_refused_on_the_form(client, owner, si2024_study):
    """The ideas of an imported review file have no text: the page says so at the top and
    offers no run (no reference corpus for judge validation), and a posted run is refused."""
    client.force_login(owner)
    url = reverse("judging:run_create", args=[si2024_study.slug])
    page = client.get(url).content.decode()
    assert "No idea of this study has a text" in page and "Fix sections" in page
    assert "Start the run" not in page and "only the baselines can run" not in page
    response = client.post(url, {"method": "baseline_random"})
    assert response.status_code == 400
    assert "No idea of this study has a text" in response.content.decode()
    assert not JudgeRun.objects.exists()


def test_the_progress_fragment_polls_until_the_run_ends_then_reloads_the_page(
    client, owner, owned, judge, scripted
):
    client.force_login(owner)
    run = judge_run_create(study=owned, method="pairwise", config=judge)
    url = reverse("judging:run_detail", args=[owned.slug, run.pk])
    fragment = client.get(url + "?poll=1", HTTP_HX_REQUEST="true")
    body = fragment.content.decode()
    assert fragment.status_code == 200 and "<html" not in body
    assert body.strip().startswith('<section class="card" id="run-progress"')
    assert 'hx-trigger="every 1s"' in body and 'id="run-done">0 / 12' in body
    assert f'href="{url}"' in body  # the polled element's link for non-htmx clients
    judge_run_execute(run=run)
    ended = client.get(url + "?poll=1", HTTP_HX_REQUEST="true")
    assert ended.status_code == 200 and ended["HX-Refresh"] == "true"
    page = client.get(url).content.decode()
    assert "hx-trigger" not in page and "12 / 12" in page
    assert 'id="results"' in page and "<svg" in page
    assert 'id="position-consistency">1.000' in page
    assert 'id="first-position">' in page
    assert "Bradley–Terry" in page
    # The ratings plot sits under its table's heading and names its axis briefly: the
    # heading is not printed again as the plot's title or its axis label.
    # (the SVG's <title>, its accessible name, is not printed)
    shown = re.sub(r"<title>.*?</title>", "", page, flags=re.S)
    assert shown.count("Pairwise score (1–5, both orders summed)") == 1
    heading = page.index("<h3>Pairwise score (1–5, both orders summed)</h3>")
    plot = page.index('id="ratings-plot"')
    assert heading < plot < page.index('data-dimension="pairwise"')
    assert "score (1–5)" in page[plot : page.index('data-dimension="pairwise"')]


def test_cancel_and_resume_buttons_change_the_run(client, owner, owned, judge, scripted):
    client.force_login(owner)
    run = judge_run_create(study=owned, method="absolute", config=judge)
    page = client.get(reverse("judging:run_detail", args=[owned.slug, run.pk])).content.decode()
    assert 'id="cancel-run"' in page
    client.post(reverse("judging:run_cancel", args=[owned.slug, run.pk]))
    run.refresh_from_db()
    assert run.status == Status.CANCELLED
    page = client.get(reverse("judging:run_detail", args=[owned.slug, run.pk])).content.decode()
    assert 'id="resume-run"' in page
    client.post(reverse("judging:run_resume", args=[owned.slug, run.pk]))
    run.refresh_from_db()
    assert run.status == Status.QUEUED
    run = judge_run_execute(run=run)
    assert run.status == Status.DONE and run.done_calls == 6
    response = client.post(reverse("judging:run_resume", args=[owned.slug, run.pk]), follow=True)
    assert "nothing to resume" in response.content.decode()


def test_a_run_stopped_by_its_budget_is_raised_and_resumed_from_its_page(
    client, owner, owned, judge, scripted
):
    """The page that says "raise the budget and resume" has the budget fields; a limit
    the run has spent already is refused (it would stop again at once); a raised one is
    stored, audited, and the resumed run finishes."""
    judge.concurrency = 1
    judge.save()
    client.force_login(owner)
    run = judge_run_execute(
        run=judge_run_create(study=owned, method="pairwise", config=judge, budget_calls=5)
    )
    assert run.status == Status.BUDGET and run.http_calls == 5
    url = reverse("judging:run_detail", args=[owned.slug, run.pk])
    page = client.get(url).content.decode()
    form = page.split('id="resume-form"', 1)[1].split("</form>", 1)[0]
    assert 'name="budget_calls"' in form and 'value="5"' in form and 'name="budget_cost"' in form
    assert "Raise the budget and resume" in form

    resume = reverse("judging:run_resume", args=[owned.slug, run.pk])
    response = client.post(resume, {"budget_calls": "5", "budget_cost": ""}, follow=True)
    assert "has made 5 paid calls" in response.content.decode()
    run.refresh_from_db()
    assert run.status == Status.BUDGET and run.budget_calls == 5
    response = client.post(resume, {"budget_calls": "0", "budget_cost": ""}, follow=True)
    assert "Paid calls, at most" in response.content.decode()

    client.post(resume, {"budget_calls": "20", "budget_cost": ""})
    run.refresh_from_db()
    assert run.status == Status.QUEUED and run.budget_calls == 20 and run.budget_cost is None
    event = AuditEvent.objects.get(study=owned, verb="judge_run_budget_set")
    assert event.actor == owner and event.detail["calls"] == [5, 20]
    run = judge_run_execute(run=run)
    assert run.status == Status.DONE and run.done_calls == 12 and run.http_calls == 12


def test_direct_scoring_results_show_t_intervals_over_samples(
    client, owner, owned, judge, scripted
):
    client.force_login(owner)
    run = judge_run_execute(
        run=judge_run_create(study=owned, method="direct", config=judge, params={"samples": 2})
    )
    scripted_seeded = run.status == Status.DONE
    assert scripted_seeded
    page = client.get(reverse("judging:run_detail", args=[owned.slug, run.pk])).content.decode()
    assert 'data-dimension="overall"' in page and "2 of 2 samples parsed" in page


def test_ligbench_page_shows_formalisations_references_and_elo_plot(
    client, owner, owned, judge, scripted
):
    from judging.corpus import reference_corpus_import

    reference_corpus_import(data=CORPUS.read_bytes(), name="refs", actor=owner)
    run = judge_run_execute(
        run=judge_run_create(study=owned, method="ligbench", config=judge, params={"references": 2})
    )
    assert run.status == Status.DONE, run.message
    client.force_login(owner)
    page = client.get(reverse("judging:run_detail", args=[owned.slug, run.pk])).content.decode()
    assert 'id="formalisations"' in page and "Core breakthrough" in page
    assert "Compared with, most related first" in page
    assert 'id="elo-plot"' in page and "LigBench Elo: rating" in page
    assert "LigBench novelty" in page and "venue-debiased" in page


def test_validation_page_shows_accuracy_with_intervals(client, owner, owned, judge, scripted):
    from judging.corpus import reference_corpus_import

    reference_corpus_import(data=CORPUS.read_bytes(), name="refs", actor=owner)
    run = judge_run_execute(
        run=judge_run_create(study=owned, method="validation", config=judge, params={"pairs": 6})
    )
    client.force_login(owner)
    page = client.get(reverse("judging:run_detail", args=[owned.slug, run.pk])).content.decode()
    assert 'id="validation"' in page and "Accuracy vs raw scores" in page
    assert page.count("<tr><td>rating</td>") == 1


def test_the_owner_imports_a_corpus_from_the_page_and_sees_venue_means(client, owner, owned):
    client.force_login(owner)
    url = reverse("judging:corpora", args=[owned.slug])
    upload = SimpleUploadedFile("refs.json", CORPUS.read_bytes(), "application/json")
    response = client.post(url, {"name": "mine", "file": upload})
    assert response.status_code == 302
    corpus = ReferenceCorpus.objects.get(name="mine")
    assert corpus.created_by == owner and corpus.papers.count() == 18
    page = client.get(url).content.decode()
    assert "NeurIPS 2024" in page and "mean rating" in page
    bad = json.dumps([{"title": "x", "conference": "ICLR", "year": 2024, "rating": 9}])
    response = client.post(
        url, {"name": "bad", "file": SimpleUploadedFile("bad.json", bad.encode())}
    )
    assert response.status_code == 400
    assert "bad.json: row 1: rating: 9 is outside 0–5" in response.content.decode()
    assert not ReferenceCorpus.objects.filter(name="bad").exists()


def test_a_corpus_imported_by_another_researcher_is_not_listed(
    client, owner, owned, other_researcher
):
    from judging.corpus import reference_corpus_import

    reference_corpus_import(data=CORPUS.read_bytes(), name="private", actor=other_researcher)
    client.force_login(owner)
    assert (
        "private" not in client.get(reverse("judging:corpora", args=[owned.slug])).content.decode()
    )


def test_the_team_sees_the_corpora_its_runs_use_and_only_owners_import_more(
    client, owner, owned, other_researcher
):
    from judging.corpus import reference_corpus_import
    from judging.services import judge_run_plan
    from studies.services.study import member_add, researcher_grant

    researcher_grant(user=other_researcher)
    member_add(study=owned, identifier="other", role="editor", actor=owner)
    ours = reference_corpus_import(data=CORPUS.read_bytes(), name="owners-refs", actor=owner)
    reference_corpus_import(data=CORPUS.read_bytes(), name="editors-own", actor=other_researcher)
    client.force_login(other_researcher)
    for view in ("judging:home", "judging:corpora"):
        page = client.get(reverse(view, args=[owned.slug])).content.decode()
        assert "owners-refs" in page and "editors-own" not in page, view
    # what the editor sees is what her runs use
    plan = judge_run_plan(study=owned, method="ligbench", params={"corpus": "auto"})
    assert plan["params"]["corpus"] == ours.pk
    upload = SimpleUploadedFile("refs.json", CORPUS.read_bytes(), "application/json")
    url = reverse("judging:corpora", args=[owned.slug])
    assert client.post(url, {"name": "hers", "file": upload}).status_code == 403
    assert not ReferenceCorpus.objects.filter(name="hers").exists()


def test_a_corpus_name_another_researcher_uses_is_accepted_without_a_word_of_theirs(
    client, owner, owned, other_researcher
):
    from judging.corpus import reference_corpus_import
    from judging.services import judge_run_plan
    from studies.services.study import researcher_grant

    theirs = reference_corpus_import(
        data=CORPUS.read_bytes(),
        name="ICLR picks",
        filename="owner-secret-selection.json",
        description="Owner-only shortlist",
        actor=owner,
    )
    researcher_grant(user=other_researcher)
    hers = make_study(other_researcher, slug="hers")
    client.force_login(other_researcher)
    url = reverse("judging:corpora", args=[hers.slug])
    upload = SimpleUploadedFile("mine.json", CORPUS.read_bytes(), "application/json")
    response = client.post(url, {"name": "ICLR picks", "file": upload}, follow=True)
    assert response.status_code == 200 and response.redirect_chain
    page = response.content.decode()
    assert "Corpus &#x27;ICLR picks&#x27; imported: 18 papers." in page
    assert "exists" not in page and "already" not in page and 'id="import-errors"' not in page
    mine = ReferenceCorpus.objects.get(name="ICLR picks", created_by=other_researcher)
    assert mine != theirs
    # Her pages list her corpus once, and nothing of the owner's.
    for view in ("judging:home", "judging:corpora"):
        page = client.get(reverse(view, args=[hers.slug])).content.decode()
        assert page.count("ICLR picks") == 1, view
        assert "owner-secret-selection" not in page and "Owner-only" not in page, view
    # and her runs, naming the corpus, use hers
    plan = judge_run_plan(study=hers, method="ligbench", params={"corpus": "ICLR picks"})
    assert plan["params"]["corpus"] == mine.pk
    # The same name again, hers: a clear refusal that speaks of her study's corpora only.
    upload = SimpleUploadedFile("again.json", CORPUS.read_bytes(), "application/json")
    response = client.post(url, {"name": "ICLR picks", "file": upload})
    assert response.status_code == 400
    assert (
        "again.json: the owner&#x27;s and the shared corpora include one named "
        "&#x27;ICLR picks&#x27; already; choose another name"
    ) in response.content.decode()
    assert ReferenceCorpus.objects.filter(name="ICLR picks").count() == 2
    # A shared corpus given the name later is listed as shared; by name, runs keep hers.
    reference_corpus_import(data=CORPUS.read_bytes(), name="ICLR picks", owner=None)
    page = client.get(url).content.decode()
    assert page.count("<h2>ICLR picks") == 2
    assert '<h2>ICLR picks <span class="muted">(shared)</span></h2>' in page
    plan = judge_run_plan(study=hers, method="ligbench", params={"corpus": "ICLR picks"})
    assert plan["params"]["corpus"] == mine.pk


def test_a_corpus_imported_on_a_studys_page_is_its_owners_and_in_its_audit_log(
    client, owner, owned
):
    client.force_login(owner)
    url = reverse("judging:corpora", args=[owned.slug])
    upload = SimpleUploadedFile("refs.json", CORPUS.read_bytes(), "application/json")
    assert client.post(url, {"name": "refs", "file": upload}).status_code == 302
    corpus = ReferenceCorpus.objects.get(name="refs")
    assert corpus.created_by == owner
    event = AuditEvent.objects.get(study=owned, verb="reference_corpus_imported")
    assert event.actor == owner and event.detail == {
        "corpus": corpus.pk,
        "name": "refs",
        "papers": 18,
    }


def test_a_run_whose_worker_went_quiet_shows_as_lost_with_resume_not_a_live_one(
    client, owner, owned, judge, settings
):
    from datetime import timedelta

    from django.utils import timezone

    run = judge_run_create(study=owned, method="absolute", config=judge)
    url = reverse("judging:run_detail", args=[owned.slug, run.pk])
    client.force_login(owner)
    JudgeRun.objects.filter(pk=run.pk).update(
        status=Status.RUNNING, heartbeat_at=timezone.now(), lease="l1"
    )
    page = client.get(url).content.decode()
    assert 'id="resume-run"' not in page and 'id="cancel-run"' in page
    quiet = timezone.now() - timedelta(seconds=settings.JOB_LOST_AFTER_SECONDS + 1)
    JudgeRun.objects.filter(pk=run.pk).update(heartbeat_at=quiet)
    # the list of runs marks it lost, and so does its own page
    home = client.get(reverse("judging:home", args=[owned.slug])).content.decode()
    assert '<span class="pill lost">Lost</span>' in home
    page = client.get(url).content.decode()
    run.refresh_from_db()
    assert run.status == Status.LOST and "no heartbeat" in run.error
    assert 'id="resume-run"' in page and 'id="cancel-run"' not in page
    assert "no heartbeat" in page
    # the page's poll (htmx) reloads the whole page once the run is no longer active
    poll = client.get(url + "?poll=1", HTTP_HX_REQUEST="true")
    assert poll.headers.get("HX-Refresh") == "true"
    client.post(reverse("judging:run_resume", args=[owned.slug, run.pk]))
    run.refresh_from_db()
    assert run.status == Status.QUEUED and run.lease == "" and run.error == ""


# A transactional test: the send happens on commit, at once in a request as in production.
@pytest.mark.django_db(transaction=True)
def test_a_run_queued_while_the_broker_is_down_fails_with_a_message_and_resume_sends_it(
    client, owner, owned, monkeypatch
):
    from kombu.exceptions import OperationalError

    from judging.tasks import execute_judge_run

    sent = []

    def refuse(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6399. Connection refused.")

    monkeypatch.setattr(execute_judge_run, "apply_async", refuse)
    client.force_login(owner)
    url = reverse("judging:run_create", args=[owned.slug])
    response = client.post(url, {"method": "baseline_longer", "params": "{}"}, follow=True)
    assert response.status_code == 200
    run = JudgeRun.objects.get()
    assert run.status == Status.FAILED and "CELERY_BROKER_URL" in run.error
    page = response.content.decode()
    assert "could not be sent to the task queue" in page and 'id="resume-run"' in page
    monkeypatch.setattr(execute_judge_run, "apply_async", lambda args, **kw: sent.append(args))
    response = client.post(reverse("judging:run_resume", args=[owned.slug, run.pk]), follow=True)
    run.refresh_from_db()
    assert run.status == Status.QUEUED and run.error == "" and sent == [(run.pk,)]
    assert "Resumed" in response.content.decode()


def test_cancel_ends_a_running_run_at_once_whether_or_not_its_worker_lives(
    client, owner, owned, judge
):
    from django.utils import timezone

    run = judge_run_create(study=owned, method="absolute", config=judge)
    JudgeRun.objects.filter(pk=run.pk).update(
        status=Status.RUNNING, heartbeat_at=timezone.now(), lease="l1"
    )
    client.force_login(owner)
    response = client.post(reverse("judging:run_cancel", args=[owned.slug, run.pk]), follow=True)
    run.refresh_from_db()
    assert run.status == Status.CANCELLED and run.cancel_requested
    assert "Cancelled: the calls in flight finish" in response.content.decode()
