"""Review queues with an order, progress that keeps the items a label moved away, counts per reviewer."""

from datetime import timedelta

import pytest
from django.utils import timezone

from labeling.models import Area, Assignment, Category, DoubleReview, Label
from labeling.review.queues import (
    ORDERS,
    queue_open_items,
    queue_parse,
    queue_progress,
    reviewer_counts,
)
from tests.factories import client_for
from tests.factories.review import category_make, item_make, user_make

pytestmark = pytest.mark.django_db


def handed(client, key: str, order: str = "") -> int:
    response = client.get(f"/review/next?category={key}" + (f"&order={order}" if order else ""))
    assert response.status_code == 302, response
    return int(response.url.split("/items/")[1].split("/")[0])


def order_of(queue_key: str, order: str, reviewer) -> list[int]:
    queue = queue_parse(key=queue_key, order=order)
    return list(queue_open_items(queue=queue, reviewer=reviewer).values_list("id", flat=True))


@pytest.fixture
def category():
    return category_make("Claims the suite passed", status="confirmed")


@pytest.fixture
def items(source, category):
    """Four items received a minute apart, with a model confidence and a severity each."""
    now = timezone.now()
    made = []
    for n, (confidence, severity) in enumerate([(0.9, "low"), (0.4, ""), (0.7, "critical"), (0.55, "high")]):
        item = item_make(source, category=category, confidence=confidence, severity=severity)
        item.received_at = now - timedelta(minutes=10 - n)
        item.save(update_fields=["received_at"])
        made.append(item)
    return made


def test_each_order_hands_out_the_items_as_it_says(items, category, reviewer):
    ids = [item.id for item in items]
    key = str(category.id)
    assert order_of(key, "", reviewer) == ids  # oldest first, as before
    assert order_of(key, "newest", reviewer) == ids[::-1]
    assert order_of(key, "confidence", reviewer) == [ids[1], ids[3], ids[2], ids[0]]
    assert order_of(key, "severity", reviewer) == [ids[2], ids[3], ids[0], ids[1]]


def test_an_unknown_order_is_the_default_one(items, category, reviewer):
    assert order_of(str(category.id), "'; drop table", reviewer) == [item.id for item in items]
    assert queue_parse(key=str(category.id), order="x" * 10_000).order == "oldest"


def test_the_category_order_groups_the_unassigned_queue_by_area_then_category(source, reviewer):
    tests_area = Area.objects.create(name="Tests and verification")
    docs_area = Area.objects.create(name="Docs")
    loose = item_make(source)  # no assignment at all: last
    in_tests = item_make(source)
    Assignment.objects.create(item=in_tests, area=tests_area)
    in_docs = item_make(source)
    Assignment.objects.create(item=in_docs, area=docs_area)
    assert order_of("unassigned", "category", reviewer) == [in_docs.id, in_tests.id, loose.id]


def test_confidence_order_puts_items_without_a_model_score_last(source, category, reviewer):
    by_reviewer = item_make(source, category=category)
    Assignment.objects.filter(item=by_reviewer).update(confidence=None)
    scored = item_make(source, category=category, confidence=0.99)
    assert order_of(str(category.id), "confidence", reviewer) == [scored.id, by_reviewer.id]


def test_the_double_review_queue_keeps_items_reviewed_once_first_in_any_order(items, reviewer, second_reviewer):
    for item in items:
        DoubleReview.objects.create(item=item)
    Label.objects.create(item=items[0], reviewer=second_reviewer, verdict="failure")
    ordered = order_of("double", "severity", reviewer)
    assert ordered == [items[0].id, items[2].id, items[3].id, items[1].id]


def test_the_order_follows_the_reviewer_from_item_to_item(items, category, reviewer):
    client = client_for(reviewer)
    key = str(category.id)
    response = client.get(f"/review/next?category={key}&order=severity")
    assert response.url == f"/items/{items[2].id}/?queue={key}&order=severity"
    page = client.get(response.url).content.decode()
    assert f'data-next-url="/review/next?category={key}&amp;order=severity"' in page
    assert '<input type="hidden" name="order" value="severity">' in page
    assert 'id="queue-order">most severe first<' in page
    assert f'action="/items/{items[2].id}/?queue={key}&amp;order=severity"' in page
    saved = client.post(response.url, {"verdict": "not_failure", "split": "none"})
    assert saved.url == f"/review/next?category={key}&order=severity"
    assert handed(client, key, "severity") == items[3].id
    skipped = client.post("/review/skip", {"item": items[3].id, "category": key, "order": "severity"})
    assert skipped.url == f"/review/next?category={key}&order=severity"
    assert handed(client, key, "severity") == items[0].id


def test_the_queue_page_offers_the_orders(items, category, reviewer):
    page = client_for(reviewer).get(f"/review/?category={category.id}&order=confidence").content.decode()
    assert '<select name="order" id="order-select">' in page
    assert '<option value="confidence" selected>Lowest model confidence first</option>' in page
    assert f'href="/review/next?category={category.id}&amp;order=confidence"' in page


# --- Progress ------------------------------------------------------------------------------


def test_an_item_a_label_moved_to_another_category_still_counts_as_done_in_its_queue(items, category, reviewer):
    elsewhere = category_make("Edits the wrong file", status="confirmed")
    client = client_for(reviewer)
    key = str(category.id)
    for n in range(3):
        item_id = handed(client, key)
        # The second one goes to another category: it leaves this queue, and was still work done here.
        fields = {"verdict": "failure", "split": "none", "category": elsewhere.id if n == 1 else category.id}
        assert client.post(f"/items/{item_id}/?queue={key}", fields).status_code == 302
    queue = queue_parse(key=key)
    progress = queue_progress(queue=queue)
    assert (progress.done, progress.total) == (3, 4)
    page = client.get(f"/items/{items[3].id}/?queue={key}").content.decode()
    assert '<progress id="queue-progress" max="4" value="3">' in page and "3 / 4 reviewed" in page
    overview = client.get("/review/").content.decode()
    assert f'<option value="{key}">Claims the suite passed (3 / 4)</option>' in overview
    # The other category counts it as its own, labelled: it is there now.
    assert f'<option value="{elsewhere.id}">Edits the wrong file (1 / 1)</option>' in overview


def test_the_unassigned_queue_counts_the_items_it_gave_a_category(source, reviewer):
    target = category_make("Asks too many questions", status="confirmed")
    items = [item_make(source) for _ in range(3)]
    client = client_for(reviewer)
    item_id = handed(client, "unassigned")
    client.post(f"/items/{item_id}/?queue=unassigned", {"verdict": "failure", "split": "none", "category": target.id})
    progress = queue_progress(queue=queue_parse(key="unassigned"))
    assert (progress.done, progress.total) == (1, 3)
    assert not Assignment.objects.filter(item_id=item_id, category__isnull=True).exists()
    assert items


def test_labels_given_outside_a_queue_count_only_where_the_item_is(items, category, reviewer):
    elsewhere = category_make("Edits the wrong file", status="confirmed")
    client_for(reviewer).post(f"/items/{items[0].id}/", {"verdict": "failure", "split": "none", "category": elsewhere.id})
    progress = queue_progress(queue=queue_parse(key=str(category.id)))
    assert (progress.done, progress.total) == (0, 3)


# --- Per-reviewer counts ---------------------------------------------------------------------


def test_the_queue_page_counts_each_reviewers_labels_today_and_this_week(items, reviewer, second_reviewer):
    now = timezone.localtime()
    monday = now - timedelta(days=now.weekday())
    Label.objects.create(item=items[0], reviewer=reviewer, verdict="failure", created_at=now)
    Label.objects.create(item=items[1], reviewer=reviewer, verdict="failure", created_at=now)
    Label.objects.create(item=items[2], reviewer=second_reviewer, verdict="spam", created_at=now)
    earlier_this_week = monday.replace(hour=0, minute=1) if now.weekday() else now
    Label.objects.create(item=items[3], reviewer=second_reviewer, verdict="spam", created_at=earlier_this_week)
    last_week = monday - timedelta(days=1)
    Label.objects.create(item=items[3], reviewer=user_make("old", "reviewer"), verdict="spam", created_at=last_week)
    counts = reviewer_counts(now=now)
    expected_sam_today = 2 if earlier_this_week == now else 1
    assert [(row.username, row.today, row.week) for row in counts] == sorted(
        [("rita", 2, 2), ("sam", expected_sam_today, 2)], key=lambda row: (-row[2], -row[1], row[0])
    )
    page = client_for(reviewer).get("/review/").content.decode()
    table = page[page.index('id="reviewer-counts"'):]
    assert '<tr class="selected"><td>rita</td><td class="num">2</td><td class="num">2</td></tr>' in table
    assert "<td>old</td>" not in table


def test_editing_an_old_label_is_not_counted_as_new_work(items, reviewer):
    long_ago = timezone.now() - timedelta(days=30)
    Label.objects.create(item=items[0], reviewer=reviewer, verdict="failure", created_at=long_ago)
    client_for(reviewer).post(f"/items/{items[0].id}/", {"verdict": "spam", "split": "none"})
    assert Label.objects.get(item=items[0]).verdict == "spam"
    assert reviewer_counts() == []


def test_the_category_assignment_is_untouched_by_ordering(items, category, reviewer):
    before = list(Assignment.objects.order_by("id").values_list("item_id", "category_id", "confidence"))
    for order in ORDERS:
        order_of(str(category.id), order, reviewer)
    assert list(Assignment.objects.order_by("id").values_list("item_id", "category_id", "confidence")) == before
    assert Category.objects.get(id=category.id).status == "confirmed"
