"""Once the study team has accepted or rejected a submitted review, the reviewer can read
it but no longer change it: the submit and the autosave are refused and store nothing,
the page is read-only and says why, and neither shows which decision was taken."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from studies.models import Assignment, Review
from studies.services.invitations import RecruitmentError
from studies.services.payments import review_decide
from studies.services.reviews import review_draft_save, review_submit
from tests.factories import cleaned, full_answers, review_study

REASON = "the rationales repeat the idea text"
DECIDED = "already decided on this review"


@pytest.fixture
def made(db, owner):
    return review_study(owner, slug="decided", n_reviewers=1, n_ideas=2, per_reviewer=2)


def reviewer_client(made) -> Client:
    client = Client()
    client.force_login(made.users[0])
    return client


def submitted(made, client: Client) -> Assignment:
    """The reviewer's first assignment, its review submitted with every score 6."""
    assignment = made.assignments[made.reviewers[0].pk][0]
    url = reverse("studies:review_submit", args=[assignment.pk])
    assert client.post(url, {**full_answers(made.study), "version": "0"}).status_code == 302
    return assignment


def last_message(response) -> str:
    return [str(m) for m in get_messages(response.wsgi_request)][-1]


def decide(review: Review, decision: str, owner) -> None:
    reason = REASON if decision == "rejected" else ""
    review_decide(review=review, decision=decision, reason=reason, actor=owner)


def stored(review: Review) -> tuple:
    review.refresh_from_db()
    scores = sorted(review.scores.values_list("metric", "score", "rationale"))
    return review.version, review.revisions.count(), review.draft, scores


@pytest.mark.embedded  # the autosave's statements differ between SQLite and PostgreSQL
@pytest.mark.parametrize("decision", ["accepted", "rejected"])
def test_a_decided_review_refuses_the_submit_and_the_autosave(made, owner, decision):
    client = reviewer_client(made)
    assignment = submitted(made, client)
    review = Review.objects.get(assignment=assignment)
    decide(review, decision, owner)
    before = stored(review)
    changed = {**full_answers(made.study, score=9), "version": "1"}

    r = client.post(reverse("studies:review_submit", args=[assignment.pk]), changed)
    assert r.status_code == 302 and r["Location"].endswith(f"/assignments/{assignment.pk}/")
    assert DECIDED in last_message(r)

    autosave = reverse("studies:review_autosave", args=[assignment.pk])
    r = client.post(autosave, changed, headers={"HX-Request": "true"})
    assert r.status_code == 409 and DECIDED in r.content.decode()
    assert "hx-post" not in r.content.decode()  # the page stops autosaving
    # the "Save draft" button's plain POST
    r = client.post(autosave, changed)
    assert r.status_code == 302
    assert DECIDED in last_message(r)

    assert stored(review) == before
    assert review.scores.get(metric="overall").score == 6


@pytest.mark.parametrize("decision", ["accepted", "rejected"])
def test_a_decided_review_is_shown_read_only_without_the_decision(made, owner, decision):
    client = reviewer_client(made)
    assignment = submitted(made, client)
    autosave = reverse("studies:review_autosave", args=[assignment.pk])
    # a change typed after the submit and never submitted: not part of the decided review
    draft = {**full_answers(made.study), "overall": "2", "version": "1"}
    assert client.post(autosave, draft, headers={"HX-Request": "true"}).status_code == 200
    decide(Review.objects.get(assignment=assignment), decision, owner)

    page = client.get(reverse("studies:review_page", args=[assignment.pk])).content.decode()
    assert DECIDED in page
    assert 'id="submit-review"' not in page and "Save draft" not in page
    assert "hx-post" not in page and "You can change your answers" not in page
    assert 'value="2" checked' not in page and 'value="6" checked' in page
    assert REASON not in page and decision.title() not in page

    home = client.get(reverse("studies:reviewer_home")).content.decode()
    assert "View or edit" not in home and ">View<" in home
    assert REASON not in home and decision.title() not in home


def test_only_the_decided_review_is_locked(made, owner):
    """The reviewer's other, undecided review stays theirs to change."""
    client = reviewer_client(made)
    first, other = made.assignments[made.reviewers[0].pk]
    submitted(made, client)
    url = reverse("studies:review_submit", args=[other.pk])
    assert client.post(url, {**full_answers(made.study), "version": "0"}).status_code == 302
    decide(Review.objects.get(assignment=first), "accepted", owner)

    home = client.get(reverse("studies:reviewer_home")).content.decode()
    assert home.count("View or edit") == 1 and home.count(">View<") == 1
    assert f'href="{reverse("studies:review_page", args=[first.pk])}">View<' in home
    page = client.get(reverse("studies:review_page", args=[other.pk])).content.decode()
    assert 'id="submit-review"' in page and "hx-post" in page and DECIDED not in page

    changed = {**full_answers(made.study, score=9), "version": "1"}
    autosave = reverse("studies:review_autosave", args=[other.pk])
    assert client.post(autosave, changed, headers={"HX-Request": "true"}).status_code == 200
    r = client.post(url, changed)
    assert r.status_code == 302 and r["Location"] == reverse("studies:reviewer_home")
    review = Review.objects.get(assignment=other)
    assert review.revisions.count() == 2 and review.scores.get(metric="overall").score == 9


@pytest.mark.parametrize("decision", ["accepted", "rejected"])
def test_the_services_refuse_a_decided_review_whoever_calls_them(made, owner, decision):
    """Without a page's read of the review: the services check the decision themselves."""
    assignment = made.assignments[made.reviewers[0].pk][0]
    review, _ = review_submit(assignment=assignment, cleaned=cleaned(made.study))
    decide(review, decision, owner)
    before = stored(review)
    fresh = Assignment.objects.get(pk=assignment.pk)
    with pytest.raises(RecruitmentError, match=DECIDED):
        review_submit(assignment=fresh, cleaned=cleaned(made.study, score=9))
    with pytest.raises(RecruitmentError, match=DECIDED):
        review_draft_save(assignment=fresh, draft={"overall": "9"})
    assert stored(review) == before


def test_a_rejection_reaches_the_reviewer_by_no_mail_and_no_doc_promises_it(
    made, owner, settings, django_capture_on_commit_callbacks
):
    """The reason of a payment rejection is the study team's: no mail carries it to the
    reviewer, and the docs that describe the decision say the reviewer never sees it."""
    from pathlib import Path

    from django.core import mail

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    client = reviewer_client(made)
    assignment = submitted(made, client)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        decide(Review.objects.get(assignment=assignment), "rejected", owner)
    assert mail.outbox == []
    docs = Path(__file__).resolve().parent.parent / "docs"
    for name in ("payments.md", "quality.md"):
        text = " ".join((docs / name).read_text(encoding="utf-8").split())
        assert "never see" in text and "its reason" in text, name
        assert "is what a reviewer sees" not in text, name
