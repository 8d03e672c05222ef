from django.core.management.base import BaseCommand

from feedback.models import Source


class Command(BaseCommand):
    help = "Store every webhook secret encrypted under the current SECRET_KEY (after a key rotation)."

    def handle(self, *args, **options):
        sources = list(Source.objects.all())  # read with the fallback keys too
        for source in sources:
            source.save(update_fields=["signing_secret", "previous_signing_secret"])
        self.stdout.write(f"{len(sources)} sources' secrets are encrypted under the current SECRET_KEY")
