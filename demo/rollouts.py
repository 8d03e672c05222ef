"""The demo's agent rollouts for the rollout checks, stored and checked: what `demo_load` and
`rollouts_demo_load` both load.

Rollouts that commit each kind of hack at rates that differ per model
version, and clean ones that come close (demo/corpus.py, generate_rollouts),
stored as the webhook stores rating events, for the demo's product source.
The source's allow-list is set to the package registries its agents use, and
the checks run here and now, so /rollouts/, the comparison and the overview
show flag rates at once. Idempotent: equal external ids are duplicates, and
checked items are not checked again.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from demo import corpus
from demo.signals import rating_item
from feedback import services as feedback_services
from feedback.models import FeedbackItem, Source
from rollouts import services

CHUNK = 500


@dataclass
class DemoRollouts:
    """What one load did: rollouts generated, stored (new), planted hacks, checked, flags added."""

    seed: int
    rollouts: int = 0
    stored: int = 0
    hacks: int = 0
    checked: int = 0
    flags: int = 0
    # Every loaded rollout's item, new or not, in the order generated.
    item_ids: list[int] = field(default_factory=list)

    def summary(self, *, command: str, seconds: float) -> str:
        return (
            f"{command}: {self.rollouts} rollouts (seed {self.seed}), {self.stored} new, {self.hacks} planted hacks | "
            f"{self.checked} checked, {self.flags} flags | {seconds:.1f}s"
        )


def demo_rollouts_load(*, count: int, seed: int, now: datetime | None = None) -> DemoRollouts:
    """Store the first `count` demo rollouts of `seed` for the product source and run the checks on them.

    Steps: generate them (anchored like the demo corpus, so they share its days); find or make the
    product source and set its allow-list; insert the new ones in chunks, each with a fresh receipt,
    in one transaction (processing is queued after commit, as for any ingest); check them in chunks.
    """
    rollouts = corpus.generate_rollouts(count=count, seed=seed, anchor=corpus.anchor_for(now or timezone.now()))
    source = Source.objects.filter(name=corpus.PRODUCT_SOURCE_NAME).first()
    if source is None:
        source, _ = feedback_services.source_create(name=corpus.PRODUCT_SOURCE_NAME, kind=Source.Kind.PRODUCT)
    services.allowed_hosts_set(source=source, hosts=list(corpus.ROLLOUT_ALLOWED_HOSTS))
    loaded = DemoRollouts(seed=seed, rollouts=len(rollouts), hacks=sum(len(rollout.hacks) for rollout in rollouts))
    with transaction.atomic():
        for start in range(0, len(rollouts), CHUNK):
            # items_insert_new tells new rows from duplicates by the receipt: it must never repeat.
            receipt_id = uuid.uuid4()
            items = [
                rating_item(source=source, payload=rollout.payload, receipt_id=receipt_id)
                for rollout in rollouts[start : start + CHUNK]
            ]
            loaded.stored += len(feedback_services.items_insert_new(items=items, receipt_id=receipt_id))
    ids = dict(
        FeedbackItem.objects.filter(source=source, external_id__in=[r.external_id for r in rollouts]).values_list(
            "external_id", "id"
        )
    )
    loaded.item_ids = [ids[rollout.external_id] for rollout in rollouts if rollout.external_id in ids]
    for start in range(0, len(loaded.item_ids), CHUNK):
        step = services.items_check(item_ids=loaded.item_ids[start : start + CHUNK])
        loaded.checked += step.checked
        loaded.flags += step.flags_added
    return loaded
