"""/api/v1/bulk-actions: every operation, and every refusal with its status, message and nothing changed."""

import json

import pytest
from django.test import Client

from exports.models import Dataset
from feedback import services as feedback_services
from labeling.models import Assignment, AuditEvent, BulkAction, Category, DatasetPin, DoubleReview, Label
from tests.factories import client_for
from tests.factories.review import category_make, item_make

pytestmark = pytest.mark.django_db
URL = "/api/v1/bulk-actions"


@pytest.fixture
def setting(source):
    other_source = feedback_services.source_create(name="other product")[0]
    old = category_make("Edits the wrong file")
    new = category_make("Claims the tests passed", status=Category.Status.CONFIRMED)
    mine = [item_make(source, category=old) for _ in range(3)]
    theirs = [item_make(other_source, category=old)]
    Category.objects.filter(id=old.id).update(size=4)
    dataset = Dataset.objects.create(name="evals", purpose="eval", formats=["eval_jsonl"])
    return {"old": old, "new": new, "mine": mine, "theirs": theirs, "dataset": dataset, "source": source}


def token_for(source, *scopes):
    return feedback_services.api_token_create(source=source, scopes=scopes)[1]


def post(client, body, token=None, url=URL):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post(url, data=json.dumps(body), content_type="application/json", headers=headers)


def everything():
    """What any bulk action could change."""
    return {
        "assignments": sorted(Assignment.objects.values_list("item_id", "category_id", "assigned_by", "confidence")),
        "labels": sorted(Label.objects.values_list("item_id", "verdict", "tags", "split", "updated_at")),
        "pins": sorted(DatasetPin.objects.values_list("dataset_id", "item_id")),
        "double": sorted(DoubleReview.objects.values_list("item_id", flat=True)),
        "sizes": sorted(Category.objects.values_list("id", "size")),
        "actions": BulkAction.objects.count(),
        "events": AuditEvent.objects.count(),
    }


def ids(items):
    return [item.id for item in items]


# --- Each operation, through a reviewer's session -----------------------------------------


@pytest.mark.parametrize(
    ("body", "check"),
    [
        ({"action": "move"}, lambda s: Assignment.objects.filter(category=s["new"]).count() == 3),
        ({"action": "verdict", "verdict": "failure"}, lambda s: Label.objects.filter(verdict="failure").count() == 3),
        ({"action": "pin"}, lambda s: DatasetPin.objects.filter(dataset_id=s["dataset"].id).count() == 3),
        ({"action": "queue"}, lambda s: DoubleReview.objects.count() == 3),
    ],
)
def test_each_operation_works_for_a_reviewers_session_and_undoes(setting, reviewer, body, check):
    before = everything()
    client = client_for(reviewer)
    body = {"items": ids(setting["mine"]), "category": setting["new"].id, "dataset": setting["dataset"].id, **body}
    response = post(client, body)
    assert response.status_code == 201, response.content
    answer = response.json()
    assert answer["items"] == 3 and answer["made_by"] == "rita" and answer["undone_at"] is None
    assert check(setting)
    undone = client.post(answer["undo_url"])
    assert undone.status_code == 200 and undone.json()["restored"] == 3
    after = everything()
    assert {k: v for k, v in after.items() if k not in ("events", "actions")} == {
        k: v for k, v in before.items() if k not in ("events", "actions")
    }


def test_tags_and_split_work_on_the_reviewers_labels(setting, reviewer):
    client = client_for(reviewer)
    assert post(client, {"action": "verdict", "verdict": "failure", "items": ids(setting["mine"])}).status_code == 201
    tagged = post(client, {"action": "tags_add", "tags": ["claimed success falsely"], "items": ids(setting["mine"])})
    assert tagged.status_code == 201 and tagged.json()["items"] == 3
    split = post(client, {"action": "split", "split": "eval", "items": ids(setting["mine"])})
    assert split.status_code == 201
    removed = post(client, {"action": "tags_remove", "tags": ["claimed success falsely"], "items": ids(setting["mine"])})
    assert removed.status_code == 201
    assert set(Label.objects.values_list("split", flat=True)) == {"eval"}
    assert [label.tags for label in Label.objects.all()] == [[]] * 3


def test_a_filter_selects_what_the_page_lists(setting, reviewer):
    client = client_for(reviewer)
    body = {"action": "move", "category": setting["new"].id, "filter": {"scope": "category", "id": setting["old"].id}}
    response = post(client, body)
    assert response.status_code == 201 and response.json()["items"] == 4


# --- A token: scope and source ------------------------------------------------------------


def test_a_token_with_the_review_scope_moves_its_own_sources_items(setting):
    token = token_for(setting["source"], "review")
    response = post(Client(), {"action": "move", "category": setting["new"].id, "items": ids(setting["mine"])}, token)
    assert response.status_code == 201
    assert response.json()["made_by"].startswith("api token fbk_")
    action = BulkAction.objects.get()
    undone = post(Client(), {}, token, url=f"{URL}/{action.id}/undo")
    assert undone.status_code == 200 and undone.json()["restored"] == 3


def test_a_token_filter_takes_only_its_own_sources_items(setting):
    token = token_for(setting["source"], "review")
    body = {"action": "move", "category": setting["new"].id, "filter": {"scope": "category", "id": setting["old"].id}}
    response = post(Client(), body, token)
    assert response.status_code == 201 and response.json()["items"] == 3
    assert Assignment.objects.get(item=setting["theirs"][0]).category_id == setting["old"].id


def test_unauthorised_wrong_scope_and_no_role_are_refused(setting, no_role_user):
    body = {"action": "move", "category": setting["new"].id, "items": ids(setting["mine"])}
    before = everything()
    anonymous = post(Client(), body)
    assert anonymous.status_code == 401
    assert anonymous.json() == {"error": "log in, or send 'Authorization: Bearer <token>'"}
    bad = post(Client(), body, "fbk_not-a-real-token")
    assert bad.status_code == 401 and bad.json()["error"] == "the API token is not valid"
    wrong_scope = post(Client(), body, token_for(setting["source"], "reports", "datasets"))
    assert wrong_scope.status_code == 403
    assert wrong_scope.json()["error"] == (
        "this token may not use the review API (it has: datasets, reports); an admin can grant it"
    )
    no_role = post(client_for(no_role_user), body)
    assert no_role.status_code == 403 and no_role.json()["error"] == "bulk actions need the reviewer role"
    assert everything() == before


def test_a_session_needs_the_csrf_token(setting, reviewer):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(reviewer)
    before = everything()
    response = post(strict, {"action": "move", "category": setting["new"].id, "items": ids(setting["mine"])})
    assert response.status_code == 403 and "CSRF" in response.json()["error"]
    assert everything() == before


def test_a_token_may_not_write_labels(setting):
    before = everything()
    token = token_for(setting["source"], "review")
    response = post(Client(), {"action": "verdict", "verdict": "spam", "items": ids(setting["mine"])}, token)
    assert response.status_code == 403 and response.json()["field"] == "action"
    assert "labels are a reviewer's judgement" in response.json()["error"]
    assert everything() == before


@pytest.mark.parametrize("action", ["move", "pin", "queue"])
def test_ids_of_another_sources_items_are_refused(setting, action):
    before = everything()
    token = token_for(setting["source"], "review")
    body = {
        "action": action, "category": setting["new"].id, "dataset": setting["dataset"].id,
        "items": ids(setting["mine"] + setting["theirs"]),
    }
    response = post(Client(), body, token)
    assert response.status_code == 403
    assert response.json() == {
        "error": f"1 of the selected items belong to another source than this token's: {setting['theirs'][0].id}",
        "field": "items",
    }
    assert everything() == before


# --- Malformed, empty, unknown, oversize, odd ------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "error", "field"),
    [
        ({"action": "move", "category": 1, "items": []}, 422,
         "the selection is empty: tick some items, or select all matching", "items"),
        ({"action": "move", "category": 1, "items": [987654321, 987654322]}, 404,
         "2 of the selected items do not exist: 987654321, 987654322", "items"),
        ({"action": "move", "category": 1, "items": list(range(1, 10_002))}, 413,
         "10,001 items selected; a bulk action takes at most 10,000", "items"),
        ({"action": "move", "category": 1, "items": list(range(1, 100_002))}, 422,
         "items: List should have at most 100000 items after validation, not 100001", "items"),
        ({"action": "move", "category": 1}, 422, "send either items (ids) or filter, not both and not neither", "items"),
        ({"action": "move", "category": 1, "items": ["1"]}, 422, "items[0]: Input should be a valid integer", "items[0]"),
        ({"action": "move", "category": 1, "items": [0]}, 422,
         "items[0]: Input should be greater than or equal to 1", "items[0]"),
        ({"action": "explode", "items": [1]}, 422, None, "action"),
        ({"action": "move", "items": [1], "extra": True}, 422, None, "extra"),
        ({"action": "move", "category": 1, "filter": {"scope": "search", "params": {"date_from": "2026-13-01"}}},
         422, None, "filter.params.date_from"),
        ({"action": "move", "category": 1, "filter": {"scope": "category", "id": 987654}}, 404,
         "the category of the filter does not exist", "filter.id"),
    ],
)
def test_a_bad_body_is_refused_and_nothing_changes(setting, reviewer, body, status, error, field):
    if body.get("category") == 1:
        body["category"] = setting["new"].id
    before = everything()
    response = post(client_for(reviewer), body)
    assert response.status_code == status, response.content
    answer = response.json()
    if error is not None:
        assert answer["error"] == error
    assert answer["field"] == field
    assert everything() == before


def test_not_json_is_a_400(setting, reviewer):
    response = client_for(reviewer).post(URL, data=b"{nope", content_type="application/json")
    assert response.status_code == 400 and response.json()["error"].startswith("the request body is not valid JSON")


def test_a_target_that_cannot_take_items_is_a_conflict(setting, reviewer):
    Category.objects.filter(id=setting["new"].id).update(status=Category.Status.ARCHIVED)
    before = everything()
    response = post(client_for(reviewer), {"action": "move", "category": setting["new"].id, "items": ids(setting["mine"])})
    assert response.status_code == 409 and response.json()["field"] == "category"
    assert everything() == before


def test_undo_refusals(setting, reviewer, second_reviewer):
    client = client_for(reviewer)
    created = post(client, {"action": "queue", "items": ids(setting["mine"])}).json()
    assert client.post(f"{URL}/987654/undo").status_code == 404
    assert client.post(f"{URL}/{2**64}/undo").status_code in (404, 422)
    other = client_for(second_reviewer).post(created["undo_url"])
    assert other.status_code == 403 and DoubleReview.objects.count() == 3
    assert client.post(created["undo_url"]).status_code == 200
    again = client.post(created["undo_url"])
    assert again.status_code == 409 and again.json()["error"] == "this bulk action was undone already"
    token = token_for(setting["source"], "review")
    assert post(Client(), {}, token, url=created["undo_url"]).status_code == 403


def test_the_openapi_document_describes_the_bulk_actions(client):
    document = client.get("/api/openapi.json").json()
    create = document["paths"][URL]["post"]
    assert create["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/BulkActionIn"}
    assert {"201", "401", "403", "404", "409", "413", "422"} <= set(create["responses"])
    assert "review" in create["description"]
    assert set(document["paths"][f"{URL}/{{action_id}}/undo"]["post"]["responses"]) >= {"200", "403", "404", "409"}
    schema = document["components"]["schemas"]["BulkActionIn"]
    assert schema["properties"]["action"]["enum"] == ["move", "verdict", "tags_add", "tags_remove", "split", "pin", "queue"]
