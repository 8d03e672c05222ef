"""In a real browser: an admin uploads a file, watches the polled progress reach done and reads the report."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from feedback.imports import services as import_services
from feedback.models import FeedbackItem, ImportRun
from tests.browser.conftest import log_in
from tests.factories import rating_event

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def admin_user(transactional_db):
    user = get_user_model().objects.create_user("ada", password="ada-password-123")
    user.groups.add(Group.objects.get_or_create(name="admin")[0])
    return user


def test_an_admin_uploads_history_and_sees_the_report(page, admin_user, data_dir, tmp_path):
    lines = [json.dumps(rating_event(id=f"h{n}")) for n in range(5)]
    lines.insert(2, json.dumps(rating_event(id="bad", rating="sideways")))
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(lines) + "\n")

    log_in(page, "ada", "ada-password-123")
    page.click("nav >> text=Import")
    page.set_input_files("input[name=file]", str(path))
    page.fill("input[name=source]", "warehouse")
    page.click("#import-form button[type=submit]")

    page.wait_for_url("**/imports/*/")
    assert page.text_content("#import-state") == "Queued"
    run = ImportRun.objects.get()

    # The worker's part (no worker in this test): the page keeps polling meanwhile.
    import_services.import_run_step(run_id=run.id)

    page.locator("#import-state", has_text="Done").wait_for()
    assert page.text_content("#import-stored") == "5"
    assert page.text_content("#import-refused") == "1"
    assert page.get_attribute("#import-progress", "value") == "100"
    row = page.text_content("#import-refusals tbody tr")
    assert "3" in row and "bad" in row and "rating" in row
    assert FeedbackItem.objects.filter(source__name="warehouse").count() == 5

    page.click("text=← Imports")
    assert "history.jsonl" in page.text_content("#import-runs")
