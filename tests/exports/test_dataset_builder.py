"""The dataset builder (/datasets/new, /datasets/<id>/edit): a live preview that counts what an export would hold,
names the formats that would be empty and why, warns about train sets without vouched-for targets, and a
category picker grouped by area."""

import csv
import re
from datetime import UTC, datetime
from urllib.parse import urlencode

import pyarrow.parquet as pq
import pytest

from exports import preview
from exports.models import Dataset
from exports.schemas import FORMATS
from exports.writing import version_folder
from labeling.models import Area, Category
from tests.factories import client_for, user_make
from tests.factories.exports import dataset_make, export, item_make, label_make, source_get

pytestmark = pytest.mark.django_db

# Distinct words per item: numbers are masked in the text the eval check compares.
WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
    "romeo sierra tango uniform victor whiskey xray"
).split()
ALL_FORMATS = list(FORMATS)


@pytest.fixture
def corpus():
    """Items of every shape the formats tell apart: ratings, reports, corrections, hints, verdicts, tags, versions."""
    wrong_file = Category.objects.create(name="Edits the wrong file", status=Category.Status.CONFIRMED)
    false_success = Category.objects.create(name="Claims success falsely", status=Category.Status.CONFIRMED)
    other = source_get("dogfood")
    for i in range(24):
        fields = {"comment": f"Thumbs-down {WORDS[i]}: it edited main.py.", "model_version": "2.1" if i % 2 else "2.2"}
        if i % 5 == 0:
            fields.update(rating=1, comment=f"Thumbs-up {WORDS[i]}: exactly right.")
        if i % 7 == 0:
            # A report: a pasted transcript, no structured conversation.
            fields.update(
                kind="report",
                rating=None,
                source=other,
                context={"transcript": f"user: fix the tests ({i})\nassistant: all tests pass"},
                title=f"Report {WORDS[i]}: claimed the tests pass",
            )
        if i == 9:
            fields.update(occurred_at=datetime(2026, 10, 1, tzinfo=UTC))
        item = item_make(**fields)
        if i % 3 == 0:
            label_make(
                item,
                category=wrong_file if i % 2 else false_success,
                verdict="failure" if i % 4 else "not_failure",
                corrected_response=f"Renamed foo in utils.py ({i})." if i % 6 == 0 else "",
                hint=f"Open the file the user named ({i})." if i % 9 == 0 else "",
                tags=["wrong file"] if i % 2 else ["claimed success falsely"],
            )
    return {"wrong_file": wrong_file, "false_success": false_success}


def file_rows(path) -> int:
    if path.suffix == ".jsonl":
        return len(path.read_text(encoding="utf-8").splitlines())
    if path.suffix == ".csv":
        with open(path, encoding="utf-8", newline="") as handle:
            return sum(1 for _ in csv.reader(handle)) - 1
    return pq.ParquetFile(path).metadata.num_rows


def preview_query(purpose: str, formats: list[str], filters: dict) -> list[tuple[str, str]]:
    """The builder's fields as the page sends them (lists as repeated keys, booleans as "on")."""
    query = [("purpose", purpose)] + [("formats", name) for name in formats]
    for key, value in filters.items():
        if isinstance(value, list):
            query += [(key, str(part)) for part in value]
        elif value is True:
            query.append((key, "on"))
        else:
            query.append((key, str(value)))
    return query


def preview_of(client, query, url="/datasets/preview"):
    return client.get(f"{url}?{urlencode(query)}")


def rows_shown(html: str) -> dict[str, int]:
    return {
        name: int(rows)
        for name, rows in re.findall(r'<tr data-format="([a-z_]+)".*?data-rows="(\d+)"', html, flags=re.S)
    }


def matched_shown(html: str) -> int:
    return int(re.search(r'id="preview-matched">(\d+)<', html).group(1))


COMBOS = [
    ("train", {}),
    ("train", {"rating": "down"}),
    ("train", {"rating": "up"}),
    ("train", {"reviewed_only": True, "model_versions": ["2.1"]}),
    ("train", {"tags": ["wrong file"], "verdicts": ["failure"]}),
    ("train", {"has_corrected_response": True}),
    ("eval", {"kinds": ["report"]}),
    ("eval", {"has_hint": True}),
    ("eval", {"date_from": "2026-11-01", "date_to": "2026-12-31", "sources": ["product"]}),
    ("eval", {"verdicts": ["not_failure"]}),
]


@pytest.mark.parametrize(("purpose", "filters"), COMBOS)
def test_the_preview_counts_equal_the_rows_of_a_real_export_with_the_same_filters(
    reviewer, corpus, export_root, purpose, filters
):
    response = preview_of(reviewer, preview_query(purpose, ALL_FORMATS, filters))
    assert response.status_code == 200
    html = response.content.decode()
    assert "before the held-out check" in html

    version = export(dataset_make("same-filters", purpose=purpose, formats=ALL_FORMATS, filters=filters))
    # Distinct texts: the held-out check (which the preview does not run) leaves nothing out here.
    assert version.held_out["total"] == 0
    folder = version_folder(version=version)
    data_files = [entry for entry in version.manifest["files"] if entry["rows"] is not None]
    written = {entry["format"]: file_rows(folder / entry["name"]) for entry in data_files}
    assert rows_shown(html) == written
    assert matched_shown(html) == version.item_count


def test_the_preview_counts_category_filters_with_the_labels_an_export_follows(reviewer, corpus, export_root):
    filters = {"categories": [corpus["wrong_file"].id]}
    html = preview_of(reviewer, preview_query("train", ["csv", "hints_jsonl"], filters)).content.decode()
    version = export(dataset_make("by-category", formats=["csv", "hints_jsonl"], filters=filters))
    assert matched_shown(html) == version.item_count > 0
    hints_rows = version.counts["rows_by_format"]["hints_jsonl"]
    assert rows_shown(html) == {"csv": version.item_count, "hints_jsonl": hints_rows}


def test_a_format_that_would_be_empty_is_named_with_its_reason(reviewer, export_root):
    for i in range(3):
        item_make(comment=f"It edited the wrong file ({i}).")
    html = preview_of(reviewer, preview_query("train", ["preference_jsonl", "hints_jsonl", "csv"], {})).content.decode()
    assert rows_shown(html) == {"preference_jsonl": 0, "hints_jsonl": 0, "csv": 3}
    reasons = dict(re.findall(r'data-empty="([a-z_]+)"><td colspan="3">.*?</span> ([^<]+)</td>', html))
    assert reasons.keys() == {"preference_jsonl", "hints_jsonl"}
    assert reasons["preference_jsonl"].startswith("no item has a corrected response")
    assert reasons["hints_jsonl"].startswith("no item has a coaching hint")


def test_a_filter_that_matches_nothing_says_so_for_every_format(reviewer, export_root):
    item_make()
    response = preview_of(reviewer, preview_query("train", ["csv", "chat_jsonl"], {"model_versions": ["9.9"]}))
    assert response.status_code == 422  # 9.9 is no model version an item has: the form refuses it
    html = preview_of(reviewer, preview_query("train", ["csv", "chat_jsonl"], {"rating": "up"})).content.decode()
    assert html.count("no item matches the filters") == 2


def test_a_train_set_of_uncorrected_thumbs_down_items_is_told_what_its_chat_rows_need(reviewer, export_root):
    for i in range(4):
        item_make(comment=f"It edited the wrong file ({i}).")
    html = preview_of(reviewer, preview_query("train", ["chat_jsonl"], {"rating": "down"})).content.decode()
    assert (
        "chat rows need a corrected response or a thumbs-up: 0 of 4 items qualify; 4 thumbs-down items without a "
        "corrected response give no chat row, choose kto_jsonl to keep them as negative examples"
    ) in html
    html = preview_of(reviewer, preview_query("train", ["chat_jsonl", "kto_jsonl"], {})).content.decode()
    assert "kto_jsonl rows will hold them as negative examples" in html
    assert rows_shown(html) == {"chat_jsonl": 0, "kto_jsonl": 4}


def test_a_prompt_rated_both_ways_counts_the_pair_its_export_writes_at_the_end(reviewer, export_root):
    item_make(rating=1, variant="A", output="Renamed foo to bar in utils.py.", comment="Arm A got it right.")
    item_make(rating=-1, variant="B", output="Renamed foo in main.py.", comment="Arm B edited main.py.")
    html = preview_of(reviewer, preview_query("train", ["preference_jsonl"], {})).content.decode()
    version = export(dataset_make("two-arms", formats=["preference_jsonl"]))
    assert rows_shown(html) == {"preference_jsonl": version.counts["rows_by_format"]["preference_jsonl"]} == {
        "preference_jsonl": 1
    }


def test_a_corrected_thumbs_down_item_needs_no_warning(reviewer, export_root):
    label_make(item_make(), corrected_response="Renamed foo in utils.py.")
    html = preview_of(reviewer, preview_query("train", ["chat_jsonl"], {"rating": "down"})).content.decode()
    assert 'id="preview-warnings"' not in html
    assert rows_shown(html) == {"chat_jsonl": 1}


def test_an_eval_set_of_thumbs_down_items_is_not_warned_about_training_targets(reviewer, export_root):
    item_make()
    html = preview_of(reviewer, preview_query("eval", ["chat_jsonl"], {})).content.decode()
    assert 'id="preview-warnings"' not in html


def test_the_sample_shows_five_items_scrubbed_as_every_list_shows_them(reviewer, export_root):
    for i in range(7):
        item_make(comment=f"Mail the result to jane.doe{i}@example.com please ({i}).")
    html = preview_of(reviewer, preview_query("train", ["csv"], {})).content.decode()
    sample = re.search(r'<ol class="exp-preview-sample" id="preview-sample">(.*?)</ol>', html, flags=re.S).group(1)
    assert sample.count("<li ") == 5
    assert "@example.com" not in html
    assert "Mail the result to" in sample


def test_without_a_format_the_preview_counts_items_only(reviewer, export_root):
    item_make()
    response = preview_of(reviewer, [("purpose", "train")])
    assert response.status_code == 200
    html = response.content.decode()
    assert matched_shown(html) == 1 and "Choose a format to see how many rows each file gets." in html


def test_beyond_its_limit_the_preview_says_at_least_instead_of_guessing(reviewer, export_root, monkeypatch):
    monkeypatch.setattr(preview, "PREVIEW_MAX_ITEMS", 3)
    for i in range(5):
        label_make(item_make(comment=f"It edited the wrong file ({i})."))
    html = preview_of(reviewer, preview_query("train", ["csv"], {"reviewed_only": True})).content.decode()
    assert 'At least <strong id="preview-matched">3</strong> items match: the preview read 3 of 5 candidates' in html
    assert rows_shown(html) == {"csv": 3} and "≥ 3" in html


def test_beyond_its_limit_a_count_the_query_decides_alone_stays_exact(reviewer, export_root, monkeypatch):
    monkeypatch.setattr(preview, "PREVIEW_MAX_ITEMS", 3)
    for i in range(5):
        item_make(comment=f"It edited the wrong file ({i}).")
    html = preview_of(reviewer, preview_query("train", ["csv"], {"rating": "down"})).content.decode()
    assert '<strong id="preview-matched">5</strong> items match; rows were counted on the first 3' in html
    assert "≥ 3" in html


BAD_FILTERS = [
    ([("date_to", "3100-01-01")], "Date to: Enter a day from 1970-01-01 to 2999-12-31."),
    ([("date_from", "2026-12-01"), ("date_to", "2026-11-01")], "Date to: The end date is before the start date."),
    ([("date_from", "yesterday")], "Date from: Enter a valid date."),
    ([("categories", "abc")], "Categories: Select a valid choice. abc is not one of the available choices."),
    ([("categories", "99999999999999999999999")], "Categories: Select a valid choice."),
    ([("rating", "sideways")], "Rating: Select a valid choice. sideways is not one of the available choices."),
    ([("formats", "docx")], "Formats: Select a valid choice. docx is not one of the available choices."),
    ([("purpose", "both")], "Purpose: Select a valid choice. both is not one of the available choices."),
    ([("other_tags", ",".join(f"t{i}" for i in range(201)))], "tags: List should have at most 200 items"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_FILTERS)
def test_a_bad_filter_shows_its_error_instead_of_counts(reviewer, export_root, bad, message):
    item_make()
    query = [(key, value) for key, value in preview_query("train", ["csv"], {}) if key not in dict(bad)] + bad
    response = preview_of(reviewer, query)
    assert response.status_code == 422
    html = response.content.decode()
    assert message in html.replace("&#x27;", "'")
    assert 'id="preview-refusal"' in html and 'id="preview-formats"' not in html
    # The same page still answers for good filters.
    assert preview_of(reviewer, preview_query("train", ["csv"], {})).status_code == 200


def test_the_preview_is_for_reviewers_only(client, export_root):
    item_make()
    response = client.get("/datasets/preview?purpose=train")
    assert response.status_code == 302 and response.url.startswith("/login/")
    assert client_for(user_make("sam")).get("/datasets/preview?purpose=train").status_code == 403


def test_the_edit_preview_keeps_the_purpose_fixed_by_a_version(reviewer, export_root):
    item_make()
    dataset = dataset_make("fixed-purpose", purpose="train", formats=["chat_jsonl"])
    export(dataset)
    item_make(comment="Another thumbs-down without a correction.")
    # The page does not send a disabled field: the dataset's purpose (train) decides the warning.
    html = preview_of(reviewer, [("formats", "chat_jsonl")], url=f"/datasets/{dataset.id}/preview").content.decode()
    assert "chat rows need a corrected response or a thumbs-up: 0 of 2 items qualify" in html
    assert preview_of(reviewer, [("formats", "csv")], url="/datasets/999999/preview").status_code == 404


def test_the_category_picker_groups_open_categories_by_area_with_full_names(reviewer):
    tests_area = Area.objects.create(name="Tests and verification", status=Area.Status.CONFIRMED)
    files_area = Area.objects.create(name="Files and edits", status=Area.Status.CONFIRMED)
    long_name = "Special-cases the unit tests so they pass instead of fixing the function under test"
    Category.objects.create(name=long_name, area=tests_area, status=Category.Status.CONFIRMED, size=41)
    Category.objects.create(name="Edits the wrong file", area=files_area, size=7)
    Category.objects.create(name="Asks for clarification too often", size=3)
    target = Category.objects.create(name="Ignores instructions", area=files_area)
    Category.objects.create(
        name="Ignores the instructions", area=files_area, status=Category.Status.MERGED, merged_into=target
    )

    html = reviewer.get("/datasets/new").content.decode()
    picker = re.search(r'<fieldset class="exp-picker" id="category-picker">(.*?)</fieldset>', html, flags=re.S).group(1)
    groups = re.findall(r'data-area="([^"]+)"', picker)
    assert groups == ["Files and edits", "Tests and verification", "No area"]
    assert 'id="category-search"' in picker
    assert long_name in picker and "41 items" in picker
    assert "Ignores the instructions" not in picker
    files = picker.split('data-area="Files and edits"')[1].split('data-area="Tests and verification"')[0]
    assert "Edits the wrong file" in files and "Ignores instructions" in files


def test_a_dataset_saved_with_picked_categories_keeps_them_on_edit(reviewer):
    area = Area.objects.create(name="Files and edits")
    picked = Category.objects.create(name="Edits the wrong file", area=area)
    response = reviewer.post(
        "/datasets/new",
        {"name": "picked", "purpose": "train", "formats": ["csv"], "rating": "", "categories": [str(picked.id)]},
    )
    assert response.status_code == 302
    dataset = Dataset.objects.get(name="picked")
    assert dataset.filters["categories"] == [picked.id]
    html = reviewer.get(f"/datasets/{dataset.id}/edit").content.decode()
    assert re.search(rf'name="categories" value="{picked.id}" checked', html)
    assert f'hx-get="/datasets/{dataset.id}/preview"' in html


def test_the_form_pages_carry_the_preview_that_fills_on_load(reviewer):
    html = reviewer.get("/datasets/new").content.decode()
    assert 'id="dataset-preview"' in html and 'hx-get="/datasets/preview"' in html
    assert 'hx-trigger="load, filters-changed"' in html
