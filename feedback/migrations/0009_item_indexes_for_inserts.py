"""Fewer indexes for an item insert to maintain.

Dropped: the index on source_id (the unique (source_id, external_id) index
serves every lookup by source) and both indexes on content_hash (nothing
looks an item up by it). The indexes on reporter_id and embedding_id become
partial (NOT NULL): an item arrives with neither, so its insert touches
neither index, and deleting a user or an embedding still finds its items.

The indexes are dropped by name, found by introspection, rather than by
AlterField: on SQLite AlterField rebuilds the table, and the rebuild would
drop the count triggers that labeling's migrations put on it.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

UNINDEXED = ("source_id", "content_hash", "reporter_id", "embedding_id")


def drop_plain_indexes(apps, schema_editor):
    """Drop every non-unique index that covers exactly one of UNINDEXED's columns."""
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "feedback_feedbackitem")
    for name, details in constraints.items():
        if details["index"] and not details["unique"] and not details["primary_key"]:
            if len(details["columns"]) == 1 and details["columns"][0] in UNINDEXED:
                schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(name)}")


class Migration(migrations.Migration):
    dependencies = [
        ("feedback", "0008_import_run"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_plain_indexes, migrations.RunPython.noop)],
            state_operations=[
                migrations.AlterField(
                    model_name="feedbackitem",
                    name="content_hash",
                    field=models.CharField(blank=True, default="", max_length=64),
                ),
                migrations.AlterField(
                    model_name="feedbackitem",
                    name="embedding",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="items",
                        to="feedback.embedding",
                    ),
                ),
                migrations.AlterField(
                    model_name="feedbackitem",
                    name="reporter",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="reports",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="feedbackitem",
                    name="source",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="items",
                        to="feedback.source",
                    ),
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="feedbackitem",
            index=models.Index(
                condition=models.Q(("reporter__isnull", False)), fields=["reporter"], name="feedback_item_reporter"
            ),
        ),
        migrations.AddIndex(
            model_name="feedbackitem",
            index=models.Index(
                condition=models.Q(("embedding__isnull", False)), fields=["embedding"], name="feedback_item_embedding"
            ),
        ),
    ]
