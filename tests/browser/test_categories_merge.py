"""In a real browser: a reviewer renames a category inline and merges it into another."""

import uuid

import pytest
from django.utils import timezone

from feedback.models import FeedbackItem
from labeling.models import Assignment, AuditEvent, Category
from tests.browser.conftest import log_in
from tests.factories import source_make

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def category_with_items(name: str, count: int, *, by=Assignment.By.MODEL) -> Category:
    source = source_make(f"src-{uuid.uuid4().hex[:8]}")[0]
    category = Category.objects.create(name=name, size=count, keywords=[name.split()[0].lower()])
    for i in range(count):
        item = FeedbackItem.objects.create(
            source=source, external_id=f"{name}-{i}", kind="rating", rating=-1, comment=f"{name} #{i}",
            occurred_at=timezone.now(), receipt_id=uuid.uuid4(), status=FeedbackItem.Status.ASSIGNED,
        )
        Assignment.objects.create(item=item, category=category, assigned_by=by)
    return category


def test_a_reviewer_merges_two_categories_from_the_category_page(page, reviewer_user):
    absorbed = category_with_items("Wrong file edited", 3)
    target = category_with_items("Edits the wrong file", 2)
    placed = category_with_items("Placed by hand", 1, by=Assignment.By.REVIEWER)
    Assignment.objects.filter(category=placed).update(category=absorbed)
    moving = set(Assignment.objects.filter(category=absorbed).values_list("item_id", flat=True))

    log_in(page, "rita", "rita-password-123")
    page.goto("/categories/")
    page.click("text=Wrong file edited")
    page.wait_for_url(f"**/categories/{absorbed.id}/")
    page.select_option("#merge-target", str(target.id))
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#merge-button")

    page.wait_for_url(f"**/categories/{target.id}/")
    assert "Merged “Wrong file edited” into “Edits the wrong file”" in page.locator(".flash").inner_text()
    assert page.locator("input[name=items]").count() == 6
    absorbed.refresh_from_db()
    target.refresh_from_db()
    assert absorbed.status == Category.Status.MERGED and absorbed.merged_into_id == target.id
    assert moving <= set(Assignment.objects.filter(category=target).values_list("item_id", flat=True))
    assert not Assignment.objects.filter(category=absorbed).exists()
    assert Assignment.objects.filter(category=target, assigned_by=Assignment.By.REVIEWER).count() == 1
    assert target.size == 6 and absorbed.size == 0
    assert AuditEvent.objects.filter(action="merged").count() == 2


def test_cancelling_the_merge_question_changes_nothing(page, reviewer_user):
    absorbed = category_with_items("Wrong file edited", 2)
    target = category_with_items("Edits the wrong file", 2)
    log_in(page, "rita", "rita-password-123")
    page.goto(f"/categories/{absorbed.id}/")
    page.select_option("#merge-target", str(target.id))
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("#merge-button")
    page.wait_for_timeout(300)
    assert page.url.endswith(f"/categories/{absorbed.id}/")
    absorbed.refresh_from_db()
    assert absorbed.status == Category.Status.PROPOSED and absorbed.assignments.count() == 2


def test_a_reviewer_renames_inline_and_sees_errors_without_leaving_the_page(page, reviewer_user):
    category = category_with_items("wrong file edit", 2)
    log_in(page, "rita", "rita-password-123")
    page.goto(f"/categories/{category.id}/")

    page.click("text=Edit name")
    page.fill("#category-name", "")
    page.click("#category-header button[type=submit]")
    assert page.locator("#category-header [role=alert]").inner_text() == "A category needs a name."
    assert page.url.endswith(f"/categories/{category.id}/")
    category.refresh_from_db()
    assert category.name == "wrong file edit"

    page.fill("#category-name", "Edits the wrong file")
    page.fill("#category-description", "Changes main.py when asked about utils.py")
    page.click("#category-header button[type=submit]")
    page.locator("#category-header h1", has_text="Edits the wrong file").wait_for()
    assert "renamed" in page.locator("#audit-trail").inner_text()
    category.refresh_from_db()
    assert category.name == "Edits the wrong file" and category.named_by_reviewer


def test_a_reviewer_splits_selected_items_into_a_new_category(page, reviewer_user):
    category = category_with_items("Mixed bag", 4)
    chosen = list(category.assignments.order_by("item_id").values_list("item_id", flat=True)[:2])
    log_in(page, "rita", "rita-password-123")
    page.goto(f"/categories/{category.id}/")
    for item_id in chosen:
        page.check(f"input[name=items][value='{item_id}']")
    assert page.locator("[data-selected-count]").inner_text() == "2"
    page.fill("#split-name", "Claims the tests pass")
    page.click("#split-button")
    page.wait_for_url(lambda url: f"/categories/{category.id}/" not in url)
    new = Category.objects.get(name="Claims the tests pass")
    assert page.url.endswith(f"/categories/{new.id}/")
    assert sorted(new.assignments.values_list("item_id", flat=True)) == chosen
    assert category.assignments.count() == 2
