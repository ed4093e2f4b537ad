"""Recruitment, assignment, review and pair-task services (no HTTP).

`make_review_study` seeds the small study the view, blinding and browser tests share:
two topics, three conditions (one idea in two), distinctive author institutions and
external ids, and approved reviewers with committed assignments.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail, signing
from django.core.cache import cache
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from ideareview.throttle import rate_limit_hit, rate_limited
from studies.models import (
    Assignment,
    AuditEvent,
    Idea,
    IdeaCondition,
    Invitation,
    PairTask,
    Review,
    Reviewer,
    Study,
)
from studies.services.assignment import (
    IDLE_CAP_SECONDS,
    assignment_commit,
    assignment_preview,
    reviewers_notify_new_work,
)
from studies.services.ideas import StudyNotReady
from studies.services.invitations import (
    InvitationError,
    RecruitmentError,
    invitation_accept,
    invitation_check,
    invitation_create,
    invitation_token,
    invitations_create_from_csv,
    reviewer_drop,
    reviewer_screen,
    reviewers_screen_by_rule,
)
from studies.services.reviews import (
    idea_sections,
    pair_task_submit,
    pair_tasks_create,
    reminders_send,
    review_draft_save,
    review_submit,
)
from studies.services.study import study_close, study_create, study_open_for_review
from tests.factories import (
    BLIND_IDEA_TEXT,
    cleaned,
    make_review_study,
)


@pytest.fixture
def seeded(db, owner):
    return make_review_study(owner)


# --------------------------------------------------------------------------- invitations


@pytest.mark.django_db
def test_invitation_link_is_signed_mailed_and_single_use(owner):
    study = study_create(owner=owner, slug="inv")
    inv = invitation_create(study=study, email="Expert@Example.org", name="Ada", actor=owner)
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["expert@example.org"]
    # The mailed link carries a signed token (its signature time may differ from a
    # token signed now, so read it from the mail rather than re-signing).
    import re

    mailed = re.search(r"/invite/([^/\s]+)/", mail.outbox[0].body)
    assert mailed is not None
    token = mailed.group(1)
    assert token.split(":", 1)[0] == invitation_token(inv).split(":", 1)[0]
    assert invitation_check(token).pk == inv.pk
    user = get_user_model().objects.create_user("ada", password="x-Pass-1234")
    reviewer = invitation_accept(token=token, user=user)
    assert reviewer.pseudonym == "R001" and reviewer.email == "expert@example.org"
    with pytest.raises(InvitationError) as exc:
        invitation_accept(token=token, user=user)
    assert exc.value.kind == "used"
    assert Reviewer.objects.filter(study=study).count() == 1


@pytest.mark.django_db
def test_the_ideas_ready_mail_greets_the_reviewer_by_name_like_the_invitation(owner):
    study = study_create(owner=owner, slug="greet")
    inv = invitation_create(study=study, email="ada@example.org", name="Ada Lovelace")
    token = invitation_token(inv)
    ada = invitation_accept(token=token, user=get_user_model().objects.create_user("ada"))
    bob_user = get_user_model().objects.create_user(
        "bob", email="bob@example.org", first_name="Bob", last_name="Brown"
    )
    bob = Reviewer.objects.create(study=study, user=bob_user, pseudonym="R002")
    anon = Reviewer.objects.create(study=study, pseudonym="R003", email="r3@example.org")
    mail.outbox.clear()
    assert reviewers_notify_new_work(study=study, reviewer_ids=[ada.pk, bob.pk, anon.pk]) == 3
    first_lines = {m.to[0]: m.body.split("\n", 1)[0] for m in mail.outbox}
    assert first_lines == {
        "ada@example.org": "Dear Ada Lovelace,",
        "bob@example.org": "Dear Bob Brown,",
        "r3@example.org": "Hello,",
    }


@pytest.mark.django_db
def test_tampered_and_expired_invitation_links_say_why(owner, settings):
    study = study_create(owner=owner, slug="inv2")
    inv = invitation_create(study=study, email="a@example.org", send=False)
    token = invitation_token(inv)
    for bad in [token[:-2] + "xx", token.replace(":", "::", 1), "nonsense", signing.dumps("x")]:
        with pytest.raises(InvitationError) as exc:
            invitation_check(bad)
        assert exc.value.kind == "invalid"
    Invitation.objects.filter(pk=inv.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(InvitationError) as exc:
        invitation_check(token)
    assert exc.value.kind == "expired"
    Invitation.objects.filter(pk=inv.pk).update(expires_at=timezone.now() + timedelta(days=1))
    settings.IDEAREVIEW_INVITATION_MAX_DAYS = -1  # the signature's own age limit
    with pytest.raises(InvitationError) as exc:
        invitation_check(token)
    assert exc.value.kind == "expired"


@pytest.mark.django_db
def test_invitations_from_csv_are_all_or_nothing(owner):
    study = study_create(owner=owner, slug="csv")
    good = b"name,email\nAda,ada@example.org\nBob,bob@example.org\n"
    created, problems = invitations_create_from_csv(study=study, data=good)
    assert len(created) == 2 and not problems and len(mail.outbox) == 2
    bad = b"Cy,cy@example.org\nDee,not-an-email\n"
    created, problems = invitations_create_from_csv(study=study, data=bad)
    assert created == [] and problems == ["row 2: not-an-email is not an email address"]
    assert study.invitations.count() == 2


# --------------------------------------------------------------------------- screening


@pytest.mark.django_db
def test_screening_rule_approves_only_reviewers_with_a_major_venue_paper(owner):
    seeded = make_review_study(owner, commit=False)
    a, b = seeded.reviewers[:2]
    Reviewer.objects.filter(pk__in=[a.pk, b.pk]).update(screening="pending")
    Reviewer.objects.filter(pk=b.pk).update(major_venue_papers=0)
    assert reviewers_screen_by_rule(study=seeded.study, actor=owner) == 1
    a.refresh_from_db(), b.refresh_from_db()
    assert a.screening == "approved" and b.screening == "pending"
    with pytest.raises(RecruitmentError):
        reviewer_screen(reviewer=b, approve=False, reason=" ", actor=owner)
    reviewer_screen(reviewer=b, approve=False, reason="no publications yet", actor=owner)
    b.refresh_from_db()
    assert b.screening == "rejected" and b.screening_reason == "no publications yet"


# --------------------------------------------------------------------------- assignment


@pytest.mark.django_db
def test_committed_assignment_follows_the_rules(seeded):
    study = seeded.study
    live = Assignment.objects.filter(study=study)
    assert study.status == "reviewing" and study.assignment_seed == 7
    for rev in seeded.reviewers:
        mine = live.filter(reviewer=rev).select_related("idea__topic")
        assert mine.count() == 3
        kinds = set()
        for a in mine:
            assert a.idea.topic.name in rev.topic_preferences
            assert a.idea.author_institution != rev.institution
            kinds |= {m.condition.kind for m in a.idea.memberships.select_related("condition")}
        assert kinds == {"human", "ai"}


@pytest.mark.django_db
def test_resolve_after_a_dropout_keeps_submitted_reviews_and_fills_the_gap(owner):
    seeded = make_review_study(owner, n_reviewers=6)
    study = seeded.study
    leaver = seeded.reviewers[2]
    done = Assignment.objects.filter(reviewer=leaver).first()
    review_submit(assignment=done, cleaned=cleaned(study))
    newcomer_user = get_user_model().objects.create_user("new@example.org", email="new@example.org")
    Reviewer.objects.create(
        study=study,
        user=newcomer_user,
        pseudonym="R099",
        institution="Elsewhere",
        major_venue_papers=1,
        topic_preferences=leaver.topic_preferences,
        preferred_load=3,
        consent_at=timezone.now(),
        honor_code_at=timezone.now(),
        profile_completed_at=timezone.now(),
        screening="approved",
    )
    assert reviewer_drop(reviewer=leaver, actor=owner) == 2
    before = set(
        Assignment.objects.filter(study=study)
        .exclude(status="withdrawn")
        .values_list("pk", flat=True)
    )
    job, result, _ = assignment_preview(study=study, seed=3, mode="keep")
    assert result.feasible, result.explanation()
    summary = assignment_commit(study=study, job=job)
    assert summary["created"] == 3 and summary["withdrawn"] == 0
    after = set(
        Assignment.objects.filter(study=study)
        .exclude(status="withdrawn")
        .values_list("pk", flat=True)
    )
    assert before <= after
    done.refresh_from_db()
    assert done.status == "submitted"
    with pytest.raises(RecruitmentError):
        assignment_commit(study=study, job=job)  # committed already


@pytest.mark.django_db
def test_infeasible_assignment_names_the_rule(owner):
    seeded = make_review_study(owner, commit=False)
    Reviewer.objects.filter(study=seeded.study).update(
        topic_preferences=["Coding"], preferred_load=2
    )
    Reviewer.objects.filter(pk__in=[r.pk for r in seeded.reviewers[1:]]).update(
        screening="rejected"
    )
    job, result, _ = assignment_preview(study=seeded.study, seed=1)
    assert not result.feasible
    assert job.params["problems"] and all(p != "infeasible" for p in job.params["problems"])
    with pytest.raises(RecruitmentError):
        assignment_commit(study=seeded.study, job=job)


@pytest.mark.django_db
def test_assign_command_dry_run_writes_nothing(owner, capsys):
    seeded = make_review_study(owner, commit=False)
    call_command("assign", seeded.study.slug, "--dry-run", "--seed", "5")
    out = capsys.readouterr().out
    assert "dry run: nothing written" in out and "seed 5" in out
    assert not Assignment.objects.filter(study=seeded.study).exists()
    call_command("assign", seeded.study.slug, "--seed", "5")
    assert Assignment.objects.filter(study=seeded.study).count() == 18


# --------------------------------------------------------------------------- reviews


@pytest.mark.django_db
def test_repeated_submits_store_one_review_and_edits_keep_history(seeded):
    a = Assignment.objects.filter(reviewer=seeded.reviewers[0]).first()
    review_draft_save(assignment=a, draft={"novelty": "4"})
    review, changed = review_submit(assignment=a, cleaned=cleaned(seeded.study))
    assert changed
    _, changed = review_submit(assignment=a, cleaned=cleaned(seeded.study))
    assert not changed
    assert Review.objects.filter(assignment=a).count() == 1
    assert review.revisions.count() == 1
    review, changed = review_submit(assignment=a, cleaned=cleaned(seeded.study, score=8))
    assert changed and review.revisions.count() == 2
    assert {s.score for s in review.scores.all()} == {8}
    assert review.status == "submitted" and review.minutes == 25
    study_close(study=seeded.study)
    a.refresh_from_db()
    with pytest.raises(RecruitmentError):
        review_submit(assignment=a, cleaned=cleaned(seeded.study, score=2))


def test_time_on_task_caps_idle_gaps():
    a = Assignment()
    t0 = timezone.now()
    a.record_activity(t0, IDLE_CAP_SECONDS)
    a.record_activity(t0 + timedelta(seconds=90), IDLE_CAP_SECONDS)
    a.record_activity(t0 + timedelta(hours=3), IDLE_CAP_SECONDS)
    assert a.opened_at == t0
    assert a.active_seconds == 90 + IDLE_CAP_SECONDS


def test_idea_text_splits_into_template_sections():
    text = BLIND_IDEA_TEXT.format(title="A title", filler="More.")
    sections = idea_sections(text)
    assert [h for h, _ in sections] == [
        "Title",
        "Problem Statement",
        "Motivation",
        "Proposed Method",
        "Step-by-Step Experiment Plan",
        "Test Case Examples",
        "Fallback Plan",
    ]
    assert sections[0][1] == "A title"
    assert idea_sections("") == []
    assert [h for h, _ in idea_sections("## 1. Title\nX\n**Motivation:** Y")] == [
        "Title",
        "Motivation",
    ]


# --------------------------------------------------------------------------- pairs, reminders


@pytest.mark.django_db
def test_pair_tasks_pair_same_topic_ideas_from_chosen_conditions(seeded):
    n, problems = pair_tasks_create(
        study=seeded.study,
        per_reviewer=1,
        condition_a="Human_Experts",
        condition_b="AI_Ideas",
        seed=1,
    )
    assert n == len(seeded.reviewers) and not problems
    sides = set()
    for task in PairTask.objects.filter(study=seeded.study).select_related(
        "reviewer", "idea_a", "idea_b"
    ):
        assert task.idea_a.topic_id == task.idea_b.topic_id
        assert task.idea_a.topic.name in task.reviewer.topic_preferences
        assert task.idea_a.author_institution != task.reviewer.institution
        assert "Human_Experts" in {m.condition.key for m in task.idea_a.memberships.all()}
        assert "AI_Ideas" in {m.condition.key for m in task.idea_b.memberships.all()}
        sides.add(task.a_on_left)
    assert sides == {True, False}
    task = PairTask.objects.filter(study=seeded.study, a_on_left=False).first()
    choices = dict.fromkeys(task.dimensions, "first")
    assert pair_task_submit(task=task, choices=choices, rationale="left one is better")
    assert not pair_task_submit(task=task, choices=choices, rationale="left one is better")
    assert set(task.judgments.values_list("winner", flat=True)) == {"b"}


@pytest.mark.django_db
def test_reminders_go_to_reviewers_with_open_work_and_open_invitations(seeded):
    invitation_create(study=seeded.study, email="late@example.org", send=False)
    mail.outbox.clear()
    sent = reminders_send(study=seeded.study)
    assert sent == {"reviewers": len(seeded.reviewers), "invitations": 1}
    assert len(mail.outbox) == len(seeded.reviewers) + 1
    call_command("send_reminders", seeded.study.slug)


@pytest.mark.django_db
def test_a_reminder_greets_the_reviewer_by_name_and_counts_in_words(seeded):
    named, unnamed = seeded.reviewers[0], seeded.reviewers[1]
    Reviewer.objects.filter(pk=named.pk).update(name="Ada Lovelace")
    Reviewer.objects.filter(pk=unnamed.pk).update(name="")
    type(unnamed.user).objects.filter(pk=unnamed.user_id).update(first_name="", last_name="")
    mail.outbox.clear()
    reminders_send(study=seeded.study)
    bodies = {m.to[0]: m.body for m in mail.outbox}
    assert bodies[named.user.email or named.email].startswith("Dear Ada Lovelace,\n")
    assert bodies[unnamed.user.email or unnamed.email].startswith("Hello,\n")
    open_reviews = named.assignments.filter(status="pending").count()
    assert open_reviews > 1
    assert (
        f"You have {open_reviews} idea reviews still open"
        in bodies[named.user.email or named.email]
    )
    assert not any("(s)" in body for body in bodies.values())


def test_rate_limiter_counts_per_key(db):
    cache.clear()
    assert not any(rate_limit_hit("k", limit=3, window=60) for _ in range(3))
    assert rate_limit_hit("k", limit=3, window=60)
    assert not rate_limit_hit("other", limit=3, window=60)


# A whole minute: a boundary of the 60 s windows these tests use.
BOUNDARY = 1_800_000_000 - 1_800_000_000 % 60 + 60


def _at(seconds: float):
    from datetime import UTC, datetime
    from unittest import mock

    moment = datetime.fromtimestamp(seconds, tz=UTC)
    return mock.patch("ideareview.throttle.timezone.now", return_value=moment)


def test_a_limit_reached_just_before_a_window_boundary_still_holds_after_it(db):
    cache.clear()
    boundary = BOUNDARY
    with _at(boundary - 1):
        for _ in range(3):
            rate_limit_hit("k", limit=3, window=60)
        assert rate_limited("k", limit=3, window=60)
    with _at(boundary + 1):  # a new fixed window: the old limiter forgot everything here
        assert rate_limited("k", limit=3, window=60)
    with _at(boundary + 59):
        assert rate_limited("k", limit=3, window=60)
    with _at(boundary + 61):  # two windows on, the attempts no longer count
        assert not rate_limited("k", limit=3, window=60)


def test_a_burst_split_across_a_window_boundary_is_weighed_as_one(db):
    cache.clear()
    boundary = BOUNDARY
    with _at(boundary - 1):
        for _ in range(2):
            rate_limit_hit("k", limit=3, window=60)
        assert not rate_limited("k", limit=3, window=60)
    with _at(boundary + 1):
        # 2 attempts a second ago still count: 1 more reaches the limit, though this
        # window alone has counted only 1 of 3
        rate_limit_hit("k", limit=3, window=60)
        assert rate_limited("k", limit=3, window=60)
    with _at(boundary + 61):  # the 2 have slid out; the 1 still counts
        assert not rate_limited("k", limit=3, window=60)
        rate_limit_hit("k", limit=3, window=60)
        assert not rate_limited("k", limit=3, window=60)
        rate_limit_hit("k", limit=3, window=60)
        assert rate_limited("k", limit=3, window=60)


@pytest.mark.django_db
def test_committing_an_assignment_leaves_the_study_closed_to_reviewers_until_it_opens(
    owner, client, django_capture_on_commit_callbacks
):
    """Committing writes the assignments but does not open the study: reviewers see no
    assignment and get no mail until "Open for review", which has its own gate (here
    topics that differ across conditions) and then mails the reviewers who wait."""
    seeded = make_review_study(owner, slug="gate", commit=False)
    study = seeded.study
    # one extra human idea in one topic: conditions no longer match per topic
    first = study.ideas.filter(memberships__condition__key="Human_Experts").first()
    extra = Idea.objects.create(
        study=study,
        topic=first.topic,
        title="Extra",
        normalized_text=first.normalized_text,
        normalization_status=Idea.NormalizationStatus.APPROVED,
    )
    IdeaCondition.objects.create(
        idea=extra,
        condition=study.conditions.get(key="Human_Experts"),
        study=study,
        external_id="extra-1",
    )
    mail.outbox.clear()
    job, result, _ = assignment_preview(study=study, seed=7)
    with django_capture_on_commit_callbacks(execute=True):
        assignment_commit(study=study, job=job)
    study.refresh_from_db()
    assert study.status == Study.Status.DRAFT and study.assignments.exists()
    assert mail.outbox == []
    event = AuditEvent.objects.get(study=study, verb="assignment_committed")
    assert event.detail["study_open"] is False

    # A reviewer with committed work sees none of it, and cannot open it by its address.
    assignment = study.assignments.select_related("reviewer__user", "study").first()
    client.force_login(assignment.reviewer.user)
    home = client.get(reverse("studies:reviewer_home")).content.decode()
    assert "has not opened for review yet" in home
    assert reverse("studies:review_page", args=[assignment.pk]) not in home
    assert client.get(reverse("studies:review_page", args=[assignment.pk])).status_code == 404
    with pytest.raises(RecruitmentError, match="not open for review"):
        review_draft_save(assignment=assignment, draft={"overall": "5"})
    assert reminders_send(study=study)["reviewers"] == 0

    with pytest.raises(StudyNotReady, match="conditions differ"):
        study_open_for_review(study=study, actor=owner)
    study.topic_mismatch_reason = "one late human idea kept on purpose"
    study.save()
    with django_capture_on_commit_callbacks(execute=True):
        study_open_for_review(study=study, actor=owner)
    study.refresh_from_db()
    assert study.status == Study.Status.REVIEWING
    waiting = {a.reviewer.email for a in study.assignments.select_related("reviewer")}
    assert {m.to[0] for m in mail.outbox} == waiting
    assert all("ready" in m.subject for m in mail.outbox)
    assert client.get(reverse("studies:review_page", args=[assignment.pk])).status_code == 200
