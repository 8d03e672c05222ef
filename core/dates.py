"""Days as the database compares them: local midnights, half-open windows."""

from datetime import date, datetime, time, timedelta

from django.utils import timezone


def day_start(day: date) -> datetime:
    """Midnight of `day` in the current time zone: `occurred_at >= it` compares the column
    as stored (an index can serve it), where `occurred_at__date >= day` converts every row."""
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


def day_window(date_from: date, date_to: date) -> tuple[datetime, datetime]:
    """[midnight of date_from, midnight after date_to): both days whole."""
    return day_start(date_from), day_start(date_to + timedelta(days=1))


def today_start(now: datetime | None = None) -> datetime:
    """Midnight of today (of `now`'s day), local time."""
    return day_start(timezone.localdate(now or timezone.now()))
