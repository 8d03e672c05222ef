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


def test_a_lost_database_connection_is_a_json_503_that_says_to_retry(product, monkeypatch, caplog):
    source, secret = product
    monkeypatch.setattr(selectors, "source_for_webhook", failing(OperationalError("server closed the connection")))
    client = Client(raise_request_exception=False)

    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = post_signed(client, source, secret, rating_event(id="evt_1"))

    assert response.status_code == 503
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {"error": "the database is unavailable right now; retry later"}
    assert any("server closed the connection" in (r.exc_text or "") for r in caplog.records)
    assert FeedbackItem.objects.count() == 0


def test_a_bug_is_a_json_500_without_the_details(product, monkeypatch, caplog):
    source, secret = product
    monkeypatch.setattr(selectors, "source_for_webhook", failing(RuntimeError("secret detail of the bug")))
    client = Client(raise_request_exception=False)

    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = post_signed(client, source, secret, rating_event(id="evt_1"))

    assert response.status_code == 500
    assert response.json() == {"error": "internal error; it has been logged"}
    assert "secret detail" not in response.content.decode()
    assert any("secret detail of the bug" in (r.exc_text or "") for r in caplog.records)
