"""A reviewer the team dropped, or rejected at screening, invited again to the same study:
taking the new link brings them back (no second profile, no broken invitation link)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from studies.models import (
    Assignment,
    AuditEvent,
    Invitation,
    PlatformParticipant,
    Reviewer,
    Study,
)
from studies.services.invitations import (
    InvitationError,
    invitation_accept,
    invitation_create,
    invitation_token,
    reviewer_drop,
    reviewer_screen,
)
from studies.services.reviews import review_submit
from studies.services.study import study_close
from tests.factories import cleaned, make_review_study


def invited_once(seeded, k: int) -> Reviewer:
    """Reviewer k of the seeded study, as if they had signed up through an invitation."""
    reviewer = seeded.reviewers[k]
    Invitation.objects.create(
        study=seeded.study,
        email=reviewer.email,
        nonce=f"first-{k}",
        expires_at=timezone.now() + timedelta(days=7),
        used_at=timezone.now(),
        reviewer=reviewer,
    )
    return reviewer


def invite_again(seeded, reviewer: Reviewer) -> Invitation:
    return invitation_create(
        study=seeded.study, email=reviewer.email, actor=seeded.owner, send=False
    )


@pytest.fixture
def seeded(db, owner):
    return make_review_study(owner, slug="back")


@pytest.mark.django_db
def test_a_dropped_reviewer_who_takes_a_new_invitation_works_again(seeded):
    reviewer = invited_once(seeded, 0)
    first = reviewer.invitation
    done = Assignment.objects.filter(reviewer=reviewer).order_by("pk").first()
    review_submit(assignment=done, cleaned=cleaned(seeded.study))
    reviewer_drop(reviewer=reviewer, actor=seeded.owner)
    again = invite_again(seeded, reviewer)

    back = invitation_accept(token=invitation_token(again), user=seeded.users[0])

    assert back.pk == reviewer.pk and back.pseudonym == "R001"
    assert back.dropped_at is None and back.is_approved
    assert Reviewer.objects.filter(study=seeded.study, user=seeded.users[0]).count() == 1
    done.refresh_from_db()
    assert done.status == Assignment.Status.SUBMITTED
    # The new link is the reviewer's; the first stays listed as used, detached.
    again.refresh_from_db()
    first.refresh_from_db()
    assert again.reviewer_id == reviewer.pk and again.used_at is not None
    assert first.reviewer_id is None and first.status_label == "used"
    event = AuditEvent.objects.get(study=seeded.study, verb="reviewer_returned")
    assert event.detail["undropped"] is True and event.detail["rescreen"] is False


@pytest.mark.django_db
def test_a_rejected_reviewer_who_takes_a_new_invitation_is_screened_again(seeded):
    reviewer = invited_once(seeded, 1)
    reviewer_screen(reviewer=reviewer, approve=False, reason="no papers", actor=seeded.owner)
    again = invite_again(seeded, reviewer)

    back = invitation_accept(token=invitation_token(again), user=seeded.users[1])

    assert back.pk == reviewer.pk
    assert back.screening == Reviewer.Screening.PENDING and back.screening_reason == ""
    assert back.next_step() == "screening"


@pytest.mark.django_db
def test_a_released_platform_place_is_not_taken_back_by_an_invitation(client, seeded):
    reviewer = invited_once(seeded, 2)
    PlatformParticipant.objects.create(study=seeded.study, reviewer=reviewer, participant_id="P-2")
    reviewer_drop(reviewer=reviewer, actor=seeded.owner)
    again = invite_again(seeded, reviewer)

    with pytest.raises(InvitationError) as exc:
        invitation_accept(token=invitation_token(again), user=seeded.users[2])

    assert exc.value.kind == "refused" and "platform" in str(exc.value)
    reviewer.refresh_from_db()
    again.refresh_from_db()
    assert reviewer.dropped_at is not None and again.used_at is None
    client.force_login(seeded.users[2])
    page = client.post(reverse("studies:invitation_open", args=[invitation_token(again)]))
    assert page.status_code == 403 and "cannot bring you back" in page.content.decode()


@pytest.mark.django_db
def test_the_invitation_page_brings_a_dropped_reviewer_back_unless_the_study_closed(client, seeded):
    reviewer = invited_once(seeded, 3)
    reviewer_drop(reviewer=reviewer, actor=seeded.owner)
    again = invite_again(seeded, reviewer)
    client.force_login(seeded.users[3])
    home = reverse("studies:reviewer_home")
    assert "no longer reviewing" in client.get(home).content.decode()
    url = reverse("studies:invitation_open", args=[invitation_token(again)])
    status = seeded.study.status
    study_close(study=seeded.study, actor=seeded.owner)

    closed = client.post(url)

    assert closed.status_code == 410 and "closed" in closed.content.decode()
    reviewer.refresh_from_db()
    assert reviewer.dropped_at is not None
    Study.objects.filter(pk=seeded.study.pk).update(status=status, closed_at=None)

    r = client.post(url)

    assert r.status_code == 302 and r["Location"] == home
    assert "no longer reviewing" not in client.get(home).content.decode()
