"""Real server processes for the tests: the test database's URL, a free port, waiting, starting and stopping;
and a receiver of outgoing HTTP posts."""

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
from django.conf import settings
from django.db import connection

from config.celery import app as celery_app

ROOT = Path(__file__).resolve().parent.parent


def database_url() -> str:
    """The test database as a DATABASE_URL, for a process started beside the tests."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def process_stop(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if it has not ended within 15 s."""
    process.terminate()
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


@contextmanager
def gunicorn_serving(*, env: dict, log_path: Path, args: tuple[str, ...] = ()) -> Iterator[str]:
    """gunicorn (the project's gunicorn.conf.py) serving `env`'s database on a free port; yields its base URL.

    It counts as up once the webhook endpoint answers 404 for an unknown
    source. On the way out it stops, and the tasks it queued (no worker runs
    here) are dropped.
    """
    env = dict(env, REDIS_URL=settings.REDIS_URL) if settings.REDIS_URL else env
    port = free_port()
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}", *args],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert process.poll() is None, log_path.read_text()[-3000:]
        try:
            return httpx.post(f"{base_url}/api/v1/sources/no-such-source/events", content=b"{}").status_code == 404
        except httpx.HTTPError:
            return False

    try:
        wait_for(answers, 30, "gunicorn to answer")
        yield base_url
    finally:
        process_stop(process)
        if settings.REDIS_URL:
            celery_app.control.purge()


def needs_postgresql():
    """Skip on SQLite where a test is about PostgreSQL's concurrency; in CI (which runs PostgreSQL) fail instead."""
    import pytest

    if connection.vendor != "postgresql":
        if os.environ.get("CI"):
            pytest.fail("this test needs PostgreSQL (DATABASE_URL=postgres://...)")
        pytest.skip("row locks are PostgreSQL's; SQLite runs one writer at a time")


def http_serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """A threaded HTTP server on a free 127.0.0.1 port, serving in the background (stop: http_stop)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def http_stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


class Receiver:
    """An HTTP server that records each POST and answers with the next status of `statuses` (then the last)."""

    def __init__(self, statuses=(200,), body: bytes = b"ok") -> None:
        self.statuses = list(statuses)
        self.body = body
        self.requests: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                receiver.requests.append({"headers": dict(self.headers), "body": self.rfile.read(length), "path": self.path})
                index = min(len(receiver.requests) - 1, len(receiver.statuses) - 1)
                self.send_response(receiver.statuses[index])
                self.send_header("content-length", str(len(receiver.body)))
                self.end_headers()
                self.wfile.write(receiver.body)

            def log_message(self, *args):
                pass

        self.server = http_serve(Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/feedback?token=abc"

    def close(self) -> None:
        http_stop(self.server)
