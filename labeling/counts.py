"""Pre-aggregated item counts for the reviewer pages.

Database triggers (migration labeling 0009) append a -1 and a +1 to
`DailyCountChange` whenever an item or its assignment enters another key
(day, kind, rating, model version, variant, category, area): every write
path is covered, bulk updates and cascading deletes included, and since
writers only append, concurrent ones never wait on a shared counter row.
`counts_compact` (the sweep, every minute) folds the changes into
`DailyCount` (per day) and `CountTotal` (of all time, which lists read);
readers add the changes not folded yet, so a count is exact the moment its
write commits. `counts_rebuild` (`manage.py counts_rebuild`) recounts from
the items; `counts_recount` is that recount, which the tests compare.
"""

from __future__ import annotations

from collections import defaultdict

from django.db import connection, transaction
from django.db.models import Max, Min, OuterRef, Q, Subquery, Sum, Value

from labeling.models import CountTotal, DailyCount, DailyCountChange

KEY = CountTotal.KEY
DAILY_KEY = ("day", *KEY)
# Serialises compaction and rebuild on PostgreSQL (any constant, the same everywhere).
_LOCK = 0x66656564


def _tables(daily: bool):
    return (DailyCount if daily else CountTotal), DailyCountChange


def counted(group_by: tuple[str, ...], condition: Q | None = None, *, daily: bool = False) -> dict[tuple, int]:
    """Items per group (values of the `group_by` key fields) where `condition` holds, in one query.

    `daily`: from the per-day counts, for a `day` in the grouping or the
    condition; otherwise from the totals, which have far fewer rows.
    Groups of 0 are left out.
    """
    def grouped(model):
        rows = model.objects.filter(condition or Q()).order_by()
        # No grouping: one row over everything (an empty values() would list every field).
        rows = rows.values(*group_by) if group_by else rows.annotate(whole=Value(1)).values("whole")
        return rows.annotate(total=Sum("n"))

    counts, changes = _tables(daily)
    totals: dict[tuple, int] = defaultdict(int)
    for row in grouped(counts).union(grouped(changes), all=True):
        totals[tuple(row[field] for field in group_by)] += row["total"] or 0
    return {group: n for group, n in totals.items() if n}


def counted_total(condition: Q | None = None, *, daily: bool = False) -> int:
    return sum(counted((), condition, daily=daily).values())


def spans(condition: Q | None = None) -> dict[tuple[str, str], tuple]:
    """(model version, variant) -> (first day, last day) of the items where `condition` holds; one query.

    The pairs come from the totals (a few hundred rows), and each pair's first
    and last day off the `daily_count_span` index: grouping every daily count
    took 90 ms at a million items. The changes not folded yet that add items
    are included (a deletion not folded yet may leave its day in the span
    for a minute).
    """
    condition = condition or Q()
    days = DailyCount.objects.filter(
        condition, model_version=OuterRef("model_version"), variant=OuterRef("variant")
    ).order_by().values("day")
    folded = (
        CountTotal.objects.filter(condition).order_by().values("model_version", "variant")
        .annotate(total=Sum("n"))  # one row per pair, so each pair's days are looked up once
        .annotate(first=Subquery(days.order_by("day")[:1]), last=Subquery(days.order_by("-day")[:1]))
        .values("model_version", "variant", "first", "last")
    )
    pending = (
        DailyCountChange.objects.filter(condition, n__gt=0)
        .order_by().values("model_version", "variant").annotate(first=Min("day"), last=Max("day"))
    )
    found: dict[tuple[str, str], tuple] = {}
    for row in folded.union(pending, all=True):
        if row["first"] is None:  # a total whose daily rows went (a rebuild in between)
            continue
        key = (row["model_version"], row["variant"])
        first, last = found.get(key, (row["first"], row["last"]))
        found[key] = (min(first, row["first"]), max(last, row["last"]))
    return found


def rated_spans() -> dict[tuple[str, str], tuple]:
    """(model version, variant) -> (first day, last day) with thumbs-up or -down ratings; one query."""
    return spans(Q(kind="rating", rating__in=(1, -1)))


def counts_compact() -> int:
    """Fold the appended changes into the daily and total counts; returns how many daily keys they changed."""
    daily_key, key = ", ".join(DAILY_KEY), ", ".join(KEY)
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [_LOCK])
            if not cursor.fetchone()[0]:
                return 0  # another compaction or a rebuild is at it
            # One statement, one snapshot: a change that commits meanwhile is neither deleted nor counted.
            cursor.execute(
                f"WITH moved AS (DELETE FROM labeling_dailycountchange RETURNING {daily_key}, n), "
                f"totals AS (INSERT INTO labeling_counttotal AS c ({key}, n) "
                f"  SELECT {key}, SUM(n) FROM moved GROUP BY {key} ORDER BY {key} "
                f"  ON CONFLICT ({key}) DO UPDATE SET n = c.n + EXCLUDED.n) "
                f"INSERT INTO labeling_dailycount AS c ({daily_key}, n) "
                f"SELECT {daily_key}, SUM(n) FROM moved GROUP BY {daily_key} ORDER BY {daily_key} "
                f"ON CONFLICT ({daily_key}) DO UPDATE SET n = c.n + EXCLUDED.n"
            )
            folded = cursor.rowcount
        else:
            # SQLite has one writer at a time: from the first write on, nothing else commits.
            cursor.execute("SELECT COALESCE(MAX(id), 0) FROM labeling_dailycountchange")
            last = cursor.fetchone()[0]
            for table, columns in (("labeling_counttotal", key), ("labeling_dailycount", daily_key)):
                # "HAVING true": SQLite's grammar needs a clause before ON CONFLICT in an INSERT ... SELECT.
                cursor.execute(
                    f"INSERT INTO {table} ({columns}, n) SELECT {columns}, SUM(n) FROM labeling_dailycountchange "
                    f"WHERE id <= %s GROUP BY {columns} HAVING true "
                    f"ON CONFLICT ({columns}) DO UPDATE SET n = n + excluded.n",
                    [last],
                )
            folded = cursor.rowcount  # of the daily counts, the last statement
            cursor.execute("DELETE FROM labeling_dailycountchange WHERE id <= %s", [last])
        cursor.execute("DELETE FROM labeling_dailycount WHERE n = 0")
        cursor.execute("DELETE FROM labeling_counttotal WHERE n = 0")
    if connection.vendor == "postgresql" and not connection.in_atomic_block:
        with connection.cursor() as cursor:
            # Every read scans the change rows, and the folded ones stay there, dead, until vacuumed.
            cursor.execute("VACUUM labeling_dailycountchange")
            if folded >= 1000:
                # Fresh statistics after a large fold: on a table the planner believes tiny it sorts
                # 30,000 rows to group them (the comparison: 180 ms instead of 90 at 100,000 items).
                cursor.execute("ANALYZE labeling_dailycount, labeling_counttotal")
    return folded


def counts_recount(*, daily: bool = True) -> dict[tuple, int]:
    """Every key's count from the items and assignments themselves (what the counts must equal)."""
    with connection.cursor() as cursor:
        cursor.execute(_recount_sql(daily))
        rows = cursor.fetchall()
    if daily:
        return {(str(row[0]), *row[1:-1]): row[-1] for row in rows}
    return {tuple(row[:-1]): row[-1] for row in rows}


def counts_stored(*, daily: bool = True) -> dict[tuple, int]:
    """Every key's count as the pages read it: the folded counts plus the changes not folded in yet."""
    if daily:
        return {(str(key[0]), *key[1:]): n for key, n in counted(DAILY_KEY, daily=True).items()}
    return counted(KEY)


def counts_rebuild() -> int:
    """Replace every count by a full recount, with writers held off meanwhile; returns the number of daily keys."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK])
            # Writers of items and assignments wait (their triggers would append to what is being replaced).
            cursor.execute("LOCK TABLE feedback_feedbackitem, labeling_assignment IN SHARE MODE")
        for table in ("labeling_dailycountchange", "labeling_dailycount", "labeling_counttotal"):
            cursor.execute(f"DELETE FROM {table}")
        cursor.execute(f"INSERT INTO labeling_counttotal ({', '.join(KEY)}, n) {_recount_sql(False)}")
        cursor.execute(f"INSERT INTO labeling_dailycount ({', '.join(DAILY_KEY)}, n) {_recount_sql(True)}")
        return cursor.rowcount


def _recount_sql(daily: bool) -> str:
    day = "(i.occurred_at AT TIME ZONE 'UTC')::date" if connection.vendor == "postgresql" else "date(i.occurred_at)"
    columns = ("i.kind", "COALESCE(i.rating, 0)", "i.model_version", "i.variant",
               "COALESCE(a.category_id, 0)", "COALESCE(a.area_id, 0)")
    if daily:
        columns = (day, *columns)
    groups = ", ".join(str(position) for position in range(1, len(columns) + 1))
    return (
        f"SELECT {', '.join(columns)}, COUNT(*) FROM feedback_feedbackitem i "
        f"LEFT JOIN labeling_assignment a ON a.item_id = i.id GROUP BY {groups}"
    )
