"""Preparing ideas in a real browser: import a file, check the topic table, run the
normalization job on a real Celery worker against the scripted server over HTTP while its
progress bar moves, then read the word diff and approve the rewrite."""

from __future__ import annotations

import csv
import io
import re

import pytest

from judging.testserver import Rules, TestServer
from llm.models import JudgeConfig
from studies.models import Condition, Idea, JobRun, Topic
from studies.services.study import study_create
from tests.e2e.pages import ideas_upload, new_page, owner_login

pytestmark = pytest.mark.e2e

PROPOSAL = """**Title:** {title}

**Problem:**
- large language models state false facts with confidence
- users cannot tell which claims to trust

**Motivation:** retrieval helps, but it is slow; self-checking is cheap.

**Proposed Method:**
1. ask {model} to list every claim in its answer
2. verify each claim against 3 retrieved passages

**Experiment Plan:** evaluate on TruthfulQA (817 questions) and report accuracy per category.

**Test Cases:** who wrote Hamlet? the baseline says Marlowe, ours says Shakespeare.

**Fallback Plan:** analyse where verification fails, and why.
"""

ROWS = [
    ("h1", "Checking claims twice", "Factuality", "Human", "GPT-4"),
    ("h2", "Cheap self verification", "Factuality", "Human", "Llama-3-8B"),
    ("a1", "Claim lists for trust", "Factuality", "AI", "Mistral-7B"),
    ("a2", "Passages for every claim", "Factuality", "AI", "Qwen-2-7B"),
]


def ideas_csv() -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "title", "topic", "condition", "text", "institution"])
    for ext, title, topic, cond, model in ROWS:
        writer.writerow([ext, title, topic, cond, PROPOSAL.format(title=title, model=model), ""])
    return out.getvalue().encode()


def test_import_topics_normalization_progress_diff_and_approve(
    browser, live_server, owner, artifacts, worker
):
    study = study_create(owner=owner, slug="prep-e2e", title="Idea preparation")
    Topic.objects.create(study=study, name="Factuality")
    Condition.objects.create(study=study, key="Human", kind=Condition.Kind.HUMAN)
    Condition.objects.create(study=study, key="AI", kind=Condition.Kind.AI)
    with TestServer(
        Rules(latency=0.5, normalize_style="canonical", normalize_drop=["GPT-4"])
    ) as server:
        JudgeConfig.objects.create(
            name="scripted-normalizer",
            base_url=server.base_url,
            model="scripted",
            concurrency=1,
            backoff_seconds=0,
        )
        ctx, page = new_page(browser, live_server.url, width=1400, height=1000)
        owner_login(page)

        # Import a CSV of four proposals written in their own style.
        page.goto(f"/studies/{study.slug}/ideas/import/")
        ideas_upload(page, [{"name": "ideas.csv", "mimeType": "text/csv", "buffer": ideas_csv()}])
        page.wait_for_url(re.compile(r"/ideas/$"))
        page.wait_for_selector("text=Imported 4 ideas from ideas.csv")
        assert Idea.objects.filter(study=study).count() == 4

        # The topic table: two ideas per condition, matched.
        page.click("nav.subnav >> text=Topic matching")
        page.wait_for_url(re.compile(r"/ideas/topics/$"))
        table = page.locator("#topic-table")
        assert re.search(r"Factuality\s+2\s+2\s+matched", table.inner_text())

        # Normalization: choose the judge config, start, and watch the progress bar.
        page.goto(f"/studies/{study.slug}/ideas/normalization/")
        page.select_option("select[name=config]", label="scripted-normalizer")
        page.click("text=Use this judge config")
        page.wait_for_selector("text=Normalization uses scripted-normalizer")
        page.click("text=Normalise the ideas")
        page.wait_for_selector("#normalization-progress")
        page.screenshot(path=str(artifacts / "normalization-progress.png"), full_page=True)
        # The fragment polls every second; at the end the page reloads with the results.
        page.wait_for_selector("#job-done", timeout=60_000)
        job = JobRun.objects.get(study=study, kind="normalization")
        assert job.status == JobRun.Status.DONE and job.done == job.total == 4
        assert server.answered == 4 and server.max_in_flight == 1
        assert "4 rewritten (1 flagged)" in page.inner_text("#job-done")

        # The flagged rewrite comes first in the sign-off queue: read the diff, approve.
        page.click("text=Sign off the next of 4")
        flagged = Idea.objects.get(study=study, title="Checking claims twice")
        page.wait_for_url(re.compile(rf"/ideas/{flagged.pk}/signoff/$"))
        assert "missing names: GPT-4" in page.inner_text("#failed-checks")
        assert page.locator("#diff-original del").count() > 0
        assert page.locator("#diff-normalized ins").count() > 0
        assert any("GPT-4" in t for t in page.locator("#diff-original del").all_inner_texts())
        page.screenshot(path=str(artifacts / "idea-prep-diff.png"), full_page=True)
        page.locator("#diff-original").screenshot(path=str(artifacts / "idea-prep-diff-panel.png"))

        page.click("#approve")
        page.wait_for_selector("text=rewrite approved")
        flagged.refresh_from_db()
        assert flagged.normalization_status == Idea.NormalizationStatus.APPROVED
        assert flagged.reviewable_text() == flagged.normalized_text != ""
        page.goto(f"/studies/{study.slug}/ideas/{flagged.pk}/signoff/")
        assert page.locator("#status").inner_text() == "Approved"
        page.screenshot(path=str(artifacts / "idea-prep-approved.png"), full_page=True)
        ctx.close()
