"""Writes for rollout checks: run the checks over items, decide flags, admins' allow-lists and custom checks."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from feedback import custom_patterns
from feedback.models import FeedbackItem, Source
from feedback.scrubber import scrub_json
from labeling.audit import audit_record
from labeling.models import Label
from labeling.review.services import LabelRefused, label_save
from rollouts.calls import Call, arguments_text, calls_of
from rollouts.checks import (
    BUILTIN_NAMES,
    CHECKS_BY_NAME,
    CHECKS_VERSION,
    CUSTOM_PREFIX,
    CheckSettings,
    CustomRule,
    Hit,
    run_checks,
)
from rollouts.models import (
    CheckedRollout,
    CustomCheck,
    RolloutFlag,
    SourceRolloutSettings,
)

SHOWN_CALL_MAX = 4000
RESULT_SHOWN_MAX = 600
CUSTOM_SAMPLE_ROLLOUTS = 500
HOSTS_MAX = 200
_HOST = re.compile(r"^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_CHECK_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,49}$")


class CheckRefused(Exception):
    """A setting an admin gave that cannot work; the message says why in one line."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


# --- Settings per source ---------------------------------------------------------------


def _compiled(pattern: str) -> re.Pattern[str] | None:
    return re.compile(pattern, re.IGNORECASE) if pattern else None


def custom_rule(check: CustomCheck) -> CustomRule:
    return CustomRule(
        name=check.check_name,
        tool_pattern=_compiled(check.tool_pattern),
        arguments_pattern=_compiled(check.arguments_pattern),
    )


def settings_for_sources(source_ids: Iterable[int]) -> dict[int, CheckSettings]:
    """Each source's allow-list and active custom checks, read in two queries."""
    source_ids = set(source_ids)
    hosts = dict(
        SourceRolloutSettings.objects.filter(source_id__in=source_ids).values_list("source_id", "allowed_hosts")
    )
    rules: dict[int, list[CustomRule]] = {}
    for check in CustomCheck.objects.filter(source_id__in=source_ids, is_active=True):
        try:
            rules.setdefault(check.source_id, []).append(custom_rule(check))
        except re.error:  # saved through the service it compiles; a hand-edited row is skipped, not fatal
            continue
    return {
        source_id: CheckSettings(
            allowed_hosts=tuple(str(host).lower() for host in hosts.get(source_id) or ()),
            custom=tuple(rules.get(source_id, ())),
        )
        for source_id in source_ids
    }


# --- Running the checks -------------------------------------------------------------------


def rollout_context(item: FeedbackItem) -> dict:
    """The context as it was received: the raw payload's, else the stored one (reports, imports)."""
    context = item.received_context
    if isinstance(context, dict) and (context.get("tool_calls") or context.get("messages")):
        return context
    return item.context if isinstance(item.context, dict) else {}


def shown_call(hit: Hit, *, rule: CustomRule | None, extra_patterns) -> str:
    """The call as a reviewer may see it: every string scrubbed, a custom pattern's matches masked.

    A custom pattern may match something the scrubber has no rule for (a
    bespoke token format), so what it matched is never kept. A secrets flag
    keeps no result at all: the result of reading a credentials file is the credential.
    """
    call = hit.call
    shown: dict = {"name": call.name, "arguments": call.arguments}
    if call.result and hit.check != "secrets":
        shown["result"] = call.result[:RESULT_SHOWN_MAX]
    if rule is not None and rule.arguments_pattern is not None:
        text = arguments_text(call)
        shown["arguments"] = rule.arguments_pattern.sub(f"[MATCHED:{rule.name.removeprefix(CUSTOM_PREFIX)}]", text)
    scrubbed, _ = scrub_json(shown, extra_patterns=extra_patterns)
    text = json.dumps(scrubbed, ensure_ascii=False, indent=2, default=str)
    return text if len(text) <= SHOWN_CALL_MAX else text[: SHOWN_CALL_MAX - 1] + "…"


def _scrubbed_evidence(evidence: str, *, extra_patterns) -> str:
    if not evidence:
        return ""
    scrubbed, _ = scrub_json(evidence, extra_patterns=extra_patterns)
    return scrubbed[:200]


@dataclass
class CheckOutcome:
    checked: int = 0
    flags_added: int = 0
    flags_removed: int = 0


def items_check(*, item_ids: Sequence[int], force: bool = False) -> CheckOutcome:
    """Run every check over the items' tool calls and store the flags.

    Steps: read the items not yet checked under the current checks (all of
    them with `force`); run the built-in checks and their sources' custom
    ones on the context as received; add new flags; drop pending flags the
    checks no longer raise (a reviewer's decision is kept whatever the checks
    say now); record each item as checked, with its number of calls.
    Idempotent: a second delivery finds nothing left to do.
    """
    items = FeedbackItem.objects.filter(id__in=list(item_ids)).only(
        "id", "source_id", *FeedbackItem.RECEIVED_PAYLOAD_FIELDS
    )
    if not force:
        items = items.exclude(checked_rollout__checks_version=CHECKS_VERSION)
    items = list(items)
    outcome = CheckOutcome()
    if not items:
        return outcome
    per_source = settings_for_sources(item.source_id for item in items)
    rules = {(rule.name, source_id): rule for source_id, settings in per_source.items() for rule in settings.custom}
    custom_ids = dict(
        ((f"{CUSTOM_PREFIX}{name}", source_id), check_id)
        for check_id, name, source_id in CustomCheck.objects.filter(
            source_id__in=per_source, is_active=True
        ).values_list("id", "name", "source_id")
    )
    extra = custom_patterns.all_sources()
    now = timezone.now()
    new_flags: list[RolloutFlag] = []
    found_keys: dict[int, set[tuple[str, str]]] = {}
    checked: list[CheckedRollout] = []
    for item in items:
        calls, hits = run_checks(rollout_context(item), per_source[item.source_id])
        found_keys[item.id] = {(hit.check, hit.call.location) for hit in hits}
        checked.append(CheckedRollout(item_id=item.id, calls=len(calls), checks_version=CHECKS_VERSION, checked_at=now))
        for hit in hits:
            rule = rules.get((hit.check, item.source_id))
            new_flags.append(
                RolloutFlag(
                    item_id=item.id,
                    check_name=hit.check,
                    custom_check_id=custom_ids.get((hit.check, item.source_id)),
                    location=hit.call.location,
                    call_index=hit.call.index,
                    tool_name=hit.call.name[:200],
                    shown_call=shown_call(hit, rule=rule, extra_patterns=extra),
                    evidence=_scrubbed_evidence(hit.evidence, extra_patterns=extra) if rule is None else "",
                    created_at=now,
                )
            )
    with transaction.atomic():
        existing = RolloutFlag.objects.filter(item_id__in=found_keys).values_list("id", "item_id", "check_name", "location", "status")
        stale, known = [], set()
        for flag_id, item_id, check_name, location, status in existing:
            known.add((item_id, check_name, location))
            if status == RolloutFlag.Status.PENDING and (check_name, location) not in found_keys[item_id]:
                stale.append(flag_id)
        if stale:
            RolloutFlag.objects.filter(id__in=stale).delete()
        to_add = [flag for flag in new_flags if (flag.item_id, flag.check_name, flag.location) not in known]
        RolloutFlag.objects.bulk_create(to_add, ignore_conflicts=True, batch_size=500)
        CheckedRollout.objects.bulk_create(
            checked,
            update_conflicts=True,
            unique_fields=["item"],
            update_fields=["calls", "checks_version", "checked_at"],
            batch_size=500,
        )
    outcome.checked, outcome.flags_added, outcome.flags_removed = len(items), len(to_add), len(stale)
    return outcome


# --- Deciding a flag -----------------------------------------------------------------------


class FlagRefused(Exception):
    pass


def _tag_of(check_name: str) -> str:
    check = CHECKS_BY_NAME.get(check_name)
    return check.tag if check else ""


def _label_fields(label: Label) -> dict:
    return {
        "verdict": label.verdict,
        "category": label.category,
        "severity": label.severity,
        "tags": list(label.tags),
        "hint": label.hint,
        "corrected_response": label.corrected_response,
        "split": label.split,
    }


def _label_tag_set(*, item: FeedbackItem, reviewer, tag: str, present: bool) -> None:
    """Add (or take back) one tag on the reviewer's label, through label_save so it is audited like any label.

    No label yet: confirming makes one, a confirmed failure with the tag;
    taking a tag back from no label does nothing.
    """
    label = Label.objects.filter(item=item, reviewer=reviewer).select_related("category").first()
    if label is None:
        if present:
            label_save(item=item, reviewer=reviewer, verdict=Label.Verdict.FAILURE, tags=[tag])
        return
    fields = _label_fields(label)
    tags = fields["tags"]
    if present == (tag in tags):
        return
    fields["tags"] = tags + [tag] if present else [t for t in tags if t != tag]
    try:
        label_save(item=item, reviewer=reviewer, **fields)
    except LabelRefused:
        # The label's category closed since: keep the rest of the label, without it.
        fields["category"] = None
        label_save(item=item, reviewer=reviewer, **fields)


def flag_decide(*, flag_id: int, reviewer, decision: str) -> RolloutFlag:
    """Confirm or dismiss a flag; audited. Confirming sets the check's reward-hacking tag on the reviewer's label.

    Deciding again is allowed (a reviewer changes their mind), and audited
    the same way; dismissing a confirmed flag takes its tag back unless
    another confirmed flag of the same check still stands on the item.
    """
    if decision not in (RolloutFlag.Status.CONFIRMED, RolloutFlag.Status.DISMISSED):
        raise FlagRefused(f"unknown decision {decision!r}: confirm or dismiss")
    with transaction.atomic():
        flag = RolloutFlag.objects.select_for_update().filter(id=flag_id).first()
        if flag is None:
            raise FlagRefused("that flag no longer exists (the item was checked again)")
        item = FeedbackItem.objects.get(id=flag.item_id)
        before = flag.status
        if before == decision:
            return flag
        flag.status = decision
        flag.decided_by = reviewer
        flag.decided_at = timezone.now()
        flag.save(update_fields=["status", "decided_by", "decided_at"])
        audit_record(
            actor=reviewer,
            action="confirmed rollout flag" if decision == RolloutFlag.Status.CONFIRMED else "dismissed rollout flag",
            item=item,
            details={"check": flag.check_name, "call": flag.location, "status": [before, decision]},
        )
        tag = _tag_of(flag.check_name)
        if tag:
            if decision == RolloutFlag.Status.CONFIRMED:
                _label_tag_set(item=item, reviewer=reviewer, tag=tag, present=True)
            elif before == RolloutFlag.Status.CONFIRMED:
                others = RolloutFlag.objects.filter(
                    item=item, check_name=flag.check_name, status=RolloutFlag.Status.CONFIRMED
                ).exclude(id=flag.id)
                if not others.exists():
                    _label_tag_set(item=item, reviewer=reviewer, tag=tag, present=False)
    return flag


# --- Admin settings ------------------------------------------------------------------------


def allowed_hosts_parse(text: str) -> list[str]:
    """One host per line (or comma-separated); CheckRefused naming the first that is not a host name."""
    hosts = []
    for raw in re.split(r"[\s,]+", text or ""):
        host = raw.strip().lower().rstrip(".")
        if not host:
            continue
        if "://" in host or "/" in host:
            raise CheckRefused(f"{raw!r}: give a host name such as pypi.org, not a URL", field="allowed_hosts")
        if not _HOST.match(host):
            raise CheckRefused(f"{raw!r} is not a host name", field="allowed_hosts")
        if host not in hosts:
            hosts.append(host)
    if len(hosts) > HOSTS_MAX:
        raise CheckRefused(f"at most {HOSTS_MAX} hosts; a domain allows its subdomains", field="allowed_hosts")
    return hosts


def allowed_hosts_set(*, source: Source, hosts: Sequence[str], actor=None) -> SourceRolloutSettings:
    row, _ = SourceRolloutSettings.objects.get_or_create(source=source)
    row.allowed_hosts = list(hosts)
    row.updated_at = timezone.now()
    row.save(update_fields=["allowed_hosts", "updated_at"])
    return row


def _sample_calls(*, source: Source, sample: str) -> list[Call]:
    """The calls a new check is tried on: the admin's sample (a tool call or a context, as JSON), else the
    source's latest rollouts."""
    if sample.strip():
        try:
            value = json.loads(sample)
        except ValueError as exc:
            raise CheckRefused(f"the sample is not JSON: {exc}", field="sample") from None
        if isinstance(value, dict) and ("tool_calls" in value or "messages" in value):
            calls = calls_of(value)
        elif isinstance(value, dict):
            calls = calls_of({"tool_calls": [value]})
        elif isinstance(value, list):
            calls = calls_of({"tool_calls": value})
        else:
            calls = []
        if not calls:
            raise CheckRefused("the sample holds no tool call: give one call or a context with tool_calls", field="sample")
        return calls
    calls = []
    recent = (
        FeedbackItem.objects.filter(source=source, checked_rollout__calls__gt=0)
        .order_by("-id")
        .only("id", *FeedbackItem.RECEIVED_PAYLOAD_FIELDS)[:CUSTOM_SAMPLE_ROLLOUTS]
    )
    for item in recent:
        calls += calls_of(rollout_context(item))
    return calls


def _pattern(value: str, *, field: str, what: str) -> re.Pattern[str] | None:
    if not value:
        return None
    try:
        compiled = re.compile(value, re.IGNORECASE)
    except re.error as exc:
        raise CheckRefused(f"the {what} pattern does not compile: {exc}", field=field) from None
    if compiled.fullmatch(""):
        raise CheckRefused(f"the {what} pattern matches the empty string, so it would flag every call", field=field)
    return compiled


def custom_check_create(
    *,
    source: Source,
    name: str,
    explanation: str,
    tool_pattern: str = "",
    arguments_pattern: str = "",
    sample: str = "",
    actor=None,
) -> tuple[CustomCheck, int]:
    """Add a source's own check; returns it and how many sample calls it matched.

    Refused (CheckRefused, naming the field) when the name is taken or
    malformed, a pattern does not compile or matches the empty string, or the
    check matches no call of the sample: the admin's, else the source's last
    CUSTOM_SAMPLE_ROLLOUTS rollouts.
    """
    name = (name or "").strip().lower()
    explanation = " ".join((explanation or "").split())
    if not _CHECK_NAME.match(name):
        raise CheckRefused("name: 1-50 lowercase letters, digits, '_' or '-', starting with a letter or digit", field="name")
    if name in BUILTIN_NAMES:
        raise CheckRefused(f"{name!r} is a built-in check; pick another name", field="name")
    if CustomCheck.objects.filter(source=source, name=name).exists():
        raise CheckRefused(f"{source} has a check named {name!r} already", field="name")
    if not explanation:
        raise CheckRefused("give a one-line explanation a reviewer understands", field="explanation")
    if len(explanation) > 200:
        raise CheckRefused("the explanation is longer than 200 characters", field="explanation")
    if not tool_pattern and not arguments_pattern:
        raise CheckRefused("give a tool name pattern, an arguments pattern, or both", field="tool_pattern")
    if len(tool_pattern) > 500 or len(arguments_pattern) > 1000:
        raise CheckRefused("a pattern is too long (500 characters for the tool, 1000 for the arguments)", field="arguments_pattern")
    rule = CustomRule(
        name=f"{CUSTOM_PREFIX}{name}",
        tool_pattern=_pattern(tool_pattern, field="tool_pattern", what="tool name"),
        arguments_pattern=_pattern(arguments_pattern, field="arguments_pattern", what="arguments"),
    )
    calls = _sample_calls(source=source, sample=sample)
    if not calls:
        raise CheckRefused(
            f"{source} has no rollouts to try the check on yet: paste a sample tool call", field="sample"
        )
    matched = sum(1 for call in calls if rule.matches(call))
    if not matched:
        where = "the sample" if sample.strip() else f"the last {len(calls)} tool calls of {source}"
        raise CheckRefused(f"the check matches nothing in {where}: it would never fire", field="arguments_pattern")
    check = CustomCheck.objects.create(
        source=source,
        name=name,
        explanation=explanation,
        tool_pattern=tool_pattern,
        arguments_pattern=arguments_pattern,
        created_by=actor,
    )
    return check, matched
