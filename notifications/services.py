"""Writes for notifications: destinations, the outbox, and delivery attempts.

`notify()` is what the rest of the app calls. It only writes rows (the
notification and one delivery per subscribed destination) in the caller's
transaction and queues the deliveries after commit, so the change it reports
and the news of it commit together, and nothing waits for a destination.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import httpx
import orjson
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from core import jobs
from feedback.signatures import secret_generate, sign
from notifications.models import (
    SUBSCRIBABLE,
    Delivery,
    Destination,
    Event,
    Notification,
)

logger = logging.getLogger(__name__)

MAX_URL_LENGTH = 2000
MAX_NAME_LENGTH = 100
# Kept of a failing answer: enough to recognise the receiver's complaint.
ERROR_BODY_CHARS = 300
USER_AGENT = "FeedbackStudio-Notifications/1"
# A sending row older than this belongs to a worker that died mid-attempt.
LEASE_SECONDS = 120
# The sweeper leaves a pending delivery alone until it is this overdue: its own retry is probably on the way.
SWEEP_GRACE_SECONDS = 120


class DestinationRefused(Exception):
    """A destination that cannot be saved: the form field at fault and a message a person understands."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# --- Destinations ----------------------------------------------------------------------------


def _clean_url(url: str) -> tuple[str, str]:
    """The URL as stored and as shown (scheme and host only: the rest may hold a token)."""
    url = url.strip()
    if not url:
        raise DestinationRefused("url", "Give the URL to send to.")
    if len(url) > MAX_URL_LENGTH:
        raise DestinationRefused("url", f"The URL is {len(url)} characters long; at most {MAX_URL_LENGTH} are allowed.")
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise DestinationRefused("url", "The URL must not contain spaces or control characters.")
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a port that is not a number or out of range
    except ValueError:
        raise DestinationRefused("url", "The URL cannot be read; give one like https://hooks.example.com/path.") from None
    if parts.scheme not in ("http", "https"):
        raise DestinationRefused("url", "The URL must start with https:// (or http://).")
    if not parts.hostname:
        raise DestinationRefused("url", "The URL names no host.")
    if parts.username or parts.password:
        raise DestinationRefused("url", "Put no user name or password in the URL; a signed webhook carries its own secret.")
    host = parts.hostname if port is None else f"{parts.hostname}:{port}"
    shown = f"{parts.scheme}://{host}/…" if parts.path.strip("/") or parts.query else f"{parts.scheme}://{host}/"
    return url, shown[:300]


def _clean_events(events: list[str]) -> list[str]:
    known = [value for value, _ in SUBSCRIBABLE]
    unknown = [event for event in events if event not in known]
    if unknown:
        raise DestinationRefused("events", f"Unknown event: {unknown[0][:60]!r}.")
    if not events:
        raise DestinationRefused("events", "Choose at least one event to hear about.")
    # The order of the choices, each once, whatever order the form sent them in.
    return [value for value in known if value in events]


def _clean_name(name: str, *, other_than: int | None = None) -> str:
    name = name.strip()
    if not name:
        raise DestinationRefused("name", "Give the destination a name.")
    if len(name) > MAX_NAME_LENGTH:
        raise DestinationRefused("name", f"The name is {len(name)} characters long; at most {MAX_NAME_LENGTH} are allowed.")
    taken = Destination.objects.filter(name=name)
    if other_than is not None:
        taken = taken.exclude(id=other_than)
    if taken.exists():
        raise DestinationRefused("name", f"A destination named “{name}” exists already.")
    return name


def destination_create(*, name: str, kind: str, url: str, events: list[str], user=None) -> tuple[Destination, str]:
    """A new destination and its signing secret in plain text (shown once; '' for Slack-compatible ones)."""
    if kind not in Destination.Kind.values:
        raise DestinationRefused("kind", "Choose Standard Webhooks or a Slack-compatible incoming webhook.")
    name = _clean_name(name)
    url, shown = _clean_url(url)
    events = _clean_events(events)
    secret = secret_generate() if kind == Destination.Kind.WEBHOOK else ""
    try:
        with transaction.atomic():
            destination = Destination.objects.create(
                name=name,
                kind=kind,
                url=url,
                url_display=shown,
                secret=secret,
                events=events,
                created_by=user if user is not None and user.is_authenticated else None,
            )
    except IntegrityError:
        # Two admins saving the same name at once: the database decided.
        raise DestinationRefused("name", f"A destination named “{name}” exists already.") from None
    return destination, secret


def destination_update(*, destination: Destination, name: str, events: list[str], is_active: bool) -> Destination:
    destination.name = _clean_name(name, other_than=destination.id)
    destination.events = _clean_events(events)
    destination.is_active = is_active
    try:
        with transaction.atomic():
            destination.save(update_fields=["name", "events", "is_active"])
    except IntegrityError:
        raise DestinationRefused("name", f"A destination named “{destination.name}” exists already.") from None
    return destination


def destination_delete(*, destination_id: int) -> bool:
    deleted, _ = Destination.objects.filter(id=destination_id).delete()
    return deleted > 0


# --- The outbox --------------------------------------------------------------------------------


def notify(
    *,
    event: str,
    summary: str,
    text: str,
    payload: dict,
    dedup_key: str | None = None,
    destination_ids: list[int] | None = None,
) -> Notification | None:
    """Record a notification and a delivery per active destination that asked for `event`.

    Runs inside the caller's transaction (in a savepoint of its own); the
    deliveries are queued once that commits. None when `dedup_key` was
    announced before, or when no destination listens (then nothing is
    written). `destination_ids` sends to those destinations only, whatever
    they subscribed to (the test message).
    """
    destinations = Destination.objects.filter(is_active=True).order_by("id")
    if destination_ids is not None:
        targets = list(destinations.filter(id__in=destination_ids))
    else:
        # Few rows; JSON containment is not portable to SQLite, so the list is filtered here.
        targets = [destination for destination in destinations if event in destination.events]
    if not targets:
        # Nobody listens: one read, no writes, so an export or run pays next to nothing for the hook.
        return None
    now = timezone.now()
    try:
        with transaction.atomic():
            notification = Notification.objects.create(
                event=event,
                msg_id=f"msg_{uuid.uuid4().hex}",
                dedup_key=dedup_key,
                summary=summary[:500],
                text=text,
                payload=payload,
                created_at=now,
            )
            deliveries = [
                Delivery.objects.create(notification=notification, destination=destination, next_attempt_at=now)
                for destination in targets
            ]
    except IntegrityError:
        if dedup_key is not None and Notification.objects.filter(dedup_key=dedup_key).exists():
            return None
        raise
    delivery_ids = [delivery.id for delivery in deliveries]
    if delivery_ids:
        transaction.on_commit(lambda: deliveries_enqueue(delivery_ids=delivery_ids))
    return notification


def notify_test(*, destination: Destination, user=None) -> Notification:
    """A test message to one destination, active or not: an admin checks the receiving end before switching it on."""
    who = user.get_username() if user is not None and user.is_authenticated else "an admin"
    summary = f"Test message from Feedback Studio to “{destination.name}”"
    text = f"{summary}, sent by {who}. If you can read this, notifications arrive here."
    now = timezone.now()
    with transaction.atomic():
        notification = Notification.objects.create(
            event=Event.TEST,
            msg_id=f"msg_{uuid.uuid4().hex}",
            summary=summary,
            text=text,
            payload={"destination": destination.name, "sent_by": who, "url": f"{settings.SITE_URL}/notifications/"},
            created_at=now,
        )
        delivery = Delivery.objects.create(notification=notification, destination=destination, next_attempt_at=now)
        transaction.on_commit(lambda: deliveries_enqueue(delivery_ids=[delivery.id]))
    return notification


def deliveries_enqueue(*, delivery_ids: list[int]) -> int:
    """Hand deliveries to the workers; one the broker refuses waits for the sweeper."""
    from notifications.tasks import deliver  # tasks import services

    queued = 0
    for delivery_id in delivery_ids:
        # The broker refusing leaves the row pending, for the sweeper.
        waiting = f"notification delivery {delivery_id} waits for the sweeper"
        queued += jobs.send(deliver, [delivery_id], if_unreachable=waiting) is None
    return queued


def deliveries_sweep(*, now: datetime | None = None) -> int:
    """Queue again what no task will attempt: pending well past its time, or sending with a dead worker's lease."""
    now = now or timezone.now()
    overdue = Delivery.objects.filter(
        Q(status=Delivery.Status.PENDING, next_attempt_at__lt=now - timedelta(seconds=SWEEP_GRACE_SECONDS))
        | Q(status=Delivery.Status.SENDING, lease_until__lt=now)
    )
    ids = list(overdue.order_by("id").values_list("id", flat=True)[:1000])
    return deliveries_enqueue(delivery_ids=ids) if ids else 0


def delivery_retry(*, delivery_id: int) -> bool:
    """An admin asks for another round of attempts on a failed delivery."""
    updated = Delivery.objects.filter(id=delivery_id, status=Delivery.Status.FAILED).update(
        status=Delivery.Status.PENDING, attempts=0, next_attempt_at=timezone.now(), updated_at=timezone.now()
    )
    if updated:
        transaction.on_commit(lambda: deliveries_enqueue(delivery_ids=[delivery_id]))
    return bool(updated)


# --- Attempts ----------------------------------------------------------------------------------


def retry_delay(attempts: int) -> float:
    """Seconds before the next attempt after `attempts` failed ones: doubling from the base, capped, ±10% jitter.

    The jitter keeps deliveries that failed together (one receiver down) from
    all coming back in the same second.
    """
    base = settings.NOTIFY_RETRY_BASE_SECONDS * 2 ** max(0, attempts - 1)
    delay = min(settings.NOTIFY_RETRY_MAX_SECONDS, base)
    return max(0.0, delay * random.uniform(0.9, 1.1))


def webhook_body(notification: Notification) -> bytes:
    """The Standard Webhooks payload shape: type, timestamp, data."""
    return orjson.dumps(
        {
            "type": notification.event,
            "timestamp": notification.created_at.isoformat().replace("+00:00", "Z"),
            "data": {"summary": notification.summary, **notification.payload},
        }
    )


def slack_body(notification: Notification) -> bytes:
    return orjson.dumps({"text": notification.text})


def request_for(delivery: Delivery, *, now: float | None = None) -> tuple[str, bytes, dict[str, str]]:
    """URL, body and headers of one attempt; a webhook is signed afresh, so a retry's timestamp is current."""
    destination, notification = delivery.destination, delivery.notification
    headers = {"content-type": "application/json", "user-agent": USER_AGENT}
    if destination.kind == Destination.Kind.SLACK:
        return destination.url, slack_body(notification), headers
    body = webhook_body(notification)
    timestamp = int(now if now is not None else time.time())
    headers |= {
        "webhook-id": notification.msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret=destination.secret, msg_id=notification.msg_id, timestamp=timestamp, body=body),
    }
    return destination.url, body, headers


@dataclass
class Attempt:
    """What one attempt came to: the delivery's status, and when to try again (None: no more tries)."""

    status: str
    retry_in: float | None = None


def _claim(delivery_id: int, now: datetime) -> bool:
    due = Q(status=Delivery.Status.PENDING, next_attempt_at__lte=now + timedelta(seconds=1)) | Q(
        status=Delivery.Status.SENDING, lease_until__lt=now
    )
    return bool(
        Delivery.objects.filter(due, id=delivery_id).update(
            status=Delivery.Status.SENDING,
            attempts=F("attempts") + 1,
            lease_until=now + timedelta(seconds=LEASE_SECONDS),
            updated_at=now,
        )
    )


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str]:
    """(status code, error): the code is None when no answer came; the error is '' for a 2xx."""
    timeout = settings.NOTIFY_TIMEOUT_SECONDS
    try:
        # No redirects: a signed body is meant for the URL an admin gave, not wherever it points.
        response = httpx.post(url, content=body, headers=headers, timeout=timeout, follow_redirects=False)
    except httpx.TimeoutException:
        return None, f"no answer within {timeout:g} s"
    except httpx.HTTPError as exc:
        return None, f"could not connect: {type(exc).__name__}: {exc}"[:500]
    if 200 <= response.status_code < 300:
        return response.status_code, ""
    answer = response.text[:ERROR_BODY_CHARS].strip()
    return response.status_code, f"HTTP {response.status_code}" + (f": {answer}" if answer else "")


def delivery_attempt(*, delivery_id: int) -> Attempt:
    """Send one delivery once.

    Steps: claim it (stop quietly when it is done, gone, not yet due, or being
    sent by another worker); send with a timeout; record the answer: delivered
    on a 2xx, otherwise pending with the time of the next attempt, or failed
    once NOTIFY_MAX_ATTEMPTS attempts have failed.
    """
    now = timezone.now()
    if not _claim(delivery_id, now):
        return Attempt(status="skipped")
    delivery = Delivery.objects.select_related("destination", "notification").filter(id=delivery_id).first()
    if delivery is None:  # its destination was deleted a moment ago
        return Attempt(status="skipped")
    if not delivery.destination.is_active and delivery.notification.event != Event.TEST:
        Delivery.objects.filter(id=delivery_id).update(
            status=Delivery.Status.FAILED,
            last_error="the destination was switched off before this was delivered",
            lease_until=None,
            updated_at=timezone.now(),
        )
        return Attempt(status=Delivery.Status.FAILED)
    code, error = _post(*request_for(delivery))
    finished = timezone.now()
    if not error:
        Delivery.objects.filter(id=delivery_id).update(
            status=Delivery.Status.DELIVERED,
            last_status_code=code,
            last_error="",
            delivered_at=finished,
            lease_until=None,
            updated_at=finished,
        )
        return Attempt(status=Delivery.Status.DELIVERED)
    if delivery.attempts >= settings.NOTIFY_MAX_ATTEMPTS:
        Delivery.objects.filter(id=delivery_id).update(
            status=Delivery.Status.FAILED,
            last_status_code=code,
            last_error=f"{error} (gave up after {delivery.attempts} attempts)",
            lease_until=None,
            updated_at=finished,
        )
        logger.warning("notification delivery %s to %s failed for good: %s", delivery_id, delivery.destination, error)
        return Attempt(status=Delivery.Status.FAILED)
    delay = retry_delay(delivery.attempts)
    Delivery.objects.filter(id=delivery_id).update(
        status=Delivery.Status.PENDING,
        last_status_code=code,
        last_error=error,
        next_attempt_at=finished + timedelta(seconds=delay),
        lease_until=None,
        updated_at=finished,
    )
    return Attempt(status=Delivery.Status.PENDING, retry_in=delay)
