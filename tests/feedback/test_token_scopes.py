"""API tokens carry scopes: a product backend's token files reports and reads nothing else."""

import io

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from exports.models import Dataset
from feedback import services
from feedback.models import ApiToken, FeedbackItem, Source
from tests.factories import source_make

pytestmark = pytest.mark.django_db

REPORT = {"id": "rep-1", "title": "It deleted my tests", "what_happened": "Asked for a rename; it removed tests/."}
DATASET = {"name": "scoped", "purpose": "train", "formats": ["csv"]}


@pytest.fixture
def source():
    return source_make("product")[0]


def bearer(raw: str) -> dict:
    return {"Authorization": f"Bearer {raw}"}


def test_a_new_token_may_only_file_reports(client, source):
    # Every route for every scope is walked in test_access_walk; here: the default and the exact answer.
    token, raw = services.api_token_create(source=source)
    assert token.scopes == ["reports"]

    filed = client.post("/api/v1/reports", REPORT, content_type="application/json", headers=bearer(raw))
    assert filed.status_code == 201

    refused = client.post("/api/v1/datasets", DATASET, content_type="application/json", headers=bearer(raw))
    assert refused.status_code == 403
    assert refused.json() == {
        "error": "this token may not use the datasets API (it has: reports); an admin can grant it"
    }
    assert not Dataset.objects.exists()


@pytest.mark.parametrize("path, scope", [("/api/v1/datasets", "datasets"), ("/api/v1/bulk-actions/1/undo", "review")])
def test_every_api_that_takes_a_token_records_when_it_was_used(client, source, path, scope):
    token, raw = services.api_token_create(source=source, scopes=[scope])
    assert token.last_used_at is None
    if path.endswith("/undo"):
        answer = client.post(path, content_type="application/json", headers=bearer(raw))
        assert answer.status_code == 404  # authenticated, then no such action
    else:
        assert client.get(path, headers=bearer(raw)).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_a_dataset_token_reads_datasets_but_files_no_report(client, source):
    _, raw = services.api_token_create(source=source, scopes=["datasets", "compare"])

    assert client.get("/api/v1/datasets", headers=bearer(raw)).status_code == 200
    created = client.post("/api/v1/datasets", DATASET, content_type="application/json", headers=bearer(raw))
    assert created.status_code == 201
    # Past the scope check: versions without ratings are the next thing it hears about.
    compared = client.get("/api/v1/compare?a=1&b=2", headers=bearer(raw))
    assert compared.status_code == 404 and "version" in compared.json()["error"]

    refused = client.post("/api/v1/reports", REPORT, content_type="application/json", headers=bearer(raw))
    assert refused.status_code == 403
    assert refused.json()["error"].startswith("this token may not use the reports API (it has: compare, datasets)")
    assert not FeedbackItem.objects.exists()


@pytest.mark.parametrize("scopes", [[], ["everything"], ["reports", "admin"]])
def test_a_token_cannot_be_made_with_unknown_or_no_scopes(source, scopes):
    with pytest.raises(ValueError, match="scopes must be some of reports, datasets, compare"):
        services.api_token_create(source=source, scopes=scopes)
    assert not ApiToken.objects.exists()


def source_create(*args) -> dict[str, str]:
    out = io.StringIO()
    call_command("source_create", *args, stdout=out)
    return dict(line.split(": ", 1) for line in out.getvalue().splitlines())


def test_source_create_gives_a_reports_token_unless_told_otherwise():
    assert source_create("backend")["token scopes"] == "reports"
    printed = source_create("trainer", "--scopes", "datasets,compare")
    assert printed["token scopes"] == "datasets, compare"
    assert ApiToken.objects.get(source__slug="trainer").scopes == ["compare", "datasets"]


@pytest.mark.parametrize("scopes", ["", "datasets,root"])
def test_source_create_refuses_unknown_scopes_before_creating_anything(scopes):
    with pytest.raises(CommandError, match="--scopes: use some of reports, datasets, compare"):
        source_create("backend", "--scopes", scopes)
    assert not Source.objects.exists()


def test_an_admin_changes_a_tokens_scopes(admin_client, source):
    token, raw = services.api_token_create(source=source)
    form = {"source": source.id, "name": "ci", "scopes": ["reports", "datasets"], "token_hash": token.token_hash}

    response = admin_client.post(f"/admin/feedback/apitoken/{token.id}/change/", form)

    assert response.status_code == 302, response.content.decode()[:2000]
    token.refresh_from_db()
    assert sorted(token.scopes) == ["datasets", "reports"]
    assert token.token_hash == services.token_hash(raw)


@pytest.mark.django_db(transaction=True)
def test_tokens_made_before_scopes_existed_keep_every_api():
    executor = MigrationExecutor(connection)
    executor.migrate([("feedback", "0003_source_scrub_patterns")])
    old_apps = executor.loader.project_state([("feedback", "0003_source_scrub_patterns")]).apps
    old_source = old_apps.get_model("feedback", "Source").objects.create(name="old", slug="old", signing_secret="x")
    old_apps.get_model("feedback", "ApiToken").objects.create(source=old_source, token_hash="h" * 64, prefix="fbk_old")

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert ApiToken.objects.get(prefix="fbk_old").scopes == ["reports", "datasets", "compare"]
