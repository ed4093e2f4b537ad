"""The review page's read, written by hand.

Every visit to the review page (and every submit) starts with the access check: the
assignment, if it is the requesting reviewer's, with the rows the page shows (its study
and the study's review form, its idea and the idea's topic, its reviewer). Through the
ORM, building that statement cost more CPU than the rest of the page's queries together
(bench/request_cost.py); here it is one fixed SQL text per database, on the models' own
table and column names, so only the parameters change from one request to the next.

It reads every column of each row, as `select_related` does, and makes the instances as
the ORM makes them (Model.from_db, each value through its field's converters: see
ideareview/rawsql.py), so the page gets the same objects. Its condition is the
reviewer's rule: the requesting user's reviewer, approved and not dropped, the
assignment not withdrawn, the study open to reviewers (reviewing or closed).
"""

from __future__ import annotations

from functools import cache

from django.db import connection
from django.db.models import Model

from ideareview.rawsql import all_columns, column, instances, loaded, table

from .draft_sql import own_assignment_params, own_assignment_sql
from .models import (
    Assignment,
    Idea,
    Review,
    ReviewAcceptance,
    Reviewer,
    ReviewForm,
    Study,
    Topic,
)

# (alias, model) of each row the read returns, in the order of its columns.
_ROWS: tuple[tuple[str, type[Model]], ...] = (
    ("a", Assignment),
    ("s", Study),
    ("f", ReviewForm),
    ("i", Idea),
    ("t", Topic),
    ("v", Reviewer),
)
OPEN_TO_REVIEWERS = (Study.Status.REVIEWING.value, Study.Status.CLOSED.value)


_REVIEW = (("r", Review),)


@cache
def _read_sql(vendor: str, with_review: bool) -> str:
    col = column
    rows = _ROWS + _REVIEW if with_review else _ROWS
    columns = ", ".join(c for alias, model in rows for c in all_columns(alias, model))
    review = ""
    if with_review:
        # and whether the study team has decided on it (the decision's id only)
        columns += f", ra.{col(ReviewAcceptance, 'id')}"
        review = (
            f"LEFT JOIN {table(Review)} r "
            f"ON r.{col(Review, 'assignment')} = a.{col(Assignment, 'id')} "
            f"LEFT JOIN {table(ReviewAcceptance)} ra "
            f"ON ra.{col(ReviewAcceptance, 'review')} = r.{col(Review, 'id')} "
        )
    return (
        f"SELECT {columns} FROM {table(Assignment)} a "
        f"JOIN {table(Reviewer)} v ON v.{col(Reviewer, 'id')} = a.{col(Assignment, 'reviewer')} "
        f"JOIN {table(Study)} s ON s.{col(Study, 'id')} = a.{col(Assignment, 'study')} "
        f"JOIN {table(ReviewForm)} f ON f.{col(ReviewForm, 'id')} = s.{col(Study, 'review_form')} "
        f"JOIN {table(Idea)} i ON i.{col(Idea, 'id')} = a.{col(Assignment, 'idea')} "
        f"JOIN {table(Topic)} t ON t.{col(Topic, 'id')} = i.{col(Idea, 'topic')} "
        f"{review}"
        f"WHERE {own_assignment_sql()} "
        f"AND s.{col(Study, 'status')} IN ({', '.join(['%s'] * len(OPEN_TO_REVIEWERS))})"
    )


def assignment_for_page(
    *, user_id: int | None, assignment_id: int, with_review: bool = False
) -> Assignment | None:
    """The assignment if this user may open it as its reviewer, with its study (and the
    study's review form), idea (and topic) and reviewer loaded, in one statement; None
    otherwise. With `with_review` its review (every column, or None when it has none) is
    read in the same statement and is the assignment's `review`, with its `acceptance`
    (id only, None when undecided): for a page that shows the review as it is now, not
    for one that changes it afterwards."""
    with connection.cursor() as cursor:
        cursor.execute(
            _read_sql(connection.vendor, with_review),
            [
                *own_assignment_params(assignment_id=assignment_id, user_id=user_id),
                *OPEN_TO_REVIEWERS,
            ],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    decision_id = row[-1] if with_review else None
    assignment, study, form, idea, topic, reviewer, *review = instances(
        row[:-1] if with_review else row, _ROWS + _REVIEW if with_review else _ROWS
    )
    Study.review_form.field.set_cached_value(study, form)  # type: ignore[attr-defined]
    Idea.topic.field.set_cached_value(idea, topic)  # type: ignore[attr-defined]
    Assignment.study.field.set_cached_value(assignment, study)  # type: ignore[attr-defined]
    Assignment.idea.field.set_cached_value(assignment, idea)  # type: ignore[attr-defined]
    Assignment.reviewer.field.set_cached_value(assignment, reviewer)  # type: ignore[attr-defined]
    if with_review:
        Assignment.review.related.set_cached_value(assignment, review[0])  # type: ignore[attr-defined]
        if review[0] is not None:
            Review.assignment.field.set_cached_value(review[0], assignment)  # type: ignore[attr-defined]
            decision = None
            if decision_id is not None:
                decision = loaded(ReviewAcceptance, id=decision_id, review_id=review[0].pk)
            Review.acceptance.related.set_cached_value(review[0], decision)  # type: ignore[attr-defined]
    return assignment
