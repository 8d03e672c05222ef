"""A real Celery worker, killed with SIGKILL in the middle of an embedding batch, loses nothing."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from config.celery import app as celery_app
from feedback.models import Embedding, FeedbackItem
from feedback.tasks import embed_items
from tests.factories import source_make
from tests.servers import ROOT, database_url, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.slow]

def children_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


@pytest.fixture
def worker(tmp_path):
    celery_app.control.purge()
    log_path = tmp_path / "worker.log"
    env = dict(os.environ, DATABASE_URL=database_url(), DATA_DIR=str(settings.DATA_DIR))
    if settings.REDIS_URL:
        env["REDIS_URL"] = settings.REDIS_URL
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "embed,default", "-c", "1",
             "--pool", "prefork", "--loglevel=INFO", "-n", f"killtest-{uuid.uuid4().hex[:6]}@%h"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    try:
        yield process, log_path
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def test_a_worker_killed_mid_batch_loses_nothing_and_embeds_each_item_once(worker):
    process, log_path = worker
    source, _ = source_make()
    # 256 distinct texts in words: numbers and file names are masked before embedding.
    words = "amber birch cedar delta ember fjord grove heron iris juniper kestrel lotus maple nectar onyx pine".split()
    texts = [
        f"Report {words[i % 16]} {words[i // 16]}: the agent rewrote the parser although I asked for a change "
        "in the helper; " + "it then ran the whole test suite again and again without reading the failures. " * 6
        for i in range(256)
    ]
    items = FeedbackItem.objects.bulk_create(
        FeedbackItem(source=source, external_id=f"k{i}", kind="report", comment=text,
                     occurred_at=timezone.now(), receipt_id=uuid.uuid4())
        for i, text in enumerate(texts)
    )
    item_ids = [item.id for item in items]
    wait_for(lambda: "ready." in log_path.read_text(), 60, "the worker to start")

    embed_items.delay(item_ids)
    wait_for(lambda: "embed_items" in log_path.read_text() and children_of(process.pid), 60, "the task to start")
    time.sleep(1.0)  # inside the batch: loading the model and embedding take longer than this
    assert FeedbackItem.objects.filter(status=FeedbackItem.Status.EMBEDDED).count() == 0
    for child in children_of(process.pid):
        os.kill(child, signal.SIGKILL)

    wait_for(
        lambda: FeedbackItem.objects.filter(id__in=item_ids, status=FeedbackItem.Status.EMBEDDED).count() == 256,
        180,
        "the batch to be redone",
    )
    log = log_path.read_text()
    assert "WorkerLostError" in log or "SIGKILL" in log, log[-3000:]
    assert FeedbackItem.objects.filter(id__in=item_ids, embedding__isnull=True).count() == 0
    assert Embedding.objects.count() == 256
    assert len(set(FeedbackItem.objects.filter(id__in=item_ids).values_list("embedding_id", flat=True))) == 256
