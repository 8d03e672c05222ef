"""POST /api/v1/reports: dogfooding reports with a bearer token."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from feedback import services
from feedback.models import FeedbackItem
from tests.factories import source_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def token():
    source, _ = source_make("dogfood")
    return services.api_token_create(source=source)


def report(**overrides):
    body = {
        "title": "Agent claimed the tests passed",
        "what_happened": "It ran pytest, 3 tests failed, and it said all green.",
        "expected": "Report the failures and fix them.",
        "severity": "high",
        "model_version": "2.1",
        "transcript": "$ pytest\n3 failed, 10 passed",
    }
    body.update(overrides)
    return body


def post(client, body, raw_token=None, **headers):
    if raw_token is not None:
        headers["Authorization"] = f"Bearer {raw_token}"
    data = body if isinstance(body, bytes) else json.dumps(body)
    return client.post("/api/v1/reports", data=data, content_type="application/json", headers=headers)


def test_it_stores_a_report_as_a_feedback_item_of_kind_report(client, token):
    token_row, raw = token
    response = post(client, report(), raw)
    assert response.status_code == 201, response.content
    assert response.json()["duplicate"] is False
    item = FeedbackItem.objects.get(id=response.json()["id"])
    assert item.kind == "report" and item.source == token_row.source
    assert item.title == "Agent claimed the tests passed"
    assert item.comment.startswith("It ran pytest")
    assert item.expected == "Report the failures and fix them."
    assert item.severity == "high" and item.model_version == "2.1"
    assert item.context == {"transcript": "$ pytest\n3 failed, 10 passed"}
    assert item.received_payload == report()
    token_row.refresh_from_db()
    assert token_row.last_used_at is not None


def test_a_report_with_a_repeated_id_is_a_duplicate(client, token):
    _, raw = token
    assert post(client, report(id="r-1"), raw).status_code == 201
    response = post(client, report(id="r-1", title="changed"), raw)
    assert response.status_code == 200
    assert response.json()["duplicate"] is True
    assert FeedbackItem.objects.get().title == "Agent claimed the tests passed"


def test_it_refuses_a_missing_token(client, token):
    response = post(client, report())
    assert response.status_code == 401
    assert "Authorization header is missing" in response.json()["error"]
    assert FeedbackItem.objects.count() == 0


def test_it_refuses_a_token_that_is_not_bearer(client, token):
    _, raw = token
    response = client.post(
        "/api/v1/reports", data=json.dumps(report()), content_type="application/json", headers={"Authorization": f"Basic {raw}"}
    )
    assert response.status_code == 401
    assert response.json() == {"error": "the Authorization header must be 'Bearer <token>'"}


def test_it_refuses_an_unknown_token(client, token):
    response = post(client, report(), "fbk_not-a-real-token")
    assert response.status_code == 401
    assert response.json() == {"error": "the API token is not valid"}
    assert FeedbackItem.objects.count() == 0


def test_it_refuses_a_revoked_token(client, token):
    token_row, raw = token
    services.api_token_revoke(token=token_row)
    response = post(client, report(), raw)
    assert response.status_code == 401
    assert response.json() == {"error": "the API token has been revoked"}
    assert FeedbackItem.objects.count() == 0


def test_it_refuses_an_expired_token(client):
    source, _ = source_make("dogfood")
    _, raw = services.api_token_create(source=source, expires_at=timezone.now() - timedelta(seconds=1))
    response = post(client, report(), raw)
    assert response.status_code == 401
    assert response.json() == {"error": "the API token has expired"}


def test_it_refuses_malformed_json(client, token):
    _, raw = token
    response = post(client, b'{"title": "x",', raw)
    assert response.status_code == 400
    assert response.json()["error"].startswith("the request body is not valid JSON")
    assert FeedbackItem.objects.count() == 0


@pytest.mark.parametrize(
    "change, field",
    [
        ({"title": ""}, "title"),
        ({"title": 5}, "title"),
        ({"severity": "apocalyptic"}, "severity"),
        ({"what_happened": None}, "what_happened"),
    ],
)
def test_it_names_the_bad_field(client, token, change, field):
    _, raw = token
    response = post(client, report(**change), raw)
    assert response.status_code == 422
    assert response.json()["field"] == field
    assert FeedbackItem.objects.count() == 0


def test_an_oversize_report_gets_413(client, token):
    _, raw = token
    response = post(client, report(transcript="x" * (5 * 1024 * 1024)), raw)
    assert response.status_code == 413
    assert FeedbackItem.objects.count() == 0


def test_a_token_never_stores_its_raw_value(token):
    token_row, raw = token
    assert raw not in (token_row.token_hash, token_row.prefix)
    assert len(raw) >= 43  # 32 random bytes, base64url
    assert token_row.token_hash == services.token_hash(raw)


# --- JSON that parses but cannot be stored as sent --------------------------------------------


def nested(levels: int):
    value = 1
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    "change, error, field",
    [
        ({"extra": nested(300)}, "arrays and objects may nest at most 64 levels deep", "extra" + ".a" * 63),
        (
            {"extra": {"n": 2**63}},
            "integers must lie between -2^63 and 2^63-1; send a larger number as text",
            "extra.n",
        ),
        ({"occurred_at": "0001-01-01T00:00:00+23:59"},
         "Value error, must be a moment between the years 1 and 9999 in UTC", "occurred_at"),
    ],
    ids=["unknown-key-300-deep", "int-2^63", "occurred-at-before-year-1-in-utc"],
)
def test_a_value_that_cannot_be_stored_is_a_422_naming_the_field(client, token, change, error, field):
    _, raw = token
    response = post(client, report(**change), raw)
    assert response.status_code == 422, response.content
    assert response.json() == {"error": f"{field}: {error}", "field": field}
    assert not FeedbackItem.objects.exists()
    assert post(client, report(), raw).status_code == 201  # the token still files the next report


def test_a_body_nested_beyond_what_the_parser_reads_is_a_400(client, token):
    _, raw = token
    response = post(client, b"[" * 100_000, raw)
    assert response.status_code == 400
    assert response.json() == {
        "error": "the request body nests arrays and objects too deeply; at most 64 levels are allowed"
    }


def test_a_report_at_the_edge_of_the_limits_is_stored(client, token):
    _, raw = token
    body = report(extra=nested(63), occurred_at="2026-11-29T12:00:00-20:00", counts=[2**63 - 1])
    response = post(client, body, raw)
    assert response.status_code == 201, response.content
    item = FeedbackItem.objects.get()
    assert item.received_payload == body
    assert item.occurred_at.isoformat() == "2026-11-30T08:00:00+00:00"
