"""End to end in a real browser: recruitment to submitted review, and a pair task."""

from __future__ import annotations

import re

import pytest
from django.core import mail

from studies.models import Assignment, PairTask, Review, Reviewer
from tests.e2e.pages import new_page, owner_login, reviewer_login, reviewer_sign_up
from tests.factories import make_review_study, rationale

pytestmark = pytest.mark.e2e


def fill_metric(page, key: str, score: int, words: int = 30) -> None:
    page.check(f"input[name={key}][value='{score}']")
    page.fill(f"textarea[name={key}_rationale]", rationale(words, "clear"))


def _wait_for_draft(reviewer, field: str, start: str, seconds: float = 30) -> None:
    """Until one of the reviewer's drafts on the server holds `field` starting with `start`."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        drafts = Review.objects.filter(reviewer=reviewer).values_list("draft", flat=True)
        if any(str(d.get(field, "")).startswith(start) for d in drafts):
            return
        time.sleep(0.1)
    raise AssertionError(f"no draft of the reviewer held {field} starting {start!r}")


def test_invite_sign_up_screen_assign_review_in_two_visits_and_progress(
    browser, live_server, owner, artifacts, worker
):
    seeded = make_review_study(owner, commit=False, n_reviewers=5)
    study = seeded.study
    base = live_server.url
    owner_ctx, op = new_page(browser, base)
    owner_login(op)

    # Invite.
    op.goto(f"/studies/{study.slug}/invitations/")
    op.fill("input[name=name]", "Nia Expert")
    op.fill("input[name=email]", "nia@example.org")
    op.click("text=Send the invitation")
    op.wait_for_selector("text=Invitation sent to nia@example.org")
    link = re.search(r"(http://\S+/studies/r/invite/\S+/)", mail.outbox[-1].body).group(1)

    # Sign up, consent, profile.
    rev_ctx, rp = new_page(browser, base)
    rp.goto(link)
    assert rp.input_value("input[name=email]") == "nia@example.org"
    reviewer_sign_up(rp, "Str0ng-pass-9", institution="Independent Lab", topics=("Bias", "Coding"))

    # The owner approves (an htmx row swap) and commits an assignment.
    nia = Reviewer.objects.get(study=study, email="nia@example.org")
    op.goto(f"/studies/{study.slug}/reviewers/")
    row = op.locator(f"#reviewer-{nia.pk}")
    row.locator("button[value=approve]").click()
    # (a locator, not wait_for_function: the page's CSP forbids evaluating strings)
    op.locator(f"#reviewer-{nia.pk}", has_text="approved").wait_for()
    op.goto(f"/studies/{study.slug}/assignment/")
    op.fill("input[name=seed]", "3")
    op.click("text=Preview the assignment")
    op.wait_for_selector("#preview .plots img")
    op.click("text=Commit this assignment")
    # Committing does not open the study: the owner lands on the step that does.
    op.wait_for_url(re.compile(r"/ideas/open/$"))
    assert Assignment.objects.filter(reviewer=nia).count() == 2
    rp.goto("/studies/r/home/")
    assert "has not opened for review yet" in rp.inner_text("main")
    assert rp.locator("a", has_text="Start").count() == 0
    mail.outbox.clear()
    op.click("#open-for-review")
    op.wait_for_selector("text=The study is open for review")
    assert "nia@example.org" in {m.to[0] for m in mail.outbox}

    # First visit: part of the review, saved by autosave; a reload shows it.
    rp.goto("/studies/r/home/")
    rp.locator("a", has_text="Start").first.click()
    rp.wait_for_url(re.compile(r"/studies/r/assignments/\d+/$"))
    assignment_url = rp.url
    assert "Fallback Plan" in rp.inner_text(".idea")
    fill_metric(rp, "novelty", 7)
    fill_metric(rp, "excitement", 6)
    rp.wait_for_selector("#save-status:has-text('Draft saved')")
    # "Draft saved" may be an earlier save's (the novelty answers); on a loaded machine the
    # one carrying the last rationale can still be on its way. Reload once the server has it.
    _wait_for_draft(nia, "excitement_rationale", "clear clear")
    rp.reload()
    assert rp.is_checked("input[name=novelty][value='7']")
    assert rp.input_value("textarea[name=excitement_rationale]").startswith("clear clear")
    rp.close()

    # Second visit, in a fresh tab: finish, see what is missing, fix, submit.
    rp = rev_ctx.new_page()
    rp.goto(assignment_url)
    assert rp.is_checked("input[name=novelty][value='7']")
    fill_metric(rp, "feasibility", 5)
    fill_metric(rp, "effectiveness", 6)
    fill_metric(rp, "overall", 6, words=5)  # too short
    rp.check("input[name=familiarity][value='4']")
    rp.check("input[name=confidence][value='3']")
    rp.fill("input[name=minutes]", "35")
    rp.click("#submit-review")
    rp.wait_for_selector("#missing")
    assert "Overall rationale has 5 words" in rp.inner_text("#missing")
    rp.fill("textarea[name=overall_rationale]", rationale(30, "fine"))
    rp.evaluate("window.scrollTo(0, 0)")
    rp.screenshot(path=str(artifacts / "review-page.png"), full_page=True)
    rp.click("#submit-review")
    rp.wait_for_selector("text=Review submitted")
    review = Review.objects.get(assignment__reviewer=nia, status="submitted")
    assert review.minutes == 35 and review.minutes_measured is not None
    assert review.scores.get(metric="novelty").score == 7

    # The owner sees it on the progress page.
    op.goto(f"/studies/{study.slug}/progress/")
    assert re.search(r"\b1\s+of\s+\d+ submitted", op.inner_text("#progress"))
    owner_ctx.close()
    rev_ctx.close()


def test_pair_task_from_creation_to_judgment(browser, live_server, owner, artifacts):
    seeded = make_review_study(owner, n_reviewers=6)
    study = seeded.study
    base = live_server.url
    owner_ctx, op = new_page(browser, base)
    owner_login(op)
    op.goto(f"/studies/{study.slug}/pair-tasks/")
    op.fill("input[name=per_reviewer]", "1")
    op.select_option("select[name=condition_a]", "Human_Experts")
    op.select_option("select[name=condition_b]", "AI_Ideas")
    op.click("text=Create pair tasks")
    op.wait_for_selector("text=Created 6 pair tasks")

    reviewer = seeded.reviewers[0]
    task = PairTask.objects.get(reviewer=reviewer)
    rev_ctx, rp = new_page(browser, base)
    reviewer_login(rp, seeded.users[0].username, "pw-Rev-12345")
    rp.locator("a", has_text="Rate").first.click()
    rp.wait_for_url(re.compile(rf"/studies/r/pairs/{task.pk}/$"))
    first, second = (
        rp.locator("#first-idea").bounding_box(),
        rp.locator("#second-idea").bounding_box(),
    )
    assert abs(first["y"] - second["y"]) < 2 and second["x"] > first["x"]  # side by side
    rp.screenshot(path=str(artifacts / "pair-page.png"), full_page=True)
    rp.set_viewport_size({"width": 420, "height": 900})
    first, second = (
        rp.locator("#first-idea").bounding_box(),
        rp.locator("#second-idea").bounding_box(),
    )
    assert second["y"] > first["y"] + first["height"] - 2  # stacked
    rp.screenshot(path=str(artifacts / "pair-page-narrow.png"), full_page=True)
    rp.set_viewport_size({"width": 1280, "height": 900})
    for n, d in enumerate(task.dimensions):
        choice = ["first", "tie", "second"][n % 3]
        rp.check(f"input[name={d}][value={choice}]")
    rp.fill("textarea[name=rationale]", "The first plan is more concrete.")
    rp.click("#submit-pair")
    rp.wait_for_selector("text=Rating saved")
    task.refresh_from_db()
    assert task.status == "submitted"
    winners = dict(task.judgments.values_list("dimension", "winner"))
    first_letter, second_letter = ("a", "b") if task.a_on_left else ("b", "a")
    assert winners[task.dimensions[0]] == first_letter
    assert winners[task.dimensions[1]] == "tie"
    assert winners[task.dimensions[2]] == second_letter

    op.goto(f"/studies/{study.slug}/pair-tasks/")
    assert "Submitted" in op.inner_text("table")
    owner_ctx.close()
    rev_ctx.close()


def test_the_review_page_by_keyboard_its_word_counts_and_a_submit_no_autosave_follows(
    browser, live_server, owner, artifacts
):
    """The skip link is the first Tab stop and moves focus to the content; "Next
    unanswered" moves focus to the question left (its score, or its rationale once the
    score is chosen); an optional rationale counts its words without a "/ 0"; and once
    Submit is pressed no autosave is sent, even one the last click had scheduled."""
    import dataclasses

    from studies.protocol.forms import SI2024_FORM
    from studies.services.study import study_form_set
    from tests.factories import review_study

    rs = review_study(owner, slug="keys", n_reviewers=1, per_reviewer=1)
    first, *rest = SI2024_FORM.metrics
    study_form_set(
        study=rs.study,
        definition=dataclasses.replace(
            SI2024_FORM,
            key="optional-novelty",
            version=1,
            metrics=(dataclasses.replace(first, rationale_required=False), *rest),
        ),
    )
    (assignment,) = rs.assignments[rs.reviewers[0].pk]
    context, page = new_page(browser, live_server.url)
    reviewer_login(page, rs.users[0].username, rs.password)
    page.goto(f"/studies/r/assignments/{assignment.pk}/")

    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    assert page.locator(".skip-link").bounding_box()["y"] >= 0  # shown when focused
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"

    counter = page.locator(f".wordcount[data-for=id_{first.key}_rationale]")
    page.fill(f"textarea[name={first.key}_rationale]", " ".join(["fine"] * 16))
    assert counter.inner_text() == "16 words"
    second = rest[0].key
    page.fill(f"textarea[name={second}_rationale]", "too short")
    assert re.fullmatch(
        r"2 / \d+ words", page.locator(f".wordcount[data-for=id_{second}_rationale]").inner_text()
    )

    page.click("#next-unanswered")
    assert page.evaluate("document.activeElement.name") == first.key
    page.keyboard.press("Space")  # choose a score where the focus landed
    page.click("#next-unanswered")
    assert page.evaluate("document.activeElement.name") == second
    page.check(f"input[name={second}][value='5']")
    page.click("#next-unanswered")  # score chosen, rationale too short: the rationale
    assert page.evaluate("document.activeElement.name") == f"{second}_rationale"
    page.screenshot(path=str(artifacts / "review-next-unanswered.png"))

    for m in rest:
        page.check(f"input[name={m.key}][value='6']")
        page.fill(f"textarea[name={m.key}_rationale]", rationale(30, "sound"))
    page.check("input[name=familiarity][value='3']")
    page.check("input[name=confidence][value='3']")
    page.wait_for_selector("#save-status:has-text('Draft saved')")

    # The submit is held in the browser while an autosave the last click scheduled
    # (200 ms later) would go out: none may.
    held, late_drafts, submitted = [], [], []

    def on_submit(route) -> None:
        submitted.append(True)
        held.append(route)

    def on_draft(route) -> None:
        if submitted:
            late_drafts.append(route.request.url)
        route.continue_()

    page.route(re.compile(r".*/draft/$"), on_draft)
    page.route(re.compile(r".*/submit/$"), on_submit)
    page.check(f"input[name={first.key}][value='7']")
    page.click("#submit-review", no_wait_after=True)
    page.wait_for_timeout(1000)
    assert submitted and late_drafts == []
    held[0].continue_()
    page.wait_for_selector("text=Review submitted")
    review = Review.objects.get(assignment=assignment)
    assert review.status == "submitted" and review.scores.get(metric=first.key).score == 7
    context.close()
