import pytest

from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_logs_in_and_sees_the_overview(page, reviewer_user):
    page.goto("/")
    assert "/login/" in page.url
    log_in(page, "rita", "rita-password-123")
    assert page.locator("h1").first.inner_text() == "Overview"
    assert page.locator("nav >> text=Categories").is_visible()


def test_a_wrong_password_shows_an_error_and_stays_logged_out(page, reviewer_user):
    page.goto("/login/")
    page.fill("input[name=username]", "rita")
    page.fill("input[name=password]", "wrong")
    page.click("button[type=submit]")
    assert page.locator("[role=alert]").inner_text().startswith("Your username and password didn't match")
    page.goto("/")
    assert "/login/" in page.url
