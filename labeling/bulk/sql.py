"""Set-based writes of many rows with different values, for the bulk actions.

Django's bulk_create builds a model instance per row and bulk_update one
CASE WHEN per row and field: for 10,000 rows that is seconds of Python, and
SQLite evaluates each CASE linearly. Here the rows go to the database as one
VALUES list per chunk, prepared by the fields themselves (so dates, JSON and
foreign keys are stored exactly as the ORM stores them):

- `rows_insert`: INSERT INTO t (a, b) VALUES (...), (...);
- `rows_update`: WITH v (k, a, b) AS (VALUES ...) UPDATE t SET a = v.a ... FROM v WHERE t.k = v.k,
  which PostgreSQL and SQLite (3.33 and later) both run as a join on t's index.
"""

from collections.abc import Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, models

# Parameters per statement, well under SQLite's 32,766 and PostgreSQL's 65,535.
MAX_PARAMS = 20_000


def _placeholder(field: models.Field) -> str:
    # PostgreSQL types a VALUES column from its values; a column of NULLs would be text.
    if connection.vendor == "postgresql":
        return f"CAST(%s AS {field.db_type(connection)})"
    return "%s"


INTEGER_TYPES = {"AutoField", "BigAutoField", "IntegerField", "BigIntegerField", "PositiveIntegerField"}


class _Preparer:
    """A field's value as the database takes it; each distinct value prepared once.

    Most columns of a bulk write hold one value for every row (the reviewer,
    the time, the dataset) and the item ids are plain integers: preparing
    each of 50,000 values through the field costs more than the statement.
    """

    def __init__(self, field: models.Field, db) -> None:
        self.field = field
        self.db = db
        target = getattr(field, "target_field", field)
        self.integer = target.get_internal_type() in INTEGER_TYPES
        self.cache: dict[Any, Any] = {}

    def __call__(self, value: Any) -> Any:
        if self.integer and type(value) is int:
            return value
        try:
            return self.cache[value]
        except KeyError:
            prepared = self.cache[value] = self.field.get_db_prep_save(value, self.db)
            return prepared
        except TypeError:  # a list or dict (JSON): not hashable, prepared each time
            return self.field.get_db_prep_save(value, self.db)


def _preparers(fields: Sequence[models.Field]) -> list[_Preparer]:
    db = connections[DEFAULT_DB_ALIAS]
    return [_Preparer(field, db) for field in fields]


def _prepared(preparers: Sequence[_Preparer], row: Sequence[Any]) -> list[Any]:
    return [prepare(value) for prepare, value in zip(preparers, row)]


def _chunks(rows: Sequence[Sequence[Any]], width: int):
    size = max(1, MAX_PARAMS // max(width, 1))
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def rows_insert(model: type[models.Model], names: Sequence[str], rows: Sequence[Sequence[Any]]) -> int:
    """Insert rows given as values of the fields `names` (attnames, e.g. "item_id"); how many."""
    fields = [model._meta.get_field(name) for name in names]
    table = connection.ops.quote_name(model._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    one = "(" + ", ".join(_placeholder(field) for field in fields) + ")"
    preparers = _preparers(fields)
    with connection.cursor() as cursor:
        for chunk in _chunks(rows, len(fields)):
            params = [value for row in chunk for value in _prepared(preparers, row)]
            cursor.execute(f"INSERT INTO {table} ({columns}) VALUES {', '.join([one] * len(chunk))}", params)
    return len(rows)


def rows_update(
    model: type[models.Model],
    key: str,
    names: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    also: dict[str, Any] | None = None,
) -> int:
    """Set the fields `names` of each row whose `key` is the row's first value; `also`: the same value for all."""
    quote = connection.ops.quote_name
    key_field = model._meta.get_field(key)
    fields = [model._meta.get_field(name) for name in names]
    table = quote(model._meta.db_table)
    also_fields = [(model._meta.get_field(name), value) for name, value in (also or {}).items()]
    aliases = ["k", *(f"v{index}" for index in range(len(fields)))]
    one = "(" + ", ".join(_placeholder(field) for field in [key_field, *fields]) + ")"
    assignments = [f"{quote(field.column)} = v.{alias}" for field, alias in zip(fields, aliases[1:])]
    assignments += [f"{quote(field.column)} = %s" for field, _ in also_fields]
    also_params = [field.get_db_prep_save(value, connection) for field, value in also_fields]
    updated = 0
    preparers = _preparers([key_field, *fields])
    with connection.cursor() as cursor:
        for chunk in _chunks(rows, len(fields) + 1):
            params = [value for row in chunk for value in _prepared(preparers, row)]
            cursor.execute(
                f"WITH v ({', '.join(aliases)}) AS (VALUES {', '.join([one] * len(chunk))}) "
                f"UPDATE {table} SET {', '.join(assignments)} FROM v WHERE {table}.{quote(key_field.column)} = v.k",
                params + also_params,
            )
            updated += cursor.rowcount
    return updated
