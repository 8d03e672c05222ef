"""The small things a first hour meets: the filed report links to its item, a favicon, share bars to scale."""

import re
import uuid

import pytest
from django.test import Client
from django.utils import timezone

from feedback.models import FeedbackItem
from labeling.models import Area, Assignment, Category
from tests.factories import client_for, source_make, user_make

pytestmark = pytest.mark.django_db

FORM = {
    "title": "Claimed the suite passed",
    "what_happened": "It said all tests passed; three failed.",
    "expected": "Report the failures.",
    "severity": "high",
    "model_version": "coder-2.1",
    "transcript": "",
}


def test_a_reviewer_who_files_a_report_gets_a_link_to_its_item(db):
    client = client_for(user_make("rita", "reviewer"))
    response = client.post("/reports/new", FORM, follow=True)
    assert response.status_code == 200
    item = FeedbackItem.objects.get()
    assert f'Report <a href="/items/{item.id}/">#{item.id}</a> filed. Thank you.' in response.content.decode()
    assert client.get(f"/items/{item.id}/").status_code == 200
    # Said once: the next visit to the form is a fresh one.
    assert "filed. Thank you." not in client.get("/reports/new").content.decode()


def test_staff_who_cannot_open_items_get_the_number_without_a_link(db):
    client = client_for(user_make("dana"))
    body = client.post("/reports/new", FORM, follow=True).content.decode()
    item = FeedbackItem.objects.get()
    assert f"Report #{item.id} filed. Thank you." in body and f'href="/items/{item.id}/"' not in body


def test_a_refused_report_says_nothing_was_filed(db):
    client = client_for(user_make("rita", "reviewer"))
    response = client.post("/reports/new", FORM | {"title": "", "what_happened": ""})
    assert response.status_code == 422
    assert "filed. Thank you." not in response.content.decode() and not FeedbackItem.objects.exists()


def test_the_favicon_is_served_and_every_page_names_it(db):
    client = client_for(user_make("rita", "reviewer"))
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response.url == "/static/favicon.svg"
    icon = client.get(response.url)
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    assert b"<svg" in b"".join(icon.streaming_content)
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in client.get("/").content.decode()
    # Also for visitors who are not logged in (the login page is the first one anybody sees).
    assert Client().get("/favicon.ico").status_code == 302


def meters(html: str) -> list[tuple[float, float]]:
    """(value, max) of each share bar."""
    found = re.findall(r'<meter min="0" max="([0-9.]+)" value="([0-9.]+)"', html)
    return [(float(value), float(maximum)) for maximum, value in found]


def downs(source, category, n, area=None):
    items = FeedbackItem.objects.bulk_create(
        FeedbackItem(source=source, external_id=uuid.uuid4().hex, kind="rating", rating=-1, model_version="2.1",
                     occurred_at=timezone.now(), receipt_id=uuid.uuid4(), status="assigned")
        for _ in range(n)
    )
    Assignment.objects.bulk_create(Assignment(item=item, category=category, area=area) for item in items)


def test_category_share_bars_are_drawn_against_the_largest_share(db):
    source, _ = source_make()
    big = Category.objects.create(name="Big", status="confirmed")
    small = Category.objects.create(name="Small", status="confirmed")
    downs(source, big, 4)
    downs(source, small, 2)
    downs(source, None, 94)  # 100 thumbs-down in all: the shares are 4% and 2%
    bars = meters(client_for(user_make("rita", "reviewer")).get("/categories/").content.decode())
    assert sorted(bars) == [(2.0, 4.0), (4.0, 4.0)]


def test_area_share_bars_are_drawn_against_the_largest_share(db):
    source, _ = source_make()
    tests, docs = Area.objects.create(name="Tests"), Area.objects.create(name="Docs")
    downs(source, Category.objects.create(name="A", status="confirmed", area=tests), 5, area=tests)
    downs(source, Category.objects.create(name="B", status="confirmed", area=docs), 1, area=docs)
    downs(source, None, 94)
    bars = meters(client_for(user_make("rita", "reviewer")).get("/areas/").content.decode())
    assert sorted(bars) == [(1.0, 5.0), (5.0, 5.0)]


def test_without_any_thumbs_down_there_are_no_bars(db):
    Category.objects.create(name="Empty", status="confirmed")
    body = client_for(user_make("rita", "reviewer")).get("/categories/?status=all").content.decode()
    assert meters(body) == []
