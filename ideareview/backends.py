"""The authentication backend: Django's ModelBackend, with the logged-in user loaded by
one fixed SQL text instead of a query the ORM compiles again on every request. Every
request of a logged-in user loads it; building the ORM's query cost more CPU than the
database spent answering it (bench/request_cost.py).

A user's permissions are read the same way, both sources in one statement: every page's
menu asks whether the user may create studies (`perms.studies.add_study`), and so does a
login's redirect, and ModelBackend answers with two ORM queries (the user's own
permissions, then their groups')."""

from __future__ import annotations

from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
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


@cache
def _permissions_sql(vendor: str) -> str:
    """The (source, app label, codename) of each permission a user holds: 'user' for those
    given to the user, 'group' for those of the user's groups; the user's id twice."""
    user_model = get_user_model()
    user_perms: Any = user_model._meta.get_field("user_permissions").remote_field.through  # type: ignore[union-attr]
    user_groups: Any = user_model._meta.get_field("groups").remote_field.through  # type: ignore[union-attr]
    group_perms: Any = Group._meta.get_field("permissions").remote_field.through  # type: ignore[union-attr]

    def select(source: str) -> str:
        return (
            f"SELECT '{source}', ct.{column(ContentType, 'app_label')}, "
            f"p.{column(Permission, 'codename')} FROM {table(Permission)} p "
            f"JOIN {table(ContentType)} ct "
            f"ON ct.{column(ContentType, 'id')} = p.{column(Permission, 'content_type')} "
        )

    perm_id = f"p.{column(Permission, 'id')}"
    return (
        select("user")
        + f"JOIN {table(user_perms)} up ON up.{column(user_perms, 'permission')} = {perm_id} "
        f"WHERE up.{column(user_perms, 'user')} = %s "
        "UNION ALL "
        + select("group")
        + f"JOIN {table(group_perms)} gp ON gp.{column(group_perms, 'permission')} = {perm_id} "
        f"JOIN {table(user_groups)} ug "
        f"ON ug.{column(user_groups, 'group')} = gp.{column(group_perms, 'group')} "
        f"WHERE ug.{column(user_groups, 'user')} = %s"
    )


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

    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        """ModelBackend's answer, and its three per-user caches filled as it fills them,
        from one fixed statement instead of two ORM queries (a superuser, who holds every
        permission, is left to ModelBackend)."""
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None:
            return set()
        cached = ("_perm_cache", "_user_perm_cache", "_group_perm_cache")
        if user_obj.is_superuser or any(hasattr(user_obj, name) for name in cached):
            return super().get_all_permissions(user_obj, obj)
        found: dict[str, set[str]] = {"user": set(), "group": set()}
        with connection.cursor() as cursor:
            cursor.execute(_permissions_sql(connection.vendor), [user_obj.pk, user_obj.pk])
            for source, app_label, codename in cursor.fetchall():
                found[source].add(f"{app_label}.{codename}")
        user_obj._user_perm_cache = found["user"]
        user_obj._group_perm_cache = found["group"]
        user_obj._perm_cache = found["user"] | found["group"]
        return user_obj._perm_cache
