"""Ingestion endpoints: signed product webhooks and dogfooding reports.

Each view runs its checks in a fixed order and stops at the first failure
with one short error: source, size, signature headers, signature, JSON,
shape, then the events one by one.
"""

import time

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from ninja import Router, Schema, Status

from core.api import (
    ApiError,
    error_responses,
    json_body_schema,
    read_json_body,
    validate_model,
)
from core.storable import may_hold_unstorable_text
from feedback import selectors, services
from feedback.models import ApiToken
from feedback.schemas import EventBatch, RatingEvent, ReportIn
from feedback.signatures import SignatureError, verify
from feedback.tokens import authenticate_token

router = Router(tags=["ingestion"])


class EventResultOut(Schema):
    index: int
    id: str | None = None
    status: str
    error: str | None = None
    field: str | None = None


class IngestOut(Schema):
    accepted: int
    duplicates: int
    invalid: int
    duplicate: bool | None = None
    results: list[EventResultOut]


class ReportOut(Schema):
    id: int
    external_id: str
    status: str
    duplicate: bool


def read_limited_body(request: HttpRequest) -> bytes:
    """The body, refusing one over the limit without reading it.

    A chunked body (no Content-Length) was read already, within the limit,
    by config.middleware.ReadChunkedBody, which declared its length.
    """
    limit = settings.WEBHOOK_MAX_BODY_BYTES
    declared = request.META.get("CONTENT_LENGTH") or "0"
    try:
        length = int(declared)
    except ValueError:
        raise ApiError(400, "the Content-Length header is not a number") from None
    if length > limit:
        raise ApiError(413, f"the request body is larger than the limit of {limit} bytes")
    return request.body


@router.post(
    "/sources/{slug}/events",
    response={202: IngestOut, 207: IngestOut, **error_responses(400, 401, 404, 413, 422)},
    openapi_extra=json_body_schema(RatingEvent, EventBatch),
    summary="Receive rating events (Standard Webhooks signed)",
)
def receive_events(request: HttpRequest, slug: str):
    """One ``feedback.rating`` event, or ``{"events": [...]}`` with up to 1,000 of them.

    Signed with the source's secret as Standard Webhooks: headers
    ``webhook-id``, ``webhook-timestamp``, ``webhook-signature``. An event's
    ``id`` is its idempotency key; a single event without one takes the
    ``webhook-id``. A redelivered event (same source and id) stores nothing
    new and answers ``duplicate``. The body may come chunked.
    """
    source = selectors.source_for_webhook(slug=slug)
    if source is None:
        raise ApiError(404, f"no active source '{slug}'")
    body = read_limited_body(request)
    msg_id = request.headers.get("webhook-id", "")
    timestamp = request.headers.get("webhook-timestamp", "")
    signature = request.headers.get("webhook-signature", "")
    for header, value in (("webhook-id", msg_id), ("webhook-timestamp", timestamp), ("webhook-signature", signature)):
        if not value:
            raise ApiError(401, f"the {header} header is missing")
    try:
        verify(
            secrets_to_try=[s for s in (source.signing_secret, source.previous_signing_secret) if s],
            msg_id=msg_id,
            timestamp=timestamp,
            signature_header=signature,
            body=body,
            now=time.time(),
            tolerance_seconds=settings.WEBHOOK_TOLERANCE_SECONDS,
        )
    except SignatureError as exc:
        raise ApiError(401, str(exc)) from None
    # A value no column can store (a NUL, say, or a 2^64) fails only the event that holds it, not the whole batch.
    payload = read_json_body(request, body, screen_values=False)
    screen_text = may_hold_unstorable_text(body)

    if isinstance(payload, dict) and "events" in payload:
        events = payload["events"]
        if not isinstance(events, list):
            raise ApiError(422, "events: must be a list of events", "events")
        limit = settings.WEBHOOK_MAX_BATCH_EVENTS
        if len(events) > limit:
            raise ApiError(413, f"a batch holds at most {limit} events; this one has {len(events)}", "events")
        result = services.events_ingest(source=source, events=events, screen_text=screen_text)
    elif isinstance(payload, dict):
        result = services.events_ingest(source=source, events=[payload], message_id=msg_id, screen_text=screen_text)
    else:
        raise ApiError(422, 'the body must be a JSON object: one event, or {"events": [...]}')

    invalid = [outcome for outcome in result.outcomes if outcome.status == "invalid"]
    single = "events" not in payload
    if invalid and (single or len(invalid) == len(result.outcomes)):
        raise ApiError(422, invalid[0].error, invalid[0].field)
    answer = {
        "accepted": result.count("accepted"),
        "duplicates": result.count("duplicate"),
        "invalid": len(invalid),
        "duplicate": result.outcomes[0].status == "duplicate" if single else None,
        "results": [vars(outcome) for outcome in result.outcomes],
    }
    # The answer already has IngestOut's shape; JsonResponse skips re-validating
    # it, which costs as much as validating the events of a batch of 500.
    return JsonResponse(answer, status=207 if invalid else 202)


@router.post(
    "/reports",
    response={200: ReportOut, 201: ReportOut, **error_responses(400, 401, 403, 413, 422)},
    openapi_extra=json_body_schema(ReportIn),
    summary="File a dogfooding report",
)
def create_report(request: HttpRequest):
    """A report of what went wrong, authenticated with ``Authorization: Bearer <token>``
    (a token with the ``reports`` scope; the report is filed as the token's source).

    Send an ``id`` to make retries safe: a repeated id answers 200 with
    ``duplicate: true`` and stores nothing new.
    """
    token = authenticate_token(request, scope=ApiToken.Scope.REPORTS)
    body = read_limited_body(request)
    data = read_json_body(request, body)
    report = validate_model(ReportIn, data)
    item, created = services.report_create(source=token.source, report=report, raw=data)
    answer = {"id": item.id, "external_id": item.external_id, "status": item.status, "duplicate": not created}
    return Status(201 if created else 200, answer)
