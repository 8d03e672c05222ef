"""In a real browser: a bulk move of a shift-click selection and its undo; "select all N matching"."""

import uuid

import pytest
from playwright.sync_api import expect
from django.utils import timezone

from feedback.models import FeedbackItem
from labeling.models import Assignment, BulkAction, Category
from tests.browser.conftest import log_in
from tests.factories import source_make

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def category_with_items(name: str, count: int, *, comment: str = "") -> tuple[Category, list[FeedbackItem]]:
    source = source_make(f"src-{uuid.uuid4().hex[:8]}")[0]
    category = Category.objects.create(name=name, size=count, status=Category.Status.CONFIRMED)
    items = []
    for i in range(count):
        item = FeedbackItem.objects.create(
            source=source, external_id=f"{name}-{i}", kind="rating", rating=-1,
            comment=f"{comment or name} #{i}", embed_text=f"{comment or name} {i}",
            occurred_at=timezone.now() - timezone.timedelta(minutes=i), receipt_id=uuid.uuid4(),
            status=FeedbackItem.Status.ASSIGNED,
        )
        Assignment.objects.create(item=item, category=category, confidence=0.8)
        items.append(item)
    return category, items


def test_a_shift_click_selection_is_moved_and_the_move_undone(page, reviewer_user):
    old, items = category_with_items("Edits the wrong file", 6)
    new, _ = category_with_items("Ignores the instructions", 1)

    log_in(page, "rita", "rita-password-123")
    page.goto(f"/categories/{old.id}/")
    boxes = page.locator("#category-items input[name=items]")
    assert boxes.count() == 6
    # Newest first: the first four rows are items 0..3. Click the first, shift-click the fourth.
    boxes.nth(0).click()
    boxes.nth(3).click(modifiers=["Shift"])
    expect(page.locator("[data-bulk-count]")).to_have_text("4")  # updated after the change event
    page.select_option("#bulk-action", "move")
    page.select_option("#bulk-category", str(new.id))
    page.click("#bulk-apply")

    page.wait_for_selector(".flash")
    assert "Done: moved 4 items to “Ignores the instructions”" in page.locator("body").inner_text()
    moved = set(Assignment.objects.filter(category=new).values_list("item_id", flat=True))
    assert {item.id for item in items[:4]} <= moved
    assert Assignment.objects.filter(category=old).count() == 2
    assert page.locator("#category-items input[name=items]").count() == 2

    action = BulkAction.objects.get()
    page.click(f"#bulk-undo-{action.id}")
    page.wait_for_selector("text=Undone: moved 4 items")
    assert Assignment.objects.filter(category=old).count() == 6
    assert set(Assignment.objects.filter(category=old).values_list("assigned_by", flat=True)) == {"model"}
    assert page.locator("#category-items input[name=items]").count() == 6
    old.refresh_from_db()
    new.refresh_from_db()
    assert (old.size, new.size) == (6, 1)


def test_select_all_matching_takes_every_page_of_the_search(page, reviewer_user):
    old, items = category_with_items("Claims the suite passed", 60, comment="claimed the suite passed")
    other, others = category_with_items("Too slow", 3, comment="took forever")
    target, _ = category_with_items("Reports false success", 1, comment="said green")

    log_in(page, "rita", "rita-password-123")
    page.goto("/search/?q=suite")
    assert page.locator("#bulk-form input[name=items]").count() == 50
    page.check("#bulk-all-matching")
    expect(page.locator("[data-bulk-count]")).to_have_text("60")  # updated after the change event
    page.select_option("#bulk-action", "move")
    page.select_option("#bulk-category", str(target.id))
    page.click("#bulk-apply")

    page.wait_for_selector("text=Done: moved 60 items")
    assert Assignment.objects.filter(category=target).count() == 61
    assert Assignment.objects.filter(category=other).count() == 3
    # Clearing one row after "all matching" falls back to the ticked rows.
    page.goto("/search/?q=forever")
    page.check("#bulk-all-matching")
    page.locator("#bulk-form input[name=items]").first.uncheck()
    expect(page.locator("[data-bulk-count]")).to_have_text("2")  # updated after the change event
    assert not page.locator("#bulk-all-matching").is_checked()
