"""In a real browser: an owner links an execution study to the ideation study whose
ideas it carried out, sets the comparison in the analysis plan, builds the report on a
real Celery worker and reads the phase comparison."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from studies.models import AuditEvent, Study
from tests.e2e.pages import new_page, owner_login

pytestmark = [pytest.mark.e2e, pytest.mark.figures]  # reads the report's figures

RELEASE = Path(__file__).resolve().parents[1] / "data" / "synthetic_execution_release.json"
PLAN = {
    "multiple_testing": {"method": "bh"},
    "phases": {"direction": "AI < Human", "leave_out": ["Coding_2_AI"]},
}


def test_owner_links_two_phases_and_reads_the_comparison_in_the_report(
    browser, live_server, owner, si2024_study, artifacts, worker, settings, tmp_path
):
    settings.REPORTS_ROOT = str(tmp_path / "reports")
    settings.ANALYSIS_CONSISTENCY_SPLITS = 50
    settings.ANALYSIS_MIXED_STARTS = 1
    settings.IDEAREVIEW_CHROMIUM = str(tmp_path / "no-pdf")
    call_command(
        "import_reviews",
        format="generic",
        reviews=RELEASE,
        study="exec",
        owner="owner",
        form="execution",
        baseline="Human",
        human_conditions="Human",
        map=["code_quality=codebase_quality"],
        stdout=io.StringIO(),
    )

    context, page = new_page(browser, live_server.url)
    owner_login(page)
    page.goto("/studies/exec/")
    page.click("#nav-phases")
    page.wait_for_url(re.compile(r"/studies/exec/phases/$"))
    assert "Not linked" in page.locator("#phase-unlinked").inner_text()
    page.select_option("#phase-previous", "si2024")
    page.click("#phase-check")
    page.wait_for_selector("#phase-check-result")
    assert page.locator("#phase-compared").inner_text() == "Ideas in both phases: 43"
    metrics = page.locator("#phase-metrics").inner_text()
    assert "overall\t1–10 in both" in metrics and "code_quality\tonly in exec" in metrics
    page.screenshot(path=str(artifacts / "phases-check.png"), full_page=True)
    page.click("#phase-link-submit")
    page.wait_for_selector("#phase-linked")
    assert Study.objects.get(slug="exec").previous_phase_id == si2024_study.pk
    assert AuditEvent.objects.filter(verb="phase_linked", actor=owner).count() == 1

    page.goto("/studies/exec/plan/")
    page.fill("textarea[name=document]", json.dumps(PLAN))
    page.click("form button[type=submit]:text('Save the plan')")
    page.wait_for_selector("text=Analysis plan saved.")

    page.goto("/studies/exec/report/")
    page.click("nav.actions form button[type=submit]")
    page.wait_for_selector("#job >> text=/finished/", timeout=240_000)
    page.goto("/studies/exec/report/")
    section = page.locator("article.report")
    heading = section.locator("h2#phases")
    assert heading.inner_text() == "Phase comparison: si2024 → exec"
    notes = section.locator("#phases-notes").inner_text()
    assert "42 ideas are in both phases and compared" in notes
    assert "Left out by the analysis plan: Coding_2_AI" in notes
    tests = section.locator("#phases-tests")
    assert tests.locator("tbody tr").count() == 4
    assert tests.locator("td:text-is('less')").count() == 4
    assert section.locator("#phases-changes tbody tr").count() == 8
    # The slope plot: one panel per shared metric, drawn before the tables.
    figure = section.locator("h2#phases ~ figure").first
    assert figure.locator("svg").count() == 1
    assert "Each idea's mean in si2024 and exec" in figure.inner_text()
    figure.screenshot(path=str(artifacts / "phases-slopes.png"))
    section.locator("#phases-tests").screenshot(path=str(artifacts / "phases-tests.png"))
    heading.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "phases-report.png"), full_page=True)
    with page.expect_download() as dl:
        page.click("a:text-is('phase_tests.csv')")
    assert dl.value.suggested_filename == "phase_tests.csv"
    context.close()
