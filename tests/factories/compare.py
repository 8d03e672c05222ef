"""Factories for the comparison tests: items on known days and the planted data set (see tests/labeling/compare/test_compare.py)."""

import itertools
import uuid
from datetime import UTC, date, datetime, time, timedelta

from feedback.models import FeedbackItem, Source
from labeling.compare.params import CompareParams, compare_params_parse
from labeling.compare.rows import CategoryRow
from labeling.models import Area, Assignment, Category
from tests.factories import source_make

START, END = date(2026, 11, 2), date(2026, 11, 15)


_ids = itertools.count()


def add_items(
    source: Source, *, version: str, variant: str = "A", n: int, rating: int | None = -1,
    category: Category | None = None, start: date = START, days: int = 14, kind: str = "rating",
) -> list[FeedbackItem]:
    """n items spread evenly over `days` days from `start`, at noon UTC, assigned to `category`."""
    items = FeedbackItem.objects.bulk_create(
        FeedbackItem(
            source=source, external_id=f"e{next(_ids)}", kind=kind, rating=rating, model_version=version,
            variant=variant, receipt_id=uuid.uuid4(), status=FeedbackItem.Status.ASSIGNED,
            occurred_at=datetime.combine(start + timedelta(days=i % days), time(12), tzinfo=UTC),
        )
        for i in range(n)
    )
    if category is not None:
        Assignment.objects.bulk_create(Assignment(item=item, category=category) for item in items)
    return items


def planted_data() -> dict[str, Category]:
    source, _ = source_make(f"planted-{uuid.uuid4().hex[:6]}")
    names = ("Regressed", "Unchanged", "Borderline", "Rare", "Brand new", "Gone")
    cats = {name: Category.objects.create(name=name, status=Category.Status.CONFIRMED) for name in names}
    archived = Category.objects.create(name="Archived", status=Category.Status.ARCHIVED)
    downs = {
        "1.0": {"Regressed": 10, "Unchanged": 20, "Borderline": 20, "Rare": 1, "Brand new": 0, "Gone": 3},
        "1.1": {"Regressed": 40, "Unchanged": 20, "Borderline": 35, "Rare": 8, "Brand new": 12, "Gone": 0},
    }
    uncategorised = {"1.0": 6, "1.1": 5}
    for version, per_category in downs.items():
        for name, count in per_category.items():
            add_items(source, version=version, n=count, category=cats[name])
        add_items(source, version=version, n=uncategorised[version])
        total_down = sum(per_category.values()) + uncategorised[version]
        add_items(source, version=version, n=200 - total_down, rating=1)
    add_items(source, version="1.1", n=1, rating=None, kind="report", category=cats["Regressed"], variant="")
    # None of these may count: before the window, another version, an archived category (also before the window).
    add_items(source, version="1.1", n=30, category=cats["Regressed"], start=START - timedelta(days=20), days=5)
    add_items(source, version="0.9", n=30, category=cats["Regressed"])
    add_items(source, version="1.1", n=4, category=archived, start=START - timedelta(days=3), days=1)
    return cats


def params(a="1.0", b="1.1", **kwargs) -> CompareParams:
    return compare_params_parse(a=a, b=b, date_from=str(START), date_to=str(END), **kwargs)


def by_name(comparison) -> dict[str, CategoryRow]:
    return {row.name: row for row in comparison.categories}


def add(
    source: Source, *, version: str, n: int, rating: int | None = -1, category: Category | None = None,
    area: Area | None = None, kind: str = "rating",
) -> None:
    """n items of `version` spread over the two weeks, assigned to `category` and `area` when given."""
    items = FeedbackItem.objects.bulk_create(
        FeedbackItem(
            source=source, external_id=f"area-{next(_ids)}", kind=kind, rating=rating, model_version=version,
            variant="A", receipt_id=uuid.uuid4(), status=FeedbackItem.Status.ASSIGNED,
            occurred_at=datetime.combine(START + timedelta(days=i % 14), time(12), tzinfo=UTC),
        )
        for i in range(n)
    )
    if category is not None or area is not None:
        Assignment.objects.bulk_create(Assignment(item=item, category=category, area=area) for item in items)


def area_data() -> dict:
    source, _ = source_make(f"areas-{uuid.uuid4().hex[:6]}")
    tests = Area.objects.create(name="Tests", status=Area.Status.CONFIRMED)
    steady = Area.objects.create(name="Steady")
    made = {"Tests": tests, "Steady": steady}
    layout = {
        "Skipped": (tests, 2, 6), "Stubbed": (tests, 2, 6), "Hardcoded": (tests, 2, 6),
        "Even one": (steady, 15, 15), "Even two": (steady, 15, 15), "Loose": (None, 3, 3),
    }
    for name, (area, down_a, down_b) in layout.items():
        category = Category.objects.create(name=name, status=Category.Status.CONFIRMED, area=area)
        made[name] = category
        add(source, version="1.0", n=down_a, category=category, area=area)
        add(source, version="1.1", n=down_b, category=category, area=area)
    add(source, version="1.0", n=1, area=tests)  # the unsorted bucket
    add(source, version="1.1", n=3, area=tests)
    add(source, version="1.1", n=2, rating=None, kind="report", area=tests)  # signals, not ratings
    for version in ("1.0", "1.1"):
        add(source, version=version, n=5)  # thumbs-down with no assignment at all
        down = FeedbackItem.objects.filter(model_version=version, rating=-1).count()
        add(source, version=version, n=400 - down, rating=1)
    made["source"] = source
    return made
