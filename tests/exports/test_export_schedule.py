"""Scheduled exports: celery beat's task, full or incremental, never two runs of a dataset at once."""

import threading
import time

import pytest
from django.db import connection

from config.celery import app as celery_app
from exports import datasets, runs, tasks
from exports.models import DatasetVersion, ExportRun
from exports.schemas import ScheduleIn
from exports.tables import CsvWriter
from tests.factories.exports import (
    dataset_make,
    item_make,
    member_ids,
)


def scheduled(name: str, *, mode: str = "snapshot", cron: str = "0 3 * * *"):
    dataset = dataset_make(name)
    datasets.dataset_schedule_set(dataset=dataset, schedule=ScheduleIn(cron=cron, mode=mode))
    return dataset


@pytest.mark.django_db
def test_the_schedule_names_a_task_that_celery_knows():
    celery_app.loader.import_default_modules()
    dataset = scheduled("nightly")
    assert dataset.periodic_task.task in celery_app.tasks
    assert dataset.periodic_task.crontab.timezone.key == "UTC"


@pytest.mark.django_db
def test_a_scheduled_export_makes_a_version_made_by_the_schedule(export_root):
    item_make()
    dataset = scheduled("nightly")

    version = DatasetVersion.objects.get(id=tasks.scheduled_export(dataset.id))

    assert version.number == 1 and version.trigger == "schedule" and version.item_count == 1
    assert version.manifest["made_by"] == "schedule '0 3 * * *'"
    assert (export_root / "nightly" / "v1" / "manifest.json").exists()


@pytest.mark.django_db
def test_an_incremental_schedule_exports_only_items_new_since_the_last_version(export_root):
    first = [item_make() for _ in range(3)]
    dataset = scheduled("growing", mode="incremental")

    v1 = DatasetVersion.objects.get(id=tasks.scheduled_export(dataset.id))
    newer = [item_make() for _ in range(2)]
    v2 = DatasetVersion.objects.get(id=tasks.scheduled_export(dataset.id))

    assert member_ids(v1) == {item.id for item in first}
    assert member_ids(v2) == {item.id for item in newer} and v2.base_number == 1 and v2.mode == "incremental"


@pytest.mark.django_db
def test_a_tick_while_the_previous_run_is_going_is_skipped(export_root):
    dataset = scheduled("slow")
    running = ExportRun.objects.create(
        dataset=dataset,
        trigger="schedule",
        status="running",
        host=runs.HOST,
        pid=1,
    )
    running.update(stage="writing files")

    assert tasks.scheduled_export(dataset.id) is None
    assert ExportRun.objects.count() == 1 and not DatasetVersion.objects.exists()


@pytest.mark.django_db
def test_a_tick_for_a_deleted_dataset_does_nothing():
    assert tasks.scheduled_export(424242) is None


@pytest.mark.django_db
def test_a_failed_scheduled_run_is_marked_failed_and_leaves_no_version(export_root, monkeypatch):
    item_make()
    dataset = scheduled("failing")
    monkeypatch.setattr(CsvWriter, "write", lambda self, records: (_ for _ in ()).throw(OSError("disk full")))

    with pytest.raises(OSError):
        tasks.scheduled_export(dataset.id)

    run = ExportRun.objects.get()
    assert run.status == "failed" and "disk full" in run.error and run.active is None
    assert not DatasetVersion.objects.exists() and list((export_root / "failing").iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_two_ticks_at_the_same_moment_make_one_version(export_root, monkeypatch):
    for _ in range(3):
        item_make()
    dataset = scheduled("raced")
    real_write = CsvWriter.write

    def slow_write(self, records):
        time.sleep(1.0)  # keeps the first run busy while the second tick arrives
        real_write(self, records)

    monkeypatch.setattr(CsvWriter, "write", slow_write)
    results, errors = [], []
    barrier = threading.Barrier(2)

    def tick(delay: float) -> None:
        try:
            barrier.wait()
            time.sleep(delay)
            results.append(tasks.scheduled_export(dataset.id))
        except Exception as exc:  # noqa: BLE001 (surfaced by the assertion below)
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=tick, args=(delay,)) for delay in (0.0, 0.3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert errors == []
    assert len(results) == 2 and results.count(None) == 1  # one made the version, one was skipped
    assert DatasetVersion.objects.count() == 1 and ExportRun.objects.count() == 1
