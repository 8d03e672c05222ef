"""Errors nobody planned for still answer in the API's JSON shape, and are logged."""

import logging

import pytest
from django.db import OperationalError
from django.test import Client

from feedback import selectors
from feedback.models import FeedbackItem
from tests.factories import post_signed, rating_event, source_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def product():
    return source_make("product")


def failing(exc: Exception):
    def fail(**kwargs):
        raise exc

    return fail


@pytest.mark.parametrize(
    ("raised", "status", "message"),
    [
        # A lost connection: the sender should retry (a retried webhook-id is stored once).
        (OperationalError("server closed the connection"), 503, "the database is unavailable right now; retry later"),
        # A bug: the details stay in the log.
        (RuntimeError("secret detail of the bug"), 500, "internal error; it has been logged"),
    ],
)
def test_an_unplanned_error_answers_as_json_and_is_logged(product, monkeypatch, caplog, raised, status, message):
    source, secret = product
    monkeypatch.setattr(selectors, "source_for_webhook", failing(raised))
    client = Client(raise_request_exception=False)

    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = post_signed(client, source, secret, rating_event(id="evt_1"))

    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {"error": message}
    assert str(raised) not in response.content.decode()
    assert any(str(raised) in (record.exc_text or "") for record in caplog.records)
    assert FeedbackItem.objects.count() == 0


@pytest.mark.parametrize(
    "url",
    ["/api/v1/compare?a=2.1%00&b=2.2", "/api/v1/sources/pro%00be/events", "/api/v1/datasets?x=%00", "/search/?q=a%00b"],
)
def test_a_nul_in_the_url_is_a_400_before_any_query(client, url, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.post(url) if "events" in url else client.get(url)
    assert response.status_code == 400
    if url.startswith("/api/"):
        assert response.json() == {"error": "the URL must not contain a NUL character (%00)"}
    else:
        assert response.content.decode() == "the URL must not contain a NUL character (%00)"
