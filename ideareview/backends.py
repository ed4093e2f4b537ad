"""The authentication backend: Django's ModelBackend, with the logged-in user loaded by
one fixed SQL text instead of a query the ORM compiles again on every request. Every
request of a logged-in user loads it; building the ORM's query cost more CPU than the
database spent answering it (bench/request_cost.py)."""

from __future__ import annotations

from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import ValidationError
from django.db import connection

from .rawsql import column, from_db, loaded, table


@cache
def _user_sql(vendor: str) -> tuple[str, tuple[Any, ...]]:
    """The SELECT of one user by primary key, and the fields of its columns in order."""
    model = get_user_model()
    fields = tuple(model._meta.concrete_fields)
    columns = ", ".join(column(model, f.name) for f in fields)
    pk = column(model, model._meta.pk.name)  # type: ignore[union-attr]
    return f"SELECT {columns} FROM {table(model)} WHERE {pk} = %s", fields


class UserBackend(ModelBackend):
    """ModelBackend, whose get_user (run for every request of a logged-in user) reads
    the row with a fixed statement; inactive users are refused as ModelBackend does."""

    def get_user(self, user_id: Any) -> Any:
        model = get_user_model()
        try:
            pk = model._meta.pk.to_python(user_id)  # type: ignore[union-attr]
        except ValidationError:
            return None
        sql, fields = _user_sql(connection.vendor)
        with connection.cursor() as cursor:
            cursor.execute(sql, [pk])
            row = cursor.fetchone()
        if row is None:
            return None
        values = {f.attname: from_db(f, v) for f, v in zip(fields, row, strict=True)}
        user = loaded(model, **values)
        return user if self.user_can_authenticate(user) else None
