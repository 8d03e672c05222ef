#!/usr/bin/env python
"""Import benchmark: JSONL files of events through ``manage.py import`` into PostgreSQL, beside the webhook batches.

    python bench/import.py                    # 100,000 and 1,000,000 events
    python bench/import.py --events 200000    # a quicker run: 100,000 and 200,000

What it does, in order:

1. creates a fresh PostgreSQL database (the one ``--database-url`` names,
   dropped first if it exists), uses the Redis db of ``--redis-url`` as the
   broker (flushed before and after), migrates;
2. writes JSONL files of 100,000 and ``--events`` rating events (the events
   bench/ingest.py sends, so both paths store the same rows), not timed;
3. runs ``manage.py import FILE --source ...`` on a one-event file (the
   baseline: start-up alone), then on each file, each as its own process,
   timed from start to exit (Django start-up included) and inside the run
   (the ImportRun's own start and end), and reads that process's peak
   resident memory from the kernel (wait4): memory that stays flat from the
   small file to the large one, near the baseline, is the point;
4. runs the 100,000-event import again: every line is a duplicate, so this is
   the cost of a re-import that stores nothing;
5. checks after each import that the database holds exactly the events of the
   file, and fails loudly otherwise;
6. the webhook batch path in the same run: gunicorn (2 workers) on a free
   port, ``--batches`` signed batches of 500 events sent by bench/ingest.py's
   load generator, checked the same way;
7. prints one table, then stops gunicorn, drops the database and flushes the
   Redis db, even on error.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import (
    ingest,  # noqa: E402  (the signed-batch load generator and the gunicorn runner)
)

SMALL = 100_000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the large file (>= 100,000)")
    parser.add_argument(
        "--database-url",
        default="postgres://postgres@127.0.0.1:5432/bench_import",
        help="PostgreSQL database to create, fill and drop",
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13", help="broker (its db is flushed)")
    parser.add_argument("--batches", type=int, default=100, help="webhook phase: signed batches of 500 events")
    parser.add_argument("--concurrency", type=int, default=6, help="webhook phase: client connections")
    parser.add_argument("--timeout", type=int, default=3600, help="global timeout in seconds")
    args = parser.parse_args(argv)
    if args.events < SMALL:
        parser.error(f"--events must be at least {SMALL}")
    url = urlparse(args.database_url)
    if url.scheme not in ("postgres", "postgresql") or not re.fullmatch(r"/[a-z_][a-z0-9_]{0,62}", url.path or ""):
        parser.error("--database-url must be postgres://user@host:port/name with a plain lower-case name")
    if args.batches < 40:
        parser.error("--batches must be at least 40 (20,000 events)")
    return args


# --- Database and broker -----------------------------------------------------------


# The maintenance connection and the broker flush of the other benches (bench/ingest.py).
pg_admin = ingest.pg_admin_at
redis_flush = ingest.redis_flush


# --- Files ----------------------------------------------------------------------------


def write_events(path: Path, count: int, prefix: str) -> None:
    import orjson

    with open(path, "wb", buffering=1024 * 1024) as handle:
        for n in range(count):
            handle.write(orjson.dumps(ingest.rating_event(f"{prefix}{n}", n)))
            handle.write(b"\n")


# --- The import command, as its own process ---------------------------------------------


@dataclass
class ImportResult:
    name: str
    events: int
    seconds: float
    peak_mb: float
    stored: int
    duplicates: int
    refused: int
    # From the run's own start to its end: the reading and storing, without Django's start-up.
    run_seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.events / self.seconds

    @property
    def run_rate(self) -> float:
        return self.events / self.run_seconds if self.run_seconds else float("nan")


REPORT = re.compile(r"stored (\d+), duplicates (\d+), refused (\d+)")


def run_import(name: str, path: Path, source: str, events: int, env: dict[str, str], log_dir: Path) -> ImportResult:
    log_path = log_dir / f"{name}.log"
    with open(log_path, "wb") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "import", str(path), "--source", source, "--no-progress"],
            cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
        )
        # wait4 gives this child's own peak memory (RUSAGE_CHILDREN would be the largest of all so far).
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
    output = log_path.read_text(errors="replace")
    found = REPORT.search(output)
    if proc.returncode != 0 or found is None:
        raise ingest.BenchFailure(f"{name}: manage.py import exited {proc.returncode}:\n{output[-3000:]}")
    stored, duplicates, refused = (int(value) for value in found.groups())
    from feedback.models import ImportRun

    run = ImportRun.objects.filter(source__name=source).order_by("-id").first()
    run_seconds = (run.finished_at - run.started_at).total_seconds()
    return ImportResult(name, events, seconds, usage.ru_maxrss / 1024, stored, duplicates, refused, run_seconds)


def check_rows(source: str, expected: int) -> None:
    from feedback.models import FeedbackItem

    rows = FeedbackItem.objects.filter(source__name=source).count()
    if rows != expected:
        raise ingest.BenchFailure(f"source {source}: the database holds {rows} rows, the file had {expected} events")
    print(f"  check: source {source} holds {rows} rows = the events of its file  OK")


# --- Main -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ingest.ensure_project_python()
    args = parse_args(argv)
    url = urlparse(args.database_url)
    db_name = url.path.lstrip("/")
    work = Path(tempfile.mkdtemp(prefix="bench-import-"))
    env = ingest.server_env(db_name, str(work / "data"))
    env.update({"DATABASE_URL": args.database_url, "REDIS_URL": args.redis_url})
    signal_alarm(args.timeout)
    server = None
    results: list[ImportResult] = []
    try:
        print(f"database {db_name}, broker {args.redis_url}, files in {work}")
        pg_admin(url, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        pg_admin(url, f'CREATE DATABASE "{db_name}"')
        redis_flush(args.redis_url)
        ingest.migrate(env)
        ingest.django_setup(env)

        sizes = sorted({SMALL, args.events})
        files = {}
        for size in sizes:
            path = work / f"events-{size}.jsonl"
            started = time.perf_counter()
            write_events(path, size, prefix=f"imp{size}-")
            files[size] = path
            print(f"  wrote {size:,} events ({path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - started:.1f} s")

        # The command's start-up alone (Django, the app's modules): what the peak memory of the others is beside.
        one = work / "events-1.jsonl"
        write_events(one, 1, prefix="one-")
        baseline = run_import("baseline (1 event)", one, "bench-1", 1, env, work)
        print(f"  {baseline.name}: {baseline.seconds:.1f} s, peak {baseline.peak_mb:.0f} MB")
        results.append(baseline)

        for size in sizes:
            result = run_import(f"import {size:,}", files[size], f"bench-{size}", size, env, work)
            print(f"  {result.name}: {result.rate:,.0f} events/s ({result.run_rate:,.0f}/s inside the run), "
                  f"peak {result.peak_mb:.0f} MB")
            if (result.stored, result.duplicates, result.refused) != (size, 0, 0):
                raise ingest.BenchFailure(f"{result.name}: expected {size} stored, got {result}")
            check_rows(f"bench-{size}", size)
            results.append(result)

        again = run_import(f"re-import {SMALL:,}", files[SMALL], f"bench-{SMALL}", SMALL, env, work)
        print(f"  {again.name}: {again.rate:,.0f} events/s ({again.run_rate:,.0f}/s inside the run), "
              f"peak {again.peak_mb:.0f} MB")
        if (again.stored, again.duplicates) != (0, SMALL):
            raise ingest.BenchFailure(f"{again.name}: expected {SMALL} duplicates, got {again}")
        check_rows(f"bench-{SMALL}", SMALL)
        results.append(again)

        from feedback import services

        source, secret = services.source_create(name="bench-webhooks")
        prefix = "wh-"
        deliveries = ingest.deliveries_batch(slug=source.slug, secret=secret, prefix=prefix, batches=args.batches,
                                             size=500)
        server = ingest.Server(env=env, port=ingest.free_port(), workers=2, threads=1, log_path=work / "gunicorn.log")
        server.wait_ready(timeout=240)  # a busy 2-core machine starts gunicorn slowly
        warm = ingest.deliveries_batch(slug=source.slug, secret=secret, prefix="warm-", batches=4, size=500)
        ingest.asyncio.run(ingest.send_all(server.port, [d.raw(f"127.0.0.1:{server.port}") for d in warm], 2))
        phase, answers = ingest.run_phase("webhook batches", server, deliveries, args.concurrency, db_name)
        ingest.verify_phase("webhook batches", answers, deliveries, source=source, prefix=prefix)
        print_table(results, phase)
        return 0
    except ingest.BenchFailure as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.stop()
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # Django never started
            pass
        pg_admin(url, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        redis_flush(args.redis_url)
        shutil.rmtree(work, ignore_errors=True)


def print_table(results: list[ImportResult], phase) -> None:
    print()
    print(f"{'path':<28} {'events':>10} {'seconds':>9} {'events/s':>10} {'in run/s':>10} {'peak RSS':>10}")
    for result in results:
        print(f"{result.name:<28} {result.events:>10,} {result.seconds:>9.1f} {result.rate:>10,.0f} "
              f"{result.run_rate:>10,.0f} {result.peak_mb:>7.0f} MB")
    print(f"{'webhook batches of 500':<28} {phase.events:>10,} {phase.seconds:>9.1f} "
          f"{phase.events / phase.seconds:>10,.0f} {'':>10} {'(gunicorn)':>10}")
    first, large = results[1], results[-2]
    if large.events > first.events:
        print(f"\npeak memory {first.events:,} -> {large.events:,} events: {first.peak_mb:.0f} MB -> "
              f"{large.peak_mb:.0f} MB ({large.peak_mb - first.peak_mb:+.0f} MB for "
              f"{large.events / first.events:.0f}x the events)")
    print(f"design.md reference, webhook batches of 500 through gunicorn: {ingest.REFERENCE_BATCH_EPS:,} events/s")


def signal_alarm(seconds: int) -> None:
    import signal

    signal.signal(signal.SIGALRM, ingest.on_alarm)
    signal.alarm(seconds)


if __name__ == "__main__":
    sys.exit(main())
