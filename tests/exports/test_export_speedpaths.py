"""The export's fast paths give what the plain ones give: the scrub memo, orjson lines, the context read,
the write-time scrub check and the read-back of each file."""

import gc
import json

import orjson
import pytest

from core import collector
from exports import records, runs, writing
from exports.encoding import _json_text, json_bytes, json_line, json_text
from exports.files import JsonlWriter
from exports.formats import HintsWriter
from exports.models import DatasetVersion, ExportRun, Trigger
from exports.tables import ParquetWriter
from exports.turns import prompt_turns, rollout_turns
from exports.written import WrittenStrings
from feedback.scrubber import ScrubMemo, find_unscrubbed, scrub, scrub_json
from tests.factories.exports import dataset_make, export, item_make, label_make

AWS_KEY = "AKIA4HKQ2Z7XNB3LPQWE"
TEXTS = [
    "user",
    "",
    "It edited main.py instead of utils.py",
    f"deploy with {AWS_KEY} please",
    "mail alice@example.com from 10.0.3.17",
    "export DB_PASSWORD=hunter2x",
    "/home/alice/src/app.py line 3",
    "[EMAIL] already scrubbed",
    "ssh db1.corp.acme.net",
    "call 555-0198(212) 555-0198",
    "x" * 9000 + " alice@example.com",  # longer than the memo keeps
]
CUSTOM = [("host", r"db\d\.corp\.acme\.net")]


@pytest.mark.parametrize("extra", [(), CUSTOM])
def test_the_memo_scrubs_and_checks_every_text_as_the_module_functions_do(extra):
    memo = ScrubMemo(extra)
    for _ in range(2):  # the second round answers from the memo
        for text in TEXTS:
            result = scrub(text, extra_patterns=extra)
            assert memo.scrub(text) == (result.text, tuple(result.counts.items()))
            assert list(memo.unscrubbed(text)) == find_unscrubbed(text, extra_patterns=extra)
            assert memo.unscrubbed(result.text) == ()


def test_the_memo_scrubs_nested_values_as_scrub_json_does():
    value = [
        {"name": "shell", "arguments": {"command": f"aws s3 ls --key {AWS_KEY}", "password": "Zq8xVb2mN4"}},
        {"name": "read", "arguments": {"path": "/home/bob/.ssh/config"}, "result": ["ok", 3, None, 1.5]},
        ("tuple", {"token": "short"}),
    ]
    assert ScrubMemo().scrub_json(value) == scrub_json(value)
    assert ScrubMemo(CUSTOM).scrub_json({"host": "db1.corp.acme.net"}) == scrub_json(
        {"host": "db1.corp.acme.net"}, extra_patterns=CUSTOM
    )


def test_the_memo_starts_afresh_when_full_and_still_answers_right():
    limit = 2 * ScrubMemo.ENTRY_BYTES + 60
    memo = ScrubMemo(size_limit=limit)
    for round_ in range(3):
        for text in TEXTS[:6]:
            assert memo.scrub(text)[0] == scrub(text).text, round_
            assert memo._size <= limit + ScrubMemo.ENTRY_BYTES + max(len(text) for text in TEXTS[:6])
            assert len(memo._names) + len(memo._scrubbed) <= 3


def test_the_memo_refuses_what_scrub_refuses():
    with pytest.raises(ValueError, match="custom pattern"):
        ScrubMemo([("bad", "(")])
    with pytest.raises(TypeError):
        ScrubMemo().scrub(42)
    with pytest.raises(TypeError):
        ScrubMemo().unscrubbed(42)


ODD_VALUES = [
    {"b": 1, "a": [True, False, None], "é": "ünï cødé 😀", "ctl": "\x00\x01\x1f\x7f\u2028\u2029\t\n\r\"\\"},
    {"small": 1e-05, "tiny": 2.5e-07, "big": 1e22, "plain": 0.1, "neg": -0.0},
    {"huge": 2**70},
    {1: "int key"},
    [[[]], {}, "", 0, -(2**63)],
]


@pytest.mark.parametrize("value", ODD_VALUES)
def test_json_bytes_are_the_bytes_json_line_writes(value):
    assert json_bytes(value) == json_line(value).encode("utf-8")


@pytest.mark.parametrize("value", [*ODD_VALUES, {"text": "\ud800"}, {"nan": float("nan")}])
def test_json_text_is_the_text_json_writes(value):
    assert json_text(value) == _json_text(value)


def test_json_bytes_refuses_an_unpaired_surrogate_as_the_text_file_did():
    with pytest.raises(UnicodeEncodeError):
        json_bytes({"text": "\ud800"})


@pytest.mark.parametrize(
    "raw, expected",
    [
        ('{"a": [1, 2.5, "x"]}', {"a": [1, 2.5, "x"]}),
        ('{"n": NaN, "big": 123456789012345678901234567890}', "json"),
        ('{"s": "\\ud800"}', "json"),
        ("[1, 2]", {}),
        ('"text"', {}),
        (None, {}),
    ],
)
def test_the_context_reads_as_json_reads_it(raw, expected):
    class Row:
        context_text = raw

    context = records.row_context(Row())
    if expected == "json":
        assert repr(context) == repr(json.loads(raw))
    else:
        assert context == expected


def test_the_written_strings_are_every_string_of_every_row_keys_aside():
    sink = WrittenStrings()
    shared = [{"role": "user", "content": "shared text"}]
    assert sink.add("a.jsonl", {"messages": shared, "password": "value one", "n": 3}) is False
    assert sink.add("b.jsonl", {"messages": shared, "x": [("t", {"k": 1.5})]}) is True
    assert sink.add("c.jsonl", {"again": shared}) is False
    assert sorted(set(sink._strings)) == ["shared text", "t", "user", "value one"]
    assert sink.check(ScrubMemo()) == {}
    assert sink.rows == {}


def test_a_leak_is_named_with_every_file_holding_it_even_in_a_shared_piece():
    sink = WrittenStrings()
    shared = [{"role": "user", "content": f"key {AWS_KEY}"}]
    sink.add("a.jsonl", {"messages": shared})
    sink.add("b.jsonl", {"messages": shared})
    sink.add("c.jsonl", {"clean": "nothing here"})
    assert sink.check(ScrubMemo()) == {"aws_access_key": {"a.jsonl", "b.jsonl"}}


pytestmark_db = pytest.mark.django_db


@pytestmark_db
def test_every_jsonl_line_of_an_export_is_byte_for_byte_what_json_writes(export_root):
    """orjson writes the lines; each equals json.dumps(sort_keys, compact) of what it holds."""
    for n in range(6):
        item = item_make(
            comment=f"Ünïcode “quotes” and a tab\t({n})",
            rating=1 if n % 2 else -1,
            context={
                "messages": [
                    {"role": "user", "content": f"Rename foo{n} — please"},
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": '{"ratio": 1e-05}'}}
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "3 matches"},
                ],
                "output": "Done 😀",
                "tool_calls": [
                    {"name": "edit_file", "arguments": {"path": "utils.py", "ratio": 1e-05, "n": n}, "result": "ok"},
                    {"name": "shell", "arguments": "not json", "result": {"exit": 0}},
                ],
            },
        )
        if n % 3 == 0:
            label_make(item, hint="Open the file the user named.", corrected_response=f"Renamed foo{n}.")
    names = ["chat_jsonl", "preference_jsonl", "kto_jsonl", "coaching_jsonl", "hints_jsonl", "eval_jsonl", "inspect_jsonl"]
    version = export(dataset_make("bytes", formats=names))
    folder = writing.version_folder(version=version)
    lines = 0
    for name in ("chat", "preference", "kto", "coaching", "hints", "eval", "inspect"):
        for line in (folder / f"{name}.jsonl").read_bytes().splitlines(keepends=True):
            assert json_line(json.loads(line)).encode("utf-8") == line, name
            lines += 1
    assert lines == sum(entry["rows"] for entry in version.files if entry["rows"])
    # Inspect parses a call's arguments: the float is written as json writes it, not as orjson would (0.00001).
    assert b'"arguments":{"ratio":1e-05}' in (folder / "inspect.jsonl").read_bytes()


@pytestmark_db
def test_a_leak_in_a_string_only_a_format_makes_fails_the_version_naming_that_file(export_root, monkeypatch):
    """The check reads the rows as written, not the records: a format that builds a text is checked too."""
    item = item_make(comment="Fine comment.")
    label_make(item, hint="Check the key.")
    original = HintsWriter.lines_of.__func__

    def leaky(cls, record):
        rows = original(cls, record)
        for row in rows:
            row["hint"] = "AKIA" + "4HKQ2Z7XNB3LPQWE"  # made by the format, never in a record
        return rows

    monkeypatch.setattr(HintsWriter, "lines_of", classmethod(leaky))
    dataset = dataset_make("derived-leak", formats=("hints_jsonl", "eval_jsonl"))
    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
    with pytest.raises(writing.UnscrubbedOutput) as failure:
        runs.export_run_execute(run_id=run.id)
    assert str(failure.value) == "the export files still hold unscrubbed text: aws_access_key in hints.jsonl"
    assert DatasetVersion.objects.count() == 0
    assert list((export_root / "derived-leak").iterdir()) == []


@pytestmark_db
def test_a_leak_in_a_cross_item_pair_written_at_close_fails_the_version(export_root, monkeypatch):
    prompt = {"messages": [{"role": "user", "content": "Run the tests"}], "tool_calls": []}
    item_make(rating=1, context={**prompt, "output": "3 tests fail."})
    item_make(rating=-1, context={**prompt, "output": "All tests pass."})
    scrub_record = records.scrub_record
    monkeypatch.setattr(
        records,
        "scrub_record",
        lambda record, **kwargs: _with_output(scrub_record(record, **kwargs), f"key {AWS_KEY}"),
    )
    dataset = dataset_make("pair-leak", formats=("preference_jsonl",))
    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
    with pytest.raises(writing.UnscrubbedOutput, match="aws_access_key in preference.jsonl"):
        runs.export_run_execute(run_id=run.id)


def _with_output(record, text):
    if record.rating == -1:
        record.output = text
    return record


@pytestmark_db
def test_a_file_that_does_not_read_back_fails_the_version_and_leaves_nothing(export_root, monkeypatch):
    item_make()
    close = JsonlWriter.close

    def close_then_damage(self):
        close(self)
        with open(self.path, "ab") as handle:
            handle.write(b"{not json")  # bytes the hash never saw, as a failing disk might leave

    monkeypatch.setattr(JsonlWriter, "close", close_then_damage)
    dataset = dataset_make("damaged", formats=("eval_jsonl", "csv"))
    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
    with pytest.raises(writing.UnreadableOutput, match=r"eval.jsonl does not read back: \d+ bytes on disk"):
        runs.export_run_execute(run_id=run.id)
    run.refresh_from_db()
    assert run.status == ExportRun.Status.FAILED and "UnreadableOutput" in run.error
    assert DatasetVersion.objects.count() == 0


@pytestmark_db
def test_a_parquet_file_with_fewer_rows_than_written_fails_the_version(export_root, monkeypatch):
    item_make()
    item_make()
    flush = ParquetWriter._flush

    def drop_last(self):
        if self._buffer[0]:
            self._buffer = [column[:-1] for column in self._buffer]
        flush(self)

    monkeypatch.setattr(ParquetWriter, "_flush", drop_last)
    run = runs.export_run_start(dataset=dataset_make("short", formats=("parquet",)), trigger=Trigger.COMMAND, enqueue=False)
    with pytest.raises(writing.UnreadableOutput, match="items.parquet does not read back: 1 rows"):
        runs.export_run_execute(run_id=run.id)


@pytestmark_db
def test_the_turns_built_once_per_record_follow_a_field_that_is_replaced(export_root):
    item_make()
    from exports.selectors import records_stream
    from feedback.models import FeedbackItem

    (record,) = next(records_stream(FeedbackItem.objects.all(), with_vector=False))
    first = rollout_turns(record)
    assert rollout_turns(record) is first
    record.tool_calls = [{"name": "shell", "arguments": {"command": "ls"}}]
    again = rollout_turns(record)
    assert again is not first and again[0]["tool_calls"][0]["function"]["name"] == "shell"
    assert orjson.loads(json_bytes(prompt_turns(record))) == record.messages


def test_many_rows_at_once_are_checked_as_they_come_and_a_leak_among_them_still_counts():
    sink = WrittenStrings(ScrubMemo(), max_rows=5)
    for n in range(12):
        sink.add("pairs.jsonl", {"chosen": [{"content": f"clean {n}"}]})
        assert len(sink.rows.get("pairs.jsonl", [])) <= 6
    sink.add("pairs.jsonl", {"rejected": f"key {AWS_KEY}"})
    for n in range(6):
        sink.add("pairs.jsonl", {"chosen": [{"content": f"clean again {n}"}]})
    assert sink.found == {"aws_access_key": {"pairs.jsonl"}}
    assert sink.check(ScrubMemo()) == {}


@pytestmark_db
@pytest.mark.parametrize("fails", [False, True])
def test_garbage_is_collected_less_often_while_writing_and_as_before_after(export_root, monkeypatch, fails):
    before = gc.get_threshold()
    seen = []
    lines_of = HintsWriter.lines_of.__func__

    def observing(cls, record):
        seen.append((gc.get_threshold()[0], gc.get_freeze_count() > 0))
        if fails:
            raise RuntimeError("disk gone")
        return lines_of(cls, record)

    monkeypatch.setattr(HintsWriter, "lines_of", classmethod(observing))
    label_make(item_make(comment="Fine comment."), hint="Check the key.")
    dataset = dataset_make("collections", formats=("hints_jsonl",))
    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
    if fails:
        with pytest.raises(RuntimeError, match="disk gone"):
            runs.export_run_execute(run_id=run.id)
    else:
        runs.export_run_execute(run_id=run.id)
    assert seen == [(collector.YOUNG_THRESHOLD, True)]
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
