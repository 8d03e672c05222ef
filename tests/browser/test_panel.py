"""The label panel in a real Chromium: it fits the window, its new shortcuts, the reported severity, undo."""

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

SIZES = [(1280, 720), (1440, 900)]

# Every control of the panel a reviewer may need, by CSS selector.
FIELDS = [
    'input[name="verdict"][value="failure"]',
    'input[name="verdict"][value="spam"]',
    "#id_hint",
    "#corrected-details > summary",
    ".suggestions .chip >> nth=0",
    ".suggestions .chip >> nth=-1",
    "#id_category",
    "#id_severity",
    'input[name="split"][value="eval"]',
    'input[name="tags"][value="special-cased a test"]',
    'input[name="tags"][value="verbose"]',
    "#id_other_tags",
    "#label-save",
]


@pytest.fixture
def queue(transactional_db):
    """A queue of three long reports (one with a reported severity) among ten categories."""
    source, _ = source_create(name="dogfood")
    current = Category.objects.create(name="Claims the suite passed", status="confirmed", centroid=unit_vector(0).tobytes(), size=3)
    for n in range(1, 10):
        Category.objects.create(name=f"Another failure {n}", status="proposed", centroid=unit_vector(n).tobytes(), size=20 - n)
    long_run = [{"role": "user" if n % 2 else "assistant", "content": f"Step {n}: " + "ran the tests " * 40}
                for n in range(12)]
    items = []
    for n, severity in enumerate(["critical", "", ""]):
        item = FeedbackItem.objects.create(
            source=source, external_id=f"rep-{n}", kind="report", title=f"It said the tests passed ({n})",
            comment="They did not. " * 30, severity=severity, context={"messages": long_run},
            occurred_at=timezone.now(), receipt_id=uuid.uuid4(), status="assigned",
        )
        Assignment.objects.create(item=item, category=current, confidence=0.6)
        items.append(item)
    return current, items


def open_queue(page, current) -> int:
    page.goto(f"/review/next?category={current.id}")
    page.wait_for_url(re.compile(rf"/items/\d+/\?queue={current.id}$"))
    return int(re.search(r"/items/(\d+)/", page.url).group(1))


def uncovered(page, selector: str) -> bool:
    """Is the control, scrolled into view, the thing a click at its centre lands on (or inside its label)?"""
    locator = page.locator(selector)
    locator.scroll_into_view_if_needed()
    return locator.evaluate(
        """(el) => {
            const box = el.getBoundingClientRect();
            const x = box.left + box.width / 2, y = box.top + box.height / 2;
            if (x < 0 || y < 0 || x > window.innerWidth || y > window.innerHeight) return false;
            const hit = document.elementFromPoint(x, y);
            return hit === el || el.contains(hit) || (el.labels && [...el.labels].some((l) => l.contains(hit)));
        }"""
    )


@pytest.mark.parametrize("width,height", SIZES)
def test_every_field_of_the_panel_is_reachable_and_uncovered(chromium, live_server, reviewer_user, queue, width, height):
    current, _ = queue
    context = chromium.new_context(base_url=live_server.url, viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        log_in(page, "rita", "rita-password-123")
        open_queue(page, current)
        # On arrival, before any scrolling: the verdict, the hint right under it, the corrected
        # response's opener and Save are all inside the window.
        for selector in ('input[name="verdict"][value="failure"]', "#id_hint", "#corrected-details > summary",
                         "#label-save"):
            box = page.locator(selector).bounding_box()
            assert box and box["y"] >= 0 and box["y"] + box["height"] <= height, (selector, box)
        for selector in FIELDS:
            assert uncovered(page, selector), f"{selector} is covered or out of reach at {width}x{height}"
            page.locator(selector).click(trial=True, timeout=3_000)
        # Save stays in the window after the panel's fields were scrolled to the end...
        save = page.locator("#label-save").bounding_box()
        assert save["y"] + save["height"] <= height
        # ...and after the page itself was scrolled down the long conversation.
        page.mouse.wheel(0, 3000)
        page.wait_for_timeout(200)
        assert uncovered(page, "#label-save") and uncovered(page, "#id_hint")
    finally:
        context.close()


def test_the_reported_severity_is_filled_in(page, reviewer_user, queue):
    current, items = queue
    log_in(page, "rita", "rita-password-123")
    page.goto(f"/items/{items[0].id}/")
    assert page.locator("#id_severity").input_value() == "critical"
    assert page.locator("#reported-severity").inner_text() == "Reported: critical"
    page.goto(f"/items/{items[1].id}/")
    assert page.locator("#id_severity").input_value() == ""


def test_severity_tags_and_split_have_shortcuts_listed_in_the_help(page, reviewer_user, queue):
    current, items = queue
    log_in(page, "rita", "rita-password-123")
    first = open_queue(page, current)
    page.keyboard.press("?")
    help_text = page.locator("#shortcuts").inner_text()
    assert "severity: low, medium, high, critical" in help_text
    assert "tick or untick a tag" in help_text and "intended split: train / eval / none" in help_text
    page.keyboard.press("Escape")

    page.keyboard.press("Shift+Digit2")
    assert page.locator("#id_severity").input_value() == "medium"
    page.keyboard.press("Shift+Digit0")
    assert page.locator("#id_severity").input_value() == ""
    page.keyboard.press("Shift+Digit3")

    # t, then numbers tick tags (not categories) until Escape.
    picked_before = page.locator("#id_category").input_value()
    page.keyboard.press("t")
    assert page.locator("#tags-field").get_attribute("class").count("tag-mode") == 1
    assert page.locator(".tag-key").first.is_visible()
    page.keyboard.press("2")
    page.keyboard.press("6")
    page.keyboard.press("7")
    page.keyboard.press("7")  # twice: unticked again
    page.keyboard.press("Escape")
    assert "tag-mode" not in page.locator("#tags-field").get_attribute("class")
    assert page.locator("#id_category").input_value() == picked_before
    page.keyboard.press("1")  # a category again
    page.keyboard.press("e")

    page.keyboard.press("c")
    page.wait_for_url(lambda url: f"/items/{first}/" not in url)
    label = Label.objects.get(item_id=first, reviewer=reviewer_user)
    assert (label.severity, label.split, label.verdict) == ("high", "eval", "failure")
    assert label.tags == ["claimed success falsely", "wrong file"]


def test_undo_after_a_save_puts_the_item_back_and_the_offer_goes_after_a_few_seconds(page, reviewer_user, queue):
    current, items = queue
    log_in(page, "rita", "rita-password-123")
    first = open_queue(page, current)
    page.keyboard.press("n")
    page.wait_for_url(lambda url: f"/items/{first}/" not in url)
    bar = page.locator("#undo-bar")
    assert bar.is_visible() and f"#{first}" in bar.inner_text()
    assert Label.objects.filter(item_id=first).exists()

    page.click("#undo-label")
    page.wait_for_url(re.compile(rf"/items/{first}/\?queue={current.id}$"))
    assert page.locator(".flash").first.inner_text() == f"Undone: #{first} is back as it was before the save."
    assert not Label.objects.filter(item_id=first).exists()
    assert page.locator(".queue-progress").inner_text().strip() == "0 / 3 reviewed"

    # Saved again, the offer shows and then disappears by itself.
    page.keyboard.press("n")
    page.wait_for_url(lambda url: f"/items/{first}/" not in url)
    assert page.locator("#undo-bar").is_visible()
    page.wait_for_selector("#undo-bar", state="detached", timeout=15_000)
    assert Label.objects.get(item_id=first).verdict == "not_failure"
