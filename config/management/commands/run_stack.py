"""Start the web server, a Celery worker and Celery beat together; Ctrl-C stops all three."""

import ctypes
import signal
import subprocess
import sys
import time

from django.core.management.base import BaseCommand

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    # If this launcher is killed outright, the kernel stops the children too,
    # so no worker is left running on its own.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Command(BaseCommand):
    help = "Run the whole app: web server, Celery worker (default and embed queues) and Celery beat."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000")
        parser.add_argument("--concurrency", default="2")

    def handle(self, *args, addr, concurrency, **options):
        python = sys.executable
        commands = {
            "worker": [python, "-m", "celery", "-A", "config", "worker", "-Q", "default,embed",
                       "-c", concurrency, "--loglevel=INFO", "-n", "worker@%h"],
            "beat": [python, "-m", "celery", "-A", "config", "beat", "--loglevel=INFO",
                     "--schedule", "data/celerybeat-schedule"],
            "web": [python, "manage.py", "runserver", addr, "--noreload"],
        }
        processes = {name: subprocess.Popen(cmd, preexec_fn=die_with_parent) for name, cmd in commands.items()}
        self.stdout.write(f"Running on http://{addr}/  (Ctrl-C stops web, worker and beat)")

        stopping = False

        def stop(signum, frame):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while not stopping:
                for name, process in processes.items():
                    if process.poll() is not None:
                        self.stderr.write(f"{name} exited with code {process.returncode}; stopping the others")
                        stopping = True
                time.sleep(0.5)
        finally:
            for process in processes.values():
                if process.poll() is None:
                    process.terminate()
            deadline = time.time() + 15
            for process in processes.values():
                try:
                    process.wait(timeout=max(0.1, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    process.kill()
