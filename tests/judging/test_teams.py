"""Judges belong to a study's team: the team sees, uses and manages them, nobody else
learns they exist; the call cache and the spend are per study; existing judges moved to
the studies that used them."""

from __future__ import annotations

import re
from collections import deque
from urllib.parse import urljoin, urlsplit

import pytest
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from judging.models import JudgeRun
from judging.services import judge_run_create, judge_run_execute
from llm.client import complete
from llm.models import JudgeConfig, LLMCall
from llm.spend import study_spend
from studies.models import Study
from studies.services import study_create
from studies.services.study import member_add, researcher_grant
from tests.judging.conftest import make_study

User = get_user_model()
JUDGE = "ada-lab-judge"
HREF = re.compile(r'href="([^"]+)"')


def _judge_form(name: str) -> dict[str, str]:
    return {
        "name": name,
        "provider": "",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "parameters": '{"temperature": 0}',
        "price_input_per_million": "1",
        "price_output_per_million": "2",
        "concurrency": "4",
        "timeout_seconds": "30",
        "max_attempts": "3",
        "backoff_seconds": "0.5",
    }


def _pages(client: Client, starts: list[str], depth: int = 1) -> dict[str, str]:
    """The pages at `starts` and those their links reach within `depth` steps (GET), by
    path: what a researcher can find by following links from her own pages."""
    seen: dict[str, str] = {}
    queue = deque((start, 0) for start in starts)
    while queue:
        path, level = queue.popleft()
        if path in seen:
            continue
        response = client.get(path)
        body = response.content.decode(errors="replace") if response.status_code == 200 else ""
        seen[path] = body
        if level == depth:
            continue
        for raw in HREF.findall(body):
            parts = urlsplit(urljoin(path, raw.replace("&amp;", "&")))
            if parts.netloc not in ("", "testserver") or parts.path.startswith(
                ("/static/", "/logout", "/admin")
            ):
                continue
            queue.append((parts.path, level + 1))
    return seen


@pytest.fixture
def team(db):
    """ada owns a study with bo as its editor; cy is a researcher on her own study."""
    ada, bo, cy = (User.objects.create(username=n) for n in ("ada", "bo", "cy"))
    for user in (ada, bo, cy):
        researcher_grant(user=user)
    study = make_study(ada, slug="ada-study")
    member_add(study=study, identifier="bo", role="editor", actor=ada)
    theirs = make_study(cy, slug="cy-study")
    return ada, bo, cy, study, theirs


@pytest.mark.slow  # some 40 pages
def test_the_editor_uses_the_teams_judge_and_a_third_researcher_learns_nothing_of_it(team):
    ada, bo, cy, study, theirs = team
    client = Client()
    client.force_login(ada)
    made = client.post(reverse("judging:config_create", args=[study.slug]), _judge_form(JUDGE))
    assert made.status_code == 302
    config = JudgeConfig.objects.get(name=JUDGE)
    assert config.study == study

    # The editor sees the team's judge, runs it and normalises with it; adding one is an
    # owner's.
    client.force_login(bo)
    assert JUDGE in client.get(reverse("judging:home", args=[study.slug])).content.decode()
    assert client.get(reverse("judging:config_create", args=[study.slug])).status_code == 403
    ran = client.post(
        reverse("judging:run_create", args=[study.slug]),
        {"method": "direct", "config": config.pk, "params": '{"samples": 1}'},
    )
    assert ran.status_code == 302, ran.content.decode()[-2000:]
    assert JudgeRun.objects.get(study=study).config == config
    client.post(reverse("studies:normalization_config", args=[study.slug]), {"config": config.pk})
    study.refresh_from_db()
    assert study.normalization_config == config

    # The third researcher (in her own browser): no page reachable from hers names the
    # judge or the study ...
    client = Client()
    client.force_login(cy)
    starts = [
        "/studies/",
        reverse("judging:home", args=[theirs.slug]),
        reverse("studies:normalization", args=[theirs.slug]),
    ]
    pages = _pages(client, starts)
    assert reverse("judging:run_create", args=[theirs.slug]) in pages
    assert reverse("judging:config_create", args=[theirs.slug]) in pages
    assert not [p for p, body in pages.items() if JUDGE in body or study.slug in body]
    # ... every URL with the study or the judge's id answers as for an id nobody uses ...
    assert client.get(reverse("judging:home", args=[study.slug])).status_code == 404
    for slug in (study.slug, theirs.slug):
        url = reverse("judging:config_delete", args=[slug, config.pk])
        assert client.post(url).status_code == 404
        free = reverse("judging:config_delete", args=[slug, config.pk + 1000])
        assert client.post(free).status_code == 404
    # ... and no form of hers takes it.
    refused = client.post(
        reverse("judging:run_create", args=[theirs.slug]),
        {"method": "direct", "config": config.pk, "params": ""},
    )
    assert refused.status_code == 400 and JUDGE not in refused.content.decode()
    assert not JudgeRun.objects.filter(study=theirs).exists()
    client.post(reverse("studies:normalization_config", args=[theirs.slug]), {"config": config.pk})
    theirs.refresh_from_db()
    assert theirs.normalization_config is None
    # The same name is hers to use: nothing says another team has it.
    page = client.post(reverse("judging:config_create", args=[theirs.slug]), _judge_form(JUDGE))
    assert page.status_code == 302
    assert JudgeConfig.objects.filter(name=JUDGE).count() == 2
    # The owner removes the team's judge once nothing used it; a used one stays.
    client.force_login(ada)
    client.post(reverse("judging:config_delete", args=[study.slug, config.pk]))
    assert JudgeConfig.objects.filter(pk=config.pk).exists()


def test_a_researcher_on_two_teams_cannot_take_one_teams_judge_to_the_other(team):
    """ada's judge belongs to her study's team; on cy's study, where ada is an editor too,
    it is neither offered nor taken (cy's team would see it named in its runs)."""
    ada, _, cy, study, theirs = team
    member_add(study=theirs, identifier="ada", role="editor", actor=cy)
    config = JudgeConfig.objects.create(
        name=JUDGE, study=study, created_by=ada, base_url="http://127.0.0.1:9/v1", model="m"
    )
    client = Client()
    client.force_login(ada)
    assert JUDGE in client.get(reverse("studies:normalization", args=[study.slug])).content.decode()
    for url in (
        reverse("studies:normalization", args=[theirs.slug]),
        reverse("judging:run_create", args=[theirs.slug]),
        reverse("judging:home", args=[theirs.slug]),
    ):
        assert JUDGE not in client.get(url).content.decode()
    client.post(reverse("studies:normalization_config", args=[theirs.slug]), {"config": config.pk})
    theirs.refresh_from_db()
    assert theirs.normalization_config is None
    refused = client.post(
        reverse("judging:run_create", args=[theirs.slug]),
        {"method": "direct", "config": config.pk, "params": ""},
    )
    assert refused.status_code == 400 and not JudgeRun.objects.filter(study=theirs).exists()


def test_a_study_is_never_answered_from_another_studys_calls(study, judge, scripted):
    theirs = make_study(User.objects.create(username="other-team"), slug="theirs")
    first = judge_run_execute(run=judge_run_create(study=study, method="direct", config=judge))
    asked = scripted.requests
    assert first.status == JudgeRun.Status.DONE and asked > 0
    other = judge_run_execute(run=judge_run_create(study=theirs, method="direct", config=judge))
    # The very same prompts, to the same judge: another study's calls do not answer them.
    mine, its = (
        sorted(str(c.request["messages"]) for c in LLMCall.objects.filter(run=r))
        for r in (first, other)
    )
    assert mine == its
    assert scripted.requests == 2 * asked and other.cache_hits == 0
    assert set(LLMCall.objects.filter(run=other).values_list("study", flat=True)) == {theirs.pk}
    # Within a study the cache still answers.
    again = judge_run_execute(run=judge_run_create(study=study, method="direct", config=judge))
    assert scripted.requests == 2 * asked and again.cache_hits == asked


def test_the_judging_page_shows_the_studys_spend_per_provider(team, settings):
    ada, _, cy, study, theirs = team
    settings.LLM_PROVIDERS = [
        {"name": "campus", "base_url": "https://llm.campus.example/v1", "key_env": "X"}
    ]

    def call(on: Study, base_url: str, cost: str, key: str) -> None:
        LLMCall.objects.create(
            study=on, cache_key=key, base_url=base_url, model="m1", request={}, cost=cost
        )

    call(study, "https://llm.campus.example/v1", "0.25", "a")
    call(study, "https://llm.campus.example/v1", "0.50", "b")
    call(study, "https://mine.example.org/v1", "0.125", "c")
    call(theirs, "https://llm.campus.example/v1", "9.0", "d")
    client = Client()
    client.force_login(ada)
    page = client.get(reverse("judging:home", args=[study.slug])).content.decode()
    spend = page[page.index('id="spend"') :]
    assert "provider campus" in spend and "0.7500" in spend
    assert "own endpoint mine.example.org" in spend and "0.1250" in spend
    assert "llm.campus.example" not in spend  # a provider's address is not shown
    assert "9.0000" not in spend


def test_the_spend_names_an_endpoint_brought_at_a_providers_url_as_its_owners(
    team, scripted, settings
):
    ada, _, cy, study, theirs = team
    # As under `make run`: the scripted server is also the preset "local-test-server".
    settings.LLM_PROVIDERS = [
        {"name": "local-test-server", "base_url": scripted.base_url, "key_env": "UNSET_KEY"}
    ]
    fields = {"model": "scripted", "price_input_per_million": "1000"}
    own = JudgeConfig.objects.create(
        name="ada-own", study=study, base_url=scripted.base_url, created_by=ada, **fields
    )
    preset = JudgeConfig.objects.create(
        name="ada-preset", study=study, provider="local-test-server", created_by=ada, **fields
    )
    hidden = JudgeConfig.objects.create(
        name="cy-hidden", study=theirs, base_url=scripted.base_url, created_by=cy, **fields
    )
    messages = [{"role": "user", "content": "Which idea is better?"}]
    for config, on in ((own, study), (own, study), (preset, study), (hidden, theirs)):
        complete(config, messages, study_id=on.pk)
        # Each call asks something new, so none is answered from another's cache entry.
        messages = [*messages, {"role": "user", "content": "Once more."}]

    rows = {(r.endpoint, r.model): r.calls for r in study_spend(study_id=study.pk)}
    assert rows == {
        ("own endpoint 127.0.0.1", "scripted"): 2,
        ("provider local-test-server", "scripted"): 1,
    }
    client = Client()
    for user, on, preset_shown, other_teams in (
        (ada, study, True, ["cy-hidden"]),
        (cy, theirs, False, ["ada-own", "ada-preset"]),
    ):
        client.force_login(user)
        page = client.get(reverse("judging:home", args=[on.slug])).content.decode()
        spend = page[page.index('id="spend"') :]
        assert "own endpoint 127.0.0.1" in spend
        assert ("provider local-test-server" in spend) is preset_shown
        assert not [name for name in other_teams if name in page]


def test_calls_recorded_before_they_named_their_provider_go_by_their_judge(team, settings):
    ada, _, _, study, _ = team
    settings.LLM_PROVIDERS = [
        {"name": "campus", "base_url": "https://llm.campus.example/v1", "key_env": "X"}
    ]
    url = "https://llm.campus.example/v1"
    brought = JudgeConfig.objects.create(name="b", study=study, base_url=url, model="m1")
    preset = JudgeConfig.objects.create(name="p", study=study, provider="campus", model="m1")
    for key, config in (("a", brought), ("b", preset), ("c", None)):
        LLMCall.objects.create(
            study=study, config=config, cache_key=key, base_url=url, model="m1", request={}
        )
    assert LLMCall.objects.filter(provider__isnull=True).count() == 3
    rows = {(r.endpoint, r.model): r.calls for r in study_spend(study_id=study.pk)}
    # The judge says whose endpoint it was; a call whose judge is gone, its URL.
    assert rows == {("own endpoint llm.campus.example", "m1"): 1, ("provider campus", "m1"): 2}


def test_existing_judges_move_to_the_studies_that_used_them(db):
    migration = __import__("llm.migrations.0004_judges_to_study_teams", fromlist=["x"])
    ada, bo = User.objects.create(username="ada"), User.objects.create(username="bo")
    first, second = (study_create(owner=u, slug=f"s-{u.username}") for u in (ada, bo))
    demo = study_create(owner=ada, slug="demo")
    shared = JudgeConfig.objects.create(name="shared", created_by=ada)
    demo_judge = JudgeConfig.objects.create(name="demo judge")
    unused = JudgeConfig.objects.create(name="unused", created_by=ada)
    admins = JudgeConfig.objects.create(name="admin's")
    JudgeRun.objects.create(study=first, config=shared, method="direct")
    theirs = JudgeRun.objects.create(study=second, config=shared, method="direct")
    JudgeRun.objects.create(study=demo, config=demo_judge, method="pairwise")
    call = LLMCall.objects.create(
        cache_key="k", config=shared, run=theirs, base_url="u", model="m", request={}
    )
    Study.objects.filter(pk=second.pk).update(normalization_config=shared)

    migration.forwards(django_apps, None)

    shared.refresh_from_db()
    copy = JudgeConfig.objects.get(name="shared", study=second)
    assert shared.study == first and copy.pk != shared.pk
    theirs.refresh_from_db()
    call.refresh_from_db()
    second.refresh_from_db()
    assert theirs.config == copy and call.config == copy and call.study == second
    assert second.normalization_config == copy
    assert JudgeConfig.objects.get(pk=demo_judge.pk).study == demo
    # Unused: to the studies its creator owns (a copy each), or the administrator's.
    assert set(JudgeConfig.objects.filter(name="unused").values_list("study", flat=True)) == {
        first.pk,
        demo.pk,
    }
    assert JudgeConfig.objects.get(pk=admins.pk).study is None
    assert unused.pk in JudgeConfig.objects.filter(name="unused").values_list("pk", flat=True)


def test_pages_name_a_providers_judge_by_the_provider_never_by_its_address(team, settings):
    ada, _, _, study, _ = team
    settings.LLM_PROVIDERS = [
        {"name": "campus", "base_url": "https://llm.campus.example/v1", "key_env": "X"}
    ]
    judge = JudgeConfig.objects.create(
        name="campus-judge", study=study, provider="campus", model="m1", created_by=ada
    )
    run = JudgeRun.objects.create(study=study, config=judge, method="direct", budget_calls=1)
    Study.objects.filter(pk=study.pk).update(normalization_config=judge)
    client = Client()
    client.force_login(ada)
    for url in (
        reverse("judging:run_detail", args=[study.slug, run.pk]),
        reverse("studies:normalization", args=[study.slug]),
    ):
        page = client.get(url).content.decode()
        assert "provider campus" in page, url
        assert "llm.campus.example" not in page, url


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_no_link_a_member_is_shown_on_the_judging_pages_is_refused_for_their_role(team, role):
    """An editor runs the team's judges and a viewer reads them; adding a judge (and the
    keys it uses) is an owner's, so neither is offered a link the server refuses."""
    ada, bo, cy, study, theirs = team
    member = User.objects.create(username=f"the-{role}")
    researcher_grant(user=member)
    member_add(study=study, identifier=member.username, role=role, actor=ada)
    client = Client()
    client.force_login(member)
    start = reverse("judging:home", args=[study.slug])
    home = client.get(start).content.decode()
    refused = []
    for href in sorted(set(HREF.findall(home))):
        url = urljoin(start, href)
        if urlsplit(url).path.startswith(f"/judging/{study.slug}/"):
            status = client.get(url).status_code
            if status == 403:
                refused.append(url)
    assert not refused
    assert reverse("judging:config_create", args=[study.slug]) not in home
    # The owner is offered it, and it opens.
    client.force_login(ada)
    home = client.get(start).content.decode()
    assert reverse("judging:config_create", args=[study.slug]) in home
