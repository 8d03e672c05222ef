"""config.wsgi: signed webhook deliveries take the handler with the short middleware list, everything
else the full one; both answer as the app does, with the guards each kind of request needs."""

import io
import json

import pytest
from django.urls import reverse

from config import wsgi
from feedback.models import FeedbackItem
from tests.factories import rating_event, signed_headers, source_make, wsgi_environ


def call(method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None, *, host="testserver"):
    """One request through config.wsgi.application, as gunicorn would hand it over."""
    environ = wsgi_environ(
        method,
        path,
        io.BytesIO(body),
        headers,
        QUERY_STRING="",
        CONTENT_LENGTH=str(len(body)),
        SERVER_PROTOCOL="HTTP/1.1",
        HTTP_HOST=host,
        REMOTE_ADDR="127.0.0.1",
        **{"wsgi.errors": io.StringIO()},
    )
    answer: dict = {}

    def start_response(status, response_headers, exc_info=None):
        answer["status"] = int(status.split()[0])
        answer["headers"] = {name.lower(): value for name, value in response_headers}

    result = wsgi.application(environ, start_response)
    try:
        answer["body"] = b"".join(result)
    finally:
        result.close()
    return answer


def test_the_webhook_path_is_the_path_of_the_receive_events_route():
    assert wsgi.WEBHOOK_PATH.fullmatch(reverse("api:receive_events", kwargs={"slug": "product-7"}))
    for other in ("/api/v1/reports", "/api/v1/sources/product/events/extra", "/login/", "/api/v1/sources//events"):
        assert not wsgi.WEBHOOK_PATH.fullmatch(other), other


@pytest.fixture
def handlers_built(monkeypatch):
    """Which handler answered each request."""
    seen: list[str] = []
    for name in ("webhooks", "pages"):
        handler = getattr(wsgi.application, name)
        monkeypatch.setattr(wsgi.application, name, lambda environ, start, _h=handler, _n=name: seen.append(_n) or _h(environ, start))
    return seen


@pytest.mark.django_db(transaction=True)
def test_a_signed_delivery_is_stored_through_the_webhook_handler_with_the_security_headers(handlers_built):
    source, secret = source_make("product")
    body = json.dumps(rating_event(id="evt_lean")).encode()

    answer = call("POST", f"/api/v1/sources/{source.slug}/events", body, signed_headers(secret, body))

    assert answer["status"] == 202, answer["body"]
    assert json.loads(answer["body"])["accepted"] == 1
    assert handlers_built == ["webhooks"]
    assert FeedbackItem.objects.get(external_id="evt_lean").received_payload == json.loads(body)
    assert answer["headers"]["x-content-type-options"] == "nosniff"
    assert "set-cookie" not in answer["headers"]


@pytest.mark.django_db(transaction=True)
def test_the_webhook_handler_still_refuses_a_bad_signature_and_a_host_not_allowed(handlers_built):
    source, secret = source_make("product")
    body = json.dumps(rating_event(id="evt_refused")).encode()
    path = f"/api/v1/sources/{source.slug}/events"

    forged = call("POST", path, body, signed_headers("whsec_" + "A" * 32, body))
    wrong_host = call("POST", path, body, signed_headers(secret, body), host="evil.example")

    assert forged["status"] == 401
    assert "signature" in json.loads(forged["body"])["error"]
    assert wrong_host["status"] == 400
    assert handlers_built == ["webhooks", "webhooks"]
    assert not FeedbackItem.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_pages_and_other_api_calls_keep_the_full_middleware(handlers_built):
    login = call("GET", reverse("login"))
    events_get = call("GET", "/api/v1/sources/product/events")

    assert login["status"] == 200
    assert "content-security-policy" in login["headers"]
    assert login["headers"]["x-frame-options"] == "DENY"
    assert events_get["status"] == 405  # only a POST is a delivery
    assert handlers_built == ["pages", "pages"]
