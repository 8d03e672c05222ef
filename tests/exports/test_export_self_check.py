"""The export's self-check reads its files back side by side: still every row of every file is checked."""

import pytest

from exports import records, runs, writing
from exports.models import DatasetVersion, ExportRun, Trigger
from tests.factories.exports import dataset_make, export, item_make

pytestmark = pytest.mark.django_db

AWS_KEY = "AKIA4HKQ2Z7XNB3LPQWE"
FORMATS = ("eval_jsonl", "csv", "parquet")


def clean_items(count):
    return [item_make(comment=f"It edited the wrong file ({n}).", request=f"Rename foo{n} to bar") for n in range(count)]


def test_a_leak_in_the_last_row_past_many_clean_rows_fails_the_version_naming_its_files(export_root, monkeypatch):
    clean_items(40)
    leaky = item_make(request=f"deploy with {AWS_KEY} please")
    dataset = dataset_make("late-leak", formats=FORMATS)
    scrub_record = records.scrub_record
    # Everything is scrubbed but the last item, as if one record had slipped past.
    monkeypatch.setattr(
        records, "scrub_record", lambda record, **kwargs: record if record.id == leaky.id else scrub_record(record, **kwargs)
    )

    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
    with pytest.raises(writing.UnscrubbedOutput) as failure:
        runs.export_run_execute(run_id=run.id)

    assert str(failure.value) == (
        "the export files still hold unscrubbed text: aws_access_key in eval.jsonl, items.csv, items.parquet"
    )
    run.refresh_from_db()
    assert run.status == ExportRun.Status.FAILED
    assert DatasetVersion.objects.count() == 0


def test_many_clean_rows_in_every_format_export_with_nothing_reported(export_root):
    clean_items(40)
    item_make(request=f"deploy with {AWS_KEY} please")

    version = export(dataset_make("all-clean", formats=FORMATS))

    assert version.item_count == 41
    assert {entry["name"]: entry["rows"] for entry in version.files if entry["rows"] is not None} == {
        "eval.jsonl": 41,
        "items.csv": 41,
        "items.parquet": 41,
    }
    assert version.manifest["scrubbed"] == {"SECRET:aws_access_key": 1}
