"""An export whose data equals the latest version's makes no new version; it says which one it matched."""

import pytest
from django.core.management import call_command
from django.test import Client

from exports import datasets, runs, tasks
from exports.models import DatasetVersion, ExportRun, Mode, Trigger
from exports.schemas import ScheduleIn
from feedback.services import api_token_create
from tests.factories.exports import dataset_make, item_make, label_make, source_get
from tests.factories import client_for, user_make

FORMATS = ("csv", "chat_jsonl", "hints_jsonl", "parquet")


def scheduled(name: str, *, mode: str = "snapshot"):
    dataset = dataset_make(name, formats=FORMATS)
    datasets.dataset_schedule_set(dataset=dataset, schedule=ScheduleIn(cron="0 3 * * *", mode=mode))
    return dataset


def run_of(dataset) -> ExportRun:
    return dataset.runs.select_related("version", "matched_version").order_by("-id").first()


def start_and_execute(dataset, *, mode: str = Mode.SNAPSHOT, force: bool = False) -> tuple[ExportRun, DatasetVersion]:
    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, mode=mode, force=force, enqueue=False)
    version = runs.export_run_execute(run_id=run.id)
    run.refresh_from_db()
    return run, version


@pytest.mark.django_db
def test_two_scheduled_runs_over_unchanged_data_give_one_version_and_one_unchanged_run(export_root):
    item_make()
    item_make(comment="It claimed the tests pass.")
    dataset = scheduled("nightly")

    first = tasks.scheduled_export(dataset.id)
    second = tasks.scheduled_export(dataset.id)

    assert first == second
    assert dataset.versions.count() == 1
    runs = list(dataset.runs.order_by("id"))
    assert [run.status for run in runs] == ["done", "unchanged"]
    assert runs[1].matched_version_id == first and runs[1].version_id is None
    assert sorted(path.name for path in (export_root / "nightly").iterdir()) == ["v1"]


@pytest.mark.django_db
def test_a_label_change_between_runs_gives_a_new_version(export_root):
    item = item_make()
    dataset = scheduled("nightly")
    tasks.scheduled_export(dataset.id)

    label_make(item, hint="Open the file the user named before editing.")
    tasks.scheduled_export(dataset.id)

    assert dataset.versions.count() == 2
    assert [run.status for run in dataset.runs.order_by("id")] == ["done", "done"]


@pytest.mark.django_db
def test_a_new_item_gives_a_new_version(export_root):
    item_make()
    dataset = scheduled("nightly")
    tasks.scheduled_export(dataset.id)

    item_make(comment="It deleted the fixtures.")
    tasks.scheduled_export(dataset.id)

    assert list(dataset.versions.order_by("number").values_list("item_count", flat=True)) == [1, 2]


@pytest.mark.django_db
def test_an_item_leaving_the_selection_gives_a_new_version_even_with_equal_files(export_root):
    kept = item_make()
    gone = item_make()
    dataset = dataset_make("ids-only", formats=("csv",))
    start_and_execute(dataset)

    gone.delete()
    run, version = start_and_execute(dataset)

    assert run.status == "done" and version.number == 2 and version.item_count == 1
    assert set(version.members.values_list("item_id", flat=True)) == {kept.id}


@pytest.mark.django_db
def test_force_makes_a_version_of_unchanged_data(export_root):
    item_make()
    dataset = dataset_make("forced", formats=FORMATS)
    _, v1 = start_and_execute(dataset)

    run, v2 = start_and_execute(dataset, force=True)

    assert run.status == "done" and run.force and v2.number == 2
    data_files = [(entry["name"], entry["sha256"]) for entry in v1.files if entry["format"] != "card"]
    assert data_files == [(entry["name"], entry["sha256"]) for entry in v2.files if entry["format"] != "card"]


@pytest.mark.django_db
def test_an_export_by_hand_of_unchanged_data_answers_with_the_version_it_matched(export_root):
    item_make()
    dataset = dataset_make("by-hand", formats=FORMATS)
    _, v1 = start_and_execute(dataset)

    run, matched = start_and_execute(dataset)

    assert run.status == "unchanged" and matched == v1 and run.matched_version == v1
    assert dataset.versions.count() == 1 and run.active is None and run.finished_at is not None
    assert not [path.name for path in (export_root / "by-hand").iterdir() if path.name != "v1"]


@pytest.mark.django_db
def test_an_incremental_run_with_nothing_new_makes_no_version(export_root):
    item_make()
    dataset = scheduled("growing", mode="incremental")
    first = tasks.scheduled_export(dataset.id)

    again = tasks.scheduled_export(dataset.id)
    item_make(comment="It skipped the migration.")
    newer = DatasetVersion.objects.get(id=tasks.scheduled_export(dataset.id))

    assert again == first
    assert run_of(dataset).status == "done" and newer.number == 2 and newer.item_count == 1
    assert [run.status for run in dataset.runs.order_by("id")] == ["done", "unchanged", "done"]


@pytest.mark.django_db
def test_a_snapshot_after_an_incremental_version_compares_with_that_version(export_root):
    item_make()
    dataset = dataset_make("mixed", formats=("csv",))
    start_and_execute(dataset)
    item_make(comment="It ran the wrong command.")
    start_and_execute(dataset, mode=Mode.INCREMENTAL)

    run, version = start_and_execute(dataset)

    assert run.status == "done" and version.number == 3 and version.item_count == 2


@pytest.mark.django_db
def test_the_command_says_unchanged_and_prints_the_latest_folder(export_root, capsys):
    item_make()
    dataset = dataset_make("cmd", formats=("csv",))
    call_command("export", "cmd")

    call_command("export", "cmd")
    lines = capsys.readouterr().out.strip().splitlines()

    assert "unchanged since v1" in lines[-2]
    assert lines[-1].endswith("cmd/v1")
    call_command("export", "cmd", "--force")
    assert dataset.versions.count() == 2


@pytest.mark.django_db
def test_the_api_answers_an_unchanged_run_with_the_version_it_matched(export_root, no_broker):
    item_make()
    dataset = dataset_make("api-set", formats=("csv",))
    start_and_execute(dataset)
    _, token = api_token_create(source=source_get("product"), scopes=["datasets"])
    client = Client(headers={"Authorization": f"Bearer {token}"})

    def export_via_api(body: dict) -> dict:
        answer = client.post(f"/api/v1/datasets/{dataset.id}/exports", body, content_type="application/json")
        assert answer.status_code == 202, answer.content
        runs.export_run_execute(run_id=answer.json()["id"])
        return client.get(f"/api/v1/datasets/{dataset.id}/exports/{answer.json()['id']}").json()

    unchanged = export_via_api({})
    forced = export_via_api({"force": True})

    assert unchanged["status"] == "unchanged" and unchanged["matched_version"] == 1 and unchanged["version"] is None
    assert forced["status"] == "done" and forced["version"] == 2 and forced["force"] is True
    refused = client.post(f"/api/v1/datasets/{dataset.id}/exports", {"force": "maybe"}, content_type="application/json")
    assert refused.status_code == 422 and refused.json()["field"] == "force"


@pytest.mark.django_db
def test_the_dataset_page_lists_the_unchanged_run_with_the_version_it_matched(export_root):
    item_make()
    dataset = dataset_make("page-set", formats=("csv",))
    start_and_execute(dataset)
    start_and_execute(dataset)

    page = client_for(user_make("rita", "reviewer")).get(f"/datasets/{dataset.id}/")

    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="run-table"' in html and 'data-status="unchanged"' in html
    assert "Nothing changed since" in html and "same as" in html
