"""Accessibility and small screens, checked in a real browser.

axe-core (pinned in package.json, installed by `npm ci`) is injected by Playwright into a
fixed list of reviewer pages and the owner's main pages of a finished demo study, at
desktop width and at 375 px, with every rule on; any serious or critical violation
fails. At 375 px no page may be wider than the screen (wide tables scroll inside their
wrapper instead), and the browser must report no Content-Security-Policy refusal.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from judging.models import JudgeRun
from studies.models import Assignment, Idea, Invitation, JobRun, PairTask, Reviewer

pytestmark = [pytest.mark.e2e, pytest.mark.figures]  # reads the report's figures

AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
WIDTHS = {"desktop": (1280, 900), "phone": (375, 740)}
BLOCKING = {"serious", "critical"}


@pytest.fixture
def axe_source() -> str:
    if not AXE.exists():
        reason = f"{AXE} is missing: run `npm ci` at the repository root"
        if os.environ.get("IDEAREVIEW_REQUIRE_BROWSER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return AXE.read_text()


@pytest.fixture
def demo(transactional_db, settings, tmp_path):
    from studies.analysis.report import ReportOptions
    from studies.demo import demo_study_build

    settings.REPORTS_ROOT = tmp_path
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    options = ReportOptions(
        consistency_splits=20,
        consistency_bootstrap=20,
        consistency_permutations=20,
        seed=1,
        mixed_starts=1,
        agreement_splits=10,
        agreement_bootstrap=10,
        agreement_permutations=10,
        panel_bootstrap=10,
    )
    return demo_study_build(
        slug="a11y", ideas_per_condition=4, reviewers=4, seed=2, report_options=options
    )


def session_cookie(user, base: str) -> dict:
    client = Client()
    client.force_login(user)
    return {"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base}


def owner_pages(slug: str) -> list[str]:
    idea = Idea.objects.filter(study__slug=slug).order_by("pk").first()
    names = [
        "study_detail",
        "study_settings",
        "study_members",
        "study_payments",
        "pair_tasks",
        "duplicates",
        "leakage",
        "study_form",
        "reviews_import_page",
        "ideas_list",
        "ideas_import",
        "normalization",
        "topic_matching",
        "study_invitations",
        "study_reviewers",
        "assignment_preview",
        "study_progress",
        "study_report",
        "signoff_approve_passed",
        "study_payments",
        "payment_reviews",
        "study_phases",
    ]
    preview = JobRun.objects.filter(study__slug=slug, kind="assignment").first()
    return [
        reverse("studies:study_list"),
        *(reverse(f"studies:{n}", args=[slug]) for n in names),
        # A finished preview: its tables and plots, not only the form.
        *(
            [reverse("studies:assignment_preview", args=[slug]) + f"?job={preview.pk}"]
            if preview
            else []
        ),
        reverse("studies:idea_signoff", args=[slug, idea.pk]),
        reverse("judging:home", args=[slug]),
        reverse("judging:run_create", args=[slug]),
        *(
            reverse("judging:run_detail", args=[slug, run.pk])
            for run in JudgeRun.objects.filter(study__slug=slug)
        ),
    ]


def reviewer_pages(reviewer: Reviewer) -> list[str]:
    assignment = Assignment.objects.filter(reviewer=reviewer).order_by("pk").first()
    task = PairTask.objects.filter(reviewer=reviewer).order_by("pk").first()
    pages = [
        reverse("studies:reviewer_home"),
        reverse("studies:review_page", args=[assignment.pk]),
        reverse("studies:reviewer_profile", args=[reviewer.pk]),
    ]
    if task is not None:
        pages.append(reverse("studies:pair_page", args=[task.pk]))
    return pages


def anonymous_pages(demo) -> list[str]:
    from studies.services.invitations import invitation_create, invitation_token

    invitation = invitation_create(study=demo.study, email="new@example.org", name="New")
    assert Invitation.objects.filter(pk=invitation.pk).exists()
    return [
        reverse("login"),
        reverse("studies:invitation_open", args=[invitation_token(invitation)]),
    ]


def audit(browser, base: str, cookie: dict | None, paths: list[str], axe: str) -> list[str]:
    """Every serious or critical axe violation and every overflow at 375 px, as lines."""
    problems: list[str] = []
    refused: list[str] = []

    def on_console(msg) -> None:
        if "Content Security Policy" in msg.text:
            refused.append(msg.text)

    for label, (width, height) in WIDTHS.items():
        context = browser.new_context(base_url=base, viewport={"width": width, "height": height})
        if cookie:
            context.add_cookies([cookie])
        page = context.new_page()
        page.on("console", on_console)
        for path in paths:
            response = page.goto(path)
            assert response is not None and response.status == 200, (path, response)
            # Evaluated through the browser's devtools channel: the page's own policy
            # (rightly) refuses an injected inline script. Only violations are read, so
            # only they are collected: axe then keeps one node of each passing rule instead
            # of all of them (docs/testing.md has what that saves).
            page.evaluate(axe)
            result = page.evaluate(
                "async () => await axe.run(document, {resultTypes: ['violations']})"
            )
            for v in result["violations"]:
                if v["impact"] in BLOCKING:
                    targets = [n["target"] for n in v["nodes"]][:3]
                    problems.append(f"{label} {path}: {v['id']} ({v['impact']}) {targets}")
            problems += [f"{label} {path}: {text}" for text in refused]
            refused.clear()
            if label == "phone":
                wide = page.evaluate("document.documentElement.scrollWidth")
                if wide > width:
                    problems.append(f"{label} {path}: {wide} px wide at {width} px")
        context.close()
    return problems


def test_reviewer_and_owner_pages_pass_axe_and_fit_a_phone(
    browser, live_server, demo, axe_source, artifacts
):
    base = live_server.url
    reviewer = Reviewer.objects.filter(study=demo.study).order_by("pk").first()
    owner = get_user_model().objects.get(username="demo-owner")
    problems = audit(browser, base, None, anonymous_pages(demo), axe_source)
    problems += audit(
        browser, base, session_cookie(reviewer.user, base), reviewer_pages(reviewer), axe_source
    )
    problems += audit(
        browser, base, session_cookie(owner, base), owner_pages(demo.study.slug), axe_source
    )
    (artifacts / "accessibility.json").write_text(json.dumps(problems, indent=1))
    assert not problems, "\n".join(problems)
    answered_counter_follows_the_form(browser, base, session_cookie(reviewer.user, base), reviewer)


def answered_counter_follows_the_form(browser, base: str, cookie: dict, reviewer) -> None:
    """On a phone: "x of n answered" counts live, and the bar links to what is left."""
    context = browser.new_context(base_url=base, viewport={"width": 375, "height": 740})
    context.add_cookies([cookie])
    page = context.new_page()
    page.goto(reviewer_pages(reviewer)[1])
    n = page.locator("#review-form fieldset.metric:has(input[type=radio])").count()
    assert n >= 7
    assert page.inner_text("#answered") == f"{n} of {n} answered"  # a submitted review
    assert page.locator("#next-unanswered").is_hidden()
    page.fill("textarea[name=novelty_rationale]", "too short")
    assert page.inner_text("#answered") == f"{n - 1} of {n} answered"
    assert page.get_attribute("#next-unanswered", "href") == "#field-novelty"
    page.click("#next-unanswered")
    assert page.locator("#review-bar, nav.review-bar").first.is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    context.close()
