"""An item's rated context as the item page shows it: messages and tool calls as blocks, code fenced,
the text scrubbed unless an admin reveals it."""

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from feedback import custom_patterns
from feedback.models import FeedbackItem
from feedback.scrubber import scrub, scrub_json

FENCE = re.compile(r"```([\w.+#-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


@dataclass
class Segment:
    kind: str  # "text" or "code"
    text: str
    language: str = ""


@dataclass
class ToolCall:
    name: str
    arguments: str
    result: str
    has_result: bool
    # Where the call is in the context ("tool_calls.3", "messages.2.tool_calls.0"): flags point at it.
    location: str = ""


@dataclass
class Block:
    role: str
    segments: list[Segment] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)


def text_segments(text: Any) -> list[Segment]:
    """Split text at ``` fences into prose and code, so code keeps its lines and indentation."""
    if not isinstance(text, str):
        return [Segment(kind="code", text=_pretty(text), language="json")]
    segments: list[Segment] = []
    position = 0
    for match in FENCE.finditer(text):
        prose = text[position : match.start()].strip("\n")
        if prose.strip():
            segments.append(Segment(kind="text", text=prose))
        segments.append(Segment(kind="code", text=match.group(2).rstrip("\n"), language=match.group(1)))
        position = match.end()
    rest = text[position:].strip("\n")
    if rest.strip():
        segments.append(Segment(kind="text", text=rest))
    return segments


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def _tool_call(raw: Any, location: str = "") -> ToolCall:
    if not isinstance(raw, dict):
        return ToolCall(name="tool call", arguments=_pretty(raw), result="", has_result=False, location=location)
    # Products send both the flat shape and OpenAI's {"function": {...}} one.
    function = raw.get("function") if isinstance(raw.get("function"), dict) else {}
    name = raw.get("name") or function.get("name") or "tool call"
    arguments = raw.get("arguments", function.get("arguments", raw.get("input", {})))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    has_result = any(key in raw for key in ("result", "output"))
    result = raw.get("result", raw.get("output", ""))
    return ToolCall(
        name=str(name), arguments=_pretty(arguments), result=_pretty(result), has_result=has_result, location=location
    )


def item_transcript(*, item: FeedbackItem, context: dict | None = None) -> list[Block]:
    """The rated conversation or agent run as labelled blocks, in the order it happened.

    `context`: the (scrubbed) context to show instead of the item's own.
    """
    if context is None:
        context = item.context if isinstance(item.context, dict) else {}
    blocks: list[Block] = []
    for j, message in enumerate(context.get("messages") or []):
        if not isinstance(message, dict):
            continue
        block = Block(role=str(message.get("role", "message")), segments=text_segments(message.get("content", "")))
        block.tool_calls = [
            _tool_call(call, f"messages.{j}.tool_calls.{k}") for k, call in enumerate(message.get("tool_calls") or [])
        ]
        blocks.append(block)
    output = context.get("output")
    tool_calls = [_tool_call(call, f"tool_calls.{i}") for i, call in enumerate(context.get("tool_calls") or [])]
    if tool_calls:
        blocks.append(Block(role="tool calls", tool_calls=tool_calls))
    if output not in (None, ""):
        blocks.append(Block(role="output", segments=text_segments(output)))
    return blocks


def item_metadata(*, item: FeedbackItem, context: dict | None = None) -> str:
    if context is None:
        context = item.context if isinstance(item.context, dict) else {}
    metadata = context.get("metadata")
    return _pretty(metadata) if metadata else ""


@dataclass
class ItemText:
    """What the item page shows of an item's text: scrubbed by default, the original on reveal."""

    title: str
    comment: str
    expected: str
    transcript: str
    blocks: list[Block]
    metadata: str
    revealed: bool
    # Placeholder label -> replacements; empty when revealed or when nothing was found.
    scrubbed: dict[str, int] = field(default_factory=dict)

    @property
    def scrubbed_total(self) -> int:
        return sum(self.scrubbed.values())


def item_text(*, item: FeedbackItem, reveal: bool = False) -> ItemText:
    """The item's texts for its page: secrets and personal data replaced by placeholders unless `reveal`."""
    context = item.context if isinstance(item.context, dict) else {}
    fields = {"title": item.title or "", "comment": item.comment or "", "expected": item.expected or ""}
    counts: dict[str, int] = {}
    if not reveal:
        extra = custom_patterns.all_sources()
        context, context_counts = scrub_json(context, extra_patterns=extra)
        totals = Counter(context_counts)
        for name, value in fields.items():
            result = scrub(value, extra_patterns=extra)
            fields[name] = result.text
            totals.update(result.counts)
        counts = dict(sorted(totals.items()))
    transcript = context.get("transcript", "")
    return ItemText(
        **fields,
        transcript=transcript if isinstance(transcript, str) else "",
        blocks=item_transcript(item=item, context=context),
        metadata=item_metadata(item=item, context=context),
        revealed=reveal,
        scrubbed=counts,
    )


def item_raw_payload(*, item: FeedbackItem) -> str:
    return _pretty(item.received_payload)
