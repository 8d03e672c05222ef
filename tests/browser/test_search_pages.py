"""Paging through search results in a real Chromium: Older to the end, Newer and Newest back, filters kept."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from feedback.models import FeedbackItem
from tests.browser.conftest import log_in
from tests.factories import source_make

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def items(transactional_db):
    source, _ = source_make()
    now = timezone.now()
    for i in range(130):
        FeedbackItem.objects.create(
            source=source, external_id=f"p{i}", kind="rating", rating=-1 if i % 2 else 1, comment=f"signal {i}",
            embed_text=f"signal {i}", occurred_at=now - timedelta(minutes=i), receipt_id=uuid.uuid4(),
        )
    return list(FeedbackItem.objects.order_by("-occurred_at", "-id").values_list("id", flat=True))


def listed(page) -> list[int]:
    return [int(box.get_attribute("value")) for box in page.locator("tbody input[name=items]").all()]


def test_older_newer_and_newest_walk_the_results_and_keep_the_filters(items, page, reviewer_user):
    log_in(page, "rita", "rita-password-123")
    page.goto("/search/")
    seen = listed(page)
    while page.locator("a[rel=next]").count():
        page.click("a[rel=next]")
        seen += listed(page)
    assert seen == items
    assert "30 of 130" in page.locator("nav.pager").inner_text()
    page.click("a[rel=prev]")
    assert listed(page) == items[50:100]
    page.click("a[rel=first]")
    assert listed(page) == items[:50] and not page.locator("a[rel=prev]").count()

    page.goto("/search/?rating=down")
    page.click("a[rel=next]")
    down = set(FeedbackItem.objects.filter(rating=-1).values_list("id", flat=True))
    assert listed(page) and set(listed(page)) <= down
    assert "rating=down" in page.url and "15 of 65" in page.locator("nav.pager").inner_text()
