"""Helpers for the few statements written by hand on hot paths (an autosave, loading the
logged-in user, the review page's access check, the reviewer's dashboard): the models'
own table and column names, values converted in and out by the model fields exactly as
the ORM converts them, so one SQL text serves SQLite and PostgreSQL. Elsewhere the ORM
is the rule."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import Model


def quoted(name: str) -> str:
    """A table or column name quoted for the current database."""
    return connection.ops.quote_name(name)


def table(model: type[Model]) -> str:
    return quoted(model._meta.db_table)


def column(model: type[Model], field: str) -> str:
    return quoted(model._meta.get_field(field).column)  # type: ignore[union-attr,arg-type]


@cache
def _converters(vendor: str, field: Any) -> tuple[Any, tuple[Any, ...]]:
    """The column expression of `field` and the functions the ORM applies to its values
    read from a `vendor` database; they depend on the field and the backend only (the
    connection is passed to each call), so they are looked up once per process."""
    expression = field.get_col("x")
    found = connection.ops.get_db_converters(expression)
    return expression, tuple(found + expression.get_db_converters(connection))


def from_db(field: Any, value: Any) -> Any:
    """`value` as read from the database, made what the ORM would make of it (a datetime
    from SQLite's text, a decoded JSON document, ...)."""
    expression, converters = _converters(connection.vendor, field)
    for convert in converters:
        value = convert(value, expression, connection)
    return value


def to_db(field: Any, value: Any) -> Any:
    """`value` as the ORM would send it to the database for `field`."""
    return field.get_db_prep_save(value, connection)


def loaded(model: type[Model], **values: Any) -> Any:
    """A model instance as the ORM makes it from a row holding only these columns
    (attribute names: `study_id`, not `study`); the others are deferred, so using one
    reads it from the database rather than showing a default."""
    names = [f.attname for f in model._meta.concrete_fields if f.attname in values]
    return model.from_db(connection.alias, names, [values[n] for n in names])


def all_columns(alias: str, model: type[Model]) -> list[str]:
    """Every column of `model`'s table as `alias.column`, in the order of its fields: the
    columns select_related reads of a row, in the order `instances` takes them."""
    return [f"{alias}.{column(model, f.name)}" for f in model._meta.concrete_fields]


@cache
def _row_reader(vendor: str, model: type[Model]) -> tuple[tuple[str, ...], int, tuple[Any, ...]]:
    """`model`'s attribute names in column order, its primary key's position among them,
    and (position, expression, converters) of each column whose values the ORM converts
    on a `vendor` database (the others are taken as read)."""
    fields = model._meta.concrete_fields
    found = [(i, *_converters(vendor, f)) for i, f in enumerate(fields)]
    convert = tuple((i, expression, fns) for i, expression, fns in found if fns)
    return tuple(f.attname for f in fields), fields.index(model._meta.pk), convert


def instances(row: Sequence[Any], models: Iterable[tuple[str, type[Model]]]) -> list[Any]:
    """One instance of each (alias, model) of `models` from its stretch of `row` (each
    model's all_columns, one after the other), as the ORM makes it from a select_related
    row; None for a model whose row was not there (a LEFT JOIN's NULL primary key)."""
    made: list[Any] = []
    at = 0
    for _, model in models:
        names, pk, convert = _row_reader(connection.vendor, model)
        values = list(row[at : at + len(names)])
        at += len(names)
        if values[pk] is None:
            made.append(None)
            continue
        for i, expression, converters in convert:
            for fn in converters:
                values[i] = fn(values[i], expression, connection)
        made.append(model.from_db(connection.alias, list(names), values))
    return made
