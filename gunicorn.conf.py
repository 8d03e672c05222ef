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
