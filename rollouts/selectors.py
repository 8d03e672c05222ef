"""Reads for rollout checks: the catalogue, an item's flags, counts and rates per model version and week."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timedelta

from django.db.models import Count, Exists, OuterRef
from django.db.models.functions import TruncWeek
from django.utils import timezone

from feedback.models import FeedbackItem
from labeling.compare.params import version_key
from rollouts.checks import BUILTIN_NAMES, CHECKS, CHECKS_BY_NAME, CUSTOM_PREFIX
from rollouts.models import CheckedRollout, CustomCheck, RolloutFlag

# A flag counts against a rollout unless a reviewer dismissed it.
STANDING = (RolloutFlag.Status.PENDING, RolloutFlag.Status.CONFIRMED)


@dataclass(frozen=True)
class CheckInfo:
    name: str
    title: str
    explanation: str
    kind: str
    tag: str = ""
    source: str = ""  # a custom check's source name


def check_catalogue() -> list[CheckInfo]:
    """The built-in checks, then each source's active custom checks (one row per name)."""
    rows = [CheckInfo(c.name, c.title, c.explanation, c.kind, c.tag) for c in CHECKS]
    seen = set()
    for custom in CustomCheck.objects.filter(is_active=True).select_related("source").order_by("name", "source__name"):
        if custom.check_name in seen:
            continue
        seen.add(custom.check_name)
        rows.append(CheckInfo(custom.check_name, custom.name.replace("-", " ").replace("_", " ").capitalize(),
                              custom.explanation, "custom", source=custom.source.name))
    return rows


def check_info(name: str) -> CheckInfo | None:
    builtin = CHECKS_BY_NAME.get(name)
    if builtin is not None:
        return CheckInfo(builtin.name, builtin.title, builtin.explanation, builtin.kind, builtin.tag)
    if name.startswith(CUSTOM_PREFIX):
        custom = (
            CustomCheck.objects.filter(name=name.removeprefix(CUSTOM_PREFIX)).select_related("source").first()
        )
        if custom is not None:
            return CheckInfo(name, custom.name, custom.explanation, "custom", source=custom.source.name)
    return None


def check_title(name: str) -> str:
    """A check's title without a query: a built-in check's own, a custom check's name."""
    builtin = CHECKS_BY_NAME.get(name)
    return builtin.title if builtin else name.removeprefix(CUSTOM_PREFIX)


def check_names() -> list[str]:
    """Every check name a filter may name: built-in and custom (also retired ones that left flags)."""
    names = list(BUILTIN_NAMES)
    names += sorted(
        {f"{CUSTOM_PREFIX}{name}" for name in CustomCheck.objects.values_list("name", flat=True)} - set(names)
    )
    return names


@dataclass
class ShownFlag:
    flag: RolloutFlag
    info: CheckInfo | None

    @property
    def title(self) -> str:
        return self.info.title if self.info else self.flag.check_name

    @property
    def explanation(self) -> str:
        return self.info.explanation if self.info else ""

    @property
    def anchor(self) -> str:
        return call_anchor(self.flag.location)


def call_anchor(location: str) -> str:
    return "call-" + location.replace(".", "-")


def item_flags(*, item_id: int) -> list[ShownFlag]:
    flags = list(RolloutFlag.objects.filter(item_id=item_id).select_related("decided_by"))
    infos = {name: check_info(name) for name in {flag.check_name for flag in flags}}
    return [ShownFlag(flag=flag, info=infos[flag.check_name]) for flag in flags]


def item_flagged_locations(*, item_id: int) -> dict[str, list[str]]:
    """Call location -> titles of the standing checks on it: the transcript highlights those calls."""
    located: dict[str, list[str]] = defaultdict(list)
    for flag in item_flags(item_id=item_id):
        if flag.flag.status in STANDING:
            located[flag.flag.location].append(flag.title)
    return dict(located)


def items_with_flag(*, check_name: str, statuses=STANDING) -> Exists:
    """An Exists() over FeedbackItem: the item has a flag of `check_name` ("any": of any check) in `statuses`."""
    flags = RolloutFlag.objects.filter(item=OuterRef("pk"), status__in=statuses)
    if check_name != "any":
        flags = flags.filter(check_name=check_name)
    return Exists(flags)


def confirmed_checks_for(*, item_ids: list[int]) -> dict[int, list[str]]:
    """Item id -> the checks a reviewer confirmed on it (sorted): what exports exclude and name."""
    found: dict[int, set[str]] = defaultdict(set)
    rows = RolloutFlag.objects.filter(item_id__in=item_ids, status=RolloutFlag.Status.CONFIRMED).values_list(
        "item_id", "check_name"
    )
    for item_id, check_name in rows:
        found[item_id].add(check_name)
    return {item_id: sorted(names) for item_id, names in found.items()}


@dataclass
class CheckCounts:
    info: CheckInfo
    pending: int = 0
    confirmed: int = 0
    dismissed: int = 0
    items: int = 0

    @property
    def total(self) -> int:
        return self.pending + self.confirmed + self.dismissed


def flag_counts() -> list[CheckCounts]:
    """Per check: flags by status and flagged items. One query."""
    rows = {info.name: CheckCounts(info=info) for info in check_catalogue()}
    for row in RolloutFlag.objects.values("check_name", "status").annotate(n=Count("id"), items=Count("item", distinct=True)).order_by():
        counts = rows.get(row["check_name"])
        if counts is None:
            info = check_info(row["check_name"]) or CheckInfo(row["check_name"], row["check_name"], "", "custom")
            counts = rows[row["check_name"]] = CheckCounts(info=info)
        setattr(counts, row["status"], getattr(counts, row["status"]) + row["n"])
    per_item = (
        RolloutFlag.objects.filter(status__in=STANDING).values("check_name").annotate(items=Count("item", distinct=True)).order_by()
    )
    for row in per_item:
        if row["check_name"] in rows:
            rows[row["check_name"]].items = row["items"]
    return list(rows.values())


@dataclass
class VersionRates:
    version: str
    rollouts: int
    flagged: dict[str, int] = field(default_factory=dict)

    def rate(self, check_name: str) -> float | None:
        return self.flagged.get(check_name, 0) / self.rollouts if self.rollouts else None


def _rollouts():
    return FeedbackItem.objects.filter(checked_rollout__calls__gt=0)


def flag_rates_by_version(*, since: date | None = None) -> tuple[list[str], list[VersionRates]]:
    """Per model version: its checked rollouts and how many carry a standing flag of each check. Two queries."""
    rollouts = _rollouts()
    if since is not None:
        rollouts = rollouts.filter(occurred_at__date__gte=since)
    totals = dict(rollouts.values_list("model_version").annotate(n=Count("id")).order_by().values_list("model_version", "n"))
    flagged = (
        RolloutFlag.objects.filter(status__in=STANDING, item__in=rollouts)
        .values("item__model_version", "check_name")
        .annotate(n=Count("item", distinct=True))
        .order_by()
    )
    rows = {version: VersionRates(version=version or "—", rollouts=n) for version, n in totals.items()}
    names: set[str] = set()
    for row in flagged:
        names.add(row["check_name"])
        rows[row["item__model_version"]].flagged[row["check_name"]] = row["n"]
    order = [name for name in BUILTIN_NAMES] + sorted(names - set(BUILTIN_NAMES))
    return order, sorted(rows.values(), key=lambda row: version_key(row.version))


@dataclass
class WeekRates:
    week: date
    rollouts: int
    flagged: dict[str, int] = field(default_factory=dict)

    def rate(self, check_name: str) -> float | None:
        return self.flagged.get(check_name, 0) / self.rollouts if self.rollouts else None


def flag_rates_by_week(*, weeks: int = 8, today: date | None = None) -> list[WeekRates]:
    """The share of rollouts flagged per check, week by week (weeks start on Monday), oldest first."""
    today = today or timezone.localdate()
    start = today - timedelta(days=today.weekday()) - timedelta(weeks=weeks - 1)
    rollouts = _rollouts().filter(occurred_at__date__gte=start)
    totals = {
        _as_date(row["week"]): row["n"]
        for row in rollouts.annotate(week=TruncWeek("occurred_at")).values("week").annotate(n=Count("id")).order_by()
    }
    flagged = (
        RolloutFlag.objects.filter(status__in=STANDING, item__in=rollouts)
        .annotate(week=TruncWeek("item__occurred_at"))
        .values("week", "check_name")
        .annotate(n=Count("item", distinct=True))
        .order_by()
    )
    rows = {start + timedelta(weeks=offset): WeekRates(week=start + timedelta(weeks=offset), rollouts=0) for offset in range(weeks)}
    for week, n in totals.items():
        if week in rows:
            rows[week].rollouts = n
    for row in flagged:
        week = _as_date(row["week"])
        if week in rows:
            rows[week].flagged[row["check_name"]] = row["n"]
    return [rows[week] for week in sorted(rows)]


def _as_date(value) -> date:
    return value.date() if hasattr(value, "date") and callable(value.date) else value


def rollouts_count() -> int:
    return CheckedRollout.objects.filter(calls__gt=0).count()


def flag_queue_counts(*, check_name: str) -> tuple[int, int]:
    """(items with a standing flag of the check, those with one still pending)."""
    items = FeedbackItem.objects.filter(items_with_flag(check_name=check_name))
    pending = FeedbackItem.objects.filter(items_with_flag(check_name=check_name, statuses=(RolloutFlag.Status.PENDING,)))
    return items.count(), pending.count()
