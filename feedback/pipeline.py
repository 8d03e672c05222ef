"""The pipeline from a stored item to its vector: queueing, batches across requests, embedding, the sweeper.

Single events wake a worker, which takes whatever waits.

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
import hashlib
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import orjson
import redis
from celery import current_app
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from core import jobs
from feedback import custom_patterns
from feedback.models import Embedding, FeedbackItem
from feedback.text import EMBED_RECIPE, embed_text

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
        embed_waiting,  # tasks import this module: imported where used
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

    if connection.features.has_select_for_update_skip_locked:
        with transaction.atomic():
            claimed = waiting.select_for_update(skip_locked=True).only(*EMBED_FIELDS)
            items = list(claimed[:limit] if limit else claimed)
            batch.claimed_ids = [item.id for item in items]
            if on_full is not None and limit and len(items) == limit:
                on_full()
            # Still inside the transaction that holds the rows: nobody else writes them meanwhile.
            batch.embedded_ids = items_mark_embedded(items_attach_vectors(items))
        return
    items = list((waiting[:limit] if limit else waiting).only(*EMBED_FIELDS))
    batch.claimed_ids = [item.id for item in items]
    if on_full is not None and limit and len(items) == limit:
        on_full()
    batch.embedded_ids = items_mark_embedded(items_attach_vectors(items))


def items_embed_one_by_one(*, item_ids: list[int]) -> list[int]:
    """Embed each item alone; one that fails counts an attempt and goes to `embed_items`' retries.

    Returns the ids that got a vector.
    """
    from feedback.tasks import RETRY_FIRST_SECONDS, embed_items

    embedded: list[int] = []
    for item_id in item_ids:
        try:
            embedded += items_embed(item_ids=[item_id])
        except Exception as exc:
            logger.warning("embedding item %d failed; it is retried on its own", item_id, exc_info=True)
            items_record_failure(item_ids=[item_id], error=f"{type(exc).__name__}: {exc}")
            waiting = f"item {item_id} waits for the sweeper"
            jobs.send(embed_items, [[item_id]], if_unreachable=waiting, countdown=RETRY_FIRST_SECONDS)
    return embedded


# --- Queueing and embedding items ------------------------------------------------


def items_enqueue(*, item_ids: list[int], batch_size: int = 256) -> bool:
    """Queue processing; False when the broker is unreachable.

    A broker outage must not fail ingestion: the items are committed and wait
    as ``received`` until the sweeper queues them again.
    """
    from feedback.tasks import (
        embed_items,  # tasks import this module: imported where used
    )

    for start in range(0, len(item_ids), batch_size):
        waiting = f"{len(item_ids) - start} items wait for the sweeper"
        batch = item_ids[start : start + batch_size]
        # Celery would write a repr of every id into the message's header for monitors: a third of its cost.
        shown = f"[{len(batch)} item ids: {batch[0]}..{batch[-1]}]"
        if jobs.send(embed_items, [batch], if_unreachable=waiting, argsrepr=shown):
            return False
    return True


def items_enqueue_after_commit(*, item_ids: list[int], coalesce: bool = False) -> None:
    """Hand the items to the pipeline once the caller's transaction commits (at once outside one).

    With `coalesce`, fewer items than a batch wake a worker that takes whatever
    waits, instead of a task of their own (items_wake).
    """
    if not item_ids:
        return
    if coalesce and settings.PIPELINE_COALESCE_SINGLE_EVENTS and len(item_ids) < settings.PIPELINE_BATCH_SIZE:
        transaction.on_commit(lambda: items_wake(waiting=len(item_ids)))
    else:
        transaction.on_commit(lambda: items_enqueue(item_ids=item_ids))


def items_sweep_unprocessed(*, now: datetime | None = None) -> int:
    """Queue again every item left ``received`` for longer than the grace period."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.SWEEPER_GRACE_SECONDS)
    item_ids = list(
        FeedbackItem.objects.filter(status=FeedbackItem.Status.RECEIVED, status_changed_at__lt=cutoff)
        .order_by("id")
        .values_list("id", flat=True)[:50_000]
    )
    if item_ids:
        items_enqueue(item_ids=item_ids)
    if _stale_recipe_items().exists():
        from feedback.tasks import reembed_items  # tasks import this module

        try:
            reembed_items.apply_async(retry=False)
        except Exception:  # the next sweep tries again
            logger.warning("broker unavailable; re-embedding waits for the next sweep", exc_info=True)
    return len(item_ids)


def _stale_recipe_items():
    """Processed items whose text was made by an older recipe than `EMBED_RECIPE`."""
    return FeedbackItem.objects.filter(
        status__in=[FeedbackItem.Status.EMBEDDED, FeedbackItem.Status.ASSIGNED]
    ).exclude(embed_recipe=EMBED_RECIPE)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def embed_text_for(item, *, extra_patterns=None) -> str:
    """`feedback.text.embed_text` with every source's custom scrub patterns (read afresh unless given)."""
    extra = custom_patterns.all_sources() if extra_patterns is None else extra_patterns
    return embed_text(item, extra_patterns=extra)


def items_embed(*, item_ids: list[int]) -> list[int]:
    """Derive each waiting item's text, embed the texts not embedded yet, store the links.

    Steps: claim the items still waiting that no other worker holds (others
    were done by an earlier delivery of this task, are being done by a
    batch, or vanished; pipeline.items_claim_and_embed); derive text
    and hash; embed each distinct new text once; link items to their vectors;
    mark them embedded. Returns the ids of the items that now have a vector,
    for assignment.
    """
    batch = EmbedBatch()
    waiting = FeedbackItem.objects.filter(id__in=item_ids, status=FeedbackItem.Status.RECEIVED).order_by("id")
    items_claim_and_embed(waiting, limit=None, batch=batch)
    return batch.embedded_ids


def items_mark_embedded(items: list[FeedbackItem]) -> list[int]:
    """Store the text, vector link and ``embedded`` status of the items still ``received``; returns those with a vector.

    Only rows still waiting are written, so a duplicate delivery that lost
    the race changes nothing. (On PostgreSQL the claim holds these rows
    already; on SQLite this is what stops a second worker that embedded the
    same items from writing them again.) One statement for the batch, not
    `bulk_update`, whose CASE per field and row cost more than the embedding
    of short texts. An item with no words at all is still a signal: it is
    kept, marked embedded without a vector, and never clustered.
    """
    if not items:
        return []
    now = timezone.now()
    table = connection.ops.quote_name(FeedbackItem._meta.db_table)
    waiting = FeedbackItem.Status.RECEIVED.value
    embedded = FeedbackItem.Status.EMBEDDED.value
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            rows = [
                {"id": i.id, "embed_text": i.embed_text, "content_hash": i.content_hash,
                 "embed_recipe": i.embed_recipe, "embedding_id": i.embedding_id}
                for i in items
            ]
            cursor.execute(
                f"UPDATE {table} AS item SET embed_text = done.embed_text, content_hash = done.content_hash, "
                "embed_recipe = done.embed_recipe, embedding_id = done.embedding_id, status = %s, "
                "status_changed_at = %s, last_error = '' "
                "FROM json_to_recordset(%s) AS done(id bigint, embed_text text, content_hash text, "
                "embed_recipe integer, embedding_id bigint) "
                "WHERE item.id = done.id AND item.status = %s RETURNING item.id",
                [embedded, now, orjson.dumps(rows).decode(), waiting],
            )
            saved = {item_id for (item_id,) in cursor.fetchall()}
        else:
            with transaction.atomic():  # SQLite: one writer at a time, so the read and the writes agree
                saved = set(
                    FeedbackItem.objects.filter(id__in=[i.id for i in items], status=waiting).values_list("id", flat=True)
                )
                changed_at = connection.ops.adapt_datetimefield_value(now)
                cursor.executemany(
                    f"UPDATE {table} SET embed_text = %s, content_hash = %s, embed_recipe = %s, embedding_id = %s, "
                    "status = %s, status_changed_at = %s, last_error = '' WHERE id = %s",
                    [(i.embed_text, i.content_hash, i.embed_recipe, i.embedding_id, embedded, changed_at, i.id)
                     for i in items if i.id in saved],
                )
    for item in items:
        if item.id in saved:
            item.status, item.status_changed_at, item.last_error = embedded, now, ""
    return [item.id for item in items if item.id in saved and item.embedding_id]


def items_reembed(*, limit: int = 5000) -> int:
    """Embed again, under the current recipe, up to `limit` processed items embedded under an older one.

    Their status and category stay; the next cluster run reads the new
    vectors (a run only reads vectors of the current recipe). Returns how
    many were re-embedded; 0 when none are left.
    """
    stale = (
        _stale_recipe_items()
        .order_by("id")
        .only("id", "title", "comment", "expected", "context")[:limit]
    )
    items = items_attach_vectors(list(stale))
    FeedbackItem.objects.bulk_update(items, ["embed_text", "content_hash", "embed_recipe", "embedding"], batch_size=500)
    return len(items)


def items_attach_vectors(items: list[FeedbackItem]) -> list[FeedbackItem]:
    """Set each item's text, hash, recipe and shared vector (not saved); equal texts share one vector."""
    from feedback import embedder  # heavy (numpy, onnxruntime): only workers load it

    if not items:
        return []
    model_name = embedder.model_label()
    extra = custom_patterns.all_sources()
    for item in items:
        item.embed_text = embed_text_for(item, extra_patterns=extra)
        item.content_hash = content_hash(item.embed_text) if item.embed_text else ""
        item.embed_recipe = EMBED_RECIPE

    hashes = {item.content_hash: item.embed_text for item in items if item.content_hash}
    known = set(
        Embedding.objects.filter(content_hash__in=hashes, model_name=model_name).values_list("content_hash", flat=True)
    )
    missing = [h for h in hashes if h not in known]
    if missing:
        vectors = embedder.embed_texts([hashes[h] for h in missing])
        # Inserted in hash order: two workers storing overlapping texts take the
        # unique index's locks in one order, so they never deadlock. (The texts
        # are embedded in their own order: int8 scales depend on a call's texts.)
        new_rows = sorted(zip(missing, vectors), key=lambda pair: pair[0])
        Embedding.objects.bulk_create(
            [Embedding(content_hash=h, model_name=model_name, vector=v.tobytes()) for h, v in new_rows],
            ignore_conflicts=True,  # another worker may have embedded the same text meanwhile
        )
    embedding_ids = dict(
        Embedding.objects.filter(content_hash__in=hashes, model_name=model_name).values_list("content_hash", "id")
    )
    for item in items:
        item.embedding_id = embedding_ids.get(item.content_hash)
    return items


def items_record_failure(*, item_ids: list[int], error: str) -> None:
    """Count a failed attempt; an item out of attempts shows as failed, with the error."""
    waiting = FeedbackItem.objects.filter(id__in=item_ids, status=FeedbackItem.Status.RECEIVED)
    waiting.update(attempts=F("attempts") + 1, last_error=error[:2000])
    waiting.filter(attempts__gte=settings.PIPELINE_MAX_ATTEMPTS).update(
        status=FeedbackItem.Status.FAILED, status_changed_at=timezone.now()
    )
