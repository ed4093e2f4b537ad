"""A reviewer whose sign-up is rejected gets one short, polite mail that reveals nothing.

The mail goes out when the rejection is committed (never for a rolled-back one), once per
rejection, and names only the study the reviewer signed up to: not the owner's reason,
not the other reviewers, not the ideas, their conditions or authors' institutions.
"""

from __future__ import annotations

import pytest
from django.core import mail
from django.db import transaction
from django.urls import reverse

from studies.models import Reviewer
from studies.services.invitations import reviewer_screen
from tests.factories import make_review_study

BASE = "https://review.example.net"
REASON = "Too close to the Quill lab and to reviewer R002's own idea"


@pytest.fixture
def pending(db, owner, settings):
    settings.IDEAREVIEW_BASE_URL = BASE
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    seeded = make_review_study(owner, commit=True)
    target = seeded.reviewers[1]
    Reviewer.objects.filter(pk=target.pk).update(screening="pending")
    target.refresh_from_db()
    return seeded, target


def _what_must_not_show(seeded, target) -> list[str]:
    others = [r for r in seeded.reviewers if r.pk != target.pk]
    hidden = [*seeded.secrets, REASON, "Quill", target.pseudonym, target.institution]
    hidden += [r.email for r in others] + [r.pseudonym for r in others]
    hidden += [i.raw_text[:40] for i in seeded.ideas if i.raw_text]
    return hidden


def test_a_rejected_reviewer_is_told_politely_and_told_nothing_else(
    pending, owner, django_capture_on_commit_callbacks
):
    seeded, target = pending
    Reviewer.objects.filter(pk=target.pk).update(name="Grace Hopper")
    target.refresh_from_db()
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        reviewer_screen(reviewer=target, approve=False, reason=REASON, actor=owner)
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == [target.email]
    text = message.subject + "\n" + message.body
    assert seeded.study.title in text
    assert message.body.startswith("Dear Grace Hopper,\n")
    assert "Thank you" in message.body
    assert BASE + reverse("studies:reviewer_home") in message.body
    leaked = [s for s in _what_must_not_show(seeded, target) if s and s.lower() in text.lower()]
    assert not leaked, leaked

    # Rejecting again (say, to fix the reason) or approving later sends nothing more.
    with django_capture_on_commit_callbacks(execute=True):
        reviewer_screen(reviewer=target, approve=False, reason="reworded", actor=owner)
        reviewer_screen(reviewer=target, approve=True, reason="", actor=owner)
    assert len(mail.outbox) == 1


def test_no_mail_for_an_approval_or_a_rejection_that_was_rolled_back(
    pending, owner, django_capture_on_commit_callbacks
):
    _, target = pending
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        reviewer_screen(reviewer=target, approve=False, reason=REASON, actor=owner)
        transaction.set_rollback(True)
    with django_capture_on_commit_callbacks(execute=True):
        reviewer_screen(reviewer=target, approve=True, reason="", actor=owner)
    assert mail.outbox == []


def test_rejecting_on_the_reviewers_page_mails_the_reviewer(
    pending, owner, client, django_capture_on_commit_callbacks
):
    seeded, target = pending
    mail.outbox.clear()
    client.force_login(owner)
    url = reverse("studies:reviewer_screen", args=[seeded.study.slug, target.pk])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"decision": "reject", "reason": REASON})
    assert response.status_code == 302
    assert [m.to for m in mail.outbox] == [[target.email]]
