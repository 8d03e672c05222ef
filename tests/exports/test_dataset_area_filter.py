"""A dataset filtered by area: who it takes, merged areas, the manifest, the form, and bad `areas` values."""

import json

import pytest
from django.test import Client

from exports.models import Dataset
from exports.selectors import areas_followed, filters_described
from feedback.services import api_token_create
from labeling.models import Area, Assignment, Category
from tests.factories.exports import (
    dataset_make,
    export,
    item_make,
    member_ids,
    source_get,
)
from tests.factories import client_for, user_make

pytestmark = pytest.mark.django_db

SPEC = {"name": "area-set", "purpose": "train", "formats": ["csv"]}
HUGE = 2**64  # beyond a 64-bit id


@pytest.fixture
def areas():
    """Files: two items in a category, one unsorted. Tests: one in a category. One item in no area, one unassigned."""
    files = Area.objects.create(name="Files and edits", status=Area.Status.CONFIRMED)
    tests = Area.objects.create(name="Tests and verification")
    wrong = Category.objects.create(name="Edits the wrong file", area=files, size=2)
    claims = Category.objects.create(name="Claims tests pass", area=tests, size=1)
    loose = Category.objects.create(name="Asks too many questions", size=1)
    in_category = [item_make(comment=f"wrong file {i}") for i in range(2)]
    unsorted = item_make(comment="odd edit")
    tested = item_make(comment="claims green")
    nowhere = item_make(comment="asks again")
    item_make(comment="never clustered")
    Assignment.objects.bulk_create(
        [Assignment(item=item, category=wrong, area=files) for item in in_category]
        + [
            Assignment(item=unsorted, area=files),
            Assignment(item=tested, category=claims, area=tests),
            Assignment(item=nowhere, category=loose),
        ]
    )
    return {
        "files": files,
        "tests": tests,
        "files_items": {item.id for item in in_category} | {unsorted.id},
        "tests_items": {tested.id},
    }


@pytest.fixture
def api():
    _, raw = api_token_create(source=source_get("product"), scopes=["datasets"])
    return Api(Client(), {"Authorization": f"Bearer {raw}"})


class Api:
    def __init__(self, client: Client, headers: dict) -> None:
        self.client = client
        self.headers = headers

    def post(self, path: str, body):
        return self.client.post(
            f"/api/v1{path}", data=json.dumps(body), content_type="application/json", headers=self.headers
        )

    def patch(self, path: str, body):
        return self.client.patch(
            f"/api/v1{path}", data=json.dumps(body), content_type="application/json", headers=self.headers
        )


# --- Which items ----------------------------------------------------------------------------


def test_a_dataset_filtered_by_an_area_exports_its_category_members_and_its_unsorted_items(export_root, areas):
    dataset = dataset_make("files-only", filters={"areas": [areas["files"].id]})

    version = export(dataset)

    assert member_ids(version) == areas["files_items"]
    assert version.manifest["filters"] == {"areas": [areas["files"].id]}


def test_several_areas_take_the_items_of_each(export_root, areas):
    dataset = dataset_make("both", filters={"areas": [areas["files"].id, areas["tests"].id]})

    assert member_ids(export(dataset)) == areas["files_items"] | areas["tests_items"]


def test_the_area_filter_combines_with_the_category_filter(export_root, areas):
    wrong = Category.objects.get(name="Edits the wrong file")
    dataset = dataset_make("files-wrong", filters={"areas": [areas["files"].id], "categories": [wrong.id]})

    assert member_ids(export(dataset)) == set(Assignment.objects.filter(category=wrong).values_list("item", flat=True))


def test_a_merged_area_id_means_the_area_it_was_merged_into(export_root, areas):
    files, tests = areas["files"], areas["tests"]
    Area.objects.filter(id=tests.id).update(status=Area.Status.MERGED, merged_into=files)
    # What a merge leaves: the assignments moved, so the merged area holds nothing itself.
    Assignment.objects.filter(area=tests).update(area=files)

    dataset = dataset_make("via-merged", filters={"areas": [tests.id]})

    assert member_ids(export(dataset)) == areas["files_items"] | areas["tests_items"]


def test_an_area_merged_after_the_dataset_was_defined_is_followed_at_export_time(export_root, areas):
    files, tests = areas["files"], areas["tests"]
    dataset = dataset_make("followed", filters={"areas": [tests.id]})
    Area.objects.filter(id=tests.id).update(status=Area.Status.MERGED, merged_into=files)
    Assignment.objects.filter(area=tests).update(area=files)

    assert member_ids(export(dataset)) == areas["files_items"] | areas["tests_items"]


def test_a_chain_of_merges_is_followed_to_its_end():
    a = Area.objects.create(name="a")
    b = Area.objects.create(name="b")
    c = Area.objects.create(name="c")
    Area.objects.filter(id=a.id).update(status=Area.Status.MERGED, merged_into=b)
    Area.objects.filter(id=b.id).update(status=Area.Status.MERGED, merged_into=c)

    assert areas_followed([a.id]) == {a.id, b.id, c.id}
    assert areas_followed([c.id]) == {a.id, b.id, c.id}


def test_the_manifest_counts_items_by_area_beside_by_category(export_root, areas):
    dataset = dataset_make("counted")

    counts = export(dataset).manifest["counts"]

    assert counts["by_area"] == {"(none)": 2, "Files and edits": 3, "Tests and verification": 1}
    assert counts["by_category"]["Edits the wrong file"] == 2


# --- Bad values -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "areas_value, field, message",
    [
        (["3"], "filters.areas[0]", None),
        ([1.5], "filters.areas[0]", None),
        ([True], "filters.areas[0]", None),
        ([0], "filters.areas[0]", None),
        ([HUGE], "filters.areas[0]", None),
        ("3", "filters.areas", None),
        ([987654], "filters.areas[0]", "no area with id 987654"),
        ("known-then-unknown", "filters.areas[1]", "no area with id 987654"),
    ],
)
def test_bad_area_ids_are_422_naming_the_field_and_nothing_is_stored(api, areas, areas_value, field, message):
    if areas_value == "known-then-unknown":
        areas_value = [areas["files"].id, 987654]
    response = api.post("/datasets", {**SPEC, "filters": {"areas": areas_value}})

    assert response.status_code == 422, response.content
    body = response.json()
    assert body["field"] == field and body["error"]
    if message:
        assert body["error"] == message
    assert not Dataset.objects.exists()


def test_bad_area_ids_mirror_bad_category_ids(api):
    by_area = api.post("/datasets", {**SPEC, "filters": {"areas": [987654]}})
    by_category = api.post("/datasets", {**SPEC, "filters": {"categories": [987654]}})

    assert by_area.status_code == by_category.status_code == 422
    assert by_area.json()["field"] == "filters.areas[0]" and by_category.json()["field"] == "filters.categories[0]"
    assert by_area.json()["error"] == by_category.json()["error"].replace("category", "area")


def test_a_refused_change_leaves_the_dataset_as_it_was(api, areas):
    created = api.post("/datasets", {**SPEC, "filters": {"areas": [areas["files"].id]}})
    assert created.status_code == 201, created.content

    refused = api.patch(f"/datasets/{created.json()['id']}", {"filters": {"areas": [HUGE]}})

    assert refused.status_code == 422 and refused.json()["field"] == "filters.areas[0]"
    assert Dataset.objects.get().filters == {"areas": [areas["files"].id]}


def test_the_api_takes_a_merged_area_id(api, areas):
    Area.objects.filter(id=areas["tests"].id).update(status=Area.Status.MERGED, merged_into=areas["files"])

    response = api.post("/datasets", {**SPEC, "filters": {"areas": [areas["tests"].id]}})

    assert response.status_code == 201, response.content
    assert response.json()["filters"] == {"areas": [areas["tests"].id]}


def test_the_openapi_schema_documents_the_areas_filter(client):
    schema = client.get("/api/openapi.json").json()
    filters = schema["components"]["schemas"]["DatasetFilters"]["properties"]

    assert filters["areas"]["type"] == "array"
    assert filters["areas"]["items"]["type"] == "integer"


# --- The dataset form -------------------------------------------------------------------------


def test_the_form_offers_the_open_areas_by_name(areas):
    Area.objects.create(name="Old files", status=Area.Status.MERGED, merged_into=areas["files"])
    reviewer = client_for(user_make("rita", "reviewer"))

    html = reviewer.get("/datasets/new").content.decode()

    select = html.split('name="areas"')[1].split("</select>")[0]
    assert f'value="{areas["files"].id}">Files and edits (confirmed)</option>' in select
    assert f'value="{areas["tests"].id}">Tests and verification (proposed)</option>' in select
    assert "Old files" not in select


def test_a_dataset_made_in_the_form_keeps_its_areas_and_shows_them_by_name(areas, export_root):
    reviewer = client_for(user_make("rita", "reviewer"))
    form = {"name": "form-set", "purpose": "train", "description": "", "formats": ["csv"], "rating": ""}

    response = reviewer.post("/datasets/new", {**form, "areas": [areas["files"].id]})

    assert response.status_code == 302, response.content.decode()[:2000]
    dataset = Dataset.objects.get()
    assert dataset.filters == {"areas": [areas["files"].id]}
    assert ("Areas", "Files and edits") in filters_described(filters=dataset.filters)


def test_the_form_refuses_an_area_it_does_not_offer(areas):
    reviewer = client_for(user_make("rita", "reviewer"))
    form = {"name": "form-set", "purpose": "train", "description": "", "formats": ["csv"], "rating": ""}

    response = reviewer.post("/datasets/new", {**form, "areas": ["987654"]})

    assert response.status_code == 422 and not Dataset.objects.exists()
    assert "987654" in response.content.decode()
