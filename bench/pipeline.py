#!/usr/bin/env python
"""Pipeline benchmark: sustained signed single events with real Celery workers, until every item is processed.

    python bench/pipeline.py                    # 60 s of load, 8 connections: the baseline, then 1 and 2 processes
    python bench/pipeline.py --seconds 20       # a quicker run

What it does, in order:

1. creates a fresh PostgreSQL database (the one ``--database-url`` names,
   dropped first if it exists), uses the Redis db of ``--redis-url`` as the
   broker (flushed before each run and at the end), migrates, loads the demo
   corpus and clusters it (``manage.py demo_load --process``), so there are
   categories to assign into, and creates one source;
2. starts ``gunicorn config.wsgi -w 2`` on a free 127.0.0.1 port
   (bench/ingest.py's runner), once per mode: the baseline first
   (``--no-baseline`` skips it) with ``PIPELINE_COALESCE_SINGLE_EVENTS=0``,
   so each event queues a task with its own id, as before batching, with
   one worker process; then batching, once for each count of worker
   processes in ``--workers`` (default 1, then 2);
3. for each run: starts that many ``celery -A config worker -Q
   default,embed -c 1`` processes (no beat: no sweeper helps), warms them up with a signed batch
   and a few single events and waits until those are processed (not timed);
   then for ``--seconds`` sends signed single-event webhooks over
   ``--concurrency`` keep-alive connections (bench/ingest.py's raw-socket
   client; each event has its own short text of about 12 words, so nothing
   is spared by equal texts sharing a vector), and waits until every
   acknowledged item is done; then, with ``--backlog-seconds`` (default 10;
   0 skips it), the pipeline's own pace: the workers stop taking embedding
   work (``celery control cancel_consumer embed``), events arrive for that
   long, the workers take work again (``add_consumer``), and the backlog is
   timed until it is done; then stops the workers;
4. prints one table: the ingestion rate beside, for each run, the items left
   waiting when the load ended, the time from the end of the load until
   every acknowledged item was done, the items per second through the
   pipeline, the backlog's drain rate, and the batches the workers took and
   their time per task (from their logs);
5. stops gunicorn and the workers, drops the database and flushes the Redis
   db, even on error.

"Done": the pipeline has processed the item: it is no longer ``received``
(``embedded``, ``assigned`` or ``failed``), and assignment was attempted:
a thumbs-down or report with a vector has its assignment row (a category,
or the unsorted bucket of an area). Thumbs-up and items without words are
done once embedded; they are never assigned.

Every request goes to 127.0.0.1; a global timeout (``--timeout``) bounds the
whole run. The machine's load average is printed, since other work on the
same cores slows the workers and the web server alike.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import (
    ingest,  # noqa: E402  (the raw-socket load generator, the gunicorn runner, the environment)
)

# Each event's comment is one of these combinations, so the texts are distinct and about 12 words long.
VERBS = ("rewrote", "deleted", "renamed", "skipped", "ignored", "duplicated", "reverted", "mocked", "disabled",
         "moved", "reformatted", "truncated", "inlined", "replaced", "commented", "patched", "split", "merged",
         "stubbed", "wrapped")
ADJECTIVES = ("wrong", "old", "shared", "generated", "vendored", "legacy", "nested", "unused", "private", "public",
              "async", "cached", "flaky", "broken", "large", "small", "empty", "default", "global", "local")
NOUNS = ("parser", "config loader", "login form", "test suite", "migration", "retry loop", "logger", "router",
         "cache layer", "schema", "queue worker", "theme", "date helper", "upload handler", "search index",
         "payment client", "session store", "build script", "error page", "rate limiter", "importer", "exporter",
         "scheduler", "mailer", "dashboard")
PLACES = ("helper", "model", "view", "fixture", "template", "controller", "service", "adapter", "client", "module",
          "command", "plugin", "handler", "wrapper", "component", "endpoint", "job", "hook", "policy", "filter",
          "mapper", "reader", "writer", "factory", "registry")


def comment_for(n: int) -> str:
    """A distinct short comment for event n (mixed radix over the word lists)."""
    n, verb = divmod(n, len(VERBS))
    n, adjective = divmod(n, len(ADJECTIVES))
    n, noun = divmod(n, len(NOUNS))
    place = n % len(PLACES)
    return (f"It {VERBS[verb]} the {ADJECTIVES[adjective]} {NOUNS[noun]} instead of the {PLACES[place]} "
            "I asked it to change.")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long each run sends events (>= 5)")
    parser.add_argument("--concurrency", type=int, default=8, help="client connections")
    parser.add_argument("--workers", default="1,2", help="worker process counts to run, in order (e.g. 1,2)")
    parser.add_argument("-w", "--web-workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=1, help="gunicorn threads per worker (above 1: gthread)")
    parser.add_argument("--no-baseline", dest="baseline", action="store_false",
                        help="skip the baseline run (one worker, a task per event)")
    parser.add_argument("--backlog-seconds", type=float, default=10.0,
                        help="events sent while the workers take no embedding work, then drained (0 skips it)")
    parser.add_argument("--drain-timeout", type=float, default=900.0,
                        help="how long to wait after the load for every item to be done")
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/bench_pipeline",
        help="PostgreSQL database to create, fill and drop",
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13", help="broker (its db is flushed)")
    parser.add_argument("--demo-count", type=int, default=2400, help="demo signals to load and cluster first")
    parser.add_argument("--timeout", type=int, default=3600, help="global timeout in seconds")
    args = parser.parse_args(argv)
    if args.seconds < 5:
        parser.error("--seconds must be at least 5")
    if not 1 <= args.concurrency <= 64:
        parser.error("--concurrency must be 1..64")
    try:
        args.worker_counts = [int(part) for part in args.workers.split(",")]
    except ValueError:
        parser.error("--workers must be a comma-separated list of numbers, e.g. 1,2")
    if not args.worker_counts or not all(1 <= count <= 16 for count in args.worker_counts):
        parser.error("--workers: each count must be 1..16")
    url = urlparse(args.database_url)
    if url.scheme not in ("postgres", "postgresql") or not re.fullmatch(r"/[a-z_][a-z0-9_]{0,62}", url.path or ""):
        parser.error("--database-url must be postgres://user@host:port/name with a plain lower-case name")
    if not re.fullmatch(r"rediss?://[^/]+/\d+", args.redis_url):
        parser.error("--redis-url must name a database number, e.g. redis://127.0.0.1:6379/13")
    return args


# --- Database and broker ------------------------------------------------------------------


# The maintenance connection and the broker flush of the other benches (bench/ingest.py).
pg_admin = ingest.pg_admin_at
redis_flush = ingest.redis_flush


def demo_load(env: dict[str, str], count: int) -> None:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "manage.py", "demo_load", "--process", "--count", str(count)],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=1800,
    )
    if done.returncode != 0:
        raise ingest.BenchFailure(f"manage.py demo_load failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    from labeling.models import Category

    categories = Category.objects.count()
    if not categories:
        raise ingest.BenchFailure(f"demo_load made no categories:\n{done.stdout[-2000:]}")
    print(f"  demo corpus loaded and clustered in {time.perf_counter() - started:.0f} s: {categories} categories")


# --- Celery workers -----------------------------------------------------------------------------


class Workers:
    """`count` worker processes, each ``celery worker -Q default,embed -c 1``, each in its own process group."""

    def __init__(self, *, count: int, env: dict[str, str], log_dir: Path, label: str) -> None:
        self.logs = [log_dir / f"worker-{label}-{i}.log" for i in range(count)]
        self.names = [f"bench-pipeline-{label}-{i}@{socket.gethostname()}" for i in range(count)]
        self.procs: list[subprocess.Popen] = []
        for name, log_path in zip(self.names, self.logs):
            with open(log_path, "wb") as log:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "default,embed", "-c", "1",
                     "--pool", "prefork", "--loglevel=INFO", "--without-gossip", "--without-mingle", "-n", name],
                    cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,  # stopped as one group, by its id, at the end
                ))

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc, log in zip(self.procs, self.logs):
                if proc.poll() is not None:
                    raise ingest.BenchFailure(f"a worker exited with {proc.returncode}:\n{tail(log)}")
            if all("ready." in log.read_text(errors="replace") for log in self.logs):
                return
            time.sleep(0.3)
        raise ingest.BenchFailure(f"the workers did not start within {timeout:.0f} s:\n{tail(self.logs[0])}")

    def embed_consumers(self, *, on: bool) -> None:
        """Make every worker take (or stop taking) work from the ``embed`` queue; assignment goes on meanwhile."""
        from config.celery import app

        method = app.control.add_consumer if on else app.control.cancel_consumer
        replies = method("embed", destination=self.names, reply=True, timeout=10)
        if len(replies) != len(self.names):
            raise ingest.BenchFailure(f"{'add' if on else 'cancel'}_consumer: {len(replies)} of {len(self.names)} "
                                      f"workers answered: {replies}")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with _no_such_process():
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with _no_such_process():
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    def task_times(self) -> dict[str, TaskTimes]:
        """Per task name: how many ran, their seconds and the items they returned, from the worker logs."""
        times: dict[str, TaskTimes] = {}
        for log in self.logs:
            for found in TASK_LINE.finditer(log.read_text(errors="replace")):
                entry = times.setdefault(found["name"].rsplit(".", 1)[-1], TaskTimes())
                entry.count += 1
                entry.seconds += float(found["seconds"])
                entry.items += int(found["n"]) if found["n"] else 0
                entry.nonzero += 1 if found["n"] and int(found["n"]) else 0
        return times


TASK_LINE = re.compile(r"Task (?P<name>[\w.]+)\[[^\]]+\] succeeded in (?P<seconds>[\d.e-]+)s: (?P<n>\d+)?")


@dataclass
class TaskTimes:
    count: int = 0
    seconds: float = 0.0
    items: int = 0
    nonzero: int = 0

    def minus(self, earlier: TaskTimes | None) -> TaskTimes:
        if earlier is None:
            return self
        return TaskTimes(self.count - earlier.count, self.seconds - earlier.seconds, self.items - earlier.items,
                         self.nonzero - earlier.nonzero)


class _no_such_process:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        return kind is ProcessLookupError


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


# --- Load ------------------------------------------------------------------------------------------


@dataclass
class LoadResult:
    sent: int = 0
    accepted: int = 0
    seconds: float = 0.0
    refused: list[tuple[int, bytes]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.accepted / self.seconds if self.seconds else float("nan")


def raw_single(*, slug: str, secret: str, event_id: str, n: int, host: str) -> bytes:
    """One signed single-event request, signed now (so a long run never meets the timestamp tolerance)."""
    import orjson

    from feedback.signatures import sign

    event = ingest.rating_event(event_id, n)
    event["comment"] = comment_for(n)
    body = orjson.dumps(event)
    timestamp = str(int(time.time()))
    signature = sign(secret=secret, msg_id=event_id, timestamp=timestamp, body=body)
    return ingest.Delivery(f"/api/v1/sources/{slug}/events", event_id, timestamp, signature, body, 1).raw(host)


async def send_for(port: int, *, seconds: float, concurrency: int, make_raw) -> LoadResult:
    """Send single events over `concurrency` keep-alive connections until `seconds` have passed."""
    result = LoadResult()
    counter = iter(range(10**9))
    deadline = time.perf_counter() + seconds

    async def connection_loop() -> None:
        connection = ingest.KeepAliveConnection(port)
        try:
            while time.perf_counter() < deadline:
                n = next(counter)
                status, body, _ = await connection.exchange(make_raw(n))
                result.sent += 1
                if status == 202:
                    result.accepted += 1
                elif len(result.refused) < 5:
                    result.refused.append((status, body[:300]))
        finally:
            connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(connection_loop() for _ in range(concurrency)))
    result.seconds = time.perf_counter() - started
    return result


# --- Done ------------------------------------------------------------------------------------------


def done_count(source, after_id: int) -> int:
    """Items of `source` above `after_id` that the pipeline has processed (see the module docstring)."""
    from django.db.models import Q

    from feedback.models import FeedbackItem

    return (
        FeedbackItem.objects.filter(source=source, id__gt=after_id)
        .exclude(status=FeedbackItem.Status.RECEIVED)
        .filter(
            Q(status=FeedbackItem.Status.FAILED) | Q(rating=1) | Q(embedding__isnull=True)
            | Q(assignment__isnull=False)
        )
        .count()
    )


def stored_count(source, after_id: int) -> int:
    from feedback.models import FeedbackItem

    return FeedbackItem.objects.filter(source=source, id__gt=after_id).count()


def last_id() -> int:
    from feedback.models import FeedbackItem

    return FeedbackItem.objects.order_by("-id").values_list("id", flat=True).first() or 0


def wait_done(source, after_id: int, expected: int, timeout: float, poll: float = 0.5) -> float | None:
    """Seconds until `expected` items above `after_id` are done, or None past `timeout`."""
    started = time.perf_counter()
    while True:
        if done_count(source, after_id) >= expected:
            return time.perf_counter() - started
        if time.perf_counter() - started > timeout:
            return None
        time.sleep(poll)


# --- One run ---------------------------------------------------------------------------------------


@dataclass
class RunResult:
    workers: int
    per_event: bool
    load: LoadResult
    waiting_at_end: int
    drain_seconds: float | None
    task_times: dict[str, TaskTimes]
    load_average: tuple[float, float, float]
    failed: int
    backlog: int = 0
    backlog_seconds: float | None = None

    @property
    def through_seconds(self) -> float | None:
        return None if self.drain_seconds is None else self.load.seconds + self.drain_seconds

    @property
    def pipeline_rate(self) -> float | None:
        """Items per second through the pipeline: every acknowledged item, from the first event until the last was done."""
        return None if self.through_seconds is None else self.load.accepted / self.through_seconds

    @property
    def drain_rate(self) -> float | None:
        if self.drain_seconds is None:
            return None
        return self.waiting_at_end / self.drain_seconds if self.drain_seconds > 0 else float("inf")

    @property
    def backlog_rate(self) -> float | None:
        if not self.backlog or self.backlog_seconds is None:
            return None
        return self.backlog / self.backlog_seconds


def warm_up(server, *, source, secret: str, run_id: str) -> None:
    """Load each worker's model and each web worker's code: a signed batch and a few single events, until done."""
    import orjson

    from feedback.signatures import sign

    host = f"127.0.0.1:{server.port}"
    after = last_id()
    events = []
    for i in range(512):
        event = ingest.rating_event(f"warm-{run_id}-b{i}", i)
        event["comment"] = comment_for(10**6 + i)
        events.append(event)
    body = orjson.dumps({"events": events})
    timestamp = str(int(time.time()))
    msg_id = f"warm-{run_id}-batch"
    batch = ingest.Delivery(f"/api/v1/sources/{source.slug}/events", msg_id, timestamp,
                            sign(secret=secret, msg_id=msg_id, timestamp=timestamp, body=body), body, 512)
    singles = [raw_single(slug=source.slug, secret=secret, event_id=f"warm-{run_id}-s{i}", n=2 * 10**6 + i, host=host)
               for i in range(40)]
    answers, _ = asyncio.run(ingest.send_all(server.port, [batch.raw(host), *singles], 4))
    if any(answer.status != 202 for answer in answers):
        bad = next(answer for answer in answers if answer.status != 202)
        raise ingest.BenchFailure(f"warm-up: an answer was {bad.status}: {bad.body[:300]!r}")
    if wait_done(source, after, 552, timeout=300) is None:
        raise ingest.BenchFailure("warm-up: the workers did not process 552 items within 300 s")


def run_name(count: int, per_event: bool) -> str:
    return f"{count} process{'es' if count > 1 else ''}" + (", a task per event" if per_event else "")


def one_run(count: int, *, per_event: bool, server, source, secret: str, env: dict[str, str], work: Path,
            args) -> RunResult:
    label = f"{count}p{'-each' if per_event else ''}-{uuid.uuid4().hex[:6]}"
    print(f"\n== {run_name(count, per_event)}: {args.seconds:.0f} s of signed single events, "
          f"{args.concurrency} connections")
    redis_flush(args.redis_url)
    workers = Workers(count=count, env=env, log_dir=work, label=label)
    try:
        workers.wait_ready()
        warm_up(server, source=source, secret=secret, run_id=label)
        warm_times = workers.task_times()
        print(f"  workers ready and warm (pids {[proc.pid for proc in workers.procs]}); "
              f"load average {os.getloadavg()[0]:.2f}")

        after = last_id()
        host = f"127.0.0.1:{server.port}"
        prefix = f"run-{label}-"
        load = asyncio.run(send_for(
            server.port, seconds=args.seconds, concurrency=args.concurrency,
            make_raw=lambda n: raw_single(slug=source.slug, secret=secret, event_id=f"{prefix}{n}", n=n, host=host),
        ))
        done_at_end = done_count(source, after)
        load_average = os.getloadavg()
        if load.refused:
            status, body = load.refused[0]
            raise ingest.BenchFailure(f"{load.sent - load.accepted} of {load.sent} answers were not 202; "
                                      f"first: {status} {body!r}")
        stored = stored_count(source, after)
        if stored != load.accepted:
            raise ingest.BenchFailure(f"{load.accepted} events were acknowledged, the database holds {stored}")
        print(f"  load: {load.accepted:,} events acknowledged in {load.seconds:.1f} s ({load.rate:,.0f}/s), "
              f"all stored; {done_at_end:,} done by the end of the load")

        drain = wait_done(source, after, load.accepted, timeout=args.drain_timeout)
        if drain is None:
            print(f"  NOT DRAINED: {done_count(source, after):,} of {load.accepted:,} done "
                  f"{args.drain_timeout:.0f} s after the load")
        else:
            print(f"  every acknowledged item done {drain:.1f} s after the load ended")
        from feedback.models import FeedbackItem

        failed = FeedbackItem.objects.filter(source=source, id__gt=after, status=FeedbackItem.Status.FAILED).count()
        result = RunResult(count, per_event, load, load.accepted - done_at_end, drain, {}, load_average, failed)
        if args.backlog_seconds:
            result.backlog, result.backlog_seconds = backlog_drain(
                workers, server=server, source=source, secret=secret, prefix=f"backlog-{label}-", args=args
            )
        time.sleep(1.0)  # the last tasks' log lines
        result.task_times = {name: entry.minus(warm_times.get(name)) for name, entry in workers.task_times().items()}
        return result
    finally:
        workers.stop()


def batches(result: RunResult) -> str:
    """Embedding tasks that embedded something, and their mean size."""
    entry = result.task_times.get("embed_items" if result.per_event else "embed_waiting")
    if entry is None or not entry.nonzero:
        return "0"
    return f"{entry.nonzero:,} / {entry.items / entry.nonzero:.1f}"


def backlog_drain(workers: Workers, *, server, source, secret: str, prefix: str, args) -> tuple[int, float | None]:
    """(items waiting, seconds until they were all done) for a backlog made while no worker took embedding work."""
    host = f"127.0.0.1:{server.port}"
    workers.embed_consumers(on=False)
    after = last_id()
    load = asyncio.run(send_for(
        server.port, seconds=args.backlog_seconds, concurrency=args.concurrency,
        make_raw=lambda n: raw_single(slug=source.slug, secret=secret, event_id=f"{prefix}{n}", n=5 * 10**6 + n,
                                      host=host),
    ))
    if load.refused:
        raise ingest.BenchFailure(f"backlog: an answer was {load.refused[0][0]}: {load.refused[0][1]!r}")
    time.sleep(1.0)  # a task a worker had reserved before it stopped taking work may still be running
    backlog = load.accepted - done_count(source, after)
    started = time.perf_counter()
    workers.embed_consumers(on=True)
    seconds = wait_done(source, after, load.accepted, timeout=args.drain_timeout, poll=0.2)
    seconds = None if seconds is None else time.perf_counter() - started
    print(f"  backlog: {backlog:,} items waiting after {args.backlog_seconds:.0f} s with no embedding work taken; "
          + ("not drained" if seconds is None else f"all done {seconds:.1f} s after the workers took work again "
             f"({backlog / seconds:,.0f} items/s)"))
    return backlog, seconds


def fmt(value: float | None, spec: str, missing: str = "not drained") -> str:
    return missing if value is None else format(value, spec)


def print_table(results: list[RunResult], args, load_before: float) -> None:
    print(f"\n== Pipeline: {args.seconds:.0f} s of signed single events, {args.concurrency} connections, "
          f"gunicorn -w {args.web_workers}, PostgreSQL, Redis; workers `celery worker -Q default,embed -c 1` each; "
          f"{os.cpu_count()} cores, load average {load_before:.2f} before")
    names = [run_name(r.workers, r.per_event) for r in results]
    width = max(22, *(len(name) + 2 for name in names))
    print(f"  {'':34}" + "".join(f"{name:>{width}}" for name in names))
    rows = [
        ("ingestion, events/s", [f"{r.load.rate:,.0f}" for r in results]),
        ("events acknowledged", [f"{r.load.accepted:,}" for r in results]),
        ("waiting when the load ended", [f"{r.waiting_at_end:,}" for r in results]),
        ("all done after the load, s", [fmt(r.drain_seconds, ".1f") for r in results]),
        ("pipeline items/s (first event..last done)", [fmt(r.pipeline_rate, ",.0f", "-") for r in results]),
        ("drain items/s after the load", [fmt(r.drain_rate, ",.0f", "-") for r in results]),
        ("backlog: items / seconds to drain",
         [f"{r.backlog:,} / {fmt(r.backlog_seconds, '.1f')}" if r.backlog else "-" for r in results]),
        ("backlog: drain items/s", [fmt(r.backlog_rate, ",.0f", "-") for r in results]),
        ("batches / mean items per batch", [batches(r) for r in results]),
        ("failed items", [f"{r.failed}" for r in results]),
        ("load average 1/5/15 min at load end", ["/".join(f"{v:.1f}" for v in r.load_average) for r in results]),
    ]
    for label, values in rows:
        print(f"  {label:34}" + "".join(f"{value:>{width}}" for value in values))
    print("  worker time by task (count / seconds in all, from the worker logs; warm-up left out; backlog included):")
    names = sorted({name for r in results for name in r.task_times})
    for name in names:
        cells = []
        for r in results:
            entry = r.task_times.get(name)
            cells.append(f"{entry.count:,} / {entry.seconds:.1f} s" if entry else "-")
        print(f"    {name:32}" + "".join(f"{cell:>{width}}" for cell in cells))
    print("  goal: the pipeline keeps up (pipeline items/s >= ingestion events/s, >= 500/s with two processes) and "
          "every item is done within 60 s of the load's end")


# --- Main -------------------------------------------------------------------------------------------


def on_alarm(signum, frame):
    raise ingest.BenchTimeout("the benchmark hit its global timeout")


def main(argv: list[str] | None = None) -> int:
    ingest.ensure_project_python()
    args = parse_args(argv)
    url = urlparse(args.database_url)
    db_name = url.path.lstrip("/")
    work = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    env = ingest.server_env(db_name, str(work / "data"))
    env.update({"DATABASE_URL": args.database_url, "REDIS_URL": args.redis_url})
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(args.timeout)
    server = None
    db_created = False
    results: list[RunResult] = []
    load_before = os.getloadavg()[0]
    try:
        print(f"== Setup: database {db_name}, broker {args.redis_url}, {os.cpu_count()} cores, "
              f"load average {load_before:.2f}")
        pg_admin(url, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        pg_admin(url, f'CREATE DATABASE "{db_name}"')
        db_created = True
        redis_flush(args.redis_url)
        ingest.migrate(env)
        ingest.django_setup(env)
        demo_load(env, args.demo_count)

        from django.db import connections

        from feedback import services

        source, secret = services.source_create(name=f"bench-pipeline-{uuid.uuid4().hex[:6]}")
        connections.close_all()
        plans = ([(1, True)] if args.baseline else []) + [(count, False) for count in args.worker_counts]
        for count, per_event in plans:
            # The web server decides how single events are handed on: one per mode.
            mode_env = {**env, "PIPELINE_COALESCE_SINGLE_EVENTS": "0" if per_event else "1"}
            if server is None or server.per_event != per_event:
                if server is not None:
                    server.stop()
                    server = None
                server = ingest.Server(env=mode_env, port=ingest.free_port(), workers=args.web_workers,
                                       threads=args.threads, log_path=work / f"gunicorn-{len(results)}.log")
                server.per_event = per_event
                server.wait_ready(timeout=240)  # a busy 2-core machine starts gunicorn slowly
                print(f"\n  gunicorn -w {args.web_workers} on 127.0.0.1:{server.port}, "
                      f"PIPELINE_COALESCE_SINGLE_EVENTS={mode_env['PIPELINE_COALESCE_SINGLE_EVENTS']}")
            results.append(one_run(count, per_event=per_event, server=server, source=source, secret=secret,
                                   env=mode_env, work=work, args=args))
        print_table(results, args, load_before)
        return 0 if all(result.drain_seconds is not None for result in results) else 1
    except ingest.BenchFailure as exc:
        ingest.report_failure(exc, server)
        for log in sorted(work.glob("worker-*.log"))[-2:]:
            print(f"{log.name} (tail):\n{tail(log)}", file=sys.stderr)
        return 1
    finally:

        def drop() -> None:
            pg_admin(url, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')

        ingest.tear_down(server, drop if db_created else None, db_name)
        try:
            redis_flush(args.redis_url)
        except Exception as exc:
            print(f"could not flush {args.redis_url}: {exc}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
        print(f"\n== Cleaned up: gunicorn and workers stopped, database {db_name} dropped, {args.redis_url} flushed")


if __name__ == "__main__":
    ingest.ensure_project_python()
    os.chdir(ROOT)
    sys.exit(main())
