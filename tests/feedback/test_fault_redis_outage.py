"""Redis stops while signed events arrive: every event is acknowledged, kept and later processed.

A private redis-server on a free port plays the broker, with a real Celery
worker and beat against it; the test stops it, sends 500 events, starts it
again and waits for the sweeper to hand every waiting item to the worker.
"""

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from config.celery import app as celery_app
from feedback.models import FeedbackItem
from tests.factories import celery_broker_use, post_signed, rating_event, source_make
from tests.servers import ROOT, database_url, free_port, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.slow]

REDIS = shutil.which("redis-server")


def redis_start(port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0, 10, "redis to listen")
    return process


@pytest.fixture
def private_redis():
    if REDIS is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed")
        pytest.skip("redis-server is not installed")
    port = free_port()
    saved = celery_app.conf.broker_url, celery_app.conf.broker_transport_options
    state = {"port": port, "process": redis_start(port)}
    # The options production uses with Redis (config/settings.py), whatever broker this run has.
    celery_broker_use(f"redis://127.0.0.1:{port}/0", {"max_retries": 1, "interval_start": 0, "interval_step": 0.2,
                                              "interval_max": 0.2, "socket_connect_timeout": 2})
    yield state
    state["process"].terminate()
    state["process"].wait(10)
    celery_broker_use(*saved)


def celery(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "celery", "-A", "config", *args],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def test_events_sent_while_redis_is_down_are_kept_and_processed_after_it_returns(private_redis, client, tmp_path):
    port = private_redis["port"]
    env = dict(
        os.environ, DATABASE_URL=database_url(), DATA_DIR=str(settings.DATA_DIR), REDIS_URL=f"redis://127.0.0.1:{port}/0",
        SWEEPER_INTERVAL_SECONDS="3", SWEEPER_GRACE_SECONDS="2",
    )
    worker = celery(["worker", "-Q", "embed,default", "-c", "1", "--loglevel=INFO", "-n", f"outage-{uuid.uuid4().hex[:6]}@%h"],
                    env, tmp_path / "worker.log")
    beat = celery(["beat", "-S", "celery.beat:PersistentScheduler", "--schedule", str(tmp_path / "beat"), "--loglevel=INFO"],
                  env, tmp_path / "beat.log")
    try:
        wait_for(lambda: "ready." in (tmp_path / "worker.log").read_text(), 60, "the worker to start")
        private_redis["process"].terminate()
        private_redis["process"].wait(10)

        source, secret = source_make()
        statuses = [post_signed(client, source, secret, rating_event(id=f"out-{n}", comment=f"outage {n % 7}")).status_code
                    for n in range(500)]
        assert statuses == [202] * 500
        assert FeedbackItem.objects.filter(status=FeedbackItem.Status.RECEIVED).count() == 500

        private_redis["process"] = redis_start(port)
        started = time.monotonic()
        wait_for(lambda: FeedbackItem.objects.filter(status=FeedbackItem.Status.EMBEDDED).count() == 500, 150,
                 "every item to be processed after Redis returned")
        print(f"all 500 processed {time.monotonic() - started:.1f}s after Redis returned")
        assert FeedbackItem.objects.filter(embedding__isnull=True).count() == 0
    finally:
        for process in (beat, worker):
            process.terminate()
        for process in (beat, worker):
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
