"""Colleagues join from the browser: an administrator invites a researcher, who sets a
name and password, creates a study, adds a judge for its team and invites a colleague as
editor from the team page; the editor runs the team's judge (a real Celery worker, the
scripted OpenAI-compatible server); a third researcher, who asked for an account and was
approved by the administrator, finds none of it by link, address or form. And single
sign-on through a real OpenID Connect provider started on loopback
(django-oauth-toolkit, tests/e2e/oidc_provider.py). Screenshots go to
test-artifacts/accounts-*.png."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from accounts.models import ResearcherInvitation, SignUpRequest
from accounts.roles import is_researcher, researcher_grant
from judging.models import JudgeRun
from judging.testserver import Rules, TestServer
from llm.models import JudgeConfig
from studies.models import AuditEvent, Study, StudyMember
from tests.e2e.pages import login, new_page
from tests.judging.conftest import ideas_add

pytestmark = pytest.mark.e2e
User = get_user_model()
ROOT = Path(__file__).resolve().parents[2]


def _join(browser, base: str, link: str, first: str, password: str):
    context, page = new_page(browser, base)
    page.goto(link)
    page.fill("input[name=first_name]", first)
    page.fill("input[name=last_name]", "Lab")
    page.fill("input[name=password1]", password)
    page.fill("input[name=password2]", password)
    page.click("text=Create my researcher account")
    page.wait_for_url(re.compile(r"/studies/$"))
    return context, page


def test_a_team_shares_its_judge_and_a_researcher_outside_it_finds_none_of_it(
    browser, live_server, settings, artifacts, worker
):
    settings.IDEAREVIEW_BASE_URL = live_server.url
    settings.IDEAREVIEW_OWNER_INVITES = True
    User.objects.create_user("admin", password="admin-pass-123", is_staff=True)
    _, admin = new_page(browser, live_server.url)
    login(admin, "admin", "admin-pass-123", path="/login/?next=/accounts/researchers/")
    admin.wait_for_url(re.compile(r"/accounts/researchers/$"))
    admin.fill("#invite input[name=email]", "ada@lab.org")
    admin.click("text=Send the invitation")
    link = admin.input_value("#invitation-link")
    admin.screenshot(path=str(artifacts / "accounts-01-invite.png"), full_page=True)

    _, ada = _join(browser, live_server.url, link, "Ada", "ada-pass-phrase-1")
    ada.goto("/studies/new/")
    ada.fill("input[name=slug]", "ada-study")
    ada.fill("input[name=title]", "Ada's study")
    ada.click("button[type=submit]")
    # a new study's address is the short name and random characters
    ada.wait_for_url(re.compile(r"/studies/ada-study-[a-z0-9]{6}/$"))
    slug = ada.url.rstrip("/").rsplit("/", 1)[-1]
    ada.goto(f"/studies/{slug}/members/")
    ada.fill("#member-add input[name=identifier]", "bo@lab.org")
    ada.select_option("#member-add select[name=role]", "editor")
    ada.click("text=Add to the team")
    team_link = ada.input_value("#invitation-link")
    ada.screenshot(path=str(artifacts / "accounts-02-team-invite.png"), full_page=True)

    _, bo = _join(browser, live_server.url, team_link, "Bo", "bo-pass-phrase-2")
    assert "Ada's study" in bo.inner_text("main")
    bo.click("text=Ada's study")
    bo.wait_for_url(re.compile(rf"/studies/{slug}/$"))
    member = StudyMember.objects.get(study__slug=slug, user__username="bo@lab.org")
    assert member.role == "editor"
    assert not ResearcherInvitation.objects.filter(accepted_at__isnull=True).exists()

    ideas_add(Study.objects.get(slug=slug))  # six approved ideas in two topics
    with TestServer(Rules()) as llm:
        config, run = _team_judge_run(ada, bo, slug, llm, artifacts)
    settings.IDEAREVIEW_SIGNUP = True
    cy = _signed_up_and_approved(browser, live_server.url, admin, artifacts)
    _outsider_finds_nothing(cy, slug, config, run, artifacts)


def _team_judge_run(ada, bo, slug: str, llm, artifacts) -> tuple[JudgeConfig, JudgeRun]:
    """The owner adds a judge for the team on the judging pages; the editor sees it, runs
    it, and watches the run finish."""
    ada.goto(f"/studies/{slug}/")
    ada.click("nav >> text=LLM judges")
    ada.click("text=Add a judge")
    ada.fill("#config-form input[name=name]", "team-judge")
    ada.fill("#config-form input[name=base_url]", llm.base_url)
    ada.fill("#config-form input[name=model]", "scripted-1")
    ada.click("text=Save the judge")
    ada.wait_for_url(re.compile(rf"/judging/{slug}/$"))
    assert "team-judge" in ada.inner_text("#configs")
    config = JudgeConfig.objects.get(name="team-judge")
    assert config.study.slug == slug and config.created_by.username == "ada@lab.org"

    bo.goto(f"/studies/{slug}/")
    bo.click("nav >> text=LLM judges")
    bo.wait_for_url(re.compile(rf"/judging/{slug}/$"))
    assert "team-judge" in bo.inner_text("#configs")
    assert not bo.locator("#configs form").count()  # an editor runs judges, owners remove
    bo.click("text=New run")
    bo.select_option("select[name=method]", "pairwise")
    bo.select_option("select[name=config]", label="team-judge")
    bo.fill("textarea[name=params]", '{"bt_bootstrap": 50}')
    bo.click("text=Start the run")
    bo.wait_for_url(re.compile(rf"/judging/{slug}/runs/\d+/$"))
    bo.wait_for_selector("#run-status:has-text('Done')", timeout=60_000)
    bo.wait_for_selector("#results svg")
    bo.screenshot(path=str(artifacts / "accounts-03-editor-run.png"), full_page=True)
    run = JudgeRun.objects.get(study__slug=slug)
    assert run.config_id == config.pk and run.created_by.username == "bo@lab.org"
    assert run.status == JudgeRun.Status.DONE and run.done_calls == run.total_calls == 12
    assert llm.answered == 12
    log = AuditEvent.objects.filter(study__slug=slug)
    assert log.get(verb="judge_config_added").actor_name == "ada@lab.org"
    assert log.get(verb="judge_run_created").actor_name == "bo@lab.org"
    return config, run


def _signed_up_and_approved(browser, base: str, admin, artifacts):
    """Self-service sign-up: the request waits, the account cannot log in until the
    administrator approves it on the researchers page."""
    _, cy = new_page(browser, base)
    cy.goto("/login/")
    cy.click("text=Ask for a researcher account")
    cy.fill("#signup input[name=email]", "cy@elsewhere.org")
    cy.fill("#signup input[name=first_name]", "Cy")
    cy.fill("#signup input[name=last_name]", "Else")
    cy.fill("#signup input[name=password1]", "cy-pass-phrase-3")
    cy.fill("#signup input[name=password2]", "cy-pass-phrase-3")
    cy.fill("#signup textarea[name=note]", "Another group's studies")
    cy.click("text=Send my request")
    cy.wait_for_selector("#signup-sent")
    assert "waits for an administrator" in cy.inner_text("#signup-sent")
    login(cy, "cy@elsewhere.org", "cy-pass-phrase-3")
    cy.wait_for_selector("p.error[role=alert]")  # waiting: refused like a wrong password
    assert re.search(r"/login/$", cy.url)

    admin.goto("/accounts/researchers/")
    row = admin.locator("#pending tr", has_text="cy@elsewhere.org")
    assert "Another group's studies" in row.inner_text()
    admin.screenshot(path=str(artifacts / "accounts-04-approve.png"), full_page=True)
    row.locator("button[value=approve]").click()
    admin.wait_for_selector("#pending", state="detached")
    assert SignUpRequest.objects.get(user__email="cy@elsewhere.org").status == "approved"

    login(cy, "cy@elsewhere.org", "cy-pass-phrase-3")
    cy.wait_for_url(re.compile(r"/studies/$"))
    return cy


def _crawl(page, start: str, depth: int) -> dict[str, str]:
    """What `page`'s session gets by following same-site links from `start`, up to
    `depth` links away (GET only; logging out and static files left alone)."""
    seen: dict[str, str] = {}
    frontier = [start]
    for _ in range(depth + 1):
        found: list[str] = []
        for path in frontier:
            if path in seen:
                continue
            seen[path] = page.context.request.get(path).body().decode("utf-8", "replace")
            for href in re.findall(r'href="(/[^"#]*)', seen[path]):
                href = html.unescape(href)
                if not href.startswith("//") and not re.search(r"logout|^/static/", href):
                    found.append(href)
        frontier = found
    return seen


def _plain(page: str) -> str:
    """A page without what differs on every answer (the masked CSRF token, a nonce)."""
    return re.sub(r'(X-CSRFToken": "|name="csrfmiddlewaretoken" value="|nonce=")[^"]*', "", page)


def _outsider_finds_nothing(cy, slug: str, config, run, artifacts) -> None:
    """A researcher outside the team: no link, address or form tells of the study, its
    judge or its run; the same short name and judge name are theirs to use."""
    secrets = [slug, "Ada's study", "Ada&#x27;s study", "team-judge", "ada@lab.org", "bo@lab.org"]
    assert slug not in cy.content() and "Ada" not in cy.inner_text("main")
    # The same short name: a study of Cy's own, at its own address, and no word of Ada's.
    cy.goto("/studies/new/")
    cy.fill("input[name=slug]", "ada-study")
    cy.fill("input[name=title]", "Cy's study")
    cy.click("button[type=submit]")
    cy.wait_for_url(re.compile(r"/studies/ada-study-[a-z0-9]{6}/$"))
    own = cy.url.rstrip("/").rsplit("/", 1)[-1]
    assert own != slug

    pages = _crawl(cy, "/studies/", depth=2)
    assert f"/judging/{own}/" in pages and f"/studies/{own}/members/" in pages
    for path, body in pages.items():
        leaked = [s for s in secrets if s in body]
        assert not leaked, (path, leaked)
    assert "No judges yet" in pages[f"/judging/{own}/"]

    request = cy.context.request
    missing = request.get("/studies/no-such-study-a1b2c3/")
    assert missing.status == 404
    for path in [
        f"/studies/{slug}/",
        f"/studies/{slug}/members/",
        f"/studies/{slug}/audit/",
        f"/studies/{slug}/ideas/normalization/",
        f"/judging/{slug}/",
        f"/judging/{slug}/judges/new/",
        f"/judging/{slug}/runs/new/",
        f"/judging/{slug}/runs/{run.pk}/",
        f"/judging/{own}/runs/{run.pk}/",  # the run's id under Cy's own study
    ]:
        answer = request.get(path)
        assert answer.status == 404, path
        assert _plain(answer.text()) == _plain(missing.text()), path  # as an unused address

    # Ada's judge by its id, from Cy's own forms: answered as an id nobody uses.
    cy.goto(f"/judging/{own}/runs/new/")
    assert "team-judge" not in cy.inner_text("select[name=config]")
    token = cy.input_value("input[name=csrfmiddlewaretoken]")
    delete = request.post(
        f"/judging/{slug}/judges/{config.pk}/delete/", form={"csrfmiddlewaretoken": token}
    )
    assert delete.status == 404 and _plain(delete.text()) == _plain(missing.text())
    assert (
        request.post(
            f"/judging/{own}/judges/{config.pk}/delete/", form={"csrfmiddlewaretoken": token}
        ).status
        == 404
    )
    answers = {}
    for pk in (config.pk, 987654):
        form = {"csrfmiddlewaretoken": token, "method": "pairwise", "config": str(pk)}
        answer = request.post(f"/judging/{own}/runs/new/", form=form)
        assert answer.status == 400
        answers[pk] = re.findall(r'<ul class="errorlist[^>]*>(.*?)</ul>', answer.text(), re.S)
    assert answers[config.pk] == answers[987654] and answers[config.pk]
    for pk in (config.pk, 987654):
        form = {"csrfmiddlewaretoken": token, "form": "choose", "config": str(pk)}
        # the redirect is followed: the page it lands on says why
        page = request.post(f"/studies/{own}/ideas/normalization/config/", form=form).text()
        assert "Choose one of the listed judge configs" in page and "team-judge" not in page
    assert Study.objects.get(slug=own).normalization_config is None

    # The same judge name in Cy's own study: saved, no word of Ada's.
    cy.goto(f"/judging/{own}/judges/new/")
    cy.fill("#config-form input[name=name]", "team-judge")
    cy.fill("#config-form input[name=base_url]", config.base_url)
    cy.fill("#config-form input[name=model]", "scripted-1")
    cy.click("text=Save the judge")
    cy.wait_for_url(re.compile(rf"/judging/{own}/$"))
    assert "already" not in cy.inner_text("main")
    cy.screenshot(path=str(artifacts / "accounts-05-outsider.png"), full_page=True)
    assert JudgeConfig.objects.filter(name="team-judge").count() == 2
    assert JudgeConfig.objects.get(pk=config.pk).study.slug == slug


@pytest.fixture
def loopback_provider(live_server, tmp_path):
    """The provider process, with three users: one whose address a researcher here has,
    one with an invitation here, one unknown here."""
    config = {
        "database": str(tmp_path / "provider.sqlite3"),
        "client_id": "ideareview-client",
        "client_secret": "loopback-secret",
        "redirect_uri": f"{live_server.url}/accounts/sso/oidc/loopback/login/callback/",
        "users": [
            {"username": name, "password": f"{name}-pass", "email": f"{name}@uni.example"}
            | {"first_name": name.title(), "last_name": "Uni"}
            for name in ("known", "invited", "stranger")
        ],
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.oidc_provider", json.dumps(config)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(process.stdout.readline())  # type: ignore[union-attr]
        yield config, f"http://127.0.0.1:{port}"
    finally:
        process.stdin.close()  # type: ignore[union-attr]
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _sign_on(browser, base: str, username: str):
    context, page = new_page(browser, base)
    page.goto("/login/")
    page.click("text=Sign in with Loopback")
    page.wait_for_selector("text=Loopback identity provider")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", f"{username}-pass")
    page.click("text=Sign in at the provider")
    return context, page


def test_single_sign_on_links_a_researcher_admits_an_invitee_and_refuses_a_stranger(
    browser, live_server, settings, loopback_provider, artifacts
):
    config, issuer = loopback_provider
    settings.SOCIALACCOUNT_PROVIDERS = {
        "openid_connect": {
            "APPS": [
                {
                    "provider_id": "loopback",
                    "name": "Loopback",
                    "client_id": config["client_id"],
                    "secret": config["client_secret"],
                    "settings": {"server_url": f"{issuer}/o"},
                }
            ],
            "OAUTH_PKCE_ENABLED": True,
        }
    }
    settings.CONTENT_SECURITY_POLICY = settings.CONTENT_SECURITY_POLICY.replace(
        "form-action 'self'", f"form-action 'self' {issuer}"
    )
    known = User.objects.create_user("known", email="KNOWN@uni.example", password="x-pass-123")
    researcher_grant(user=known)
    admin = User.objects.create_user("admin", password="x", is_staff=True)
    ResearcherInvitation.objects.create(email="invited@uni.example", nonce="n1", invited_by=admin)

    _, page = _sign_on(browser, live_server.url, "known")
    page.wait_for_url(re.compile(r"/studies/$"))
    assert page.inner_text("header .muted") == "known"  # the existing account, linked
    page.screenshot(path=str(artifacts / "accounts-06-sso.png"), full_page=True)

    _, page = _sign_on(browser, live_server.url, "invited")
    page.wait_for_url(re.compile(r"/studies/$"))
    invited = User.objects.get(email="invited@uni.example")
    assert is_researcher(invited) and not invited.has_usable_password()

    _, page = _sign_on(browser, live_server.url, "stranger")
    page.wait_for_selector("#sso-refused")
    assert "Ask an administrator for an invitation" in page.inner_text("#sso-refused")
    assert not User.objects.filter(email="stranger@uni.example").exists()
