"""The shared filters are QuerySet methods: open areas and categories, thumbs up and down, failures."""

import pytest

from feedback.models import FeedbackItem
from labeling.models import Area, Category
from tests.factories import source_make
from tests.factories.review import item_make

pytestmark = pytest.mark.django_db


def test_open_keeps_proposed_and_confirmed_categories_and_areas_only():
    statuses = [status for status, _ in Category.Status.choices]
    categories = {status: Category.objects.create(name=status, status=status) for status in statuses}
    areas = {status: Area.objects.create(name=status, status=status) for status, _ in Area.Status.choices}
    assert set(Category.objects.open()) == {categories["proposed"], categories["confirmed"]}
    assert set(Area.objects.open()) == {areas["proposed"], areas["confirmed"]}
    assert [c.is_open for c in categories.values()] == [c.status in ("proposed", "confirmed") for c in categories.values()]
    # Through a relation too: an area's open categories.
    for category in categories.values():
        category.area = areas["proposed"]
        category.save(update_fields=["area"])
    assert set(areas["proposed"].categories.open()) == {categories["proposed"], categories["confirmed"]}


def test_ratings_and_failures():
    source, _ = source_make()
    down = item_make(source, rating=-1)
    up = item_make(source, rating=1)
    unrated_report = item_make(source, rating=None, kind=FeedbackItem.Kind.REPORT)
    unrated_rating = item_make(source, rating=None)
    items = FeedbackItem.objects
    assert list(items.thumbs_down()) == [down]
    assert list(items.thumbs_up()) == [up]
    assert set(items.failures()) == {down, unrated_report}
    assert list(items.rated("down")) == [down]
    assert list(items.rated("up")) == [up]
    assert set(items.rated("none")) == {unrated_report, unrated_rating}
    assert items.rated("").count() == items.rated("anything else").count() == 4
