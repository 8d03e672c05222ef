#!/usr/bin/env python
"""Ingestion benchmark: signed webhooks through gunicorn, PostgreSQL and Redis.

    python bench/ingest.py              # the figures
    python bench/ingest.py --profile    # the figures, plus where the server's time goes

What it does, in order (design.md, "Measured on this kind of machine"):

1. creates a fresh PostgreSQL database (``bench_ingest``), uses Redis db 15 as
   the broker (flushed before and after), migrates, creates one source;
2. starts ``gunicorn config.wsgi -w 2`` (``--threads N``: gthread workers) on a
   free 127.0.0.1 port and waits for it;
3. warms every worker up with a few signed requests (not timed);
4. phase 1: N signed single-event requests (default 3,000), phase 2: B batches
   of 500 events (default 40): all bodies are built and signed before the
   clock starts; a few keep-alive-capable raw-socket connections (asyncio)
   send them, so the client stays light on a 2-core machine;
   phase 3 (``--client-events``, default 10,000; 0 skips it): the same kind of
   events through the project's client (client/feedback_studio_client.py:
   signing as it goes, one urllib request per batch), printed beside phase 2;
5. after each phase checks that every answer was 202 and that the database
   holds exactly the events sent, and fails loudly otherwise; prints how many
   item ids reached the broker, and the CPU each event cost in the gunicorn
   workers, the PostgreSQL backends and the client (from /proc): on a machine
   that other work keeps busy these figures are steadier than the rates;
6. with ``--profile``: samples the gunicorn workers with py-spy during each
   phase (when py-spy is installed: ``.venv/bin/pip install py-spy==0.4.3``;
   without it only cProfile runs), then runs the same WSGI application
   in-process, timed plainly and under cProfile, and prints the SQL of one
   request, the top cumulative entries and a short breakdown;
7. the reference, in the same run (``--no-minimal`` skips it): phases 1 and 2
   again against bench/minimal_ingest.py, a minimal Django view doing only the
   essentials (signature and timestamp check, JSON parse, one INSERT with a
   unique key, one Celery message after commit) under the same gunicorn,
   database and broker; the summary prints both rates and their ratio;
8. stops gunicorn, drops the database and flushes Redis db 15, even on error.

Every request goes to 127.0.0.1, the counts are fixed and a global timeout
(``--timeout``) bounds the whole run.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import cProfile
import json
import math
import os
import pstats
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"

# The reference is measured in the same run: bench/minimal_ingest.py, a minimal Django view
# doing signature check + JSON parse + one insert + one Celery enqueue after commit.
TARGET_SINGLE_RATIO = 0.9  # single events at least this share of the minimal view's rate
TARGET_SINGLE_EPS = 1_000
TARGET_BATCH_EPS = 20_000

PG_HOST, PG_PORT, PG_USER = "127.0.0.1", 5432, "postgres"
REDIS_URL = "redis://127.0.0.1:6379/15"
QUEUE_NAME = "embed"  # feedback.tasks.embed_items declares this queue
REQUEST_TIMEOUT = 60.0


def ensure_project_python() -> None:
    """Re-run under the project's virtualenv when started with a Python that lacks Django."""
    try:
        import django  # noqa: F401
    except ModuleNotFoundError:
        venv_python = VENV / "bin" / "python"
        if venv_python.exists() and Path(sys.prefix).resolve() != VENV.resolve():
            os.execv(str(venv_python), [str(venv_python), str(Path(__file__).resolve()), *sys.argv[1:]])
        raise


class BenchFailure(Exception):
    """The benchmark could not produce trustworthy figures (a wrong answer, a missing row)."""


class BenchTimeout(BenchFailure):
    pass


# --- Arguments ----------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--single", type=int, default=3_000, help="phase 1: single-event requests (>= 1000)")
    parser.add_argument("--batches", type=int, default=40, help="phase 2: number of batches")
    parser.add_argument("--batch-size", type=int, default=500, help="phase 2: events per batch")
    parser.add_argument("--concurrency", type=int, default=6, help="client connections (4-8 keeps the client light)")
    parser.add_argument("-w", "--workers", type=int, default=2, help="gunicorn workers (the reference used 2)")
    parser.add_argument(
        "--threads", type=int, default=1, help="gunicorn threads per worker; above 1 gunicorn uses gthread workers"
    )
    parser.add_argument("--warmup", type=int, default=40, help="untimed single requests before phase 1")
    parser.add_argument(
        "--client-events", type=int, default=10_000,
        help="phase 3: events sent through client/feedback_studio_client.py in batches (0 skips it)",
    )
    parser.add_argument("--timeout", type=int, default=900, help="global timeout in seconds")
    parser.add_argument("--db-name", default="bench_ingest", help="PostgreSQL database to create and drop")
    parser.add_argument("--profile", action="store_true", help="show where the server's time goes")
    parser.add_argument("--no-minimal", action="store_true", help="skip the minimal-view reference phases")
    parser.add_argument(
        "--profile-requests", type=int, default=800, help="--profile: in-process single requests (half under cProfile)"
    )
    parser.add_argument("--profile-batches", type=int, default=12, help="--profile: in-process batches (half profiled)")
    parser.add_argument("--no-py-spy", action="store_true", help="--profile: skip sampling gunicorn with py-spy")
    args = parser.parse_args(argv)
    if args.single < 1_000:
        parser.error("--single must be at least 1000")
    if args.batches * args.batch_size < 20_000:
        parser.error("phase 2 must send at least 20,000 events (--batches x --batch-size)")
    if not 1 <= args.batch_size <= 1_000:
        parser.error("--batch-size must be 1..1000 (the webhook's batch limit)")
    if not 1 <= args.concurrency <= 64:
        parser.error("--concurrency must be 1..64")
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", args.db_name):
        parser.error("--db-name must be a plain lower-case identifier")
    return args


# --- Environment: database, broker, Django -------------------------------------


def server_env(db_name: str, data_dir: str) -> dict[str, str]:
    env = {
        "DATABASE_URL": f"postgres://{PG_USER}@{PG_HOST}:{PG_PORT}/{db_name}",
        "REDIS_URL": REDIS_URL,
        "SECRET_KEY": "bench",
        "DEBUG": "0",
        "PLAIN_HTTP": "1",  # the load generator speaks plain http to gunicorn, no TLS proxy between
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATA_DIR": data_dir,  # keeps the project's data/ untouched
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
    }
    return env


def pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(
        host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", autocommit=True, connect_timeout=5
    ) as conn:
        conn.execute(sql)


def pg_admin_at(url, sql: str) -> None:
    """Run one statement on the maintenance database of the server a parsed postgres:// URL names."""
    import psycopg

    with psycopg.connect(
        host=url.hostname, port=url.port or 5432, user=url.username or "postgres", password=url.password,
        dbname="postgres", autocommit=True, connect_timeout=5,
    ) as conn:
        conn.execute(sql)


def redis_flush(redis_url: str) -> None:
    import redis

    redis.Redis.from_url(redis_url, socket_connect_timeout=2, socket_timeout=10).flushdb()


def database_create(db_name: str) -> None:
    pg_admin(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
    pg_admin(f'CREATE DATABASE "{db_name}"')


def database_drop(db_name: str) -> None:
    pg_admin(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


def pg_backend_pids(db_name: str) -> list[int]:
    """The PostgreSQL server processes serving this database (the app's connections)."""
    import psycopg

    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", connect_timeout=5) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [db_name]).fetchall()
    return [pid for (pid,) in rows]


def redis_client():
    import redis

    return redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=5)


def queued_items() -> tuple[int, int]:
    """(messages, item ids) waiting in the embed queue (kombu keeps one list per priority)."""
    client = redis_client()
    messages = item_ids = 0
    for key in client.scan_iter(match=f"{QUEUE_NAME}*"):
        if client.type(key) != b"list":
            continue
        for raw in client.lrange(key, 0, -1):
            messages += 1
            try:  # a Celery protocol-2 message: base64 JSON body [args, kwargs, embed]; args = [item_ids]
                args = json.loads(base64.b64decode(json.loads(raw)["body"]))[0]
                item_ids += len(args[0])
            except (ValueError, KeyError, IndexError, TypeError):
                pass
    return messages, item_ids


def report_queued(before: tuple[int, int], expected_ids: int, phase: str, *, single: bool = False) -> tuple[int, int]:
    """Print what the phase queued; the app may queue a moment after answering, so wait a little.

    Batches queue the ids they stored. Single events queue wake-ups that carry
    no ids (the worker claims what waits), coalesced while one is pending, so
    for them the line counts the wake-ups and there is nothing to compare.
    """
    deadline = time.monotonic() + (1 if single else 3)
    while True:
        now = queued_items()
        if not single and now[1] - before[1] >= expected_ids or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    messages, item_ids = now[0] - before[0], now[1] - before[1]
    if single:
        print(f"  broker: {phase} queued {messages} embed wake-ups for {expected_ids} stored events")
        return now
    line = f"  broker: {phase} queued {messages} embed messages carrying {item_ids} item ids"
    if item_ids != expected_ids:
        line += f"  WARNING: {expected_ids} items were stored (the sweeper would queue the rest)"
    print(line)
    return now


def migrate(env: dict[str, str]) -> None:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise BenchFailure(f"manage.py migrate failed:\n{done.stdout}\n{done.stderr}")
    print(f"  migrated in {time.perf_counter() - started:.1f} s")


def django_setup(env: dict[str, str]) -> None:
    os.environ.update(env)
    os.environ.pop("CELERY_TASK_ALWAYS_EAGER", None)  # tasks must go to the broker, as in production
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()


# --- Requests --------------------------------------------------------------------


@dataclass
class Delivery:
    """One signed POST, built and signed before the clock starts."""

    path: str
    msg_id: str
    timestamp: str
    signature: str
    body: bytes
    events: int

    def raw(self, host: str) -> bytes:
        head = (
            f"POST {self.path} HTTP/1.1\r\n"
            f"Host: {host}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(self.body)}\r\n"
            f"webhook-id: {self.msg_id}\r\n"
            f"webhook-timestamp: {self.timestamp}\r\n"
            f"webhook-signature: {self.signature}\r\n"
            "\r\n"
        )
        return head.encode("ascii") + self.body

    def environ(self, host: str, port: int) -> dict:
        return {
            "REQUEST_METHOD": "POST",
            "SCRIPT_NAME": "",
            "PATH_INFO": self.path,
            "QUERY_STRING": "",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(self.body)),
            "SERVER_NAME": host,
            "SERVER_PORT": str(port),
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": host,
            "HTTP_WEBHOOK_ID": self.msg_id,
            "HTTP_WEBHOOK_TIMESTAMP": self.timestamp,
            "HTTP_WEBHOOK_SIGNATURE": self.signature,
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": BytesIO(self.body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": False,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }


def rating_event(event_id: str, n: int) -> dict:
    """A rating event shaped like tests/factories's, varied a little per event."""
    return {
        "id": event_id,
        "type": "feedback.rating",
        "occurred_at": "2026-11-29T12:00:00Z",
        "rating": "up" if n % 3 == 0 else "down",
        "comment": f"It edited the wrong file ({n}).",
        "model": {"name": "coder", "version": "2.1"},
        "variant": "AB"[n % 2],
        "surface": "ide",
        "user_ref": f"u_{n % 997}",
        "context": {
            "messages": [{"role": "user", "content": f"Rename foo to bar in utils_{n % 50}.py"}],
            "output": "I renamed foo in main.py.",
            "tool_calls": [{"name": "edit_file", "arguments": {"path": "main.py"}}],
        },
    }


def deliveries_single(*, slug: str, secret: str, prefix: str, count: int) -> list[Delivery]:
    from feedback.signatures import sign

    path = f"/api/v1/sources/{slug}/events"
    timestamp = str(int(time.time()))
    out = []
    for n in range(count):
        msg_id = f"{prefix}{n}"
        body = json.dumps(rating_event(msg_id, n)).encode()
        signature = sign(secret=secret, msg_id=msg_id, timestamp=timestamp, body=body)
        out.append(Delivery(path, msg_id, timestamp, signature, body, 1))
    return out


def deliveries_batch(*, slug: str, secret: str, prefix: str, batches: int, size: int) -> list[Delivery]:
    from feedback.signatures import sign

    path = f"/api/v1/sources/{slug}/events"
    timestamp = str(int(time.time()))
    out = []
    for b in range(batches):
        events = [rating_event(f"{prefix}{b}-{i}", b * size + i) for i in range(size)]
        body = json.dumps({"events": events}).encode()
        msg_id = f"{prefix}batch-{b}"
        signature = sign(secret=secret, msg_id=msg_id, timestamp=timestamp, body=body)
        out.append(Delivery(path, msg_id, timestamp, signature, body, size))
    return out


# --- The load generator (asyncio, raw sockets) -------------------------------------


@dataclass
class Answer:
    status: int
    latency: float
    body: bytes


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """(status, body, keep-alive) of one HTTP/1.x response."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    version, status = lines[0].split(" ", 2)[:2]
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            parts.append(chunk[:-2])
        body = b"".join(parts)
    else:
        body = await reader.read()
        keep_alive = False
    return int(status), body, keep_alive


class KeepAliveConnection:
    """One client connection to the local server, opened when needed and kept while the server keeps it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def exchange(self, raw: bytes) -> tuple[int, bytes, float]:
        """Send one request and read its answer: (status, body, seconds of the attempt that got the answer)."""
        reused = self.writer is not None
        try:
            return await self._attempt(raw)
        except (ConnectionError, asyncio.IncompleteReadError):
            if not reused:
                raise
            # The server closed an idle keep-alive connection: retry once, fresh.
            return await self._attempt(raw)

    async def _attempt(self, raw: bytes) -> tuple[int, bytes, float]:
        started = time.perf_counter()
        try:
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
            self.writer.write(raw)
            status, body, keep_alive = await asyncio.wait_for(read_response(self.reader), REQUEST_TIMEOUT)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.close()
            raise
        seconds = time.perf_counter() - started
        if not keep_alive:
            self.close()
        return status, body, seconds

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def send_all(port: int, raws: list[bytes], concurrency: int) -> tuple[list[Answer], float]:
    """Send every request over `concurrency` connections; (answers in order, wall seconds)."""
    answers: list[Answer | None] = [None] * len(raws)
    cursor = iter(range(len(raws)))

    async def connection_loop() -> None:
        connection = KeepAliveConnection(port)
        try:
            for index in cursor:
                status, body, seconds = await connection.exchange(raws[index])
                answers[index] = Answer(status, seconds, body)
        finally:
            connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(connection_loop() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    missing = sum(1 for a in answers if a is None)
    if missing:
        raise BenchFailure(f"{missing} requests got no answer")
    return answers, elapsed  # type: ignore[return-value]


# --- Process CPU accounting (from /proc; Linux) ----------------------------------------

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0, 0.0
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def proc_cpu_seconds(pid: int) -> float:
    return sum(proc_cpu_times(pid))


def children_of(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(entry.name))
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                continue
    return kids


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies across all cores, from /proc/stat."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (FileNotFoundError, ValueError):
        return 0.0, 0.0
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return float(sum(values) - idle), float(sum(values))


@dataclass
class CpuSnapshot:
    server_user: float
    server_system: float
    client: float
    busy: float
    total: float
    postgres: dict[int, float]

    @property
    def server(self) -> float:
        return self.server_user + self.server_system


def cpu_snapshot(server_pids: list[int], db_name: str) -> CpuSnapshot:
    busy, total = machine_busy()
    times = [proc_cpu_times(p) for p in server_pids]
    postgres = {pid: proc_cpu_seconds(pid) for pid in pg_backend_pids(db_name)}
    return CpuSnapshot(sum(u for u, _ in times), sum(s for _, s in times), time.process_time(), busy, total, postgres)


# --- gunicorn ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(
        self, *, env: dict[str, str], port: int, workers: int, threads: int, log_path: Path, app: str = "config.wsgi"
    ) -> None:
        self.port = port
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "gunicorn", app,
                "-w", str(workers), "-b", f"127.0.0.1:{port}",
                # Explicit, so a gunicorn.conf.py in the project cannot change what is measured.
                "--worker-class", "gthread" if threads > 1 else "sync", "--threads", str(threads),
                "--log-level", "warning", "--timeout", "60", "--graceful-timeout", "5",
            ],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as one, by its id, at the end
        )

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchFailure(f"gunicorn exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                    sock.sendall(b"GET /api/openapi.json HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                    if sock.recv(16).startswith(b"HTTP/"):
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise BenchFailure(f"gunicorn did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def worker_pids(self) -> list[int]:
        return children_of(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        self.log.close()


# --- py-spy (server side, while the load runs) ----------------------------------------


def report_failure(exc: BenchFailure, server: Server | None) -> None:
    print(f"\nBENCH FAILED: {exc}", file=sys.stderr)
    if server is not None:
        print(f"gunicorn log (tail):\n{server.log_tail()}", file=sys.stderr)


def tear_down(server: Server | None, drop_database, db_name: str) -> None:
    """Stop the server, close Django's connections, then drop the bench's database (if `drop_database`)."""
    signal.alarm(0)
    if server is not None:
        server.stop()
    if "django.db" in sys.modules:
        from django.db import connections

        connections.close_all()
    if drop_database is not None:
        try:
            drop_database()
        except Exception as exc:  # report, but still clean the rest
            print(f"could not drop database {db_name}: {exc}", file=sys.stderr)


def py_spy_path() -> str | None:
    candidate = VENV / "bin" / "py-spy"
    return str(candidate) if candidate.exists() else shutil.which("py-spy")


class PySpy:
    def __init__(self, exe: str, pid: int, out: Path, rate: int = 250) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            [exe, "record", "--pid", str(pid), "--subprocesses", "--rate", str(rate), "--format", "raw",
             "--output", str(out), "--nonblocking"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        time.sleep(1.0)  # let it attach to the master and find the workers
        if self.proc.poll() is not None:
            raise BenchFailure(f"py-spy could not attach: {self.proc.stderr.read().decode(errors='replace')}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


# Where a sample's time goes: the frame nearest the leaf that matches decides
# (so a query inside bulk_create counts as the insert, not as the ORM in general).
# py-spy names methods Class.method, so an optional "Class." prefix is allowed.
def _fn(names: str, path: str = "") -> re.Pattern:
    return re.compile(rf"^(?:\w+\.)?(?:{names}) \((?:[^()]*{path})")


CATEGORIES: list[tuple[str, re.Pattern]] = [
    ("DB connect / close_old_connections", _fn("connect|close_old_connections|close_if_unusable_or_obsolete", "django/db/")),
    ("Celery enqueue (apply_async -> kombu -> Redis)", _fn("items_enqueue|apply_async|send_task")),
    ("DB commit (waits for the WAL flush)", _fn("commit|__exit__", "django/db/(backends/base/base|transaction)")),
    ("DB insert (bulk_create)", _fn("bulk_create|_batched_insert")),
    ("DB select new rows by receipt_id / insert, rest", _fn("items_insert_new")),
    ("source lookup (SELECT source)", _fn("source_for_webhook")),
    ("pydantic validation", _fn("model_validate|validate_python")),
    ("building FeedbackItem (model_dump, Model())", _fn("_rating_item")),
    ("events_ingest, rest", _fn("events_ingest")),
    ("signature check (HMAC)", _fn("verify", "signatures")),
    ("JSON parse of the body", _fn("read_json_body")),
    ("reading the body", _fn("read_limited_body")),
    ("view, rest (answer building)", _fn("receive_events")),
    ("ninja: response (schema validate + JSON render)", _fn("_result_to_response|create_response|render", "ninja")),
    ("ninja: dispatch / operation", re.compile(r"\(.*ninja/")),
    ("Django middleware / handler", re.compile(r"\(.*django/(core/handlers|middleware|contrib|utils/deprecation|http)")),
    ("gunicorn: accept, HTTP parse, write", re.compile(r"\(.*gunicorn/")),
]
FRAME = re.compile(r"^(?P<func>.+?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
# Frames every request passes through: they are 100% "cumulative" and say nothing.
WRAPPER = re.compile(
    r"gunicorn/|<frozen runpy>|bench/ingest\.py|django/core/handlers/|django/utils/(deprecation|asyncio)\.py|"
    r"ninja/operation\.py:\d*\((run|sync_view_wrapper|_sync_view)\)|ninja/operation\.py\)$|"
    r"manager_method|^<listcomp>|^<module>"
)


def short_path(path: str) -> str:
    for marker in ("site-packages/", str(ROOT) + "/", "/lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def py_spy_report(raw_path: Path, title: str, requests: int, top: int = 15) -> None:
    """Top functions by inclusive samples, and a breakdown by category, from py-spy's raw output."""
    if not raw_path.exists():
        print(f"  py-spy wrote no profile for {title}")
        return
    inclusive: Counter[str] = Counter()
    category: Counter[str] = Counter()
    total = 0
    for line in raw_path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [f for f in stack.split(";") if not f.startswith(("process ", "thread "))]
        if not any("gunicorn/workers" in f for f in frames):
            continue  # the master's housekeeping, not request work
        n = int(count)
        total += n
        for frame in set(frames):
            match = FRAME.match(frame)
            name = f"{match['func']} ({short_path(match['file'])})" if match else frame
            if not WRAPPER.search(name):
                inclusive[name] += n
        for frame in reversed(frames):
            matched = next((label for label, pattern in CATEGORIES if pattern.search(frame)), None)
            if matched:
                category[matched] += n
                break
        else:
            category["other"] += n
    if not total:
        print(f"  py-spy: no worker samples for {title}")
        return
    print(f"\n  py-spy, gunicorn workers, {title}: {total} samples")
    print("  (running or runnable samples: on a busy machine, waiting for a core counts too)")
    print(f"  top {top} by inclusive ('cumulative') share of worker samples (gunicorn/Django wrappers omitted):")
    for name, n in inclusive.most_common(top):
        print(f"    {100 * n / total:5.1f}%  {name}")
    print("  breakdown (each sample counted once, by the innermost matching frame):")
    for label, n in category.most_common():
        print(f"    {100 * n / total:5.1f}%  {label}")


# --- cProfile (in-process, the same WSGI application) ---------------------------------


def package_of(path: str, func: str) -> str:
    """A profile entry's package: django, ninja, psycopg, feedback, the standard library..."""
    if path == "~":  # a built-in: name it by what it is
        return "builtins (" + (func.split(" of ")[0].strip("<>").replace("method ", "").replace("built-in ", "")) + ")"
    for marker in ("site-packages/", str(ROOT) + "/"):
        if marker in path:
            return path.split(marker, 1)[1].split("/", 1)[0].removesuffix(".py")
    return "python stdlib"


def call_wsgi(app, delivery: Delivery) -> tuple[int, bytes]:
    status_line: list[str] = []

    def start_response(status, headers, exc_info=None):
        status_line.append(status)

    result = app(delivery.environ("127.0.0.1", 80), start_response)
    try:
        body = b"".join(result)
    finally:
        if hasattr(result, "close"):
            result.close()  # fires request_finished, as gunicorn does
    return int(status_line[0].split(" ", 1)[0]), body


def inprocess_run(app, deliveries: list[Delivery], title: str, top: int = 15) -> None:
    """The same WSGI application in this process: plain timing, the SQL of one request, then cProfile."""
    from django.db import connection

    def check(answers: list[tuple[int, bytes]]) -> None:
        bad = [(s, b[:200]) for s, b in answers if s != 202]
        if bad:
            raise BenchFailure(f"in-process {title}: {len(bad)} answers not 202, first: {bad[0]}")

    half = len(deliveries) // 2
    plain, profiled = deliveries[:half], deliveries[half:]
    statements: list[tuple[float, str]] = []

    def record(execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            statements.append((time.perf_counter() - started, sql))

    with connection.execute_wrapper(record):
        check([call_wsgi(app, plain[0])])
    started, cpu = time.perf_counter(), time.process_time()
    check([call_wsgi(app, d) for d in plain[1:]])
    wall_ms = 1000 * (time.perf_counter() - started) / (len(plain) - 1)
    cpu_ms = 1000 * (time.process_time() - cpu) / (len(plain) - 1)
    events = plain[0].events
    print(f"\n  in-process WSGI, {title} (no HTTP, one process), {len(plain) - 1} requests without a profiler:")
    print(f"    {wall_ms:.3f} ms wall and {cpu_ms:.3f} ms CPU of this process per request: one thread does "
          f"{1000 * events / wall_ms:,.0f} events/s; the Python CPU alone would allow {1000 * events / cpu_ms:,.0f}/s "
          "per core")
    print(f"    {len(statements)} SQL statements in one request, besides BEGIN and COMMIT (each a round trip to PostgreSQL):")
    for seconds, sql in statements:
        print(f"      {1000 * seconds:7.3f} ms  {sql[:100]}")

    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    answers = [call_wsgi(app, d) for d in profiled]
    profiler.disable()
    elapsed = time.perf_counter() - started
    check(answers)
    n = len(profiled)
    stats = pstats.Stats(profiler)
    entries = stats.stats.items()  # type: ignore[attr-defined]
    print(f"\n  cProfile, in-process WSGI, {title}: {n} requests, {elapsed:.2f} s under the profiler "
          f"({1000 * elapsed / n:.2f} ms/request)")

    def label(path: str, line: int, func: str) -> str:
        return f"{short_path(path)}:{line}({func})" if line else func

    print(f"  top {top} by cumulative time (Django/ninja request wrappers omitted):")
    print(f"    {'ncalls':>10} {'tottime':>8} {'cumtime':>8} {'ms/req':>8}  function")
    rows = [(k, v) for k, v in sorted(entries, key=lambda kv: kv[1][3], reverse=True) if not WRAPPER.search(label(*k))]
    for (path, line, func), (cc, nc, tt, ct, _callers) in rows[:top]:
        calls = f"{nc}/{cc}" if nc != cc else str(nc)
        print(f"    {calls:>10} {tt:8.3f} {ct:8.3f} {1000 * ct / n:8.3f}  {label(path, line, func)}")
    print("  top 8 by own time (psycopg's wait = waiting for PostgreSQL):")
    for (path, line, func), (cc, nc, tt, ct, _callers) in sorted(entries, key=lambda kv: kv[1][2], reverse=True)[:8]:
        print(f"    {nc:>10} {tt:8.3f} {ct:8.3f} {1000 * tt / n:8.3f}  {label(path, line, func)}")

    by_package: Counter[str] = Counter()
    for (path, _line, func), (_cc, _nc, tt, _ct, _callers) in entries:
        if func == "wait" and "psycopg/connection.py" in path:
            by_package["(waiting for PostgreSQL)"] += tt
        else:
            by_package[package_of(path, func)] += tt
    print("  own time by package (where the CPU goes; the profiler inflates pure-Python code the most):")
    for package, seconds in by_package.most_common(10):
        print(f"    {1000 * seconds / n:8.3f} ms/req  {100 * seconds / elapsed:5.1f}%  {package}")

    def cumtime(func: str, path_part: str) -> float:
        return max((v[3] for (path, _l, f), v in entries if f == func and path_part in path), default=0.0)

    def owntime(func: str, path_part: str) -> float:
        return sum(v[2] for (path, _l, f), v in entries if f == func and path_part in path)

    parts = {
        "whole request (WSGIHandler.__call__)": cumtime("__call__", "django/core/handlers/wsgi.py"),
        "  waiting for PostgreSQL (psycopg wait, all queries)": owntime("wait", "psycopg/connection.py"),
        "source lookup (selectors.source_for_webhook)": cumtime("source_for_webhook", "feedback/selectors.py"),
        "signature check (signatures.verify)": cumtime("verify", "feedback/signatures.py"),
        "JSON parse (core.api.read_json_body)": cumtime("read_json_body", "core/api.py"),
        "events_ingest (validate + build + store + enqueue)": cumtime("events_ingest", "feedback/services.py"),
        "  pydantic validation (model_validate)": cumtime("model_validate", "pydantic/main.py"),
        "  building FeedbackItem (_rating_item)": cumtime("_rating_item", "feedback/services.py"),
        "  items_insert_new (transaction, incl. enqueue)": cumtime("items_insert_new", "feedback/services.py"),
        "    bulk_create (INSERT)": cumtime("bulk_create", "django/db/models/query.py"),
        "    Atomic.__exit__ (COMMIT + on_commit enqueue)": cumtime("__exit__", "django/db/transaction.py"),
        "    Celery enqueue (pipeline.items_enqueue)": cumtime("items_enqueue", "feedback/services.py"),
        "ninja response (_result_to_response)": cumtime("_result_to_response", "ninja/operation.py"),
    }
    whole = parts["whole request (WSGIHandler.__call__)"] or elapsed
    print("  breakdown (inclusive ms per request under cProfile; indented lines are inside the line above):")
    for name, seconds in parts.items():
        print(f"    {1000 * seconds / n:8.3f} ms  {100 * seconds / whole:5.1f}%  {name}")


# --- Phases --------------------------------------------------------------------------


def percentile(sorted_values: list[float], pct: float) -> float:
    if not sorted_values:
        return float("nan")
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass
class PhaseResult:
    name: str
    requests: int
    events: int
    seconds: float
    p50_ms: float
    p99_ms: float
    server_cpu_ms_per_event: float
    server_system_ms_per_event: float
    postgres_cpu_ms_per_event: float
    client_cpu_ms_per_event: float
    machine_busy_pct: float
    others_pct: float  # share of the machine's CPU time used by processes other than the benchmark's

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def eps(self) -> float:
        return self.events / self.seconds


def run_phase(
    name: str, server: Server, deliveries: list[Delivery], concurrency: int, db_name: str
) -> tuple[PhaseResult, list[Answer]]:
    host = f"127.0.0.1:{server.port}"
    raws = [d.raw(host) for d in deliveries]
    pids = server.worker_pids()
    before = cpu_snapshot(pids, db_name)
    answers, elapsed = asyncio.run(send_all(server.port, raws, concurrency))
    after = cpu_snapshot(pids, db_name)
    # A backend that connected during the phase counts from its start.
    postgres = sum(cpu - before.postgres.get(pid, 0.0) for pid, cpu in after.postgres.items())
    events = sum(d.events for d in deliveries)
    latencies = sorted(a.latency for a in answers)
    total = after.total - before.total
    ours = (after.server - before.server) + postgres + (after.client - before.client)
    cores_seconds = total / CLOCK_TICKS
    others = (after.busy - before.busy) / CLOCK_TICKS - ours
    result = PhaseResult(
        name=name,
        requests=len(deliveries),
        events=events,
        seconds=elapsed,
        p50_ms=1000 * percentile(latencies, 50),
        p99_ms=1000 * percentile(latencies, 99),
        server_cpu_ms_per_event=1000 * (after.server - before.server) / events,
        server_system_ms_per_event=1000 * (after.server_system - before.server_system) / events,
        postgres_cpu_ms_per_event=1000 * postgres / events,
        client_cpu_ms_per_event=1000 * (after.client - before.client) / events,
        machine_busy_pct=100 * (after.busy - before.busy) / total if total else float("nan"),
        others_pct=100 * max(others, 0.0) / cores_seconds if cores_seconds else float("nan"),
    )
    return result, answers


def verify_phase(name: str, answers: list[Answer], deliveries: list[Delivery], *, source, prefix: str) -> None:
    from feedback.models import FeedbackItem

    not_202 = [(i, a) for i, a in enumerate(answers) if a.status != 202]
    if not_202:
        statuses = Counter(a.status for _, a in not_202)
        i, first = not_202[0]
        raise BenchFailure(
            f"{name}: {len(not_202)} of {len(answers)} answers were not 202 ({dict(statuses)}); "
            f"first, request {i}: {first.status} {first.body[:300]!r}"
        )
    sent = sum(d.events for d in deliveries)
    accepted = sum(json.loads(a.body)["accepted"] for a in answers)
    rows = FeedbackItem.objects.filter(source=source, external_id__startswith=prefix).count()
    if accepted != sent or rows != sent:
        raise BenchFailure(f"{name}: sent {sent} events, the answers accepted {accepted}, the database holds {rows}")
    print(f"  check: all {len(answers)} answers were 202; the database holds {rows} rows = {sent} events sent  OK")


def client_phase(port: int, *, source, secret: str, prefix: str, args: argparse.Namespace, raw_eps: float) -> None:
    """Phase 3: the project's own client (stdlib urllib, one connection per request, signing each batch as it
    goes) against the pre-signed raw-socket batches of phase 2, in the same run."""
    from client.feedback_studio_client import FeedbackStudioClient
    from feedback.models import FeedbackItem

    print(f"\n== Phase 3: {args.client_events} events through client/feedback_studio_client.py, "
          f"batches of {args.batch_size}, one sender")
    events = [rating_event(f"{prefix}{n}", n) for n in range(args.client_events)]
    client = FeedbackStudioClient(f"http://127.0.0.1:{port}", source=source.slug, secret=secret,
                                  batch_size=args.batch_size, timeout=60)
    started = time.perf_counter()
    summary = client.send_events(events)
    elapsed = time.perf_counter() - started
    rows = FeedbackItem.objects.filter(source=source, external_id__startswith=prefix).count()
    retries = sum(response.attempts - 1 for response in summary.responses)
    if summary.accepted != len(events) or rows != len(events):
        raise BenchFailure(f"phase 3: sent {len(events)} events, accepted {summary.accepted}, the database holds {rows}")
    print(f"  {len(summary.responses)} batches, {len(events)} events in {elapsed:.2f} s: {len(events) / elapsed:,.0f} "
          f"events/s through the client ({retries} retries) vs {raw_eps:,.0f} events/s pre-signed raw batches "
          f"(phase 2, {args.concurrency} connections)")
    print(f"  check: the database holds {rows} rows = {len(events)} events sent  OK")


def print_phase(result: PhaseResult, *, unit: str) -> None:
    if unit == "request":
        print(f"  {result.requests} requests in {result.seconds:.2f} s: {result.rps:,.0f} requests/s "
              f"(= events/s); latency p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms")
    else:
        print(f"  {result.requests} batches, {result.events} events in {result.seconds:.2f} s: "
              f"{result.eps:,.0f} events/s ({result.rps:.1f} batches/s); per batch p50 {result.p50_ms:.1f} ms, "
              f"p99 {result.p99_ms:.1f} ms")
    print(f"  CPU: gunicorn workers {result.server_cpu_ms_per_event:.3f} ms/event "
          f"(of which kernel {result.server_system_ms_per_event:.3f}), PostgreSQL backends "
          f"{result.postgres_cpu_ms_per_event:.3f} ms/event, client {result.client_cpu_ms_per_event:.3f} ms/event")
    print(f"  machine: {result.machine_busy_pct:.0f}% of all cores busy, {result.others_pct:.0f}% of all cores used by "
          "processes outside this benchmark (they slow it down)")


def server_label(args: argparse.Namespace) -> str:
    return f"gunicorn -w {args.workers}" + (f" --threads {args.threads} (gthread)" if args.threads > 1 else " (sync)")


def minimal_phases(
    *, env: dict[str, str], secret: str, slug: str, args: argparse.Namespace, workdir: Path, run_id: str
) -> tuple[PhaseResult, PhaseResult]:
    """Phases 1 and 2 again against bench/minimal_ingest.py: same gunicorn, database, broker and requests.

    It runs after the project's phases, so its database is the warmer one (more rows, warm caches).
    """
    import psycopg

    from bench.minimal_ingest import SOURCE_SQL, TABLE, TABLES_SQL

    url = env["DATABASE_URL"]
    with psycopg.connect(url, autocommit=True) as conn:
        for sql in TABLES_SQL:
            conn.execute(sql)
        conn.execute(SOURCE_SQL, [slug, secret])

    def stored(prefix: str) -> int:
        with psycopg.connect(url) as conn:
            return conn.execute(f"SELECT count(*) FROM {TABLE} WHERE external_id LIKE %s", [prefix + "%"]).fetchone()[0]

    def check(name: str, answers: list[Answer], deliveries: list[Delivery], prefix: str) -> None:
        sent = sum(d.events for d in deliveries)
        statuses = Counter(a.status for a in answers)
        rows = stored(prefix)
        accepted = sum(json.loads(a.body)["accepted"] for a in answers if a.status == 202)
        if statuses != Counter({202: len(answers)}) or rows != sent or accepted != sent:
            raise BenchFailure(f"{name}: answers {dict(statuses)}, sent {sent} events, the table holds {rows}")
        print(f"  check: all {len(answers)} answers were 202; the table holds {rows} rows = {sent} events sent  OK")

    server = Server(
        env=env, port=free_port(), workers=args.workers, threads=args.threads,
        log_path=workdir / "minimal.log", app="bench.minimal_ingest:application",
    )
    try:
        server.wait_ready()
        print(f"\n== Reference: the minimal view (bench/minimal_ingest.py), {server_label(args)} "
              f"on 127.0.0.1:{server.port}")
        warm = deliveries_single(slug=slug, secret=secret, prefix=f"mwarm-{run_id}-", count=args.warmup)
        _, answers = run_phase("minimal warm-up", server, warm, args.concurrency, args.db_name)
        check("minimal warm-up", answers, warm, f"mwarm-{run_id}-")
        print(f"  phase 1 again: {args.single} single-event requests")
        singles = deliveries_single(slug=slug, secret=secret, prefix=f"m1-{run_id}-", count=args.single)
        single, answers = run_phase("minimal phase 1", server, singles, args.concurrency, args.db_name)
        print_phase(single, unit="request")
        check("minimal phase 1", answers, singles, f"m1-{run_id}-")
        print(f"  phase 2 again: {args.batches} batches of {args.batch_size} events")
        batches = deliveries_batch(slug=slug, secret=secret, prefix=f"m2-{run_id}-", batches=args.batches,
                                   size=args.batch_size)
        batch, answers = run_phase("minimal phase 2", server, batches, args.concurrency, args.db_name)
        print_phase(batch, unit="batch")
        check("minimal phase 2", answers, batches, f"m2-{run_id}-")
        return single, batch
    except BenchFailure as exc:
        raise BenchFailure(f"{exc}\nminimal view's log (tail):\n{server.log_tail()}") from None
    finally:
        server.stop()


def print_summary(
    single: PhaseResult, batch: PhaseResult, minimal: tuple[PhaseResult, PhaseResult] | None,
    args: argparse.Namespace, profiled: bool,
) -> None:
    note = " (under py-spy sampling: slower than without)" if profiled else ""
    print(f"\n== Summary{note}: {server_label(args)}, PostgreSQL, Redis broker, client on the same machine")
    print(f"  {'':28}{'ours':>12}{'minimal view':>14}{'ratio':>8}   target")
    rows = [("single events/s", single.rps, minimal[0].rps if minimal else None,
             f">= {TARGET_SINGLE_RATIO}x and >= {TARGET_SINGLE_EPS:,}/s"),
            ("batched events/s (x500)", batch.eps, minimal[1].eps if minimal else None, f">= {TARGET_BATCH_EPS:,}/s")]
    for label, ours, reference, target in rows:
        ratio = f"{ours / reference:.2f}x" if reference else "-"
        shown = f"{reference:,.0f}" if reference else "not run"
        print(f"  {label:28}{ours:>12,.0f}{shown:>14}{ratio:>8}   {target}")
    met_single = single.rps >= TARGET_SINGLE_EPS and (not minimal or single.rps >= TARGET_SINGLE_RATIO * minimal[0].rps)
    print(f"  single events: {'MET' if met_single else 'below'}; batches: "
          f"{'MET' if batch.eps >= TARGET_BATCH_EPS else 'below'}")
    print(f"  {'  p50 / p99 ms':28}{f'{single.p50_ms:.1f} / {single.p99_ms:.1f}':>12}"
          + (f"{f'{minimal[0].p50_ms:.1f} / {minimal[0].p99_ms:.1f}':>14}" if minimal else ""))
    print(f"  {'  p50 / p99 ms per batch':28}{f'{batch.p50_ms:.1f} / {batch.p99_ms:.1f}':>12}"
          + (f"{f'{minimal[1].p50_ms:.1f} / {minimal[1].p99_ms:.1f}':>14}" if minimal else ""))
    print(f"  {'gunicorn CPU ms/event':28}{f'{single.server_cpu_ms_per_event:.3f} / {batch.server_cpu_ms_per_event:.3f}':>12}"
          + (f"{f'{minimal[0].server_cpu_ms_per_event:.3f} / {minimal[1].server_cpu_ms_per_event:.3f}':>14}"
             if minimal else "")
          + "   (single / batched; all worker processes)")
    print(f"  {'PostgreSQL CPU ms/event':28}"
          f"{f'{single.postgres_cpu_ms_per_event:.3f} / {batch.postgres_cpu_ms_per_event:.3f}':>12}"
          + (f"{f'{minimal[0].postgres_cpu_ms_per_event:.3f} / {minimal[1].postgres_cpu_ms_per_event:.3f}':>14}"
             if minimal else "")
          + "   (the backends serving the app; WAL writer not included)")
    print(f"  other processes' load: {single.others_pct:.0f}% / {batch.others_pct:.0f}% of all cores during the "
          "phases; above a few % the figures are low and noisy, compare CPU ms/event instead")


# --- Main -------------------------------------------------------------------------


def on_alarm(signum, frame):
    raise BenchTimeout("the benchmark hit its global timeout")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(args.timeout)
    workdir = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    env = server_env(args.db_name, str(workdir / "data"))
    run_id = uuid.uuid4().hex[:8]
    server: Server | None = None
    spy: PySpy | None = None
    db_created = False
    profiling_spy = args.profile and not args.no_py_spy and py_spy_path() is not None
    try:
        print(f"== Setup: database {args.db_name}, broker {REDIS_URL}, {os.cpu_count()} cores")
        redis_client().flushdb()
        database_create(args.db_name)
        db_created = True
        migrate(env)
        django_setup(env)
        from django.db import connections

        from feedback import services

        source, secret = services.source_create(name=f"bench-{run_id}")
        connections.close_all()

        server = Server(
            env=env, port=free_port(), workers=args.workers, threads=args.threads, log_path=workdir / "gunicorn.log"
        )
        server.wait_ready()
        print(f"  {server_label(args)} on 127.0.0.1:{server.port} (workers {server.worker_pids()})")

        warm = deliveries_single(slug=source.slug, secret=secret, prefix=f"warm-{run_id}-", count=args.warmup)
        _, warm_answers = run_phase("warm-up", server, warm, args.concurrency, args.db_name)
        verify_phase("warm-up", warm_answers, warm, source=source, prefix=f"warm-{run_id}-")
        queued = report_queued((0, 0), args.warmup, "warm-up", single=True)  # db 15 was flushed at the start

        # Phase 1 ------------------------------------------------------------
        print(f"\n== Phase 1: {args.single} signed single-event requests, {args.concurrency} connections")
        prefix1 = f"p1-{run_id}-"
        singles = deliveries_single(slug=source.slug, secret=secret, prefix=prefix1, count=args.single)
        if profiling_spy:
            spy = PySpy(py_spy_path(), server.proc.pid, workdir / "single.pyspy")
        single, answers = run_phase("phase 1", server, singles, args.concurrency, args.db_name)
        if spy:
            spy.stop()
            spy = None
        print_phase(single, unit="request")
        verify_phase("phase 1", answers, singles, source=source, prefix=prefix1)
        queued = report_queued(queued, single.events, "phase 1", single=True)

        # Phase 2 ------------------------------------------------------------
        print(f"\n== Phase 2: {args.batches} batches of {args.batch_size} events, {args.concurrency} connections")
        prefix2 = f"p2-{run_id}-"
        batches = deliveries_batch(
            slug=source.slug, secret=secret, prefix=prefix2, batches=args.batches, size=args.batch_size
        )
        if profiling_spy:
            spy = PySpy(py_spy_path(), server.proc.pid, workdir / "batch.pyspy")
        batch, answers = run_phase("phase 2", server, batches, args.concurrency, args.db_name)
        if spy:
            spy.stop()
            spy = None
        print_phase(batch, unit="batch")
        verify_phase("phase 2", answers, batches, source=source, prefix=prefix2)
        report_queued(queued, batch.events, "phase 2")

        if args.client_events:
            client_phase(server.port, source=source, secret=secret, prefix=f"p3-{run_id}-", args=args, raw_eps=batch.eps)

        minimal = None
        if not args.no_minimal:
            minimal = minimal_phases(
                env=env, secret=secret, slug=source.slug, args=args, workdir=workdir, run_id=run_id
            )
        print_summary(single, batch, minimal, args, profiling_spy)

        if args.profile:
            print("\n== Profile: where the server's time goes")
            if profiling_spy:
                py_spy_report(workdir / "single.pyspy", "phase 1 (single events)", single.requests)
                py_spy_report(workdir / "batch.pyspy", "phase 2 (batches)", batch.requests)
            elif not args.no_py_spy:
                print("  py-spy not found (pip install py-spy into .venv to sample gunicorn); cProfile only")
            server.stop()
            server = None
            from config.wsgi import application

            prof_single = deliveries_single(
                slug=source.slug, secret=secret, prefix=f"prof-{run_id}-", count=args.profile_requests + 5
            )
            for d in prof_single[:5]:  # warm this process's connections outside the measurement
                call_wsgi(application, d)
            inprocess_run(application, prof_single[5:], "single events")
            prof_batches = deliveries_batch(
                slug=source.slug, secret=secret, prefix=f"prof-b-{run_id}-", batches=args.profile_batches,
                size=args.batch_size,
            )
            inprocess_run(application, prof_batches, f"batches of {args.batch_size}")
            from feedback.models import FeedbackItem

            stored = FeedbackItem.objects.filter(source=source, external_id__startswith="prof-").count()
            expected = args.profile_requests + 5 + args.profile_batches * args.batch_size
            if stored != expected:
                raise BenchFailure(f"in-process profile: sent {expected} events, the database holds {stored}")
            print(f"\n  check: the in-process runs stored {stored} rows = {expected} events sent  OK")
        return 0
    except BenchFailure as exc:
        report_failure(exc, server)
        return 1
    finally:
        if spy is not None:
            spy.stop()
        tear_down(server, (lambda: database_drop(args.db_name)) if db_created else None, args.db_name)
        try:
            redis_client().flushdb()
        except Exception as exc:
            print(f"could not flush Redis db 15: {exc}", file=sys.stderr)
        shutil.rmtree(workdir, ignore_errors=True)
        print("\n== Cleaned up: gunicorn stopped, database dropped, Redis db 15 flushed")


if __name__ == "__main__":
    ensure_project_python()
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    sys.exit(main())
