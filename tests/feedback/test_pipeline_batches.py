"""Single events are embedded in batches: a wake-up takes whatever waits, safely under redelivery and concurrency.

The claims that depend on PostgreSQL's row locks (two batches at once take
disjoint items) skip on SQLite; the ones about coalescing wake-ups need the
Redis broker (the CI's). Tests with a real worker, killed or not, are in
tests/feedback/test_pipeline_batch_worker.py.
"""

import base64
import json
import os
import threading
import uuid

import numpy as np
import pytest
import redis
from django.db import connection
from django.utils import timezone

from config.celery import app as celery_app
from feedback import embedder, pipeline, tasks
from feedback.models import Embedding, FeedbackItem
from labeling.models import Assignment, Category
from tests.factories import celery_broker_use, post_signed, rating_event, source_make
from tests.servers import needs_postgresql

WORDS = "amber birch cedar delta ember fjord grove heron iris juniper kestrel lotus maple nectar onyx pine".split()


def distinct_text(n: int) -> str:
    # Numbers are masked before embedding, so texts differ in words.
    return f"It rewrote the {WORDS[n % 16]} {WORDS[n // 16 % 16]} module instead of the helper I named"


def waiting_items(source, count: int, *, start: int = 0) -> list[FeedbackItem]:
    """Items stored as ingestion stores them (``received``), without queueing anything."""
    return FeedbackItem.objects.bulk_create(
        FeedbackItem(source=source, external_id=f"w{n}", kind="rating", rating=-1, comment=distinct_text(n),
                     occurred_at=timezone.now(), receipt_id=uuid.uuid4())
        for n in range(start, start + count)
    )


@pytest.fixture
def eager():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


@pytest.fixture
def redis_broker():
    """The Redis broker of this run, its queues empty and no wake-up marked; skips without one."""
    url = celery_app.conf.broker_url or ""
    if not url.startswith("redis://"):
        if os.environ.get("CI"):
            pytest.fail("this test needs the Redis broker (REDIS_URL=redis://...)")
        pytest.skip("coalescing wake-ups needs the Redis broker (REDIS_URL=redis://...)")
    celery_app.control.purge()
    pipeline.items_wake_clear()
    client = redis.Redis.from_url(url)
    yield client
    celery_app.control.purge()
    pipeline.items_wake_clear()


def queued_wake_ups(client: redis.Redis) -> int:
    """embed_waiting messages waiting in the embed queue (kombu keeps one Redis list per queue)."""
    return sum(json.loads(raw)["headers"]["task"] == "feedback.tasks.embed_waiting" for raw in client.lrange("embed", 0, -1))


class HeldEmbedding:
    """Wraps the model so that the first `hold` calls wait, inside the batch, until released."""

    def __init__(self, monkeypatch, hold: int = 1):
        self.real = embedder.embed_texts
        self.inside = threading.Semaphore(0)
        self.release = threading.Event()
        self.hold = hold
        self.lock = threading.Lock()
        monkeypatch.setattr(embedder, "embed_texts", self)

    def __call__(self, texts, **kwargs):
        with self.lock:
            held = self.hold > 0
            self.hold -= 1
        if held:
            self.inside.release()
            assert self.release.wait(60), "the test never released the batch"
        return self.real(texts, **kwargs)

    def wait_inside(self, count: int = 1) -> None:
        for _ in range(count):
            assert self.inside.acquire(timeout=60), "no batch reached the model"


def in_thread(target, results: dict, key: str) -> threading.Thread:
    def run():
        try:
            results[key] = target()
        except BaseException as exc:  # handed to the test, which raises it
            results[key] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


# --- One batch for many waiting items ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_wake_up_takes_every_waiting_item_in_one_batch_and_assigns_them(eager, monkeypatch):
    source, _ = source_make()
    items = waiting_items(source, 40)
    calls = []
    real = embedder.embed_texts
    monkeypatch.setattr(embedder, "embed_texts", lambda texts, **kw: calls.append(len(texts)) or real(texts, **kw))
    vector = np.zeros(384, dtype=np.float32)
    vector[0] = 1.0
    Category.objects.create(name="Anything", centroid=vector.tobytes())

    assert tasks.embed_waiting.apply(kwargs={"gather": False}).get() == 40

    assert calls == [40]  # one model call for the batch
    assert FeedbackItem.objects.filter(id__in=[i.id for i in items], status=FeedbackItem.Status.RECEIVED).count() == 0
    # Assignment followed embedding for every item (a category, or the unsorted bucket).
    assert Assignment.objects.filter(item__in=items).count() == 40


@pytest.mark.django_db
def test_a_wake_up_takes_at_most_a_batch_oldest_first(settings):
    source, _ = source_make()
    items = waiting_items(source, 12)
    batch = pipeline.items_embed_waiting(limit=5)
    assert batch.claimed_ids == [item.id for item in items[:5]]
    assert FeedbackItem.objects.filter(status=FeedbackItem.Status.EMBEDDED).count() == 5


@pytest.mark.django_db
def test_a_batch_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        pipeline.items_embed_waiting(limit=0)


# --- Redelivery and concurrency -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_same_wake_up_delivered_twice_embeds_each_item_once(eager):
    source, _ = source_make()
    items = waiting_items(source, 20)
    assert tasks.embed_waiting.apply(kwargs={"gather": False}).get() == 20
    before = {i.id: (i.status, i.status_changed_at, i.embedding_id) for i in FeedbackItem.objects.filter(source=source)}

    assert tasks.embed_waiting.apply(kwargs={"gather": False}).get() == 0

    after = {i.id: (i.status, i.status_changed_at, i.embedding_id) for i in FeedbackItem.objects.filter(source=source)}
    assert after == before
    assert Embedding.objects.count() == 20
    assert len({embedding_id for _, _, embedding_id in after.values()}) == len(items)


@pytest.mark.django_db(transaction=True)
def test_two_batches_at_once_take_disjoint_items_and_embed_each_once(monkeypatch):
    needs_postgresql()
    source, _ = source_make()
    items = waiting_items(source, 16)
    # Both batches wait inside the model at the same time: had the second
    # wanted the first one's rows it would wait for its lock and never get here.
    held = HeldEmbedding(monkeypatch, hold=2)
    results: dict = {}
    threads = [in_thread(lambda: pipeline.items_embed_waiting(limit=8), results, key) for key in "ab"]
    held.wait_inside(2)
    held.release.set()
    for thread in threads:
        thread.join(60)

    a, b = results["a"], results["b"]
    assert not isinstance(a, BaseException) and not isinstance(b, BaseException), (a, b)
    assert len(a.claimed_ids) == len(b.claimed_ids) == 8
    assert set(a.claimed_ids).isdisjoint(b.claimed_ids)
    assert set(a.claimed_ids) | set(b.claimed_ids) == {item.id for item in items}
    assert FeedbackItem.objects.filter(source=source, status=FeedbackItem.Status.EMBEDDED).count() == 16
    assert Embedding.objects.count() == 16


@pytest.mark.django_db(transaction=True)
def test_a_redelivered_task_skips_the_items_a_running_batch_holds_without_waiting(monkeypatch):
    needs_postgresql()
    source, _ = source_make()
    items = waiting_items(source, 10)
    held = HeldEmbedding(monkeypatch)
    results: dict = {}
    thread = in_thread(lambda: pipeline.items_embed_waiting(limit=100), results, "batch")
    held.wait_inside()

    # The same items by id (a redelivered embed_items, the sweeper's) and a second wake-up: nothing to take.
    assert pipeline.items_embed(item_ids=[item.id for item in items]) == []
    assert pipeline.items_embed_waiting(limit=100).claimed_ids == []

    held.release.set()
    thread.join(60)
    assert sorted(results["batch"].embedded_ids) == sorted(item.id for item in items)
    assert Embedding.objects.count() == 10


@pytest.mark.django_db(transaction=True)
def test_a_batch_that_fails_is_embedded_one_by_one_and_the_bad_item_is_left_to_its_retries(monkeypatch):
    source, _ = source_make()
    items = waiting_items(source, 6)
    poison = FeedbackItem.objects.create(source=source, external_id="poison", kind="rating", rating=-1,
                                         comment="the poison text breaks the model", occurred_at=timezone.now(),
                                         receipt_id=uuid.uuid4())
    real = embedder.embed_texts
    calls = []

    def breaks_on_poison(texts, **kwargs):
        calls.append(len(texts))
        if any("poison" in text for text in texts):
            raise RuntimeError("model crashed")
        return real(texts, **kwargs)

    monkeypatch.setattr(embedder, "embed_texts", breaks_on_poison)
    queued = []
    monkeypatch.setattr(tasks.embed_items, "apply_async", lambda args, **kw: queued.append((args, kw.get("countdown"))))

    batch = pipeline.items_embed_waiting(limit=100)

    assert sorted(batch.embedded_ids) == sorted(item.id for item in items)
    poison.refresh_from_db()
    assert poison.status == FeedbackItem.Status.RECEIVED and poison.attempts == 1
    assert poison.last_error == "RuntimeError: model crashed"
    assert queued == [([[poison.id]], tasks.RETRY_FIRST_SECONDS)]
    # The next wake-up leaves it to its retries instead of failing a batch again.
    calls.clear()
    assert pipeline.items_embed_waiting(limit=100).claimed_ids == []
    assert calls == []


# --- Coalescing wake-ups (Redis broker) ------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_single_events_queue_one_wake_up_until_a_worker_starts_it(client, redis_broker):
    source, secret = source_make()
    for n in range(5):
        assert post_signed(client, source, secret, rating_event(id=f"one-{n}", comment=distinct_text(n))).status_code == 202
    assert queued_wake_ups(redis_broker) == 1

    # The worker that takes it clears the mark first, then claims all five.
    pipeline.items_wake_clear()
    assert len(pipeline.items_embed_waiting(limit=256).claimed_ids) == 5
    assert post_signed(client, source, secret, rating_event(id="after", comment=distinct_text(9))).status_code == 202
    assert queued_wake_ups(redis_broker) == 2


@pytest.mark.django_db(transaction=True)
def test_an_event_that_arrives_while_a_batch_runs_gets_a_wake_up_and_is_not_lost(client, redis_broker, monkeypatch):
    source, secret = source_make()
    items = waiting_items(source, 8)
    held = HeldEmbedding(monkeypatch)
    results: dict = {}
    # A worker's task: clears the mark, claims the eight, and is inside the model.
    thread = in_thread(lambda: tasks.embed_waiting.run(gather=False), results, "running")
    held.wait_inside()

    response = post_signed(client, source, secret, rating_event(id="meanwhile", comment=distinct_text(20)))
    assert response.status_code == 202
    assert queued_wake_ups(redis_broker) == 1  # the running batch cannot see it, so it woke another

    held.release.set()
    thread.join(60)
    assert results["running"] == 8
    assert FeedbackItem.objects.get(external_id="meanwhile").status == FeedbackItem.Status.RECEIVED
    # The worker that takes the new wake-up embeds it.
    assert tasks.embed_waiting.run(gather=False) == 1
    assert FeedbackItem.objects.filter(source=source, status=FeedbackItem.Status.RECEIVED).count() == 0
    assert len(items) + 1 == FeedbackItem.objects.filter(source=source).count()


@pytest.mark.django_db(transaction=True)
def test_a_full_batch_wakes_a_peer_for_the_rest_before_embedding(redis_broker, monkeypatch):
    needs_postgresql()
    source, _ = source_make()
    waiting_items(source, 7)
    held = HeldEmbedding(monkeypatch)
    results: dict = {}
    pipeline.items_wake_clear()
    thread = in_thread(lambda: pipeline.items_embed_waiting(limit=4), results, "first")
    held.wait_inside()
    assert queued_wake_ups(redis_broker) == 1  # another worker can start on the other three now
    assert len(pipeline.items_embed_waiting(limit=4).claimed_ids) == 3
    held.release.set()
    thread.join(60)
    assert len(results["first"].claimed_ids) == 4


@pytest.mark.django_db(transaction=True)
def test_after_a_broker_outage_the_next_event_queues_a_wake_up_again(client, redis_broker, caplog):
    source, secret = source_make()
    saved = celery_app.conf.broker_url
    celery_broker_use("redis://127.0.0.1:1/0")
    try:
        assert post_signed(client, source, secret, rating_event(id="during", comment=distinct_text(1))).status_code == 202
    finally:
        celery_broker_use(saved)
    assert "broker unavailable; 1 items wait for the sweeper" in caplog.text
    assert post_signed(client, source, secret, rating_event(id="after", comment=distinct_text(2))).status_code == 202
    assert queued_wake_ups(redis_broker) == 1
    # That wake-up's batch takes the item the outage left waiting too.
    pipeline.items_wake_clear()
    assert len(pipeline.items_embed_waiting(limit=256).claimed_ids) == 2


@pytest.mark.django_db(transaction=True)
def test_a_webhook_batch_still_queues_its_ids_in_batches(client, redis_broker):
    source, secret = source_make()
    events = [rating_event(id=f"b{n}", comment=distinct_text(n)) for n in range(300)]
    assert post_signed(client, source, secret, {"events": events}).status_code == 202
    messages = [json.loads(raw) for raw in redis_broker.lrange("embed", 0, -1)]
    assert [m["headers"]["task"] for m in messages] == ["feedback.tasks.embed_items"] * 2


def test_a_full_batch_is_queued_as_embed_messages_whose_header_names_the_ids_briefly(redis_broker):
    # Celery would put a repr of every id in the header, for monitors: a third of publishing's cost.
    ids = list(range(1_000, 1_600))
    assert pipeline.items_enqueue(item_ids=ids)
    messages = [json.loads(raw) for raw in reversed(redis_broker.lrange("embed", 0, -1))]
    embeds = [m for m in messages if m["headers"]["task"] == "feedback.tasks.embed_items"]
    assert [m["headers"]["argsrepr"] for m in embeds] == [
        "[256 item ids: 1000..1255]",
        "[256 item ids: 1256..1511]",
        "[88 item ids: 1512..1599]",
    ]
    bodies = [json.loads(base64.b64decode(m["body"])) for m in embeds]
    assert [item_id for args, _, _ in bodies for item_id in args[0]] == ids
