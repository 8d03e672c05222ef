"""Run the rollout checks over items stored before the checks existed, or after they changed."""

import time

from django.core.management.base import BaseCommand, CommandError

from feedback.models import FeedbackItem
from rollouts import services
from rollouts.checks import CHECKS_VERSION

CHUNK = 500


class Command(BaseCommand):
    help = "Run the rollout checks over existing items (those not checked under the current checks)."

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="check every item again (after adding a custom check)")
        parser.add_argument("--source", default="", help="only this source's items (its slug)")
        parser.add_argument("--limit", type=int, default=0, help="at most this many items")

    def handle(self, *args, all, source, limit, **options):
        if limit < 0:
            raise CommandError("--limit must be 0 (no limit) or more")
        items = FeedbackItem.objects.order_by("id")
        if source:
            items = items.filter(source__slug=source)
            if not items.exists():
                raise CommandError(f"no items of a source with slug {source!r}")
        if not all:
            items = items.exclude(checked_rollout__checks_version=CHECKS_VERSION)
        ids = list(items.values_list("id", flat=True)[: limit or None])
        started = time.monotonic()
        totals = services.CheckOutcome()
        for start in range(0, len(ids), CHUNK):
            outcome = services.items_check(item_ids=ids[start : start + CHUNK], force=all)
            totals.checked += outcome.checked
            totals.flags_added += outcome.flags_added
            totals.flags_removed += outcome.flags_removed
        self.stdout.write(
            f"rollouts_check: {totals.checked} items checked, {totals.flags_added} flags added, "
            f"{totals.flags_removed} pending flags dropped | {time.monotonic() - started:.1f}s"
        )
