"""gunicorn's settings, read from the working directory: `gunicorn config.wsgi`.

gthread workers: a sync worker idles while PostgreSQL flushes its log for
each committed webhook (about 4 ms here) and serves nothing meanwhile, so two
sync workers cannot keep two cores busy; threads overlap those waits, and
keep-alive spares senders a TCP handshake per event.
"""

import os

workers = int(os.environ.get("WEB_CONCURRENCY", "2"))  # one per core
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS", "4"))  # each holds its own database connection

# Behind the TLS proxy, gunicorn marks a request https when the proxy says so
# in X-Forwarded-Proto, and believes that header only from FORWARDED_ALLOW_IPS
# (gunicorn's own variable; loopback by default). Set it to the proxy's address
# when the proxy runs on another machine, or every request looks like plain
# http and is redirected to https again.
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1")


def post_worker_init(worker) -> None:
    """Once a worker has loaded the app: import every view (by loading the URLconf), then set aside what
    is loaded and collect young objects less often (core.collector). A batch of 500 events allocates
    some 100,000 objects that live until it is stored; with the collector's defaults a third of the
    batch's CPU went to collections."""
    from django.urls import get_resolver

    from core.collector import collect_less_often_from_now

    get_resolver().url_patterns  # noqa: B018
    collect_less_often_from_now()
