"""Reviewer pages facing hostile input: ids, dates, NUL characters, `next`, and blind double review.

Each case sends the exact input, checks the status and the message, and then
walks the pages as a reviewer and as an admin to show that nothing else broke.
Run it on PostgreSQL too (DATABASE_URL=postgres://...): NUL in text is what
PostgreSQL refuses.
"""

import json
import uuid
from datetime import date

import numpy as np
import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone

from core.ids import MAX_ID, id_parse
from exports.models import Dataset
from feedback.models import Embedding, FeedbackItem
from labeling.compare.params import version_key
from labeling.models import Assignment, Category, DoubleReview, Label, SavedComparison
from labeling.review import services as review_services
from tests.factories.compare import END, START, planted_data
from tests.factories.people import admin, reviewer  # noqa: F401 (fixtures: users, not clients)
from tests.factories import post_signed, rating_event, source_make, user_make

pytestmark = pytest.mark.django_db

VECTOR = np.random.default_rng(7).standard_normal(384).astype(np.float32)
VECTOR /= np.linalg.norm(VECTOR)
PAGES = ["/", "/compare/", "/search/", "/review/", "/categories/", "/areas/", "/agreement/", "/runs/"]
# Text that is not an id: a superscript two (str.isdigit() says yes, int() says no), an Arabic-Indic
# three (int() reads it), 5,000 digits (int() refuses), zero, negative, one past the largest bigint.
NOT_IDS = ["²", "٣", "1" * 5000, "0", "-1", str(MAX_ID + 1), "1.0"]


def thumbs_down_make() -> FeedbackItem:
    source, _ = source_make()
    return FeedbackItem.objects.create(
        source=source, external_id="e1", kind="rating", rating=-1, occurred_at=timezone.now(), receipt_id=uuid.uuid4()
    )


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def message_texts(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def assert_every_page_answers(*users, extra: tuple[str, ...] = ()) -> None:
    for user in users:
        client = logged_in(user)
        for url in (*PAGES, *extra):
            response = client.get(url)
            assert response.status_code == 200, (user.username, url, response.status_code)


# --- Ids -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [*NOT_IDS, " ", ""])
def test_id_parse_refuses_what_is_not_an_ascii_id_that_fits_a_bigint(text):
    assert id_parse(text) is None


def test_id_parse_reads_plain_ids_with_spaces_around_and_the_largest_bigint():
    assert id_parse("42") == 42
    assert id_parse(" 7 ") == 7
    assert id_parse(str(MAX_ID)) == MAX_ID
    assert id_parse(None) is None and id_parse(True) is None and id_parse(3) == 3


def test_a_model_version_spelled_superscript_two_keeps_the_compare_page_answering(client, reviewer, admin):
    source, secret = source_make()
    for version in ("²", "2.9", "2.10", "٣"):
        event = rating_event(model={"name": "coder", "version": version})
        assert post_signed(client, source, secret, event).status_code == 202
    assert FeedbackItem.objects.filter(model_version="²").exists()

    for user in (reviewer, admin):
        response = logged_in(user).get("/compare/")
        assert response.status_code == 200
        specs = [spec for spec in response.context["choices"]["specs"] if ":" not in spec]
        assert set(specs) == {"²", "2.9", "2.10", "٣"}
        # Numbers compare as numbers: 2.10 is newer than 2.9.
        assert specs.index("2.10") < specs.index("2.9")
    response = logged_in(reviewer).get("/compare/", {"a": "2.9", "b": "²", "from": "2026-11-01", "to": "2026-11-30"})
    assert response.status_code == 200
    assert response.context["comparison"].b.ratings == 1
    assert_every_page_answers(reviewer, admin)


def test_the_version_order_reads_only_ascii_digit_runs_as_numbers():
    versions = ["2.9", "²", "2.10", "10", "v٣", "1" * 90]
    ordered = sorted(versions, key=version_key)
    assert ordered.index("2.9") < ordered.index("2.10") < ordered.index("10") < ordered.index("1" * 90)


@pytest.mark.parametrize("text", NOT_IDS)
def test_search_refuses_a_category_or_area_that_is_not_an_id(text, reviewer):
    client = logged_in(reviewer)
    response = client.get("/search/", {"category": text})
    assert response.status_code == 422
    assert response.context["form"].errors["category"]
    response = client.get("/search/", {"area": text})
    assert response.status_code == 422
    assert response.context["form"].errors["area"]


@pytest.mark.parametrize("text", NOT_IDS)
def test_the_next_item_of_a_queue_that_is_not_an_id_sends_back_to_the_queues(text, reviewer):
    response = logged_in(reviewer).get("/review/next", {"category": text})
    assert response.status_code == 302 and response.url == "/review/"
    assert message_texts(response) == ["Pick a queue: an open category, unassigned items or double review."]


@pytest.mark.parametrize("text", NOT_IDS)
def test_an_item_page_with_a_queue_that_is_not_an_id_shows_the_item_without_a_queue(text, reviewer):
    item = thumbs_down_make()
    response = logged_in(reviewer).get(f"/items/{item.id}/", {"queue": text})
    assert response.status_code == 200
    assert response.context["queue"] is None


@pytest.mark.parametrize("text", NOT_IDS)
def test_skipping_an_item_that_is_not_an_id_says_there_is_nothing_to_skip(text, reviewer):
    response = logged_in(reviewer).post("/review/skip", {"item": text, "category": "unassigned"})
    assert response.status_code == 302 and response.url == "/review/"
    assert message_texts(response) == ["Nothing to skip."]


@pytest.mark.parametrize("text", NOT_IDS)
def test_skipping_in_a_queue_that_is_not_an_id_goes_back_to_the_item(text, reviewer):
    item = thumbs_down_make()
    response = logged_in(reviewer).post("/review/skip", {"item": str(item.id), "category": text})
    assert response.status_code == 302 and response.url == f"/items/{item.id}/"


@pytest.mark.parametrize("text", NOT_IDS)
def test_category_pages_take_an_area_or_merge_target_that_is_not_an_id_as_no_choice(text, reviewer):
    client = logged_in(reviewer)
    category = Category.objects.create(name="Edits the wrong file", status=Category.Status.PROPOSED)
    response = client.get("/categories/", {"area": text})
    assert response.status_code == 200
    assert "is not an area; showing every area" in response.context["area_filter"].notice
    response = client.post(f"/categories/{category.id}/merge", {"target": text})
    assert response.status_code == 422
    assert b"Choose the category to merge into." in response.content
    assert Category.objects.get(id=category.id).status == Category.Status.PROPOSED


# --- Dates of a comparison -------------------------------------------------------------


OUT_OF_RANGE = [
    ({"to": "9999-12-31"}, "to", "to: 9999-12-31 is outside the dates a comparison covers, 1970-01-01 to 2999-12-31"),
    ({"to": "0001-01-05"}, "to", "to: 0001-01-05 is outside the dates a comparison covers, 1970-01-01 to 2999-12-31"),
    (
        {"from": "9999-12-30", "to": "9999-12-31"},
        "from",
        "from: 9999-12-30 is outside the dates a comparison covers, 1970-01-01 to 2999-12-31",
    ),
    ({"from": "0001-01-01"}, "from", "from: 0001-01-01 is outside the dates a comparison covers, 1970-01-01 to 2999-12-31"),
]


@pytest.mark.parametrize("dates, field, message", OUT_OF_RANGE)
def test_the_compare_page_shows_an_out_of_range_date_as_a_form_error(dates, field, message, reviewer, admin):
    planted_data()
    response = logged_in(reviewer).get("/compare/", {"a": "1.0", "b": "1.1", **dates})
    assert response.status_code == 422
    assert response.context["error"].field == field
    assert response.context["error"].message == message
    assert message in response.content.decode()
    assert_every_page_answers(reviewer, admin, extra=(f"/compare/?a=1.0&b=1.1&from={START}&to={END}",))


@pytest.mark.parametrize("dates, field, message", OUT_OF_RANGE)
def test_the_compare_api_answers_422_naming_the_out_of_range_date(dates, field, message, reviewer):
    planted_data()
    response = logged_in(reviewer).get("/api/v1/compare", {"a": "1.0", "b": "1.1", **dates})
    assert response.status_code == 422
    assert response.json() == {"error": message, "field": field}
    assert logged_in(reviewer).get("/api/v1/compare", {"a": "1.0", "b": "1.1", "from": START, "to": END}).status_code == 200


def test_an_end_near_the_earliest_date_without_a_start_begins_the_window_at_the_earliest_date(reviewer):
    planted_data()
    response = logged_in(reviewer).get("/api/v1/compare", {"a": "1.0", "b": "1.1", "to": "1970-01-05"})
    assert response.status_code == 200
    assert response.json()["from"] == "1970-01-01" and response.json()["to"] == "1970-01-05"
    response = logged_in(reviewer).get("/api/v1/compare", {"a": "1.0", "b": "1.1", "to": "2999-12-31", "format": "csv"})
    assert response.status_code == 200


def test_saving_a_comparison_with_out_of_range_dates_saves_nothing(reviewer):
    planted_data()
    response = logged_in(reviewer).post(
        "/compare/saved/", {"a": "1.0", "b": "1.1", "from": "9999-12-30", "to": "9999-12-31"}
    )
    assert response.status_code == 302
    assert message_texts(response) == [
        "Not saved: from: 9999-12-30 is outside the dates a comparison covers, 1970-01-01 to 2999-12-31"
    ]
    assert not SavedComparison.objects.exists()


def test_a_stored_pin_with_out_of_range_dates_shows_an_error_note_and_the_other_pins_still_answer(reviewer, admin):
    planted_data()
    broken = SavedComparison.objects.create(
        name="Far future", a_version="1.0", b_version="1.1", date_from=date(9999, 12, 30), date_to=date(9999, 12, 31)
    )
    endless = SavedComparison.objects.create(name="Endless", a_version="1.0", b_version="1.1", window_days=10**9)
    good = SavedComparison.objects.create(name="Last release", a_version="1.0", b_version="1.1", date_from=START, date_to=END)

    for user in (reviewer, admin):
        response = logged_in(user).get("/")
        assert response.status_code == 200
        pins = {pin.saved.id: pin for pin in response.context["pinned_comparisons"]}
        assert pins[broken.id].error == "to: 9999-12-31 is outside the dates a comparison covers, 1970-01-01 to 2999-12-31"
        assert pins[endless.id].error == "window_days: the last 1000000000 days start before 1970-01-01"
        assert pins[good.id].error == "" and pins[good.id].regressed
        body = response.content.decode()
        assert "Cannot compare: to: 9999-12-31 is outside the dates a comparison covers" in body
        assert "significant regression" in body

        response = logged_in(user).get("/compare/")
        assert response.status_code == 200
        assert "Cannot compare: window_days: the last 1000000000 days start before 1970-01-01" in response.content.decode()
        # The saved list links the broken one to the compare page, which says what is wrong.
        entry = next(entry for entry in response.context["saved"] if entry.saved.id == broken.id)
        assert logged_in(user).get(entry.url).status_code == 422
    assert_every_page_answers(reviewer, admin)

    # It can still be unpinned and deleted.
    client = logged_in(reviewer)
    assert client.post(f"/compare/saved/{broken.id}/pin", {"pinned": "0", "next": "/"}).status_code == 302
    assert client.post(f"/compare/saved/{endless.id}/delete").status_code == 302
    assert list(SavedComparison.objects.filter(pinned=True)) == [good]


# --- NUL in posted forms -------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"name": "Edits\x00 the wrong file", "description": "ok"}, "name"),
        ({"name": "Edits the wrong file", "description": "bad\x00"}, "description"),
    ],
)
@pytest.mark.parametrize("encoding", ["urlencoded", "multipart"])
def test_a_category_rename_with_nul_is_refused_with_400_and_changes_nothing(fields, field, encoding, reviewer, admin):
    category = Category.objects.create(name="Old name", description="Old description")
    client = logged_in(reviewer)
    url = f"/categories/{category.id}/edit"
    if encoding == "urlencoded":
        from urllib.parse import urlencode

        response = client.post(url, urlencode(fields), content_type="application/x-www-form-urlencoded")
    else:
        response = client.post(url, fields)
    assert response.status_code == 400
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode() == f"the form field '{field}' must not contain a NUL character (\\x00)"
    category.refresh_from_db()
    assert (category.name, category.description) == ("Old name", "Old description")

    # The same form without the NUL is saved.
    response = client.post(url, {"name": "New name", "description": "New description"})
    assert response.status_code == 302
    category.refresh_from_db()
    assert category.name == "New name"
    assert_every_page_answers(reviewer, admin, extra=(f"/categories/{category.id}/",))


@pytest.mark.parametrize("field", ["name", "a", "from"])
def test_a_saved_comparison_with_nul_is_refused_with_400_and_nothing_is_saved(field, reviewer, admin):
    planted_data()
    fields = {"name": "Release", "a": "1.0", "b": "1.1", "from": str(START), "to": str(END)}
    fields[field] = fields[field] + "\x00"
    response = logged_in(reviewer).post("/compare/saved/", fields)
    assert response.status_code == 400
    assert response.content.decode() == f"the form field '{field}' must not contain a NUL character (\\x00)"
    assert not SavedComparison.objects.exists()
    assert_every_page_answers(reviewer, admin)


@pytest.mark.parametrize(
    "path, fields, field",
    [
        ("/areas/{area}/rename", {"name": "Fi\x00les"}, "name"),
        ("/areas/{area}/merge", {"target": "1\x00"}, "target"),
        ("/categories/{category}/area", {"area": "1\x00"}, "area"),
        ("/categories/{category}/split", {"name": "Split\x00", "items": "1"}, "name"),
        ("/review/skip", {"item": "1\x00", "category": "unassigned"}, "item"),
    ],
)
def test_every_page_form_refuses_nul_the_same_way(path, fields, field, reviewer):
    from labeling.models import Area

    area = Area.objects.create(name="Files and edits")
    category = Category.objects.create(name="Edits the wrong file", area=area)
    response = logged_in(reviewer).post(path.format(area=area.id, category=category.id), fields)
    assert response.status_code == 400
    assert response.content.decode() == f"the form field '{field}' must not contain a NUL character (\\x00)"
    assert Area.objects.get(id=area.id).name == "Files and edits"
    assert Category.objects.get(id=category.id).area_id == area.id
    assert Category.objects.count() == 1


def test_a_nul_in_a_field_name_is_refused_and_shown_escaped(reviewer):
    category = Category.objects.create(name="Old name")
    response = logged_in(reviewer).post(f"/categories/{category.id}/edit", {"na\x00me<b>": "x", "name": "New"})
    assert response.status_code == 400
    assert response.content.decode() == "the form field 'na\\x00me<b>' must not contain a NUL character (\\x00)"
    assert Category.objects.get(id=category.id).name == "Old name"


def test_a_login_with_nul_is_refused_with_400():
    response = Client().post("/login/", {"username": "ada\x00", "password": "x"})
    assert response.status_code == 400
    assert response.content.decode() == "the form field 'username' must not contain a NUL character (\\x00)"


def test_the_datasets_api_refuses_nul_in_json_text_with_422_naming_the_field(reviewer):
    client = logged_in(reviewer)
    body = {"name": "train-set", "purpose": "train", "formats": ["chat_jsonl"], "description": "bad\u0000"}
    response = client.post("/api/v1/datasets", json.dumps(body), content_type="application/json")
    assert response.status_code == 422
    assert response.json()["field"] == "description"
    assert "NUL" in response.json()["error"]
    assert not Dataset.objects.exists()
    body["description"] = "fine"
    assert client.post("/api/v1/datasets", json.dumps(body), content_type="application/json").status_code == 201


# --- `next` after pinning --------------------------------------------------------------


@pytest.mark.parametrize(
    "target, expected",
    [
        ("-1", "/compare/"),
        ("abc", "/compare/"),
        ("é", "/compare/"),
        ("compare", "/compare/"),
        ("", "/compare/"),
        ("//evil.example/", "/compare/"),
        ("https://evil.example/", "/compare/"),
        ("/\\evil.example", "/compare/"),
        ("/", "/"),
        ("/compare/?a=1.0&b=1.1", "/compare/?a=1.0&b=1.1"),
        ("/a\nb", "/a%0Ab"),
    ],
)
def test_pinning_follows_next_only_to_a_path_of_this_site(target, expected, reviewer):
    saved = SavedComparison.objects.create(a_version="1.0", b_version="1.1", pinned=False)
    response = logged_in(reviewer).post(f"/compare/saved/{saved.id}/pin", {"pinned": "1", "next": target})
    assert response.status_code == 302
    assert response.url == expected
    assert SavedComparison.objects.get(id=saved.id).pinned
    assert message_texts(response) == ["Pinned to the overview."]


# --- Blind double review in search ---------------------------------------------------------


@pytest.fixture
def blind_item(admin):
    """An item sampled for double review, labelled by a first reviewer into a category of their choosing."""
    source, _ = source_make()
    model_choice = Category.objects.create(name="Model's guess", status=Category.Status.CONFIRMED)
    first_choice = Category.objects.create(name="First reviewer's choice", status=Category.Status.CONFIRMED)
    item = FeedbackItem.objects.create(
        source=source, external_id="e1", kind="rating", rating=-1, comment="It edited the wrong file.",
        occurred_at=timezone.now(), receipt_id=uuid.uuid4(), status=FeedbackItem.Status.EMBEDDED,
        embedding=Embedding.objects.create(content_hash="h1", model_name="test", vector=VECTOR.tobytes()),
    )
    Assignment.objects.create(item=item, category=model_choice, confidence=0.9)
    first = user_make("fred", "reviewer")
    review_services.label_save(item=item, reviewer=first, verdict=Label.Verdict.FAILURE, category=first_choice)
    DoubleReview.objects.create(item=item, requested_by=admin)
    return {"item": item, "first": first, "first_choice": first_choice, "model_choice": model_choice}


def results_table(response) -> str:
    """The result rows of the search page, without the filter menus (which list every category)."""
    body = response.content.decode()
    return body[body.index("<tbody>") : body.index("</tbody>")]


def search_ids(client, **query) -> list[int]:
    response = client.get("/search/", query)
    assert response.status_code == 200
    return [item.id for item in response.context["page"]]


def test_a_second_reviewer_does_not_see_the_first_verdict_or_category_in_search(blind_item, reviewer):
    client = logged_in(reviewer)
    response = client.get("/search/")
    assert response.status_code == 200
    results = results_table(response)
    row = next(item for item in response.context["page"] if item.id == blind_item["item"].id)
    assert row.labels_hidden and row.category_hidden and row.verdict is None
    assert "First reviewer&#x27;s choice" not in results and "Model&#x27;s guess" not in results
    assert "verdict-failure" not in results
    assert results.count("hidden until you review it") == 2


@pytest.mark.parametrize(
    "query",
    [
        {"review": "failure"},
        {"review": "any"},
        {"review": "none"},
        {"review": "not_failure"},
        {"category": "first_choice"},
        {"category": "model_choice"},
        {"category": "none"},
    ],
)
def test_no_review_or_category_filter_tells_a_second_reviewer_the_first_label(query, blind_item, reviewer):
    query = {key: str(blind_item[value].id) if value in blind_item else value for key, value in query.items()}
    assert blind_item["item"].id not in search_ids(logged_in(reviewer), **query)
    assert blind_item["item"].id in search_ids(logged_in(reviewer))


def test_admins_and_the_first_reviewer_see_the_label_in_search(blind_item, admin):
    item_id = blind_item["item"].id
    for user in (admin, blind_item["first"]):
        client = logged_in(user)
        response = client.get("/search/")
        row = next(item for item in response.context["page"] if item.id == item_id)
        assert row.verdict == Label.Verdict.FAILURE and not row.labels_hidden and not row.category_hidden
        assert "First reviewer&#x27;s choice" in results_table(response)
        assert item_id in search_ids(client, review="failure")
        assert item_id in search_ids(client, category=str(blind_item["first_choice"].id))
        assert item_id not in search_ids(client, review="none")


def test_once_the_second_reviewer_has_labelled_the_item_search_shows_every_label(blind_item, reviewer, admin):
    item = blind_item["item"]
    review_services.label_save(item=item, reviewer=reviewer, verdict=Label.Verdict.NOT_FAILURE)
    client = logged_in(reviewer)
    assert item.id in search_ids(client, review="any")
    row = next(row for row in client.get("/search/").context["page"] if row.id == item.id)
    assert not row.labels_hidden and row.verdict == Label.Verdict.NOT_FAILURE
    assert_every_page_answers(reviewer, admin, extra=(f"/items/{item.id}/",))


def test_items_outside_double_review_show_their_labels_to_every_reviewer(reviewer):
    item = thumbs_down_make()
    review_services.label_save(item=item, reviewer=user_make("fred", "reviewer"), verdict=Label.Verdict.FAILURE)
    client = logged_in(reviewer)
    assert item.id in search_ids(client, review="failure")
    row = next(row for row in client.get("/search/").context["page"] if row.id == item.id)
    assert row.verdict == Label.Verdict.FAILURE and not row.labels_hidden


def test_the_category_page_does_not_list_an_item_to_its_second_reviewer_under_the_first_reviewers_category(
    blind_item, reviewer, admin
):
    url = f"/categories/{blind_item['first_choice'].id}/"
    response = logged_in(reviewer).get(url)
    assert response.status_code == 200
    assert blind_item["item"].id not in [item.id for item in response.context["page_obj"]]
    for user in (admin, blind_item["first"]):
        response = logged_in(user).get(url)
        assert blind_item["item"].id in [item.id for item in response.context["page_obj"]]


def test_the_similar_items_panel_hides_the_category_a_first_reviewer_chose(blind_item, reviewer, admin):
    source, _ = source_make("other")
    neighbour = FeedbackItem.objects.create(
        source=source, external_id="e2", kind="rating", rating=-1, comment="It edited another file.",
        occurred_at=timezone.now(), receipt_id=uuid.uuid4(), status=FeedbackItem.Status.EMBEDDED,
        embedding=Embedding.objects.create(content_hash="h2", model_name="test", vector=VECTOR.tobytes()),
    )
    response = logged_in(reviewer).get(f"/items/{neighbour.id}/similar")
    assert response.status_code == 200
    entry = next(entry for entry in response.context["similar"] if entry.item.id == blind_item["item"].id)
    assert entry.category_hidden
    body = response.content.decode()
    assert "First reviewer&#x27;s choice" not in body and "category hidden until you review it" in body
    response = logged_in(admin).get(f"/items/{neighbour.id}/similar")
    assert "First reviewer&#x27;s choice" in response.content.decode()
