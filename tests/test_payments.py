"""Paying for a study: the owner accepts or rejects each submitted review, the payments
page and its CSV say who is owed what, the team's roles apply, and reviewers see none of
it (neither the decisions nor the idea authors' contacts)."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from studies import services
from studies.models import (
    Assignment,
    AuditEvent,
    IdeaCondition,
    Review,
    ReviewAcceptance,
    StudyMember,
)
from studies.services.ideas import idea_label
from studies.services.payments import PaymentError, review_decide
from studies.services.reviews import review_submit
from tests.factories import cleaned, make_review_study

CONTACT = "ada.lovelace@quill.example"


@pytest.fixture
def paid(db, owner):
    """A study on Si et al.'s rates where every assignment has a submitted review; two
    human ideas carry one author's contact."""
    s = make_review_study(owner, slug="pay")
    study = s.study
    study.payment_per_review = Decimal(25)
    study.payment_per_idea = Decimal(300)
    study.payment_bonus = Decimal(1000)
    study.payment_bonus_top_k = 1
    study.save()
    human = [i for i in s.ideas if i.author_institution][:2]
    for idea in human:
        idea.author_contact = CONTACT
        idea.save()
    for n, a in enumerate(Assignment.objects.filter(study=study).order_by("pk")):
        # The first human idea scores highest, so it takes the bonus.
        score = 9 if a.idea_id == human[0].pk else 3 + n % 5
        review_submit(assignment=a, cleaned=cleaned(study, score))
    return s, human


def test_owner_accepts_rejects_and_the_page_and_csv_say_who_is_owed_what(client, paid, owner):
    s, human = paid
    study = s.study
    reviews = list(Review.objects.filter(study=study).order_by("pk"))
    client.force_login(owner)
    decide = reverse("studies:payment_review_decide", args=[study.slug, reviews[0].pk])
    client.post(decide, {"decision": "rejected", "reason": ""})
    assert not ReviewAcceptance.objects.exists()  # a rejection needs a reason
    client.post(decide, {"decision": "rejected", "reason": "copied text from a blog"})
    page = client.get(reverse("studies:payment_reviews", args=[study.slug])).content.decode()
    assert "copied text from a blog" in page and f"{len(reviews) - 1} of {len(reviews)}" in page
    client.post(
        reverse("studies:payment_reviews_accept_undecided", args=[study.slug]), {"confirm": "yes"}
    )
    assert ReviewAcceptance.objects.filter(decision="accepted").count() == len(reviews) - 1
    assert AuditEvent.objects.filter(verb="review_rejected", actor=owner).count() == 1
    assert AuditEvent.objects.get(verb="reviews_accepted_undecided").detail["n"] == len(reviews) - 1

    # Expected amounts, counted from the rows.
    owed: dict[str, int] = {}
    for r in Review.objects.filter(study=study).select_related("reviewer", "acceptance"):
        paid_for = r.acceptance.decision == "accepted"
        owed[r.reviewer.pseudonym] = owed.get(r.reviewer.pseudonym, 0) + 25 * paid_for
    page = client.get(reverse("studies:study_payments", args=[study.slug])).content.decode()
    assert CONTACT in page and idea_label(human[0]) in page
    export = client.get(reverse("studies:payments_export", args=[study.slug]))
    assert export["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(export.content.decode())))
    reviewers = {r["payee"]: Decimal(r["amount"]) for r in rows if r["payee_type"] == "reviewer"}
    assert reviewers == {k: Decimal(v) for k, v in owed.items()}
    (author,) = [r for r in rows if r["payee_type"] == "author"]
    assert author["payee"] == CONTACT
    assert author["top_ideas"] == idea_label(human[0])
    assert Decimal(author["amount"]) == 2 * 300 + 1000
    exported = AuditEvent.objects.get(verb="payments_exported")
    assert Decimal(exported.detail["total"]) == sum(reviewers.values()) + 1600


def test_only_submitted_reviews_can_be_decided(paid, owner):
    s, _ = paid
    review = Review.objects.filter(study=s.study).first()
    review.status = Review.Status.DRAFT
    review.save()
    with pytest.raises(PaymentError, match="submitted"):
        review_decide(review=review, decision="accepted", actor=owner)


def test_viewers_read_payments_but_cannot_decide_and_outsiders_get_404(paid, other_researcher):
    s, _ = paid
    study = s.study
    viewer = get_user_model().objects.create_user("viewer", password="viewer-pass-123")
    StudyMember.objects.create(study=study, user=viewer, role="viewer")
    review = Review.objects.filter(study=study).first()
    c = Client()
    c.force_login(viewer)
    assert c.get(reverse("studies:study_payments", args=[study.slug])).status_code == 200
    page = c.get(reverse("studies:payment_reviews", args=[study.slug])).content.decode()
    assert "payment_review_decide" not in page and "Save</button>" not in page
    decide = reverse("studies:payment_review_decide", args=[study.slug, review.pk])
    assert c.post(decide, {"decision": "accepted"}).status_code == 403
    c.force_login(other_researcher)
    for name in ("study_payments", "payments_export", "payment_reviews"):
        assert c.get(reverse(f"studies:{name}", args=[study.slug])).status_code == 404
    assert c.post(decide, {"decision": "accepted"}).status_code == 404
    assert not ReviewAcceptance.objects.exists()


def test_reviewers_see_no_decision_and_no_author_contact(paid, owner):
    s, _ = paid
    study = s.study
    for review in Review.objects.filter(study=study):
        review_decide(
            review=review, decision="rejected", reason="Marlowe-style shortcut", actor=owner
        )
    c = Client()
    for user, reviewer in zip(s.users, s.reviewers, strict=True):
        c.force_login(user)
        pages = [reverse("studies:reviewer_home")] + [
            reverse("studies:review_page", args=[a.pk])
            for a in Assignment.objects.filter(reviewer=reviewer)
        ]
        for url in pages:
            body = c.get(url).content.decode()
            assert CONTACT not in body and "Marlowe-style shortcut" not in body, url
        for name in ("study_payments", "payment_reviews", "payments_export"):
            assert c.get(reverse(f"studies:{name}", args=[study.slug])).status_code == 404


def test_the_idea_import_keeps_an_optional_author_contact(owner):
    s = make_review_study(owner, slug="imp", commit=False)
    text = s.ideas[0].normalized_text
    data = (
        "id,topic,condition,text,author_contact\n"
        f'new-1,Bias,Human_Experts,"{text}",grace@example.org\n'
        f'new-2,Bias,AI_Ideas,"{text}",\n'
    ).encode()
    batch = services.ideas_read_file(study=s.study, name="ideas.csv", data=data)
    assert batch.ok, [str(p) for p in batch.problems]
    services.ideas_import(study=s.study, batch=batch, source="ideas.csv", actor=owner)
    contacts = {
        m.external_id: m.idea.author_contact
        for m in IdeaCondition.objects.filter(
            study=s.study, external_id__startswith="new-"
        ).select_related("idea")
    }
    assert contacts == {"new-1": "grace@example.org", "new-2": ""}


def test_the_owners_csv_names_each_reviewer_beside_the_pseudonym_and_nobody_elses_does(
    client, paid, owner
):
    """A person can pay from the owners' CSV: name, email and the payment details the
    reviewer gave on their profile (a sentence there says what they are for). Editors
    and viewers get the pseudonymous list; each export is audited with what it carried."""
    s, _ = paid
    study = s.study
    reviewer, user = s.reviewers[0], s.users[0]
    c = Client()
    c.force_login(user)
    profile = c.get(reverse("studies:reviewer_profile", args=[reviewer.pk])).content.decode()
    assert "Payment details (optional)" in profile and "owners see it, in their payment" in profile
    c.post(
        reverse("studies:reviewer_payment", args=[reviewer.pk]),
        {"payment_handle": "  paypal: nia@pay.example  "},
    )
    reviewer.refresh_from_db()
    assert reviewer.payment_handle == "paypal: nia@pay.example"
    event = AuditEvent.objects.get(verb="reviewer_payment_handle_set")
    assert event.detail == {"reviewer": reviewer.pseudonym, "given": True}  # not the value
    reviewer.name = "Nia Expert"
    reviewer.save(update_fields=["name"])

    client.force_login(owner)
    export = client.get(reverse("studies:payments_export", args=[study.slug]))
    rows = {r["payee"]: r for r in csv.DictReader(io.StringIO(export.content.decode()))}
    row = rows[reviewer.pseudonym]
    assert row["name"] == "Nia Expert"
    assert row["email"] == user.email
    assert row["payment_handle"] == "paypal: nia@pay.example"
    for other, other_user in zip(s.reviewers[1:], s.users[1:], strict=True):
        assert rows[other.pseudonym]["email"] == other_user.email
        assert rows[other.pseudonym]["payment_handle"] == ""
    exported = AuditEvent.objects.filter(verb="payments_exported").latest("pk")
    assert exported.detail["contacts"] is True and exported.detail["payment_handles"] == 1

    editor = get_user_model().objects.create_user("editor", password="editor-pass-123")
    StudyMember.objects.create(study=study, user=editor, role="editor")
    client.force_login(editor)
    body = client.get(reverse("studies:payments_export", args=[study.slug])).content.decode()
    header = next(csv.reader(io.StringIO(body)))
    assert "email" not in header and "payment_handle" not in header
    assert "nia@pay.example" not in body and user.email not in body
    exported = AuditEvent.objects.filter(verb="payments_exported").latest("pk")
    assert exported.detail["contacts"] is False


def test_a_screened_reviewer_may_still_give_payment_details_and_no_one_else_can(paid):
    s, _ = paid
    reviewer = s.reviewers[0]
    assert reviewer.screening == "approved"
    c = Client()
    c.force_login(s.users[1])  # another reviewer
    url = reverse("studies:reviewer_payment", args=[reviewer.pk])
    assert c.post(url, {"payment_handle": "mine now"}).status_code == 404
    c.force_login(s.users[0])
    response = c.post(url, {"payment_handle": "bank\x07ref"}, follow=True)
    assert "invisible control character" in response.content.decode()
    c.post(url, {"payment_handle": "IBAN DE00 1234"})
    reviewer.refresh_from_db()
    assert reviewer.payment_handle == "IBAN DE00 1234"
    home = c.get(reverse("studies:reviewer_home")).content.decode()
    assert reverse("studies:reviewer_profile", args=[reviewer.pk]) in home
