"""/runs/: starting a cluster run, the list of runs and a run's live progress."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from labeling.models import AuditEvent, Category, ClusterRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(monkeypatch):
    """Run ids handed to the worker (no broker in these tests)."""
    ids = []
    monkeypatch.setattr("labeling.tasks.run_clustering.apply_async", lambda args, **kwargs: ids.append(args[0]))
    return ids


def done_run(**fields) -> ClusterRun:
    now = timezone.now()
    defaults = dict(
        trigger=ClusterRun.Trigger.COMMAND, status=ClusterRun.Status.DONE, active=None, progress=1.0, stage="done",
        started_at=now - timedelta(seconds=12.5), finished_at=now,
        counts={"items": 120, "clusters": 4, "matched": 1, "new": 3, "assigned": 110, "unassigned": 10},
    )
    return ClusterRun.objects.create(**{**defaults, **fields})


def test_anonymous_users_are_sent_to_login_and_start_nothing(client, queued):
    run = done_run()
    for url in ["/runs/", f"/runs/{run.id}/", f"/runs/{run.id}/progress"]:
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith("/login/"), url
    response = client.post("/runs/start")
    assert response.status_code == 302 and response.url.startswith("/login/")
    assert ClusterRun.objects.count() == 1 and queued == []


def test_users_without_a_role_get_403_and_start_nothing(nobody, queued):
    run = done_run()
    for url in ["/runs/", f"/runs/{run.id}/", f"/runs/{run.id}/progress"]:
        assert nobody.get(url).status_code == 403, url
    response = nobody.post("/runs/start")
    assert response.status_code == 403 and b"needs the reviewer role" in response.content
    assert ClusterRun.objects.count() == 1 and queued == [] and not AuditEvent.objects.exists()


@pytest.mark.parametrize("url", ["/runs/999/", "/runs/999/progress"])
def test_a_run_that_does_not_exist_is_404(reviewer, url):
    assert reviewer.get(url).status_code == 404


def test_starting_needs_a_post(reviewer, queued):
    assert reviewer.get("/runs/start").status_code == 405
    assert not ClusterRun.objects.exists()


def test_a_reviewer_starts_a_run_and_lands_on_its_progress(reviewer, queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = reviewer.post("/runs/start")
    run = ClusterRun.objects.get()
    assert response.status_code == 302 and response.url == f"/runs/{run.id}/"
    assert run.trigger == ClusterRun.Trigger.REVIEWER and run.started_by.username == "rita"
    assert run.status == ClusterRun.Status.QUEUED and queued == [run.id]
    assert AuditEvent.objects.get().action == "started cluster run"
    page = reviewer.get(response.url).content.decode()
    assert f"Cluster run #{run.id} queued." in page
    assert f'hx-get="/runs/{run.id}/progress" hx-trigger="every 1s"' in page
    assert "waiting for a worker" in page


def test_starting_while_a_run_is_active_links_it_and_creates_no_second_run(reviewer, queued):
    active = ClusterRun.objects.create(
        trigger=ClusterRun.Trigger.SCHEDULE, status=ClusterRun.Status.RUNNING, started_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    response = reviewer.post("/runs/start")
    assert response.status_code == 409
    assert (
        f'A cluster run is already running: <a href="/runs/{active.id}/">run #{active.id}</a>.'
        in response.content.decode()
    )
    assert list(ClusterRun.objects.values_list("id", flat=True)) == [active.id]
    assert queued == [] and not AuditEvent.objects.exists()


def test_the_list_shows_status_trigger_who_duration_and_counts(reviewer):
    rita = get_user_model().objects.get(username="rita")
    done_run(trigger=ClusterRun.Trigger.REVIEWER, started_by=rita)
    ClusterRun.objects.create(trigger=ClusterRun.Trigger.SCHEDULE, status=ClusterRun.Status.FAILED, active=None,
                              error="boom")
    page = reviewer.get("/runs/").content.decode()
    table = page.split('id="run-table"')[1]
    rows = table.split("<tr>")[2:]
    assert "Failed" in rows[0] and "Schedule" in rows[0] and "dict_items" not in rows[0]
    assert "Done" in rows[1] and "Reviewer" in rows[1] and "rita" in rows[1] and "12.5 s" in rows[1]
    assert '<td class="num">120</td>' in rows[1] and '<td class="num">3</td>' in rows[1]
    assert 'id="start-run"' in page


def test_the_progress_of_a_running_run_keeps_polling(reviewer):
    run = ClusterRun.objects.create(
        trigger=ClusterRun.Trigger.REVIEWER, status=ClusterRun.Status.RUNNING, stage="clustering", progress=0.42,
        started_at=timezone.now(),
    )
    response = reviewer.get(f"/runs/{run.id}/progress", headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert 'hx-trigger="every 1s"' in html
    assert '<progress max="100" value="42"' in html and "clustering" in html
    assert response["Cache-Control"] == "no-store"


def test_a_finished_run_stops_polling_and_shows_its_result_and_new_categories(reviewer):
    run = done_run()
    new = Category.objects.create(name="Claims tests pass", created_by_run=run, size=30)
    Category.objects.create(name="Older one", size=10)
    html = reviewer.get(f"/runs/{run.id}/progress").content.decode()
    assert "hx-trigger" not in html and "hx-get" not in html
    result = html.split('id="run-result"')[1]
    assert "<dt>Clusters</dt><dd>4</dd>" in result and "<dt>New proposed categories</dt><dd>3</dd>" in result
    assert "<dt>Unsorted</dt><dd>10</dd>" in result and "<dt>Matched to existing categories</dt><dd>1</dd>" in result
    assert f'<a href="/categories/{new.id}/">Claims tests pass</a>' in html and "Older one" not in html


def test_a_failed_run_shows_its_error_and_stops_polling(reviewer):
    run = ClusterRun.objects.create(
        trigger=ClusterRun.Trigger.REVIEWER, status=ClusterRun.Status.FAILED, active=None,
        error="MemoryError: out of memory",
    )
    html = reviewer.get(f"/runs/{run.id}/").content.decode()
    assert "The run failed: MemoryError: out of memory" in html
    assert "hx-trigger" not in html
