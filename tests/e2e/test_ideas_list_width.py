"""The owner's ideas list of a study of imported reviews (si2024) on a 1280 px screen:
titles that are file names with no spaces wrap, and a "no text" badge stays on one line,
so the whole table fits its box and the page. Screenshot: test-artifacts/ideas-1280.png."""

from __future__ import annotations

import pytest

from tests.e2e.pages import new_page, owner_login

pytestmark = pytest.mark.e2e


def test_the_ideas_of_imported_reviews_fit_a_1280_px_screen(
    browser, live_server, si2024_study, artifacts
):
    _, page = new_page(browser, live_server.url, width=1280, height=800)
    owner_login(page)
    page.goto(f"/studies/{si2024_study.slug}/ideas/")
    page.wait_for_selector("#ideas")
    assert page.locator("#ideas td", has_text=".json").count() > 0
    box = page.evaluate(
        "(() => { const s = document.querySelector('#ideas').closest('.table-scroll');"
        " return [s.scrollWidth, s.clientWidth]; })()"
    )
    page.screenshot(path=str(artifacts / "ideas-1280.png"))
    assert box[0] <= box[1], f"the table is {box[0]} px wide in a {box[1]} px box"
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    # Each badge is one line: as tall as its own text, not two or more lines of it.
    heights = page.evaluate(
        "[...document.querySelectorAll('#ideas .badge')].map(b => "
        "[b.getBoundingClientRect().height, parseFloat(getComputedStyle(b).lineHeight)])"
    )
    assert heights and all(h <= 1.5 * line for h, line in heights)
