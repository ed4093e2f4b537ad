"""The autosave's cost and its guarantees under concurrent writes: it runs every few
seconds for every reviewer typing, so its statements are pinned here, and the ways it
avoids reading under lock (the version checked by the UPDATE, the activity written only
over the values it read) are checked against the races they stand in for."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from studies.models import Assignment, Review
from studies.services.assignment import IDLE_CAP_SECONDS, assignment_touch
from studies.services.reviews import StaleReview, review_draft_save, review_submit
from tests.factories import cleaned, review_answers, review_study

pytestmark = pytest.mark.embedded  # concurrent saves under each database's locks


@pytest.fixture
def built(db, owner):
    return review_study(owner, n_reviewers=1, n_ideas=2, per_reviewer=2)


def mine(built) -> list[Assignment]:
    return built.assignments[built.reviewers[0].pk]


def autosave(client: Client, assignment: Assignment, data: dict[str, str]):
    return client.post(
        reverse("studies:review_autosave", args=[assignment.pk]),
        data,
        headers={"HX-Request": "true"},
    )


def test_an_autosave_is_two_reads_and_two_writes(built):
    """The logged-in user, the assignment with everything the save needs (one query, no
    idea text), then the activity and the draft, in one transaction: on PostgreSQL one
    statement."""
    assignment = mine(built)[0]
    client = Client()
    client.force_login(built.users[0])
    data = {**review_answers(built.study), "version": "0"}
    assert autosave(client, assignment, data).status_code == 200  # creates the review
    data["novelty_rationale"] += " and more"
    with CaptureQueriesContext(connection) as ctx:
        response = autosave(client, assignment, data)
    assert response.status_code == 200 and "Draft saved" in response.content.decode()
    statements = [q["sql"] for q in ctx.captured_queries]
    kinds = [sql.split()[0].upper() for sql in statements]
    if connection.vendor == "postgresql":
        writes = ["WITH"]
        assert statements[2].count("UPDATE") == 2
    else:
        writes = ["SAVEPOINT", "UPDATE", "UPDATE", "RELEASE"]
    assert kinds == ["SELECT", "SELECT", *writes], "\n".join(statements)
    assert "auth_user" in statements[0]
    getter = statements[1]
    assert "studies_reviewer" in getter and "studies_review" in getter
    assert "normalized_text" not in getter and "pseudonym" not in getter
    assert Review.objects.get(assignment=assignment).draft["novelty_rationale"].endswith("more")


def test_a_draft_over_a_submit_made_after_the_page_opened_is_refused(built):
    """The version is checked by the UPDATE, so a submit between the autosave's read and
    its write still makes it stale, and nothing of the autosave is kept."""
    assignment = Assignment.objects.get(pk=mine(built)[0].pk)
    review_draft_save(assignment=assignment, draft={"novelty": "4"}, version=0)
    read = Assignment.objects.select_related("review", "study").get(pk=assignment.pk)
    review_submit(assignment=assignment, cleaned=cleaned(built.study), version=0)
    after_submit = Assignment.objects.get(pk=assignment.pk)
    with pytest.raises(StaleReview) as raised:
        review_draft_save(assignment=read, draft={"novelty": "2"}, version=0)
    assert raised.value.version == 1
    review = Review.objects.get(assignment=assignment)
    assert review.draft == {} and review.status == Review.Status.SUBMITTED
    again = Assignment.objects.get(pk=assignment.pk)
    assert again.status == Assignment.Status.SUBMITTED
    assert again.last_seen_at == after_submit.last_seen_at  # the activity rolled back too


def test_activity_written_by_another_request_meanwhile_is_kept(built):
    """The assignment was touched (the page opened in another tab) after the autosave
    read it: the autosave adds its own time to the row as it is now, instead of writing
    the values it computed from its older read."""
    assignment = Assignment.objects.get(pk=mine(built)[0].pk)
    start = timezone.now() - timedelta(seconds=100)
    Assignment.objects.filter(pk=assignment.pk).update(
        opened_at=start, last_seen_at=start, active_seconds=0
    )
    read = Assignment.objects.select_related("review", "study").get(pk=assignment.pk)
    other = Assignment.objects.get(pk=assignment.pk)
    touched = start + timedelta(seconds=30)
    assignment_touch(assignment=other, now=touched)
    Assignment.objects.filter(pk=assignment.pk).update(active_seconds=500)
    review = review_draft_save(assignment=read, draft={"novelty": "4"})
    row = Assignment.objects.get(pk=assignment.pk)
    assert row.status == Assignment.Status.DRAFT
    assert row.last_seen_at == review.draft_saved_at
    gap = (row.last_seen_at - touched).total_seconds()
    assert 0 < gap < IDLE_CAP_SECONDS
    # From the stale read it would be 0 + (now - start), about 100.
    assert row.active_seconds == pytest.approx(500 + gap)


def test_a_withdrawal_after_the_read_is_not_undone_by_the_draft(built):
    assignment = Assignment.objects.get(pk=mine(built)[0].pk)
    assert assignment.status == Assignment.Status.PENDING
    Assignment.objects.filter(pk=assignment.pk).update(status=Assignment.Status.WITHDRAWN)
    review_draft_save(assignment=assignment, draft={"novelty": "4"})
    assert Assignment.objects.get(pk=assignment.pk).status == Assignment.Status.WITHDRAWN


def test_the_first_autosave_creates_the_review_and_marks_the_assignment_a_draft(built):
    assignment = mine(built)[1]
    client = Client()
    client.force_login(built.users[0])
    response = autosave(client, assignment, {"novelty": "7", "version": "0"})
    assert response.status_code == 200
    review = Review.objects.get(assignment=assignment)
    assert review.draft == {"novelty": "7"} and review.status == Review.Status.DRAFT
    assert (review.study_id, review.idea_id) == (assignment.study_id, assignment.idea_id)
    row = Assignment.objects.get(pk=assignment.pk)
    assert row.status == Assignment.Status.DRAFT and row.opened_at is not None
    # someone else's session cannot save into it
    other = Client()
    other.force_login(built.study.owner)
    assert autosave(other, assignment, {"novelty": "1"}).status_code == 404
    assert Review.objects.get(assignment=assignment).draft == {"novelty": "7"}


def test_the_hand_written_read_gives_what_the_orm_reads(built):
    """Every column the autosave's statement reads, converted as the ORM converts it
    (datetimes on SQLite, the form's JSON), and the review it points at."""
    from studies.draft_sql import assignment_for_draft

    assignment = mine(built)[0]
    at = timezone.now() - timedelta(seconds=40)
    Assignment.objects.filter(pk=assignment.pk).update(
        opened_at=at, last_seen_at=at + timedelta(seconds=7), active_seconds=12.5
    )
    review_draft_save(assignment=Assignment.objects.get(pk=assignment.pk), draft={"novelty": "3"})
    orm = Assignment.objects.select_related("study__review_form", "review").get(pk=assignment.pk)
    read = assignment_for_draft(user_id=built.users[0].pk, assignment_id=assignment.pk)
    assert read is not None
    for name in ("id", "study_id", "reviewer_id", "idea_id", "status", "active_seconds"):
        assert getattr(read, name) == getattr(orm, name), name
    assert read.opened_at == orm.opened_at and read.last_seen_at == orm.last_seen_at
    assert read.last_seen_at.tzinfo is not None
    assert read.study.status == orm.study.status
    assert read.study.form_definition() == orm.study.form_definition()
    assert read.review.pk == orm.review.pk
    # A column it did not read is deferred, so it is read when used, not a default.
    assert "status" in read.review.get_deferred_fields()
    assert read.review.status == Review.Status.DRAFT


@pytest.mark.parametrize(
    "change",
    ["other user", "withdrawn", "dropped", "not approved", "no such assignment"],
)
def test_the_hand_written_read_refuses_what_the_reviewer_may_not_write(built, change):
    from studies.draft_sql import assignment_for_draft
    from studies.models import Reviewer

    assignment = mine(built)[0]
    user_id, assignment_id = built.users[0].pk, assignment.pk
    reviewer = Reviewer.objects.filter(pk=assignment.reviewer_id)
    if change == "other user":
        user_id = built.study.owner.pk
    elif change == "withdrawn":
        Assignment.objects.filter(pk=assignment_id).update(status=Assignment.Status.WITHDRAWN)
    elif change == "dropped":
        reviewer.update(dropped_at=timezone.now())
    elif change == "not approved":
        reviewer.update(screening=Reviewer.Screening.PENDING)
    else:
        assignment_id = Assignment.objects.order_by("-pk").first().pk + 1
    assert assignment_for_draft(user_id=user_id, assignment_id=assignment_id) is None
    client = Client()
    client.force_login(built.users[0])
    if change != "other user":
        assert autosave(client, Assignment(pk=assignment_id), {"novelty": "1"}).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_an_autosave_outside_a_transaction_commits_without_waiting_for_the_disk(owner):
    """Outside a transaction block (as in a request) the one statement is the autosave's
    own transaction, and only it is told not to wait for the WAL flush; inside a block
    the block's commit is left alone."""
    if connection.vendor != "postgresql":
        pytest.skip("one statement and the commit setting are PostgreSQL's")
    built = review_study(owner, n_reviewers=1, n_ideas=2, per_reviewer=2)
    assignment = mine(built)[0]
    review_draft_save(assignment=assignment, draft={"novelty": "4"}, version=0)
    read = Assignment.objects.select_related("review", "study").get(pk=assignment.pk)
    with CaptureQueriesContext(connection) as ctx:
        review_draft_save(assignment=read, draft={"novelty": "5"}, version=0)
    writes = [q["sql"] for q in ctx.captured_queries if not q["sql"].startswith("SELECT")]
    assert len(writes) == 1 and writes[0].startswith("WITH")
    statement = writes[0]
    assert "synchronous_commit" in statement
    with connection.cursor() as cursor:  # the setting ended with its statement
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"
    assert Review.objects.get(assignment=assignment).draft == {"novelty": "5"}
    read = Assignment.objects.select_related("review", "study").get(pk=assignment.pk)
    with CaptureQueriesContext(connection) as ctx, transaction.atomic():
        review_draft_save(assignment=read, draft={"novelty": "6"}, version=0)
    assert not any("synchronous_commit" in q["sql"] for q in ctx.captured_queries)
    assert Review.objects.get(assignment=assignment).draft == {"novelty": "6"}


def test_an_autosave_without_a_version_is_refused_and_one_after_submit_says_so(built):
    assignment = mine(built)[0]
    client = Client()
    client.force_login(built.users[0])
    data = {**review_answers(built.study), "version": "0"}
    assert autosave(client, assignment, data).status_code == 200
    review_submit(assignment=assignment, cleaned=cleaned(built.study), version=0)
    before = Review.objects.get(assignment=assignment).draft
    stripped = {k: v for k, v in data.items() if k != "version"}
    stripped["novelty_rationale"] = "overwritten by a request without a version"
    response = autosave(client, assignment, stripped)
    assert response.status_code == 400 and "reload the page" in response.content.decode()
    assert Review.objects.get(assignment=assignment).draft == before
    # the page's own script, still open from before the submit: a 409 it shows
    response = autosave(client, assignment, {**stripped, "version": "0"})
    assert response.status_code == 409 and "submitted" in response.content.decode()
    assert Review.objects.get(assignment=assignment).draft == before
