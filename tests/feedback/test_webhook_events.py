"""POST /api/v1/sources/<source>/events: signed rating webhooks."""

import json
import threading
import time

import pytest
from django.db import connection
from django.test import Client

from feedback import services
from feedback.models import FeedbackItem
from tests.factories import post_signed, rating_event, signed_headers, source_make, wsgi_environ

pytestmark = pytest.mark.django_db


@pytest.fixture
def product():
    return source_make("product")


def url(source) -> str:
    return f"/api/v1/sources/{source.slug}/events"


def test_it_stores_a_signed_event_with_its_parsed_fields_and_raw_payload(client, product):
    source, secret = product
    event = rating_event(id="evt_1")
    response = post_signed(client, source, secret, event)
    assert response.status_code == 202, response.content
    assert response.json()["accepted"] == 1
    assert response.json()["duplicate"] is False
    item = FeedbackItem.objects.get(source=source, external_id="evt_1")
    assert item.kind == "rating"
    assert item.rating == -1
    assert item.comment == "It edited the wrong file."
    assert item.model_name == "coder" and item.model_version == "2.1"
    assert item.variant == "A" and item.surface == "ide" and item.user_ref == "u_123"
    assert item.context["messages"][0]["content"] == "Rename foo to bar in utils.py"
    assert item.context["tool_calls"][0]["name"] == "edit_file"
    assert item.received_payload == event
    assert item.occurred_at.isoformat() == "2026-11-29T12:00:00+00:00"


def test_a_context_stored_as_received_is_kept_once_and_the_received_event_is_whole(client, product):
    source, secret = product
    event = rating_event(id="evt_once")
    assert post_signed(client, source, secret, event).status_code == 202
    item = FeedbackItem.objects.get(source=source, external_id="evt_once")
    assert item.context_as_received is True
    assert "context" not in item.raw_payload
    assert item.context == event["context"]
    assert item.received_payload == event


@pytest.mark.parametrize(
    "context",
    [
        {"messages": [{"role": "user", "content": "Fix it"}], "output": None},  # null dropped when stored
        {"output": "Done."},  # stored with its empty message list
    ],
)
def test_a_context_stored_differently_from_how_it_came_keeps_the_raw_copy(client, product, context):
    source, secret = product
    event = rating_event(id="evt_twice", context=context)
    assert post_signed(client, source, secret, event).status_code == 202
    item = FeedbackItem.objects.get(source=source, external_id="evt_twice")
    assert item.context_as_received is False
    assert item.context != context
    assert item.raw_payload == event == item.received_payload


def test_an_event_without_a_context_keeps_its_raw_payload_as_sent(client, product):
    source, secret = product
    event = rating_event(id="evt_bare")
    del event["context"]
    assert post_signed(client, source, secret, event).status_code == 202
    item = FeedbackItem.objects.get(source=source, external_id="evt_bare")
    assert item.context_as_received is False
    assert item.raw_payload == event == item.received_payload


def test_a_single_event_takes_its_id_from_the_webhook_id(client, product):
    source, secret = product
    event = rating_event()
    del event["id"]
    response = post_signed(client, source, secret, event, msg_id="msg_from_header")
    assert response.status_code == 202
    assert FeedbackItem.objects.filter(external_id="msg_from_header").exists()


def test_a_single_event_carrying_its_own_id_is_stored_under_that_id(client, product):
    # Delivery services send their own message id; the event id in the payload is the event's identity.
    source, secret = product
    response = post_signed(client, source, secret, rating_event(id="evt_a"), msg_id="msg_b")
    assert response.status_code == 202, response.content
    assert response.json()["results"] == [
        {"index": 0, "id": "evt_a", "status": "accepted", "error": None, "field": None}
    ]
    assert list(FeedbackItem.objects.values_list("external_id", flat=True)) == ["evt_a"]


def test_the_same_message_resent_under_its_webhook_id_is_a_duplicate(client, product):
    source, secret = product
    event = rating_event(id="evt_a")
    assert post_signed(client, source, secret, event, msg_id="msg_1").json()["duplicate"] is False
    again = post_signed(client, source, secret, event, msg_id="msg_1")
    assert again.status_code == 202
    assert again.json()["duplicate"] is True and again.json()["accepted"] == 0
    assert FeedbackItem.objects.count() == 1


def test_the_same_event_id_under_a_new_webhook_id_is_a_duplicate(client, product):
    source, secret = product
    assert post_signed(client, source, secret, rating_event(id="evt_a"), msg_id="msg_1").status_code == 202
    again = post_signed(client, source, secret, rating_event(id="evt_a", comment="resent"), msg_id="msg_2")
    assert again.status_code == 202
    assert again.json()["duplicate"] is True
    assert FeedbackItem.objects.get().comment == "It edited the wrong file."


def test_an_event_without_an_id_is_the_same_event_as_one_carrying_its_webhook_id(client, product):
    source, secret = product
    event = rating_event()
    del event["id"]
    assert post_signed(client, source, secret, event, msg_id="msg_1").status_code == 202
    again = post_signed(client, source, secret, dict(event, id="msg_1"), msg_id="msg_9")
    assert again.json()["duplicate"] is True
    assert list(FeedbackItem.objects.values_list("external_id", flat=True)) == ["msg_1"]


def test_a_redelivered_event_is_a_duplicate_and_stores_nothing_new(client, product):
    source, secret = product
    event = rating_event(id="evt_dup")
    assert post_signed(client, source, secret, event).status_code == 202
    changed = dict(event, comment="a different comment on redelivery")
    response = post_signed(client, source, secret, changed)
    assert response.status_code == 202
    assert response.json()["duplicate"] is True
    assert response.json()["accepted"] == 0 and response.json()["duplicates"] == 1
    item = FeedbackItem.objects.get()
    assert item.comment == "It edited the wrong file."


def test_the_same_event_id_from_two_sources_is_two_signals(client, product):
    source, secret = product
    other, other_secret = source_make("other")
    assert post_signed(client, source, secret, rating_event(id="evt_x")).status_code == 202
    assert post_signed(client, other, other_secret, rating_event(id="evt_x")).status_code == 202
    assert FeedbackItem.objects.count() == 2


# --- Signatures and timestamps -------------------------------------------------


def test_it_rejects_a_missing_signature(client, product):
    source, secret = product
    body = json.dumps(rating_event(id="evt_1")).encode()
    headers = signed_headers(secret, body, msg_id="evt_1")
    del headers["webhook-signature"]
    response = client.post(url(source), data=body, content_type="application/json", headers=headers)
    assert response.status_code == 401
    assert response.json() == {"error": "the webhook-signature header is missing"}
    assert FeedbackItem.objects.count() == 0


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp"])
def test_it_rejects_a_delivery_without_its_id_or_timestamp_header(client, product, missing):
    source, secret = product
    body = json.dumps(rating_event(id="evt_1")).encode()
    headers = signed_headers(secret, body, msg_id="evt_1")
    del headers[missing]
    response = client.post(url(source), data=body, content_type="application/json", headers=headers)
    assert response.status_code == 401
    assert response.json()["error"] == f"the {missing} header is missing"
    assert FeedbackItem.objects.count() == 0


def test_it_rejects_a_wrong_signature(client, product):
    source, _ = product
    _, other_secret = source_make("other")
    response = post_signed(client, source, other_secret, rating_event(id="evt_1"))
    assert response.status_code == 401
    assert "does not match" in response.json()["error"]
    assert FeedbackItem.objects.count() == 0


def test_it_rejects_a_body_changed_by_one_byte(client, product):
    source, secret = product
    body = json.dumps(rating_event(id="evt_1")).encode()
    headers = signed_headers(secret, body, msg_id="evt_1")
    tampered = body.replace(b'"down"', b'"dowN"')
    assert len(tampered) == len(body) and tampered != body
    response = client.post(url(source), data=tampered, content_type="application/json", headers=headers)
    assert response.status_code == 401
    assert "does not match" in response.json()["error"]
    assert FeedbackItem.objects.count() == 0


def test_it_rejects_an_unknown_source(client, product):
    _, secret = product
    body = json.dumps(rating_event(id="evt_1")).encode()
    response = client.post(
        "/api/v1/sources/nobody/events", data=body, content_type="application/json", headers=signed_headers(secret, body)
    )
    assert response.status_code == 404
    assert response.json() == {"error": "no active source 'nobody'"}
    assert FeedbackItem.objects.count() == 0


def test_it_rejects_a_deactivated_source(client, product):
    source, secret = product
    source.is_active = False
    source.save()
    response = post_signed(client, source, secret, rating_event(id="evt_1"))
    assert response.status_code == 404
    assert FeedbackItem.objects.count() == 0


@pytest.mark.parametrize("offset, word", [(-6 * 60, "too old"), (6 * 60, "future")])
def test_it_rejects_a_stale_or_future_timestamp(client, product, offset, word):
    source, secret = product
    response = post_signed(client, source, secret, rating_event(id="evt_1"), timestamp=int(time.time()) + offset)
    assert response.status_code == 401
    assert word in response.json()["error"]
    assert FeedbackItem.objects.count() == 0


def test_it_accepts_a_timestamp_four_minutes_old(client, product):
    source, secret = product
    response = post_signed(client, source, secret, rating_event(id="evt_1"), timestamp=int(time.time()) - 4 * 60)
    assert response.status_code == 202


def test_it_rejects_a_non_numeric_timestamp(client, product):
    source, secret = product
    body = json.dumps(rating_event(id="evt_1")).encode()
    headers = signed_headers(secret, body, msg_id="evt_1")
    headers["webhook-timestamp"] = "yesterday"
    response = client.post(url(source), data=body, content_type="application/json", headers=headers)
    assert response.status_code == 401
    assert "whole seconds" in response.json()["error"]


def test_rotation_accepts_both_secrets_until_the_previous_one_is_retired(client, product):
    source, old_secret = product
    new_secret = services.source_rotate_secret(source=source)
    assert post_signed(client, source, old_secret, rating_event(id="evt_old")).status_code == 202
    assert post_signed(client, source, new_secret, rating_event(id="evt_new")).status_code == 202

    services.source_retire_previous_secret(source=source)
    response = post_signed(client, source, old_secret, rating_event(id="evt_retired"))
    assert response.status_code == 401
    assert post_signed(client, source, new_secret, rating_event(id="evt_new2")).status_code == 202
    assert set(FeedbackItem.objects.values_list("external_id", flat=True)) == {"evt_old", "evt_new", "evt_new2"}


def test_a_signature_header_with_several_signatures_passes_when_one_matches(client, product):
    source, secret = product
    body = json.dumps(rating_event(id="evt_1")).encode()
    headers = signed_headers(secret, body, msg_id="evt_1")
    headers["webhook-signature"] = "v1,AAAAbogus " + headers["webhook-signature"]
    response = client.post(url(source), data=body, content_type="application/json", headers=headers)
    assert response.status_code == 202


# --- Malformed and oversize bodies ---------------------------------------------


def test_it_rejects_malformed_json_with_a_400(client, product):
    source, secret = product
    response = post_signed(client, source, secret, b'{"id": "evt_1", "rating": ', msg_id="evt_1")
    assert response.status_code == 400
    assert response.json()["error"].startswith("the request body is not valid JSON")
    assert FeedbackItem.objects.count() == 0


def test_a_wrong_type_in_a_field_names_the_field_path(client, product):
    source, secret = product
    event = rating_event(id="evt_1")
    event["context"]["messages"][0]["content"] = 42
    response = post_signed(client, source, secret, event)
    assert response.status_code == 422
    assert response.json()["field"] == "context.messages[0].content"
    assert response.json()["error"].startswith("context.messages[0].content: ")
    assert FeedbackItem.objects.count() == 0


@pytest.mark.parametrize(
    "change, field",
    [
        ({"rating": 1}, "rating"),
        ({"rating": "meh"}, "rating"),
        ({"type": "feedback.other"}, "type"),
        ({"occurred_at": "yesterday"}, "occurred_at"),
        ({"occurred_at": "2026-11-29T12:00:00"}, "occurred_at"),  # no time zone
        ({"occurred_at": 1764417600}, "occurred_at"),  # seconds since 1970 would be a guess
        ({"occurred_at": "1764417600000"}, "occurred_at"),  # so would milliseconds in quotes
        ({"model": {"name": "coder", "version": 2}}, "model.version"),
    ],
)
def test_it_names_the_first_bad_field(client, product, change, field):
    source, secret = product
    response = post_signed(client, source, secret, rating_event(id="evt_1", **change))
    assert response.status_code == 422
    assert response.json()["field"] == field


def test_a_missing_required_field_is_named(client, product):
    source, secret = product
    event = rating_event(id="evt_1")
    del event["occurred_at"]
    response = post_signed(client, source, secret, event)
    assert response.status_code == 422
    assert response.json() == {"error": "occurred_at: is required", "field": "occurred_at"}


def test_a_json_array_body_is_refused(client, product):
    source, secret = product
    response = post_signed(client, source, secret, b"[1, 2]", msg_id="m1")
    assert response.status_code == 422
    assert "must be a JSON object" in response.json()["error"]


def test_it_refuses_a_body_over_5_mib_without_reading_it(product):
    source, secret = product

    class Unreadable:
        """A body stream that fails if the view reads it."""

        def read(self, *args):
            raise AssertionError("the view read an oversize body")

        readline = read

    body_size = 5 * 1024 * 1024 + 1
    environ = wsgi_environ(
        "POST", url(source), Unreadable(), signed_headers(secret, b"x"), CONTENT_LENGTH=str(body_size)
    )
    response = Client().handler(environ)
    assert response.status_code == 413
    assert json.loads(response.content) == {"error": "the request body is larger than the limit of 5242880 bytes"}
    assert FeedbackItem.objects.count() == 0


def test_a_real_5_mib_body_gets_413(client, product):
    source, secret = product
    payload = {"events": [rating_event(comment="x" * 60_000) for _ in range(90)]}
    body = json.dumps(payload).encode()
    assert len(body) > 5 * 1024 * 1024
    response = client.post(url(source), data=body, content_type="application/json", headers=signed_headers(secret, body))
    assert response.status_code == 413
    assert FeedbackItem.objects.count() == 0


# --- Batches ---------------------------------------------------------------------


def test_a_batch_of_valid_events_is_stored_whole(client, product):
    source, secret = product
    events = [rating_event(id=f"evt_{i}", rating="up" if i % 2 else "down") for i in range(50)]
    response = post_signed(client, source, secret, {"events": events})
    assert response.status_code == 202
    body = response.json()
    assert body["accepted"] == 50 and body["duplicates"] == 0 and body["invalid"] == 0
    assert [result["id"] for result in body["results"]] == [f"evt_{i}" for i in range(50)]
    assert FeedbackItem.objects.count() == 50
    assert FeedbackItem.objects.filter(rating=1).count() == 25


def test_an_event_sent_alone_is_stored_as_the_same_event_in_a_batch(client, product):
    """Odd values (full-width and Arabic-Indic digits, quotes, a backslash, emoji, deep nesting, an integer
    past 2^53, 1e300) come out the same whichever way the event arrived."""
    source, secret = product
    odd = {
        "comment": "Ｔｅｓｔｓ ｐａｓｓ? no: ٣ failures, ‘quotes’ and a backslash \\ and 'apostrophes'",
        "context": {
            "messages": [{"role": "user", "content": "Run the tests; don't skip any 🙂"}],
            "output": "All ٣ tests pass.",
            "tool_calls": [{"name": "run", "arguments": {"deep": [[[{"n": 9007199254740993}]]], "f": 1e300}}],
            "note": None,
        },
    }
    response = post_signed(client, source, secret, rating_event(id="alone", **odd))
    assert response.status_code == 202, response.content
    batch = [rating_event(id="in_batch", **odd), rating_event(id="other")]
    assert post_signed(client, source, secret, {"events": batch}).status_code == 202
    skip = {"id", "external_id", "receipt_id", "received_at", "status_changed_at"}
    fields = [f.attname for f in FeedbackItem._meta.concrete_fields if f.attname not in skip]
    alone, in_batch = (FeedbackItem.objects.values(*fields).get(external_id=e) for e in ("alone", "in_batch"))
    # The events differ only in their ids, which the raw payloads keep.
    assert alone["raw_payload"].pop("id") == "alone" and in_batch["raw_payload"].pop("id") == "in_batch"
    assert alone == in_batch
    assert alone["comment"] == odd["comment"]
    assert alone["context"]["tool_calls"][0]["arguments"]["deep"][0][0][0]["n"] == 9007199254740993


def test_a_batch_of_1001_events_is_refused_whole(client, product):
    source, secret = product
    events = [rating_event(id=f"evt_{i}") for i in range(1001)]
    response = post_signed(client, source, secret, {"events": events})
    assert response.status_code == 413
    assert response.json() == {"error": "a batch holds at most 1000 events; this one has 1001", "field": "events"}
    assert FeedbackItem.objects.count() == 0


def test_a_batch_of_exactly_1000_events_is_accepted(client, product):
    source, secret = product
    events = [rating_event(id=f"evt_{i}") for i in range(1000)]
    response = post_signed(client, source, secret, {"events": events})
    assert response.status_code == 202
    assert FeedbackItem.objects.count() == 1000


def test_a_batch_with_some_bad_events_answers_207_and_stores_the_good_ones(client, product):
    source, secret = product
    events = [
        rating_event(id="good_1"),
        rating_event(id="bad_rating", rating="sideways"),
        "not an object",
        rating_event(id="good_2"),
        {k: v for k, v in rating_event().items() if k != "id"},
    ]
    response = post_signed(client, source, secret, {"events": events})
    assert response.status_code == 207
    body = response.json()
    assert body["accepted"] == 2 and body["invalid"] == 3
    statuses = [(r["index"], r["status"], r["field"]) for r in body["results"]]
    assert statuses == [
        (0, "accepted", None),
        (1, "invalid", "events[1].rating"),
        (2, "invalid", "events[2]"),
        (3, "accepted", None),
        (4, "invalid", "events[4].id"),
    ]
    assert set(FeedbackItem.objects.values_list("external_id", flat=True)) == {"good_1", "good_2"}


def test_a_nul_character_fails_only_the_event_that_holds_it(client, product):
    # PostgreSQL stores no NUL in text or JSON: the event is refused by name, its neighbours are kept.
    source, secret = product
    poisoned = rating_event(id="nul", context={"output": "binary junk \u0000 here"})
    response = post_signed(client, source, secret, {"events": [rating_event(id="good_1"), poisoned]})

    assert response.status_code == 207
    bad = response.json()["results"][1]
    assert (bad["status"], bad["id"], bad["field"]) == ("invalid", "nul", "events[1].context.output")
    assert bad["error"] == "events[1].context.output: text must not contain NUL (\\u0000) or unpaired surrogates"
    assert list(FeedbackItem.objects.values_list("external_id", flat=True)) == ["good_1"]

    single = post_signed(client, source, secret, rating_event(id="nul_2", comment="a\u0000b"), msg_id="nul_2")
    assert single.status_code == 422
    assert single.json() == {
        "error": "comment: text must not contain NUL (\\u0000) or unpaired surrogates", "field": "comment"
    }
    assert FeedbackItem.objects.count() == 1


def test_an_unpaired_surrogate_fails_only_its_event_and_a_paired_one_is_kept(client, product):
    source, secret = product
    events = [
        rating_event(id="emoji", comment="Great \U0001F600"),  # json.dumps escapes it as a surrogate pair
        rating_event(id="broken", context={"output": "half an emoji \ud83d"}),
    ]
    response = post_signed(client, source, secret, {"events": events})

    assert response.status_code == 207
    assert [(r["id"], r["status"], r["field"]) for r in response.json()["results"]] == [
        ("emoji", "accepted", None), ("broken", "invalid", "events[1].context.output")
    ]
    assert FeedbackItem.objects.get().comment == "Great \U0001F600"


def test_a_body_in_another_encoding_than_utf8_is_refused(client, product):
    source, secret = product
    body = json.dumps(rating_event(id="evt_16")).encode("utf-16")
    response = post_signed(client, source, secret, body, msg_id="evt_16")
    assert response.status_code == 400
    assert response.json() == {"error": "the request body is not UTF-8 text"}
    assert not FeedbackItem.objects.exists()


def test_a_batch_whose_events_are_all_bad_answers_422(client, product):
    source, secret = product
    response = post_signed(client, source, secret, {"events": [rating_event(id="b", rating=5)]})
    assert response.status_code == 422
    assert response.json()["field"] == "events[0].rating"


def test_events_that_is_not_a_list_is_refused(client, product):
    source, secret = product
    response = post_signed(client, source, secret, {"events": {"id": "x"}})
    assert response.status_code == 422
    assert response.json() == {"error": "events: must be a list of events", "field": "events"}


def test_duplicates_within_one_batch_are_stored_once(client, product):
    source, secret = product
    events = [rating_event(id="same", comment="first"), rating_event(id="same", comment="second"), rating_event(id="x")]
    response = post_signed(client, source, secret, {"events": events})
    assert response.status_code == 202
    assert [r["status"] for r in response.json()["results"]] == ["accepted", "duplicate", "accepted"]
    assert FeedbackItem.objects.get(external_id="same").comment == "first"


def test_a_redelivered_batch_reports_each_event_as_duplicate(client, product):
    source, secret = product
    events = [rating_event(id=f"evt_{i}") for i in range(5)]
    post_signed(client, source, secret, {"events": events[:3]})
    response = post_signed(client, source, secret, {"events": events})
    assert response.status_code == 202
    assert response.json()["accepted"] == 2 and response.json()["duplicates"] == 3
    assert FeedbackItem.objects.count() == 5


# --- Concurrency ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_deliveries_of_one_event_store_one_row_and_all_succeed(product):
    source, secret = product
    body = json.dumps(rating_event(id="evt_race")).encode()
    headers = signed_headers(secret, body, msg_id="evt_race")
    barrier = threading.Barrier(20)
    answers = []

    def deliver():
        try:
            barrier.wait()
            response = Client().post(url(source), data=body, content_type="application/json", headers=headers)
            answers.append((response.status_code, response.json().get("duplicate")))
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 20
    assert all(status == 202 for status, _ in answers), answers
    assert sorted(duplicate for _, duplicate in answers) == [False] + [True] * 19
    assert FeedbackItem.objects.filter(external_id="evt_race").count() == 1
