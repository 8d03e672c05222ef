"""PostgreSQL drops the web server's connections mid-ingestion: a 2xx always means committed.

A real gunicorn (the project's gunicorn.conf.py) serves the test database
while client threads send signed single events and batches and a killer
thread runs pg_terminate_backend on the server's backends, found by the
application name the server connects with. Every answer must be a 2xx or a
JSON 5xx; each id answered 2xx must already be stored; a retry of every other
delivery then succeeds, and a redelivery of everything stores nothing new, so
the acknowledged ids and the stored ids are the same set, one row each.
"""

import json
import logging
import os
import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import httpx
import psycopg
import pytest
from django.db import connection
from django.db.models import Count

from feedback.models import FeedbackItem
from tests.factories import rating_event, signed_headers, source_make
from tests.servers import database_url, gunicorn_serving, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.slow]

CLIENTS = 4
SINGLES = 320
BATCHES = 24
BATCH_SIZE = 10
DEADLINE_SECONDS = 45  # for the fault phase and the retries together; the test stays under a minute


@dataclass
class Delivery:
    """One request as a sender would retry it: same webhook-id and body, fresh timestamp and signature."""

    msg_id: str
    body: bytes
    event_ids: list[str]
    answers: list[str] = field(default_factory=list)  # "202", "503", ... or "transport: <error>"

    @property
    def acked(self) -> bool:
        return bool(self.answers) and self.answers[-1].startswith("2")


def deliveries_make(prefix: str) -> list[Delivery]:
    deliveries = []
    for n in range(SINGLES):
        event = rating_event(id=f"{prefix}-s{n}", comment=f"terminated {n % 11}")
        deliveries.append(Delivery(event["id"], json.dumps(event).encode(), [event["id"]]))
    for b in range(BATCHES):
        events = [rating_event(id=f"{prefix}-b{b}-{n}", rating="up", comment=None) for n in range(BATCH_SIZE)]
        body = json.dumps({"events": events}).encode()
        deliveries.append(Delivery(f"msg_{uuid.uuid4().hex}", body, [event["id"] for event in events]))
    random.Random(7).shuffle(deliveries)
    return deliveries


def deliver(
    client: httpx.Client, url: str, secret: str, delivery: Delivery, problems: list[str]
) -> httpx.Response | None:
    """Send once, record the answer, and note any answer that breaks the contract."""
    headers = {"content-type": "application/json", **signed_headers(secret, delivery.body, msg_id=delivery.msg_id)}
    try:
        response = client.post(url, content=delivery.body, headers=headers)
    except httpx.HTTPError as exc:
        delivery.answers.append(f"transport: {type(exc).__name__}: {exc}")
        return None
    delivery.answers.append(str(response.status_code))
    if response.status_code >= 500:
        try:
            error = response.json().get("error")
        except ValueError:
            error = None
        if not (response.headers.get("content-type", "").startswith("application/json") and error):
            problems.append(f"{response.status_code} without a JSON error: {response.text[:200]!r}")
    elif response.is_success:
        answer = response.json()
        statuses = {result["status"] for result in answer["results"]}
        if response.status_code != 202 or not statuses <= {"accepted", "duplicate"}:
            problems.append(f"{response.status_code} {answer}")
    return response


class Killer(threading.Thread):
    """Terminates the server's backends every few milliseconds until stopped.

    It counts the backends it terminated by their state at that moment:
    ``active`` ones were inside a statement of a request; ``idle`` ones were
    between two statements of a request or between requests.
    """

    def __init__(self, dsn: str, application_name: str) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.application_name = application_name
        self.stop = threading.Event()
        self.states: Counter[str] = Counter()
        self.pids: set[int] = set()
        self.error: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(11)
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                while not self.stop.wait(rng.uniform(0.005, 0.04)):
                    rows = conn.execute(
                        "SELECT pid, coalesce(state, 'starting'), pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND application_name = %s AND pid <> pg_backend_pid()",
                        [self.application_name],
                    ).fetchall()
                    self.states.update(state for _, state, done in rows if done)
                    self.pids.update(pid for pid, _, done in rows if done)
        except BaseException as exc:  # reported by the test, not lost in a thread
            self.error = exc

    def backends_gone(self) -> bool:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            alive = {pid for (pid,) in conn.execute("SELECT pid FROM pg_stat_activity").fetchall()}
        return not alive & self.pids


@pytest.fixture
def web_server(tmp_path):
    if connection.vendor != "postgresql":
        if os.environ.get("CI"):
            pytest.fail("this test needs PostgreSQL (DATABASE_URL=postgres://...)")
        pytest.skip("this test needs PostgreSQL (DATABASE_URL=postgres://...)")
    application_name = f"pgterm-web-{uuid.uuid4().hex[:8]}"
    # PGAPPNAME: libpq names every connection of the server, and nothing else, so the killer spares the test's own.
    env = dict(os.environ, DATABASE_URL=database_url(), DATA_DIR=str(tmp_path / "data"), PGAPPNAME=application_name)
    log_path = tmp_path / "web.log"
    with gunicorn_serving(env=env, log_path=log_path, args=("--graceful-timeout", "5")) as base_url:
        yield base_url, application_name, log_path


def test_a_2xx_is_committed_and_a_retry_stores_each_event_once_while_postgres_kills_connections(web_server, caplog):
    caplog.set_level(logging.WARNING, logger="httpx")  # not a line per request
    base_url, application_name, log_path = web_server
    started = time.monotonic()
    deadline = started + DEADLINE_SECONDS
    source, secret = source_make()
    url = f"{base_url}/api/v1/sources/{source.slug}/events"
    deliveries = deliveries_make("pgt")
    all_ids = {event_id for delivery in deliveries for event_id in delivery.event_ids}
    problems: list[str] = []

    def send(share: list[Delivery]) -> None:
        with httpx.Client(timeout=10) as client:
            for delivery in share:
                if time.monotonic() > deadline:
                    return
                deliver(client, url, secret, delivery, problems)

    killer = Killer(database_url(), application_name)
    killer.start()
    try:
        clients = [threading.Thread(target=send, args=(deliveries[n::CLIENTS],)) for n in range(CLIENTS)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join()
    finally:
        killer.stop.set()
        killer.join(10)
    fault_seconds = time.monotonic() - started
    assert killer.error is None, repr(killer.error)
    assert all(delivery.answers for delivery in deliveries), "the fault phase ran past its deadline"

    first_answers = Counter(delivery.answers[0] for delivery in deliveries)
    broken = {answer: n for answer, n in first_answers.items() if answer[0] not in "25"}
    assert broken == {}, f"answers other than 2xx/5xx: {broken}\n{log_path.read_text()[-3000:]}"
    assert problems == [], problems[:5]
    failed = [delivery for delivery in deliveries if not delivery.acked]
    # The test proves something only if terminations hit requests in flight.
    assert killer.states["active"] > 0 and failed, f"no request failed; terminated: {dict(killer.states)}"

    acked = {event_id for delivery in deliveries if delivery.acked for event_id in delivery.event_ids}
    stored = set(FeedbackItem.objects.filter(source=source).values_list("external_id", flat=True))
    assert acked <= stored, f"acknowledged but not stored: {sorted(acked - stored)[:10]}"
    committed_anyway = {event_id for delivery in failed for event_id in delivery.event_ids} & stored

    # PostgreSQL is whole again. The server's threads still hold connections it
    # dropped; each one is replaced before use (CONN_HEALTH_CHECKS), so the
    # sender's first retry of each failed delivery succeeds.
    wait_for(killer.backends_gone, 10, "the terminated backends to exit")
    with httpx.Client(timeout=10) as client:
        for delivery in failed:
            while not delivery.acked and len(delivery.answers) < 4 and time.monotonic() < deadline:
                deliver(client, url, secret, delivery, problems)
    assert problems == [], problems[:5]
    not_acked = [(delivery.msg_id, delivery.answers) for delivery in deliveries if not delivery.acked]
    assert not_acked == [], f"still failing after retries: {not_acked[:5]}\n{log_path.read_text()[-3000:]}"
    every_answer = Counter(answer for delivery in deliveries for answer in delivery.answers)
    assert all(answer[0] in "25" for answer in every_answer), every_answer
    second_tries = [(delivery.msg_id, delivery.answers) for delivery in failed if len(delivery.answers) > 2]
    assert second_tries == [], f"a retry failed after PostgreSQL was back: {second_tries[:5]}"

    # A redelivery of everything stores nothing new.
    redelivered = [Delivery(delivery.msg_id, delivery.body, delivery.event_ids) for delivery in deliveries]
    with httpx.Client(timeout=10) as client:
        answers = [deliver(client, url, secret, delivery, problems) for delivery in redelivered]
    assert [answer and answer.status_code for answer in answers] == [202] * len(deliveries), problems[:5]
    assert all(result["status"] == "duplicate" for answer in answers for result in answer.json()["results"])

    stored = set(FeedbackItem.objects.filter(source=source).values_list("external_id", flat=True))
    acked = {event_id for delivery in deliveries if delivery.acked for event_id in delivery.event_ids}
    assert acked == stored == all_ids
    assert FeedbackItem.objects.filter(source=source).count() == len(all_ids)
    assert not FeedbackItem.objects.values("source", "external_id").annotate(n=Count("id")).filter(n__gt=1).exists()

    elapsed = time.monotonic() - started
    print(
        f"\n{len(deliveries)} deliveries ({len(all_ids)} events) in {fault_seconds:.1f}s under fault: "
        f"answers {dict(first_answers)}; backends terminated by state {dict(killer.states)}; "
        f"{len(committed_anyway)} events of failed deliveries committed anyway; {elapsed:.1f}s in all"
    )
    assert elapsed < 55
