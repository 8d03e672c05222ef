"""The pre-aggregated daily counts (labeling.counts) equal a full recount after every kind of write.

The triggers of migration labeling 0009 are the thing under test: each step
below writes items or assignments the way the app does (services, bulk
updates, cascading deletes) and then compares what the pages read with a
recount from the items themselves, before and after the changes are folded.
"""

import threading
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from feedback.models import FeedbackItem
from labeling import counts
from labeling.categories import selectors as category_selectors
from labeling.overview import selectors as overview_selectors
from labeling.categories.services import category_merge
from labeling.models import Area, Assignment, Category, CountTotal, DailyCount, DailyCountChange
from tests.factories import source_make, user_make
from tests.servers import needs_postgresql


def _items(source, count, *, prefix="c", **fields):
    now = timezone.now()
    return FeedbackItem.objects.bulk_create(
        FeedbackItem(
            source=source, external_id=f"{prefix}{i}", kind="rating", rating=-1 if i % 3 else 1,
            model_version=("2.1", "2.2")[i % 2], occurred_at=now - timedelta(days=i % 20), receipt_id=uuid.uuid4(),
            **fields,
        )
        for i in range(count)
    )


def _exact(what: str) -> None:
    for daily in (True, False):
        stored, recount = counts.counts_stored(daily=daily), counts.counts_recount(daily=daily)
        assert stored == recount, f"after {what}: {len(set(stored.items()) ^ set(recount.items()))} keys differ"


@pytest.mark.django_db
def test_every_write_path_keeps_the_counts_equal_to_a_recount():
    source, _ = source_make()
    admin = user_make("ada", "admin")
    area = Area.objects.create(name="Tests and verification")
    first, second, third = (Category.objects.create(name=name, area=area) for name in ("one", "two", "three"))
    items = _items(source, 60)
    FeedbackItem.objects.create(
        source=source, external_id="single", kind="report", occurred_at=timezone.now(), receipt_id=uuid.uuid4()
    )
    _exact("inserting items")
    Assignment.objects.bulk_create(Assignment(item=item, category=first, area=area) for item in items[:30])
    for item in items[30:40]:
        Assignment.objects.create(item=item, area=area)  # unsorted in the area
    _exact("assigning")
    Assignment.objects.filter(item__in=items[:10]).update(category=second)
    assignment = Assignment.objects.get(item=items[10])
    assignment.category = third
    assignment.save()
    _exact("moving items")
    assert counts.counts_compact() > 0
    assert not DailyCountChange.objects.exists()
    _exact("folding the changes")
    category_merge(category_id=second.id, target_id=first.id, user=admin)
    _exact("a merge")
    FeedbackItem.objects.filter(id__in=[item.id for item in items[:5]]).update(rating=1, model_version="2.3")
    FeedbackItem.objects.filter(id=items[6].id).update(occurred_at=timezone.now() - timedelta(days=400))
    item = FeedbackItem.objects.get(id=items[7].id)
    item.comment = "an edit no count depends on"
    item.save()
    _exact("editing items")
    Assignment.objects.filter(item=items[12]).delete()
    FeedbackItem.objects.filter(id__in=[item.id for item in items[13:16]]).delete()  # their assignments go first
    third.delete()  # its assignments keep their items, with no category
    _exact("deletes")
    counts.counts_compact()
    _exact("folding again")
    assert not DailyCount.objects.filter(n=0).exists() and not CountTotal.objects.filter(n=0).exists()
    # What the pages read agrees with counting the rows.
    downs = FeedbackItem.objects.filter(rating=-1)
    assert category_selectors.thumbs_down_total() == downs.count()
    assert category_selectors.thumbs_down_total(model_version="2.1") == downs.filter(model_version="2.1").count()
    listed = {c.id: c for c in category_selectors.category_list(filters=category_selectors.CategoryListFilters())}
    assert listed[first.id].n_items == Assignment.objects.filter(category=first).count() == 25
    assert listed[first.id].thumbs_down == Assignment.objects.filter(category=first, item__rating=-1).count()
    summary = {row["model_version"]: row for row in overview_selectors.version_summary()}
    assert summary["2.3"]["ratings"] == 5 and summary[""]["reports"] == 1


@pytest.mark.django_db
def test_the_rebuild_command_repairs_counts_that_drifted_and_the_check_says_so(capsys):
    source, _ = source_make()
    _items(source, 25)
    call_command("counts_rebuild", "--check")
    assert "all" in capsys.readouterr().out
    DailyCountChange.objects.create(day=timezone.now().date(), kind="rating", rating=-1, n=7)  # a count gone wrong
    with pytest.raises(Exception, match="differ from a recount"):
        call_command("counts_rebuild", "--check")
    call_command("counts_rebuild")
    assert "from 25 items" in capsys.readouterr().out
    _exact("a rebuild")
    call_command("counts_rebuild", "--check")


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_and_compactions_keep_the_counts_exact():
    needs_postgresql()
    source, _ = source_make()
    categories = [Category.objects.create(name=f"c{i}") for i in range(4)]
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for batch in range(5):
                made = _items(source, 40, prefix=f"w{worker}-{batch}-")
                Assignment.objects.bulk_create(
                    Assignment(item=item, category=categories[(worker + n) % 4]) for n, item in enumerate(made)
                )
                Assignment.objects.filter(item__in=made[:10]).update(category=categories[worker])
                FeedbackItem.objects.filter(id__in=[item.id for item in made[10:15]]).update(rating=1)
                FeedbackItem.objects.filter(id__in=[item.id for item in made[15:18]]).delete()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            connection.close()  # this thread's own connection

    def compact(stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                counts.counts_compact()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()  # this thread's own connection

    stop = threading.Event()
    compactors = [threading.Thread(target=compact, args=(stop,)) for _ in range(2)]
    writers = [threading.Thread(target=write, args=(worker,)) for worker in range(4)]
    for thread in compactors + writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    for thread in compactors:
        thread.join()
    assert not errors, errors
    assert connection.vendor == "postgresql"
    _exact("concurrent writes")
    counts.counts_compact()
    _exact("the last fold")
    assert counts.counted_total() == FeedbackItem.objects.count() == 4 * 5 * (40 - 3)


def _summed(rows: list[dict]) -> dict[tuple, int]:
    """Comparison rows summed over their days, by everything else they are keyed by."""
    found: dict[tuple, int] = {}
    for row in rows:
        key = tuple(value for name, value in sorted(row.items()) if name not in ("day", "n"))
        found[key] = found.get(key, 0) + row["n"]
    return found


@pytest.mark.django_db
@pytest.mark.parametrize("folded", [False, True], ids=["changes not folded", "folded"])
def test_what_the_pages_read_from_the_counts_equals_counting_the_items(folded):
    from django.db.models import Count, Max, Min, Q

    from labeling.areas.selectors import unsorted_total
    from labeling.compare.comparison import daily_counts
    from labeling.compare.params import Side
    from labeling.search.selectors import SearchFilters, items_search, items_search_count, search_choices

    source, _ = source_make()
    area = Area.objects.create(name="Tests and verification")
    category = Category.objects.create(name="claims tests pass", area=area)
    items = _items(source, 60)
    FeedbackItem.objects.filter(id__in=[item.id for item in items[:8]]).update(variant="B")
    FeedbackItem.objects.filter(id__in=[item.id for item in items[8:12]]).update(status="received")
    FeedbackItem.objects.filter(id__in=[item.id for item in items[12:14]]).update(status="failed")
    FeedbackItem.objects.filter(id__in=[item.id for item in items[14:30]]).update(status="assigned")
    FeedbackItem.objects.create(
        source=source, external_id="report", kind="report", model_version="2.1", occurred_at=timezone.now(),
        receipt_id=uuid.uuid4(),
    )
    Assignment.objects.bulk_create(Assignment(item=item, category=category, area=area) for item in items[:20])
    Assignment.objects.bulk_create(Assignment(item=item, area=area) for item in items[20:25])  # the area's unsorted
    Assignment.objects.bulk_create(Assignment(item=item) for item in items[25:28])  # nowhere at all
    if folded:
        counts.counts_compact()
    assert DailyCountChange.objects.exists() != folded

    by_status = dict(FeedbackItem.objects.values_list("status").annotate(n=Count("id")).order_by())
    health = overview_selectors.pipeline_health()
    assert (health["waiting"], health["failed"], health["embedded"], health["assigned"], health["total"]) == (
        by_status.get("received", 0), by_status.get("failed", 0), by_status.get("embedded", 0),
        by_status.get("assigned", 0), FeedbackItem.objects.count(),
    )
    nowhere = FeedbackItem.objects.failures().filter(
        Q(assignment__isnull=True) | Q(assignment__area=None, assignment__category=None)
    )
    assert unsorted_total() == nowhere.count() > 0
    choices = search_choices()
    assert choices["model_versions"] == ["2.1", "2.2"] and choices["variants"] == ["B"]
    for filters in (
        SearchFilters(), SearchFilters(rating="down"), SearchFilters(rating="up", model_version="2.2"),
        SearchFilters(kind="report"), SearchFilters(variant="B", rating="down"), SearchFilters(model_version="9.9"),
    ):
        assert items_search_count(filters=filters) == items_search(filters=filters).count(), filters
    for filters in (SearchFilters(q="tests"), SearchFilters(category=str(category.id)), SearchFilters(status="failed")):
        assert items_search_count(filters=filters) is None, filters  # the items are counted instead

    breakdown = category_selectors.category_item_breakdown(category=category)
    in_category = FeedbackItem.objects.filter(assignment__category=category)
    assert {row["model_version"]: (row["thumbs_down"], row["thumbs_up"], row["total"]) for row in breakdown.version_counts} == {
        version: (
            in_category.filter(model_version=version, rating=-1).count(),
            in_category.filter(model_version=version, rating=1).count(),
            in_category.filter(model_version=version).count(),
        )
        for version in ("2.1", "2.2")
    }
    assert breakdown.facets == {"model_versions": ["2.1", "2.2"], "variants": ["B"]}

    days = {
        (row["model_version"], row["variant"]): (row["first"].date(), row["last"].date())
        for row in FeedbackItem.objects.filter(kind="rating").values("model_version", "variant")
        .annotate(first=Min("occurred_at"), last=Max("occurred_at")).order_by()
    }
    assert counts.rated_spans() == days

    # A comparison's figures: the all-time totals when the window holds every item, the
    # daily counts otherwise; both equal the daily rows summed over the window.
    sides = (Side("2.1"), Side("2.2", "B"))
    today = timezone.now().date()
    for date_from, date_to in ((today - timedelta(days=30), today), (today - timedelta(days=5), today)):
        summed = _summed(daily_counts(sides=sides, date_from=date_from, date_to=date_to, by_day=True))
        assert _summed(daily_counts(sides=sides, date_from=date_from, date_to=date_to, by_day=False)) == summed
    everything = _summed(daily_counts(sides=sides, date_from=today - timedelta(days=30), date_to=today, by_day=False))
    recent = _summed(daily_counts(sides=sides, date_from=today - timedelta(days=5), date_to=today, by_day=False))
    assert sum(everything.values()) == FeedbackItem.objects.filter(
        Q(model_version="2.1") | Q(model_version="2.2", variant="B")
    ).count() > sum(recent.values())
