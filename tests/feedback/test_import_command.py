"""manage.py import: the event schema as JSONL, CSV and parquet; malformed lines; re-imports; the pipeline."""

import csv
import json
from io import StringIO

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from feedback.imports import services as import_services
from feedback.models import FeedbackItem, ImportRun, Source
from tests.factories import rating_event

pytestmark = pytest.mark.django_db


def run_import(path, *args) -> str:
    out = StringIO()
    call_command("import", str(path), *args, "--no-progress", stdout=out)
    return out.getvalue()


def write_jsonl(path, lines) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for line in lines:
            handle.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


def items_of(source_name: str):
    return FeedbackItem.objects.filter(source__name=source_name).order_by("external_id")


def test_it_imports_jsonl_events_into_a_new_import_source(tmp_path):
    events = [rating_event(id=f"e{n}", comment=f"comment {n}") for n in range(5)]
    write_jsonl(tmp_path / "history.jsonl", events)

    out = run_import(tmp_path / "history.jsonl", "--source", "warehouse")

    assert "made source 'warehouse'" in out
    assert "stored 5, duplicates 0, refused 0" in out
    source = Source.objects.get(name="warehouse")
    assert source.kind == Source.Kind.IMPORT
    item = items_of("warehouse").get(external_id="e3")
    assert item.comment == "comment 3"
    assert item.rating == -1
    assert item.model_version == "2.1"
    assert item.context["messages"] == [{"role": "user", "content": "Rename foo to bar in utils.py"}]
    assert item.received_payload == events[3]
    assert item.status == FeedbackItem.Status.RECEIVED


def test_malformed_lines_are_reported_with_line_numbers_and_the_rest_stored(tmp_path):
    lines = [
        rating_event(id="good-1"),
        "{not json",
        rating_event(id="bad-rating", rating="sideways"),
        "",
        json.dumps([1, 2]),
        rating_event(id="bad-nul", comment="a\u0000b"),
        {k: v for k, v in rating_event().items() if k != "id"},
        rating_event(id="bad-time", occurred_at=1700000000),
        rating_event(id="good-2", rating="up"),
    ]
    write_jsonl(tmp_path / "mixed.jsonl", lines)

    out = run_import(tmp_path / "mixed.jsonl", "--source", "warehouse")

    assert "stored 2, duplicates 0, refused 6" in out
    assert set(items_of("warehouse").values_list("external_id", flat=True)) == {"good-1", "good-2"}
    run = ImportRun.objects.get()
    by_line = {refusal["line"]: refusal for refusal in run.refusals}
    assert sorted(by_line) == [2, 3, 5, 6, 7, 8]  # line 4 is blank: skipped, still counted
    assert by_line[2]["reason"].startswith("not valid JSON")
    assert by_line[3] == {
        "line": 3, "id": "bad-rating", "field": "rating", "reason": "rating: Input should be 'up' or 'down'"
    }
    assert by_line[5]["reason"] == "must be a JSON object"
    assert by_line[6]["field"] == "comment" and "NUL" in by_line[6]["reason"]
    assert by_line[7]["field"] == "id"
    assert by_line[8]["field"] == "occurred_at" and "ISO 8601" in by_line[8]["reason"]
    assert "refused line 3 (id bad-rating) [rating]: rating: Input should be 'up' or 'down'" in out


def test_a_re_import_stores_nothing_twice(tmp_path):
    write_jsonl(tmp_path / "h.jsonl", [rating_event(id=f"e{n}") for n in range(30)])
    run_import(tmp_path / "h.jsonl", "--source", "warehouse")
    before = list(items_of("warehouse").values_list("id", "external_id", "received_at"))

    out = run_import(tmp_path / "h.jsonl", "--source", "warehouse")

    assert "stored 0, duplicates 30, refused 0" in out
    assert list(items_of("warehouse").values_list("id", "external_id", "received_at")) == before


def test_a_repeated_id_within_a_file_is_a_duplicate_and_the_first_wins(tmp_path):
    write_jsonl(tmp_path / "h.jsonl", [rating_event(id="same", comment="first"), rating_event(id="same", comment="x")])

    out = run_import(tmp_path / "h.jsonl", "--source", "warehouse")

    assert "stored 1, duplicates 1" in out
    assert items_of("warehouse").get().comment == "first"


def test_an_event_already_sent_by_webhook_is_a_duplicate(tmp_path):
    from feedback import services

    source, _ = services.source_create(name="product")
    services.events_ingest(source=source, events=[rating_event(id="sent-live", comment="live")])
    write_jsonl(tmp_path / "h.jsonl", [rating_event(id="sent-live", comment="from the file"), rating_event(id="new")])

    out = run_import(tmp_path / "h.jsonl", "--source", "product")

    assert "stored 1, duplicates 1" in out
    assert items_of("product").get(external_id="sent-live").comment == "live"


def test_imported_items_are_queued_for_the_pipeline_after_commit(tmp_path, monkeypatch, django_capture_on_commit_callbacks):
    queued = []
    monkeypatch.setattr("feedback.tasks.embed_items.apply_async", lambda args, **kwargs: queued.extend(args[0]))
    write_jsonl(tmp_path / "h.jsonl", [rating_event(id=f"e{n}") for n in range(3)] + ["oops"])

    with django_capture_on_commit_callbacks(execute=True):
        run_import(tmp_path / "h.jsonl", "--source", "warehouse")

    assert sorted(queued) == sorted(items_of("warehouse").values_list("id", flat=True))
    assert len(queued) == 3


def test_flat_csv_events_with_dotted_columns_and_json_cells(tmp_path):
    path = tmp_path / "sheet.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "occurred_at", "rating", "comment", "model.name", "model.version", "context.messages",
                         "context.output"])
        writer.writerow(["c1", "2026-05-01T10:00:00+02:00", "down", "Wrong file,\nagain", "coder", "3.0",
                         json.dumps([{"role": "user", "content": "fix it"}]), "done"])
        writer.writerow(["c2", "2026-05-01T10:00:00Z", "meh", "", "", "", "", ""])
        writer.writerow(["c3", "2026-05-01T10:00:00Z", "up", "", "", "", "[not json", ""])
        writer.writerow(["c4", "2026-05-01T10:00:00Z", "up"])
        writer.writerow(["c5", "2026-05-01T11:00:00Z", "up", "fine", "", "", "", ""])

    out = run_import(path, "--source", "sheet")

    assert "stored 2, duplicates 0, refused 3" in out
    item = items_of("sheet").get(external_id="c1")
    assert item.comment == "Wrong file,\nagain"
    assert item.model_name == "coder" and item.model_version == "3.0"
    assert item.context == {"messages": [{"role": "user", "content": "fix it"}], "output": "done"}
    assert item.occurred_at.isoformat() == "2026-05-01T08:00:00+00:00"
    refusals = {r["line"]: r for r in ImportRun.objects.get().refusals}
    # c1 spans lines 2-3, so c2 starts on line 4.
    assert refusals[4]["field"] == "rating"
    assert refusals[5]["field"] == "context.messages" and "JSON" in refusals[5]["reason"]
    assert "has 3 cells" in refusals[6]["reason"]


def test_csv_bytes_that_are_not_utf8_fail_only_their_row(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes(
        b"id,occurred_at,rating,comment\n"
        b"a,2026-05-01T10:00:00Z,up,caf\xe9\n"
        b"b,2026-05-01T10:00:00Z,up,fine\n"
    )

    out = run_import(path, "--source", "sheet")

    assert "stored 1, duplicates 0, refused 1" in out
    assert list(items_of("sheet").values_list("external_id", flat=True)) == ["b"]
    assert ImportRun.objects.get().refusals[0]["field"] == "comment"


def test_parquet_events_with_nested_columns(tmp_path):
    rows = [rating_event(id=f"p{n}", rating="up" if n % 2 else "down") for n in range(4)]
    rows[2]["rating"] = "maybe"
    table = pa.Table.from_pylist(rows)
    pq.write_table(table, tmp_path / "events.parquet")

    out = run_import(tmp_path / "events.parquet", "--source", "lake")

    assert "stored 3, duplicates 0, refused 1" in out
    item = items_of("lake").get(external_id="p1")
    assert item.rating == 1
    assert item.context["tool_calls"] == [{"name": "edit_file", "arguments": {"path": "main.py"}}]
    assert ImportRun.objects.get().refusals[0]["line"] == 3


def test_an_unknown_extension_asks_for_a_format(tmp_path):
    path = tmp_path / "events.txt"
    path.write_text(json.dumps(rating_event(id="t1")) + "\n")

    with pytest.raises(CommandError, match="--format"):
        run_import(path, "--source", "warehouse")
    assert not FeedbackItem.objects.exists()

    out = run_import(path, "--source", "warehouse", "--format", "jsonl")
    assert "stored 1" in out


def test_a_file_that_is_not_parquet_is_refused_before_anything_is_stored(tmp_path):
    path = tmp_path / "events.parquet"
    path.write_text("id,rating\n")

    with pytest.raises(CommandError, match="not a parquet file"):
        run_import(path, "--source", "lake")
    assert not ImportRun.objects.exists()


def test_a_missing_file_and_a_deactivated_source_are_errors(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        run_import(tmp_path / "none.jsonl", "--source", "warehouse")
    Source.objects.create(name="old", slug="old", signing_secret="whsec_dGVzdA==", is_active=False)
    write_jsonl(tmp_path / "h.jsonl", [rating_event(id="x")])
    with pytest.raises(CommandError, match="deactivated"):
        run_import(tmp_path / "h.jsonl", "--source", "old")
    assert not FeedbackItem.objects.exists()


def test_refused_out_writes_every_refusal(tmp_path):
    write_jsonl(tmp_path / "h.jsonl", ["nope"] * 70 + [rating_event(id="ok")])
    refused = tmp_path / "refused.jsonl"

    out = run_import(tmp_path / "h.jsonl", "--source", "warehouse", "--refused-out", str(refused))

    assert "stored 1, duplicates 0, refused 70" in out
    assert "and 20 more; all of them are in" in out
    lines = [json.loads(line) for line in refused.read_text().splitlines()]
    assert [line["line"] for line in lines] == list(range(1, 71))


def test_a_step_that_stops_early_goes_on_from_its_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setattr(import_services, "BATCH_RECORDS", 10)
    write_jsonl(tmp_path / "h.jsonl", [rating_event(id=f"e{n}") for n in range(35)] + ["bad"])
    source, _ = import_services.import_source_get_or_create(name="warehouse")
    run = import_services.import_run_create(
        source=source, path=tmp_path / "h.jsonl", file_name="h.jsonl", file_format=""
    )

    first = import_services.import_run_step(run_id=run.id, budget_seconds=0)
    run.refresh_from_db()
    assert first.more and run.status == ImportRun.Status.RUNNING
    assert (run.records_done, run.stored) == (10, 10)

    while import_services.import_run_step(run_id=run.id, budget_seconds=0).more:
        pass
    run.refresh_from_db()
    assert run.status == ImportRun.Status.DONE
    assert (run.stored, run.duplicates, run.refused, run.records_done) == (35, 0, 1, 36)
    assert [refusal["line"] for refusal in run.refusals] == [36]
    assert items_of("warehouse").count() == 35


def test_a_run_held_by_another_step_is_left_alone(tmp_path):
    write_jsonl(tmp_path / "h.jsonl", [rating_event(id="e1")])
    source, _ = import_services.import_source_get_or_create(name="warehouse")
    run = import_services.import_run_create(source=source, path=tmp_path / "h.jsonl", file_name="h.jsonl", file_format="")
    assert import_services._claim(run.id, run.created_at)

    report = import_services.import_run_step(run_id=run.id)

    assert not report.more and report.stored == 0
    assert not FeedbackItem.objects.exists()


def test_a_byte_order_mark_before_the_first_line_is_not_an_error(tmp_path):
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + json.dumps(rating_event(id="first")).encode() + b"\n")
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbfid,occurred_at,rating\nsecond,2026-05-01T10:00:00Z,up\n")

    assert "stored 1, duplicates 0, refused 0" in run_import(tmp_path / "bom.jsonl", "--source", "warehouse")
    assert "stored 1, duplicates 0, refused 0" in run_import(tmp_path / "bom.csv", "--source", "warehouse")
    assert sorted(items_of("warehouse").values_list("external_id", flat=True)) == ["first", "second"]
