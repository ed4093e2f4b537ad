"""A new researcher's whole path in the browser, with no shell after their account exists.

The account is made with `create_researcher` (an administrator's step); everything after
is clicks and typing in chromium: log in, create the study with a built-in form, set its
parameters, import ideas from a file, normalise them against an OpenAI-compatible server
(the scripted one, on loopback) and approve every rewrite that passed its checks, check
the topic table and open the study, invite reviewers (each reads the link from their
email), screen them, preview and commit the assignment, review, close, build the report,
run a judge, and read the agreement. Screenshots go to test-artifacts/walk-*.png
(and phone-*.png for the study set-up pages at 375 px).
"""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.core.management import call_command

from judging.testserver import Rules, TestServer
from studies.models import Assignment, Idea, Study
from tests.e2e.pages import ideas_upload, login, new_page, reviewer_sign_up

pytestmark = pytest.mark.e2e

TIMEOUT = 20_000
PASSWORD = "Walk-pass-4821"

PROPOSAL = """**Title:** {title}

**Problem:** large language models state false facts about {topic} with confidence, and
users cannot tell which claims to trust.

**Motivation:** retrieval helps, but it is slow; checking claims one by one is cheap.

**Proposed Method:** list every claim in an answer, then verify each claim against three
retrieved passages and drop the ones no passage supports.

**Experiment Plan:** evaluate on a benchmark of {topic} questions and report accuracy.

**Test Cases:** a question whose baseline answer is wrong and whose checked answer is right.

**Fallback Plan:** analyse where verification fails, and why.
"""

PASTED = [
    ("h2", "Cheap self verification", "Factuality", "Human"),
    ("a2", "Passages for every claim", "Factuality", "AI"),
]


WORDS = [
    "the",
    "method",
    "is",
    "clear",
    "and",
    "the",
    "plan",
    "is",
    "sound",
    "but",
    "the",
    "baseline",
    "needs",
    "care",
]


def rationale(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


def sign_up(browser, base: str, link: str, email: str, n: int):
    """A reviewer's own browser: account, consent, profile. Returns their page."""
    _, rp = new_page(browser, base, width=390, height=844, timeout=TIMEOUT)
    rp.goto(link)
    reviewer_sign_up(rp, PASSWORD, institution=f"Independent Lab {n}", topics=("Factuality",))
    return rp


def review_all(rp, n: int) -> None:
    """Answer every question of every assigned review, around the middle of each scale
    and differing by reviewer, idea and question (so the report has variance to show)."""
    k = n
    while True:
        k += 1
        rp.goto("/studies/r/home/")
        start = rp.locator("a", has_text="Start")
        if start.count() == 0:
            return
        start.first.click()
        rp.wait_for_url(re.compile(r"/studies/r/assignments/\d+/$"))
        names = rp.eval_on_selector_all(
            "input[type=radio]", "els => [...new Set(els.map(e => e.name))]"
        )
        for i, name in enumerate(names):
            values = rp.eval_on_selector_all(
                f"input[type=radio][name='{name}']", "els => els.map(e => e.value)"
            )
            pick = values[min(len(values) - 1, max(0, len(values) // 2 + (k + i) % 3 - 1))]
            rp.check(f"input[type=radio][name='{name}'][value='{pick}']")
        for area in rp.locator("textarea").all():
            area.fill(rationale(40))
        if rp.locator("input[name=minutes]").count():
            rp.fill("input[name=minutes]", "30")
        rp.click("#submit-review")
        rp.wait_for_selector("text=Review submitted")


class Walk:
    """One browser page and the screenshots it leaves, numbered in order."""

    def __init__(self, browser, base: str, artifacts, width: int = 1280, prefix="walk") -> None:
        self.context, self.page = new_page(browser, base, width=width, timeout=TIMEOUT)
        self.artifacts = artifacts
        self.n = 0
        self.prefix = prefix

    def shot(self, name: str, full_page: bool = True) -> None:
        self.n += 1
        path = self.artifacts / f"{self.prefix}-{self.n:02d}-{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)

    def login(self, username: str, password: str) -> None:
        login(self.page, username, password)


def test_a_new_researcher_runs_a_study_from_login_to_report(
    browser, live_server, artifacts, worker, db, tmp_path
):
    call_command("create_researcher", "rita", email="rita@example.org", password=PASSWORD)
    with TestServer(Rules(latency=0.05)) as llm:
        walk = Walk(browser, live_server.url, artifacts)
        page = walk.page
        walk.login("rita", PASSWORD)
        page.wait_for_url(re.compile(r"/studies/$"))
        walk.shot("empty-study-list")

        # New study, with a built-in review form, its conditions and a topic.
        page.click("#new-study")
        page.fill("input[name=slug]", "walk")
        page.fill("input[name=title]", "Walk study")
        page.select_option("select[name=review_form]", "si2024")
        page.fill("input[name=conditions]", "Human, AI")
        page.fill("input[name=baseline_condition]", "Human")
        page.fill("textarea[name=topics]", "Factuality")
        walk.shot("new-study")
        page.click("text=Create the study")
        # A new study's address is its short name and six random characters.
        page.wait_for_url(re.compile(r"/studies/walk-[a-z0-9]{6}/$"))
        slug = page.url.rstrip("/").rsplit("/", 1)[-1]
        page.wait_for_selector("text=Study “Walk study” created")
        walk.shot("study-created")

        # The review form page: the built-in chosen at creation, previewed as reviewers see it.
        page.click("nav.actions >> text=Review form")
        page.click("button[name=intent][value=preview]")
        page.wait_for_selector("text=valid")
        walk.shot("review-form")
        page.goto(f"/studies/{slug}/")

        # Settings: a small study needs small loads.
        page.click("nav.actions >> text=Settings")
        page.fill("input[name=min_reviews_per_idea]", "1")
        page.fill("input[name=max_reviews_per_idea]", "2")
        page.fill("input[name=min_load]", "2")
        page.fill("input[name=max_load]", "4")
        page.fill("input[name=payment_per_review]", "25")
        page.click("text=Save settings")
        page.wait_for_selector("text=Saved:")
        walk.shot("settings")
        study = Study.objects.get(slug=slug)
        assert (study.min_load, study.max_load, study.max_reviews_per_idea) == (2, 4, 2)

        # Ideas: the import page's sample file, downloaded and uploaded again, and two
        # proposals pasted one at a time.
        page.goto(f"/studies/{slug}/")
        page.click("nav.actions >> text=Ideas")
        page.click("nav.subnav >> text=Import")
        with page.expect_download() as download:
            page.click("text=ideas sample (CSV)")
        # Saved under the name the server gave it (the import reads the file type from it).
        sample = tmp_path / download.value.suggested_filename
        download.value.save_as(sample)
        ideas_upload(page, str(sample))
        page.wait_for_selector("text=Imported 2 ideas")
        walk.shot("ideas-imported")
        page.click("nav.subnav >> text=Import")
        for ext, title, topic, cond in PASTED:
            page.fill("input[name=external_id]", ext)
            page.fill("input[name=title]", title)
            page.select_option("select[name=topic]", topic)
            page.check(f"input[name=conditions][value='{cond}']")
            page.fill("textarea[name=text]", PROPOSAL.format(title=title, topic=topic))
            page.click("text=Import this proposal")
            page.wait_for_selector(f"text={title}")
            page.click("nav.subnav >> text=Import")
        assert Idea.objects.filter(study=study).count() == 4

        # The settings now say why conditions and topics are locked.
        page.goto(f"/studies/{slug}/settings/")
        assert "ideas have been imported" in page.inner_text("main")
        assert page.is_disabled("input[name=conditions]")
        walk.shot("settings-locked")

        # Normalization against the scripted server: a judge config made on the page.
        page.goto(f"/studies/{slug}/ideas/normalization/")
        page.click("summary:has-text('Create a judge config')")
        page.fill("form:has(input[value=create]) input[name=name]", "scripted")
        page.fill("form:has(input[value=create]) input[name=base_url]", llm.base_url)
        page.fill("form:has(input[value=create]) input[name=model]", "scripted-1")
        page.click("text=Create and use it")
        page.wait_for_selector("text=Normalization uses scripted")
        page.click("text=Normalise the ideas")
        page.wait_for_selector("#job-done", timeout=90_000)
        walk.shot("normalized")
        page.click("#approve-passed")
        walk.shot("approve-passed-confirm")
        page.check("input[name=confirm]")
        page.click("button:has-text('rewrite')")
        page.wait_for_selector("text=that passed every check.")
        walk.shot("approved")
        # A flagged rewrite is read and decided on its own page.
        while page.locator("text=/Sign off the next of/").count():
            page.click("text=/Sign off the next of/")
            page.wait_for_selector("#approve")
            walk.shot("signoff-flagged")
            page.click("#approve")
            page.wait_for_selector("text=rewrite approved")
            page.goto(f"/studies/{slug}/ideas/normalization/")
        approved = Idea.objects.filter(study=study, normalization_status="approved").count()
        assert approved == 4, approved

        # Topic table, then open the study for review.
        page.click("nav >> text=Topic matching")
        walk.shot("topics")
        page.click("#open-for-review")
        page.wait_for_selector("text=The study is open for review")
        walk.shot("opened")

        # Invitations: three reviewers, each reading their link from their email.
        reviewers = []
        for n, name in enumerate(["Nia Expert", "Omar Expert", "Pia Expert"]):
            # Each at their own domain: the assignment reads an address's domain as the
            # reviewer's institution, and three labs make three institutions.
            email = f"reviewer{n}@lab{n}.org"
            page.goto(f"/studies/{slug}/invitations/")
            page.fill("input[name=name]", name)
            page.fill("input[name=email]", email)
            page.click("text=Send the invitation")
            page.wait_for_selector(f"text=Invitation sent to {email}")
            link = re.search(r"(http://\S+/studies/r/invite/\S+/)", mail.outbox[-1].body)
            reviewers.append(sign_up(browser, live_server.url, link.group(1), email, n))
        walk.shot("invitations")

        # Screening by the rule, then the assignment: preview (a job), read, commit.
        page.goto(f"/studies/{slug}/reviewers/")
        page.click("text=Approve all pending profiles that meet the rule")
        walk.shot("screened")
        page.goto(f"/studies/{slug}/assignment/")
        page.click("text=Preview the assignment")
        page.wait_for_selector("text=Commit this assignment", timeout=90_000)
        walk.shot("assignment-preview")
        page.click("text=Commit this assignment")
        page.wait_for_url(re.compile(r"/progress/$"))
        assert Assignment.objects.filter(study=study).count() >= 6

        # Each reviewer reviews everything assigned to them.
        for n, rp in enumerate(reviewers):
            review_all(rp, n)
        page.goto(f"/studies/{slug}/progress/")
        walk.shot("progress")

        # Close, build the report.
        # (the progress panel refreshes itself every 10 s; tick and click without a pause)
        page.check("input[name=confirm][value=close]")
        page.click("button:has-text('Close the study')")
        page.wait_for_selector("text=The study is closed")
        walk.shot("closed")
        page.goto(f"/studies/{slug}/report/")
        page.click("text=Build the report")
        page.wait_for_selector("text=Built", timeout=180_000)
        page.wait_for_selector("article.report")
        walk.shot("report")

        # A judge (direct scoring by the scripted model), then the report again with
        # the agreement between judge and reviewers.
        page.goto(f"/judging/{slug}/runs/new/")
        page.select_option("select[name=method]", "direct")
        page.select_option("select[name=config]", label="scripted")
        page.click("text=Start the run")
        page.wait_for_selector("#run-status.done", timeout=120_000)
        walk.shot("judge-run")
        page.goto(f"/studies/{slug}/report/")
        page.click("text=Rebuild the report")
        # The page reloads itself when the new report is ready; the judge is then in it.
        page.wait_for_selector("#agreement ~ table >> text=scripted", timeout=180_000)
        walk.shot("report-with-agreement")
        page.locator("#agreement").scroll_into_view_if_needed()
        walk.shot("agreement-section", full_page=False)
        assert "Human–LLM agreement" in page.inner_text("main")

        walk.context.close()


def test_new_study_settings_and_team_pages_fit_a_phone(browser, live_server, artifacts, db):
    call_command("create_researcher", "sam", email="sam@example.org", password=PASSWORD)
    call_command("create_researcher", "tia", email="tia@example.org", password=PASSWORD)
    walk = Walk(browser, live_server.url, artifacts, width=375, prefix="phone")
    page = walk.page
    walk.login("sam", PASSWORD)
    page.wait_for_url(re.compile(r"/studies/$"))
    page.click("#new-study")
    page.fill("input[name=slug]", "phone")
    page.fill("input[name=title]", "A study with a rather long title, on a phone")
    page.fill("textarea[name=topics]", "Factuality\nMath")
    page.click("text=Create the study")
    page.wait_for_url(re.compile(r"/studies/phone-[a-z0-9]{6}/$"))
    slug = page.url.rstrip("/").rsplit("/", 1)[-1]
    page.goto(f"/studies/{slug}/members/")
    page.fill("input[name=identifier]", "tia@example.org")
    page.select_option("#member-add select[name=role]", "editor")
    page.click("text=Add to the team")
    page.wait_for_selector("text=added as Editor")
    for path, name in [
        ("/studies/new/", "new-study"),
        (f"/studies/{slug}/settings/", "settings"),
        (f"/studies/{slug}/members/", "team"),
        (f"/studies/{slug}/plan/", "plan"),  # its 64-character plan hash wraps
    ]:
        page.goto(path)
        walk.shot(name)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"{path} is {width} px wide at 375 px"
    walk.context.close()
