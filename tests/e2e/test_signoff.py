"""The sign-off page in a real browser: flagged rewrite on top, word diff side by side,
approve, and the idea's text is then what reviewers get."""

from __future__ import annotations

import re

import pytest

from judging.testserver import Rules, TestServer
from llm.models import JudgeConfig
from studies import services
from studies.models import Idea
from studies.tasks import normalize_ideas
from tests.e2e.pages import new_page, owner_login
from tests.factories import make_prep_study

pytestmark = pytest.mark.e2e


def test_owner_reviews_a_flagged_rewrite_in_the_diff_view_and_approves_it(
    browser, live_server, owner, artifacts, monkeypatch
):
    study, ideas = make_prep_study(owner, slug="signoff")
    monkeypatch.setattr(normalize_ideas, "delay", lambda *a, **k: None)
    with TestServer(Rules(normalize_drop=["GPT-4"])) as server:
        study.normalization_config = JudgeConfig.objects.create(
            name="scripted", base_url=server.base_url, model="scripted-1", backoff_seconds=0
        )
        study.save()
        job = services.normalization_enqueue(study=study, actor=owner)
        normalize_ideas(job.pk)
    flagged = ideas["gpt"]

    context, page = new_page(browser, live_server.url, width=1400, height=1000)
    owner_login(page)
    page.goto(f"/studies/{study.slug}/ideas/normalization/")
    assert page.locator("#job-done").is_visible()
    page.click("text=Sign off the next of 3")
    page.wait_for_url(re.compile(rf"/ideas/{flagged.pk}/signoff/$"))

    failed = page.locator("#failed-checks")
    assert "missing names: GPT-4" in failed.inner_text()
    # the failed checks sit above the diff
    assert failed.bounding_box()["y"] < page.locator("#diff-original").bounding_box()["y"]
    deleted = page.locator("#diff-original del").first
    assert deleted.inner_text().strip() == "GPT-4"
    assert page.locator("#diff-normalized del").count() == 0
    page.screenshot(path=str(artifacts / "signoff-diff.png"), full_page=True)

    page.click("#approve")
    page.wait_for_url(re.compile(r"/ideas/\d+/signoff/$"))
    page.wait_for_selector("text=rewrite approved")
    flagged.refresh_from_db()
    assert flagged.normalization_status == Idea.NormalizationStatus.APPROVED
    assert flagged.reviewable_text() == flagged.normalized_text != ""
    page.goto(f"/studies/{study.slug}/ideas/{flagged.pk}/signoff/")
    assert page.locator("#status").inner_text() == "Approved"
    page.screenshot(path=str(artifacts / "signoff-approved.png"), full_page=True)
    context.close()
