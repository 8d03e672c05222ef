"""Bodies sent with ``Transfer-Encoding: chunked`` (no Content-Length) are read whole, within the size limit.

gunicorn decodes the chunks and passes the body as ``wsgi.input`` without a
CONTENT_LENGTH, marking its end with ``wsgi.input_terminated``; Django's test
client always sends a length. So the unit tests here build that WSGI request
by hand, and the last tests send real chunked requests to a real gunicorn.
"""

import io
import json
import os
import uuid

import httpx
import pytest
from django.test import Client

from feedback import services
from feedback.models import FeedbackItem
from tests.factories import rating_event, signed_headers, source_make, wsgi_environ
from tests.servers import database_url, gunicorn_serving

REPORT = {"title": "Claimed the tests passed", "what_happened": "3 failed; it said all green", "severity": "high"}


class CountingStream:
    """wsgi.input as gunicorn hands it over: the decoded chunks, then end of input. Counts what is read."""

    def __init__(self, body: bytes) -> None:
        self._stream = io.BytesIO(body)
        self.bytes_read = 0

    def read(self, size: int = -1) -> bytes:
        part = self._stream.read(size)
        self.bytes_read += len(part)
        return part

    def readline(self, size: int = -1) -> bytes:
        part = self._stream.readline(size)
        self.bytes_read += len(part)
        return part


def send_chunked(path: str, body: bytes, headers: dict[str, str], *, input_terminated: bool = True):
    stream = CountingStream(body)
    environ = wsgi_environ("POST", path, stream, headers, HTTP_TRANSFER_ENCODING="chunked")
    if input_terminated:
        environ["wsgi.input_terminated"] = True
    return Client().handler(environ), stream


@pytest.mark.django_db
def test_a_signed_chunked_webhook_is_read_whole_and_stored():
    source, secret = source_make("product")
    body = json.dumps(rating_event(id="evt_chunked")).encode()
    response, _ = send_chunked(f"/api/v1/sources/{source.slug}/events", body, signed_headers(secret, body))
    assert response.status_code == 202, response.content
    assert json.loads(response.content)["accepted"] == 1
    assert FeedbackItem.objects.get().received_payload == json.loads(body)


@pytest.mark.django_db
def test_a_chunked_report_is_read_whole_and_stored():
    source, _ = source_make("dogfood")
    _, raw_token = services.api_token_create(source=source)
    response, _ = send_chunked("/api/v1/reports", json.dumps(REPORT).encode(), {"Authorization": f"Bearer {raw_token}"})
    assert response.status_code == 201, response.content
    assert FeedbackItem.objects.get().title == "Claimed the tests passed"


@pytest.mark.django_db
def test_a_chunked_body_over_the_limit_is_413_after_reading_one_byte_past_it(settings):
    settings.WEBHOOK_MAX_BODY_BYTES = 10_000
    source, secret = source_make("product")
    body = json.dumps({"events": [rating_event(comment="x" * 5000) for _ in range(3)]}).encode()
    response, stream = send_chunked(f"/api/v1/sources/{source.slug}/events", body, signed_headers(secret, body))
    assert response.status_code == 413
    assert json.loads(response.content) == {"error": "the request body is larger than the limit of 10000 bytes"}
    assert stream.bytes_read == 10_001
    assert not FeedbackItem.objects.exists()


@pytest.mark.django_db
def test_a_chunked_body_exactly_at_the_limit_is_accepted(settings):
    source, secret = source_make("product")
    body = json.dumps(rating_event(id="evt_at_limit")).encode()
    settings.WEBHOOK_MAX_BODY_BYTES = len(body)
    response, _ = send_chunked(f"/api/v1/sources/{source.slug}/events", body, signed_headers(secret, body))
    assert response.status_code == 202, response.content


@pytest.mark.django_db
def test_a_chunked_body_from_a_server_that_does_not_mark_its_end_is_refused_clearly():
    source, secret = source_make("product")
    body = json.dumps(rating_event(id="evt_1")).encode()
    response, stream = send_chunked(
        f"/api/v1/sources/{source.slug}/events", body, signed_headers(secret, body), input_terminated=False
    )
    assert response.status_code == 400
    assert json.loads(response.content) == {
        "error": "this server cannot read a chunked request body; send a Content-Length"
    }
    assert stream.bytes_read == 0


# --- Under a real gunicorn ------------------------------------------------------------------------

GUNICORN_BODY_LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def gunicorn_url(django_db_setup, django_db_blocker, tmp_path_factory):
    """A gunicorn (the project's gunicorn.conf.py) serving the test database, with a 64 KiB body limit."""
    with django_db_blocker.unblock():
        db_url = database_url()
    data_dir = tmp_path_factory.mktemp("gunicorn-data")
    env = dict(os.environ, DATABASE_URL=db_url, DATA_DIR=str(data_dir), WEBHOOK_MAX_BODY_BYTES=str(GUNICORN_BODY_LIMIT))
    with gunicorn_serving(env=env, log_path=data_dir / "web.log", args=("--workers", "1")) as base_url:
        yield base_url


def in_chunks(body: bytes, size: int = 1000):
    """A body httpx sends with Transfer-Encoding: chunked (a generator has no length)."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_gunicorn_reads_a_chunked_signed_webhook_and_a_chunked_report(gunicorn_url):
    source, secret = source_make("product")
    event = rating_event(id=f"evt_{uuid.uuid4().hex}")
    body = json.dumps(event).encode()
    headers = {"content-type": "application/json", **signed_headers(secret, body)}
    with httpx.Client(timeout=10) as client:
        request = client.build_request(
            "POST", f"{gunicorn_url}/api/v1/sources/{source.slug}/events", content=in_chunks(body), headers=headers
        )
        assert request.headers["transfer-encoding"] == "chunked" and "content-length" not in request.headers
        response = client.send(request)
        assert response.status_code == 202, response.text
        assert response.json()["accepted"] == 1

        _, raw_token = services.api_token_create(source=source)
        report = client.post(
            f"{gunicorn_url}/api/v1/reports",
            content=in_chunks(json.dumps(REPORT).encode()),
            headers={"content-type": "application/json", "Authorization": f"Bearer {raw_token}"},
        )
        assert report.status_code == 201, report.text
    assert FeedbackItem.objects.get(external_id=event["id"]).received_payload == event
    assert FeedbackItem.objects.filter(kind="report", title=REPORT["title"]).count() == 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_gunicorn_answers_413_to_a_chunked_body_over_the_limit_and_keeps_serving(gunicorn_url):
    source, secret = source_make("product")
    body = json.dumps({"events": [rating_event(comment="x" * 10_000) for _ in range(10)]}).encode()
    assert len(body) > GUNICORN_BODY_LIMIT
    url = f"{gunicorn_url}/api/v1/sources/{source.slug}/events"
    with httpx.Client(timeout=10) as client:
        headers = {"content-type": "application/json", **signed_headers(secret, body)}
        response = client.post(url, content=in_chunks(body), headers=headers)
        assert response.status_code == 413
        assert response.json() == {"error": f"the request body is larger than the limit of {GUNICORN_BODY_LIMIT} bytes"}

        small = json.dumps(rating_event(id="evt_after")).encode()
        headers = {"content-type": "application/json", **signed_headers(secret, small)}
        assert client.post(url, content=in_chunks(small), headers=headers).status_code == 202
    assert list(FeedbackItem.objects.values_list("external_id", flat=True)) == ["evt_after"]
