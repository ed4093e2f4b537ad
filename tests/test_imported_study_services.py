"""A study of imported reviews is refused by the services themselves, not only by the
pages: a command, a task or any other caller that tries to invite, remind, screen,
assign, create pair tasks, pay or run a platform link gets the same reason, and nothing
changes."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from studies.models import Invitation, JobRun, PairTask, ReviewAcceptance, Reviewer
from studies.services import assignment, invitations, payments, platform, reviews, study
from studies.services.errors import ImportedStudyRefused

pytestmark = pytest.mark.django_db


def _calls(s, owner):
    reviewer = Reviewer.objects.create(
        study=s, pseudonym="R901", email="r901@example.org", profile_completed_at=timezone.now()
    )
    review = s.reviews.first()
    job = JobRun.objects.create(study=s, kind="assignment", status=JobRun.Status.DONE, params={})
    invitation = Invitation.objects.create(
        study=s, email="x@example.org", nonce="n", expires_at=timezone.now()
    )
    return {
        "invites no reviewers": [
            lambda: invitations.invitation_create(study=s, email="a@example.org", actor=owner),
            lambda: invitations.invitations_create_from_csv(
                study=s, data=b"email\nb@example.org\n", actor=owner
            ),
            lambda: invitations.invitation_send(invitation=invitation),
        ],
        "screens no reviewers": [
            lambda: invitations.reviewer_screen(reviewer=reviewer, approve=True, actor=owner),
            lambda: invitations.reviewers_screen_by_rule(study=s, actor=owner),
            lambda: invitations.reviewer_topics_change(
                reviewer=reviewer, topics=["x"], preferred_load=1, actor=owner
            ),
        ],
        "sends no reminders": [lambda: reviews.reminders_send(study=s)],
        "has no due date for reviews": [
            lambda: study.study_set_due(study=s, due=timezone.now(), actor=owner)
        ],
        "has no assignment": [
            lambda: assignment.assignment_preview(study=s, seed=1),
            lambda: assignment.assignment_preview_enqueue(study=s, seed=1),
            lambda: assignment.assignment_commit(study=s, job=job),
        ],
        "has no pair tasks": [
            lambda: reviews.pair_tasks_create(study=s, per_reviewer=2),
            lambda: reviews.pair_tasks_upload(study=s, data=b"reviewer,idea_a,idea_b\n"),
        ],
        "pays no reviewers": [
            lambda: payments.review_decide(review=review, decision="accepted", actor=owner),
            lambda: payments.reviews_accept_undecided(study=s, actor=owner),
            lambda: payments.payments_export_csv(study=s, seed=1, contacts=True, actor=owner),
        ],
        "takes no participants": [
            lambda: platform.platform_link_set(study=s, data={}, actor=owner),
            lambda: platform.platform_places_sweep(study=s),
        ],
    }


def test_every_service_that_acts_on_reviewing_here_refuses_an_imported_study(si2024_study, owner):
    s = si2024_study
    jobs = JobRun.objects.filter(study=s).count() + 1  # the commit's job, made below
    for reason, calls in _calls(s, owner).items():
        for call in calls:
            with pytest.raises(ImportedStudyRefused, match=reason):
                call()
    s.refresh_from_db()
    assert s.reviews_due_at is None
    assert Invitation.objects.filter(study=s).count() == 1  # the one made to resend
    assert not PairTask.objects.filter(study=s).exists()
    assert not ReviewAcceptance.objects.filter(review__study=s).exists()
    assert JobRun.objects.filter(study=s).count() == jobs
    assert not s.audit_events.filter(verb="payments_exported").exists()


def test_send_reminders_command_fails_on_an_imported_study(si2024_study):
    with pytest.raises(CommandError, match="sends no reminders"):
        call_command("send_reminders", si2024_study.slug)


def test_assign_command_fails_on_an_imported_study(si2024_study):
    with pytest.raises(CommandError, match="has no assignment"):
        call_command("assign", si2024_study.slug, "--dry-run")
    assert not JobRun.objects.filter(study=si2024_study, kind="assignment").exists()
