"""Cluster runs over the demo corpus (embedded by the real model): stable names, sizes and
assignments across re-runs, areas over categories, an unsorted bucket that stays small,
and names that say what went wrong rather than where."""

import io
import re

import pytest
from django.core.management import call_command
from django.utils.html import escape

from feedback import pipeline
from feedback.models import FeedbackItem
from labeling.areas import services as area_services
from labeling.categories import services as category_services
from labeling.clustering.services import clusterable_failures, items_assign
from labeling.models import Area, Assignment, AuditEvent, Category
from tests.factories.clustering import run_clustering
from tests.factories import user_make

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

FIRST, MORE = 1500, 150  # demo signals; the second load adds 10%

IDENTIFIER = re.compile(r"[\w-]+\.[a-z]{1,5}\b|\w+_\w+|\b[a-z]+[A-Z]\w*|/|\d")


def load_and_embed(count: int) -> list[int]:
    """The first `count` demo signals, embedded and sorted in as the worker does; returns the new ids."""
    call_command("demo_load", count=count, stdout=io.StringIO())
    waiting = list(
        FeedbackItem.objects.filter(status=FeedbackItem.Status.RECEIVED).order_by("id").values_list("id", flat=True)
    )
    items_assign(item_ids=pipeline.items_embed(item_ids=waiting))
    return waiting


def snapshot() -> dict:
    return {
        "assignments": dict(Assignment.objects.values_list("item_id", "category_id")),
        "areas": dict(Assignment.objects.values_list("item_id", "area_id")),
        "names": dict(Category.objects.values_list("id", "name")),
        "sizes": dict(Category.objects.values_list("id", "size")),
        "area_names": dict(Area.objects.values_list("id", "name")),
    }


def test_a_rerun_over_the_same_data_changes_no_name_size_area_or_assignment():
    load_and_embed(FIRST)
    run_clustering()
    before = snapshot()
    run_clustering()
    assert snapshot() == before
    assert len(before["names"]) >= 5


def test_ten_percent_new_data_keeps_at_least_95_percent_of_earlier_items_in_their_category():
    load_and_embed(FIRST)
    run_clustering()
    earlier = {i: c for i, c in Assignment.objects.exclude(category=None).values_list("item_id", "category_id")}
    load_and_embed(FIRST + MORE)
    run = run_clustering()
    now = dict(Assignment.objects.filter(item_id__in=earlier).values_list("item_id", "category_id"))
    kept = sum(1 for item_id, category_id in earlier.items() if now.get(item_id) == category_id)
    assert kept / len(earlier) >= 0.95, (kept, len(earlier), run.counts)


def test_every_category_has_an_area_and_every_unsorted_item_waits_in_one():
    load_and_embed(FIRST)
    run = run_clustering()
    assert run.counts["areas"] >= 3
    assert not Category.objects.filter(size__gt=0, area=None).exists()
    signals = clusterable_failures().count()
    unsorted = Assignment.objects.filter(category=None)
    # The unsorted bucket is visible (each item in an area) and bounded.
    assert unsorted.count() <= 0.10 * signals
    assert not unsorted.filter(area=None).exists()
    for assignment in Assignment.objects.exclude(category=None).select_related("category"):
        assert assignment.area_id == assignment.category.area_id


def test_no_category_or_area_name_holds_a_file_name_or_identifier_and_siblings_differ():
    load_and_embed(FIRST)
    run_clustering()
    names = list(Category.objects.values_list("name", flat=True))
    area_names = list(Area.objects.values_list("name", flat=True))
    assert not [name for name in names + area_names if IDENTIFIER.search(name)]
    assert len(set(names)) == len(names) and len(set(area_names)) == len(area_names)


def test_reviewer_decisions_on_areas_and_categories_survive_a_rerun():
    load_and_embed(FIRST)
    run_clustering()
    rita = user_make("rita", "reviewer")
    categories = list(Category.objects.filter(size__gt=0).order_by("-size")[:3])
    areas = list(Area.objects.order_by("id"))
    renamed = category_services.category_rename(
        category_id=categories[0].id, user=rita, name="Claims success it did not reach", description=""
    )
    reviewed_items = list(Assignment.objects.filter(category=renamed).values_list("item_id", flat=True)[:5])
    Assignment.objects.filter(item_id__in=reviewed_items).update(assigned_by=Assignment.By.REVIEWER)
    other_area = next(a for a in areas if a.id != categories[1].area_id)
    area_services.category_move_to_area(category_id=categories[1].id, area_id=other_area.id, user=rita)
    area_services.area_rename(area_id=areas[0].id, user=rita, name="Tests and verification")

    run_clustering()

    renamed.refresh_from_db()
    assert renamed.name == "Claims success it did not reach"
    assert set(Assignment.objects.filter(item_id__in=reviewed_items).values_list("category_id", flat=True)) == {renamed.id}
    categories[1].refresh_from_db()
    assert categories[1].area_id == other_area.id
    assert Area.objects.get(id=areas[0].id).name == "Tests and verification"


def test_a_runs_page_lists_what_it_created_renamed_resized_and_retired(client):
    from tests.factories import client_for

    load_and_embed(FIRST)
    first = run_clustering()
    emptied = Category.objects.filter(size__gt=0).order_by("size", "id").first()
    # Archived by a reviewer: the next run leaves it empty.
    Category.objects.filter(id=emptied.id).update(status=Category.Status.ARCHIVED)
    load_and_embed(FIRST + MORE)
    second = run_clustering()

    reviewer = client_for(user_make("rex", "reviewer"))
    page = reviewer.get(f"/runs/{second.id}/").content.decode()
    # New items were sorted in as they were embedded; the run resizes what it moved items between.
    resized = AuditEvent.objects.filter(action=f"resized by cluster run #{second.id}").select_related("category")
    assert resized.exists() and 'id="run-resized"' in page
    for event in resized:
        change = event.details["items"]
        assert f"{change['before']} → {change['after']} items" in page and escape(event.category.name) in page
    assert 'id="run-retired"' in page and escape(emptied.name) in page
    first_page = reviewer.get(f"/runs/{first.id}/").content.decode()
    assert 'id="run-new-categories"' in first_page and "No category was renamed." in first_page
