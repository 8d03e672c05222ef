"""In a real browser: the dataset builder's category search narrows the grouped picker, and the preview follows
the filters as they change."""

import pytest

from labeling.models import Area, Category
from tests.browser.conftest import log_in
from tests.factories.exports import item_make, label_make

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def visible_options(page) -> list[str]:
    return page.locator("#category-picker .exp-picker-option:visible .exp-picker-name").all_inner_texts()


def visible_areas(page) -> list[str]:
    return [
        group.get_attribute("data-area") for group in page.locator("#category-picker .exp-picker-area:visible").all()
    ]


def test_the_category_search_narrows_the_picker_grouped_by_area(page, reviewer_user):
    tests_area = Area.objects.create(name="Tests and verification", status=Area.Status.CONFIRMED)
    files_area = Area.objects.create(name="Files and edits", status=Area.Status.CONFIRMED)
    Category.objects.create(name="Special-cases the unit tests to pass", area=tests_area, size=12)
    Category.objects.create(name="Claims the tests pass without running them", area=tests_area, size=5)
    Category.objects.create(name="Edits the wrong file", area=files_area, size=9)
    Category.objects.create(name="Asks for clarification too often", size=2)

    log_in(page, "rita", "rita-password-123")
    page.goto("/datasets/new")
    assert visible_areas(page) == ["Files and edits", "Tests and verification", "No area"]
    assert len(visible_options(page)) == 4

    page.fill("#category-search", "wrong")
    assert visible_options(page) == ["Edits the wrong file"]
    assert visible_areas(page) == ["Files and edits"]

    # An area's name shows all of its categories.
    page.fill("#category-search", "verification")
    assert visible_options(page) == [
        "Claims the tests pass without running them",
        "Special-cases the unit tests to pass",
    ]

    page.fill("#category-search", "nothing like this")
    assert visible_options(page) == [] and page.locator("#category-no-match").is_visible()

    page.fill("#category-search", "")
    assert len(visible_options(page)) == 4
    page.locator("label.exp-picker-option", has_text="Edits the wrong file").locator("input").check()
    assert page.locator("#category-chosen").inner_text() == "1 chosen"


def test_the_preview_follows_the_filters_as_they_change(page, reviewer_user):
    for i in range(3):
        item_make(comment=f"It edited the wrong file, case {'abc'[i]}.")
    corrected = item_make(comment="It claimed the tests pass.")
    label_make(corrected, corrected_response="Two tests fail: test_a and test_b.")
    item_make(rating=1, comment="Exactly what I asked for.")

    requests = []
    page.on("request", lambda request: requests.append(request.url) if "/datasets/preview" in request.url else None)
    log_in(page, "rita", "rita-password-123")
    page.goto("/datasets/new")
    page.locator("#preview-matched", has_text="5").wait_for()
    assert "before the held-out check" in page.locator("#preview-total").inner_text()

    page.check("input[name=formats][value=chat_jsonl]")
    page.check("input[name=formats][value=preference_jsonl]")
    page.locator("#preview-formats tr[data-format=preference_jsonl] td.num", has_text="1").wait_for()

    page.select_option("select[name=rating]", "down")
    page.locator("#preview-matched", has_text="4").wait_for()
    assert "chat rows need a corrected response or a thumbs-up: 1 of 4 items qualify" in page.locator(
        "#preview-warnings"
    ).inner_text()
    assert page.locator("#preview-sample li").count() == 4

    page.check("input[name=has_corrected_response]")
    page.locator("#preview-matched", has_text="1").wait_for()
    assert page.locator("#preview-sample li").count() == 1
    assert not page.locator("#preview-warnings").count()

    # A day out of range shows the field's error in place of the counts; nothing is lost for a good one.
    page.fill("input[name=date_to]", "3100-01-01")
    page.locator("#preview-refusal", has_text="Enter a day from 1970-01-01 to 2999-12-31.").wait_for()
    page.fill("input[name=date_to]", "")
    page.locator("#preview-matched", has_text="1").wait_for()
    # The description is not part of what the preview reads: changing it asks nothing.
    before = len(requests)
    page.fill("textarea[name=description]", "A long description. " * 300)
    page.wait_for_timeout(800)
    assert len(requests) == before
    assert all("csrfmiddlewaretoken" not in url and "description" not in url for url in requests)

    # Typing in the category search narrows the picker without asking the preview again.
    before = len(requests)
    page.fill("#category-search", "anything")
    page.wait_for_timeout(800)
    assert len(requests) == before
