"""What is worth telling: the events other apps report and the periodic checks.

The hooks (`export_version_made`, `export_failed`, `cluster_run_done`) are
called from one line in the code that made the change. They never raise: a
notification that cannot be written is logged, and the export or cluster run
it was about carries on as if nobody listened. Text leaving the app (errors,
names) is scrubbed, as on every page.

The checks (`regressions_check`, `pipeline_failures_check`) run on Celery
beat and keep their own state, so each piece of news is sent once. A pinned
comparison's news covers its areas, its categories and its rollout checks.
"""

from __future__ import annotations

import logging
from datetime import date, datetime, timedelta
from functools import wraps

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from feedback import custom_patterns
from feedback.scrubber import scrub
from notifications.models import CheckMark, Event, Notification, RegressionWatch
from notifications.services import notify

logger = logging.getLogger(__name__)

# Items named in one pipeline-failure message; the count covers the rest.
FAILED_ITEMS_LISTED = 5


def _scrubbed(text: str, limit: int = 500) -> str:
    return scrub(text or "", extra_patterns=custom_patterns.all_sources()).text[:limit]


def _link(path: str) -> str:
    return f"{settings.SITE_URL}{path}"


def _never_raises(hook):
    @wraps(hook)
    def wrapped(*args, **kwargs):
        try:
            # A savepoint: a failed write must not leave the caller's transaction unusable.
            with transaction.atomic():
                return hook(*args, **kwargs)
        except Exception:
            # The caller's work (a version, a run) matters more than the news of it.
            logger.exception("could not record the %s notification", hook.__name__)
            return None

    return wrapped


# --- Exports -----------------------------------------------------------------------------------


def _dataset_json(dataset) -> dict:
    return {"id": dataset.id, "name": dataset.name, "purpose": dataset.purpose, "url": _link(f"/datasets/{dataset.id}/")}


@_never_raises
def export_version_made(*, version, run) -> Notification | None:
    """A dataset version was committed (called inside the commit's transaction)."""
    dataset = run.dataset
    url = _link(f"/datasets/{dataset.id}/v{version.number}/")
    summary = f"Dataset {dataset.name} v{version.number}: {version.item_count:,} items exported"
    held_out = (version.held_out or {}).get("total")
    lines = [
        summary,
        f"Purpose {dataset.purpose}, formats {', '.join(version.formats)}, made by {version.made_by}"
        + (f", {held_out:,} held out" if held_out else ""),
        url,
    ]
    return notify(
        event=Event.EXPORT_VERSION,
        summary=summary,
        text="\n".join(lines),
        dedup_key=f"export.version:{version.id}",
        payload={
            "dataset": _dataset_json(dataset),
            "version": {
                "number": version.number,
                "items": version.item_count,
                "formats": list(version.formats),
                "held_out": held_out or 0,
                "made_by": version.made_by,
                "url": url,
            },
            "run_id": run.id,
        },
    )


@_never_raises
def export_failed(*, run_id: int) -> Notification | None:
    """An export run ended failed (its error is already recorded on the run)."""
    from exports.models import (
        ExportRun,  # exports builds on notifications' hooks, not the other way
    )

    run = ExportRun.objects.select_related("dataset").filter(id=run_id, status=ExportRun.Status.FAILED).first()
    if run is None:
        return None
    dataset = run.dataset
    error = _scrubbed(run.error)
    summary = f"Export of dataset {dataset.name} failed"
    return notify(
        event=Event.EXPORT_FAILED,
        summary=summary,
        text=f"{summary}: {error}\n{_link(f'/datasets/{dataset.id}/')}",
        dedup_key=f"export.failed:{run.id}",
        payload={"dataset": _dataset_json(dataset), "run_id": run.id, "error": error, "made_by": run.made_by},
    )


# --- Categories --------------------------------------------------------------------------------


@_never_raises
def cluster_run_done(*, run_id: int) -> int:
    """After a cluster run: announce each category a run created that now holds enough items, once."""
    from labeling.models import Category

    threshold = settings.NOTIFY_NEW_CATEGORY_MIN_ITEMS
    since = timezone.now() - timedelta(days=settings.NOTIFY_NEW_CATEGORY_DAYS)
    candidates = list(
        Category.objects.filter(
            status__in=Category.OPEN_STATUSES,
            created_by_run__isnull=False,
            created_at__gte=since,
            size__gte=threshold,
        )
        .select_related("area")
        .order_by("-size", "id")
    )
    keys = {category.id: f"category.new:{category.id}" for category in candidates}
    told = set(Notification.objects.filter(dedup_key__in=keys.values()).values_list("dedup_key", flat=True))
    sent = 0
    for category in candidates:
        if keys[category.id] in told:
            continue
        name = _scrubbed(category.name, 200)
        area = _scrubbed(category.area.name, 200) if category.area else ""
        url = _link(f"/categories/{category.id}/")
        summary = f"New category “{name}” holds {category.size:,} items"
        keywords = [_scrubbed(str(word), 60) for word in (category.keywords or [])[:8]]
        lines = [summary + (f" (area “{area}”)" if area else ""), f"Keywords: {', '.join(keywords)}" if keywords else "", url]
        if notify(
            event=Event.CATEGORY_NEW,
            summary=summary,
            text="\n".join(line for line in lines if line),
            dedup_key=keys[category.id],
            payload={
                "category": {
                    "id": category.id,
                    "name": name,
                    "size": category.size,
                    "status": category.status,
                    "area": area,
                    "keywords": keywords,
                    "url": url,
                },
                "threshold": threshold,
                "run_id": run_id,
            },
        ):
            sent += 1
    return sent


# --- Regressions of pinned comparisons ---------------------------------------------------------


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _points(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.1f} pp"


def _comparison_payload(status) -> dict:
    params, saved = status.params, status.saved
    return {
        "id": saved.id,
        "name": _scrubbed(saved.name, 200),
        "a": params.a.spec,
        "b": params.b.spec,
        "from": params.date_from.isoformat(),
        "to": params.date_to.isoformat(),
        "rolling_days": saved.window_days,
        "url": _link(params.url),
    }


def _items_link(url: str) -> str:
    return _link(url) if url.startswith("/") else url


def _regression_message(status, level: str, row) -> tuple[str, str, dict]:
    if level == RegressionWatch.Level.CHECK:
        return _check_regression_message(status, row)
    params = status.params
    saved = status.saved
    target = _scrubbed(row.name, 200)
    what = "Area" if level == RegressionWatch.Level.AREA else "Category"
    summary = f"{what} “{target}” is significantly worse on {params.b.label} than on {params.a.label}"
    lines = [
        summary,
        f"Thumbs-down rate {_pct(row.rate_a)} → {_pct(row.rate_b)} ({_points(row.difference)}, "
        f"95% CI {_points(row.ci_low)} to {_points(row.ci_high)}, adjusted p {row.p_adjusted:.2g}), "
        f"{row.down_a} vs {row.down_b} thumbs-down, {params.date_from} – {params.date_to}",
        f"Pinned comparison “{_scrubbed(saved.name, 200)}”: {_link(params.url)}",
    ]
    payload = {
        "comparison": _comparison_payload(status),
        "level": level,
        "target": {"id": row.row_id, "name": target},
        "down_a": row.down_a,
        "down_b": row.down_b,
        **_rate_payload(row),
    }
    return summary, "\n".join(lines), payload


def _rate_payload(row) -> dict:
    """The figures of a flagged row (area, category or check) that every regression payload carries."""
    return {
        "rate_a": row.rate_a,
        "rate_b": row.rate_b,
        "difference": row.difference,
        "ci_low": row.ci_low,
        "ci_high": row.ci_high,
        "p_adjusted": row.p_adjusted,
        "items_url": _items_link(row.items_b_url),
    }


def _as_clause(title: str) -> str:
    """A check's title inside a sentence: "Reads version-control history" -> "reads version-control history"."""
    # An acronym ("SQL drops") keeps its capitals.
    if len(title) > 1 and title[0].isupper() and not title[1].isupper():
        return title[0].lower() + title[1:]
    return title


def _check_regression_message(status, row) -> tuple[str, str, dict]:
    """A check's news: "2.2 vs 2.1: reads version-control history in 4.1% of rollouts vs 0.3%", then the
    counts behind the rates, the flagged rollouts and the pinned comparison."""
    params = status.params
    saved = status.saved
    title = _scrubbed(row.name, 200)
    summary = (
        f"{params.b.label} vs {params.a.label}: {_as_clause(title)} in {_pct(row.rate_b)} of rollouts "
        f"vs {_pct(row.rate_a)}"
    )
    lines = [
        summary,
        f"Rollout check “{title}”: {row.down_b:,} of {row.rollouts_b:,} rollouts flagged vs {row.down_a:,} of "
        f"{row.rollouts_a:,} ({_points(row.difference)}, 95% CI {_points(row.ci_low)} to {_points(row.ci_high)}, "
        f"adjusted p {row.p_adjusted:.2g}), {params.date_from} – {params.date_to}",
        f"Flagged rollouts on {params.b.label}: {_items_link(row.items_b_url)}",
        f"Pinned comparison “{_scrubbed(saved.name, 200)}”: {_link(params.url)}",
    ]
    payload = {
        "comparison": _comparison_payload(status),
        "level": RegressionWatch.Level.CHECK.value,
        "target": {"id": row.check_name, "name": title, "kind": row.kind},
        "rollouts_a": row.rollouts_a,
        "rollouts_b": row.rollouts_b,
        "flagged_a": row.down_a,
        "flagged_b": row.down_b,
        **_rate_payload(row),
    }
    return summary, "\n".join(lines), payload


def _watch_target(level: str, row) -> tuple[int, str]:
    """(target_id, target_key) of a watch: an area's or category's id, or a check's name."""
    if level == RegressionWatch.Level.CHECK:
        return 0, row.check_name
    return row.row_id, ""


def _flag(status, level: str, row, *, now: datetime) -> bool:
    """Record that `row` is flagged; True when this starts an episode and was announced."""
    target_id, target_key = _watch_target(level, row)
    with transaction.atomic():
        watch, created = RegressionWatch.objects.select_for_update().get_or_create(
            saved_comparison=status.saved, level=level, target_id=target_id, target_key=target_key,
            defaults={"first_flagged_at": now, "last_flagged_at": now},
        )
        if not created:
            if watch.active:
                watch.last_flagged_at = now
                watch.save(update_fields=["last_flagged_at"])
                return False
            watch.active, watch.episode, watch.cleared_at = True, watch.episode + 1, None
            watch.first_flagged_at = watch.last_flagged_at = now
            watch.save(update_fields=["active", "episode", "cleared_at", "first_flagged_at", "last_flagged_at"])
        summary, text, payload = _regression_message(status, level, row)
        key = f"regression:{status.saved.id}:{level}:{row.row_id}:{watch.episode}"
        return notify(event=Event.REGRESSION, summary=summary, text=text, payload=payload, dedup_key=key) is not None


def regressions_check(*, today: date | None = None, now: datetime | None = None) -> int:
    """Recompute every pinned comparison; announce each newly flagged area, category or rollout check once.

    Steps: the pins' comparisons (labeling.compare.comparison, six queries for all of
    them, the rows per check included); for each area, category and check
    significantly worse on b, start an episode unless one is open; close the
    episodes of rows that stayed unflagged for NOTIFY_REGRESSION_QUIET_DAYS.
    A pin whose window cannot be compared is left as it is.
    """
    from labeling.compare.saved import pinned_regressions

    now = now or timezone.now()
    quiet = timedelta(days=settings.NOTIFY_REGRESSION_QUIET_DAYS)
    announced = 0
    for status in pinned_regressions(today=today, limit=None):
        if status.comparison is None:
            continue
        flagged = [(RegressionWatch.Level.AREA, row) for row in status.area_regressions]
        flagged += [(RegressionWatch.Level.CATEGORY, row) for row in status.regressions]
        flagged += [(RegressionWatch.Level.CHECK, row) for row in status.check_regressions]
        for level, row in flagged:
            try:
                announced += _flag(status, level, row, now=now)
            except IntegrityError:
                # Another check created the same watch at this moment; it announces.
                continue
        seen = {(level, *_watch_target(level, row)) for level, row in flagged}
        for watch in RegressionWatch.objects.filter(saved_comparison=status.saved, active=True):
            if (watch.level, watch.target_id, watch.target_key) not in seen and watch.last_flagged_at <= now - quiet:
                RegressionWatch.objects.filter(id=watch.id, active=True).update(active=False, cleared_at=now)
    return announced


# --- Pipeline failures -------------------------------------------------------------------------


def pipeline_failures_check(*, now: datetime | None = None) -> Notification | None:
    """One message for the items that failed since the last check (none the first time: history is not news)."""
    from feedback.models import FeedbackItem

    now = now or timezone.now()
    with transaction.atomic():
        mark, created = CheckMark.objects.select_for_update().get_or_create(
            name="pipeline.failed", defaults={"at": now}
        )
        if created or mark.at >= now:
            return None
        failed = FeedbackItem.objects.filter(
            status=FeedbackItem.Status.FAILED, status_changed_at__gt=mark.at, status_changed_at__lte=now
        )
        count = failed.count()
        notification = None
        if count:
            listed = list(
                failed.select_related("source").order_by("status_changed_at", "id")[:FAILED_ITEMS_LISTED]
            )
            items = [
                {
                    "id": item.id,
                    "external_id": _scrubbed(item.external_id, 255),
                    "source": item.source.slug,
                    "error": _scrubbed(item.last_error, 300),
                    "url": _link(f"/items/{item.id}/"),
                }
                for item in listed
            ]
            summary = f"{count:,} item{'s' if count != 1 else ''} failed in the pipeline"
            lines = [summary + f" since {mark.at:%Y-%m-%d %H:%M} UTC"]
            lines += [f"• item {entry['id']} ({entry['source']}): {entry['error']}" for entry in items]
            if count > len(items):
                lines.append(f"… and {count - len(items):,} more")
            lines.append(_link("/search/?status=failed"))
            notification = notify(
                event=Event.PIPELINE_FAILED,
                summary=summary,
                text="\n".join(lines),
                dedup_key=f"pipeline.failed:{mark.at.isoformat()}",
                payload={
                    "count": count,
                    "since": mark.at.isoformat(),
                    "until": now.isoformat(),
                    "items": items,
                    "url": _link("/search/?status=failed"),
                },
            )
        mark.at = now
        mark.save(update_fields=["at"])
    return notification
