"""Send rating events to Feedback Studio: signed, retried, idempotent. Python 3.9+, standard library only.

Copy this one file into a product's backend, or import it from the repository::

    from feedback_studio_client import FeedbackStudioClient

    client = FeedbackStudioClient("https://feedback.example.com", source="my-product", secret="whsec_...")
    client.send_event({"type": "feedback.rating", "occurred_at": "2026-11-30T10:00:00Z", "rating": "down",
                       "comment": "It edited main.py instead of utils.py"})
    summary = client.send_events(events)          # any number: batches of up to 500 (and 5 MiB)

Requests are signed as Standard Webhooks (``webhook-id``, ``webhook-timestamp``,
``webhook-signature: v1,<base64 HMAC-SHA256 of id.timestamp.body>`` with the key
inside ``whsec_<base64>``). Every event carries an ``id``; one without gets a
random one *before* the first attempt, and the body is fixed from then on, so a
retry after a lost answer is a duplicate on the server, never a second item.
Each attempt is signed afresh: a retry minutes later still has a current
timestamp.

Retried, with exponential backoff and jitter: connection errors, timeouts,
429 (waiting at least what ``Retry-After`` says) and 5xx. Not retried: other
4xx answers, which say the request itself is wrong; they raise
`FeedbackStudioError` with the server's message and field.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

__all__ = ["BatchSummary", "FeedbackStudioClient", "FeedbackStudioError", "Response", "sign"]
__version__ = "1.0"

SECRET_PREFIX = "whsec_"
# The server's limits (README, "Sending rating events"): 1,000 events and 5 MiB per request.
MAX_BATCH_EVENTS = 1000
MAX_BODY_BYTES = 5 * 1024 * 1024
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class FeedbackStudioError(Exception):
    """The server refused the request (or kept failing): its status, message and the field at fault."""

    def __init__(self, status: int | None, error: str, field: str | None = None, body: Any = None) -> None:
        super().__init__(f"{status or 'no answer'}: {error}" + (f" (field {field})" if field else ""))
        self.status = status
        self.error = error
        self.field = field
        self.body = body


@dataclass
class Response:
    status: int
    body: Any
    attempts: int
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def duplicate(self) -> bool:
        """A single event the server already had (a retry, or a resend)."""
        return bool(isinstance(self.body, dict) and self.body.get("duplicate"))


@dataclass
class BatchSummary:
    accepted: int = 0
    duplicates: int = 0
    invalid: int = 0
    results: list[dict] = field(default_factory=list)
    responses: list[Response] = field(default_factory=list)


def secret_key(secret: str) -> bytes:
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("a signing secret starts with whsec_")
    return base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)


def sign(*, secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: ``v1,<base64 HMAC-SHA256 of id.timestamp.body>``."""
    digest = hmac.new(secret_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def new_event_id() -> str:
    return f"evt_{uuid.uuid4().hex}"


def _dumps(value: Any) -> bytes:
    # Compact and UTF-8; allow_nan=False: the server refuses NaN and Infinity, so refuse them here, before sending.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class FeedbackStudioClient:
    """A sender for one source. Thread-safe: it holds no state between calls but its settings."""

    def __init__(
        self,
        base_url: str,
        *,
        source: str,
        secret: str,
        timeout: float = 10.0,
        max_attempts: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        batch_size: int = 500,
        ssl_context: ssl.SSLContext | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        secret_key(secret)  # a malformed secret fails here, not on the first send
        if not 1 <= batch_size <= MAX_BATCH_EVENTS:
            raise ValueError(f"batch_size must be between 1 and {MAX_BATCH_EVENTS}")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.url = f"{base_url.rstrip('/')}/api/v1/sources/{urllib.parse.quote(source, safe='')}/events"
        self.secret = secret
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.batch_size = batch_size
        self.ssl_context = ssl_context
        self._sleep = sleep
        self._clock = clock

    # --- Public -----------------------------------------------------------------------------

    def send_event(self, event: dict) -> Response:
        """Send one event; its ``id`` (given, or made now) is also the ``webhook-id``."""
        event = self._with_id(event)
        return self._send(_dumps(event), msg_id=str(event["id"]))

    def send_batch(self, events: Sequence[dict]) -> Response:
        """Send up to 1,000 events in one request (a 207 answer lists the invalid ones; the rest are stored)."""
        if not events:
            raise ValueError("a batch needs at least one event")
        if len(events) > MAX_BATCH_EVENTS:
            raise ValueError(f"a batch holds at most {MAX_BATCH_EVENTS} events; use send_events for more")
        events = [self._with_id(event) for event in events]
        body = _dumps({"events": events})
        # The batch's message id follows from its events, so resending the same batch is the same message.
        digest = hashlib.sha256("\n".join(str(event["id"]) for event in events).encode()).hexdigest()
        return self._send(body, msg_id=f"batch_{digest[:40]}")

    def send_events(self, events: Iterable[dict]) -> BatchSummary:
        """Send any number of events in batches of `batch_size` (smaller when a batch would pass 5 MiB)."""
        summary = BatchSummary()
        for batch in self._batches(events):
            response = self.send_batch(batch)
            body = response.body if isinstance(response.body, dict) else {}
            summary.accepted += int(body.get("accepted", 0))
            summary.duplicates += int(body.get("duplicates", 0))
            summary.invalid += int(body.get("invalid", 0))
            summary.results.extend(body.get("results", []))
            summary.responses.append(response)
        return summary

    # --- Inside -----------------------------------------------------------------------------

    @staticmethod
    def _with_id(event: dict) -> dict:
        if not isinstance(event, dict):
            raise TypeError(f"an event is a dict, not {type(event).__name__}")
        if event.get("id") in (None, ""):
            return {**event, "id": new_event_id()}
        return event

    def _batches(self, events: Iterable[dict]) -> Iterator[list[dict]]:
        batch: list[dict] = []
        size = len(b'{"events":[]}')
        for event in events:
            event = self._with_id(event)
            event_size = len(_dumps(event)) + 1
            if batch and (len(batch) >= self.batch_size or size + event_size > MAX_BODY_BYTES):
                yield batch
                batch, size = [], len(b'{"events":[]}')
            batch.append(event)
            size += event_size
        if batch:
            yield batch

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
        if retry_after:
            try:
                delay = max(delay, min(float(retry_after), self.max_backoff))
            except ValueError:
                pass  # an HTTP date instead of seconds: the backoff stands
        return delay

    def _send(self, body: bytes, *, msg_id: str) -> Response:
        if len(body) > MAX_BODY_BYTES:
            raise ValueError(f"the body is {len(body):,} bytes; the server takes at most {MAX_BODY_BYTES:,}")
        last: FeedbackStudioError | None = None
        for attempt in range(1, self.max_attempts + 1):
            timestamp = int(self._clock())
            request = urllib.request.Request(
                self.url,
                data=body,
                method="POST",
                headers={
                    "content-type": "application/json",
                    "user-agent": f"feedback-studio-client/{__version__}",
                    "webhook-id": msg_id,
                    "webhook-timestamp": str(timestamp),
                    "webhook-signature": sign(secret=self.secret, msg_id=msg_id, timestamp=timestamp, body=body),
                },
            )
            retry_after = None
            try:
                with urllib.request.urlopen(request, timeout=self.timeout, context=self.ssl_context) as answer:
                    return Response(answer.status, _parse(answer.read()), attempt, dict(answer.headers))
            except urllib.error.HTTPError as answer:
                parsed = _parse(answer.read())
                error = parsed.get("error", answer.reason) if isinstance(parsed, dict) else str(answer.reason)
                field_ = parsed.get("field") if isinstance(parsed, dict) else None
                last = FeedbackStudioError(answer.code, str(error), field_, parsed)
                if answer.code not in RETRY_STATUSES:
                    raise last from None
                retry_after = answer.headers.get("Retry-After")
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                last = FeedbackStudioError(None, f"could not reach the server: {reason}")
            if attempt < self.max_attempts:
                self._sleep(self._delay(attempt, retry_after))
        assert last is not None
        raise last


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode("utf-8", "replace")
