from django.core.management.base import BaseCommand, CommandError

from labeling import counts


class Command(BaseCommand):
    help = "Recount the reviewer pages' daily counts from the items (or, with --check, compare them with a recount)."

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the counts are off")

    def handle(self, *args, check, **options):
        if check:
            checked = 0
            for daily in (True, False):
                stored, recount = counts.counts_stored(daily=daily), counts.counts_recount(daily=daily)
                off = {key for key in stored.keys() | recount.keys() if stored.get(key, 0) != recount.get(key, 0)}
                if off:
                    raise CommandError(
                        f"{len(off)} of {len(recount)} {'daily' if daily else 'total'} counts differ from a recount, "
                        f"e.g. {sorted(off, key=str)[0]}; run manage.py counts_rebuild"
                    )
                checked += len(recount)
            self.stdout.write(f"counts: all {checked} equal a recount")
            return
        keys = counts.counts_rebuild()
        self.stdout.write(f"counts: rebuilt {keys} daily counts from {counts.counted_total():,} items")
