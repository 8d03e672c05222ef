"""The reference bench/ingest.py measures the project against: a minimal Django view doing only the essentials.

It takes the same signed requests on the same path, under the same gunicorn,
against the same PostgreSQL database and Redis broker: refuse a body over the
size limit, look the source's secret up by the slug in the path (one SELECT),
check the Standard Webhooks signature and its timestamp, parse the JSON, one
INSERT of the events (duplicates recognised by a unique key per source), and
after commit one Celery message per request carrying the stored ids. Nothing
else: no middleware, no validation of the event's fields, no scrubbing.
Answers 202 {"accepted": n, "duplicates": m}.

    gunicorn bench.minimal_ingest:application     # env: DATABASE_URL, REDIS_URL

Its tables are `bench_minimal_source` and `bench_minimal_event`; bench/ingest.py
creates them (TABLES_SQL) and adds the source (SOURCE_SQL).
"""

import base64
import hashlib
import hmac
import json
import os
import time

import dj_database_url
from celery import Celery
from django.conf import settings

TABLE = "bench_minimal_event"
TABLES_SQL = (
    "CREATE TABLE IF NOT EXISTS bench_minimal_source (id serial PRIMARY KEY, slug text UNIQUE, secret text)",
    f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigserial PRIMARY KEY, source_id int, external_id text, body jsonb, "
    "UNIQUE (source_id, external_id))",
)
SOURCE_SQL = "INSERT INTO bench_minimal_source (slug, secret) VALUES (%s, %s) ON CONFLICT (slug) DO NOTHING"
MAX_BODY_BYTES = 5 * 1024 * 1024
QUEUE = "bench-minimal"  # not the project's queues: their counts stay the project's own
TOLERANCE_SECONDS = 300

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="bench-minimal",
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        MIDDLEWARE=[],
        INSTALLED_APPS=[],
        # The project's connection settings: persistent connections, health-checked.
        DATABASES={"default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=60,
                                                    conn_health_checks=True)},
    )

import django  # noqa: E402

django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402

broker = Celery("bench-minimal", broker=os.environ.get("REDIS_URL", "memory://"), set_as_current=False)


def _signed(request, key: bytes) -> bool:
    msg_id = request.headers.get("webhook-id", "")
    timestamp = request.headers.get("webhook-timestamp", "")
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
        return False
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + request.body, hashlib.sha256).digest()
    expected = base64.b64encode(digest)
    offered = [part[3:].encode() for part in request.headers.get("webhook-signature", "").split() if part[:3] == "v1,"]
    return any(hmac.compare_digest(expected, candidate) for candidate in offered)


@csrf_exempt
def events(request, slug: str):
    if request.method != "POST":
        return JsonResponse({"error": "POST only"}, status=405)
    if int(request.headers.get("Content-Length") or 0) > MAX_BODY_BYTES:
        return JsonResponse({"error": "too large"}, status=413)
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, secret FROM bench_minimal_source WHERE slug = %s", [slug])
        source = cursor.fetchone()
    if source is None:
        return JsonResponse({"error": "no such source"}, status=404)
    if not _signed(request, base64.b64decode(source[1].removeprefix("whsec_"))):
        return JsonResponse({"error": "bad signature"}, status=401)
    try:
        payload = json.loads(request.body)
    except ValueError:
        return JsonResponse({"error": "not JSON"}, status=400)
    batch = payload["events"] if isinstance(payload, dict) and "events" in payload else [payload]
    # A single event without an id takes the webhook-id, as the project's receiver does.
    default_id = request.headers.get("webhook-id", "") if len(batch) == 1 else None
    rows = [
        (source[0], str(event.get("id") or default_id), json.dumps(event))
        for event in batch
        if isinstance(event, dict) and (event.get("id") or default_id)
    ]
    if not rows:
        return JsonResponse({"error": "no event with an id"}, status=422)
    with transaction.atomic(), connection.cursor() as cursor:
        values = ", ".join(["(%s, %s, %s)"] * len(rows))
        cursor.execute(
            f"INSERT INTO {TABLE} (source_id, external_id, body) VALUES {values} "
            "ON CONFLICT (source_id, external_id) DO NOTHING RETURNING id",
            [value for row in rows for value in row],
        )
        ids = [row[0] for row in cursor.fetchall()]
        if ids:
            transaction.on_commit(lambda: broker.send_task("embed_items", args=[ids], queue=QUEUE))
    return JsonResponse({"accepted": len(ids), "duplicates": len(rows) - len(ids)}, status=202)


urlpatterns = [path("api/v1/sources/<slug:slug>/events", events)]
application = get_wsgi_application()
