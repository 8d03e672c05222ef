"""POST /api/v1/sources/<source>/events: JSON that parses but cannot be stored as sent.

Each such value fails only the event that holds it, with a 422 naming the
field (a batch answers 207 and keeps its other events); a body the parser
cannot read at all is a 400. Values at the edge of each limit are stored,
and the item page shows them.
"""

from datetime import UTC, datetime

import pytest

from feedback.models import FeedbackItem
from tests.factories import post_signed, rating_event, source_make, user_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def product():
    return source_make("product")


def nested(levels: int, leaf=1):
    """`levels` objects, one inside the other: {"a": {"a": ... leaf}}."""
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


DEEP_PATH_IN_METADATA = "context.metadata" + ".a" * 62  # the 65th level: event, context, metadata, 62 more
DEEP_PATH_IN_UNKNOWN_KEY = "extra" + ".a" * 63
TOO_DEEP = "arrays and objects may nest at most 64 levels deep"
TOO_BIG = "integers must lie between -2^63 and 2^63-1; send a larger number as text"

ODD_EVENTS = [
    pytest.param({"context": {"metadata": nested(254)}}, DEEP_PATH_IN_METADATA, TOO_DEEP, id="metadata-254-deep"),
    pytest.param({"extra": nested(300)}, DEEP_PATH_IN_UNKNOWN_KEY, TOO_DEEP, id="unknown-key-300-deep"),
    pytest.param({"context": {"metadata": {"n": 2**63}}}, "context.metadata.n", TOO_BIG, id="int-2^63"),
    pytest.param({"context": {"metadata": {"n": 2**64}}}, "context.metadata.n", TOO_BIG, id="int-2^64"),
    pytest.param({"extra": [-(2**63) - 1]}, "extra[0]", TOO_BIG, id="int-below-minus-2^63"),
    pytest.param(
        {"context": {"tool_calls": [{"name": "t", "arguments": {"seed": 10**30}}]}},
        "context.tool_calls[0].arguments.seed",
        TOO_BIG,
        id="int-in-tool-call",
    ),
    pytest.param(
        {"occurred_at": "0001-01-01T00:00:00+23:59"},
        "occurred_at",
        "Value error, must be a moment between the years 1 and 9999 in UTC",
        id="occurred-at-before-year-1-in-utc",
    ),
    pytest.param(
        {"occurred_at": "9999-12-31T23:59:59-23:59"},
        "occurred_at",
        "Value error, must be a moment between the years 1 and 9999 in UTC",
        id="occurred-at-after-year-9999-in-utc",
    ),
]


@pytest.mark.parametrize("change, field, problem", ODD_EVENTS)
def test_an_odd_value_fails_only_its_event_and_the_rest_of_the_batch_is_stored(client, product, change, field, problem):
    source, secret = product
    events = [rating_event(id="good_1"), rating_event(id="odd", **change), rating_event(id="good_2")]
    response = post_signed(client, source, secret, {"events": events})

    assert response.status_code == 207, response.content
    body = response.json()
    assert (body["accepted"], body["invalid"]) == (2, 1)
    assert body["results"][1] == {
        "index": 1,
        "id": "odd",
        "status": "invalid",
        "error": f"events[1].{field}: {problem}",
        "field": f"events[1].{field}",
    }
    assert set(FeedbackItem.objects.values_list("external_id", flat=True)) == {"good_1", "good_2"}


@pytest.mark.parametrize("change, field, problem", ODD_EVENTS)
def test_an_odd_value_in_a_single_event_is_a_422_naming_the_field(client, product, change, field, problem):
    source, secret = product
    response = post_signed(client, source, secret, rating_event(id="odd", **change), msg_id="odd")
    assert response.status_code == 422, response.content
    assert response.json() == {"error": f"{field}: {problem}", "field": field}
    assert not FeedbackItem.objects.exists()


def test_a_number_too_large_for_a_float_fails_only_its_event(client, product):
    source, secret = product
    # json.dumps cannot write 1e999; it is spliced into the body as a sender would write it.
    body = (
        '{"events": [%s, %s]}'
        % (
            '{"id": "huge", "type": "feedback.rating", "occurred_at": "2026-11-29T12:00:00Z", "rating": "up",'
            ' "context": {"metadata": {"score": 1e999}}}',
            '{"id": "good", "type": "feedback.rating", "occurred_at": "2026-11-29T12:00:00Z", "rating": "up"}',
        )
    ).encode()
    response = post_signed(client, source, secret, body, msg_id="m1")
    assert response.status_code == 207
    assert response.json()["results"][0]["error"] == (
        "events[0].context.metadata.score: this number is too large to store; send it as text"
    )
    assert list(FeedbackItem.objects.values_list("external_id", flat=True)) == ["good"]


# --- Bodies the parser cannot read: 400 for the whole body -------------------------------


@pytest.mark.parametrize(
    "body, error",
    [
        (b"[" * 100_000, "the request body nests arrays and objects too deeply; at most 64 levels are allowed"),
        (b'{"events": [' + b"[" * 5000 + b"]" * 5000 + b"]}",
         "the request body nests arrays and objects too deeply; at most 64 levels are allowed"),
        (b'{"id": "x", "rating": NaN}', "the request body is not valid JSON: NaN is not a JSON number"),
        (b'{"id": "x", "n": -Infinity}', "the request body is not valid JSON: -Infinity is not a JSON number"),
        (b'{"id": "x", "n": ' + b"7" * 5000 + b"}", "the request body holds a number too long to read"),
    ],
    ids=["100000-brackets", "5000-deep-in-a-batch", "NaN", "-Infinity", "5000-digits"],
)
def test_a_body_the_parser_cannot_read_is_a_400_with_a_clear_message(client, product, body, error):
    source, secret = product
    response = post_signed(client, source, secret, body, msg_id="m1")
    assert response.status_code == 400
    assert response.json() == {"error": error}
    assert not FeedbackItem.objects.exists()


# --- webhook-id as the event's id --------------------------------------------------------------


def test_a_webhook_id_too_long_to_be_the_events_id_is_a_422_naming_the_header(client, product):
    source, secret = product
    event = rating_event()
    del event["id"]
    response = post_signed(client, source, secret, event, msg_id="m" * 256)
    assert response.status_code == 422
    assert response.json() == {
        "error": "webhook-id: is 256 characters; an event id holds at most 255, so send the event's own id in the body",
        "field": "webhook-id",
    }
    assert not FeedbackItem.objects.exists()


def test_a_long_webhook_id_is_fine_when_the_event_carries_its_own_id(client, product):
    source, secret = product
    assert post_signed(client, source, secret, rating_event(id="evt_own"), msg_id="m" * 300).status_code == 202
    event = rating_event()
    del event["id"]
    assert post_signed(client, source, secret, event, msg_id="m" * 255).status_code == 202
    assert sorted(FeedbackItem.objects.values_list("external_id", flat=True)) == ["evt_own", "m" * 255]


# --- At the edge of each limit: stored, and the pages show it -------------------------------------


def test_values_at_the_edge_of_each_limit_are_stored_and_the_item_page_shows_them(client, product):
    source, secret = product
    event = rating_event(
        id="edge",
        occurred_at="2026-11-29T12:00:00+20:00",  # beyond PostgreSQL's +15:59; stored as the same moment in UTC
        context={"output": "ok", "metadata": {"deep": nested(60, leaf=[2**63 - 1, -(2**63)])}},
        extra=nested(63),
    )
    response = post_signed(client, source, secret, event)
    assert response.status_code == 202, response.content

    item = FeedbackItem.objects.get(external_id="edge")
    assert item.occurred_at == datetime(2026, 11, 28, 16, 0, tzinfo=UTC)
    assert item.received_payload == event
    assert item.context["metadata"] == event["context"]["metadata"]

    client.force_login(user_make("rita", "reviewer"))
    assert client.get(f"/items/{item.id}/").status_code == 200
    client.force_login(user_make("ada", "admin"))
    revealed = client.post(f"/items/{item.id}/reveal")
    assert revealed.status_code == 200
    assert "9223372036854775807" in revealed.content.decode()
