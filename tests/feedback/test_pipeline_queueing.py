"""Queueing after commit, broker outages and the sweeper."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from config.celery import app as celery_app
from feedback import services
from feedback import pipeline
from feedback.models import FeedbackItem
from tests.factories import celery_broker_use, post_signed, rating_event, source_make


@pytest.fixture
def broker_down():
    """Point Celery at a port where nothing listens, as when Redis is stopped."""
    saved_url = celery_app.conf.broker_url
    celery_broker_use("redis://127.0.0.1:1/0")
    yield
    celery_broker_use(saved_url)


@pytest.mark.django_db(transaction=True)
def test_with_the_broker_down_an_event_is_still_accepted_and_waits_as_received(client, broker_down, caplog):
    source, secret = source_make()
    started = time.monotonic()
    response = post_signed(client, source, secret, rating_event(id="evt_outage"))
    assert response.status_code == 202
    assert time.monotonic() - started < 10  # no long hang on the dead broker
    item = FeedbackItem.objects.get(external_id="evt_outage")
    assert item.status == FeedbackItem.Status.RECEIVED
    assert "broker unavailable; 1 items wait for the sweeper" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_with_the_broker_down_a_report_is_still_accepted(client, broker_down, caplog):
    source, _ = source_make("dogfood")
    _, raw = services.api_token_create(source=source)
    response = client.post(
        "/api/v1/reports",
        data={"title": "t", "what_happened": "w"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
    )
    assert response.status_code == 201
    assert FeedbackItem.objects.get().status == FeedbackItem.Status.RECEIVED
    assert "broker unavailable" in caplog.text


@pytest.mark.django_db
def test_the_sweeper_picks_only_items_waiting_longer_than_the_grace_period(monkeypatch):
    source, _ = source_make()
    queued: list[list[int]] = []
    monkeypatch.setattr(pipeline, "items_enqueue", lambda *, item_ids, **kw: queued.append(item_ids) or True)
    old = FeedbackItem.objects.create(
        source=source, external_id="old", kind="rating", rating=-1, occurred_at=timezone.now(),
        receipt_id="00000000-0000-0000-0000-000000000001",
        status_changed_at=timezone.now() - timedelta(minutes=5),
    )
    FeedbackItem.objects.create(
        source=source, external_id="fresh", kind="rating", rating=-1, occurred_at=timezone.now(),
        receipt_id="00000000-0000-0000-0000-000000000002",
    )
    FeedbackItem.objects.create(
        source=source, external_id="done", kind="rating", rating=-1, occurred_at=timezone.now(),
        receipt_id="00000000-0000-0000-0000-000000000003", status=FeedbackItem.Status.EMBEDDED,
        status_changed_at=timezone.now() - timedelta(minutes=5),
    )
    assert pipeline.items_sweep_unprocessed() == 1
    assert queued == [[old.id]]
