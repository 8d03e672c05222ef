"""The upload page: admins only, checked uploads, a run in a task, its polled progress and report."""

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from feedback.imports import services as import_services
from feedback.models import FeedbackItem, ImportRun, Source
from tests.factories import client_for, rating_event, user_make

# Every upload lands in a temporary data folder.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("data_dir")]


@pytest.fixture
def queued(monkeypatch):
    """Run ids handed to the worker (no broker in these tests)."""
    ids = []
    monkeypatch.setattr("feedback.tasks.import_file.apply_async", lambda args, **kwargs: ids.append(args[0]))
    return ids


def jsonl(*events) -> bytes:
    return "".join(json.dumps(event) + "\n" for event in events).encode()


def upload(client, content: bytes, name: str = "history.jsonl", **fields):
    data = {"file": SimpleUploadedFile(name, content), "source": "warehouse", **fields}
    return client.post("/imports/", data)


def work() -> None:
    """What the worker does with the runs waiting (the tests have no broker)."""
    for run_id in ImportRun.objects.filter(status=ImportRun.Status.QUEUED).values_list("id", flat=True):
        while import_services.import_run_step(run_id=run_id, budget_seconds=None).more:
            pass


def test_an_admin_uploads_a_file_and_reads_the_report(admin, queued, django_capture_on_commit_callbacks, data_dir):
    content = jsonl(rating_event(id="a"), rating_event(id="b", rating="sideways"), rating_event(id="c"))

    with django_capture_on_commit_callbacks(execute=True):
        response = upload(admin, content)

    run = ImportRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/imports/{run.id}/"
    assert queued == [run.id]
    assert (run.status, run.made_by, run.source.kind) == (ImportRun.Status.QUEUED, "ada", Source.Kind.IMPORT)
    stored_file = Path(run.path)
    assert stored_file.parent == data_dir / "imports" and stored_file.read_bytes() == content

    page = admin.get(f"/imports/{run.id}/")
    assert page.status_code == 200
    assert b'hx-get="/imports/%d/status"' % run.id in page.content
    assert b"waiting for a worker" in page.content

    work()

    status = admin.get(f"/imports/{run.id}/status")
    assert status.status_code == 200 and status["Cache-Control"] == "no-store"
    body = status.content.decode()
    assert 'data-status="done"' in body and "hx-get" not in body
    assert '<td id="import-stored">2</td>' in body and '<td id="import-refused">1</td>' in body
    assert "<td>2</td><td>b</td><td><code>rating</code></td>" in body
    assert sorted(FeedbackItem.objects.values_list("external_id", flat=True)) == ["a", "c"]
    assert not stored_file.exists()  # an uploaded file is removed once read

    listing = admin.get("/imports/").content.decode()
    assert "history.jsonl" in listing and f'href="/imports/{run.id}/"' in listing


def test_the_same_file_uploaded_twice_stores_nothing_the_second_time(admin, queued):
    content = jsonl(*[rating_event(id=f"e{n}") for n in range(5)])
    upload(admin, content)
    upload(admin, content)

    import_services.import_run_step(run_id=ImportRun.objects.order_by("id")[0].id)
    import_services.import_run_step(run_id=ImportRun.objects.order_by("id")[1].id)

    first, second = ImportRun.objects.order_by("id")
    assert (first.stored, first.duplicates) == (5, 0)
    assert (second.stored, second.duplicates) == (0, 5)
    assert FeedbackItem.objects.count() == 5


def test_reviewers_and_anonymous_visitors_cannot_import(queued):
    reviewer = client_for(user_make("rev", "reviewer"))
    assert reviewer.get("/imports/").status_code == 403
    assert upload(reviewer, jsonl(rating_event(id="a"))).status_code == 403
    anonymous = Client()
    response = upload(anonymous, jsonl(rating_event(id="a")))
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert Client().get("/imports/1/status").status_code == 302
    assert not ImportRun.objects.exists() and not FeedbackItem.objects.exists() and queued == []


def test_only_admins_see_the_nav_link(admin):
    reviewer = client_for(user_make("rev", "reviewer"))
    assert b'href="/imports/"' in admin.get("/reports/new").content
    assert b'href="/imports/"' not in reviewer.get("/reports/new").content


def test_an_upload_without_the_csrf_token_is_refused(queued):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user_make("ada", "admin"))

    response = upload(client, jsonl(rating_event(id="a")))

    assert response.status_code == 403
    assert not ImportRun.objects.exists()


def test_an_oversize_upload_is_refused_and_nothing_kept(admin, queued, data_dir, monkeypatch):
    monkeypatch.setattr("feedback.imports.views.MAX_UPLOAD_BYTES", 4096)

    response = upload(admin, jsonl(*[rating_event(id=f"e{n}") for n in range(20)]))

    assert response.status_code == 413
    assert b"larger than the limit" in response.content
    assert not ImportRun.objects.exists() and not FeedbackItem.objects.exists()
    assert not (data_dir / "imports").exists() or not any((data_dir / "imports").iterdir())


def test_a_form_without_a_file_or_source_says_what_is_missing(admin, queued):
    response = admin.post("/imports/", {"source": ""})

    assert response.status_code == 422
    body = response.content.decode()
    assert "Please correct the fields marked below." in body
    assert body.count("This field is required.") == 2
    assert not ImportRun.objects.exists()


def test_an_unknown_extension_asks_for_a_format_and_keeps_nothing(admin, queued, data_dir):
    response = upload(admin, jsonl(rating_event(id="a")), name="history.txt")

    assert response.status_code == 422
    assert "Cannot tell the format of" in response.content.decode()
    assert not ImportRun.objects.exists()

    response = upload(admin, jsonl(rating_event(id="a")), name="history.txt", format="jsonl")
    assert response.status_code == 302


def test_a_file_that_is_not_parquet_is_refused_and_removed(admin, queued, data_dir):
    response = upload(admin, b"not,parquet\n", name="items.parquet")

    assert response.status_code == 422
    assert "Not a parquet file" in response.content.decode()
    assert not ImportRun.objects.exists()
    assert not any((data_dir / "imports").iterdir())


def test_a_deactivated_source_is_refused(admin, queued):
    Source.objects.create(name="warehouse", slug="warehouse", signing_secret="whsec_dGVzdA==", is_active=False)

    response = upload(admin, jsonl(rating_event(id="a")))

    assert response.status_code == 422
    assert "deactivated" in response.content.decode()
    assert not ImportRun.objects.exists()


def test_a_file_name_that_looks_like_a_path_is_only_a_name(admin, queued, data_dir):
    response = upload(admin, jsonl(rating_event(id="a")), name="../../../etc/history.jsonl")

    assert response.status_code == 302
    run = ImportRun.objects.get()
    assert Path(run.path).parent == data_dir / "imports"
    assert run.file_name == "history.jsonl"


def test_an_empty_file_is_refused_by_the_form(admin, queued):
    response = upload(admin, b"", name="empty.csv")

    assert response.status_code == 422
    assert "The submitted file is empty." in response.content.decode()
    assert not ImportRun.objects.exists()


def test_a_csv_of_only_a_header_ends_done_with_nothing_stored(admin, queued):
    upload(admin, b"id,occurred_at,rating\n", name="empty.csv")
    work()

    run = ImportRun.objects.get()
    assert (run.status, run.stored, run.refused, run.percent) == (ImportRun.Status.DONE, 0, 0, 100)


def test_langfuse_names_from_the_form_are_kept_with_the_run(admin, queued):
    upload(admin, b"{}\n", name="scores.jsonl", format="langfuse", names=" user-feedback, thumbs ,")

    assert ImportRun.objects.get().options["names"] == ["thumbs", "user-feedback"]


def test_a_run_left_queued_is_queued_again_by_its_status_poll(admin, queued):
    upload(admin, jsonl(rating_event(id="a")))
    run = ImportRun.objects.get()
    ImportRun.objects.filter(id=run.id).update(updated_at=run.updated_at.replace(year=2020))

    admin.get(f"/imports/{run.id}/status")
    admin.get(f"/imports/{run.id}/status")  # the first poll touched it: no second queueing

    assert queued == [run.id]


def test_an_unknown_run_is_404(admin):
    assert admin.get("/imports/999/").status_code == 404
    assert admin.get("/imports/999/status").status_code == 404
