"""/datasets/: who may do what, forms that refuse bad input visibly, Export now, schedules, downloads, diffs."""

import re

import pytest
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from exports.models import Dataset, DatasetVersion, ExportRun
from labeling.models import AuditEvent
from tests.factories.exports import (
    dataset_make,
    export,
    item_make,
    source_get,
    unit,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def exported(export_root):
    item_make()
    dataset = dataset_make("shown", formats=("csv", "chat_jsonl"))
    version = export(dataset)
    return dataset, version


def urls_of(dataset, version) -> tuple[list[str], list[str]]:
    base = f"/datasets/{dataset.id}"
    pages = [
        "/datasets/",
        "/datasets/new",
        f"{base}/",
        f"{base}/edit",
        f"{base}/v1/",
        f"{base}/v1/items.csv",
        f"{base}/diff?old=1&new=1",
        f"{base}/runs/{version.run.id}/status",
    ]
    posts = ["/datasets/new", f"{base}/edit", f"{base}/export", f"{base}/schedule", f"{base}/delete"]
    return pages, posts


def valid_form(**overrides) -> dict:
    data = {"name": "fresh-set", "purpose": "train", "description": "", "formats": ["chat_jsonl", "csv"], "rating": ""}
    data.update(overrides)
    return data


# --- Who may do what ---------------------------------------------------------------


def test_anonymous_users_are_sent_to_login_and_change_nothing(client, exported, no_broker):
    pages, posts = urls_of(*exported)
    for url in pages:
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith("/login/"), url
    for url in posts:
        response = client.post(url, valid_form(cron="* * * * *"))
        assert response.status_code == 302 and response.url.startswith("/login/"), url
    assert Dataset.objects.count() == 1 and ExportRun.objects.count() == 1 and no_broker == []


def test_users_without_a_role_get_403_and_change_nothing(nobody, exported, no_broker):
    pages, posts = urls_of(*exported)
    for url in pages:
        assert nobody.get(url).status_code == 403, url
    for url in posts:
        assert nobody.post(url, valid_form(cron="* * * * *")).status_code == 403, url
    assert Dataset.objects.count() == 1 and ExportRun.objects.count() == 1 and no_broker == []
    assert not PeriodicTask.objects.filter(task="exports.tasks.scheduled_export").exists()


def test_reviewers_see_every_page_but_may_not_schedule_or_delete(reviewer, exported):
    dataset, version = exported
    pages, _ = urls_of(dataset, version)
    for url in pages:
        assert reviewer.get(url).status_code == 200, url

    response = reviewer.post(f"/datasets/{dataset.id}/schedule", {"cron": "0 3 * * *", "mode": "snapshot"})
    assert response.status_code == 403 and b"needs the admin role" in response.content
    assert reviewer.post(f"/datasets/{dataset.id}/delete").status_code == 403
    dataset.refresh_from_db()
    assert (
        dataset.schedule_cron == "" and not PeriodicTask.objects.filter(task="exports.tasks.scheduled_export").exists()
    )
    assert b'id="schedule"' not in reviewer.get(f"/datasets/{dataset.id}/").content


# --- Defining datasets --------------------------------------------------------------


def test_a_reviewer_defines_a_dataset_with_filters(reviewer, export_root):
    source_get("coder-backend")
    item_make(model_version="2.2", variant="B", source=source_get("coder-backend"))
    form = reviewer.get("/datasets/new").content.decode()
    assert 'value="2.2"' in form and 'value="coder-backend"' in form

    response = reviewer.post(
        "/datasets/new",
        valid_form(
            model_versions=["2.2"],
            variants=["B"],
            sources=["coder-backend"],
            rating="down",
            verdicts=["failure"],
            tags=["wrong file"],
            other_tags="custom one, custom two",
            reviewed_only="on",
            date_from="2026-11-01",
        ),
    )

    dataset = Dataset.objects.get()
    assert response.status_code == 302 and response.url == f"/datasets/{dataset.id}/"
    assert dataset.filters == {
        "date_from": "2026-11-01",
        "model_versions": ["2.2"],
        "rating": "down",
        "reviewed_only": True,
        "sources": ["coder-backend"],
        "tags": ["wrong file", "custom one", "custom two"],
        "variants": ["B"],
        "verdicts": ["failure"],
    }
    assert dataset.formats == ["chat_jsonl", "csv"] and dataset.created_by.username == "rita"
    assert AuditEvent.objects.get(action="dataset.create").details["dataset"] == "fresh-set"
    page = reviewer.get(f"/datasets/{dataset.id}/").content.decode()
    assert "custom one, custom two" in page and "Not exported yet." in page


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"formats": []}, "Choose at least one format."),
        ({"name": ""}, "Give the dataset a name."),
        ({"name": "Bad Name!"}, "Use lower-case letters, digits"),
        ({"date_from": "2026-11-10", "date_to": "2026-11-01"}, "The end date is before the start date."),
        ({"date_from": "yesterday"}, "Enter a valid date."),
        ({"sources": ["no-such-source"]}, "Select a valid choice."),
        ({"purpose": "test"}, "Select a valid choice."),
        ({"name": "taken"}, "a dataset named &#x27;taken&#x27; exists already"),
    ],
)
def test_bad_input_shows_a_message_and_saves_nothing(reviewer, overrides, message):
    dataset_make("taken")
    response = reviewer.post("/datasets/new", valid_form(**overrides))

    assert response.status_code == 422
    html = response.content.decode()
    assert "Nothing was saved." in html and message in html
    assert Dataset.objects.count() == 1 and AuditEvent.objects.filter(action="dataset.create").count() == 1


def test_editing_changes_the_definition_but_not_the_name_once_a_version_exists(reviewer, exported):
    dataset, _ = exported
    response = reviewer.post(
        f"/datasets/{dataset.id}/edit",
        valid_form(name="renamed", purpose="eval", formats=["parquet"], description="Now parquet."),
    )

    assert response.status_code == 302
    dataset.refresh_from_db()
    assert (dataset.name, dataset.purpose, dataset.formats, dataset.description) == (
        "shown",
        "train",
        ["parquet"],
        "Now parquet.",
    )
    assert "Fixed once a version exists." in reviewer.get(f"/datasets/{dataset.id}/edit").content.decode()


def test_a_bad_edit_shows_its_message_and_keeps_the_old_definition(reviewer, exported):
    dataset, _ = exported
    response = reviewer.post(f"/datasets/{dataset.id}/edit", valid_form(formats=[], date_from="2026-13-45"))

    assert response.status_code == 422
    assert "Choose at least one format." in response.content.decode()
    dataset.refresh_from_db()
    assert dataset.formats == ["chat_jsonl", "csv"] and dataset.filters == {}


# --- Export now and its status row --------------------------------------------------------


def test_export_now_queues_a_run_after_commit_and_the_page_polls_its_status(
    reviewer, export_root, no_broker, django_capture_on_commit_callbacks
):
    dataset = dataset_make("to-export")

    with django_capture_on_commit_callbacks(execute=True):
        response = reviewer.post(f"/datasets/{dataset.id}/export", {"mode": "snapshot"})

    run = ExportRun.objects.get()
    assert response.status_code == 302 and response.url == f"/datasets/{dataset.id}/#export-status"
    assert no_broker == [run.id] and run.status == "queued" and run.requested_by.username == "rita"
    page = reviewer.get(f"/datasets/{dataset.id}/").content.decode()
    assert f'hx-get="/datasets/{dataset.id}/runs/{run.id}/status"' in page and "waiting for a worker" in page
    assert re.search(r'id="export-now"\s+disabled', page)


def test_a_second_export_while_one_runs_is_refused_with_409_and_queues_nothing(
    reviewer, export_root, no_broker, django_capture_on_commit_callbacks
):
    dataset = dataset_make("busy")
    with django_capture_on_commit_callbacks(execute=True):
        reviewer.post(f"/datasets/{dataset.id}/export")
        response = reviewer.post(f"/datasets/{dataset.id}/export")

    assert response.status_code == 409
    assert "is already queued; this one was not started." in response.content.decode()
    assert ExportRun.objects.count() == 1 and len(no_broker) == 1


def test_the_status_row_stops_polling_when_done_and_links_the_files(reviewer, export_root, no_broker):
    item_make()
    dataset = dataset_make("followed", formats=("csv", "parquet"))
    reviewer.post(f"/datasets/{dataset.id}/export")
    run = ExportRun.objects.get()
    url = f"/datasets/{dataset.id}/runs/{run.id}/status"
    polled = reviewer.get(url, headers={"HX-Request": "true"})
    assert "hx-get" in polled.content.decode() and "HX-Refresh" not in polled

    from exports import runs

    runs.export_run_execute(run_id=run.id)
    # The poll that sees the new version reloads the page, so its table lists it too.
    assert reviewer.get(url, headers={"HX-Request": "true"})["HX-Refresh"] == "true"
    response = reviewer.get(url)

    html = response.content.decode()
    assert response["Cache-Control"] == "no-store"
    assert "hx-get" not in html and 'data-status="done"' in html and 'value="100"' in html
    assert (
        f'href="/datasets/{dataset.id}/v1/items.parquet"' in html
        and f'href="/datasets/{dataset.id}/v1/manifest.json"' in html
    )


def test_a_failed_run_shows_its_error(reviewer, export_root):
    dataset = dataset_make("broken")
    run = ExportRun.objects.create(
        dataset=dataset, trigger="reviewer", status="failed", active=None, error="OSError: disk full"
    )

    html = reviewer.get(f"/datasets/{dataset.id}/runs/{run.id}/status").content.decode()

    assert "The export failed and left no version: OSError: disk full" in html and "hx-get" not in html


def test_a_status_row_of_another_dataset_is_404(reviewer, exported):
    _, version = exported
    other = dataset_make("other")
    assert reviewer.get(f"/datasets/{other.id}/runs/{version.run.id}/status").status_code == 404


# --- Schedules and deleting (admins) ----------------------------------------------------


def test_an_admin_schedules_a_dataset_with_celery_beat(admin, exported):
    dataset, _ = exported
    response = admin.post(f"/datasets/{dataset.id}/schedule", {"cron": " 30  2 * * 1-5 ", "mode": "incremental"})

    assert response.status_code == 302
    dataset.refresh_from_db()
    task = PeriodicTask.objects.get(id=dataset.periodic_task_id)
    assert (dataset.schedule_cron, dataset.schedule_mode) == ("30 2 * * 1-5", "incremental")
    assert task.task == "exports.tasks.scheduled_export" and task.args == f"[{dataset.id}]" and task.enabled
    crontab = task.crontab
    assert (crontab.minute, crontab.hour, crontab.day_of_month, crontab.month_of_year, crontab.day_of_week) == (
        "30",
        "2",
        "*",
        "*",
        "1-5",
    )
    assert AuditEvent.objects.filter(action="dataset.schedule").exists()

    assert admin.post(f"/datasets/{dataset.id}/schedule", {"cron": "", "mode": "snapshot"}).status_code == 302
    dataset.refresh_from_db()
    assert dataset.schedule_cron == "" and dataset.periodic_task is None
    assert not PeriodicTask.objects.filter(task="exports.tasks.scheduled_export").exists()


@pytest.mark.parametrize(
    "cron, message",
    [
        ("0 3 * *", "five cron fields"),
        ("61 3 * * *", "not a valid cron expression"),
        ("0 3 * * funday", "not a valid cron"),
    ],
)
def test_a_bad_cron_shows_a_message_and_changes_nothing(admin, exported, cron, message):
    dataset, _ = exported
    response = admin.post(f"/datasets/{dataset.id}/schedule", {"cron": cron, "mode": "snapshot"})

    assert response.status_code == 422 and message in response.content.decode()
    dataset.refresh_from_db()
    assert (
        dataset.schedule_cron == "" and not PeriodicTask.objects.filter(task="exports.tasks.scheduled_export").exists()
    )
    assert not CrontabSchedule.objects.filter(hour="3").exists()


def test_an_admin_deletes_a_dataset_with_its_files(admin, exported, export_root, django_capture_on_commit_callbacks):
    dataset, _ = exported
    with django_capture_on_commit_callbacks(execute=True):
        response = admin.post(f"/datasets/{dataset.id}/delete")

    assert response.status_code == 302 and response.url == "/datasets/"
    assert not Dataset.objects.exists() and not DatasetVersion.objects.exists()
    assert not (export_root / "shown").exists()


def test_deleting_a_dataset_while_it_exports_is_refused(admin, exported, no_broker):
    dataset, _ = exported
    admin.post(f"/datasets/{dataset.id}/export")

    response = admin.post(f"/datasets/{dataset.id}/delete")

    assert response.status_code == 409 and Dataset.objects.count() == 1


# --- Versions: files, held-out counts, diffs --------------------------------------------


def test_files_download_as_written_and_only_names_the_version_lists(reviewer, exported, export_root):
    dataset, _ = exported
    response = reviewer.get(f"/datasets/{dataset.id}/v1/items.csv")

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == (export_root / "shown" / "v1" / "items.csv").read_bytes()
    assert response["Content-Disposition"] == 'attachment; filename="shown-v1-items.csv"'
    for name in ["items.parquet", "..%2F..%2Fmanifest.json", "v1"]:
        assert reviewer.get(f"/datasets/{dataset.id}/v1/{name}").status_code == 404, name
    assert reviewer.get(f"/datasets/{dataset.id}/v9/").status_code == 404


def test_the_version_page_shows_how_many_items_were_held_out_and_why(reviewer, export_root):
    eval_item = item_make(comment="Eval case.", vector=unit(1), model_version="eval-only")
    export(dataset_make("evals", purpose="eval", formats=("eval_jsonl",), filters={"model_versions": ["eval-only"]}))
    item_make(comment="eval CASE", vector=unit(2))
    # A conversation of its own: one equal to the eval item's would hold it out too.
    item_make(comment="Kept.", vector=unit(3), request="Add type hints to the parser")
    train = dataset_make("trains", filters={"model_versions": ["2.1"]})
    export(train)

    html = reviewer.get(f"/datasets/{train.id}/v1/").content.decode()

    assert eval_item.id
    assert '<strong id="held-out-total">1</strong>' in html
    assert "same text as an eval item (after normalising)" in html
    assert "Cosine threshold 0.92;\n    checked against 1 eval items, 1 eval versions." in html
    listing = reviewer.get("/datasets/").content.decode()
    assert "trains" in listing and "evals" in listing


def test_the_diff_page_lists_added_and_removed_items(reviewer, export_root):
    first = item_make(comment="Stays.")
    gone = item_make(comment="Goes.")
    dataset = dataset_make("diffed")
    export(dataset)
    gone_id = gone.id
    gone.delete()
    added = item_make(comment="Arrives.")
    export(dataset)

    detail = reviewer.get(f"/datasets/{dataset.id}/").content.decode()
    response = reviewer.get(f"/datasets/{dataset.id}/diff", {"old": 1, "new": 2})

    assert 'id="diff-form"' in detail and first.id
    html = response.content.decode()
    assert (
        '<span class="num" id="diff-added">1</span>' in html and '<span class="num" id="diff-removed">1</span>' in html
    )
    assert f'href="/items/{added.id}/"' in html and f'#{gone_id} <span class="muted">deleted since</span>' in html
    assert reviewer.get(f"/datasets/{dataset.id}/diff", {"old": 1, "new": 7}).status_code == 422


def test_the_dataset_list_reads_a_fixed_number_of_queries(reviewer, export_root, django_assert_max_num_queries):
    item_make()
    for i in range(6):
        export(dataset_make(f"set-{i}"))
    with django_assert_max_num_queries(8):
        assert reviewer.get("/datasets/").status_code == 200


def test_dataset_pages_carry_no_inline_script(reviewer, exported):
    dataset, _ = exported
    for url in ["/datasets/", "/datasets/new", f"/datasets/{dataset.id}/", f"/datasets/{dataset.id}/v1/"]:
        html = reviewer.get(url).content.decode()
        for tag in re.findall(r"<script\b[^>]*>", html):
            assert "src=" in tag, (url, tag)
        assert not re.search(r"\son[a-z]+=\"", html), url
