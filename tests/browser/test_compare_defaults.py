"""In a real browser: the comparison's default dates, its folded rows and the p beside each flag."""

import pytest

from tests.browser.conftest import log_in
from tests.factories.compare import END, START, planted_data

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_page_opens_on_the_days_both_sides_have_data_and_unfolds_the_untestable_rows(page, reviewer_user):
    cats = planted_data()
    log_in(page, "rita", "rita-password-123")
    page.goto("/compare/")
    # The form arrives with the two latest versions and the days they share, and Compare keeps them.
    assert page.locator("#cmp-from").input_value() == str(START)
    assert page.locator("#cmp-to").input_value() == str(END)
    page.click("#compare-form button[type=submit]")
    page.wait_for_selector("#cmp-diff-box[data-ready=true]")
    assert f"from={START}" in page.url and f"to={END}" in page.url

    # The flagged rows lead, each with its adjusted p; the small ones wait behind one line.
    first = page.locator("#cmp-table tbody tr[data-category]").first
    assert first.get_attribute("data-category") == str(cats["Regressed"].id)
    assert "adj. p" in first.locator(".cmp-flag-cell").inner_text()
    rare = page.locator(f"#cmp-table tr[data-category='{cats['Rare'].id}']")
    assert not rare.is_visible()
    fold = page.locator("button[data-fold='cmp-fold-outside']")
    assert fold.inner_text() == "▸ 2 categories with too few thumbs-down to test"
    fold.click()
    assert rare.is_visible() and "p 0.0183 unadjusted" in rare.inner_text()
    assert fold.get_attribute("aria-expanded") == "true" and fold.inner_text().startswith("▾")
    fold.click()
    assert not rare.is_visible()
    bars = page.evaluate("() => Chart.getChart('cmp-diff-chart').data.labels.length")
    assert bars == 4
