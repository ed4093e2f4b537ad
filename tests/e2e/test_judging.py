"""In a real browser: the owner starts a judge run, a real Celery worker runs it against the
scripted OpenAI-compatible server, and the page's progress bar follows it to the results."""

from __future__ import annotations

import re

import pytest

from judging.models import JudgeRun
from judging.testserver import Rules, TestServer
from llm.models import JudgeConfig
from tests.e2e.pages import new_page, owner_login
from tests.judging.conftest import make_study

pytestmark = pytest.mark.e2e


def test_owner_creates_a_run_and_watches_it_finish(browser, live_server, owner, artifacts, worker):
    study = make_study(owner, slug="judged-e2e")
    with TestServer(Rules(latency=0.2)) as server:
        JudgeConfig.objects.create(
            name="scripted-e2e",
            base_url=server.base_url,
            model="scripted",
            api_key_env="IDEAREVIEW_TESTSERVER_KEY",
            concurrency=2,
            price_input_per_million="1",
            price_output_per_million="2",
            study=study,
            created_by=owner,
        )
        ctx, page = new_page(browser, live_server.url)
        owner_login(page)
        page.goto(f"/studies/{study.slug}/progress/")
        page.click("text=LLM judges")
        page.wait_for_url(re.compile(r"/judging/judged-e2e/$"))
        page.click("text=New run")
        page.select_option("select[name=method]", "pairwise")
        page.select_option("select[name=config]", label="scripted-e2e")
        page.fill("textarea[name=params]", '{"bt_bootstrap": 50}')
        page.click("text=Start the run")
        page.wait_for_url(re.compile(r"/judging/judged-e2e/runs/\d+/$"))
        assert page.locator("#run-progress progress").count() == 1
        page.screenshot(path=str(artifacts / "judge-run-progress.png"), full_page=True)
        # The fragment polls every second; when the run ends the page reloads with results.
        page.wait_for_selector("#run-status:has-text('Done')", timeout=60_000)
        page.wait_for_selector("#results svg")
        run = JudgeRun.objects.get(study=study)
        assert run.status == JudgeRun.Status.DONE and run.done_calls == run.total_calls == 12
        assert page.inner_text("#run-done").replace(" ", "") == "12/12"
        assert server.answered == 12
        assert "1.000" in page.inner_text("#position-consistency")
        page.screenshot(path=str(artifacts / "judge-run-results.png"), full_page=True)
        ctx.close()
