"""In a real browser: a reviewer exports a dataset, watches the progress reach done and downloads a file."""

import json
from pathlib import Path

import pytest

from exports.models import DatasetVersion, ExportRun
from tests.browser.conftest import log_in
from tests.factories.exports import dataset_make, item_make, label_make, unit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_clicks_export_now_and_gets_a_version_with_download_links(
    page, reviewer_user, eager_celery, export_root
):
    for i in range(12):
        # A chat row ends in a correction or a thumbs-up answer: every fourth item is corrected, the rest rated up.
        item = item_make(comment=f"Edited the wrong file ({i}).", vector=unit(i), rating=-1 if i % 4 == 0 else 1)
        if i % 4 == 0:
            label_make(item, corrected_response=f"Renamed foo in utils.py ({i}).")
    dataset = dataset_make("browser-set", formats=("chat_jsonl", "csv", "parquet"))

    log_in(page, "rita", "rita-password-123")
    page.goto(f"/datasets/{dataset.id}/")
    assert page.locator("#export-state").inner_text() == "Not exported yet."
    page.click("#export-now")

    page.locator("#export-state", has_text="Done").wait_for()
    assert page.locator("#export-progress").get_attribute("value") == "100"
    assert "Made v1: 12 items." in page.locator("#export-result").inner_text()
    links = page.locator("#export-status .exp-files a")
    assert [links.nth(i).inner_text() for i in range(links.count())] == [
        "README.md",
        "chat.jsonl",
        "items.csv",
        "items.parquet",
        "manifest.json",
    ]
    with page.expect_download() as download_info:
        page.locator("#export-status .exp-files a", has_text="chat.jsonl").click()
    download = download_info.value
    assert download.suggested_filename == "browser-set-v1-chat.jsonl"
    rows = [json.loads(line) for line in Path(download.path()).read_text().splitlines()]
    assert len(rows) == 12 and rows[0]["messages"][-1] == {
        "role": "assistant",
        "content": "Renamed foo in utils.py (0).",
    }

    version = DatasetVersion.objects.get()
    assert version.trigger == "reviewer" and version.made_by == "rita"
    assert (export_root / "browser-set" / "v1" / "chat.jsonl").read_bytes() == Path(download.path()).read_bytes()
    page.locator("#version-table a", has_text="v1").click()
    page.wait_for_url(f"**/datasets/{dataset.id}/v1/")
    assert page.locator("#version-items").inner_text() == "12"


def test_the_status_row_follows_a_run_to_done_and_then_stops_asking(page, reviewer_user, export_root):
    item_make()
    dataset = dataset_make("followed")
    run = ExportRun.objects.create(dataset=dataset, trigger="schedule", made_by="schedule '0 3 * * *'")
    requests = []
    page.on("request", lambda request: requests.append(request.url) if "/status" in request.url else None)
    log_in(page, "rita", "rita-password-123")
    page.goto(f"/datasets/{dataset.id}/")
    assert page.locator("#export-stage").inner_text() == "waiting for a worker"
    assert page.locator("#export-now").is_disabled()

    ExportRun.objects.filter(id=run.id).update(
        status="running", stage="writing files", progress=0.5, processed=1, total=2
    )
    page.locator("#export-stage", has_text="writing files").wait_for()
    assert page.locator("#export-progress").get_attribute("value") == "50"

    from exports import runs

    ExportRun.objects.filter(id=run.id).update(status="queued")
    runs.export_run_execute(run_id=run.id)
    page.locator("#export-state", has_text="Done").wait_for()
    assert page.locator("#export-progress").get_attribute("value") == "100"
    # The page reloads once with the new version: in the table, not only in the status row.
    page.locator("#version-table a", has_text="v1").wait_for()
    assert page.locator("#export-now").is_enabled()
    polled = len(requests)
    page.wait_for_timeout(2500)
    assert len(requests) == polled
