"""The one-line hooks: a real export (made or failed) and a real cluster run each record their notification."""

import json

import pytest

from config.celery import app as celery_app
from exports import runs
from exports.models import DatasetVersion, Trigger
from exports.tables import ParquetWriter
from notifications import services
from notifications.models import Delivery, Event, Notification
from tests.factories.clustering import add_items, run_clustering
from tests.factories.exports import dataset_make, item_make
from tests.servers import Receiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def slack():
    """A Slack-compatible receiver subscribed to everything, deliveries run in this process."""
    server = Receiver()
    services.destination_create(
        name="team", kind="slack", url=server.url, events=[value for value, _ in Event.choices if value != Event.TEST]
    )
    celery_app.conf.task_always_eager = True
    yield server
    celery_app.conf.task_always_eager = False
    server.close()


def texts(server) -> list[str]:
    return [json.loads(request["body"])["text"] for request in server.requests]


def test_an_export_that_makes_a_version_announces_it_once(export_root, slack, django_capture_on_commit_callbacks):
    for _ in range(3):
        item_make()
    dataset = dataset_make("wrong-files", formats=("csv",))
    with django_capture_on_commit_callbacks(execute=True):
        run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
        version = runs.export_run_execute(run_id=run.id)
    assert version.number == 1
    notification = Notification.objects.get(event=Event.EXPORT_VERSION)
    assert notification.dedup_key == f"export.version:{version.id}"
    assert notification.payload["version"]["items"] == 3 and notification.payload["dataset"]["name"] == "wrong-files"
    assert texts(slack) == [
        f"Dataset wrong-files v1: 3 items exported\nPurpose train, formats csv, made by command\n"
        f"http://127.0.0.1:8000/datasets/{dataset.id}/v1/"
    ]
    # Unchanged data makes no version, and no message.
    with django_capture_on_commit_callbacks(execute=True):
        again = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
        runs.export_run_execute(run_id=again.id)
    assert DatasetVersion.objects.count() == 1 and len(slack.requests) == 1


def test_a_failed_export_announces_its_scrubbed_error_and_leaves_no_version(
    export_root, slack, monkeypatch, django_capture_on_commit_callbacks
):
    item_make()
    dataset = dataset_make("fails", formats=("csv", "parquet"))

    def broken(self, records):
        raise OSError("disk full at /home/alice/exports (ask bob@example.com)")

    monkeypatch.setattr(ParquetWriter, "write", broken)
    with django_capture_on_commit_callbacks(execute=True):
        run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
        with pytest.raises(OSError, match="disk full"):
            runs.export_run_execute(run_id=run.id)
    assert DatasetVersion.objects.count() == 0
    (text,) = texts(slack)
    assert text.startswith("Export of dataset fails failed: OSError: disk full")
    assert "bob@example.com" not in text and "[EMAIL]" in text
    assert Notification.objects.get(event=Event.EXPORT_FAILED).dedup_key == f"export.failed:{run.id}"


def test_a_broken_outbox_never_fails_the_export_it_reports_on(export_root, monkeypatch):
    item_make()
    services.destination_create(name="team", kind="slack", url="https://hooks.example.com/x", events=[Event.EXPORT_VERSION])

    def outbox_broken(**kwargs):
        raise RuntimeError("the outbox table is locked")

    monkeypatch.setattr(services.Notification.objects, "create", outbox_broken)
    dataset = dataset_make("still-exports", formats=("csv",))
    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
    version = runs.export_run_execute(run_id=run.id)
    assert version is not None and version.number == 1
    assert Notification.objects.count() == 0 and Delivery.objects.count() == 0


def test_a_cluster_run_announces_each_new_category_past_the_threshold_once(
    centers, slack, settings, django_capture_on_commit_callbacks
):
    settings.NOTIFY_NEW_CATEGORY_MIN_ITEMS = 25
    from tests.factories import source_make

    source, _ = source_make()
    add_items(source, centers, 30, seed=1, themes={0: "", 1: ""})
    add_items(source, centers, 10, seed=2, themes={2: ""})
    with django_capture_on_commit_callbacks(execute=True):
        run_clustering()
        run_clustering()
    # Two themes of 30 items pass 25; the one of 10 does not; the second run repeats nothing.
    found = texts(slack)
    assert len(found) == 2, found
    assert all(" holds 30 items" in text and text.startswith("New category “") for text in found)
    assert Notification.objects.filter(event=Event.CATEGORY_NEW).count() == 2
