"""In a real browser: the owner starts a run of a panel of two judges from the new-run form,
a real Celery worker runs it against two local OpenAI-compatible test servers (a steady and
a noisy behaviour profile), the run page shows the panel's figures, and the judge's own
page shows its figures pooled over the study's runs. The figures on the pages are checked
against scipy on the stored rows."""

from __future__ import annotations

import random
import re
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats

from judging.methods import judge_profiles as jp
from judging.models import JudgeRun, Judgment
from judging.testserver import Rules, TestServer
from llm.models import JudgeConfig
from studies.models import Review, Reviewer, ReviewScore
from tests.e2e.pages import new_page, owner_login
from tests.judging.conftest import make_study

pytestmark = pytest.mark.e2e

WORDS = ["model", "data", "prompt", "answer", "claim", "source", "verify", "rank", "train"]


def _study(owner):
    """Ten ideas in two topics whose quality the test servers read from their text, and
    three reviewers per idea scoring by that quality with noise of their own."""
    rng = random.Random(8)
    texts = {
        topic: [
            " ".join(rng.choice(WORDS) for _ in range(50 + rng.randrange(50))) for _ in range(5)
        ]  # fmt: skip
        for topic in ("Prompting", "Factuality")
    }
    study = make_study(owner, texts=texts, slug="panel-e2e")
    metrics = study.form_definition().metric_keys
    reviewers = [
        Reviewer.objects.create(study=study, pseudonym=f"R{k}", email=f"r{k}@example.org")
        for k in range(3)
    ]
    for idea in study.ideas.all():
        quality = jp.normal("quality", idea.normalized_text)
        for reviewer in reviewers:
            review = Review.objects.create(study=study, idea=idea, reviewer=reviewer)
            ReviewScore.objects.bulk_create(
                ReviewScore(
                    review=review,
                    metric=m,
                    rationale="fine",
                    score=float(min(10, max(1, round(5.5 + 1.2 * quality + rng.gauss(0, 1))))),
                )  # fmt: skip
                for m in metrics
            )
    return study


def _judge(study, owner, server, name):
    return JudgeConfig.objects.create(
        name=name, base_url=server.base_url, model=f"{name}-model",
        api_key_env="IDEAREVIEW_TESTSERVER_KEY", parameters={"temperature": 0}, concurrency=2,
        price_input_per_million="1", price_output_per_million="2", study=study, created_by=owner,
    )  # fmt: skip


def _spearman_by_scipy(run, human):
    """Each seat's and the panel's Spearman ρ with the reviewers' mean on overall, from
    the stored judgments: a seat's score is its mean of parseable samples, the panel's the
    mean of its seats'."""
    seats: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for seat, idea, score in Judgment.objects.filter(run=run, metric="overall").values_list(
        "member", "idea_id", "score"
    ):
        if score is not None:
            seats[seat][idea].append(score)
    means = {s: {i: float(np.mean(v)) for i, v in by.items()} for s, by in seats.items()}
    ideas = sorted(i for i in human if all(i in m for m in means.values()))
    y = [human[i] for i in ideas]
    out = {s: stats.spearmanr([m[i] for i in ideas], y).statistic for s, m in means.items()}
    panel = [np.mean([means[s][i] for s in means]) for i in ideas]
    out["panel"] = stats.spearmanr(panel, y).statistic
    return out


def test_owner_runs_a_panel_of_two_judges_and_reads_its_figures(
    browser, live_server, owner, artifacts, worker
):
    study = _study(owner)
    with (
        TestServer(Rules(profile="neutral", latency=0.05)) as steady_server,
        TestServer(Rules(profile="noisy", latency=0.05)) as noisy_server,
    ):
        _judge(study, owner, noisy_server, "noisy-e2e")
        steady = _judge(study, owner, steady_server, "steady-e2e")
        ctx, page = new_page(browser, live_server.url)
        owner_login(page)
        page.goto(f"/judging/{study.slug}/")
        page.click("text=New run")
        page.select_option("select[name=method]", "direct")
        page.select_option("select[name=config]", label="noisy-e2e")
        page.check(f"#panel-members input[name=panel][value='{steady.pk}']")
        page.click("text=Start the run")
        page.wait_for_url(re.compile(r"/judging/panel-e2e/runs/\d+/$"))
        page.wait_for_selector("#run-status:has-text('Done')", timeout=90_000)
        run = JudgeRun.objects.get(study=study)
        assert run.status == JudgeRun.Status.DONE and run.done_calls == run.total_calls == 20
        assert steady_server.answered == 10 and noisy_server.answered == 10

        human = {}
        for idea in study.ideas.all():
            scores = ReviewScore.objects.filter(review__idea=idea, metric="overall")
            human[idea.pk] = float(np.mean([s.score for s in scores]))
        rho = _spearman_by_scipy(run, human)
        table = page.locator("#panel-overall")
        table.wait_for()
        assert "Panel agreement with the reviewers" in page.inner_text("#reliability")
        panel_row = table.locator("tr.panel-panel").inner_text()
        assert f"{rho['panel']:.3f}" in panel_row
        member_rows = table.locator("tr.panel-member").all_inner_texts()
        assert any(r.startswith("noisy-e2e") and f"{rho[0]:.3f}" in r for r in member_rows)
        assert any(r.startswith("steady-e2e") and f"{rho[1]:.3f}" in r for r in member_rows)
        assert "panel − best member" in table.inner_text()
        page.screenshot(path=str(artifacts / "judge-panel-run.png"), full_page=True)

        # The steady judge's own page: its figures pooled over the study's runs (one here,
        # where it sat at seat 1).
        page.click("#panel-members a:has-text('steady-e2e')")
        page.wait_for_url(re.compile(rf"/judging/panel-e2e/judges/{steady.pk}/$"))
        row = page.locator("#config-agreement-direct-overall").inner_text()
        assert f"{rho[1]:.3f}" in row
        assert f"#{run.pk}" in page.inner_text("#config-runs")
        assert "panel seat 1" in page.inner_text("#config-runs")
        page.screenshot(path=str(artifacts / "judge-config-panel.png"), full_page=True)
        ctx.close()
