"""What an item insert maintains: the indexes lookups need, partial ones where a new item has no value,
and the count triggers, which the index migration must not lose (on SQLite a table rebuild would)."""

import uuid

import pytest
from django.db import connection
from django.utils import timezone

from feedback.models import Embedding, FeedbackItem
from tests.factories import source_make, user_make

TABLE = FeedbackItem._meta.db_table


def _indexes() -> dict[str, dict]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, TABLE)
    return {name: details for name, details in constraints.items() if details["index"] or details["unique"]}


def _indexed_columns() -> list[tuple[str, ...]]:
    return sorted(tuple(details["columns"]) for details in _indexes().values())


@pytest.mark.django_db
def test_an_item_insert_maintains_no_index_that_no_lookup_uses():
    columns = _indexed_columns()
    # Lookups by source go through the unique (source_id, external_id) index; nothing finds an item by content_hash.
    assert ("source_id", "external_id") in columns
    assert ("source_id",) not in columns
    assert ("content_hash",) not in columns
    # Kept: the receipt (a batch finds its new rows by it) and the pages' orderings.
    assert ("receipt_id",) in columns
    assert ("status", "status_changed_at") in columns


@pytest.mark.django_db
def test_reporter_and_embedding_are_indexed_only_where_set():
    indexes = _indexes()
    for name, column in (("feedback_item_reporter", "reporter_id"), ("feedback_item_embedding", "embedding_id")):
        assert indexes[name]["columns"] == [column]
        # No other index on the column: the partial one is the only one an insert could touch.
        assert [n for n, d in indexes.items() if d["columns"] == [column]] == [name]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'feedback_item_reporter'")
        else:
            cursor.execute("SELECT sql FROM sqlite_master WHERE name = 'feedback_item_reporter'")
        assert "IS NOT NULL" in cursor.fetchone()[0]


@pytest.mark.django_db
def test_deleting_a_user_or_an_embedding_still_clears_it_from_their_items():
    source, _ = source_make()
    reporter = user_make("rita", "reviewer")
    embedding = Embedding.objects.create(content_hash="h" * 64, model_name="m", vector=b"\0" * 16)
    item = FeedbackItem.objects.create(
        source=source, external_id="e1", kind="report", occurred_at=timezone.now(), receipt_id=uuid.uuid4(),
        reporter=reporter, embedding=embedding,
    )
    other = FeedbackItem.objects.create(
        source=source, external_id="e2", kind="report", occurred_at=timezone.now(), receipt_id=uuid.uuid4()
    )
    reporter.delete()
    embedding.delete()
    item.refresh_from_db()
    assert (item.reporter_id, item.embedding_id) == (None, None)
    assert FeedbackItem.objects.filter(id__in=[item.id, other.id]).count() == 2


@pytest.mark.django_db
def test_the_count_triggers_survive_the_index_migration():
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal", [TABLE]
            )
        else:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [TABLE])
        triggers = sorted(row[0] for row in cursor.fetchall())
    assert triggers == ["labeling_count_item_delete", "labeling_count_item_insert", "labeling_count_item_update"]


def test_rows_built_as_dicts_name_every_stored_column_as_its_field():
    # items_insert_new takes rows keyed by column and builds FeedbackItem(**row) from them on SQLite.
    from feedback.services import _STORED_FIELDS, item_row_defaults

    assert [f.column for f in _STORED_FIELDS] == [f.attname for f in _STORED_FIELDS]
    assert set(item_row_defaults()) == {f.attname for f in _STORED_FIELDS}
