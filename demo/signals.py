"""The demo corpus stored as the product would store it: rows built by the webhook's and the report API's
schemas and services, inserted in chunks (a load is idempotent: equal external ids are duplicates), then
embedded and sorted into categories as the worker would."""

import uuid
from collections.abc import Iterator, Sequence

from demo import corpus
from demo.corpus import DemoSignal
from feedback import services
from feedback import pipeline
from feedback.models import FeedbackItem, Source
from feedback.schemas import RatingEvent, ReportIn
from labeling.clustering.services import items_assign

CHUNK_SIZE = 500
EMBED_CHUNK = 256


def received_ids(*, among: Sequence[int] | None = None) -> list[int]:
    """The items still waiting to be embedded (of `among`, when given), oldest first."""
    waiting = FeedbackItem.objects.filter(status=FeedbackItem.Status.RECEIVED)
    if among is not None:
        waiting = waiting.filter(id__in=list(among))
    return list(waiting.order_by("id").values_list("id", flat=True))


def embed_and_assign(item_ids: Sequence[int]) -> int:
    """Embed the items and sort them into the nearest open category, as the worker does; how many got one."""
    placed = 0
    for chunk in _chunks(item_ids, EMBED_CHUNK):
        placed += items_assign(item_ids=pipeline.items_embed(item_ids=list(chunk)))
    return placed


def signals_store(signals: Sequence[DemoSignal]) -> int:
    """Insert the signals that are new; returns how many were."""
    product = Source.objects.filter(name=corpus.PRODUCT_SOURCE_NAME).first()
    if product is None:
        product, _ = services.source_create(name=corpus.PRODUCT_SOURCE_NAME, kind=Source.Kind.PRODUCT)
    builders = (
        (product, "rating", rating_item),
        (services.dogfood_form_source(), "report", report_item),
    )
    stored = 0
    for source, kind, build in builders:
        payloads = [signal.payload for signal in signals if signal.kind == kind]
        for chunk in _chunks(payloads, CHUNK_SIZE):
            # A fresh receipt per chunk: items_insert_new tells new rows from
            # duplicates by it, so it must never repeat between loads.
            receipt_id = uuid.uuid4()
            items = [build(source=source, payload=payload, receipt_id=receipt_id) for payload in chunk]
            stored += len(services.items_insert_new(items=items, receipt_id=receipt_id))
    return stored


def rating_item(*, source: Source, payload: dict, receipt_id: uuid.UUID) -> FeedbackItem:
    """The row the webhook stores for this event (validated by the same schema)."""
    event = RatingEvent.model_validate(payload)
    return services.rating_item_build(source=source, event=event, raw=payload, receipt_id=receipt_id)


def report_item(*, source: Source, payload: dict, receipt_id: uuid.UUID) -> FeedbackItem:
    """The row services.report_create stores for this report."""
    report = ReportIn.model_validate(payload)
    return services.report_item_build(source=source, report=report, raw=payload, receipt_id=receipt_id)


def summary_line(signals: Sequence[DemoSignal], *, stored: int, seed: int, seconds: float) -> str:
    counts = corpus.summarize(signals)
    kinds = ", ".join(f"{kind} {counts['kinds'][kind]}" for kind in ("rating", "report"))
    ratings = ", ".join(f"{rating} {counts['ratings'][rating]}" for rating in ("up", "down"))
    versions = ", ".join(f"{corpus.MODEL_NAME}-{v} {counts['versions'][v]}" for v in corpus.VERSIONS)
    return (
        f"demo_load: {len(signals)} signals (seed {seed}), {stored} new | {kinds} | {ratings} | "
        f"{len(counts['themes'])} themes | {versions} | {seconds:.1f}s"
    )


def _chunks(values: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(values), size):
        yield values[start : start + size]
