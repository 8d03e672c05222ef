"""Notifications out: signed and readable deliveries to real HTTP receivers, retries, and one message per piece of news.

Receivers are real HTTP servers (http.server in a thread) on loopback; the
delivery task runs eagerly, so each test sees every attempt a worker would make.
"""

import json
import uuid
from datetime import date, timedelta

import pytest
import standardwebhooks
from django.db import connection
from django.utils import timezone

from config.celery import app as celery_app
from feedback.models import FeedbackItem
from labeling.compare.saved import saved_comparison_create
from labeling.models import Category, ClusterRun
from notifications import events, services
from notifications.models import (
    CheckMark,
    Delivery,
    Destination,
    Event,
    Notification,
    RegressionWatch,
)
from tests.factories import client_for, post_signed, rating_event, source_make, user_make
from tests.factories.compare import params, planted_data
from tests.servers import Receiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver():
    made = []

    def make(statuses=(200,), body=b"ok"):
        made.append(Receiver(statuses, body))
        return made[-1]

    yield make
    for one in made:
        one.close()


@pytest.fixture
def eager(settings):
    """Deliveries run in the test's process as a worker would run them, retries without waiting."""
    settings.NOTIFY_RETRY_BASE_SECONDS = 0
    settings.NOTIFY_MAX_ATTEMPTS = 4
    settings.NOTIFY_TIMEOUT_SECONDS = 5
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def destination(url, *, kind="webhook", events_=(Event.REGRESSION, Event.EXPORT_VERSION), name=None):
    made, secret = services.destination_create(
        name=name or f"dest-{uuid.uuid4().hex[:6]}", kind=kind, url=url, events=list(events_)
    )
    return made, secret


def announce(event=Event.REGRESSION, key=None, **payload):
    return services.notify(
        event=event, summary="Category “Wrong file” is significantly worse on 2.2 than on 2.1",
        text="Category “Wrong file” is significantly worse\nhttp://127.0.0.1:8000/compare/", payload=payload or {"n": 1},
        dedup_key=key,
    )


# --- Signed, readable, delivered ---------------------------------------------------------------


def test_a_webhook_notification_is_signed_and_verifies_with_the_reference_standardwebhooks_library(
    receiver, eager, django_capture_on_commit_callbacks
):
    server = receiver()
    dest, secret = destination(server.url)
    with django_capture_on_commit_callbacks(execute=True):
        notification = announce(target="Wrong file")
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request["path"] == "/hooks/feedback?token=abc"
    verified = standardwebhooks.Webhook(secret).verify(request["body"], request["headers"])
    assert verified["type"] == "comparison.regression"
    assert verified["data"]["target"] == "Wrong file"
    assert verified["data"]["summary"].startswith("Category “Wrong file”")
    assert request["headers"]["webhook-id"] == notification.msg_id
    # Any other secret, or a changed body, is refused by the same library.
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(services.secret_generate()).verify(request["body"], request["headers"])
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(secret).verify(request["body"].replace(b"Wrong", b"Right"), request["headers"])
    delivery = Delivery.objects.get(destination=dest)
    assert (delivery.status, delivery.attempts, delivery.last_status_code, delivery.last_error) == ("delivered", 1, 200, "")


def test_a_slack_compatible_destination_gets_a_readable_text_message(receiver, eager, django_capture_on_commit_callbacks):
    server = receiver()
    destination(server.url, kind="slack")
    with django_capture_on_commit_callbacks(execute=True):
        announce()
    body = json.loads(server.requests[0]["body"])
    assert body == {"text": "Category “Wrong file” is significantly worse\nhttp://127.0.0.1:8000/compare/"}
    assert "webhook-signature" not in server.requests[0]["headers"]


def test_only_active_destinations_that_chose_the_event_get_it(receiver, eager, django_capture_on_commit_callbacks):
    wants, other, off = receiver(), receiver(), receiver()
    destination(wants.url, events_=[Event.REGRESSION])
    destination(other.url, events_=[Event.EXPORT_FAILED])
    switched_off, _ = destination(off.url, events_=[Event.REGRESSION])
    services.destination_update(destination=switched_off, name=switched_off.name, events=[Event.REGRESSION], is_active=False)
    with django_capture_on_commit_callbacks(execute=True):
        announce()
    assert (len(wants.requests), len(other.requests), len(off.requests)) == (1, 0, 0)


def test_recording_a_notification_sends_nothing_until_a_worker_takes_it(receiver, django_capture_on_commit_callbacks):
    # No eager mode: the delivery goes to the broker, as it does from a web request or an export.
    server = receiver()
    dest, _ = destination(server.url)
    with django_capture_on_commit_callbacks(execute=True):
        announce()
    assert server.requests == []
    assert Delivery.objects.get(destination=dest).status == "pending"


def test_a_notification_written_in_a_transaction_that_rolls_back_leaves_nothing(receiver):
    server = receiver()
    destination(server.url)
    with pytest.raises(RuntimeError):
        from django.db import transaction

        with transaction.atomic():
            announce(key="rolled-back")
            raise RuntimeError("the export failed to rename its folder")
    assert not Notification.objects.filter(dedup_key="rolled-back").exists()
    assert Delivery.objects.count() == 0


# --- Failing destinations ----------------------------------------------------------------------


def test_a_failing_destination_is_retried_then_shown_failed_and_nothing_else_is_affected(
    receiver, eager, django_capture_on_commit_callbacks
):
    broken, healthy = receiver(statuses=(500,), body=b"upstream exploded"), receiver()
    bad, _ = destination(broken.url, name="broken hook")
    good, good_secret = destination(healthy.url, name="healthy hook")
    with django_capture_on_commit_callbacks(execute=True):
        announce()
    # Four attempts (NOTIFY_MAX_ATTEMPTS), each the same message signed afresh.
    assert len(broken.requests) == 4
    assert {request["headers"]["webhook-id"] for request in broken.requests} == {Notification.objects.get().msg_id}
    failed = Delivery.objects.get(destination=bad)
    assert failed.status == "failed" and failed.attempts == 4 and failed.last_status_code == 500
    assert failed.last_error == "HTTP 500: upstream exploded (gave up after 4 attempts)"
    # The other destination got it once, verified.
    assert len(healthy.requests) == 1
    standardwebhooks.Webhook(good_secret).verify(healthy.requests[0]["body"], healthy.requests[0]["headers"])
    assert Delivery.objects.get(destination=good).status == "delivered"
    # Ingestion is untouched.
    source, secret = source_make("product")
    from django.test import Client

    assert post_signed(Client(), source, secret, rating_event(id="evt_after")).status_code == 202
    assert FeedbackItem.objects.filter(external_id="evt_after").exists()
    # The page lists the failure with its error, and the destination's counts.
    page = client_for(user_make("boss", "admin")).get("/notifications/")
    html = page.content.decode()
    assert page.status_code == 200
    assert f'id="delivery-{failed.id}" class="delivery-failed"' in html
    assert "HTTP 500: upstream exploded (gave up after 4 attempts)" in html


def test_a_destination_that_never_answers_times_out_and_one_that_refuses_connections_fails_with_the_reason(
    settings, eager, django_capture_on_commit_callbacks
):
    settings.NOTIFY_MAX_ATTEMPTS = 2
    settings.NOTIFY_TIMEOUT_SECONDS = 0.5
    silent = __import__("socket").socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never answers
    closed = __import__("socket").socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()  # nothing listens here any more
    try:
        hangs, _ = destination(f"http://127.0.0.1:{silent.getsockname()[1]}/", name="hangs")
        refuses, _ = destination(f"http://127.0.0.1:{closed_port}/", name="refuses")
        with django_capture_on_commit_callbacks(execute=True):
            announce()
    finally:
        silent.close()
    hung = Delivery.objects.get(destination=hangs)
    assert hung.status == "failed" and hung.last_error == "no answer within 0.5 s (gave up after 2 attempts)"
    refused = Delivery.objects.get(destination=refuses)
    assert refused.status == "failed" and refused.last_error.startswith("could not connect: ConnectError")


def test_a_failed_delivery_recovers_when_retried_from_the_page(receiver, eager, django_capture_on_commit_callbacks):
    server = receiver(statuses=(503, 503, 503, 503, 200))
    dest, _ = destination(server.url)
    with django_capture_on_commit_callbacks(execute=True):
        announce()
    delivery = Delivery.objects.get(destination=dest)
    assert delivery.status == "failed"
    admin = client_for(user_make("boss", "admin"))
    with django_capture_on_commit_callbacks(execute=True):
        response = admin.post(f"/notifications/deliveries/{delivery.id}/retry")
    assert response.status_code == 302
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.attempts == 1 and len(server.requests) == 5
    # A second retry of a delivered one changes nothing.
    response = admin.post(f"/notifications/deliveries/{delivery.id}/retry", follow=True)
    assert "is delivered, not failed: nothing to retry" in response.content.decode()
    assert len(server.requests) == 5


def test_the_backoff_doubles_from_the_base_and_stops_at_the_cap(settings):
    settings.NOTIFY_RETRY_BASE_SECONDS = 30
    settings.NOTIFY_RETRY_MAX_SECONDS = 3600
    delays = [services.retry_delay(attempts) for attempts in range(1, 10)]
    for attempts, delay in enumerate(delays, start=1):
        expected = min(3600, 30 * 2 ** (attempts - 1))
        assert expected * 0.9 <= delay <= expected * 1.1, (attempts, delay)


def test_a_pending_attempt_waits_for_its_time_and_the_sweeper_requeues_only_what_was_lost(receiver, settings):
    server = receiver()
    dest, _ = destination(server.url)
    announce()
    delivery = Delivery.objects.get(destination=dest)
    later = timezone.now() + timedelta(minutes=10)
    Delivery.objects.filter(id=delivery.id).update(next_attempt_at=later)
    # Not due yet: a redelivered task message does nothing.
    assert services.delivery_attempt(delivery_id=delivery.id).status == "skipped"
    assert server.requests == []
    # Overdue by more than the grace period: the sweeper queues it (the broker is the filesystem one here).
    assert services.deliveries_sweep(now=later + timedelta(seconds=60)) == 0
    assert services.deliveries_sweep(now=later + timedelta(seconds=services.SWEEP_GRACE_SECONDS + 1)) == 1
    Delivery.objects.filter(id=delivery.id).update(next_attempt_at=timezone.now())
    assert services.delivery_attempt(delivery_id=delivery.id).status == "delivered"
    assert services.delivery_attempt(delivery_id=delivery.id).status == "skipped"
    assert len(server.requests) == 1


# --- One piece of news, one notification -------------------------------------------------------


def test_one_regression_gives_one_notification_however_often_it_is_checked(receiver, eager, django_capture_on_commit_callbacks):
    server = receiver()
    destination(server.url, events_=[Event.REGRESSION], kind="slack")
    planted_data()
    pin = saved_comparison_create(params=params(), name="1.1 launch")
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        first = events.regressions_check(today=date(2026, 11, 30), now=now)
        # Night after night the same regressions stay flagged: nothing new is sent.
        for night in range(1, 4):
            assert events.regressions_check(today=date(2026, 11, 30) + timedelta(days=night), now=now + timedelta(days=night)) == 0
    # The planted data regress in two categories ("Regressed", "Brand new"): one message each.
    assert first == 2
    texts = sorted(json.loads(request["body"])["text"] for request in server.requests)
    assert len(texts) == 2
    assert texts[0].startswith("Category “Brand new” is significantly worse on 1.1 than on 1.0")
    assert texts[1].startswith("Category “Regressed” is significantly worse on 1.1 than on 1.0")
    assert "10 vs 40 thumbs-down, 2026-11-02 – 2026-11-15" in texts[1]
    assert f"/compare/?a=1.0&b=1.1&from=2026-11-02&to=2026-11-15" in texts[1]
    assert Notification.objects.filter(event=Event.REGRESSION).count() == 2
    assert RegressionWatch.objects.filter(saved_comparison=pin, active=True).count() == 2


def test_a_regression_that_cleared_for_the_quiet_period_and_came_back_is_announced_again(settings, receiver):
    settings.NOTIFY_REGRESSION_QUIET_DAYS = 7
    destination(receiver().url, events_=[Event.REGRESSION])
    cats = planted_data()
    saved_comparison_create(params=params(), name="1.1 launch")
    now = timezone.now()
    assert events.regressions_check(today=date(2026, 11, 30), now=now) == 2
    # "Regressed" stops regressing: its thumbs-down move to an unpinned category (a reviewer merge would do this).
    moved = Category.objects.create(name="Elsewhere", status=Category.Status.ARCHIVED)
    from labeling.models import Assignment

    regressed_items = list(Assignment.objects.filter(category=cats["Regressed"]).values_list("id", flat=True))
    Assignment.objects.filter(id__in=regressed_items).update(category=moved)
    # Three days unflagged: still the same episode.
    assert events.regressions_check(today=date(2026, 11, 30), now=now + timedelta(days=3)) == 0
    Assignment.objects.filter(id__in=regressed_items).update(category=cats["Regressed"])
    assert events.regressions_check(today=date(2026, 11, 30), now=now + timedelta(days=4)) == 0
    # Gone for longer than the quiet period, then back: a new episode, announced once.
    Assignment.objects.filter(id__in=regressed_items).update(category=moved)
    assert events.regressions_check(today=date(2026, 11, 30), now=now + timedelta(days=12)) == 0
    Assignment.objects.filter(id__in=regressed_items).update(category=cats["Regressed"])
    assert events.regressions_check(today=date(2026, 11, 30), now=now + timedelta(days=13)) == 1
    assert events.regressions_check(today=date(2026, 11, 30), now=now + timedelta(days=14)) == 0
    keys = sorted(Notification.objects.filter(event=Event.REGRESSION).values_list("dedup_key", flat=True))
    regressed_keys = [key for key in keys if key.endswith(f":category:{cats['Regressed'].id}:1") or key.endswith(f":category:{cats['Regressed'].id}:2")]
    assert len(regressed_keys) == 2 and len(keys) == 3


def test_an_unpinned_or_broken_pin_announces_nothing(receiver):
    destination(receiver().url, events_=[Event.REGRESSION])
    planted_data()
    saved_comparison_create(params=params(), name="not watched", pinned=False)
    from labeling.models import SavedComparison

    SavedComparison.objects.create(a_version="1.0", b_version="1.1", date_from=date(2026, 11, 15), date_to=date(2026, 11, 2))
    assert events.regressions_check(today=date(2026, 11, 30)) == 0
    assert Notification.objects.count() == 0


def test_with_nobody_listening_nothing_is_written_but_the_regression_is_still_tracked(receiver):
    destination(receiver().url, events_=[Event.EXPORT_FAILED])
    planted_data()
    saved_comparison_create(params=params(), name="1.1 launch")
    assert events.regressions_check(today=date(2026, 11, 30)) == 0
    assert Notification.objects.count() == 0 and Delivery.objects.count() == 0
    assert RegressionWatch.objects.filter(active=True).count() == 2


def test_the_same_dedup_key_is_announced_once_even_from_two_callers(receiver):
    server = receiver()
    destination(server.url)
    assert announce(key="export.version:7") is not None
    assert announce(key="export.version:7") is None
    assert Notification.objects.filter(dedup_key="export.version:7").count() == 1
    assert Delivery.objects.count() == 1


def test_a_category_a_run_created_is_announced_once_when_it_passes_the_threshold(settings, receiver, eager, django_capture_on_commit_callbacks):
    settings.NOTIFY_NEW_CATEGORY_MIN_ITEMS = 20
    server = receiver()
    destination(server.url, events_=[Event.CATEGORY_NEW], kind="slack")
    run = ClusterRun.objects.create(trigger="command", status="done", active=None)
    small = Category.objects.create(name="Asks too often", size=19, created_by_run=run, keywords=["asks", "clarification"])
    Category.objects.create(name="Made by a reviewer", size=50)
    Category.objects.create(name="Archived one", size=50, created_by_run=run, status=Category.Status.ARCHIVED)
    with django_capture_on_commit_callbacks(execute=True):
        assert events.cluster_run_done(run_id=run.id) == 0
        Category.objects.filter(id=small.id).update(size=25)
        assert events.cluster_run_done(run_id=run.id) == 1
        Category.objects.filter(id=small.id).update(size=60)
        assert events.cluster_run_done(run_id=run.id) == 0
    assert len(server.requests) == 1
    text = json.loads(server.requests[0]["body"])["text"]
    assert text.startswith("New category “Asks too often” holds 25 items")
    assert "Keywords: asks, clarification" in text and f"/categories/{small.id}/" in text


def test_items_failing_in_the_pipeline_are_announced_in_one_message_per_check(settings, receiver, eager, django_capture_on_commit_callbacks):
    server = receiver()
    destination(server.url, events_=[Event.PIPELINE_FAILED], kind="slack")
    source, _ = source_make("product")
    start = timezone.now()
    old = FeedbackItem.objects.create(
        source=source, external_id="old", kind="rating", rating=-1, occurred_at=start, receipt_id=uuid.uuid4(),
        status="failed", status_changed_at=start - timedelta(days=2), last_error="RuntimeError: before we watched",
    )
    # The first check only starts watching: failures from before are not news.
    assert events.pipeline_failures_check(now=start) is None
    for n in range(7):
        FeedbackItem.objects.create(
            source=source, external_id=f"f{n}", kind="rating", rating=-1, occurred_at=start, receipt_id=uuid.uuid4(),
            status="failed", status_changed_at=start + timedelta(seconds=10 + n),
            last_error="OSError: token sk-live-abcdefabcdefabcdefabcdef1234 for alice@example.com refused",
        )
    with django_capture_on_commit_callbacks(execute=True):
        notification = events.pipeline_failures_check(now=start + timedelta(minutes=1))
        assert events.pipeline_failures_check(now=start + timedelta(minutes=2)) is None
    assert notification.payload["count"] == 7 and len(notification.payload["items"]) == 5
    assert old.id not in [entry["id"] for entry in notification.payload["items"]]
    text = json.loads(server.requests[0]["body"])["text"]
    assert text.startswith("7 items failed in the pipeline since ")
    assert "… and 2 more" in text
    # Errors are scrubbed before they leave the app.
    assert "alice@example.com" not in text and "[EMAIL]" in text
    assert len(server.requests) == 1
    assert CheckMark.objects.get(name="pipeline.failed").at == start + timedelta(minutes=2)


# --- Stored safely -----------------------------------------------------------------------------


def test_destination_urls_and_secrets_are_stored_encrypted(receiver):
    server = receiver()
    dest, secret = destination(server.url)
    with connection.cursor() as cursor:
        cursor.execute("SELECT url, secret, url_display FROM notifications_destination WHERE id = %s", [dest.id])
        url, stored_secret, shown = cursor.fetchone()
    assert url.startswith("enc1:") and "token=abc" not in url
    assert stored_secret.startswith("enc1:") and secret not in stored_secret
    assert shown == f"http://127.0.0.1:{server.server.server_port}/…"
    assert Destination.objects.get(id=dest.id).secret == secret
