"""In a real browser, as a new researcher: create a study with the execution-study form,
see the form as reviewers will, import its reviews from a CSV through the import page, and
read a report that analyses every metric under its own name and scale (code quality on
1-5)."""

from __future__ import annotations

import csv
import random
import re
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model

from studies.protocol.forms import EXECUTION_FORM
from studies.services.study import researcher_grant
from tests.e2e.pages import login, new_page

pytestmark = pytest.mark.e2e
TIMEOUT = 60_000


def execution_csv(path, seed: int = 3) -> None:
    """Reviews of 8 ideas per condition, three each; code quality is the lab's `code`."""
    rng = random.Random(seed)
    rows = []
    for cond in ("Human", "AI"):
        for i in range(8):
            for r in rng.sample(range(8), 3):
                row = {
                    "idea_id": f"{cond}-{i}",
                    "condition": cond,
                    "topic": "Coding" if i % 2 else "Bias",
                    "reviewer_id": f"rev{r}",
                }
                for m in EXECUTION_FORM.metrics:
                    name = "code" if m.key == "code_quality" else m.key
                    row[name] = rng.randint(m.minimum, m.maximum)
                    if m.rationale:
                        row[f"{m.key}_rationale"] = f"Reason {rng.randint(0, 99)}."
                rows.append(row)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_a_researcher_runs_an_execution_study_from_the_browser(
    browser, live_server, artifacts, worker, settings, tmp_path
):
    settings.REPORTS_ROOT = str(tmp_path / "reports")
    settings.ANALYSIS_CONSISTENCY_SPLITS = 50
    settings.ANALYSIS_MIXED_STARTS = 1
    settings.IDEAREVIEW_CHROMIUM = str(tmp_path / "no-pdf")  # the worker runs in this process
    user = get_user_model().objects.create_user("lab", password="lab-pass-12345")
    researcher_grant(user=user)
    data = tmp_path / "execution.csv"
    execution_csv(data)

    context, page = new_page(browser, live_server.url, timeout=TIMEOUT)
    login(page, "lab", "lab-pass-12345")
    page.wait_for_selector("text=Log out")

    page.goto("/studies/new/")
    page.fill("input[name=slug]", "exec-e2e")
    page.fill("input[name=title]", "Execution study")
    page.select_option("select[name=review_form]", "execution")
    page.fill("input[name=conditions]", "Human, AI")
    page.fill("input[name=baseline_condition]", "Human")
    page.fill("textarea[name=topics]", "Bias\nCoding")
    page.click("form button[type=submit]")
    # The address is the short name and random characters (the study's alone).
    page.wait_for_url(re.compile(r"/studies/exec-e2e-[a-z0-9]{6}/$"))
    home = urlsplit(page.url).path

    page.goto(f"{home}form/")
    preview = page.locator("section.form-preview")
    assert "Executed project review" in preview.inner_text()
    assert "Code quality (1–5)" in preview.inner_text()
    assert preview.locator("input[name=preview-code_quality]").count() == 5
    assert preview.locator("input[name=preview-soundness]").count() == 10
    page.screenshot(path=str(artifacts / "execution-form.png"), full_page=True)

    page.goto(f"{home}import/")
    assert "code_quality" in page.locator("#columns").inner_text()
    page.select_option("select[name=format]", "generic")
    page.set_input_files("input[name=reviews]", str(data))
    page.fill("textarea[name=mapping]", '{"code_quality": "code"}')
    page.fill("input[name=human_conditions]", "Human")
    page.click("form.card button[type=submit]")
    page.wait_for_selector("pre.summary")
    assert "48 new reviews" in page.locator("pre.summary").inner_text()

    page.goto(f"{home}report/")
    page.click("nav.actions form button[type=submit]")
    # the job's progress partial says when the build has finished
    page.wait_for_selector("#job >> text=/finished/", timeout=240_000)
    page.goto(f"{home}report/")
    report = page.locator("article.report")
    text = report.inner_text()
    assert "code_quality 1–5" in text and "soundness 1–10" in text
    for m in EXECUTION_FORM.metric_keys:
        assert report.locator(f"td:text-is('{m}')").count() >= 2, m
    page.screenshot(path=str(artifacts / "execution-report.png"), full_page=True)
    context.close()
