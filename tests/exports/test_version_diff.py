"""Comparing two versions: items added, removed and changed (with what changed), and rows per file."""

from datetime import timedelta

import pytest
from django.utils import timezone

from exports import writing
from exports.diffs import version_diff
from exports.member_states import text_hash
from exports.models import DatasetVersion, DatasetVersionItem
from feedback.models import FeedbackItem
from labeling.models import Area, Assignment, Category, Label
from tests.factories.exports import dataset_make, export, item_make, label_make

pytestmark = pytest.mark.django_db


def relabel(label: Label, **fields) -> None:
    """A reviewer's later edit: the export takes the label changed last."""
    Label.objects.filter(id=label.id).update(updated_at=timezone.now() + timedelta(seconds=1), **fields)


def rows_of(version: DatasetVersion, name: str) -> int:
    [rows] = [entry["rows"] for entry in version.files if entry["name"] == name]
    return rows


def by_name(change) -> dict[str, tuple[str, str]]:
    return {field.name: (field.old, field.new) for field in change.fields}


def test_a_version_records_what_each_member_looked_like_when_exported(export_root):
    area = Area.objects.create(name="Files and edits")
    category = Category.objects.create(name="Edits the wrong file", area=area)
    labelled = item_make()
    Assignment.objects.create(item=labelled, category=category, area=area)
    label_make(labelled, category=category, hint="Edit utils.py, as asked.", split="train")
    plain = item_make()

    version = export(dataset_make("recorded"))

    rows = {
        row["item_id"]: row
        for row in DatasetVersionItem.objects.filter(version=version).values(
            "item_id", "category_id", "area_id", "verdict", "split", "hint_hash", "corrected_response_hash"
        )
    }
    assert version.members_recorded
    assert rows[labelled.id] == {
        "item_id": labelled.id,
        "category_id": category.id,
        "area_id": area.id,
        "verdict": "failure",
        "split": "train",
        "hint_hash": text_hash("Edit utils.py, as asked."),
        "corrected_response_hash": None,
    }
    assert rows[plain.id] == {
        "item_id": plain.id,
        "category_id": None,
        "area_id": None,
        "verdict": None,
        "split": None,
        "hint_hash": None,
        "corrected_response_hash": None,
    }


def test_the_diff_reports_a_changed_hint_with_the_current_text_scrubbed(export_root):
    item = item_make()
    steady = item_make()
    label = label_make(item, hint="Edit utils.py, as asked.")
    label_make(steady, hint="Ask which file is meant.")
    dataset = dataset_make("hints", formats=("hints_jsonl",))
    v1 = export(dataset)
    relabel(label, hint="Ask rita@example.com which file is meant.")

    v2 = export(dataset)
    diff = version_diff(old=v1, new=v2)

    assert diff.changes_known
    assert (diff.added_count, diff.removed_count, diff.changed_count) == (0, 0, 1)
    assert diff.changed_by_field == {"hint": 1}
    [change] = diff.changed
    assert change.item_id == item.id and change.item.id == item.id
    [hint] = change.fields
    assert (hint.name, hint.old, hint.old_is_text, hint.new_is_text) == ("hint", "earlier text", False, True)
    # The text as v2 wrote it: scrubbed, never the address itself.
    assert "rita@example.com" not in hint.new and hint.new.endswith("which file is meant.")


def test_a_hint_edited_again_after_the_newer_version_is_reported_without_its_text(export_root):
    item = item_make()
    label = label_make(item, hint="Edit utils.py, as asked.")
    dataset = dataset_make("hints-again", formats=("hints_jsonl",))
    v1 = export(dataset)
    relabel(label, hint="Ask which file is meant.")
    v2 = export(dataset)
    relabel(label, hint="A third text, in no version.")

    [change] = version_diff(old=v1, new=v2).changed

    assert by_name(change) == {"hint": ("earlier text", "a text changed since")}


def test_an_added_hint_is_shown_and_a_removed_one_reads_none(export_root):
    gains = item_make()
    loses = item_make()
    gaining = label_make(gains)
    losing = label_make(loses, hint="Say which tests ran.", corrected_response="I ran 3 of 5 tests.")
    dataset = dataset_make("hint-edges")
    v1 = export(dataset)
    relabel(gaining, hint="Run the whole suite.")
    relabel(losing, hint="", corrected_response="")

    diff = version_diff(old=v1, new=export(dataset))

    changes = {change.item_id: by_name(change) for change in diff.changed}
    assert changes == {
        gains.id: {"hint": ("none", "Run the whole suite.")},
        loses.id: {"hint": ("earlier text", "none"), "corrected response": ("earlier text", "none")},
    }
    assert diff.changed_by_field == {"hint": 2, "corrected response": 1}


def test_the_diff_reports_a_changed_verdict_category_area_and_split_with_names(export_root):
    old_area, new_area = Area.objects.create(name="Files and edits"), Area.objects.create(name="Tests")
    wrong_file = Category.objects.create(name="Edits the wrong file", area=old_area)
    fake_tests = Category.objects.create(name="Claims tests passed", area=new_area)
    item = item_make()
    assignment = Assignment.objects.create(item=item, category=wrong_file, area=old_area)
    label = label_make(item, category=wrong_file)
    dataset = dataset_make("judged")
    v1 = export(dataset)
    relabel(label, category=fake_tests, verdict=Label.Verdict.NOT_FAILURE, split="train")
    Assignment.objects.filter(id=assignment.id).update(area=new_area)

    diff = version_diff(old=v1, new=export(dataset))

    [change] = diff.changed
    assert [field.name for field in change.fields] == ["category", "area", "verdict", "split"]
    assert by_name(change) == {
        "category": ("Edits the wrong file", "Claims tests passed"),
        "area": ("Files and edits", "Tests"),
        "verdict": ("Confirmed failure", "Not a failure"),
        "split": ("no split", "train"),
    }
    assert diff.changed_by_field == {"category": 1, "area": 1, "verdict": 1, "split": 1}


def test_a_renamed_category_is_no_change_and_a_deleted_one_says_so(export_root):
    renamed = Category.objects.create(name="Edits the wrong file")
    doomed = Category.objects.create(name="Asks too often")
    kept, moved = item_make(), item_make()
    label_make(kept, category=renamed)
    moving = label_make(moved, category=doomed)
    dataset = dataset_make("renamed")
    v1 = export(dataset)
    Category.objects.filter(id=renamed.id).update(name="Edits another file than asked")
    relabel(moving, category=renamed)
    doomed_id = doomed.id
    doomed.delete()

    diff = version_diff(old=v1, new=export(dataset, force=True))

    assert [change.item_id for change in diff.changed] == [moved.id]
    assert by_name(diff.changed[0]) == {
        "category": (f"#{doomed_id} (deleted since)", "Edits another file than asked")
    }


def test_added_removed_and_changed_items_are_told_apart_with_rows_per_file_of_both(export_root):
    stays = item_make(model_version="2.0")
    changes = item_make(model_version="2.0")
    leaves = item_make(model_version="2.0")
    label = label_make(changes, hint="Edit utils.py, as asked.")
    dataset = dataset_make("mixed", formats=("hints_jsonl", "csv"), filters={"model_versions": ["2.0"]})
    v1 = export(dataset)
    relabel(label, verdict=Label.Verdict.SPAM)
    FeedbackItem.objects.filter(id=leaves.id).update(model_version="2.2")
    arrives = [item_make(model_version="2.0") for _ in range(2)]

    v2 = export(dataset)
    diff = version_diff(old=v1, new=v2)

    assert [item_id for item_id, _ in diff.added] == [item.id for item in arrives]
    assert [item_id for item_id, _ in diff.removed] == [leaves.id]
    assert [change.item_id for change in diff.changed] == [changes.id]
    assert (diff.added_count, diff.removed_count, diff.changed_count, diff.kept_count) == (2, 1, 1, 2)
    assert stays.id not in {change.item_id for change in diff.changed}
    assert [(f.name, f.old_rows, f.new_rows) for f in diff.files] == [
        ("hints.jsonl", rows_of(v1, "hints.jsonl"), rows_of(v2, "hints.jsonl")),
        ("items.csv", 3, 4),
    ]


def test_a_file_only_one_version_has_shows_no_rows_for_the_other(export_root):
    item_make()
    dataset = dataset_make("formats-change", formats=("csv",))
    v1 = export(dataset)
    dataset.formats = ["csv", "hints_jsonl"]
    dataset.save(update_fields=["formats"])

    v2 = export(dataset)
    diff = version_diff(old=v1, new=v2)

    assert [(f.name, f.old_rows, f.new_rows) for f in diff.files] == [
        ("hints.jsonl", None, rows_of(v2, "hints.jsonl")),
        ("items.csv", 1, 1),
    ]
    assert diff.changed_count == 0 and diff.changed == []


def test_an_older_version_without_recorded_states_says_changes_are_unknown(export_root, reviewer):
    item = item_make()
    label = label_make(item, hint="Edit utils.py, as asked.")
    dataset = dataset_make("before-states")
    v1 = export(dataset)
    # What a version made before members recorded their states holds.
    DatasetVersion.objects.filter(id=v1.id).update(members_recorded=False)
    DatasetVersionItem.objects.filter(version=v1).update(
        category_id=None, area_id=None, verdict=None, split=None, hint_hash=None, corrected_response_hash=None
    )
    v1.refresh_from_db()
    relabel(label, hint="Ask which file is meant.")
    added = item_make()

    v2 = export(dataset)
    diff = version_diff(old=v1, new=v2)

    assert not diff.changes_known and diff.changed == [] and diff.changed_count == 0
    assert diff.recorded_since == v2.created_at
    assert [item_id for item_id, _ in diff.added] == [added.id]
    html = reviewer.get(f"/datasets/{dataset.id}/diff", {"old": 1, "new": 2}).content.decode()
    assert "Changes unknown for versions made before" in html
    assert v2.created_at.strftime("%Y-%m-%d %H:%M") in html
    assert '<span class="num" id="diff-changed">?</span>' in html
    assert '<span class="num" id="diff-added">1</span>' in html


def test_long_lists_are_capped_with_their_counts(export_root, reviewer):
    items = [item_make() for _ in range(3)]
    labels = [label_make(item) for item in items]
    dataset = dataset_make("many")
    v1 = export(dataset)
    for label in labels:
        relabel(label, verdict=Label.Verdict.DUPLICATE)
    v2 = export(dataset)

    diff = version_diff(old=v1, new=v2, limit=2)

    assert diff.changed_count == 3 and [c.item_id for c in diff.changed] == [items[0].id, items[1].id]
    assert diff.changed_by_field == {"verdict": 3}


def test_the_diff_page_shows_what_changed_and_rows_per_file(export_root, reviewer):
    category = Category.objects.create(name="Edits the wrong file")
    item = item_make()
    label = label_make(item, hint="Edit utils.py, as asked.")
    dataset = dataset_make("page", formats=("hints_jsonl", "csv"))
    export(dataset)
    relabel(label, category=category, hint="Ask which file is meant.")
    item_make()
    export(dataset)

    response = reviewer.get(f"/datasets/{dataset.id}/diff", {"old": 1, "new": 2})

    html = response.content.decode()
    assert response.status_code == 200
    assert '<span class="num" id="diff-changed">1</span>' in html
    assert f'id="changed-{item.id}"' in html
    assert "category: none → Edits the wrong file" in html
    assert "hint: earlier text → “Ask which file is meant.”" in html
    assert "category: 1 · hint: 1" in html
    files = html[html.index('id="diff-files"') : html.index('id="changed"')]
    assert '<td>items.csv</td>\n        <td class="num">1</td>\n        <td class="num">2</td>' in files


def test_verify_still_rewrites_a_recorded_version_byte_for_byte(export_root):
    item = item_make()
    label_make(item, hint="Edit utils.py, as asked.", corrected_response="Renamed foo in utils.py.")
    version = export(dataset_make("verified", formats=("hints_jsonl", "chat_jsonl", "csv")))

    check = writing.dataset_version_verify(version=version)

    assert check.identical and check.differing == []

