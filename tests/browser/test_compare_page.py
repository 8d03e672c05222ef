"""In a real browser: a reviewer compares two versions, sees the chart and the flagged regression, and clicks through."""

import pytest

from tests.browser.conftest import log_in
from tests.factories.compare import END, START, planted_data

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_sees_the_flagged_regression_and_clicks_its_bar_through_to_the_items(page, reviewer_user):
    cats = planted_data()
    errors: list[str] = []
    # Script errors and missing assets of the page (the browser's own favicon request is not one of them).
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("response", lambda response: errors.append(f"404 {response.url}") if response.status == 404 else None)

    log_in(page, "rita", "rita-password-123")
    page.goto(f"/compare/?a=1.0&b=1.1&from={START}&to={END}")

    page.wait_for_selector("#cmp-diff-box[data-ready=true]")
    alert = page.locator("#cmp-regressions")
    assert "2 categories got significantly worse on 1.1" in alert.inner_text()
    assert "Regressed" in alert.inner_text()
    flagged = page.locator(f"#cmp-table tr[data-category='{cats['Regressed'].id}']")
    assert "significantly worse" in flagged.inner_text()
    assert "new" in page.locator(f"#cmp-table tr[data-category='{cats['Brand new'].id}']").inner_text()
    # Both charts were drawn, with one bar per tested category (Rare and Gone are too small to test:
    # the table folds them) and a line (plus its band) per side.
    counts = page.evaluate(
        """() => ({
            bars: Chart.getChart('cmp-diff-chart').data.labels.length,
            lines: Chart.getChart('cmp-series-chart').data.datasets.filter((d) => !d.band).length,
        })"""
    )
    assert counts == {"bars": 4, "lines": 2}

    # Click the middle of the first (largest) bar: the planted regression.
    canvas = page.locator("#cmp-diff-chart")
    canvas.scroll_into_view_if_needed()
    point = page.evaluate(
        """() => {
            const canvas = document.getElementById('cmp-diff-chart');
            const bar = Chart.getChart(canvas).getDatasetMeta(0).data[0];
            const box = canvas.getBoundingClientRect();
            return {x: box.left + (bar.x + bar.base) / 2, y: box.top + bar.y};
        }"""
    )
    page.mouse.click(point["x"], point["y"])

    page.wait_for_url(f"**/search/?category={cats['Regressed'].id}&model_version=1.1&rating=down**")
    assert "40 signals" in page.locator("main").inner_text()
    assert errors == []
