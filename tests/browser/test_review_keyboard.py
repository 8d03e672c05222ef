"""The item page driven with the keyboard only, in a real Chromium."""

import re
import uuid

import pytest
from django.utils import timezone

from feedback.models import FeedbackItem
from feedback.services import source_create
from labeling.models import Assignment, Category, Label
from tests.browser.conftest import log_in
from tests.factories.review import unit_vector

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HINT = "Ask which file to change; check the tests before saying so."


@pytest.fixture
def queue(transactional_db):
    """A category queue of three items (no vectors), beside two other categories."""
    source, _ = source_create(name="product")
    current = Category.objects.create(name="Edits the wrong file", status="confirmed", centroid=unit_vector(1).tobytes(), size=3)
    # With no item vector the biggest other category is suggestion 2.
    bigger = Category.objects.create(name="Claims tests pass", status="proposed", centroid=unit_vector(2).tobytes(), size=40)
    Category.objects.create(name="Asks too many questions", status="proposed", centroid=unit_vector(3).tobytes(), size=7)
    items = []
    for n in range(3):
        item = FeedbackItem.objects.create(
            source=source, external_id=f"evt-{n}", kind="rating", rating=-1, comment=f"Wrong file, take {n}",
            context={"messages": [{"role": "user", "content": "Rename foo in utils.py"}],
                     "output": "Renamed it in main.py"},
            occurred_at=timezone.now(), receipt_id=uuid.uuid4(), status="assigned",
        )
        Assignment.objects.create(item=item, category=current, confidence=0.7)
        items.append(item)
    return current, bigger, items


def open_queue(page, current):
    page.goto("/review/")
    page.select_option("#queue-select", str(current.id))
    page.click("text=Start reviewing")
    page.wait_for_url(re.compile(rf"/items/\d+/\?queue={current.id}$"))
    return int(re.search(r"/items/(\d+)/", page.url).group(1))


def test_a_reviewer_labels_an_item_with_the_keyboard_and_moves_to_the_next(page, reviewer_user, queue):
    current, bigger, items = queue
    log_in(page, "rita", "rita-password-123")
    first_id = open_queue(page, current)
    assert first_id == items[0].id
    assert page.locator("#queue-progress").get_attribute("value") == "0"

    page.keyboard.press("2")
    assert page.locator("#id_category").input_value() == str(bigger.id)
    assert page.locator(f'.chip[data-pick="{bigger.id}"]').get_attribute("aria-pressed") == "true"
    page.keyboard.press("h")
    assert page.evaluate("document.activeElement.id") == "id_hint"
    # Letters that are shortcuts elsewhere (c, n, s, j, k) are plain text here.
    page.keyboard.type(HINT)
    page.keyboard.press("Escape")
    assert page.evaluate("document.activeElement.id") != "id_hint"
    page.keyboard.press("c")

    page.wait_for_url(lambda url: f"/items/{first_id}/" not in url and f"queue={current.id}" in url)
    assert int(re.search(r"/items/(\d+)/", page.url).group(1)) == items[1].id
    assert page.locator(".flash").first.inner_text() == f"Label saved for #{first_id}."
    # The item went to another category and left this queue; it was still work done here, so it counts.
    assert page.locator(".queue-progress").inner_text().strip() == "1 / 3 reviewed"

    label = Label.objects.get(item_id=first_id, reviewer=reviewer_user)
    assert (label.verdict, label.category_id, label.hint) == ("failure", bigger.id, HINT)
    assignment = Assignment.objects.get(item_id=first_id)
    assert (assignment.category_id, assignment.assigned_by, assignment.reviewer_id) == (
        bigger.id, "reviewer", reviewer_user.id
    )


def test_n_saves_not_a_failure_s_skips_and_k_goes_back(page, reviewer_user, queue):
    current, _, items = queue
    log_in(page, "rita", "rita-password-123")
    open_queue(page, current)
    page.keyboard.press("n")
    page.wait_for_url(re.compile(rf"/items/{items[1].id}/\?queue="))
    assert Label.objects.get(item=items[0]).verdict == "not_failure"

    page.keyboard.press("s")
    page.wait_for_url(re.compile(rf"/items/{items[2].id}/\?queue="))
    assert not Label.objects.filter(item=items[1]).exists()

    page.keyboard.press("k")
    page.wait_for_url(re.compile(rf"/items/{items[0].id}/\?queue="))


def test_question_mark_shows_the_shortcuts_and_escape_closes_them(page, reviewer_user, queue):
    current, _, _ = queue
    log_in(page, "rita", "rita-password-123")
    open_queue(page, current)
    overlay = page.locator("#shortcuts")
    assert not overlay.is_visible()
    page.keyboard.press("?")
    assert overlay.is_visible()
    assert "pick a suggested category" in overlay.inner_text()
    page.keyboard.press("Escape")
    assert not overlay.is_visible()


def test_c_without_a_category_asks_for_one_and_a_picked_list_entry_stays_picked(page, reviewer_user, queue):
    current, bigger, items = queue
    Assignment.objects.filter(item__in=items).delete()  # nothing preselected, as in a blind second review
    log_in(page, "rita", "rita-password-123")
    page.goto(f"/items/{items[0].id}/")

    page.keyboard.press("c")
    assert page.evaluate("document.activeElement.id") == "id_category"
    assert "category first" in page.evaluate("document.getElementById('id_category').validationMessage")
    assert not Label.objects.exists()

    # Chosen from the list, the category keeps focus no more: c now saves it,
    # and no letter typed afterwards can re-pick another entry by its name.
    page.select_option("#id_category", str(bigger.id))
    assert page.evaluate("document.activeElement.id") != "id_category"
    page.keyboard.press("c")
    page.wait_for_url(lambda url: "/items/" in url)
    page.wait_for_function("() => document.querySelector('.flash') !== null")
    label = Label.objects.get(item=items[0], reviewer=reviewer_user)
    assert (label.verdict, label.category_id) == ("failure", bigger.id)
