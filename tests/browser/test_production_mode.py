"""In production mode (DEBUG off, `manage.py serve`, collected static files) pages get their CSS and JS.

Chromium talks to the real gunicorn of tests/production_server.py over TLS.
"""

import re

import pytest

from django.test import override_settings

from feedback import services as feedback_services
from feedback.models import FeedbackItem
from tests.browser.conftest import log_in
from tests.production_server import production_server  # noqa: F401 (fixture)
from tests.factories.review import item_make

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

A_YEAR_OR_MORE = 365 * 24 * 3600


@pytest.fixture
def source(production_server):
    # Its signing secret is stored encrypted under the server's SECRET_KEY, which reads it back.
    with override_settings(SECRET_KEY=production_server.secret_key):
        return feedback_services.source_create(name="product")[0]


@pytest.fixture
def production_page(chromium, production_server):
    context = chromium.new_context(
        base_url=production_server.url, ignore_https_errors=True, viewport={"width": 1400, "height": 900}
    )
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.static_responses = []
    page.problems = []
    page.on("response", lambda r: "/static/" in r.url and page.static_responses.append(r))
    page.on("response", lambda r: r.status >= 400 and page.problems.append(f"{r.status} {r.url}"))
    # The app has no favicon; Chromium asks for one anyway, and that 404 says nothing about the page.
    page.on(
        "console",
        lambda m: m.type == "error"
        and not m.location.get("url", "").endswith("/favicon.ico")
        and page.problems.append(f"{m.text} ({m.location.get('url')})"),
    )
    page.on("pageerror", lambda exc: page.problems.append(str(exc)))
    yield page
    context.close()


def test_the_overview_has_its_styles_its_charts_and_htmx(production_page, production_server, reviewer_user):
    page = production_page
    log_in(page, "rita", "rita-password-123")
    page.goto("/")
    page.wait_for_function("() => window.Chart && Chart.getChart(document.getElementById('down-rate-chart'))")

    # app.css applied: the page background and the top bar's flex layout come from it.
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(246, 247, 249)"
    assert page.evaluate("getComputedStyle(document.querySelector('.topbar')).display") == "flex"
    # The vendored libraries and the page's own script ran.
    assert page.evaluate("typeof window.htmx") == "object"
    assert page.evaluate("Boolean(Chart.getChart(document.getElementById('volume-chart')))")
    assert page.problems == []

    served = {re.sub(r"\.[0-9a-f]{12}\.", ".", r.url.split("/static/")[1]): r for r in page.static_responses}
    assert {"css/app.css", "vendor/htmx-2.0.8.min.js", "js/app.js", "vendor/chart-4.6.1.umd.min.js", "js/overview.js"} <= set(served)
    for name, response in served.items():
        assert response.status == 200, name
        headers = response.all_headers()
        assert "immutable" in headers["cache-control"], name
        assert int(re.search(r"max-age=(\d+)", headers["cache-control"]).group(1)) >= A_YEAR_OR_MORE, name
        assert headers.get("content-encoding") == "gzip", name  # Chromium asks for it


def test_htmx_loads_the_similar_items_of_an_item_page(production_page, production_server, reviewer_user, source):
    item = item_make(source, kind=FeedbackItem.Kind.RATING, comment="The agent edited the wrong file.")
    page = production_page
    log_in(page, "rita", "rita-password-123")
    with page.expect_response(lambda r: r.url.endswith(f"/items/{item.id}/similar")) as similar:
        page.goto(f"/items/{item.id}/")
    assert similar.value.status == 200
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(246, 247, 249)"
    assert page.problems == []
