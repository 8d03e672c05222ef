"""/api/v1/datasets: tokens or sessions, errors as {"error", "field"} with the right status, versions and files."""

import json

import pytest
from django.test import Client
from django_celery_beat.models import PeriodicTask

from exports import runs
from exports.models import Dataset, ExportRun
from feedback.services import api_token_create, api_token_revoke
from labeling.models import Category
from tests.factories.exports import (
    dataset_make,
    export,
    item_make,
    source_get,
)
from tests.factories import client_for, user_make

pytestmark = pytest.mark.django_db

SPEC = {"name": "api-set", "purpose": "train", "formats": ["chat_jsonl", "csv"], "filters": {"rating": "down"}}


@pytest.fixture
def token():
    _, raw = api_token_create(source=source_get("product"), scopes=["datasets"])
    return raw


class Api:
    def __init__(self, client: Client, headers: dict | None = None) -> None:
        self.client = client
        self.headers = headers or {}

    def get(self, path: str):
        return self.client.get(f"/api/v1{path}", headers=self.headers)

    def send(self, method: str, path: str, body=None):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body) if body is not None else b""
        return getattr(self.client, method)(
            f"/api/v1{path}", data=data, content_type="application/json", headers=self.headers
        )


@pytest.fixture
def api(token) -> Api:
    return Api(Client(), {"Authorization": f"Bearer {token}"})


def error(response) -> dict:
    body = response.json()
    assert set(body) <= {"error", "field"} and body["error"], body
    return body


# --- Who may ask ---------------------------------------------------------------------


def test_requests_without_a_token_or_session_are_401(client, export_root):
    dataset = dataset_make("private")
    anonymous = Api(client)
    for response in [
        anonymous.get("/datasets"),
        anonymous.get(f"/datasets/{dataset.id}"),
        anonymous.get(f"/datasets/{dataset.id}/versions"),
        anonymous.get(f"/datasets/{dataset.id}/versions/1/files/items.csv"),
        anonymous.send("post", "/datasets", SPEC),
        anonymous.send("patch", f"/datasets/{dataset.id}", {"description": "x"}),
        anonymous.send("post", f"/datasets/{dataset.id}/exports"),
    ]:
        assert response.status_code == 401
        assert "Bearer" in error(response)["error"]
    assert Dataset.objects.count() == 1 and not ExportRun.objects.exists()


def test_a_bad_or_revoked_token_is_401(token):
    wrong = Api(Client(), {"Authorization": "Bearer fbk_not-a-real-token"})
    assert error(wrong.get("/datasets"))["error"] == "the API token is not valid"
    assert Api(Client(), {"Authorization": "Basic abc"}).get("/datasets").status_code == 401
    from feedback.models import ApiToken

    api_token_revoke(token=ApiToken.objects.get())
    revoked = Api(Client(), {"Authorization": f"Bearer {token}"}).get("/datasets")
    assert revoked.status_code == 401 and error(revoked)["error"] == "the API token has been revoked"


def test_a_session_needs_the_reviewer_role_and_the_csrf_token_for_changes():
    nobody = Api(client_for(user_make("sam")))
    response = nobody.get("/datasets")
    assert response.status_code == 403 and error(response)["error"] == "datasets need the reviewer role"

    reviewer = user_make("rita", "reviewer")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(reviewer)
    assert Api(strict).get("/datasets").status_code == 200
    refused = Api(strict).send("post", "/datasets", SPEC)
    assert refused.status_code == 403 and "CSRF" in error(refused)["error"]
    assert not Dataset.objects.exists()
    assert Api(client_for(reviewer)).send("post", "/datasets", SPEC).status_code == 201


# --- Datasets --------------------------------------------------------------------------


def test_a_token_creates_lists_gets_and_updates_a_dataset(api):
    created = api.send("post", "/datasets", {**SPEC, "formats": ["csv", "chat_jsonl", "csv"], "description": "Downs."})
    assert created.status_code == 201
    body = created.json()
    assert (
        body["name"] == "api-set" and body["formats"] == ["chat_jsonl", "csv"] and body["filters"] == {"rating": "down"}
    )
    assert body["latest_version"] is None and body["latest_run"] is None and body["schedule"] is None

    assert [d["name"] for d in api.get("/datasets").json()] == ["api-set"]
    assert api.get(f"/datasets/{body['id']}").json()["description"] == "Downs."
    changed = api.send("patch", f"/datasets/{body['id']}", {"filters": {"verdicts": ["failure"]}, "purpose": "eval"})
    assert changed.status_code == 200
    assert changed.json()["filters"] == {"verdicts": ["failure"]} and changed.json()["purpose"] == "eval"
    assert changed.json()["formats"] == ["chat_jsonl", "csv"]


@pytest.mark.parametrize("body", [b"{not json", b"", b"\xff\xfe"])
def test_a_body_that_is_not_json_is_400(api, body):
    response = api.send("post", "/datasets", body)
    message = error(response)["error"]
    assert response.status_code == 400 and ("JSON" in message or "UTF-8" in message)
    assert not Dataset.objects.exists()


@pytest.mark.parametrize(
    "change, field",
    [
        ({"filters": {"verdicts": ["nope"]}}, "filters.verdicts[0]"),
        ({"filters": {"categories": ["3"]}}, "filters.categories[0]"),
        ({"filters": {"rating": "sideways"}}, "filters.rating"),
        ({"filters": {"date_from": "2026-13-01"}}, "filters.date_from"),
        ({"filters": {"date_to": 0}}, "filters.date_to"),
        ({"filters": {"date_from": "1699920000"}}, "filters.date_from"),
        ({"filters": {"reviewed_only": "yes"}}, "filters.reviewed_only"),
        ({"filters": {"colour": ["red"]}}, "filters.colour"),
        ({"filters": {"tags": "wrong file"}}, "filters.tags"),
        ({"formats": []}, "formats"),
        ({"formats": ["xlsx"]}, "formats[0]"),
        ({"name": "Bad Name"}, "name"),
        ({"name": ".hidden"}, "name"),
        ({"purpose": "test"}, "purpose"),
        ({"filters": {"categories": [987654]}}, "filters.categories[0]"),
        ({"filters": {"sources": ["product", "nowhere"]}}, "filters.sources[1]"),
        ({"schedule": {"cron": "0 3 * * *", "when": "now"}}, "schedule.when"),
    ],
)
def test_bad_values_are_422_naming_the_field(api, change, field):
    response = api.send("post", "/datasets", {**SPEC, **change})
    assert response.status_code == 422, response.content
    assert error(response)["field"] == field
    assert not Dataset.objects.exists()


def test_dates_in_the_wrong_order_are_422(api):
    response = api.send("post", "/datasets", {**SPEC, "filters": {"date_from": "2026-11-10", "date_to": "2026-11-01"}})
    assert response.status_code == 422 and "date_from is after date_to" in error(response)["error"]


def test_a_taken_name_is_409(api):
    api.send("post", "/datasets", SPEC)
    response = api.send("post", "/datasets", SPEC)
    assert response.status_code == 409 and error(response) == {
        "error": "a dataset named 'api-set' exists already",
        "field": "name",
    }


def test_unknown_ids_are_404(api, export_root):
    dataset = dataset_make("known")
    for path in [
        "/datasets/999",
        "/datasets/999/versions",
        f"/datasets/{dataset.id}/versions/1",
        f"/datasets/{dataset.id}/versions/1/files/items.csv",
        f"/datasets/{dataset.id}/exports/999",
    ]:
        assert api.get(path).status_code == 404, path
        error(api.get(path))
    assert api.send("patch", "/datasets/999", {"description": "x"}).status_code == 404
    assert api.send("post", "/datasets/999/exports").status_code == 404
    assert error(api.get("/datasets/abc"))["field"] == "dataset_id"


def test_renaming_after_a_version_is_422_and_changes_nothing(api, export_root):
    dataset = dataset_make("versioned")
    export(dataset)
    response = api.send("patch", f"/datasets/{dataset.id}", {"name": "renamed", "description": "new"})
    assert response.status_code == 422 and error(response)["field"] == "name"
    dataset.refresh_from_db()
    assert dataset.name == "versioned" and dataset.description == ""


# --- Schedules ------------------------------------------------------------------------------


def test_schedules_need_an_admin_session(api):
    scheduled = {**SPEC, "schedule": {"cron": "0 4 * * *", "mode": "incremental"}}
    by_token = api.send("post", "/datasets", scheduled)
    assert by_token.status_code == 403 and error(by_token)["field"] == "schedule"
    by_reviewer = Api(client_for(user_make("rita", "reviewer"))).send("post", "/datasets", scheduled)
    assert by_reviewer.status_code == 403 and not Dataset.objects.exists()

    admin = Api(client_for(user_make("ada", "admin")))
    created = admin.send("post", "/datasets", scheduled)
    assert created.status_code == 201 and created.json()["schedule"] == {"cron": "0 4 * * *", "mode": "incremental"}
    task = PeriodicTask.objects.get(task="exports.tasks.scheduled_export")
    assert task.args == f"[{created.json()['id']}]" and task.crontab.hour == "4"

    dataset_id = created.json()["id"]
    refused = api.send("patch", f"/datasets/{dataset_id}", {"schedule": {"cron": ""}})
    assert refused.status_code == 403
    bad = admin.send("patch", f"/datasets/{dataset_id}", {"schedule": {"cron": "0 25 * * *"}, "description": "kept?"})
    assert bad.status_code == 422 and error(bad)["field"] == "schedule.cron"
    assert Dataset.objects.get().description == ""  # all or nothing
    cleared = admin.send("patch", f"/datasets/{dataset_id}", {"schedule": {"cron": ""}})
    assert (
        cleared.json()["schedule"] is None
        and not PeriodicTask.objects.filter(task="exports.tasks.scheduled_export").exists()
    )


# --- Exports, versions and files --------------------------------------------------------------


def test_starting_an_export_answers_202_and_409_while_it_is_active(
    api, export_root, no_broker, django_capture_on_commit_callbacks
):
    dataset = dataset_make("exported")
    with django_capture_on_commit_callbacks(execute=True):
        started = api.send("post", f"/datasets/{dataset.id}/exports", {"mode": "snapshot"})
    assert started.status_code == 202 and started.json()["status"] == "queued"
    run_id = started.json()["id"]
    assert no_broker == [run_id]

    again = api.send("post", f"/datasets/{dataset.id}/exports")
    assert again.status_code == 409
    assert error(again)["error"] == f"an export of 'exported' is already queued (run {run_id})"
    assert api.send("post", f"/datasets/{dataset.id}/exports", {"mode": "sometimes"}).status_code == 422

    runs.export_run_execute(run_id=run_id)
    status = api.get(f"/datasets/{dataset.id}/exports/{run_id}").json()
    assert status["status"] == "done" and status["version"] == 1 and status["progress"] == 1.0
    assert ExportRun.objects.get().made_by.startswith("api token fbk_")


def test_versions_are_listed_newest_first_and_their_files_download(api, export_root):
    category = Category.objects.create(name="Wrong file", status=Category.Status.CONFIRMED)
    # A thumbs-up: a chat row ends only in an answer someone vouched for.
    item_make(rating=1)
    dataset = dataset_make("downloads", formats=("chat_jsonl", "parquet"))
    export(dataset)
    export(dataset, force=True)

    versions = api.get(f"/datasets/{dataset.id}/versions").json()
    assert [v["number"] for v in versions] == [2, 1]
    files = {entry["name"]: entry for entry in versions[1]["files"]}
    assert set(files) == {"chat.jsonl", "items.parquet", "README.md", "manifest.json"}
    assert files["chat.jsonl"]["rows"] == 1 and files["chat.jsonl"]["url"].endswith(
        f"/api/v1/datasets/{dataset.id}/versions/1/files/chat.jsonl"
    )

    detail = api.get(f"/datasets/{dataset.id}/versions/1").json()
    assert detail["manifest"]["version"] == 1 and detail["held_out"]["total"] == 0 and category
    for name, entry in files.items():
        response = api.get(f"/datasets/{dataset.id}/versions/1/files/{name}")
        content = b"".join(response.streaming_content)
        assert response.status_code == 200 and len(content) == entry["bytes"], name
    manifest = json.loads(b"".join(api.get(f"/datasets/{dataset.id}/versions/1/files/manifest.json").streaming_content))
    assert manifest == detail["manifest"]
    assert api.get(f"/datasets/{dataset.id}/versions/1/files/..%2Fv2%2Fchat.jsonl").status_code == 404


def test_a_file_missing_on_disk_is_404_with_the_way_to_restore_it(api, export_root):
    item_make()
    dataset = dataset_make("lost")
    export(dataset)
    (export_root / "lost" / "v1" / "items.csv").unlink()

    response = api.get(f"/datasets/{dataset.id}/versions/1/files/items.csv")

    assert response.status_code == 404 and "manage.py export lost --verify 1" in error(response)["error"]


def test_the_openapi_document_describes_the_dataset_endpoints(client):
    paths = client.get("/api/openapi.json").json()["paths"]
    assert {
        "/api/v1/datasets",
        "/api/v1/datasets/{dataset_id}",
        "/api/v1/datasets/{dataset_id}/exports",
        "/api/v1/datasets/{dataset_id}/versions/{number}/files/{name}",
    } <= set(paths)
    assert "DatasetIn" in json.dumps(paths["/api/v1/datasets"]["post"])
