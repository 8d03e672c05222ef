"""Start the web app the way production runs it: `make serve` calls this after migrating.

Steps:
1. Django's deployment checks at warning level: with DEBUG on, cookies that
   travel over plain http, no HSTS or a weak SECRET_KEY the server does not
   start, rather than serving insecurely without anyone noticing.
2. collectstatic: the hashed, gzipped files WhiteNoise serves, and the
   manifest pages need to name them.
3. gunicorn (gunicorn.conf.py) in place of this process, so a supervisor's
   signals reach it directly.

Celery's worker and beat run as their own processes beside it.
"""

import os
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connections


def gunicorn_argv(*, binds: list[str]) -> list[str]:
    return [
        sys.executable, "-m", "gunicorn",
        "--config", str(settings.BASE_DIR / "gunicorn.conf.py"),
        *(f"--bind={bind}" for bind in binds),
        "config.wsgi",
    ]


class Command(BaseCommand):
    help = "Check the production settings, collect the static files and start gunicorn."
    # The deployment checks below are stricter than the ones every command runs.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument(
            "--bind", action="append", default=[],
            help="host:port to listen on, repeatable (default: gunicorn's, 127.0.0.1:8000, or 0.0.0.0:$PORT)",
        )

    def handle(self, *args, bind: list[str], verbosity: int, **options):
        call_command("check", deploy=True, fail_level="WARNING")
        call_command("collectstatic", interactive=False, verbosity=verbosity)
        # gunicorn's workers open their own connections; none is inherited half-used.
        connections.close_all()
        sys.stdout.flush()
        sys.stderr.flush()
        os.chdir(settings.BASE_DIR)
        os.execv(sys.executable, gunicorn_argv(binds=bind))
