"""Load the seeded demo corpus: ratings for "coder" from its backend, dogfooding reports, and agent rollouts.

The corpus itself lives in config/demo_corpus.py; this command turns its
payloads into rows exactly as the webhook and the report API would, and
inserts them in chunks through the same service, so a load is idempotent
(equal external ids are duplicates) and queues processing after commit.
The rollouts for the rollout checks (`--rollouts N`, rollouts.demo) are
stored and checked beside them; with `--process` they are embedded and
sorted into the categories after the cluster run, so they leave the demo's
categories as the corpus makes them.
"""

import time
import uuid
from collections.abc import Iterator, Sequence

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from config import demo_corpus
from config.demo_corpus import DemoSignal
from feedback import services
from feedback.models import FeedbackItem, Source
from feedback.schemas import RatingEvent, ReportIn
from labeling import services as labeling_services
from labeling.models import ClusterRun

CHUNK_SIZE = 500
EMBED_CHUNK = 256
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
        signals = demo_corpus.generate(count=count, seed=seed, anchor=demo_corpus.anchor_for(timezone.now()))
        with transaction.atomic():
            stored = signals_store(signals)
        self.stdout.write(summary_line(signals, stored=stored, seed=seed, seconds=time.monotonic() - started))
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
        waiting = _received_ids()
        _embed_and_assign(waiting)
        try:
            run = labeling_services.cluster_run_start(trigger=ClusterRun.Trigger.COMMAND, enqueue=False)
        except labeling_services.RunAlreadyActive:
            self.stdout.write("demo_load: a cluster run is going already; categories come when it ends")
            self.rollouts_load(count=rollouts, seed=seed, process=True)
            return
        labeling_services.cluster_run_execute(run_id=run.id)
        run.refresh_from_db()
        self.stdout.write(
            f"demo_load: embedded {len(waiting)} items, {run.counts['clusters']} categories, "
            f"{run.counts['unassigned']} unassigned | {time.monotonic() - started:.1f}s"
        )
        self.rollouts_load(count=rollouts, seed=seed, process=True)
        # One eval and one train dataset over the demo data, each exported once (exports/demo.py).
        from exports.demo import demo_datasets_export

        for line in demo_datasets_export():
            self.stdout.write(line)

    def rollouts_load(self, *, count: int, seed: int, process: bool) -> None:
        """Store and check the demo's rollouts (rollouts.demo); with `process`, embed them and sort them in."""
        if count == 0:
            return
        # rollouts.demo builds its rows with this module's rating_item: imported here, once this module is loaded.
        from rollouts.demo import demo_rollouts_load

        started = time.monotonic()
        loaded = demo_rollouts_load(count=count, seed=seed)
        self.stdout.write(loaded.summary(command="demo_load", seconds=time.monotonic() - started))
        if not process:
            return
        started = time.monotonic()
        waiting = _received_ids(among=loaded.item_ids)
        placed = _embed_and_assign(waiting)
        self.stdout.write(
            f"demo_load: embedded {len(waiting)} rollouts, {placed} sorted into categories | "
            f"{time.monotonic() - started:.1f}s"
        )


def _received_ids(*, among: Sequence[int] | None = None) -> list[int]:
    """The items still waiting to be embedded (of `among`, when given), oldest first."""
    waiting = FeedbackItem.objects.filter(status=FeedbackItem.Status.RECEIVED)
    if among is not None:
        waiting = waiting.filter(id__in=list(among))
    return list(waiting.order_by("id").values_list("id", flat=True))


def _embed_and_assign(item_ids: Sequence[int]) -> int:
    """Embed the items and sort them into the nearest open category, as the worker does; how many got one."""
    placed = 0
    for chunk in _chunks(item_ids, EMBED_CHUNK):
        placed += labeling_services.items_assign(item_ids=services.items_embed(item_ids=list(chunk)))
    return placed


def signals_store(signals: Sequence[DemoSignal]) -> int:
    """Insert the signals that are new; returns how many were."""
    product = Source.objects.filter(name=demo_corpus.PRODUCT_SOURCE_NAME).first()
    if product is None:
        product, _ = services.source_create(name=demo_corpus.PRODUCT_SOURCE_NAME, kind=Source.Kind.PRODUCT)
    builders = (
        (product, "rating", rating_item),
        (services.dogfood_form_source(), "report", report_item),
    )
    stored = 0
    for source, kind, build in builders:
        payloads = [signal.payload for signal in signals if signal.kind == kind]
        for chunk in _chunks(payloads, CHUNK_SIZE):
            # A fresh receipt per chunk: items_insert_new tells new rows from
            # duplicates by it, so it must never repeat between loads.
            receipt_id = uuid.uuid4()
            items = [build(source=source, payload=payload, receipt_id=receipt_id) for payload in chunk]
            stored += len(services.items_insert_new(items=items, receipt_id=receipt_id))
    return stored


def rating_item(*, source: Source, payload: dict, receipt_id: uuid.UUID) -> FeedbackItem:
    """The row the webhook stores for this event (validated by the same schema)."""
    event = RatingEvent.model_validate(payload)
    return services.rating_item_build(source=source, event=event, raw=payload, receipt_id=receipt_id)


def report_item(*, source: Source, payload: dict, receipt_id: uuid.UUID) -> FeedbackItem:
    """The row services.report_create stores for this report."""
    report = ReportIn.model_validate(payload)
    return services.report_item_build(source=source, report=report, raw=payload, receipt_id=receipt_id)


def summary_line(signals: Sequence[DemoSignal], *, stored: int, seed: int, seconds: float) -> str:
    counts = demo_corpus.summarize(signals)
    kinds = ", ".join(f"{kind} {counts['kinds'][kind]}" for kind in ("rating", "report"))
    ratings = ", ".join(f"{rating} {counts['ratings'][rating]}" for rating in ("up", "down"))
    versions = ", ".join(f"{demo_corpus.MODEL_NAME}-{v} {counts['versions'][v]}" for v in demo_corpus.VERSIONS)
    return (
        f"demo_load: {len(signals)} signals (seed {seed}), {stored} new | {kinds} | {ratings} | "
        f"{len(counts['themes'])} themes | {versions} | {seconds:.1f}s"
    )


def _chunks(values: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(values), size):
        yield values[start : start + size]
