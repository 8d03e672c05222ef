"""Export runs and the versions they make: files, manifest, members, reruns, failures and double runs."""

import hashlib
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from exports import datasets, runs, selectors, writing
from exports.diffs import version_diff
from exports.models import Dataset, DatasetVersion, ExportRun, Mode, Trigger
from exports.schemas import DatasetFilters, DatasetPatch
from exports.selectors import (
    categories_with_merged,
    items_matching,
    record_passes,
    records_stream,
)
from exports.tables import ParquetWriter
from feedback.models import FeedbackItem
from labeling.models import Assignment, Category
from tests.factories.exports import (
    dataset_make,
    export,
    item_make,
    label_make,
    member_ids,
    source_get,
    unit,
)
from tests.factories import user_make

pytestmark = pytest.mark.django_db

ALL_FORMATS = ("chat_jsonl", "preference_jsonl", "hints_jsonl", "eval_jsonl", "csv", "parquet")


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def folder_bytes(folder) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


# --- A version on disk -------------------------------------------------------------


def test_an_export_writes_a_numbered_version_with_its_files_manifest_and_card(export_root):
    for i in range(3):
        item_make(comment=f"It edited the wrong file, case {i}.")
    dataset = dataset_make("wrong-files", formats=ALL_FORMATS, description="Edits in the wrong file.")

    first = export(dataset)
    second = export(dataset, force=True)

    assert (first.number, second.number) == (1, 2)
    folder = export_root / "wrong-files" / "v1"
    names = {path.name for path in folder.iterdir()}
    assert names == {
        "chat.jsonl",
        "preference.jsonl",
        "hints.jsonl",
        "eval.jsonl",
        "items.csv",
        "items.parquet",
        "manifest.json",
        "README.md",
    }
    assert (export_root / "wrong-files" / "v2").is_dir()
    assert [p.name for p in (export_root / "wrong-files").iterdir() if p.name.startswith(".")] == []
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["dataset"] == "wrong-files" and manifest["version"] == 1 and manifest["purpose"] == "train"
    assert manifest["counts"]["items"] == 3 and first.item_count == 3
    for entry in manifest["files"]:
        assert entry["sha256"] == sha256(folder / entry["name"]), entry["name"]
        assert entry["bytes"] == (folder / entry["name"]).stat().st_size
    assert hashlib.sha256((folder / "manifest.json").read_bytes()).hexdigest() == first.manifest_sha256
    assert manifest["app_version"] and manifest["made_by"] == "command" and manifest["trigger"] == "command"
    card = (folder / "README.md").read_text()
    assert card.startswith("# wrong-files v1") and "Edits in the wrong file." in card
    assert "No matching item was left out." in card and 'load_dataset("parquet"' in card


def test_the_manifest_counts_by_category_model_version_and_split_and_records_who_made_it(export_root):
    category = Category.objects.create(name="Edited the wrong file", status=Category.Status.CONFIRMED)
    reviewer = user_make("rita", "reviewer")
    a = item_make(model_version="2.0")
    Assignment.objects.create(item=a, category=category)
    b = item_make(model_version="2.1")
    label_make(b, category=category, split="train")
    item_make(model_version="")
    dataset = dataset_make("counts")

    run = runs.export_run_start(dataset=dataset, trigger=Trigger.REVIEWER, user=reviewer, enqueue=False)
    version = runs.export_run_execute(run_id=run.id)

    counts = version.manifest["counts"]
    assert counts["by_category"] == {"(none)": 1, "Edited the wrong file": 2}
    assert counts["by_model_version"] == {"(none)": 1, "2.0": 1, "2.1": 1}
    assert counts["by_split"] == {"train": 1, "unlabelled": 2}
    assert counts["rows_by_format"] == {"csv": 3}
    assert version.manifest["made_by"] == "rita" and version.created_by == reviewer
    assert version.manifest["created_at"] == version.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    assert version.manifest["held_out"]["total"] == 0


def test_the_same_version_written_twice_is_byte_identical(export_root, tmp_path):
    category = Category.objects.create(name="Claimed tests passed", status=Category.Status.CONFIRMED)
    for i in range(25):
        item = item_make(comment=f"Claimed success on run {i} — “all green” ✓", vector=unit(i))
        if i % 3 == 0:
            label_make(
                item,
                category=category,
                hint="Read the test output.",
                corrected_response=f"3 tests fail ({i}).",
                tags=["claimed success falsely"],
                split="train",
            )
    dataset = dataset_make("rerun", formats=ALL_FORMATS)
    version = export(dataset)
    original = folder_bytes(export_root / "rerun" / "v1")

    for attempt in range(2):
        again = tmp_path / f"again-{attempt}"
        again.mkdir()
        writing.dataset_version_write(version=DatasetVersion.objects.get(id=version.id), folder=again)
        assert folder_bytes(again) == original

    check = writing.dataset_version_verify(version=version)
    assert check.identical and check.differing == []


def test_verify_names_the_files_that_differ_when_an_item_changed_since(export_root):
    item = item_make()
    version = export(dataset_make("drift", formats=("csv", "chat_jsonl")))
    FeedbackItem.objects.filter(id=item.id).update(comment="changed after the export")

    check = writing.dataset_version_verify(version=version)

    assert not check.identical
    assert check.differing == ["README.md", "items.csv", "manifest.json"]


def test_a_missing_version_folder_is_restored_by_verify(export_root):
    item_make()
    version = export(dataset_make("restore", formats=("csv",)))
    folder = export_root / "restore" / "v1"
    original = folder_bytes(folder)
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()

    check = writing.dataset_version_verify(version=version)

    assert check.restored and folder_bytes(folder) == original


# --- Members and diffs -------------------------------------------------------------


def test_versions_record_their_members_so_two_versions_can_be_diffed(export_root):
    old_items = [item_make(model_version="2.0") for _ in range(3)]
    dataset = dataset_make("diffed", filters={"model_versions": ["2.0"]})
    v1 = export(dataset)
    FeedbackItem.objects.filter(id=old_items[0].id).update(model_version="2.2")
    new_item = item_make(model_version="2.0")

    v2 = export(dataset)
    diff = version_diff(old=v1, new=v2)

    assert member_ids(v1) == {item.id for item in old_items}
    assert (diff.added_count, diff.removed_count, diff.kept_count) == (1, 1, 2)
    assert [item_id for item_id, _ in diff.added] == [new_item.id]
    assert [item.id for _, item in diff.removed] == [old_items[0].id]


def test_an_incremental_export_takes_only_items_that_are_in_no_earlier_version(export_root):
    first = [item_make() for _ in range(3)]
    dataset = dataset_make("incremental")
    v1 = export(dataset)
    later = [item_make() for _ in range(2)]

    v2 = export(dataset, mode=Mode.INCREMENTAL)
    v3 = export(dataset, mode=Mode.INCREMENTAL, force=True)

    assert member_ids(v1) == {item.id for item in first}
    assert member_ids(v2) == {item.id for item in later}
    assert v2.mode == "incremental" and v2.base_number == 1 and v2.manifest["base_version"] == 1
    # Nothing new: only a forced run makes a version, an empty one.
    assert v3.item_count == 0 and (export_root / "incremental" / "v3" / "items.csv").read_text().count("\n") == 1


# --- Filters -----------------------------------------------------------------------


def test_each_filter_narrows_the_items(export_root):
    reviewer = user_make("rita", "reviewer")
    wrong_file = Category.objects.create(name="Wrong file", status=Category.Status.CONFIRMED)
    merged = Category.objects.create(name="Edited other file", status=Category.Status.MERGED, merged_into=wrong_file)
    other = source_get("other-backend")
    items = {
        "up": item_make(rating=1),
        "report": item_make(kind="report", rating=None, title="Broke the build", context={"transcript": "$ make"}),
        "v22": item_make(model_version="2.2"),
        "variant_b": item_make(variant="B"),
        "other_source": item_make(source=other),
        "old": item_make(occurred_at=datetime(2026, 10, 1, 23, 59, tzinfo=UTC)),
        "hinted": item_make(),
        "corrected": item_make(),
        "tagged": item_make(),
        "not_failure": item_make(),
        "assigned": item_make(),
        "label_in_merged": item_make(),
    }
    label_make(items["hinted"], hint="Ask which file.", tags=["wrong file"])
    label_make(items["corrected"], corrected_response="Renamed foo in utils.py.", tags=['quote " inside', "too slow"])
    label_make(items["tagged"], tags=["special-cased a test"])
    label_make(items["not_failure"], verdict="not_failure")
    Assignment.objects.create(item=items["assigned"], category=wrong_file)
    label_make(items["label_in_merged"], category=merged, reviewer=reviewer)

    def chosen(**filters) -> set[str]:
        parsed = DatasetFilters.model_validate(filters)
        found = set()
        for records in records_stream(items_matching(filters=parsed), with_vector=False):
            ids = categories_with_merged(parsed.categories)
            found |= {r.id for r in records if record_passes(r, parsed, category_ids=ids)}
        return {name for name, item in items.items() if item.id in found}

    assert chosen(rating="up") == {"up"}
    assert chosen(rating="none") == {"report"}
    assert chosen(kinds=["report"]) == {"report"}
    assert chosen(model_versions=["2.2"]) == {"v22"}
    assert chosen(variants=["B"]) == {"variant_b"}
    assert chosen(sources=["other-backend"]) == {"other_source"}
    assert chosen(date_to="2026-10-01") == {"old"}
    assert "old" not in chosen(date_from="2026-10-02")
    assert chosen(reviewed_only=True) == {"hinted", "corrected", "tagged", "not_failure", "label_in_merged"}
    assert chosen(verdicts=["not_failure"]) == {"not_failure"}
    assert chosen(has_hint=True) == {"hinted"}
    assert chosen(has_corrected_response=True) == {"corrected"}
    assert chosen(tags=["special-cased a test", "wrong file"]) == {"tagged", "hinted"}
    assert chosen(tags=['quote " inside']) == {"corrected"}
    assert chosen(tags=["quote"]) == set()
    assert chosen(categories=[wrong_file.id]) == {"assigned", "label_in_merged"}
    assert chosen(rating="down", variants=["B"]) == {"variant_b"}


def test_label_filters_judge_the_latest_label_of_a_double_reviewed_item(export_root):
    item = item_make()
    ann, bob = user_make("ann", "reviewer"), user_make("bob", "reviewer")
    # The reviewers agree on the verdict: the label changed last is the one exported.
    first = label_make(item, reviewer=ann, verdict="failure", hint="Use utils.py.")
    second = label_make(item, reviewer=bob, verdict="failure")
    type(first).objects.filter(id=first.id).update(updated_at=timezone.now() - timedelta(hours=1))
    type(second).objects.filter(id=second.id).update(updated_at=timezone.now())

    with_hint = export(dataset_make("with-hint", filters={"has_hint": True}))
    failures = export(dataset_make("failures", filters={"verdicts": ["failure"]}))

    assert with_hint.item_count == 0
    assert member_ids(failures) == {item.id}


def test_an_item_whose_reviewers_disagree_is_left_out_until_settled(export_root):
    item = item_make()
    label_make(item, reviewer=user_make("ann", "reviewer"), verdict="failure")
    label_make(item, reviewer=user_make("bob", "reviewer"), verdict="not_failure")

    failures = export(dataset_make("failures", filters={"verdicts": ["failure"]}))
    not_failures = export(dataset_make("not-failures", filters={"verdicts": ["not_failure"]}))

    assert failures.item_count == 0 and not_failures.item_count == 0
    assert failures.counts["disputed_left_out"] == not_failures.counts["disputed_left_out"] == 1


def test_the_export_reads_items_in_chunks_without_a_query_per_item(
    export_root, monkeypatch, django_assert_max_num_queries
):
    category = Category.objects.create(name="Wrong file", status=Category.Status.CONFIRMED)
    for i in range(60):
        item = item_make(vector=unit(i))
        Assignment.objects.create(item=item, category=category)
        label_make(item, category=category, hint="h")
    eval_set = dataset_make("eval-chunks", purpose="eval", formats=("eval_jsonl",), filters={"model_versions": ["9"]})
    export(eval_set)
    dataset = dataset_make("chunked", formats=ALL_FORMATS)
    monkeypatch.setattr(selectors, "CHUNK_SIZE", 10)
    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)

    # 6 chunks: items and their labels, one progress write each; the rest is fixed.
    with django_assert_max_num_queries(45):
        version = runs.export_run_execute(run_id=run.id)

    assert version.item_count == 60


# --- Runs: one at a time, failures leave nothing --------------------------------------


def test_a_second_run_of_a_dataset_is_refused_while_the_first_is_active(export_root, no_broker):
    dataset = dataset_make("busy")
    first = runs.export_run_start(dataset=dataset, trigger=Trigger.REVIEWER)

    with pytest.raises(runs.ExportAlreadyRunning) as refused:
        runs.export_run_start(dataset=dataset, trigger=Trigger.SCHEDULE, enqueue=False)

    assert refused.value.run == first
    assert ExportRun.objects.count() == 1
    # The database itself refuses a second active run, whoever inserts it.
    with pytest.raises(IntegrityError), transaction.atomic():
        ExportRun.objects.create(dataset=dataset, trigger=Trigger.API)
    other = dataset_make("other")
    assert runs.export_run_start(dataset=other, trigger=Trigger.REVIEWER).status == "queued"


def test_the_run_is_queued_after_commit_and_a_redelivered_task_does_nothing(
    export_root, no_broker, django_capture_on_commit_callbacks
):
    item_make()
    dataset = dataset_make("queued")
    with django_capture_on_commit_callbacks(execute=True):
        run = runs.export_run_start(dataset=dataset, trigger=Trigger.REVIEWER)
        assert no_broker == []
    assert no_broker == [run.id]

    assert runs.export_run_execute(run_id=run.id) is not None
    assert runs.export_run_execute(run_id=run.id) is None
    assert DatasetVersion.objects.count() == 1


def test_a_failed_run_is_marked_failed_with_its_error_and_leaves_no_version(export_root, monkeypatch):
    for _ in range(5):
        item_make()
    dataset = dataset_make("fails", formats=("csv", "parquet"))

    def broken(self, records):
        raise OSError("disk full")

    monkeypatch.setattr(ParquetWriter, "write", broken)
    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
    with pytest.raises(OSError, match="disk full"):
        runs.export_run_execute(run_id=run.id)

    run.refresh_from_db()
    assert run.status == "failed" and run.active is None and "OSError: disk full" in run.error
    assert DatasetVersion.objects.count() == 0
    assert list((export_root / "fails").iterdir()) == []
    monkeypatch.undo()
    assert export(Dataset.objects.get(name="fails")).number == 1


def test_a_failure_after_the_rename_removes_the_renamed_folder_and_records_nothing(export_root, monkeypatch):
    item_make()
    dataset = dataset_make("late-failure")
    real_fsync = writing.fsync

    def fsync(path):
        if path == export_root / "late-failure":  # the step right after the rename
            raise OSError("I/O error")
        real_fsync(path)

    monkeypatch.setattr(writing, "fsync", fsync)
    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
    with pytest.raises(OSError):
        runs.export_run_execute(run_id=run.id)

    assert DatasetVersion.objects.count() == 0 and ExportRun.objects.get().status == "failed"
    assert list((export_root / "late-failure").iterdir()) == []


def test_a_run_whose_process_died_is_failed_so_the_next_run_can_start(export_root):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    dataset = dataset_make("orphaned")
    ExportRun.objects.create(
        dataset=dataset,
        trigger=Trigger.COMMAND,
        status="running",
        host=runs.HOST,
        pid=dead.pid,
        heartbeat_at=timezone.now(),
    )

    version = export(dataset)

    stale = ExportRun.objects.get(status="failed")
    assert "its process ended" in stale.error and stale.active is None
    assert version.number == 1


def test_a_run_without_a_heartbeat_for_too_long_is_failed_but_a_live_one_is_kept(export_root, settings):
    settings.EXPORT_STUCK_SECONDS = 60
    dataset = dataset_make("quiet")
    live = ExportRun.objects.create(
        dataset=dataset, trigger=Trigger.API, status="running", host="elsewhere", pid=1, heartbeat_at=timezone.now()
    )
    assert runs.export_runs_reset_stuck() == 0
    ExportRun.objects.filter(id=live.id).update(heartbeat_at=timezone.now() - timedelta(seconds=61))

    assert runs.export_runs_reset_stuck() == 1
    live.refresh_from_db()
    assert live.status == "failed" and live.error == "stopped: no progress from its worker"


def test_the_next_run_removes_what_a_killed_run_left_behind(export_root):
    item_make()
    dataset = dataset_make("leftovers")
    root = export_root / "leftovers"
    (root / ".v1.tmp-999").mkdir(parents=True)
    (root / ".v1.tmp-999" / "items.csv").write_text("partial")
    (root / "v1").mkdir()  # renamed, but its row never committed
    (root / "v1" / "items.csv").write_text("orphan")

    version = export(dataset)

    assert sorted(p.name for p in root.iterdir()) == ["v1"]
    assert (root / "v1" / "items.csv").read_text() != "orphan"
    assert version.number == 1


# --- Dataset rules -----------------------------------------------------------------


def test_the_name_and_purpose_are_fixed_once_a_version_exists(export_root):
    dataset = dataset_make("fixed")
    datasets.dataset_update(dataset=dataset, patch=DatasetPatch(name="renamed"))
    assert Dataset.objects.get(id=dataset.id).name == "renamed"
    export(dataset)

    for patch, field in ((DatasetPatch(name="again"), "name"), (DatasetPatch(purpose="eval"), "purpose")):
        with pytest.raises(datasets.DatasetRefused) as refused:
            datasets.dataset_update(dataset=dataset, patch=patch)
        assert refused.value.field == field
    datasets.dataset_update(dataset=dataset, patch=DatasetPatch(description="Still editable."))
    assert Dataset.objects.get(id=dataset.id).description == "Still editable."


def test_unknown_categories_and_sources_are_refused_with_their_path():
    with pytest.raises(datasets.DatasetRefused) as refused:
        dataset_make("bad", filters={"categories": [12345]})
    assert refused.value.field == "filters.categories[0]" and refused.value.status == 422
    source_get("known")
    with pytest.raises(datasets.DatasetRefused) as refused:
        dataset_make("bad", filters={"sources": ["known", "unknown"]})
    assert refused.value.field == "filters.sources[1]"
    dataset_make("taken")
    with pytest.raises(datasets.DatasetRefused) as refused:
        dataset_make("taken")
    assert refused.value.status == 409 and refused.value.field == "name"
    assert Dataset.objects.count() == 1


def test_deleting_a_dataset_removes_its_versions_schedule_and_files(export_root, django_capture_on_commit_callbacks):
    from django_celery_beat.models import PeriodicTask

    from exports.schemas import ScheduleIn

    item_make()
    dataset = dataset_make("doomed")
    datasets.dataset_schedule_set(dataset=dataset, schedule=ScheduleIn(cron="0 3 * * *"))
    export(dataset)
    with django_capture_on_commit_callbacks(execute=True):
        datasets.dataset_delete(dataset=dataset)

    assert not Dataset.objects.exists() and not DatasetVersion.objects.exists()
    assert not PeriodicTask.objects.filter(task=datasets.SCHEDULED_TASK).exists()
    assert not (export_root / "doomed").exists()


def test_a_run_that_cannot_be_queued_fails_at_once_with_the_reason(export_root, monkeypatch, django_capture_on_commit_callbacks):
    from kombu.exceptions import OperationalError

    def unreachable(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr("exports.tasks.export_run.apply_async", unreachable)
    dataset = dataset_make("no-broker")
    with django_capture_on_commit_callbacks(execute=True):
        run = runs.export_run_start(dataset=dataset, trigger=Trigger.REVIEWER)

    run.refresh_from_db()
    assert run.status == "failed" and run.active is None
    assert run.error == "the task queue is unreachable (OperationalError); export again later"
    assert runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False).status == "queued"


def test_a_threshold_outside_zero_to_one_is_refused(settings):
    from django.core.exceptions import ImproperlyConfigured

    from exports import holdout

    settings.HOLDOUT_SIMILARITY = 1.5
    with pytest.raises(ImproperlyConfigured, match="HOLDOUT_SIMILARITY"):
        holdout.similarity_threshold()
