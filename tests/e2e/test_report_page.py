"""The study report in a real browser: plots, the agreement table with its ceiling row,
hover explanations, and the PDF and package downloads."""

from __future__ import annotations

import zipfile

import pytest

from studies.report_files import report_build
from tests.e2e.pages import new_page, owner_login
from tests.factories import FAST, make_agreement_study

pytestmark = [pytest.mark.e2e, pytest.mark.figures]  # reads the report's figures


@pytest.mark.pdf
def test_owner_reads_the_report_with_agreement_and_downloads_pdf_and_package(
    browser, live_server, owner, artifacts, settings, tmp_path
):
    settings.REPORTS_ROOT = tmp_path
    seeded = make_agreement_study(owner, slug="e2e-report")
    report_build(study=seeded.study, out_dir=tmp_path / "rep", options=FAST)

    context, page = new_page(browser, live_server.url, width=1400, height=1000)
    owner_login(page)
    page.goto(f"/studies/{seeded.study.slug}/report/")
    assert page.locator("article.report svg").count() >= 8
    assert page.locator("figure.agreement-bars svg").count() == 1
    assert page.locator("figure.agreement-scatter svg").count() == 1
    assert page.locator("figure.agreement-confusion svg").count() == 1
    table = page.locator("#agreement-table-consistency")
    ceiling = table.locator("tr[data-ceiling]")
    assert ceiling.count() == 1
    assert "Human ceiling" in ceiling.inner_text()
    first = ceiling.locator("td[title]").first
    assert "bootstrap" in first.get_attribute("title")
    assert table.locator("tr.row-judge").count() == 2
    page.locator("#agreement").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "report-page.png"), full_page=True)
    table.screenshot(path=str(artifacts / "report-agreement-table.png"))

    with page.expect_download() as pdf_dl:
        page.click("#download-pdf")
    pdf = tmp_path / "dl.pdf"
    pdf_dl.value.save_as(pdf)
    assert pdf.read_bytes().startswith(b"%PDF")
    with page.expect_download() as zip_dl:
        page.click("#download-package")
    assert zip_dl.value.suggested_filename == "e2e-report-package.zip"
    package = tmp_path / "dl.zip"
    zip_dl.value.save_as(package)
    with zipfile.ZipFile(package) as z:
        assert "package/data/reviews.csv" in z.namelist()
    context.close()

    # The standalone report.html on a phone: its wide tables scroll in place.
    context, page = new_page(browser, live_server.url, width=375, height=800)
    owner_login(page)
    page.goto(f"/studies/{seeded.study.slug}/report/files/report.html")
    assert page.locator(".rep table").count() > 5
    width = page.evaluate("document.documentElement.scrollWidth")
    page.screenshot(path=str(artifacts / "report-html-phone.png"))
    assert width <= 375, f"report.html is {width} px wide at 375 px"
    # Plots keep their drawn size (an SVG unit at least a CSS pixel, so 10 pt labels stay
    # 10 pt) and scroll inside their figure, which the keyboard can reach.
    scales = page.evaluate(PLOT_SCALES)
    assert len(scales) >= 8 and min(scales) >= 1.0, scales
    assert page.locator(".rep figure:not([tabindex='0'])").count() == 0
    context.close()
    for path in (
        f"/studies/{seeded.study.slug}/report/",
        f"/studies/{seeded.study.slug}/report/files/report.html",
    ):
        context, page = new_page(browser, live_server.url, width=375, height=800)
        owner_login(page)
        page.goto(path)
        scales = page.evaluate(PLOT_SCALES)
        assert min(scales) >= 1.0, (path, scales)
        assert page.evaluate("document.documentElement.scrollWidth") <= 375, path
        context.close()


# Rendered width of each report plot over its drawing's own width (viewBox units).
PLOT_SCALES = """() => Array.from(document.querySelectorAll('.rep figure svg'))
  .filter(s => s.viewBox && s.viewBox.baseVal && s.viewBox.baseVal.width)
  .map(s => s.getBoundingClientRect().width / s.viewBox.baseVal.width)"""


def test_the_standalone_report_has_margins_on_a_desktop(
    browser, live_server, owner, artifacts, settings, tmp_path
):
    settings.REPORTS_ROOT = tmp_path
    seeded = make_agreement_study(owner, slug="e2e-margins")
    report_build(study=seeded.study, out_dir=tmp_path / "rep", options=FAST)
    context, page = new_page(browser, live_server.url, width=1400, height=900)
    owner_login(page)
    page.goto(f"/studies/{seeded.study.slug}/report/files/report.html")
    heading = page.locator(".rep h1").bounding_box()
    table = page.locator(".rep table").first.bounding_box()
    assert heading["x"] >= 24 and table["x"] >= 24, (heading, table)
    body = page.locator(".rep").bounding_box()
    # a centred column: as much room on the right as on the left
    assert abs((1400 - body["x"] - body["width"]) - body["x"]) <= 2, body
    page.screenshot(path=str(artifacts / "report-html-desktop.png"))
    context.close()
