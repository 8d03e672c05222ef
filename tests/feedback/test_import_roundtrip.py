"""This app's own items.csv and items.parquet, exported and imported elsewhere, give the same items."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from exports.writing import version_folder
from feedback import services
from feedback.models import FeedbackItem, ImportRun, Source
from feedback.schemas import ReportIn
from tests.factories.exports import dataset_make, export
from tests.factories import rating_event

pytestmark = pytest.mark.django_db

# What an item is, apart from where it is stored: the fields an export carries.
COMPARED = (
    "external_id", "kind", "rating", "title", "comment", "expected", "severity", "model_name", "model_version",
    "variant", "surface", "occurred_at",
)


def originals() -> Source:
    source, _ = services.source_create(name="product")
    events = [
        rating_event(id="r-plain"),
        rating_event(id="r-up", rating="up", comment="", model={"name": "coder", "version": "3.0"}),
        # Text a spreadsheet would run: the export writes it with a leading '.
        rating_event(id="r-formula", comment="=HYPERLINK(\"x\")", variant="-B"),
        rating_event(id="r-lines", comment="two\nlines, \"quoted\"\r\nand a return", surface="web"),
        rating_event(id="r-unicode", comment="ça marche pas 🙃", context={
            "messages": [{"role": "system", "content": "Be careful."}, {"role": "user", "content": "Löse das"}],
            "output": "Gelöst.",
        }),
        rating_event(id="r-no-output", context={"messages": [{"role": "user", "content": "hello"}]}),
    ]
    result = services.events_ingest(source=source, events=events)
    assert result.count("accepted") == len(events)
    services.report_create(
        source=source,
        report=ReportIn(id="rep-1", title="It ran the tests but claimed success", what_happened="Tests failed.",
                        expected="Say they failed.", severity="high", model_version="2.1",
                        transcript="$ pytest\n1 failed", occurred_at="2026-10-01T00:00:00Z"),
    )
    return source


def comparable(item: FeedbackItem) -> dict:
    values = {name: getattr(item, name) for name in COMPARED}
    context = dict(item.context)
    context.pop("metadata", None)
    values["context"] = context
    return values


def assert_same_items(source_a: Source, source_b: Source) -> None:
    a = {item.external_id: comparable(item) for item in FeedbackItem.objects.filter(source=source_a)}
    b = {item.external_id: comparable(item) for item in FeedbackItem.objects.filter(source=source_b)}
    assert b == a


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_an_export_imported_elsewhere_gives_the_same_items(export_root, file_format):
    source = originals()
    version = export(dataset_make(name=f"all-{file_format}", formats=(file_format,)))
    path = version_folder(version=version) / f"items.{file_format}"
    assert path.exists()

    out = StringIO()
    call_command("import", str(path), "--source", "elsewhere", "--no-progress", stdout=out)

    assert "stored 7, duplicates 0, refused 0" in out.getvalue()
    assert_same_items(source, Source.objects.get(name="elsewhere"))

    again = StringIO()
    call_command("import", str(path), "--source", "elsewhere", "--no-progress", stdout=again)
    assert "stored 0, duplicates 7, refused 0" in again.getvalue()
    assert FeedbackItem.objects.filter(source__name="elsewhere").count() == 7


def test_tool_calls_survive_the_csv_round_trip(export_root):
    source = originals()
    version = export(dataset_make(name="tools", formats=("csv",)))

    call_command("import", str(version_folder(version=version) / "items.csv"), "--source", "elsewhere",
                 "--no-progress", stdout=StringIO())

    item = FeedbackItem.objects.get(source__name="elsewhere", external_id="r-plain")
    assert item.context["tool_calls"] == FeedbackItem.objects.get(source=source, external_id="r-plain").context[
        "tool_calls"
    ]


def test_a_hand_edited_export_row_is_refused_with_its_line_and_the_others_stored(export_root, tmp_path):
    originals()
    version = export(dataset_make(name="edited", formats=("csv",)))
    lines = (version_folder(version=version) / "items.csv").read_text(encoding="utf-8").split("\n")
    header = lines[0].split(",")
    rating_column = header.index("rating")
    # Every item's row fits on one line except the one with line breaks; edit a plain one.
    target = next(n for n, line in enumerate(lines) if line.startswith(tuple("0123456789")) and ",r-up," in line)
    cells = lines[target].split(",")
    cells[rating_column] = "5"
    lines[target] = ",".join(cells)
    edited = tmp_path / "edited.csv"
    edited.write_text("\n".join(lines), encoding="utf-8")

    out = StringIO()
    call_command("import", str(edited), "--source", "elsewhere", "--no-progress", stdout=out)

    assert "stored 6, duplicates 0, refused 1" in out.getvalue()
    refusal = ImportRun.objects.get().refusals[0]
    assert refusal == {"line": target + 1, "id": "r-up", "field": "rating", "reason": "rating: must be 1 or -1 for a rating"}
    assert not FeedbackItem.objects.filter(source__name="elsewhere", external_id="r-up").exists()
    assert json.loads(json.dumps(refusal))  # stored as plain JSON
