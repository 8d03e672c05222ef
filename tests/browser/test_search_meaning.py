"""Search by meaning in a real Chromium: "more like this" from an item, then a text, with filters."""

import re
import uuid

import pytest
from django.utils import timezone

from feedback import pipeline, services
from feedback.models import FeedbackItem
from tests.browser.conftest import log_in
from tests.factories.search import OTHER_COMPLAINTS as OTHERS
from tests.factories.search import SUITE_COMPLAINTS as SUITE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def items(transactional_db):
    """Complaints embedded by the real pipeline step, one of them a thumbs-up."""
    source, _ = services.source_create(name="product")
    made = {}
    for n, text in enumerate(SUITE + OTHERS):
        made[text] = FeedbackItem.objects.create(
            source=source, external_id=f"evt-{n}", kind="rating", rating=1 if text == SUITE[2] else -1,
            comment=text, occurred_at=timezone.now(), receipt_id=uuid.uuid4(),
        )
    pipeline.items_embed(item_ids=[item.id for item in made.values()])
    return made


# Tests take `items` before `page`: with the model run while a browser page
# was already open, that page's first navigation timed out here.


def result_rows(page) -> list[tuple[int, int]]:
    """(item id, similarity %) of each listed row, top to bottom."""
    rows = []
    for row in page.locator("section.card table tbody tr").all():
        link = row.locator("td.snippet a")
        if not link.count():
            continue
        item_id = int(re.search(r"/items/(\d+)/", link.get_attribute("href")).group(1))
        rows.append((item_id, int(row.locator("td.similarity").inner_text().strip().rstrip("%"))))
    return rows


def test_more_like_this_from_an_item_lists_its_neighbours_on_the_search_page(items, page, reviewer_user):
    start = items[SUITE[0]]
    log_in(page, "rita", "rita-password-123")
    page.goto(f"/items/{start.id}/")

    page.locator("#similar a.more-like-this").click()
    page.wait_for_url(re.compile(rf"/search/\?like={start.id}$"))

    assert page.locator("h2.like-source").inner_text().startswith(f"More like #{start.id}")
    assert page.locator("input[name=mode][value=meaning]").is_checked()
    rows = result_rows(page)
    listed = [item_id for item_id, _ in rows]
    assert start.id not in listed
    assert set(listed[:2]) == {items[SUITE[1]].id, items[SUITE[2]].id}
    assert len(listed) == len(items) - 1
    percents = [percent for _, percent in rows]
    assert percents == sorted(percents, reverse=True) and percents[0] > percents[-1]

    # A filter keeps the "more like": the thumbs-up neighbour drops out.
    page.select_option("select[name=rating]", "down")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r"rating=down"))
    listed = [item_id for item_id, _ in result_rows(page)]
    assert listed[0] == items[SUITE[1]].id and items[SUITE[2]].id not in listed and start.id not in listed
    assert f"like={start.id}" in page.url


def test_a_text_searched_by_meaning_finds_what_words_miss(items, page, reviewer_user):
    log_in(page, "rita", "rita-password-123")
    page.goto("/search/")
    page.fill("input[name=q]", "claimed the suite passed")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r"q=claimed"))
    assert page.locator("section.card table tbody tr td.snippet a").count() == 1  # words: one matches all

    page.check("input[name=mode][value=meaning]")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r"mode=meaning"))
    listed = [item_id for item_id, _ in result_rows(page)]
    assert set(listed[:3]) == {items[text].id for text in SUITE}

    page.fill("input[name=q]", "   ")
    page.click("form.filters button[type=submit]")
    page.wait_for_load_state()
    assert "Type what went wrong to search by meaning" in page.locator('[role="alert"]').inner_text()
