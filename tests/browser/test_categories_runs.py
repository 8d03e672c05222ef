"""In a real browser: a reviewer starts a cluster run and watches it finish."""

import numpy as np
import pytest

from labeling.models import Category, ClusterRun
from tests.browser.conftest import log_in
from tests.factories.clustering import add_items
from tests.factories import source_make

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_starts_a_run_and_sees_it_finish_with_new_categories(page, reviewer_user, eager_celery):
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((4, 384))
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    add_items(source_make()[0], centers, 25, seed=1)

    log_in(page, "rita", "rita-password-123")
    page.goto("/runs/")
    page.click("#start-run")

    page.wait_for_url("**/runs/*/")
    run = ClusterRun.objects.get()
    assert page.url.endswith(f"/runs/{run.id}/")
    page.locator("#run-status", has_text="Done").wait_for()
    assert page.locator("progress").first.get_attribute("value") == "100"
    assert "<dt>Clusters</dt><dd>4</dd>" in page.locator("#run-result").inner_html()
    run.refresh_from_db()
    assert run.status == ClusterRun.Status.DONE and run.trigger == ClusterRun.Trigger.REVIEWER
    assert run.started_by == reviewer_user
    created = list(Category.objects.filter(created_by_run=run))
    assert len(created) == 4
    links = page.locator("#run-new-categories a")
    assert links.count() == 4
    assert {links.nth(i).inner_text() for i in range(4)} == {c.name for c in created}
    links.first.click()
    page.wait_for_url("**/categories/*/")
    assert page.locator("#category-header h1").inner_text() in {c.name for c in created}


def test_the_run_page_follows_a_run_until_it_is_done_and_then_stops_asking(page, reviewer_user):
    run = ClusterRun.objects.create(trigger=ClusterRun.Trigger.SCHEDULE)
    log_in(page, "rita", "rita-password-123")
    requests = []
    page.on("request", lambda request: requests.append(request.url) if "/progress" in request.url else None)
    page.goto(f"/runs/{run.id}/")
    assert page.locator("#run-stage").inner_text() == "waiting for a worker"

    ClusterRun.objects.filter(id=run.id).update(status=ClusterRun.Status.RUNNING, stage="clustering", progress=0.5)
    page.locator("#run-stage", has_text="clustering").wait_for()
    assert page.locator("#run-progress progress").get_attribute("value") == "50"

    ClusterRun.objects.filter(id=run.id).update(
        status=ClusterRun.Status.DONE, active=None, stage="done", progress=1.0,
        counts={"items": 30, "clusters": 2, "matched": 2, "new": 0, "assigned": 28, "unassigned": 2},
    )
    page.locator("#run-status", has_text="Done").wait_for()
    assert "<dt>Unsorted</dt><dd>2</dd>" in page.locator("#run-result").inner_html()
    polled = len(requests)
    page.wait_for_timeout(2500)
    assert len(requests) == polled


def test_starting_a_run_while_one_is_active_links_the_active_run(page, reviewer_user):
    active = ClusterRun.objects.create(trigger=ClusterRun.Trigger.SCHEDULE)
    log_in(page, "rita", "rita-password-123")
    page.goto("/runs/")
    page.click("#start-run")
    flash = page.locator(".flash-error")
    assert "A cluster run is already queued" in flash.inner_text()
    flash.locator("a").click()
    page.wait_for_url(f"**/runs/{active.id}/")
    assert ClusterRun.objects.count() == 1
