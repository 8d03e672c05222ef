"""Writes for the pipeline's batches across requests: single events wake a worker, which takes whatever waits.

Why: a task per event embeds one text per task, about 50 items/s on two
cores, while the model embeds about 1,400 short texts/s when it is given
them in batches (bench/embed.py). So an event that arrives on its own does
not send its id to a worker. Its commit makes sure that a wake-up is queued,
and the worker that takes the wake-up claims up to ``PIPELINE_BATCH_SIZE`` of
the items waiting, oldest first, embeds them in one call and hands them to
assignment (bench/pipeline.py measures it).

Claiming. On PostgreSQL the batch is read with ``SELECT .. FOR UPDATE SKIP
LOCKED`` and embedded and written inside that same transaction: two workers
take disjoint batches; a worker killed mid-batch loses its connection, so its
transaction rolls back and its rows are free again for the redelivered task,
the next batch or the sweeper; and the status moves received -> embedded as
it always has, with nothing written twice. SQLite has one writer at a time
and no row locks; there a worker reads the waiting items, embeds them outside
any transaction, so the web server's inserts never wait for the model, and
writes only the rows still ``received``: two workers may embed the same text
twice, never store it twice.

Coalescing the wake-ups. With a Redis broker a key beside the queue says "a
wake-up is queued that no worker has started". A commit sets it (SET NX) and
publishes only when it was not set; a worker deletes it before it claims.
Deleting before claiming is what makes this safe: a commit that found the key
set happened before that delete, so before the claim, which sees its item; a
commit after the delete sets the key anew and publishes. A full batch sets
the key too before it embeds, so the rest of a backlog goes to another worker
on the ``embed`` queue meanwhile. The key expires after a few seconds: a
wake-up lost with its queue (a purge, a Redis restart) costs seconds, and the
sweeper still queues whatever is left waiting. With any other broker (the
embedded default's file-system transport) every commit publishes; each
wake-up takes whatever waits, so the later ones find nothing and end at once.

Items that failed once (``attempts`` > 0) are not claimed by wake-ups: they
belong to ``feedback.tasks.embed_items``' retries (and to the sweeper), so one
bad item cannot fail batch after batch.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field

import redis
from celery import current_app
from django.db import connection, transaction
from django.db.models import QuerySet

from core import jobs
from feedback.models import FeedbackItem

logger = logging.getLogger(__name__)

WAKE_KEY = "feedback:embed-wake-queued"
# Long enough to spare thousands of publishes a second, short enough that a
# lost wake-up delays the next events by seconds only.
WAKE_TTL_SECONDS = 2
# What an embedding reads of an item (feedback.text.embeddable_text).
EMBED_FIELDS = ("id", "title", "comment", "expected", "context")

_wake_clients: dict[str, redis.Redis] = {}


@dataclass
class EmbedBatch:
    """What one claim took: every claimed id (for the rollout checks) and those that got a vector (for assignment)."""

    claimed_ids: list[int] = field(default_factory=list)
    embedded_ids: list[int] = field(default_factory=list)


def _wake_client() -> redis.Redis | None:
    """A client for the broker's Redis, or None when the broker is not Redis (or tasks run eagerly)."""
    conf = current_app.conf
    url = conf.broker_url or ""
    if conf.task_always_eager or not url.startswith(("redis://", "rediss://")):
        return None
    client = _wake_clients.get(url)
    if client is None:
        options = conf.broker_transport_options or {}
        client = redis.Redis.from_url(
            url,
            socket_connect_timeout=options.get("socket_connect_timeout", 2),
            socket_timeout=options.get("socket_timeout", 5),
        )
        _wake_clients[url] = client
    return client


def items_wake(*, waiting: int, gather: bool = True) -> bool:
    """Make sure a worker will take the items now waiting; False when the broker is unreachable.

    `waiting`: how many items this caller just committed, for the log line.
    `gather`: whether the worker may wait a moment for more (see
    `items_wake_clear`); not when a full batch says more are waiting already.
    A broker outage must not fail ingestion: the items are committed and
    wait as ``received`` until the sweeper queues them.
    """
    from feedback.tasks import (
        embed_waiting,  # tasks import services; import here to avoid a cycle
    )

    client = _wake_client()
    marked = False
    try:
        if client is not None:
            marked = bool(client.set(WAKE_KEY, 1, nx=True, ex=WAKE_TTL_SECONDS))
            if not marked:
                return True  # a queued wake-up that no worker has started will see this commit
        embed_waiting.apply_async(kwargs={"gather": gather}, retry=False)
    except Exception:  # any broker/transport failure: the sweeper will queue the items
        if marked:
            # Unmark, so that the next commit tries to publish again; if Redis
            # is unreachable for this too, the key expires on its own.
            with contextlib.suppress(redis.RedisError):
                client.delete(WAKE_KEY)
        logger.warning("broker unavailable; %d items wait for the sweeper", waiting, exc_info=True)
        return False
    return True


def items_wake_clear(*, gather_seconds: float = 0.0) -> None:
    """Mark that a worker has started a wake-up: commits from now on queue a new one. Call before claiming.

    With `gather_seconds`, wait that long first: commits meanwhile still find
    the mark set, publish nothing and join this batch, so a worker that is
    woken by a trickle of events takes them in tens rather than one by one
    (and a second worker does not take every other event). Only where
    wake-ups are coalesced: elsewhere each commit queues its own wake-up,
    and waiting in each would only slow them all.
    """
    client = _wake_client()
    if client is None:
        return
    if gather_seconds > 0:
        time.sleep(gather_seconds)
    try:
        client.delete(WAKE_KEY)
    except redis.RedisError:
        # The key expires within seconds; until then commits rely on this
        # worker's claim or the next wake-up, never on nothing.
        logger.warning("could not clear the wake-up mark; it expires in %d s", WAKE_TTL_SECONDS, exc_info=True)


def waiting_for_a_batch() -> QuerySet[FeedbackItem]:
    """Items a wake-up may claim: waiting and never failed, oldest first (the pipeline index serves this order)."""
    return FeedbackItem.objects.filter(status=FeedbackItem.Status.RECEIVED, attempts=0).order_by("status_changed_at", "id")


def items_embed_waiting(*, limit: int) -> EmbedBatch:
    """Claim up to `limit` waiting items, embed them and mark them embedded.

    Steps: claim (see the module docstring; a full batch wakes a peer before
    embedding); embed each distinct new text once; store the links and the
    status. If the batch fails, it is rolled back and its items are embedded
    one at a time (`items_embed_one_by_one`), so one bad item cannot hold back
    the others.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    batch = EmbedBatch()
    try:
        items_claim_and_embed(waiting_for_a_batch(), limit=limit, batch=batch, on_full=lambda: items_wake(waiting=0, gather=False))
    except Exception:
        if not batch.claimed_ids:
            raise
        logger.warning("embedding a batch of %d failed; embedding its items one by one", len(batch.claimed_ids),
                       exc_info=True)
        batch.embedded_ids = items_embed_one_by_one(item_ids=batch.claimed_ids)
    return batch


def items_claim_and_embed(waiting: QuerySet[FeedbackItem], *, limit: int | None, batch: EmbedBatch, on_full=None) -> None:
    """Embed the items of `waiting` (up to `limit`) that no other worker holds; fills `batch` as it goes.

    `batch.claimed_ids` is set as soon as the claim is made, so a caller
    still knows the batch when the embedding raises. `on_full` is called
    when the claim took `limit` items (more may be waiting).
    """
    from feedback import services  # services imports this module

    if connection.features.has_select_for_update_skip_locked:
        with transaction.atomic():
            claimed = waiting.select_for_update(skip_locked=True).only(*EMBED_FIELDS)
            items = list(claimed[:limit] if limit else claimed)
            batch.claimed_ids = [item.id for item in items]
            if on_full is not None and limit and len(items) == limit:
                on_full()
            # Still inside the transaction that holds the rows: nobody else writes them meanwhile.
            batch.embedded_ids = services.items_mark_embedded(services.items_attach_vectors(items))
        return
    items = list((waiting[:limit] if limit else waiting).only(*EMBED_FIELDS))
    batch.claimed_ids = [item.id for item in items]
    if on_full is not None and limit and len(items) == limit:
        on_full()
    batch.embedded_ids = services.items_mark_embedded(services.items_attach_vectors(items))


def items_embed_one_by_one(*, item_ids: list[int]) -> list[int]:
    """Embed each item alone; one that fails counts an attempt and goes to `embed_items`' retries.

    Returns the ids that got a vector.
    """
    from feedback import services
    from feedback.tasks import RETRY_FIRST_SECONDS, embed_items

    embedded: list[int] = []
    for item_id in item_ids:
        try:
            embedded += services.items_embed(item_ids=[item_id])
        except Exception as exc:
            logger.warning("embedding item %d failed; it is retried on its own", item_id, exc_info=True)
            services.items_record_failure(item_ids=[item_id], error=f"{type(exc).__name__}: {exc}")
            waiting = f"item {item_id} waits for the sweeper"
            jobs.send(embed_items, [[item_id]], if_unreachable=waiting, countdown=RETRY_FIRST_SECONDS)
    return embedded
