"""A real Celery worker takes single events in batches: killed mid-batch it loses nothing, and nothing is done twice.

The worker is started as in production (``celery -A config worker -Q
embed,default``) against the test database and broker; no beat runs, so
what is processed was taken by a wake-up, a redelivery or the sweeper the
test calls. On PostgreSQL the test also sees the batch's row locks. Batches
are smaller than PIPELINE_BATCH_SIZE, so no batch wakes a peer on its own.
The Redis broker is needed: it hands a killed worker's task back (the
file-system broker has no acknowledgements).
"""

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from config.celery import app as celery_app
from feedback import pipeline
from feedback.models import Embedding, FeedbackItem
from tests.factories import post_signed, rating_event, source_make
from tests.servers import ROOT, database_url, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.slow]

WORDS = "amber birch cedar delta ember fjord grove heron iris juniper kestrel lotus maple nectar onyx pine".split()


def long_text(n: int) -> str:
    # Distinct in words (numbers are masked), and long enough that a batch of them takes seconds.
    return (f"Report {WORDS[n % 16]} {WORDS[n // 16 % 16]}: the agent rewrote the parser although I asked for a "
            "change in the helper; " + "it then ran the whole test suite again and again without reading the "
            "failures. " * 6)


def waiting_items(source, count: int) -> list[int]:
    items = FeedbackItem.objects.bulk_create(
        FeedbackItem(source=source, external_id=f"k{n}", kind="report", comment=long_text(n),
                     occurred_at=timezone.now(), receipt_id=uuid.uuid4())
        for n in range(count)
    )
    return [item.id for item in items]


def children_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def locked_by_others(item_ids: list[int]) -> int:
    """How many of the items another transaction holds (PostgreSQL): those SKIP LOCKED passes over."""
    with connection.cursor() as cursor:
        cursor.execute("BEGIN")
        cursor.execute(
            "SELECT count(*) FROM (SELECT id FROM feedback_feedbackitem WHERE id = ANY(%s) FOR UPDATE SKIP LOCKED) free",
            [item_ids],
        )
        free = cursor.fetchone()[0]
        cursor.execute("ROLLBACK")
    return len(item_ids) - free


def embedded(item_ids: list[int]) -> int:
    return FeedbackItem.objects.filter(id__in=item_ids, status=FeedbackItem.Status.EMBEDDED).count()


class Worker:
    def __init__(self, log_path: Path):
        self.log_path = log_path
        env = dict(os.environ, DATABASE_URL=database_url(), DATA_DIR=str(settings.DATA_DIR))
        if settings.REDIS_URL:
            env["REDIS_URL"] = settings.REDIS_URL
        with open(log_path, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "embed,default", "-c", "1",
                 "--pool", "prefork", "--loglevel=INFO", "-n", f"batchtest-{uuid.uuid4().hex[:6]}@%h"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            )
        wait_for(lambda: "ready." in self.log(), 60, "the worker to start")

    def log(self) -> str:
        return self.log_path.read_text()

    def wait_batch_started(self) -> None:
        wait_for(lambda: "embed_waiting" in self.log() and children_of(self.process.pid), 60, "the batch to start")

    def kill_pool(self) -> None:
        for child in children_of(self.process.pid):
            os.kill(child, signal.SIGKILL)

    def kill_all(self) -> None:
        children = children_of(self.process.pid)
        self.process.kill()
        for child in children:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()


BATCH = 200  # below PIPELINE_BATCH_SIZE (256)


@pytest.fixture
def start_worker(tmp_path):
    if not (celery_app.conf.broker_url or "").startswith("redis://"):
        if os.environ.get("CI"):
            pytest.fail("this test needs the Redis broker (REDIS_URL=redis://...)")
        pytest.skip("this test needs the Redis broker (REDIS_URL=redis://...)")
    celery_app.control.purge()
    pipeline.items_wake_clear()
    started: list[Worker] = []

    def start() -> Worker:
        worker = Worker(tmp_path / f"worker-{len(started)}.log")
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
    celery_app.control.purge()


def assert_each_embedded_once(item_ids: list[int]) -> None:
    assert FeedbackItem.objects.filter(id__in=item_ids, embedding__isnull=True).count() == 0
    assert Embedding.objects.count() == len(item_ids)
    assert len(set(FeedbackItem.objects.filter(id__in=item_ids).values_list("embedding_id", flat=True))) == len(item_ids)


def test_a_worker_process_killed_mid_batch_leaves_the_batch_to_its_redelivery(start_worker):
    source, _ = source_make()
    item_ids = waiting_items(source, BATCH)
    worker = start_worker()

    assert pipeline.items_wake(waiting=len(item_ids))
    worker.wait_batch_started()
    time.sleep(1.0)  # inside the batch: embedding 200 paragraphs takes longer than this
    assert embedded(item_ids) == 0
    if connection.vendor == "postgresql":
        assert locked_by_others(item_ids) == BATCH  # the batch holds every row it took
    worker.kill_pool()

    wait_for(lambda: embedded(item_ids) == BATCH, 180, "the batch to be redone")
    log = worker.log()
    assert "WorkerLostError" in log or "SIGKILL" in log, log[-3000:]
    assert_each_embedded_once(item_ids)


def killed_mid_batch(start_worker) -> list[int]:
    """A batch of waiting items whose worker was killed, every process of it, while embedding them."""
    source, _ = source_make()
    item_ids = waiting_items(source, BATCH)
    worker = start_worker()
    assert pipeline.items_wake(waiting=len(item_ids))
    worker.wait_batch_started()
    time.sleep(1.0)
    worker.kill_all()  # no process is left to hand the task back: it is not redelivered for an hour
    if connection.vendor == "postgresql":
        wait_for(lambda: locked_by_others(item_ids) == 0, 30, "the killed batch's locks to go with its connection")
    return item_ids


def test_a_whole_worker_killed_mid_batch_leaves_its_items_to_the_next_batch(client, start_worker):
    item_ids = killed_mid_batch(start_worker)

    assert FeedbackItem.objects.filter(id__in=item_ids, status=FeedbackItem.Status.RECEIVED).count() == BATCH
    assert Embedding.objects.count() == 0  # the batch wrote nothing that survived it

    start_worker()
    # The next single event: its commit wakes a worker (the killed task had cleared the mark), whose batch takes all.
    later, secret = source_make("later")
    assert post_signed(client, later, secret, rating_event(id="later", comment=long_text(999))).status_code == 202
    everything = [*item_ids, FeedbackItem.objects.get(external_id="later").id]
    wait_for(lambda: embedded(everything) == BATCH + 1, 180, "the next batch to take the items")
    assert_each_embedded_once(everything)


def test_a_whole_worker_killed_mid_batch_leaves_its_items_to_the_sweeper(start_worker):
    item_ids = killed_mid_batch(start_worker)

    start_worker()
    # Beat runs the sweeper every minute; here the test runs it, as a minute later.
    assert pipeline.items_sweep_unprocessed(now=timezone.now() + timedelta(minutes=5)) == BATCH
    wait_for(lambda: embedded(item_ids) == BATCH, 180, "the swept items to be embedded")
    assert_each_embedded_once(item_ids)


def test_single_events_that_arrive_while_a_batch_runs_are_all_processed_without_the_sweeper(client, start_worker):
    source, secret = source_make()
    item_ids = waiting_items(source, BATCH)
    worker = start_worker()
    assert pipeline.items_wake(waiting=len(item_ids))
    worker.wait_batch_started()
    # The task gathers for a moment, clears the wake-up mark and claims: events posted before the
    # mark is cleared would join the first batch, so post only after (they need a wake-up of their own).
    wake = pipeline._wake_client()
    wait_for(lambda: not wake.exists(pipeline.WAKE_KEY), 30, "the first batch to stop gathering")

    statuses = [
        post_signed(client, source, secret, rating_event(id=f"live-{n}", comment=long_text(BATCH + n))).status_code
        for n in range(30)
    ]
    assert statuses == [202] * 30
    assert embedded(item_ids) < BATCH, "the events should arrive while the first batch runs"

    everything = list(FeedbackItem.objects.filter(source=source).values_list("id", flat=True))
    assert len(everything) == BATCH + 30
    wait_for(lambda: embedded(everything) == BATCH + 30, 180, "every item, the late ones included, to be embedded")
    assert_each_embedded_once(everything)

    def tasks(state: str) -> set[str]:
        return set(re.findall(rf"feedback\.tasks\.embed_waiting\[([0-9a-f-]+)\] {state}", worker.log()))

    # A task marks its items embedded before the worker logs that it succeeded: wait for those lines.
    wait_for(lambda: tasks("received") <= tasks("succeeded"), 30, "every embedding task started to finish")
    # The thirty arrivals were coalesced: far fewer batches than events.
    batches = tasks("succeeded")
    assert 2 <= len(batches) <= 10, worker.log()[-3000:]
