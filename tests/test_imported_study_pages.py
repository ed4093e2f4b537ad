"""A study of imported reviews (si2024) was reviewed elsewhere: the owner pages that would
act on reviewing here (payments, assignment, pair tasks, screening, the platform link)
say so instead of offering actions that could only be refused or do nothing, a request
sent anyway (a stale page) is refused with the reason and changes nothing, and the
progress page counts the imported reviews."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from studies.models import (
    Assignment,
    IdeaCondition,
    ImportBatch,
    Invitation,
    JobRun,
    PairTask,
    PlatformLink,
    Review,
    ReviewAcceptance,
    Reviewer,
)
from studies.services.study import study_create

pytestmark = pytest.mark.django_db

NOTE = 'id="imported-reviews"'


@pytest.fixture
def client(owner):
    c = Client()
    c.force_login(owner)
    return c


def _get(client, name, study, *args):
    response = client.get(reverse(name, args=[study.slug, *args]))
    assert response.status_code == 200, name
    return response.content.decode()


def _post(client, name, study, data, *args):
    response = client.post(reverse(name, args=[study.slug, *args]), data, follow=True)
    assert response.status_code == 200, name
    return response.content.decode()


def test_payments_offer_no_decisions_or_payment_run_for_imported_reviews(si2024_study, client):
    payments = _get(client, "studies:study_payments", si2024_study)
    assert NOTE in payments and "pays no reviewers" in payments
    assert "still wait for a decision" not in payments and "(no reviewer)" not in payments
    assert reverse("studies:payments_export", args=[si2024_study.slug]) not in payments
    reviews = _get(client, "studies:payment_reviews", si2024_study)
    assert NOTE in reviews and "Accept all" not in reviews
    accept_all = reverse("studies:payment_reviews_accept_undecided", args=[si2024_study.slug])
    assert accept_all not in reviews and "/decide/" not in reviews
    review = Review.objects.filter(study=si2024_study).first()
    said = _post(
        client,
        "studies:payment_reviews_accept_undecided",
        si2024_study,
        {"confirm": "yes"},
    )
    assert "pays no reviewers" in said and "Accepted" not in said
    said = _post(
        client,
        "studies:payment_review_decide",
        si2024_study,
        {"decision": "accepted", "reason": ""},
        review.pk,
    )
    assert "pays no reviewers" in said
    assert not ReviewAcceptance.objects.filter(review__study=si2024_study).exists()
    # The payment run's CSV, fetched by its address anyway, is refused too.
    export = client.get(reverse("studies:payments_export", args=[si2024_study.slug]), follow=True)
    assert "pays no reviewers" in export.content.decode()
    assert export["Content-Type"].startswith("text/html")


def test_progress_counts_the_imported_reviews_rather_than_0_of_0(si2024_study, client):
    n = Review.objects.filter(study=si2024_study, status=Review.Status.SUBMITTED).count()
    assert n > 0
    progress = _get(client, "studies:study_progress", si2024_study)
    assert f"{n}</strong> review{'' if n == 1 else 's'} imported" in progress
    assert "0 of 0 submitted" not in progress
    assert "Close the study" in progress  # its owner may still freeze it


def test_assignment_says_there_is_none_to_make_and_refuses_preview_and_commit(si2024_study, client):
    page = _get(client, "studies:assignment_preview", si2024_study)
    assert NOTE in page and "has no assignment" in page
    assert "Preview the assignment" not in page
    said = _post(client, "studies:assignment_preview", si2024_study, {"mode": "keep"})
    assert "has no assignment" in said
    assert not JobRun.objects.filter(study=si2024_study, kind="assignment").exists()
    job = JobRun.objects.create(
        study=si2024_study, kind="assignment", status=JobRun.Status.DONE, params={}
    )
    said = _post(client, "studies:assignment_commit", si2024_study, {"job": job.pk})
    assert "has no assignment" in said
    assert not Assignment.objects.filter(study=si2024_study).exists()


def test_pair_tasks_are_not_offered_and_a_request_is_refused(si2024_study, client):
    page = _get(client, "studies:pair_tasks", si2024_study)
    assert NOTE in page and "Create pair tasks" not in page
    assert reverse("studies:pair_tasks_upload", args=[si2024_study.slug]) not in page
    said = _post(client, "studies:pair_tasks", si2024_study, {"per_reviewer": 2})
    assert "has no pair tasks" in said and "Created 0" not in said
    said = _post(client, "studies:pair_tasks_upload", si2024_study, {})
    assert "has no pair tasks" in said
    assert not PairTask.objects.filter(study=si2024_study).exists()


def test_creating_no_pair_task_says_why(owner, client):
    study = study_create(owner=owner, slug="empty", title="Empty")
    said = _post(client, "studies:pair_tasks", study, {"per_reviewer": 2})
    assert "Created 0" not in said and "no approved reviewer" in said


def _pending_reviewer(study) -> Reviewer:
    return Reviewer.objects.create(
        study=study,
        pseudonym="R900",
        email="r900@example.org",
        profile_completed_at=timezone.now(),
        major_venue_papers=50,
    )


def test_reviewers_page_offers_no_screening_for_imported_reviews(si2024_study, client):
    reviewer = _pending_reviewer(si2024_study)
    page = _get(client, "studies:study_reviewers", si2024_study)
    assert NOTE in page and "screens no reviewers" in page
    assert "Approve all pending" not in page
    assert reverse("studies:reviewer_screen", args=[si2024_study.slug, reviewer.pk]) not in page
    said = _post(client, "studies:reviewers_approve_by_rule", si2024_study, {})
    assert "screens no reviewers" in said and "Approved 0" not in said
    said = _post(
        client, "studies:reviewer_screen", si2024_study, {"decision": "approve"}, reviewer.pk
    )
    assert "screens no reviewers" in said
    reviewer.refresh_from_db()
    assert reviewer.screening == Reviewer.Screening.PENDING


def test_approving_nobody_by_the_rule_says_so(owner, client):
    study = study_create(owner=owner, slug="nobody", title="Nobody")
    said = _post(client, "studies:reviewers_approve_by_rule", study, {})
    assert "Approved 0" not in said and "No pending profile meets the rule" in said


def test_platform_page_offers_no_link_for_imported_reviews(si2024_study, client):
    page = _get(client, "studies:study_platform", si2024_study)
    assert NOTE in page and "takes no participants" in page
    assert "Save the platform link" not in page and "refuses arrivals until" not in page
    said = _post(
        client,
        "studies:study_platform",
        si2024_study,
        {"enabled": "on", "platform": "prolific", "places": 10, "abandon_minutes": 60},
    )
    assert "takes no participants" in said
    assert not PlatformLink.objects.filter(study=si2024_study).exists()
    said = _post(client, "studies:platform_sweep", si2024_study, {})
    assert "takes no participants" in said and "Released" not in said


def test_an_infeasible_preview_names_ideas_left_out_rather_than_missing(si2024_study):
    """Its ideas exist (49 of each kind) but none has approved text: the reason must say
    they are left out, not that the study has no human or AI idea. (A study of imported
    reviews is refused any assignment; its batch is relabelled an idea import so the
    preview runs on the same ideas.)"""
    from studies.services.assignment import assignment_preview

    ImportBatch.objects.filter(study=si2024_study).update(kind="ideas")
    job, result, _ = assignment_preview(study=si2024_study, seed=1)
    assert not result.feasible
    problems = job.params["problems"]
    assert not any("the study has no human idea" in p for p in problems), problems
    assert not any("the study has no AI idea" in p for p in problems), problems
    human = IdeaCondition.objects.filter(study=si2024_study, condition__kind="human")
    n = human.values("idea").distinct().count()
    assert n > 1
    assert any(f"none of the study's {n} human ideas can be assigned" in p for p in problems)


def test_reviewers_page_names_no_invitation_when_nobody_reviews_here(si2024_study, client):
    page = _get(client, "studies:study_reviewers", si2024_study)
    assert "No reviewers: the imported reviews name none here." in page
    assert "Invite reviewers" not in page


def test_progress_shows_no_pairs_reviewers_or_reassigning_for_imported_reviews(
    si2024_study, client
):
    page = _get(client, "studies:study_progress", si2024_study)
    assert "imported from a file" in page
    assert "Pair ratings" not in page and "To reassign" not in page
    assert 'id="reviewer-progress"' not in page and "Reviewers by status" not in page


def test_settings_leave_out_reviewing_fields_and_keep_their_values(si2024_study, client):
    from studies.study_forms import REVIEWING_FIELDS, conditions_text, topics_text

    study = si2024_study
    due = timezone.now().replace(microsecond=0)
    type(study).objects.filter(pk=study.pk).update(
        payment_per_review=25, reviews_due_at=due, rationale_min_words=40, min_load=3
    )
    study.refresh_from_db()
    page = _get(client, "studies:study_settings", study)
    assert NOTE in page and 'id="reviewer-visible"' not in page
    for name in REVIEWING_FIELDS:
        assert f'name="{name}"' not in page, name
    # A stale page could still send them blank: they are not read.
    data = {name: "" for name in REVIEWING_FIELDS}
    data.update(
        title="Renamed",
        description=study.description,
        baseline_condition=study.baseline_condition,
        conditions=conditions_text(study),
        topics=topics_text(study),
        review_form=f"{study.review_form.key}@{study.review_form.version}",
    )
    response = client.post(reverse("studies:study_settings", args=[study.slug]), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    study.refresh_from_db()
    assert study.title == "Renamed"
    assert study.payment_per_review == 25 and study.reviews_due_at == due
    assert study.rationale_min_words == 40 and study.min_load == 3


def test_an_invitation_made_before_the_import_is_not_resent(si2024_study, client, mailoutbox):
    invitation = Invitation.objects.create(
        study=si2024_study,
        email="early@example.org",
        nonce="early",
        expires_at=timezone.now() + timedelta(days=7),
    )
    said = _post(client, "studies:invitation_resend", si2024_study, {}, invitation.pk)
    assert "invites no reviewers" in said and "Reminder sent" not in said
    assert not mailoutbox


def test_reviewers_and_invitations_pages_show_no_rule_or_link_terms_for_imported_reviews(
    si2024_study, client
):
    reviewers = _get(client, "studies:study_reviewers", si2024_study)
    assert NOTE in reviewers and "Rule: at least" not in reviewers
    invitations = _get(client, "studies:study_invitations", si2024_study)
    assert NOTE in invitations
    assert "Links work once" not in invitations and "No invitations yet" not in invitations


def test_progress_of_imported_reviews_does_not_refresh_itself(si2024_study, client):
    page = _get(client, "studies:study_progress", si2024_study)
    assert "updates every 10 s" not in page and 'hx-trigger="every 10s"' not in page


def test_leniency_without_rows_is_one_sentence_not_empty_tables(si2024_study, client):
    from studies.models import StudyReport

    empty = {"rows": [], "note": "the model has no reviewer effect"}
    row = {"reviewer_id": "R7", "reviews": 4, "effect": 0.5, "low": 0.1, "high": 0.9, "flag": ""}
    StudyReport.objects.create(
        study=si2024_study,
        directory="/nonexistent",
        data={"quality": {"leniency": {"overall": {"rows": [row], "note": ""}, "novelty": empty}}},
    )
    page = _get(client, "studies:study_progress", si2024_study)
    assert "the model has no reviewer effect" not in page
    assert "The model has no reviewer effect for novelty." in page
    assert "<h4>overall</h4>" in page and "<h4>novelty</h4>" not in page


def test_settings_say_the_imported_reviews_lock_what_they_were_written_under(si2024_study, client):
    page = _get(client, "studies:study_settings", si2024_study)
    assert "<code>baseline_condition</code> — Locked: the imported reviews were written" in page
    assert "reviews have been submitted under it" not in page


def test_normalisation_is_offered_only_for_ideas_with_a_text(si2024_study, client):
    from studies.models import Idea

    page = _get(client, "studies:normalization", si2024_study)
    assert "Normalise the ideas" not in page
    assert "None of the ideas can be normalised: none has a text" in page
    first = si2024_study.ideas.order_by("pk").first()
    Idea.objects.filter(pk=first.pk).update(raw_text="A text entered by hand.")
    page = _get(client, "studies:normalization", si2024_study)
    assert "Normalise the ideas: 1 with a text and no rewrite yet" in page
    assert 'id="nothing-to-normalise"' not in page
