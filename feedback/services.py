"""Writes for the feedback app: sources, tokens, ingestion and the pipeline."""

import functools
import hashlib
import logging
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.db import connection, transaction
from django.utils import timezone
from django.utils.text import slugify
from pydantic import ValidationError

from core.storable import first_error, unstorable_error
from feedback.models import ApiToken, FeedbackItem, Source
from feedback.pipeline import items_enqueue_after_commit
from feedback.schemas import EVENT_ID_MAX_LENGTH, RatingEvent, ReportIn
from feedback.signatures import secret_generate, secret_key

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "fbk_"


# --- Sources, secrets and tokens -------------------------------------------


def token_hash(raw_token: str) -> str:
    # Tokens carry 256 random bits, so a fast unsalted hash is enough: there
    # is nothing to brute-force, and lookups stay one indexed query.
    return hashlib.sha256(raw_token.encode()).hexdigest()


def source_create(*, name: str, kind: str = Source.Kind.PRODUCT, secret: str | None = None) -> tuple[Source, str]:
    """Create a source with a signing secret; returns it and the secret."""
    secret = secret or secret_generate()
    secret_key(secret)  # raises ValueError with a clear message on a bad secret
    slug = slugify(name)
    if not slug:
        raise ValueError("a source name needs at least one letter or digit")
    if Source.objects.filter(slug=slug).exists() or Source.objects.filter(name=name).exists():
        raise ValueError(f"a source named {name!r} exists already")
    source = Source.objects.create(name=name, slug=slug, kind=kind, signing_secret=secret)
    return source, secret


def source_rotate_secret(*, source: Source, new_secret: str | None = None) -> str:
    """Make a new current secret; the old one stays valid until retired."""
    new_secret = new_secret or secret_generate()
    secret_key(new_secret)
    source.previous_signing_secret = source.signing_secret
    source.signing_secret = new_secret
    source.save(update_fields=["signing_secret", "previous_signing_secret"])
    return new_secret


def source_retire_previous_secret(*, source: Source) -> None:
    source.previous_signing_secret = ""
    source.save(update_fields=["previous_signing_secret"])


def api_token_create(
    *,
    source: Source,
    name: str = "",
    expires_at: datetime | None = None,
    scopes: Iterable[str] = (ApiToken.Scope.REPORTS,),
) -> tuple[ApiToken, str]:
    """A new bearer token for the given scopes; the raw value is returned once and never stored."""
    scopes = sorted(set(scopes))
    unknown = [scope for scope in scopes if scope not in ApiToken.Scope.values]
    if unknown or not scopes:
        raise ValueError(f"scopes must be some of {', '.join(ApiToken.Scope.values)}, not {unknown or 'none'}")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        source=source, name=name, token_hash=token_hash(raw), prefix=raw[:12], expires_at=expires_at, scopes=scopes
    )
    return token, raw


def api_token_revoke(*, token: ApiToken) -> None:
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])


# --- Ingestion ---------------------------------------------------------------


@dataclass
class EventOutcome:
    index: int
    id: str | None
    status: str  # accepted | duplicate | invalid
    error: str | None = None
    field: str | None = None


@dataclass
class IngestResult:
    outcomes: list[EventOutcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for outcome in self.outcomes if outcome.status == status)


def rating_item_values(*, event: RatingEvent, raw: dict[str, Any]) -> dict[str, Any]:
    """The fields of a validated rating event's row that vary from event to event."""
    model = event.model
    context = event.context.model_dump(mode="json", exclude_none=True)
    # Validation keeps every type as sent (strict strings, Any elsewhere), so
    # equal means the same JSON: the context is then stored once.
    as_received = raw.get("context") == context
    return {
        "external_id": event.id,
        "rating": FeedbackItem.UP if event.rating == "up" else FeedbackItem.DOWN,
        "comment": event.comment or "",
        "context": context,
        "context_as_received": as_received,
        "model_name": model.name if model else "",
        "model_version": model.version if model else "",
        "variant": event.variant,
        "surface": event.surface,
        "user_ref": event.user_ref,
        "occurred_at": event.occurred_at,
        "raw_payload": {key: value for key, value in raw.items() if key != "context"} if as_received else raw,
    }


def rating_item_build(*, source: Source, event: RatingEvent, raw: dict[str, Any], receipt_id: uuid.UUID) -> FeedbackItem:
    """The row for a validated rating event (not saved)."""
    return FeedbackItem(
        source=source, kind=FeedbackItem.Kind.RATING, receipt_id=receipt_id, **rating_item_values(event=event, raw=raw)
    )


# The columns an insert writes; for every one of them the column is named as the field's attname.
_STORED_FIELDS = [f for f in FeedbackItem._meta.concrete_fields if not f.primary_key]


def item_row_defaults() -> dict[str, Any]:
    """Every stored column at its default (received_at and status_changed_at: now), keyed by column.

    A webhook request builds its rows as dicts: a batch of 500 spent about a
    third of its Python time constructing model instances only to read their
    fields back."""
    return {f.column: f.get_default() for f in _STORED_FIELDS}


def events_ingest(
    *, source: Source, events: list[Any], message_id: str | None = None, screen_text: bool = True
) -> IngestResult:
    """Validate and store rating events; each event's outcome is reported.

    `message_id`: the webhook-id of a delivery of one event (not a batch). The
    event's own `id` is its identity when it carries one, as a delivery
    service's events do; otherwise the message id is. A redelivery repeats
    both, so either way it meets the stored row as a duplicate.

    `screen_text`: look for text no column can store (NUL, unpaired
    surrogates); the API passes False when the body cannot hold any. Numbers
    and nesting are always screened (see core.storable.unstorable_error).

    Invalid events are reported and skipped; the valid ones are stored in one
    transaction with INSERT .. ON CONFLICT DO NOTHING on (source, external_id),
    so concurrent redeliveries leave exactly one row and each learns whether
    it was the one that stored it. Processing is queued after commit.
    """
    result = IngestResult()
    receipt_id = uuid.uuid4()
    shared = item_row_defaults() | {"source_id": source.id, "kind": FeedbackItem.Kind.RATING, "receipt_id": receipt_id}
    pending: dict[str, tuple[int, dict[str, Any]]] = {}
    single = message_id is not None
    for index, raw in enumerate(events):
        prefix = "" if single else f"events[{index}]"
        if not isinstance(raw, dict):
            where = prefix or "body"
            result.outcomes.append(EventOutcome(index, None, "invalid", f"{where}: must be a JSON object", where))
            continue
        unstorable = unstorable_error(raw, prefix, screen_text=screen_text)
        if unstorable is not None:
            result.outcomes.append(EventOutcome(index, _shown_event_id(raw), "invalid", *unstorable))
            continue
        try:
            event = RatingEvent.model_validate(raw)
        except ValidationError as exc:
            message, path = first_error(exc, prefix)
            result.outcomes.append(EventOutcome(index, _shown_event_id(raw), "invalid", message, path))
            continue
        if event.id is None:
            if not single:
                path = f"{prefix}.id"
                result.outcomes.append(EventOutcome(index, None, "invalid", f"{path}: is required in a batch", path))
                continue
            problem = message_id_error(message_id)
            if problem is not None:
                result.outcomes.append(EventOutcome(index, None, "invalid", f"webhook-id: {problem}", "webhook-id"))
                continue
            event.id = message_id
        if event.id in pending:
            result.outcomes.append(EventOutcome(index, event.id, "duplicate"))
            continue
        pending[event.id] = (index, rating_item_values(event=event, raw=raw))

    rows = [row for _, row in pending.values()]
    stored = items_insert_new(items=rows, shared=shared, receipt_id=receipt_id, coalesce=True)
    for event_id, (index, _) in pending.items():
        result.outcomes.append(EventOutcome(index, event_id, "accepted" if event_id in stored else "duplicate"))
    result.outcomes.sort(key=lambda outcome: outcome.index)
    return result


def _shown_event_id(raw: dict[str, Any]) -> str | None:
    """The id of an invalid event, for its result, when it is text that can be shown."""
    event_id = raw.get("id")
    return event_id if isinstance(event_id, str) and unstorable_error(event_id) is None else None


def message_id_error(message_id: str) -> str | None:
    """Why a webhook-id cannot serve as the id of the event it carries, or None."""
    if len(message_id) > EVENT_ID_MAX_LENGTH:
        return (
            f"is {len(message_id)} characters; an event id holds at most {EVENT_ID_MAX_LENGTH}, "
            "so send the event's own id in the body"
        )
    if unstorable_error(message_id) is not None:
        return "must not contain NUL or unpaired surrogates"
    return None


def items_insert_new(
    *,
    items: list[FeedbackItem] | list[dict[str, Any]],
    receipt_id: uuid.UUID,
    shared: dict[str, Any] | None = None,
    coalesce: bool = False,
) -> set[str]:
    """Insert the items that are new; returns the external ids this call stored.

    `items`: unsaved FeedbackItems, or rows as dicts by column; a dict row
    holds what varies between rows, and `shared` every other column, the
    same for all of them (`item_row_defaults` and the values).

    `coalesce`: the caller stores items a request at a time (webhooks,
    reports), so fewer than a batch are handed on as a wake-up that a worker
    coalesces with the other requests' items (feedback.pipeline);
    bulk paths (imports, the demo) queue their ids in batches as they are.
    """
    if not items:
        return set()
    shared = shared or {}
    if connection.vendor == "postgresql":
        new_rows = _items_insert_returning(items, shared)
    else:
        with transaction.atomic():
            FeedbackItem.objects.bulk_create(
                [item if isinstance(item, FeedbackItem) else FeedbackItem(**(shared | item)) for item in items],
                ignore_conflicts=True,
                batch_size=500,
            )
            new_rows = list(FeedbackItem.objects.filter(receipt_id=receipt_id).values_list("id", "external_id"))
    # Outside a transaction this queues at once (the INSERT has committed);
    # inside a caller's transaction, when that one commits.
    items_enqueue_after_commit(item_ids=[item_id for item_id, _ in new_rows], coalesce=coalesce)
    return {external_id for _, external_id in new_rows}


def _items_insert_returning(
    items: list[FeedbackItem] | list[dict[str, Any]], shared: dict[str, Any]
) -> list[tuple[int, str]]:
    """One ``INSERT .. ON CONFLICT DO NOTHING RETURNING`` for all the items (PostgreSQL).

    The rows travel as one JSON document that the server unpacks with
    jsonb_populate_recordset (parsed once: json_populate_recordset parses each
    JSON column again, 30 against 26 ms for 500 events), on top of one record
    of the columns they share, sent once rather than with every row (a third
    of the document, and of its parsing, for a batch of events): bulk_create
    spends most of a batch's time escaping the JSON columns into array
    literals, and cannot say which rows it inserted when it ignores
    conflicts. RETURNING names exactly the rows this statement stored, and
    one statement needs no explicit transaction.
    """
    rows = [
        item if isinstance(item, dict) else {f.column: getattr(item, f.attname) for f in _STORED_FIELDS}
        for item in items
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            _insert_returning_sql(),
            # datetimes and UUIDs natively, far faster than json.dumps
            [orjson.dumps(shared).decode(), orjson.dumps(rows).decode()],
        )
        return cursor.fetchall()


@functools.cache
def _insert_returning_sql() -> str:
    """The statement of _items_insert_returning, built once per process: every webhook request runs it."""
    table = connection.ops.quote_name(FeedbackItem._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(f.column) for f in _STORED_FIELDS)
    return (
        f"INSERT INTO {table} ({columns}) SELECT {columns} FROM "
        f"jsonb_populate_recordset(jsonb_populate_record(NULL::{table}, %s), %s) "
        "ON CONFLICT DO NOTHING RETURNING id, external_id"
    )


def report_item_build(
    *, source: Source, report: ReportIn, raw: dict[str, Any], receipt_id: uuid.UUID, reporter=None
) -> FeedbackItem:
    """The row for a validated report (not saved)."""
    return FeedbackItem(
        source=source,
        external_id=report.id or f"report-{receipt_id}",
        kind=FeedbackItem.Kind.REPORT,
        title=report.title,
        comment=report.what_happened,
        expected=report.expected,
        severity=report.severity,
        model_version=report.model_version,
        context={"transcript": report.transcript} if report.transcript else {},
        reporter=reporter,
        occurred_at=report.occurred_at or timezone.now(),
        raw_payload=raw,
        receipt_id=receipt_id,
    )


def report_create(
    *, source: Source, report: ReportIn, reporter=None, raw: dict[str, Any] | None = None
) -> tuple[FeedbackItem, bool]:
    """Store a dogfooding report; returns (item, created). A repeated id is a duplicate."""
    receipt_id = uuid.uuid4()
    item = report_item_build(
        source=source,
        report=report,
        raw=raw if raw is not None else report.model_dump(mode="json"),
        receipt_id=receipt_id,
        reporter=reporter,
    )
    created = bool(items_insert_new(items=[item], receipt_id=receipt_id, coalesce=True))
    return FeedbackItem.objects.get(source=source, external_id=item.external_id), created


def api_token_touch(*, token: ApiToken) -> None:
    """Record when a token was last used (at most once a minute, to spare writes)."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        token.last_used_at = now
        token.save(update_fields=["last_used_at"])


DOGFOOD_FORM_SOURCE = "dogfooding-form"


def dogfood_form_source() -> Source:
    """The source that reports from the browser form belong to (made on first use)."""
    source = Source.objects.filter(slug=DOGFOOD_FORM_SOURCE).first()
    if source is None:
        source, _ = source_create(name=DOGFOOD_FORM_SOURCE, kind=Source.Kind.DOGFOOD)
    return source
