"""Real-browser tests: Debian's Chromium driven by Playwright against a live server.

They run whenever /usr/bin/chromium exists, and always in CI, where a missing
browser is a failure rather than a skip.
"""

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from config.celery import app as celery_app

CHROMIUM = Path("/usr/bin/chromium")

# Playwright's sync API runs an event loop in this thread; the ORM calls in
# the tests are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def pytest_collection_modifyitems(config, items):
    if CHROMIUM.exists() or os.environ.get("CI"):
        return
    skip = pytest.mark.skip(reason="no /usr/bin/chromium (apt-get install chromium chromium-driver)")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def urlconf_loaded():
    # The URLconf imports the embedding and clustering stack; on a busy machine its first load
    # takes longer than a page load may, so the first test's first page would time out.
    from django.urls import get_resolver

    get_resolver().url_patterns


@pytest.fixture(scope="session")
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, live_server):
    context = chromium.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


@pytest.fixture
def reviewer_user(transactional_db):
    user = get_user_model().objects.create_user("rita", password="rita-password-123")
    user.groups.add(Group.objects.get_or_create(name="reviewer")[0])
    return user


@pytest.fixture
def eager_celery():
    """Tasks run where they are queued: the live server thread runs a run or an export after its commit."""
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = before


def log_in(page, username: str, password: str) -> None:
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
