"""The test suite empties PostgreSQL after a committing test with DELETEs instead of one
TRUNCATE of every table (tests/conftest.py): every row goes, whatever the order of the
tables and the foreign keys between them, and a flush that resets sequences keeps
Django's own statements."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.color import no_style
from django.db.backends.postgresql.operations import DatabaseOperations

from studies.models import AuditEvent, Study, StudyMember
from studies.services.study import study_create


def test_the_postgresql_flush_deletes_every_table_with_foreign_keys_checked_at_the_end():
    ops = DatabaseOperations(connection=None)
    tables = ["studies_studymember", "auth_user", "studies_study"]
    sql = ops.sql_flush(no_style(), tables)
    assert sql[0] == "SET CONSTRAINTS ALL DEFERRED;"
    assert sql[1:] == [f'DELETE FROM "{t}";' for t in tables]
    assert not any("TRUNCATE" in s for s in sql)


def test_a_flush_that_resets_sequences_or_cascades_keeps_djangos_truncate():
    ops = DatabaseOperations(connection=None)
    for options in ({"reset_sequences": True}, {"allow_cascade": True}):
        sql = ops.sql_flush(no_style(), ["auth_user"], **options)
        assert sql[0].startswith('TRUNCATE "auth_user"'), (options, sql)
    assert ops.sql_flush(no_style(), []) == []


@pytest.mark.django_db(transaction=True)
def test_a_flush_removes_rows_that_refer_to_each_other_and_commits():
    owner = get_user_model().objects.create_user("flush-owner", password="pw")
    member = get_user_model().objects.create_user("flush-member", password="pw")
    study = study_create(owner=owner, slug="flushed", title="Flushed", baseline_condition="H")
    StudyMember.objects.create(study=study, user=member, role="viewer", added_by=owner)
    assert AuditEvent.objects.filter(study=study).exists()

    # Committed (this test is transactional): a foreign key left dangling would fail here.
    call_command("flush", interactive=False, verbosity=0, inhibit_post_migrate=True)

    assert not get_user_model().objects.exists()
    assert not Study.objects.exists()
    assert not StudyMember.objects.exists()
    assert not AuditEvent.objects.exists()
