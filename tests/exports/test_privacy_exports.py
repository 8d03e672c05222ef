"""Exports write scrubbed text only, count the placeholders in the manifest, and check their own output."""

import json

import pyarrow.parquet as pq
import pytest

from exports import records, runs, writing
from exports.models import DatasetVersion, ExportRun, Trigger
from tests.factories.exports import dataset_make, export, item_make, label_make

pytestmark = pytest.mark.django_db

ALL_FORMATS = ("chat_jsonl", "preference_jsonl", "hints_jsonl", "eval_jsonl", "csv", "parquet")
AWS_KEY = "AKIA4HKQ2Z7XNB3LPQWE"
GITHUB_TOKEN = "ghp_8fK2mQ9xLr4TzW7vN1bC5yH3jD6sA0eP2uGi"
EMAIL = "jane.doe@acme-corp.com"
PHONE = "+44 20 7946 0958"
HOME = "/home/jdoe"
PLANTED = (AWS_KEY, GITHUB_TOKEN, EMAIL, PHONE, HOME, "jdoe")


def planted_item():
    item = item_make(
        comment=f"It printed my key {AWS_KEY} and mailed {EMAIL}.",
        title=f"Leaked token {GITHUB_TOKEN}",
        context={
            "messages": [
                {"role": "user", "content": f"Fix {HOME}/src/app.py, call me on {PHONE}"},
            ],
            "output": f"Done, I used {GITHUB_TOKEN} to push.",
            "tool_calls": [
                {"name": "shell", "arguments": {"cmd": "env"}, "output": f"AWS_KEY={AWS_KEY}\nHOME={HOME}"},
            ],
        },
    )
    label_make(
        item,
        verdict="failure",
        hint=f"Never echo secrets; ask {EMAIL} instead.",
        corrected_response=f"I edited {HOME}/src/app.py without printing credentials.",
    )
    return item


def all_text(folder) -> str:
    texts = [path.read_text(encoding="utf-8") for path in folder.iterdir() if path.suffix != ".parquet"]
    texts.append(json.dumps(pq.read_table(folder / "items.parquet").to_pylist(), default=str, ensure_ascii=False))
    return "\n".join(texts)


def test_every_export_file_holds_placeholders_not_the_planted_secrets(export_root):
    planted_item()
    version = export(dataset_make("private", formats=ALL_FORMATS))

    folder = export_root / "private" / "v1"
    text = all_text(folder)
    for secret in PLANTED:
        assert secret not in text, secret
    for placeholder in ("[SECRET:aws_access_key]", "[SECRET:github_token]", "[EMAIL]", "[PHONE]", "[PATH_HOME]"):
        assert placeholder in text, placeholder
    for name in ("chat.jsonl", "preference.jsonl", "hints.jsonl", "eval.jsonl", "items.csv"):
        assert "[PATH_HOME]" in (folder / name).read_text(), name
    tool_calls = json.loads(pq.read_table(folder / "items.parquet").column("tool_calls").to_pylist()[0])
    assert AWS_KEY not in tool_calls[0]["output"] and "[PATH_HOME]" in tool_calls[0]["output"]

    manifest = json.loads((folder / "manifest.json").read_text())
    scrubbed = manifest["scrubbed"]
    assert scrubbed == version.manifest["scrubbed"]
    # comment + tool output; title + output; comment + hint; message; message + tool output + corrected response.
    assert scrubbed["SECRET:aws_access_key"] == 2
    assert scrubbed["SECRET:github_token"] == 2
    assert scrubbed["EMAIL"] == 2
    assert scrubbed["PHONE"] == 1
    assert scrubbed["PATH_HOME"] == 3


def test_the_manifest_counts_are_totals_over_the_version_and_empty_when_nothing_was_scrubbed(export_root):
    item_make(comment="Nothing private here.")
    clean = export(dataset_make("clean", formats=("csv",)))
    assert clean.manifest["scrubbed"] == {}

    planted_item()
    planted_item()
    version = export(dataset_make("twice", formats=("csv",)))
    assert version.manifest["scrubbed"]["EMAIL"] == 4


def test_a_row_that_slips_past_the_scrubber_fails_the_version_and_leaves_nothing(export_root, monkeypatch):
    planted_item()
    dataset = dataset_make("leaky", formats=("eval_jsonl", "csv", "parquet"))
    monkeypatch.setattr(records, "scrub_record", lambda record, **kwargs: record)

    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
    with pytest.raises(writing.UnscrubbedOutput, match="unscrubbed") as failure:
        runs.export_run_execute(run_id=run.id)

    message = str(failure.value)
    for name in ("aws_access_key", "github_token", "email", "home_path_unix"):
        assert name in message, name
    run.refresh_from_db()
    assert run.status == ExportRun.Status.FAILED and run.active is None
    assert "UnscrubbedOutput" in run.error and "aws_access_key" in run.error
    assert DatasetVersion.objects.count() == 0
    assert list((export_root / "leaky").iterdir()) == []
