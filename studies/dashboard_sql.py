"""The reviewer dashboard's reads, written by hand.

The dashboard shows each of the user's reviewer profiles with its study and platform
row, its assignments (each with its idea and the idea's topic) and its pair tasks, the
withdrawn ones left out. Through the ORM (a select_related and two prefetches) compiling
the three statements was most of the page's CPU (bench/request_cost.py); here they are
fixed SQL texts, as in studies/page_sql.py. They read what the ORM read, every column of
each row, and make the instances as the ORM makes them (ideareview/rawsql.py), with the
related rows in place, in the same order; with each assignment, whether its review was
decided on by the study team (the decision's id, nothing of the decision itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from django.db import connection

from ideareview.rawsql import all_columns, column, instances, table

from .models import (
    Assignment,
    Idea,
    PairTask,
    PlatformParticipant,
    Review,
    ReviewAcceptance,
    Reviewer,
    Study,
    Topic,
)

# (alias, model) of each row a statement returns, in the order of its columns.
_PROFILE = (("v", Reviewer), ("s", Study), ("p", PlatformParticipant))
_ASSIGNMENT = (("a", Assignment), ("i", Idea), ("t", Topic))
_PAIR = (("pt", PairTask),)


@dataclass
class DashboardRow:
    """One reviewer profile of the user's, with its live work in id order, and the ids of
    its assignments whose review the study team has decided on (the reviewer can no
    longer change those)."""

    reviewer: Reviewer
    assignments: list[Assignment] = field(default_factory=list)
    pair_tasks: list[PairTask] = field(default_factory=list)
    decided: set[int] = field(default_factory=set)


def _select(rows: tuple[tuple[str, type], ...]) -> str:
    return ", ".join(c for alias, model in rows for c in all_columns(alias, model))


@cache
def _sql(vendor: str) -> tuple[str, str, str]:
    col = column
    profiles = (
        f"SELECT {_select(_PROFILE)} FROM {table(Reviewer)} v "
        f"JOIN {table(Study)} s ON s.{col(Study, 'id')} = v.{col(Reviewer, 'study')} "
        f"LEFT JOIN {table(PlatformParticipant)} p "
        f"ON p.{col(PlatformParticipant, 'reviewer')} = v.{col(Reviewer, 'id')} "
        f"WHERE v.{col(Reviewer, 'user')} = %s ORDER BY v.{col(Reviewer, 'id')} DESC"
    )
    assignments = (
        f"SELECT {_select(_ASSIGNMENT)}, ra.{col(ReviewAcceptance, 'id')} "
        f"FROM {table(Assignment)} a "
        f"JOIN {table(Reviewer)} v ON v.{col(Reviewer, 'id')} = a.{col(Assignment, 'reviewer')} "
        f"JOIN {table(Idea)} i ON i.{col(Idea, 'id')} = a.{col(Assignment, 'idea')} "
        f"JOIN {table(Topic)} t ON t.{col(Topic, 'id')} = i.{col(Idea, 'topic')} "
        f"LEFT JOIN {table(Review)} r ON r.{col(Review, 'assignment')} = a.{col(Assignment, 'id')} "
        f"LEFT JOIN {table(ReviewAcceptance)} ra "
        f"ON ra.{col(ReviewAcceptance, 'review')} = r.{col(Review, 'id')} "
        f"WHERE v.{col(Reviewer, 'user')} = %s AND a.{col(Assignment, 'status')} <> %s "
        f"ORDER BY a.{col(Assignment, 'id')}"
    )
    pairs = (
        f"SELECT {_select(_PAIR)} FROM {table(PairTask)} pt "
        f"JOIN {table(Reviewer)} v ON v.{col(Reviewer, 'id')} = pt.{col(PairTask, 'reviewer')} "
        f"WHERE v.{col(Reviewer, 'user')} = %s AND pt.{col(PairTask, 'status')} <> %s "
        f"ORDER BY pt.{col(PairTask, 'id')}"
    )
    return profiles, assignments, pairs


def reviewer_dashboard_rows(*, user_id: int | None) -> list[DashboardRow]:
    """The user's reviewer profiles, newest first, each with its study and platform row
    (None when it has none) and its assignments and pair tasks that are not withdrawn
    (with which of those assignments' reviews are decided); the work is read only when
    there is a profile."""
    profiles_sql, assignments_sql, pairs_sql = _sql(connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(profiles_sql, [user_id])
        profiles = cursor.fetchall()
        if not profiles:
            return []
        cursor.execute(assignments_sql, [user_id, Assignment.Status.WITHDRAWN.value])
        assignments = cursor.fetchall()
        cursor.execute(pairs_sql, [user_id, PairTask.Status.WITHDRAWN.value])
        pairs = cursor.fetchall()
    rows: dict[int, DashboardRow] = {}
    for values in profiles:
        reviewer, study, participant = instances(values, _PROFILE)
        Reviewer.study.field.set_cached_value(reviewer, study)  # type: ignore[attr-defined]
        Reviewer.platform_participant.related.set_cached_value(reviewer, participant)  # type: ignore[attr-defined]
        if participant is not None:
            PlatformParticipant.reviewer.field.set_cached_value(participant, reviewer)  # type: ignore[attr-defined]
        rows[reviewer.pk] = DashboardRow(reviewer)
    for values in assignments:
        assignment, idea, topic = instances(values[:-1], _ASSIGNMENT)
        row = rows.get(assignment.reviewer_id)
        if row is None:  # a profile made since the first statement
            continue
        if values[-1] is not None:
            row.decided.add(assignment.pk)
        Idea.topic.field.set_cached_value(idea, topic)  # type: ignore[attr-defined]
        Assignment.idea.field.set_cached_value(assignment, idea)  # type: ignore[attr-defined]
        Assignment.reviewer.field.set_cached_value(assignment, row.reviewer)  # type: ignore[attr-defined]
        row.assignments.append(assignment)
    for values in pairs:
        (task,) = instances(values, _PAIR)
        row = rows.get(task.reviewer_id)
        if row is None:
            continue
        PairTask.reviewer.field.set_cached_value(task, row.reviewer)  # type: ignore[attr-defined]
        row.pair_tasks.append(task)
    return list(rows.values())
