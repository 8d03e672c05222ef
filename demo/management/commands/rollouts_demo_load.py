"""Load the demo's agent rollouts for the rollout checks, beside the demo corpus (demo/rollouts.py).

`demo_load` loads the same rollouts (its `--rollouts N`); this command adds
more of them, or loads them into a database that has the corpus already.
Idempotent: equal external ids are duplicates.
"""

import time

from django.core.management.base import BaseCommand, CommandError

from demo.rollouts import demo_rollouts_load


class Command(BaseCommand):
    help = "Load the demo's agent rollouts (hacks at per-version rates, near misses) and run the checks on them."

    def add_arguments(self, parser):
        parser.add_argument("--count", type=int, default=3000, help="how many rollouts (default 3000)")
        parser.add_argument("--seed", type=int, default=7, help="the same seed always gives the same rollouts")

    def handle(self, *args, count, seed, **options):
        if count < 1:
            raise CommandError("--count must be at least 1")
        started = time.monotonic()
        loaded = demo_rollouts_load(count=count, seed=seed)
        self.stdout.write(loaded.summary(command="rollouts_demo_load", seconds=time.monotonic() - started))
