"""The autosave's statements, written by hand.

An autosave arrives every few seconds from every reviewer who is typing, so it is the
request the server answers most. Through the ORM, building its three statements cost
more CPU than the database spent running them (bench/request_cost.py, docs/deploy.md);
here they are fixed SQL texts on the models' own table and column names, so only the
parameters change from one request to the next. Values go in and come out through the
model fields (get_db_prep_value, the backend's converters), so the same text serves
SQLite and PostgreSQL and stores exactly what the ORM would.

What each statement checks is what the ORM versions did: the reading one is
get_assignment_for_reviewer's rule (the requesting user's, approved, not dropped,
assignment not withdrawn), the writing ones are conditional (the activity only over the
values read; the draft only at the version the page was rendered with).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db import connection

from ideareview.rawsql import column, from_db, loaded, table, to_db

from .models import Assignment, Review, ReviewAcceptance, Reviewer, ReviewForm, Study

# (name, model field) of each column the read returns, in order.
_READ = (
    ("id", Assignment._meta.pk),
    ("study_id", Assignment._meta.get_field("study")),
    ("reviewer_id", Assignment._meta.get_field("reviewer")),
    ("idea_id", Assignment._meta.get_field("idea")),
    ("status", Assignment._meta.get_field("status")),
    ("opened_at", Assignment._meta.get_field("opened_at")),
    ("last_seen_at", Assignment._meta.get_field("last_seen_at")),
    ("active_seconds", Assignment._meta.get_field("active_seconds")),
    ("study_status", Study._meta.get_field("status")),
    ("form_id", ReviewForm._meta.pk),
    ("form_definition", ReviewForm._meta.get_field("definition")),
    ("review_id", Review._meta.pk),
    ("acceptance_id", ReviewAcceptance._meta.pk),
)
# The assignment's own columns among them.
_ASSIGNMENT = tuple(name for name, field in _READ if field.model is Assignment)


@cache
def _read_sql(vendor: str) -> str:
    a, v, s, f, r, ra = (
        table(m) for m in (Assignment, Reviewer, Study, ReviewForm, Review, ReviewAcceptance)
    )
    col = column
    return (
        f"SELECT a.{col(Assignment, 'id')}, a.{col(Assignment, 'study')}, "
        f"a.{col(Assignment, 'reviewer')}, a.{col(Assignment, 'idea')}, "
        f"a.{col(Assignment, 'status')}, a.{col(Assignment, 'opened_at')}, "
        f"a.{col(Assignment, 'last_seen_at')}, a.{col(Assignment, 'active_seconds')}, "
        f"s.{col(Study, 'status')}, f.{col(ReviewForm, 'id')}, "
        f"f.{col(ReviewForm, 'definition')}, r.{col(Review, 'id')}, "
        f"ra.{col(ReviewAcceptance, 'id')} "
        f"FROM {a} a "
        f"JOIN {v} v ON v.{col(Reviewer, 'id')} = a.{col(Assignment, 'reviewer')} "
        f"JOIN {s} s ON s.{col(Study, 'id')} = a.{col(Assignment, 'study')} "
        f"JOIN {f} f ON f.{col(ReviewForm, 'id')} = s.{col(Study, 'review_form')} "
        f"LEFT JOIN {r} r ON r.{col(Review, 'assignment')} = a.{col(Assignment, 'id')} "
        f"LEFT JOIN {ra} ra ON ra.{col(ReviewAcceptance, 'review')} = r.{col(Review, 'id')} "
        f"WHERE {own_assignment_sql()}"
    )


@cache
def own_assignment_sql() -> str:
    """The reviewer's rule over `a` (the assignment) and `v` (its reviewer), shared by the
    hand-written reads of the autosave and the review page: this assignment, of the
    requesting user's reviewer, approved and not dropped, the assignment not withdrawn.
    Its parameters are `own_assignment_params`'."""
    col = column
    return (
        f"a.{col(Assignment, 'id')} = %s AND v.{col(Reviewer, 'user')} = %s "
        f"AND v.{col(Reviewer, 'screening')} = %s AND v.{col(Reviewer, 'dropped_at')} IS NULL "
        f"AND a.{col(Assignment, 'status')} <> %s"
    )


def own_assignment_params(*, assignment_id: int, user_id: int | None) -> list[Any]:
    return [
        assignment_id,
        user_id,
        Reviewer.Screening.APPROVED.value,
        Assignment.Status.WITHDRAWN.value,
    ]


def assignment_for_draft(*, user_id: int | None, assignment_id: int) -> Assignment | None:
    """The assignment an autosave writes to, if it is this user's to write: its activity
    fields, its study's status and review form, which review is its own and whether
    the study team decided on it (ids only), in one statement. Nothing else of the rows is loaded; the ORM would read the rest
    from the database if asked."""
    with connection.cursor() as cursor:
        cursor.execute(
            _read_sql(connection.vendor),
            own_assignment_params(assignment_id=assignment_id, user_id=user_id),
        )
        row = cursor.fetchone()
    if row is None:
        return None
    values = {name: from_db(field, v) for (name, field), v in zip(_READ, row, strict=True)}
    form = loaded(ReviewForm, id=values["form_id"], definition=values["form_definition"])
    study = loaded(
        Study, id=values["study_id"], status=values["study_status"], review_form_id=form.pk
    )
    assignment = loaded(Assignment, **{name: values[name] for name in _ASSIGNMENT})
    Study.review_form.field.set_cached_value(study, form)  # type: ignore[attr-defined]
    Assignment.study.field.set_cached_value(assignment, study)  # type: ignore[attr-defined]
    review = None
    if values["review_id"] is not None:
        review = loaded(
            Review,
            id=values["review_id"],
            assignment_id=assignment.pk,
            study_id=study.pk,
            idea_id=assignment.idea_id,
            reviewer_id=assignment.reviewer_id,
        )
        decision = None
        if values["acceptance_id"] is not None:
            decision = loaded(ReviewAcceptance, id=values["acceptance_id"], review_id=review.pk)
        Review.acceptance.related.set_cached_value(review, decision)  # type: ignore[attr-defined]
    Assignment.review.related.set_cached_value(assignment, review)  # type: ignore[attr-defined]
    return assignment


def _activity_sql(*, assignment: Assignment, seen: Any, draft_status: bool) -> tuple[str, list]:
    f = Assignment._meta.get_field
    status = column(Assignment, "status")
    sets = [
        f"{column(Assignment, 'opened_at')} = %s",
        f"{column(Assignment, 'last_seen_at')} = %s",
        f"{column(Assignment, 'active_seconds')} = %s",
    ]
    params: list[Any] = [
        to_db(f("opened_at"), assignment.opened_at),
        to_db(f("last_seen_at"), assignment.last_seen_at),
        to_db(f("active_seconds"), assignment.active_seconds),
    ]
    if draft_status:
        sets.append(f"{status} = CASE WHEN {status} = %s THEN %s ELSE {status} END")
        params += [Assignment.Status.PENDING.value, Assignment.Status.DRAFT.value]
    where = f"{column(Assignment, 'id')} = %s"
    params.append(assignment.pk)
    seen_column = column(Assignment, "last_seen_at")
    if seen is None:
        where += f" AND {seen_column} IS NULL"
    else:
        where += f" AND {seen_column} = %s"
        params.append(to_db(f("last_seen_at"), seen))
    return f"UPDATE {table(Assignment)} SET {', '.join(sets)} WHERE {where}", params


def _review_match(review_id: int, version: int | None) -> tuple[str, list]:
    """The condition that picks the review at `version` (any version when None)."""
    where, params = f"{column(Review, 'id')} = %s", [review_id]
    if version is not None:
        where += f" AND {column(Review, 'version')} = %s"
        params.append(version)
    return where, params


def _draft_sql(
    *, review_id: int, draft: dict[str, str], at: Any, version: int | None
) -> tuple[str, list]:
    f = Review._meta.get_field
    where, match = _review_match(review_id, version)
    sql = (
        f"UPDATE {table(Review)} SET {column(Review, 'draft')} = %s, "
        f"{column(Review, 'draft_saved_at')} = %s WHERE {where}"
    )
    return sql, [to_db(f("draft"), draft), to_db(f("draft_saved_at"), at), *match]


def assignment_activity_update(*, assignment: Assignment, seen: Any, draft_status: bool) -> bool:
    """Write `assignment`'s activity fields if the row still has `seen` as its last
    activity (else another request touched it since it was read: False). With
    `draft_status`, a pending assignment becomes a draft in the same statement."""
    sql, params = _activity_sql(assignment=assignment, seen=seen, draft_status=draft_status)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount > 0


def review_draft_update(
    *, review_id: int, draft: dict[str, str], at: Any, version: int | None
) -> bool:
    """Store `draft` on the review (at `version` only, when given); False if no row
    matched, i.e. the review was submitted again since the page was rendered."""
    sql, params = _draft_sql(review_id=review_id, draft=draft, at=at, version=version)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount > 0


def draft_save_at_once(
    *,
    assignment: Assignment,
    seen: Any,
    draft_status: bool,
    review_id: int,
    draft: dict[str, str],
    at: Any,
    version: int | None,
    quick_commit: bool,
) -> bool:
    """assignment_activity_update and review_draft_update in one PostgreSQL statement,
    which is its own transaction when no block is open: one round trip instead of five
    (BEGIN, the setting, two updates, COMMIT).

    Both updates apply, or neither: the activity only if the review is still at
    `version`, the draft only once the activity is written (its condition reads the
    first update's result, so the assignment row is locked before the review row, in the
    order review_submit locks them). False when nothing was written: another request
    touched the assignment since it was read, or the review was submitted since the page
    opened; the caller then takes the careful path, which tells the two apart. Under a
    race (a submit that commits between the two updates) the activity alone is written;
    it is true activity, and the careful path then finds the review stale.

    `quick_commit`: this statement's commit does not wait for its WAL flush (only
    outside a transaction block, where the statement's transaction is the autosave's
    own)."""
    activity, activity_params = _activity_sql(
        assignment=assignment, seen=seen, draft_status=draft_status
    )
    match, match_params = _review_match(review_id, version)
    store, store_params = _draft_sql(review_id=review_id, draft=draft, at=at, version=version)
    quick = "set_config('synchronous_commit', 'off', true), " if quick_commit else ""
    sql = (
        f"WITH a AS ({activity} AND EXISTS "
        f"(SELECT 1 FROM {table(Review)} WHERE {match}) RETURNING 1), "
        f"r AS ({store} AND EXISTS (SELECT 1 FROM a) RETURNING 1) "
        f"SELECT {quick}(SELECT count(*) FROM r)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*activity_params, *match_params, *store_params])
        row = cursor.fetchone()
    return bool(row and row[-1])
