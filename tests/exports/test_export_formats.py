"""Every format, loaded back as a trainer would: datasets (offline, local files), pandas, a JSON schema per line."""

import json
import os
from datetime import UTC, datetime

import jsonschema
import pandas as pd
import pytest

from labeling.models import Category
from tests.factories.exports import (
    dataset_make,
    export,
    item_make,
    label_make,
)

pytestmark = pytest.mark.django_db

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

MESSAGE = {
    "type": "object",
    "required": ["role", "content"],
    "additionalProperties": False,
    "properties": {"role": {"enum": ["system", "user", "assistant", "tool"]}, "content": {"type": "string"}},
}
MESSAGES = {"type": "array", "items": MESSAGE}
# A turn of the OpenAI / Hugging Face chat schema: a plain turn, an assistant turn calling tools, a tool result.
TOOL_CALL = {
    "type": "object",
    "required": ["id", "type", "function"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string"},
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name", "arguments"],
            "additionalProperties": False,
            "properties": {"name": {"type": "string"}, "arguments": {"type": "string"}},
        },
    },
}
CHAT_TURN = {
    "type": "object",
    "required": ["role", "content"],
    "additionalProperties": False,
    "properties": {
        **MESSAGE["properties"],
        "tool_calls": {"type": "array", "minItems": 1, "items": TOOL_CALL},
        "tool_call_id": {"type": "string"},
        "name": {"type": "string"},
    },
}
CHAT_TURNS = {"type": "array", "items": CHAT_TURN}
ASSISTANT_TURN = {
    "type": "array",
    "minItems": 1,
    "maxItems": 1,
    "items": {**MESSAGE, "properties": {**MESSAGE["properties"], "role": {"const": "assistant"}}},
}
TAGS = {"type": "array", "items": {"type": "string"}}
NULLABLE_TEXT = {"type": ["string", "null"]}

SCHEMAS = {
    "chat.jsonl": {
        "type": "object",
        "required": ["messages"],
        "additionalProperties": False,
        "properties": {"messages": {**CHAT_TURNS, "minItems": 2}},
    },
    "preference.jsonl": {
        "type": "object",
        "required": ["prompt", "chosen", "rejected"],
        "additionalProperties": False,
        # A pair across items puts each side's tool calls before its answer.
        "properties": {
            "prompt": {**CHAT_TURNS, "minItems": 1},
            "chosen": {**CHAT_TURNS, "minItems": 1},
            "rejected": {**CHAT_TURNS, "minItems": 1},
        },
    },
    "hints.jsonl": {
        "type": "object",
        "required": ["id", "messages", "output", "feedback", "hint", "category", "tags"],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "integer"},
            "messages": MESSAGES,
            "output": NULLABLE_TEXT,
            "feedback": {"type": "string"},
            "hint": {"type": "string", "minLength": 1},
            "category": NULLABLE_TEXT,
            "tags": TAGS,
        },
    },
    "eval.jsonl": {
        "type": "object",
        "required": ["id", "messages", "failure_category", "expected_behavior", "tags", "model_version", "severity"],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "integer"},
            "messages": {**MESSAGES, "minItems": 1},
            "failure_category": NULLABLE_TEXT,
            "expected_behavior": {"type": "string"},
            "tags": TAGS,
            "model_version": {"type": "string"},
            "severity": {"type": "string"},
        },
    },
}


@pytest.fixture
def corpus():
    """Items that exercise every branch of every format."""
    category = Category.objects.create(name="Claimed tests passed", status=Category.Status.CONFIRMED)
    items = {}
    items["corrected"] = item_make(comment="Said all green; 3 failed.", output="All tests pass ✓")
    label_make(
        items["corrected"],
        category=category,
        corrected_response="3 tests fail: test_a, test_b, test_c.",
        hint="Read the runner's summary line.",
        tags=["claimed success falsely"],
        split="train",
        severity="high",
    )
    items["hinted"] = item_make(comment="Edited main.py, not utils.py — “wrong file”.")
    label_make(items["hinted"], hint="Open utils.py first.", tags=["wrong file"])
    items["plain"] = item_make(rating=1, comment="", output="Renamed foo to bar in utils.py.", variant="B")
    items["report"] = item_make(
        kind="report",
        rating=None,
        title="Looped on read_file",
        comment="It read the same file 8 times.",
        expected="Notice the repeat and stop.",
        context={"transcript": "user: add lint\ntool read_file(...)"},
        severity="high",
        model_version="2.2",
    )
    items["bare"] = item_make(context={}, comment="No context at all.")
    items["multi_turn"] = item_make(
        context={
            "messages": [
                {"role": "system", "content": "You are coder."},
                {"role": "user", "content": "Fix the flaky test"},
                {"role": "assistant", "content": "Looking at tests/test_io.py"},
                {"role": "user", "content": "Go on", "name": "extra fields are dropped"},
                {"role": "narrator", "content": "unknown roles are dropped"},
            ],
            "output": "Added a retry decorator.",
        },
    )
    label_make(items["multi_turn"], corrected_response="Found the race in the fixture and fixed it.")
    return items


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def load_hf(kind: str, path, tmp_path):
    from datasets import load_dataset

    return load_dataset(kind, data_files=str(path), split="train", cache_dir=str(tmp_path / "hf-cache"))


def test_every_jsonl_line_matches_its_schema_and_loads_with_datasets(export_root, corpus, tmp_path):
    dataset = dataset_make("all-formats", formats=("chat_jsonl", "preference_jsonl", "hints_jsonl", "eval_jsonl"))
    version = export(dataset)
    folder = export_root / "all-formats" / "v1"

    for name, schema in SCHEMAS.items():
        rows = lines(folder / name)
        for row in rows:
            jsonschema.validate(row, schema)
        loaded = load_hf("json", folder / name, tmp_path)
        assert loaded.num_rows == len(rows), name
        assert sorted(loaded.column_names) == sorted(schema["required"]), name
        entry = next(e for e in version.files if e["name"] == name)
        assert entry["rows"] == len(rows)


def test_chat_lines_end_with_the_corrected_response_else_a_thumbs_up_output(export_root, corpus):
    export(dataset_make("chat", formats=("chat_jsonl",)))
    rows = lines(export_root / "chat" / "v1" / "chat.jsonl")

    # Ordered by item id; the report (a transcript, not a conversation), the bare item and the
    # thumbs-down without a correction ("hinted") are skipped.
    assert [row["messages"][-1]["content"] for row in rows] == [
        "3 tests fail: test_a, test_b, test_c.",
        "Renamed foo to bar in utils.py.",
        "Found the race in the fixture and fixed it.",
    ]
    assert rows[0]["messages"] == [
        {"role": "user", "content": "Rename foo to bar in utils.py"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "edit_file", "arguments": '{"path":"main.py"}'},
                }
            ],
        },
        # No result was recorded for the call: its tool turn is empty.
        {"role": "tool", "tool_call_id": "call_1", "content": ""},
        {"role": "assistant", "content": "3 tests fail: test_a, test_b, test_c."},
    ]
    assert [m["role"] for m in rows[2]["messages"]] == ["system", "user", "assistant", "user", "assistant"]


def test_preference_pairs_put_the_correction_against_the_rated_output(export_root, corpus):
    export(dataset_make("prefs", formats=("preference_jsonl",)))
    rows = lines(export_root / "prefs" / "v1" / "preference.jsonl")

    # Two corrections, then the thumbs-up against the first thumbs-down to the same request.
    assert len(rows) == 3
    assert rows[0]["chosen"] == [{"role": "assistant", "content": "3 tests fail: test_a, test_b, test_c."}]
    assert rows[0]["rejected"] == [{"role": "assistant", "content": "All tests pass ✓"}]
    # The run's tool call is shared by both sides: it is part of the prompt.
    assert [turn["role"] for turn in rows[0]["prompt"]] == ["user", "assistant", "tool"]
    assert rows[0]["prompt"][0] == {"role": "user", "content": "Rename foo to bar in utils.py"}
    assert rows[2]["prompt"] == [{"role": "user", "content": "Rename foo to bar in utils.py"}]
    assert rows[2]["chosen"][-1] == {"role": "assistant", "content": "Renamed foo to bar in utils.py."}
    assert rows[2]["rejected"][-1] == {"role": "assistant", "content": "All tests pass ✓"}


def test_hint_and_eval_lines_carry_the_reviewers_words(export_root, corpus):
    export(dataset_make("words", purpose="eval", formats=("hints_jsonl", "eval_jsonl")))
    folder = export_root / "words" / "v1"
    hints = lines(folder / "hints.jsonl")
    evals = {row["id"]: row for row in lines(folder / "eval.jsonl")}

    assert [(row["id"], row["hint"]) for row in hints] == [
        (corpus["corrected"].id, "Read the runner's summary line."),
        (corpus["hinted"].id, "Open utils.py first."),
    ]
    assert hints[0]["category"] == "Claimed tests passed" and hints[0]["tags"] == ["claimed success falsely"]
    assert hints[1]["feedback"] == "Edited main.py, not utils.py — “wrong file”."
    assert evals[corpus["corrected"].id]["expected_behavior"] == "Read the runner's summary line."
    assert evals[corpus["corrected"].id]["failure_category"] == "Claimed tests passed"
    assert evals[corpus["corrected"].id]["severity"] == "high"
    assert evals[corpus["multi_turn"].id]["expected_behavior"] == "Found the race in the fixture and fixed it."
    report = evals[corpus["report"].id]
    assert report["expected_behavior"] == "Notice the repeat and stop."
    assert report["messages"] == [{"role": "user", "content": "user: add lint\ntool read_file(...)"}]
    assert corpus["bare"].id not in evals


def test_csv_and_parquet_have_one_row_per_item_and_load_with_pandas_and_datasets(export_root, corpus, tmp_path):
    version = export(dataset_make("tables", formats=("csv", "parquet")))
    folder = export_root / "tables" / "v1"
    ids = sorted(item.id for item in corpus.values())

    frame = pd.read_csv(folder / "items.csv", keep_default_na=False)
    table = pd.read_parquet(folder / "items.parquet")

    assert frame["id"].tolist() == ids and table["id"].tolist() == ids and version.item_count == len(ids)
    assert list(frame.columns) == list(table.columns)
    corrected = frame.set_index("id").loc[corpus["corrected"].id]
    assert json.loads(corrected["tags"]) == ["claimed success falsely"]
    assert json.loads(corrected["messages"])[0]["content"] == "Rename foo to bar in utils.py"
    assert corrected["corrected_response"] == "3 tests fail: test_a, test_b, test_c." and corrected["split"] == "train"
    assert corrected["occurred_at"] == "2026-11-20T12:00:00Z"
    assert json.loads(corrected["tool_calls"]) == [{"arguments": {"path": "main.py"}, "name": "edit_file"}]
    row = table.set_index("id").loc[corpus["multi_turn"].id]
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "user"]
    assert row["occurred_at"] == datetime(2026, 11, 20, 12, tzinfo=UTC)
    report = table.set_index("id").loc[corpus["report"].id]
    assert pd.isna(report["rating"]) and report["kind"] == "report" and pd.isna(report["output"])
    assert table.set_index("id").loc[corpus["plain"].id]["reviewed"] == False

    assert load_hf("parquet", folder / "items.parquet", tmp_path).num_rows == len(ids)
    assert load_hf("csv", folder / "items.csv", tmp_path).num_rows == len(ids)


def test_an_empty_version_still_writes_loadable_files(export_root, tmp_path):
    export(dataset_make("empty", formats=("chat_jsonl", "csv", "parquet")))
    folder = export_root / "empty" / "v1"

    assert (folder / "chat.jsonl").read_bytes() == b""
    assert len(pd.read_csv(folder / "items.csv")) == 0
    assert len(pd.read_parquet(folder / "items.parquet")) == 0
