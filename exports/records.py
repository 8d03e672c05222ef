"""One item as the exports see it: the rated conversation plus its reviewer judgement.

An item can carry several labels (double review); the export uses the one
changed last, so the verdict, hint and corrected response written together
always come from the same reviewer decision.
"""

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import orjson

from feedback.pipeline import embed_text_for
from feedback.scrubber import ScrubMemo, scrub, scrub_json
from labeling.models import Area, Category, Label

ROLES = ("system", "user", "assistant", "tool")


@dataclass(slots=True)
class ExportRecord:
    id: int
    external_id: str
    source: str
    kind: str
    rating: int | None
    title: str
    comment: str
    expected: str
    item_severity: str
    model_name: str
    model_version: str
    variant: str
    surface: str
    occurred_at: datetime
    # The conversation up to the rated answer, as {"role", "content"} turns.
    messages: list[dict[str, str]]
    # True when the messages came from a structured conversation, not a pasted transcript.
    structured: bool
    output: str | None
    tool_calls: list | None
    category_id: int | None
    category: str | None
    reviewed: bool
    verdict: str | None
    severity: str
    tags: list[str] = field(default_factory=list)
    hint: str = ""
    corrected_response: str = ""
    split: str | None = None
    text: str = ""
    embedding_id: int | None = None
    vector: np.ndarray | None = None
    # Train export: the item is in an eval version; eval export: in a train version.
    in_opposite_purpose: bool = False
    # The assignment's area (where it was merged to, if it was): counted in the manifest, not written.
    area: str | None = None
    # Its id: a version records it per member, so a diff sees a move but not a rename.
    area_id: int | None = None
    # Placeholder label ("EMAIL", "SECRET:aws_access_key") -> replacements made in this record.
    scrubbed: dict[str, int] = field(default_factory=dict)
    # The tool-call fields of the messages, by message index: {"tool_calls": [...]} on an assistant
    # turn, {"tool_call_id": ...} on a tool turn. Kept beside `messages`, whose {role, content}
    # shape the table formats write; the chat formats put them back on their turns.
    message_tools: dict[int, dict] | None = None
    # The rollout checks a reviewer confirmed on the item (rollouts app): such a rollout is never a
    # fine-tuning target, only a rejected / undesirable example, and eval rows name the checks.
    confirmed_checks: list[str] = field(default_factory=list)
    # Pieces every format writes alike (the prompt turns, the run's tool turns), built once per
    # record by exports.formats and shared by the formats' rows.
    derived: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def expected_behavior(self) -> str:
        return self.hint or self.corrected_response or self.expected


def _final(category: Category | None) -> Category | None:
    # A category merged after the label was written: report where it went.
    if category is not None and category.status == Category.Status.MERGED and category.merged_into_id:
        return category.merged_into
    return category


# The fields of a message that tie an assistant's tool calls to the tool turns answering them.
MESSAGE_TOOL_FIELDS = ("tool_calls", "tool_call_id", "name")


def _kept_messages(context: dict) -> list[dict]:
    return [
        message
        for message in context.get("messages") or ()
        if isinstance(message, dict) and message.get("role") in ROLES and isinstance(message.get("content"), str)
    ]


def message_tools(context: dict) -> dict[int, dict] | None:
    """The tool-call fields of the turns conversation() keeps, by turn index; None when no turn has any."""
    found = {}
    for index, message in enumerate(_kept_messages(context)):
        fields = {
            name: message[name]
            for name in MESSAGE_TOOL_FIELDS
            if message.get(name) is not None and (name != "name" or message["role"] == "tool")
        }
        if fields.get("tool_calls") is not None and not isinstance(fields["tool_calls"], list):
            del fields["tool_calls"]
        if fields:
            found[index] = fields
    return found or None


def conversation(context: dict) -> tuple[list[dict[str, str]], bool]:
    """The turns of a rated context; a report's transcript becomes one user turn."""
    turns = [{"role": message["role"], "content": message["content"]} for message in _kept_messages(context)]
    if turns:
        return turns, True
    transcript = context.get("transcript")
    if isinstance(transcript, str) and transcript.strip():
        return [{"role": "user", "content": transcript}], False
    return [], False


# The context as the database's JSON text, parsed here by orjson (row_context): Django's
# JSONField conversion (json.loads per row) was a fifth of the export's read.
CONTEXT_TEXT = "context_text"

# The columns an export reads per item: joins to the source, the assignment's
# category (and where it was merged to) and, when needed, the vector.
ITEM_COLUMNS = (
    "id",
    "external_id",
    "source__slug",
    "kind",
    "rating",
    "title",
    "comment",
    "expected",
    "severity",
    "model_name",
    "model_version",
    "variant",
    "surface",
    "occurred_at",
    CONTEXT_TEXT,
    "embed_text",
    "embedding_id",
    "assignment__category_id",
    "assignment__category__name",
    "assignment__category__status",
    "assignment__category__merged_into_id",
    "assignment__category__merged_into__name",
    "assignment__area__name",
    "assignment__area__status",
    "assignment__area__merged_into__name",
    "assignment__area_id",
    "assignment__area__merged_into_id",
)
VECTOR_COLUMN = "embedding__vector"
OPPOSITE_COLUMN = "in_opposite_purpose"


def row_context(row) -> dict:
    """The item's context as a dict ({} when it is not a JSON object).

    orjson reads what json reads, except NaN / Infinity literals, integers
    beyond 64 bits, unpaired surrogates and very deep nesting; those rare
    texts go to json.loads, so every context parses exactly as before.
    """
    raw = getattr(row, CONTEXT_TEXT, None)
    if raw is None:
        context = getattr(row, "context", None)
    elif isinstance(raw, str | bytes):
        try:
            context = orjson.loads(raw)
        except orjson.JSONDecodeError:
            context = json.loads(raw)
    else:  # a database that hands back the decoded value
        context = raw
    return context if isinstance(context, dict) else {}


class _TextSource:
    """What embed_text_for reads of an item (title, comment, expected, context), from a row."""

    __slots__ = ("title", "comment", "expected", "context")

    def __init__(self, row, context: dict) -> None:
        self.title, self.comment, self.expected, self.context = row.title, row.comment, row.expected, context


def _assigned_category(row) -> tuple[int | None, str | None]:
    if row.assignment__category_id is None:
        return None, None
    if row.assignment__category__status == Category.Status.MERGED and row.assignment__category__merged_into_id:
        return row.assignment__category__merged_into_id, row.assignment__category__merged_into__name
    return row.assignment__category_id, row.assignment__category__name


def _assigned_area(row) -> str | None:
    # One hop, as for categories: an area merge moves its assignments, so a longer chain is not left behind.
    if row.assignment__area__status == Area.Status.MERGED and row.assignment__area__merged_into__name:
        return row.assignment__area__merged_into__name
    return row.assignment__area__name


def _assigned_area_id(row) -> int | None:
    if row.assignment__area__status == Area.Status.MERGED and row.assignment__area__merged_into_id:
        return row.assignment__area__merged_into_id
    return row.assignment__area_id


# The text fields of a record that an export writes: each passes through the scrubber.
SCRUBBED_TEXT_FIELDS = (
    "external_id",
    "title",
    "comment",
    "expected",
    "model_name",
    "model_version",
    "variant",
    "surface",
    "output",
    "category",
    "area",
    "hint",
    "corrected_response",
)


def scrub_record(
    record: ExportRecord, *, extra_patterns: Sequence[tuple[str, str]] = (), memo: ScrubMemo | None = None
) -> ExportRecord:
    """Scrub every text an export writes, in place; `record.scrubbed` counts the placeholders.

    `record.text` stays as it is: it is never written, and the held-out check
    compares it with the (unscrubbed) text of eval items. `memo`, made with the
    same `extra_patterns`, is the export's: each distinct text is scrubbed once
    per export rather than once per occurrence.
    """
    if memo is None:
        # Without an export's memo, the scrubber's own bounded caches.
        def scrub_text(value: str) -> tuple[str, dict[str, int]]:
            result = scrub(value, extra_patterns=extra_patterns)
            return result.text, result.counts.items()

        def scrub_nested(value):
            return scrub_json(value, extra_patterns=extra_patterns)
    else:
        scrub_text, scrub_nested = memo.scrub, memo.scrub_json
    counts: Counter[str] = Counter()

    def clean(value: str) -> str:
        text, found = scrub_text(value)
        for label, count in found:
            counts[label] += count
        return text

    for name in SCRUBBED_TEXT_FIELDS:
        value = getattr(record, name)
        if isinstance(value, str) and value:
            setattr(record, name, clean(value))
    record.messages = [{"role": m["role"], "content": clean(m["content"])} for m in record.messages]
    record.tags = [clean(tag) if isinstance(tag, str) else tag for tag in record.tags]
    if record.tool_calls is not None:
        record.tool_calls, tool_counts = scrub_nested(record.tool_calls)
        counts.update(tool_counts)
    if record.message_tools is not None:
        record.message_tools, tool_counts = scrub_nested(record.message_tools)
        counts.update(tool_counts)
    record.scrubbed = dict(counts)
    return record


def record_from_row(
    row,
    *,
    label: Label | None,
    extra_patterns: Sequence[tuple[str, str]] = (),
    confirmed_checks: Sequence[str] = (),
    memo: ScrubMemo | None = None,
) -> ExportRecord:
    """The record of one item row (a named tuple of ITEM_COLUMNS, maybe with the vector) and its latest label.

    Rows rather than model instances: building five model objects per item
    (item, source, assignment, category, embedding) cost more than the export itself.
    `memo`: the export's scrub memo (made with `extra_patterns`), shared by all its records.
    """
    context = row_context(row)
    messages, structured = conversation(context)
    output = context.get("output")
    tool_calls = context.get("tool_calls")
    category = _final(label.category if label is not None and label.category_id else None)
    category_id, category_name = (category.id, category.name) if category else _assigned_category(row)
    raw_vector = getattr(row, VECTOR_COLUMN, None)
    record = ExportRecord(
        id=row.id,
        external_id=row.external_id,
        source=row.source__slug,
        kind=row.kind,
        rating=row.rating,
        title=row.title,
        comment=row.comment,
        expected=row.expected,
        item_severity=row.severity,
        model_name=row.model_name,
        model_version=row.model_version,
        variant=row.variant,
        surface=row.surface,
        occurred_at=row.occurred_at,
        messages=messages,
        structured=structured,
        output=output if isinstance(output, str) else None,
        tool_calls=tool_calls if isinstance(tool_calls, list) else None,
        category_id=category_id,
        category=category_name,
        reviewed=label is not None,
        verdict=label.verdict if label else None,
        severity=(label.severity if label else "") or row.severity,
        tags=list(label.tags) if label and isinstance(label.tags, list) else [],
        hint=label.hint if label else "",
        corrected_response=label.corrected_response if label else "",
        split=label.split if label else None,
        # What the item says, as the similarity index sees it.
        text=row.embed_text or embed_text_for(_TextSource(row, context), extra_patterns=extra_patterns),
        embedding_id=row.embedding_id,
        vector=None if raw_vector is None else np.frombuffer(raw_vector, dtype=np.float32),
        in_opposite_purpose=bool(getattr(row, OPPOSITE_COLUMN, False)),
        area=_assigned_area(row),
        area_id=_assigned_area_id(row),
        message_tools=message_tools(context) if structured else None,
        confirmed_checks=list(confirmed_checks),
    )
    return scrub_record(record, extra_patterns=extra_patterns, memo=memo)
