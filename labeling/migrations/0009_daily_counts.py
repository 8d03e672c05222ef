"""Daily counts for the reviewer pages, kept by database triggers on items and assignments.

Every insert, delete and counted change of an item or an assignment appends a
-1 for the key it leaves and a +1 for the key it enters to
labeling_dailycountchange (see labeling.models._Counted); labeling.counts
folds them into labeling_dailycount and labeling_counttotal. Triggers catch every write, bulk
updates and deletes included, which no Django signal would. The SQL is
written out here, not imported, so that this migration never changes.
"""

from django.db import migrations, models

COLUMNS = "day, kind, rating, model_version, variant, category_id, area_id, n"

# Statement-level triggers with transition tables: a bulk insert, update or
# delete of 10,000 rows appends one change row per key it touches, in one
# INSERT ... SELECT, instead of running a function per row. An item update
# changes counts only when a counted column changes: that trigger is per row,
# with a WHEN clause, so the pipeline's status updates never run it.
_DAY = "(i.occurred_at AT TIME ZONE 'UTC')::date"
_ITEM = f"{_DAY}, i.kind, COALESCE(i.rating, 0), i.model_version, i.variant"
POSTGRES_FORWARD = f"""
CREATE FUNCTION labeling_count_items() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO labeling_dailycountchange ({COLUMNS})
    SELECT {_ITEM}, COALESCE(a.category_id, 0), COALESCE(a.area_id, 0), COUNT(*)
    FROM new_rows i LEFT JOIN labeling_assignment a ON a.item_id = i.id GROUP BY 1, 2, 3, 4, 5, 6, 7;
  ELSE
    INSERT INTO labeling_dailycountchange ({COLUMNS})
    SELECT {_ITEM}, COALESCE(a.category_id, 0), COALESCE(a.area_id, 0), -COUNT(*)
    FROM old_rows i LEFT JOIN labeling_assignment a ON a.item_id = i.id GROUP BY 1, 2, 3, 4, 5, 6, 7;
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION labeling_count_item_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE category bigint; area bigint;
BEGIN
  SELECT COALESCE(a.category_id, 0), COALESCE(a.area_id, 0) INTO category, area
    FROM labeling_assignment a WHERE a.item_id = NEW.id;
  INSERT INTO labeling_dailycountchange ({COLUMNS}) VALUES
    ((OLD.occurred_at AT TIME ZONE 'UTC')::date, OLD.kind, COALESCE(OLD.rating, 0), OLD.model_version, OLD.variant,
     COALESCE(category, 0), COALESCE(area, 0), -1),
    ((NEW.occurred_at AT TIME ZONE 'UTC')::date, NEW.kind, COALESCE(NEW.rating, 0), NEW.model_version, NEW.variant,
     COALESCE(category, 0), COALESCE(area, 0), 1);
  RETURN NULL;
END $$;

-- An assignment moves its item from "no category" (0, 0) to its category and area, and back when deleted.
CREATE FUNCTION labeling_count_assignments() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Transition tables exist only for the events their trigger names, so each event has its own statements.
  IF TG_OP = 'INSERT' THEN
    INSERT INTO labeling_dailycountchange ({COLUMNS})
    SELECT {_ITEM}, m.category, m.area, SUM(m.n)
    FROM new_rows a JOIN feedback_feedbackitem i ON i.id = a.item_id
    CROSS JOIN LATERAL (VALUES (0::bigint, 0::bigint, -1), (COALESCE(a.category_id, 0), COALESCE(a.area_id, 0), 1))
      AS m(category, area, n)
    GROUP BY 1, 2, 3, 4, 5, 6, 7;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO labeling_dailycountchange ({COLUMNS})
    SELECT {_ITEM}, m.category, m.area, SUM(m.n)
    FROM old_rows a JOIN feedback_feedbackitem i ON i.id = a.item_id
    CROSS JOIN LATERAL (VALUES (COALESCE(a.category_id, 0), COALESCE(a.area_id, 0), -1), (0::bigint, 0::bigint, 1))
      AS m(category, area, n)
    GROUP BY 1, 2, 3, 4, 5, 6, 7;
  ELSE
    -- Only rows whose item, category or area changed; each leaves its old key and enters its new one.
    INSERT INTO labeling_dailycountchange ({COLUMNS})
    SELECT {_ITEM}, m.category, m.area, SUM(m.n)
    FROM old_rows o JOIN new_rows a ON a.id = o.id
    CROSS JOIN LATERAL (VALUES (o.item_id, COALESCE(o.category_id, 0), COALESCE(o.area_id, 0), -1),
                               (a.item_id, COALESCE(a.category_id, 0), COALESCE(a.area_id, 0), 1))
      AS m(item_id, category, area, n)
    JOIN feedback_feedbackitem i ON i.id = m.item_id
    WHERE (o.item_id, o.category_id, o.area_id) IS DISTINCT FROM (a.item_id, a.category_id, a.area_id)
    GROUP BY 1, 2, 3, 4, 5, 6, 7;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER labeling_count_item_insert AFTER INSERT ON feedback_feedbackitem
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION labeling_count_items();
CREATE TRIGGER labeling_count_item_delete AFTER DELETE ON feedback_feedbackitem
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION labeling_count_items();
CREATE TRIGGER labeling_count_item_update AFTER UPDATE OF occurred_at, kind, rating, model_version, variant
  ON feedback_feedbackitem FOR EACH ROW
  WHEN ((OLD.occurred_at, OLD.kind, OLD.rating, OLD.model_version, OLD.variant)
        IS DISTINCT FROM (NEW.occurred_at, NEW.kind, NEW.rating, NEW.model_version, NEW.variant))
  EXECUTE FUNCTION labeling_count_item_change();
CREATE TRIGGER labeling_count_assignment_insert AFTER INSERT ON labeling_assignment
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION labeling_count_assignments();
CREATE TRIGGER labeling_count_assignment_delete AFTER DELETE ON labeling_assignment
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION labeling_count_assignments();
CREATE TRIGGER labeling_count_assignment_update AFTER UPDATE ON labeling_assignment
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
  EXECUTE FUNCTION labeling_count_assignments();
"""

POSTGRES_BACKWARD = """
DROP TRIGGER IF EXISTS labeling_count_item_insert ON feedback_feedbackitem;
DROP TRIGGER IF EXISTS labeling_count_item_delete ON feedback_feedbackitem;
DROP TRIGGER IF EXISTS labeling_count_item_update ON feedback_feedbackitem;
DROP TRIGGER IF EXISTS labeling_count_assignment_insert ON labeling_assignment;
DROP TRIGGER IF EXISTS labeling_count_assignment_delete ON labeling_assignment;
DROP TRIGGER IF EXISTS labeling_count_assignment_update ON labeling_assignment;
DROP FUNCTION IF EXISTS labeling_count_items();
DROP FUNCTION IF EXISTS labeling_count_item_change();
DROP FUNCTION IF EXISTS labeling_count_assignments();
"""



def _item_change(row: str, delta: int) -> str:
    """SQLite: the change row of an item (NEW or OLD) in the category and area its assignment holds."""
    return (
        f"INSERT INTO labeling_dailycountchange ({COLUMNS}) VALUES (date({row}.occurred_at), {row}.kind, "
        f"COALESCE({row}.rating, 0), {row}.model_version, {row}.variant, "
        f"COALESCE((SELECT category_id FROM labeling_assignment WHERE item_id = {row}.id), 0), "
        f"COALESCE((SELECT area_id FROM labeling_assignment WHERE item_id = {row}.id), 0), {delta});"
    )


def _assignment_change(row: str | None, item_id: str, delta: int) -> str:
    """SQLite: the change row of an assignment's item in the assignment's category and area (`row` None: in none)."""
    where = f"COALESCE({row}.category_id, 0), COALESCE({row}.area_id, 0)" if row else "0, 0"
    return (
        f"INSERT INTO labeling_dailycountchange ({COLUMNS}) SELECT date(occurred_at), kind, COALESCE(rating, 0), "
        f"model_version, variant, {where}, {delta} FROM feedback_feedbackitem WHERE id = {item_id};"
    )


SQLITE_FORWARD = [
    f"CREATE TRIGGER labeling_count_item_insert AFTER INSERT ON feedback_feedbackitem BEGIN "
    f"{_item_change('NEW', 1)} END;",
    f"CREATE TRIGGER labeling_count_item_delete AFTER DELETE ON feedback_feedbackitem BEGIN "
    f"{_item_change('OLD', -1)} END;",
    "CREATE TRIGGER labeling_count_item_update AFTER UPDATE OF occurred_at, kind, rating, model_version, variant "
    "ON feedback_feedbackitem WHEN OLD.occurred_at IS NOT NEW.occurred_at OR OLD.kind IS NOT NEW.kind "
    "OR OLD.rating IS NOT NEW.rating OR OLD.model_version IS NOT NEW.model_version OR OLD.variant IS NOT NEW.variant "
    f"BEGIN {_item_change('OLD', -1)} {_item_change('NEW', 1)} END;",
    "CREATE TRIGGER labeling_count_assignment_insert AFTER INSERT ON labeling_assignment BEGIN "
    f"{_assignment_change(None, 'NEW.item_id', -1)} {_assignment_change('NEW', 'NEW.item_id', 1)} END;",
    "CREATE TRIGGER labeling_count_assignment_delete AFTER DELETE ON labeling_assignment BEGIN "
    f"{_assignment_change('OLD', 'OLD.item_id', -1)} {_assignment_change(None, 'OLD.item_id', 1)} END;",
    "CREATE TRIGGER labeling_count_assignment_update AFTER UPDATE OF item_id, category_id, area_id "
    "ON labeling_assignment WHEN OLD.item_id IS NOT NEW.item_id OR OLD.category_id IS NOT NEW.category_id "
    "OR OLD.area_id IS NOT NEW.area_id "
    f"BEGIN {_assignment_change('OLD', 'OLD.item_id', -1)} {_assignment_change('NEW', 'NEW.item_id', 1)} END;",
]
SQLITE_BACKWARD = [
    f"DROP TRIGGER IF EXISTS labeling_count_{name};"
    for name in ("item_insert", "item_delete", "item_update", "assignment_insert", "assignment_delete", "assignment_update")
]

# The counts of the items already stored, per day and of all time.
BACKFILL = [
    f"""
INSERT INTO labeling_dailycount ({COLUMNS})
SELECT {{day}}, i.kind, COALESCE(i.rating, 0), i.model_version, i.variant,
       COALESCE(a.category_id, 0), COALESCE(a.area_id, 0), COUNT(*)
FROM feedback_feedbackitem i LEFT JOIN labeling_assignment a ON a.item_id = i.id
GROUP BY 1, 2, 3, 4, 5, 6, 7
""",
    """
INSERT INTO labeling_counttotal (kind, rating, model_version, variant, category_id, area_id, n)
SELECT i.kind, COALESCE(i.rating, 0), i.model_version, i.variant,
       COALESCE(a.category_id, 0), COALESCE(a.area_id, 0), COUNT(*)
FROM feedback_feedbackitem i LEFT JOIN labeling_assignment a ON a.item_id = i.id
GROUP BY 1, 2, 3, 4, 5, 6
""",
]


def forward(apps, schema_editor):
    postgres = schema_editor.connection.vendor == "postgresql"
    statements = [POSTGRES_FORWARD] if postgres else SQLITE_FORWARD
    day = "(i.occurred_at AT TIME ZONE 'UTC')::date" if postgres else "date(i.occurred_at)"
    for statement in [*statements, *(backfill.format(day=day) for backfill in BACKFILL)]:
        schema_editor.execute(statement)


def backward(apps, schema_editor):
    postgres = schema_editor.connection.vendor == "postgresql"
    for statement in [POSTGRES_BACKWARD] if postgres else SQLITE_BACKWARD:
        schema_editor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ('labeling', '0008_bulk_actions_and_dataset_pins'),
    ]

    operations = [
        migrations.CreateModel(
            name='DailyCountChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(max_length=10)),
                ('rating', models.SmallIntegerField(default=0)),
                ('model_version', models.CharField(default='', max_length=100)),
                ('variant', models.CharField(default='', max_length=100)),
                ('category_id', models.BigIntegerField(default=0)),
                ('area_id', models.BigIntegerField(default=0)),
                ('n', models.BigIntegerField()),
                ('day', models.DateField()),
            ],
            options={
                'abstract': False,
            },
        ),
        migrations.CreateModel(
            name='CountTotal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(max_length=10)),
                ('rating', models.SmallIntegerField(default=0)),
                ('model_version', models.CharField(default='', max_length=100)),
                ('variant', models.CharField(default='', max_length=100)),
                ('category_id', models.BigIntegerField(default=0)),
                ('area_id', models.BigIntegerField(default=0)),
                ('n', models.BigIntegerField()),
            ],
            options={
                'indexes': [models.Index(fields=['category_id'], name='count_total_category'), models.Index(fields=['area_id'], name='count_total_area')],
                'constraints': [models.UniqueConstraint(fields=('kind', 'rating', 'model_version', 'variant', 'category_id', 'area_id'), name='count_total_unique_key')],
            },
        ),
        migrations.CreateModel(
            name='DailyCount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(max_length=10)),
                ('rating', models.SmallIntegerField(default=0)),
                ('model_version', models.CharField(default='', max_length=100)),
                ('variant', models.CharField(default='', max_length=100)),
                ('category_id', models.BigIntegerField(default=0)),
                ('area_id', models.BigIntegerField(default=0)),
                ('n', models.BigIntegerField()),
                ('day', models.DateField()),
            ],
            options={
                'indexes': [models.Index(fields=['category_id', 'day'], name='daily_count_category'), models.Index(fields=['day'], name='daily_count_day')],
                'constraints': [models.UniqueConstraint(fields=('day', 'kind', 'rating', 'model_version', 'variant', 'category_id', 'area_id'), name='daily_count_unique_key')],
            },
        ),
        migrations.RunPython(forward, backward),
    ]
