"""python manage.py export DATASET, and an export killed with SIGKILL in the middle of writing."""

import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from exports.models import DatasetVersion, ExportRun
from feedback.models import FeedbackItem
from tests.factories.exports import (
    OCCURRED,
    dataset_make,
    export,
    item_make,
    source_get,
)
from tests.servers import database_url

ROOT = Path(__file__).resolve().parents[2]


def run_command(*args) -> list[str]:
    out = io.StringIO()
    call_command("export", *args, stdout=out)
    return out.getvalue().strip().splitlines()


@pytest.mark.django_db
def test_it_exports_a_version_and_prints_its_folder_last(export_root):
    item_make()
    dataset_make("cli-set", formats=("csv", "chat_jsonl"))

    lines = run_command("cli-set")

    assert lines[0].startswith("cli-set v1: 1 items, 0 held out, 4 files | ")
    assert lines[-1] == str(export_root / "cli-set" / "v1")
    version = DatasetVersion.objects.get()
    assert version.trigger == "command" and version.made_by == "command"
    assert run_command("cli-set", "--force")[-1] == str(export_root / "cli-set" / "v2")


@pytest.mark.django_db
def test_an_unknown_dataset_is_an_error_that_names_the_known_ones(export_root):
    dataset_make("known-one")
    with pytest.raises(CommandError, match=r"no dataset named 'nope' \(datasets: known-one\)"):
        run_command("nope")


@pytest.mark.django_db
def test_incremental_takes_only_new_items(export_root):
    item_make()
    dataset_make("cli-inc")
    run_command("cli-inc")
    new = item_make()

    lines = run_command("cli-inc", "--incremental")

    assert lines[0].startswith("cli-inc v2: 1 items")
    assert set(DatasetVersion.objects.get(number=2).members.values_list("item_id", flat=True)) == {new.id}


@pytest.mark.django_db
def test_a_second_export_while_one_is_active_is_refused(export_root):
    dataset = dataset_make("cli-busy")
    ExportRun.objects.create(dataset=dataset, trigger="reviewer")
    with pytest.raises(CommandError, match="already queued"):
        run_command("cli-busy")


@pytest.mark.django_db
def test_verify_says_whether_a_version_is_byte_identical_when_written_again(export_root):
    item = item_make()
    version = export(dataset_make("cli-verify", formats=("csv", "parquet", "chat_jsonl")))

    assert run_command("cli-verify", "--verify", "1")[0] == "cli-verify v1: byte-identical when written again"
    FeedbackItem.objects.filter(id=item.id).update(comment="edited since")
    with pytest.raises(
        CommandError, match=r"differs when written again: README.md, items.csv, items.parquet, manifest.json"
    ):
        run_command("cli-verify", "--verify", str(version.number))
    with pytest.raises(CommandError, match="has no version 7"):
        run_command("cli-verify", "--verify", "7")


# --- Killed mid-write ----------------------------------------------------------------------


def many_items(count: int) -> None:
    source = source_get()
    long_answer = "I renamed foo to bar in utils.py and updated the 3 call sites; the suite passes. " * 8
    for start in range(0, count, 5000):
        FeedbackItem.objects.bulk_create(
            [
                FeedbackItem(
                    source=source,
                    external_id=f"bulk-{i}",
                    kind="rating",
                    rating=1 if i % 3 else -1,
                    comment=f"Comment number {i}",
                    model_version=("2.0", "2.1", "2.2")[i % 3],
                    variant="AB"[i % 2],
                    context={
                        "messages": [{"role": "user", "content": f"Task {i}: rename foo to bar"}],
                        "output": long_answer,
                    },
                    occurred_at=OCCURRED,
                    receipt_id=uuid.uuid4(),
                )
                for i in range(start, min(start + 5000, count))
            ]
        )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_export_killed_mid_write_leaves_no_version_and_the_next_run_succeeds(export_root):
    many_items(40_000)
    dataset_make("killed", formats=("chat_jsonl", "eval_jsonl", "csv", "parquet"))
    env = dict(os.environ, DATABASE_URL=database_url(), DATA_DIR=str(settings.DATA_DIR), EXPORT_ROOT=str(export_root))
    process = subprocess.Popen(
        [sys.executable, "manage.py", "export", "killed"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    folder = export_root / "killed"
    deadline = time.monotonic() + 120
    written = None
    while time.monotonic() < deadline and process.poll() is None:
        temporary = next((p for p in folder.glob(".v1.tmp-*")), None) if folder.exists() else None
        csv_file = temporary / "items.csv" if temporary else None
        if csv_file and csv_file.exists() and csv_file.stat().st_size > 200_000:  # well into the items
            written = temporary
            break
        time.sleep(0.02)
    assert written is not None, process.communicate()[0].decode()[-3000:]
    os.kill(process.pid, signal.SIGKILL)
    process.wait()

    assert process.returncode == -signal.SIGKILL
    assert not (folder / "v1").exists() and written.exists()  # killed before the rename
    assert not DatasetVersion.objects.exists()
    killed_run = ExportRun.objects.get()
    assert killed_run.status == "running" and killed_run.pid == process.pid

    out = io.StringIO()
    call_command("export", "killed", stdout=out)

    assert out.getvalue().strip().splitlines()[-1] == str(folder / "v1")
    assert sorted(p.name for p in folder.iterdir()) == ["v1"]  # the leftover is gone
    killed_run.refresh_from_db()
    assert killed_run.status == "failed" and "its process ended" in killed_run.error
    version = DatasetVersion.objects.get()
    assert version.item_count == 40_000
    manifest = json.loads((folder / "v1" / "manifest.json").read_text())
    assert manifest["counts"]["items"] == 40_000 and timezone.now()
