"""Payments in a real browser (docs/payments.md): the owner sets a rate on the settings
page, rejects one review and accepts the rest, reads who is owed what and downloads the
CSV; every amount is checked against the review rows in the database."""

from __future__ import annotations

import csv
import io
import re
from decimal import Decimal

import pytest

from studies.models import Assignment, Review
from studies.services.reviews import review_submit
from tests.e2e.pages import new_page, owner_login
from tests.factories import cleaned, make_review_study

pytestmark = pytest.mark.e2e

RATE = Decimal("17.50")


def _owed_from_rows(study) -> dict[str, Decimal]:
    owed: dict[str, Decimal] = {}
    for r in Review.objects.filter(study=study, status="submitted").select_related(
        "reviewer", "acceptance"
    ):
        accepted = (
            getattr(r, "acceptance", None) is not None and r.acceptance.decision == "accepted"
        )
        owed[r.reviewer.pseudonym] = owed.get(r.reviewer.pseudonym, Decimal(0)) + (
            RATE if accepted else Decimal(0)
        )
    return owed


def test_owner_sets_a_rate_and_the_page_and_csv_pay_the_accepted_reviews(
    browser, live_server, owner, artifacts
):
    seeded = make_review_study(owner, slug="payw", n_reviewers=4)
    study = seeded.study
    for n, a in enumerate(Assignment.objects.filter(study=study).order_by("pk")):
        review_submit(assignment=a, cleaned=cleaned(study, 3 + n % 5))
    n_reviews = Review.objects.filter(study=study, status="submitted").count()
    assert n_reviews >= 4

    _, page = new_page(browser, live_server.url)
    owner_login(page)

    page.goto(f"/studies/{study.slug}/settings/")
    page.fill("input[name=payment_per_review]", str(RATE))
    page.click("text=Save settings")
    page.wait_for_selector("text=Saved:")
    study.refresh_from_db()
    assert study.payment_per_review == RATE

    # Reject the first review (with a reason), accept the others in one step.
    page.goto(f"/studies/{study.slug}/payments/")
    page.click("text=Accept or reject the submitted reviews")
    first = page.locator("form.decision").first
    first.locator("input[value=rejected]").check()
    first.locator("input[name=reason]").fill("answers pasted from another review")
    first.locator("button[type=submit]").click()
    page.wait_for_selector("text=answers pasted from another review")
    page.check("input[name=confirm]")
    page.click(f"text=Accept {n_reviews - 1}")
    page.wait_for_selector(
        f"text=0 of {n_reviews} submitted review{'' if n_reviews == 1 else 's'} have no decision yet"
    )

    owed = _owed_from_rows(study)
    assert sum(owed.values()) == RATE * (n_reviews - 1)

    page.goto(f"/studies/{study.slug}/payments/")
    assert f"{RATE} " in page.locator("#rates").inner_text()
    shown: dict[str, Decimal] = {}
    for row in page.locator("#reviewer-payments tbody tr").all():
        cells = row.locator("td").all_inner_texts()
        shown[cells[1]] = Decimal(cells[6])
    assert shown == owed
    total = page.locator("#reviewer-payments tfoot th.num").inner_text()
    assert Decimal(total) == RATE * (n_reviews - 1)
    page.screenshot(path=str(artifacts / "payments.png"), full_page=True)

    with page.expect_download() as download:
        page.click("text=Download the payments (CSV)")
    assert re.search(r"\.csv$", download.value.suggested_filename)
    text = download.value.path().read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    exported = {r["payee"]: Decimal(r["amount"]) for r in rows if r["payee_type"] == "reviewer"}
    assert exported == owed
    rejected = {
        r["payee"]: int(r["reviews_rejected"]) for r in rows if r["payee_type"] == "reviewer"
    }
    assert sum(rejected.values()) == 1
