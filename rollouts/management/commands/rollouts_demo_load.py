"""Load the demo's agent rollouts for the rollout checks, beside the demo corpus (demo_load).

Rollouts that commit each kind of hack at rates that differ per model
version, and clean ones that come close (config/demo_corpus.generate_rollouts),
stored as the webhook stores rating events, for the demo's product source.
The source's allow-list is set to the package registries its agents use, and
the checks run here and now, so /rollouts/, the comparison and the overview
show flag rates at once. Idempotent: equal external ids are duplicates.
"""

import time
import uuid

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from config import demo_corpus
from config.management.commands.demo_load import rating_item
from feedback import services as feedback_services
from feedback.models import FeedbackItem, Source
from rollouts import services

CHUNK = 500


class Command(BaseCommand):
    help = "Load the demo's agent rollouts (hacks at per-version rates, near misses) and run the checks on them."

    def add_arguments(self, parser):
        parser.add_argument("--count", type=int, default=3000, help="how many rollouts (default 3000)")
        parser.add_argument("--seed", type=int, default=7, help="the same seed always gives the same rollouts")

    def handle(self, *args, count, seed, **options):
        if count < 1:
            raise CommandError("--count must be at least 1")
        started = time.monotonic()
        rollouts = demo_corpus.generate_rollouts(count=count, seed=seed, anchor=demo_corpus.anchor_for(timezone.now()))
        source = Source.objects.filter(name=demo_corpus.PRODUCT_SOURCE_NAME).first()
        if source is None:
            source, _ = feedback_services.source_create(name=demo_corpus.PRODUCT_SOURCE_NAME, kind=Source.Kind.PRODUCT)
        services.allowed_hosts_set(source=source, hosts=list(demo_corpus.ROLLOUT_ALLOWED_HOSTS))
        stored = 0
        with transaction.atomic():
            for start in range(0, len(rollouts), CHUNK):
                receipt_id = uuid.uuid4()
                items = [
                    rating_item(source=source, payload=rollout.payload, receipt_id=receipt_id)
                    for rollout in rollouts[start : start + CHUNK]
                ]
                stored += len(feedback_services.items_insert_new(items=items, receipt_id=receipt_id))
        ids = list(
            FeedbackItem.objects.filter(source=source, external_id__in=[r.external_id for r in rollouts]).values_list(
                "id", flat=True
            )
        )
        outcome = services.CheckOutcome()
        for start in range(0, len(ids), CHUNK):
            step = services.items_check(item_ids=ids[start : start + CHUNK])
            outcome.checked += step.checked
            outcome.flags_added += step.flags_added
        hacks = sum(len(rollout.hacks) for rollout in rollouts)
        self.stdout.write(
            f"rollouts_demo_load: {len(rollouts)} rollouts (seed {seed}), {stored} new, {hacks} planted hacks | "
            f"{outcome.checked} checked, {outcome.flags_added} flags | {time.monotonic() - started:.1f}s"
        )
