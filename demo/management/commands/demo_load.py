"""Load the seeded demo corpus: ratings for "coder" from its backend, dogfooding reports, and agent rollouts.

The corpus itself lives in demo/corpus.py; this command turns its
payloads into rows exactly as the webhook and the report API would, and
inserts them in chunks through the same service, so a load is idempotent
(equal external ids are duplicates) and queues processing after commit.
The rollouts for the rollout checks (`--rollouts N`, demo/rollouts.py) are
stored and checked beside them; with `--process` they are embedded and
sorted into the categories after the cluster run, so they leave the demo's
categories as the corpus makes them.
"""

import time

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from demo import corpus, signals
from demo.datasets import demo_datasets_export
from demo.rollouts import demo_rollouts_load
from demo.signals import signals_store, summary_line
from feedback.models import FeedbackItem
from labeling.clustering.runs import (
    RunAlreadyActive,
    cluster_run_execute,
    cluster_run_start,
)
from labeling.models import ClusterRun

# Enough rollouts for 2.2's planted rise in reading git history to be tested and flagged on /compare/ (with 600
# it is 10 against 0, under the expected-count rule), few enough to keep `make run` quick (about 10 s).
DEFAULT_ROLLOUTS = 1000


class Command(BaseCommand):
    help = "Load a seeded, deterministic demo corpus of ratings and dogfooding reports for a coding agent."

    def add_arguments(self, parser):
        parser.add_argument("--count", type=int, default=2400, help="how many signals (default 2400)")
        parser.add_argument("--seed", type=int, default=7, help="the same seed always gives the same corpus")
        parser.add_argument(
            "--if-empty", action="store_true", help="do nothing when any feedback item exists already"
        )
        parser.add_argument(
            "--process",
            action="store_true",
            help="embed and cluster the corpus here and now, so the app starts with categories",
        )
        parser.add_argument(
            "--rollouts",
            type=int,
            default=DEFAULT_ROLLOUTS,
            metavar="N",
            help=f"also load N agent rollouts for the rollout checks, checked here and now "
            f"(default {DEFAULT_ROLLOUTS}; 0: none)",
        )

    def handle(self, *args, count, seed, if_empty, process, rollouts, **options):
        if count < 1:
            raise CommandError("--count must be at least 1")
        if rollouts < 0:
            raise CommandError("--rollouts must be 0 or more")
        if if_empty:
            existing = FeedbackItem.objects.count()
            if existing:
                self.stdout.write(f"demo_load: {existing} feedback items exist already; nothing loaded (--if-empty)")
                return
        started = time.monotonic()
        demo_signals = corpus.generate(count=count, seed=seed, anchor=corpus.anchor_for(timezone.now()))
        with transaction.atomic():
            stored = signals_store(demo_signals)
        self.stdout.write(summary_line(demo_signals, stored=stored, seed=seed, seconds=time.monotonic() - started))
        if process:
            self.process_corpus(rollouts=rollouts, seed=seed)
        else:
            # The worker embeds and sorts them with the corpus.
            self.rollouts_load(count=rollouts, seed=seed, process=False)

    def process_corpus(self, *, rollouts: int, seed: int) -> None:
        """Embed what waits and run one clustering pass, then load the rollouts and sort them in, in this process.

        The worker would do the same a little later; doing it here means the
        first page a person opens already shows categories. Both paths are
        idempotent, so the tasks queued by the load find nothing left to do.
        The rollouts come after the run, through the path every new signal
        takes (embed, then the nearest category), and before the exports.
        """
        started = time.monotonic()
        waiting = signals.received_ids()
        signals.embed_and_assign(waiting)
        try:
            run = cluster_run_start(trigger=ClusterRun.Trigger.COMMAND, enqueue=False)
        except RunAlreadyActive:
            self.stdout.write("demo_load: a cluster run is going already; categories come when it ends")
            self.rollouts_load(count=rollouts, seed=seed, process=True)
            return
        cluster_run_execute(run_id=run.id)
        run.refresh_from_db()
        self.stdout.write(
            f"demo_load: embedded {len(waiting)} items, {run.counts['clusters']} categories, "
            f"{run.counts['unassigned']} unassigned | {time.monotonic() - started:.1f}s"
        )
        self.rollouts_load(count=rollouts, seed=seed, process=True)
        # One eval and one train dataset over the demo data, each exported once.
        for line in demo_datasets_export():
            self.stdout.write(line)

    def rollouts_load(self, *, count: int, seed: int, process: bool) -> None:
        """Store and check the demo's rollouts (demo/rollouts.py); with `process`, embed them and sort them in."""
        if count == 0:
            return
        started = time.monotonic()
        loaded = demo_rollouts_load(count=count, seed=seed)
        self.stdout.write(loaded.summary(command="demo_load", seconds=time.monotonic() - started))
        if not process:
            return
        started = time.monotonic()
        waiting = signals.received_ids(among=loaded.item_ids)
        placed = signals.embed_and_assign(waiting)
        self.stdout.write(
            f"demo_load: embedded {len(waiting)} rollouts, {placed} sorted into categories | "
            f"{time.monotonic() - started:.1f}s"
        )
