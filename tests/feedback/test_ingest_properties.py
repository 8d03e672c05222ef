"""Property test: any JSON value in any field of an event is stored or refused by name, never a 5xx.

Generated values (any JSON, nesting near and far past the limit, integers
beyond 64 bits, odd unicode, NUL and escaped lone surrogates, timestamps at
the ends of the calendar) go into the free fields of an otherwise valid event
(text fields, the context and its metadata, tool-call arguments, extra keys
of a message, unknown top-level keys) and into the checked ones (id, rating,
occurred_at...). Each event is sent signed, alone (with or without its id,
under webhook-ids up to 332 characters) and in the middle of a batch: alone
it answers 202 or a 422 naming a field, and the batch stores its valid
neighbours whatever the middle event holds.
"""

import json
import uuid
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings, strategies as st

from feedback.models import FeedbackItem
from tests.factories import rating_event, signed_headers, source_make

pytestmark = pytest.mark.django_db

ODD_CHARACTERS = ["\x00", "\ud800", "\udfff", "\ud83d", "\U0001f600", "\u202e", "\ufeff", "\uffff", "\u2028", "\x7f",
                  "\\", '"', "é", "\u0301"]
odd_text = st.lists(st.text(max_size=6) | st.sampled_from(ODD_CHARACTERS), max_size=6).map("".join)
edge_integers = st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**30, -(10**40)])
# Offsets up to +/-23:59 parse; near year 1 or 9999 the moment leaves the calendar in UTC.
edge_timestamps = st.sampled_from(
    ["0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59", "2026-11-29T12:00:00+20:00", "0001-01-02T00:00:00Z"]
)


def nest(levels: int, leaf: Any, as_list: bool) -> Any:
    for _ in range(levels):
        leaf = [leaf] if as_list else {"k": leaf}
    return leaf


scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | edge_integers
    | st.floats(allow_nan=False, allow_infinity=False)  # the only floats json.dumps writes as JSON
    | odd_text
    | edge_timestamps
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(odd_text, children, max_size=3),
    max_leaves=12,
)
# Nesting near the limit of 64 levels, and far past it.
deep_values = st.builds(nest, st.sampled_from([10, 60, 61, 62, 63, 64, 65, 254, 300]), scalars, st.booleans())
any_value = json_values | deep_values

# Where a value may go: a path into the event. A value in a checked field (rating, type,
# occurred_at, model.version...) is mostly refused; that is fine, as long as the refusal names the field.
SLOTS = [
    ("comment",), ("variant",), ("surface",), ("user_ref",), ("model", "name"), ("model", "version"), ("model",),
    ("context", "output"), ("context", "metadata"), ("context", "metadata", "free"), ("context", "extra"),
    ("context", "tool_calls", 0, "arguments"), ("context", "tool_calls", 0, "result"),
    ("context", "messages", 0, "content"), ("context", "messages", 0, "extra"), ("context",),
    ("unknown_top_level_key",), ("id",), ("occurred_at",), ("rating",), ("type",),
]


def put(event: dict, path: tuple, value: Any) -> None:
    target = event
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


@st.composite
def odd_events(draw) -> dict:
    event = rating_event(id=f"odd_{uuid.uuid4().hex}")
    event["context"]["metadata"] = {"repo": "acme/api"}
    for path in draw(st.lists(st.sampled_from(SLOTS), min_size=1, max_size=3, unique=True)):
        try:
            put(event, path, draw(any_value))
        except (KeyError, IndexError, TypeError):  # an earlier draw replaced a container on this path
            pass
    return event


def post(client: Client, source, secret: str, payload: dict, msg_id: str):
    body = json.dumps(payload).encode()  # ensure_ascii: NUL and lone surrogates travel as \u escapes
    return client.post(
        f"/api/v1/sources/{source.slug}/events",
        data=body,
        content_type="application/json",
        headers=signed_headers(secret, body, msg_id=msg_id),
    )


def assert_refusal_names_its_field(answer: dict) -> None:
    assert set(answer) == {"error", "field"}, answer
    assert answer["field"] and answer["error"].startswith(f"{answer['field']}: "), answer


# A delivery service's message ids, and ones too long to serve as an event's id.
message_ids = st.builds(lambda length: "m" * length + uuid.uuid4().hex, st.sampled_from([0, 200, 223, 224, 300]))


@pytest.fixture
def product():
    return source_make("product")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(event=odd_events(), msg_id=message_ids, without_id=st.booleans())
def test_any_value_in_any_field_is_stored_or_refused_by_name_and_never_sinks_a_batch(
    product, event, msg_id, without_id
):
    source, secret = product
    client = Client(raise_request_exception=False)

    alone = {key: value for key, value in event.items() if key != "id"} if without_id else event
    single = post(client, source, secret, alone, msg_id=msg_id)
    assert single.status_code in (202, 422), (single.status_code, single.content[:500])
    if single.status_code == 422:
        assert_refusal_names_its_field(single.json())

    neighbours = [rating_event(id=f"good_{uuid.uuid4().hex}") for _ in range(2)]
    batch_event = dict(event, id=f"batch_{uuid.uuid4().hex}")
    batch_body = {"events": [neighbours[0], batch_event, neighbours[1]]}
    batch = post(client, source, secret, batch_body, msg_id=f"msg_{uuid.uuid4().hex}")
    assert batch.status_code in (202, 207), (batch.status_code, batch.content[:500])
    results = batch.json()["results"]
    assert [result["status"] for result in (results[0], results[2])] == ["accepted", "accepted"]
    neighbour_ids = {neighbour["id"] for neighbour in neighbours}
    assert set(FeedbackItem.objects.filter(external_id__in=neighbour_ids).values_list("external_id", flat=True)) == (
        neighbour_ids
    )
    middle = results[1]
    if middle["status"] == "invalid":
        assert middle["field"].startswith("events[1]") and middle["error"].startswith(f"{middle['field']}: "), middle
    if single.status_code == 202 and "id" in alone:
        # Valid alone means valid in a batch too (under its batch id).
        assert middle["status"] == "accepted", middle
