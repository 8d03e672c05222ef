"""Search pages by keyset (labeling.search.keyset): every item once, in order, whatever arrives meanwhile; bad links refused."""

import re
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from feedback.models import FeedbackItem
from labeling.search.keyset import cursor_of, cursor_parse
from tests.factories import source_make, user_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def reviewer(client):
    client.force_login(user_make("rev", "reviewer"))


@pytest.fixture
def source():
    return source_make()[0]


def _items(source, count, *, at=None, prefix="k"):
    """Items one second apart, newest first by index; every third shares its neighbour's moment (ties by id)."""
    at = at or timezone.now()
    made = []
    for i in range(count):
        moment = at - timedelta(seconds=i - i % 3)
        made.append(
            FeedbackItem.objects.create(
                source=source, external_id=f"{prefix}{i}", kind="rating", rating=-1, comment=f"signal {i}",
                embed_text=f"signal {i}", occurred_at=moment, receipt_id=uuid.uuid4(),
            )
        )
    return made


def _link(response, rel):
    found = re.search(rf'href="\?([^"]*)" rel="{rel}"', response.content.decode())
    return found and found.group(1).replace("&amp;", "&")


def _newest_first():
    return list(FeedbackItem.objects.order_by("-occurred_at", "-id").values_list("id", flat=True))


def test_following_older_links_lists_every_item_once_in_order_and_newer_links_walk_back(client, reviewer, source):
    _items(source, 173)
    seen, pages, response = [], [], client.get("/search/")
    while True:
        assert response.status_code == 200
        pages.append(response)
        seen += [item.id for item in response.context["page"]]
        older = _link(response, "next")
        if not older:
            break
        response = client.get(f"/search/?{older}")
    assert seen == _newest_first()
    assert [len(page.context["page"]) for page in pages] == [50, 50, 50, 23]
    assert all(page.context["count"] == 173 for page in pages)
    assert _link(pages[0], "prev") is None and _link(pages[0], "first") is None
    # Back from the last page, page by page, to the same pages.
    response = pages[-1]
    for expected in reversed(pages[:-1]):
        response = client.get(f"/search/?{_link(response, 'prev')}")
        assert [i.id for i in response.context["page"]] == [i.id for i in expected.context["page"]]
    assert _link(response, "prev") is None


def test_items_arriving_while_a_reviewer_pages_on_neither_repeat_nor_skip_an_item(client, reviewer, source):
    _items(source, 120)
    before = _newest_first()
    first = client.get("/search/")
    _items(source, 30, at=timezone.now() + timedelta(hours=1), prefix="new")  # 30 newer items arrive
    second = client.get(f"/search/?{_link(first, 'next')}")
    third = client.get(f"/search/?{_link(second, 'next')}")
    listed = [i.id for page in (first, second, third) for i in page.context["page"]]
    assert listed == before
    assert second.context["count"] == 150


def test_the_filters_hold_on_every_page(client, reviewer, source):
    _items(source, 150)
    FeedbackItem.objects.filter(id__in=_newest_first()[::2]).update(model_version="2.2")
    wanted = list(FeedbackItem.objects.filter(model_version="2.2").order_by("-occurred_at", "-id").values_list("id", flat=True))
    first = client.get("/search/", {"model_version": "2.2"})
    second = client.get(f"/search/?{_link(first, 'next')}")
    assert "model_version=2.2" in _link(first, "next")
    assert [i.id for p in (first, second) for i in p.context["page"]] == wanted
    assert _link(second, "next") is None


def test_a_numbered_page_link_still_opens_its_page_and_past_the_end_opens_the_last(client, reviewer, source):
    _items(source, 120)
    order = _newest_first()
    assert [i.id for i in client.get("/search/", {"page": 2}).context["page"]] == order[50:100]
    assert [i.id for i in client.get("/search/", {"page": 99}).context["page"]] == order[100:]
    for odd in ("0", "-1", "x", "١٢", "9" * 40):  # zero, negative, a word, Arabic-Indic digits, huge
        response = client.get("/search/", {"page": odd})
        assert response.status_code == 200 and [i.id for i in response.context["page"]] == order[:50], odd


@pytest.mark.parametrize(
    "cursor",
    ["garbage", "20261302T000000.000000Z_5", "20261202T000000.000000Z_0", "20261202T000000.000000Z_-4",
     "20261202T000000.000000Z_" + "9" * 30, "２０２６1202T000000.000000Z_5", "x" * 61, "20261202T000000.000000Z _5"],
)
@pytest.mark.parametrize("direction", ["after", "before"])
def test_a_bad_page_link_is_refused_with_a_clear_message_and_nothing_changes(client, reviewer, source, cursor, direction):
    _items(source, 5)
    response = client.get("/search/", {direction: cursor})
    assert response.status_code == 422
    assert b"This page link is not valid; start again from the newest page." in response.content or (
        b"Ensure this value has at most 60 characters" in response.content
    )
    assert response.context["page"] is None
    assert FeedbackItem.objects.count() == 5
    assert client.get("/search/").status_code == 200


def test_a_link_to_items_since_deleted_opens_an_empty_page_with_a_way_back(client, reviewer, source):
    _items(source, 60)
    first = client.get("/search/")
    shown = [i.id for i in first.context["page"]]
    FeedbackItem.objects.exclude(id__in=shown[:-1]).delete()  # the cursor item and all older
    response = client.get(f"/search/?{_link(first, 'next')}")
    assert response.status_code == 200 and list(response.context["page"]) == []
    assert _link(response, "first") is not None


def test_cursors_round_trip_and_keep_microseconds(source):
    (item,) = _items(source, 1)
    moment, item_id = cursor_parse(cursor_of(item))
    assert item_id == item.id and moment == item.occurred_at
