"""Embed again every item whose text was made by an older recipe (feedback.text.EMBED_RECIPE)."""

from django.core.management.base import BaseCommand

from feedback.pipeline import items_reembed
from feedback.text import EMBED_RECIPE


class Command(BaseCommand):
    help = "Re-embed items embedded under an older text recipe, so the next cluster run reads one recipe."

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=2000, help="items per batch (default 2000)")

    def handle(self, *args, batch: int, **options):
        total = 0
        while done := items_reembed(limit=batch):
            total += done
            self.stdout.write(f"re-embedded {total} items")
        self.stdout.write(self.style.SUCCESS(f"{total} items re-embedded; every processed item has recipe {EMBED_RECIPE}"))
