"""In a real browser: the filed report links to its item, no page asks for a missing favicon, the
navigation fits a phone, and share bars are drawn to scale."""

import re
import uuid

import pytest
from django.utils import timezone

from feedback.models import FeedbackItem
from feedback.services import source_create
from labeling.models import Assignment, Category
from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def watch_404s(page) -> list[str]:
    missing: list[str] = []
    page.on("response", lambda response: missing.append(response.url) if response.status == 404 else None)
    return missing


def test_a_filed_report_links_to_its_item_and_no_page_misses_its_favicon(page, reviewer_user):
    missing = watch_404s(page)
    log_in(page, "rita", "rita-password-123")
    page.goto("/reports/new")
    page.fill("#id_title", "Claimed the suite passed")
    page.fill("#id_what_happened", "It said all tests passed; three failed.")
    page.click("main form button[type=submit]")
    page.wait_for_selector("#report-filed")
    link = page.locator("#report-filed a")
    item = FeedbackItem.objects.get()
    assert page.locator("#report-filed").inner_text() == f"Report #{item.id} filed. Thank you."
    link.click()
    page.wait_for_url(re.compile(rf"/items/{item.id}/$"))
    assert "Claimed the suite passed" in page.locator("h1").inner_text()
    # The login page was the first one loaded, above.
    for path in ("/", "/review/", "/categories/", "/compare/"):
        page.goto(path)
    # The icon the pages name loads, and the address browsers try on their own answers too.
    icon = page.evaluate("() => document.querySelector('link[rel=icon]').href")
    assert page.request.get(icon).status == 200
    assert page.request.get("/favicon.ico").status == 200
    assert missing == []


def test_the_navigation_wraps_on_a_narrow_screen(chromium, live_server, reviewer_user):
    context = chromium.new_context(base_url=live_server.url, viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        log_in(page, "rita", "rita-password-123")
        page.goto("/review/")
        fits = page.evaluate(
            """() => {
                const width = document.documentElement.clientWidth;
                const bar = document.querySelector('.topbar');
                const links = [...document.querySelectorAll('.topbar nav a, .topbar .logout button')];
                return {
                    scroll: bar.scrollWidth <= bar.clientWidth && bar.getBoundingClientRect().right <= width,
                    links: links.length,
                    inside: links.every((a) => { const b = a.getBoundingClientRect();
                        return b.left >= 0 && b.right <= width && b.width > 0; }),
                };
            }"""
        )
        assert fits == {"scroll": True, "links": fits["links"], "inside": True} and fits["links"] >= 9
        page.locator(".topbar nav a", has_text="Compare").click()
        page.wait_for_url(re.compile(r"/compare/$"))
    finally:
        context.close()


def test_the_largest_category_share_fills_its_bar(page, reviewer_user):
    source, _ = source_create(name="product")
    for name, n in (("Big", 4), ("Small", 2), (None, 94)):
        category = Category.objects.create(name=name, status="confirmed") if name else None
        items = FeedbackItem.objects.bulk_create(
            FeedbackItem(source=source, external_id=uuid.uuid4().hex, kind="rating", rating=-1,
                         occurred_at=timezone.now(), receipt_id=uuid.uuid4(), status="assigned")
            for _ in range(n)
        )
        Assignment.objects.bulk_create(Assignment(item=item, category=category) for item in items)
    log_in(page, "rita", "rita-password-123")
    page.goto("/categories/")
    widths = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#category-table tr')]
            .filter((tr) => tr.querySelector('meter'))
            .map((tr) => { const m = tr.querySelector('meter');
                return [tr.querySelector('td a').textContent, m.value / m.max]; }))"""
    )
    assert widths == {"Big": 1.0, "Small": 0.5}
