"""Owner actions that ask first or answer with every problem, in a real browser: dropping
a reviewer goes through a page that says what it withdraws and keeps; a bad analysis plan
is answered with each wrong field listed; the pages carry their icon. Screenshots go to
test-artifacts/confirm-*.png."""

from __future__ import annotations

import json

import pytest

from studies.analysis.rounding import counted
from studies.models import Assignment
from tests.e2e.pages import new_page, owner_login
from tests.factories import make_review_study

pytestmark = pytest.mark.e2e


def test_owner_drops_a_reviewer_after_reading_what_it_does_and_sees_every_plan_error(
    browser, live_server, owner, artifacts
):
    seeded = make_review_study(owner, slug="confirm")
    study, leaver = seeded.study, seeded.reviewers[0]
    open_n = Assignment.objects.filter(reviewer=leaver, status__in=["pending", "draft"]).count()
    assert open_n > 0
    _, page = new_page(browser, live_server.url, width=375)
    owner_login(page)
    icon = page.get_attribute('link[rel="icon"]', "href")
    assert page.request.get(icon).status == 200

    page.goto(f"/studies/{study.slug}/reviewers/")
    page.click(f"#reviewer-{leaver.pk} >> text=Mark as dropped")
    page.wait_for_selector("#drop-confirm")
    assert counted(open_n, "open review") in page.inner_text("#drop-open")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.screenshot(path=str(artifacts / "confirm-01-drop.png"), full_page=True)
    leaver.refresh_from_db()
    assert leaver.dropped_at is None  # reading the page changed nothing
    page.click("#drop-confirm")
    page.wait_for_selector(f"text={leaver.pseudonym} dropped")
    leaver.refresh_from_db()
    assert leaver.dropped_at is not None
    assert not Assignment.objects.filter(reviewer=leaver, status__in=["pending", "draft"])

    page.goto(f"/studies/{study.slug}/plan/")
    bad = {"multiple_testing": {"method": "sidak"}, "primary_metrics": ["clarity"], "alpha": 2}
    page.fill("#id_document", json.dumps(bad))
    page.click("text=Save the plan")
    errors = page.wait_for_selector("#plan-errors")
    text = errors.inner_text()
    for field in ("multiple_testing.method", "primary_metrics", "alpha"):
        assert field in text, text
    page.screenshot(path=str(artifacts / "confirm-02-plan-errors.png"), full_page=True)
