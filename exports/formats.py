"""The file formats of a dataset version, written row by row so memory stays flat.

Every writer is deterministic: rows in item-id order, JSON with sorted keys
and no spaces, CSV with "\\n" line ends, parquet with fixed options and row
groups of a fixed size (not the size of the chunks it was fed), so the same
records always give the same bytes.

Turns follow the OpenAI / Hugging Face chat schema, tool calls included: an
assistant turn's ``tool_calls`` ([{"id", "type": "function", "function":
{"name", "arguments": "<json text>"}}]) and ``role: "tool"`` turns with
``tool_call_id``. The rated run's own tool calls (the context's
``tool_calls``) become one such assistant turn and tool turn per call, before
the final answer. Items without a structured conversation give no chat-style row.

- chat_jsonl: ``{"messages": [...]}`` for supervised fine-tuning. It ends only
  in a response someone vouched for: the reviewer's corrected response, else a
  thumbs-up output no reviewer confirmed as a failure. A thumbs-down output is
  never a target (kto_jsonl keeps it as a negative example).
- preference_jsonl: ``{"prompt", "chosen", "rejected"}`` (TRL's conversational
  DPO format): the corrected response against the rated output, then, written
  at close, a thumbs-up response against a thumbs-down one to the same prompt.
- kto_jsonl: ``{"prompt", "completion", "label"}`` (TRL's unpaired preference
  format), labels from ratings and verdicts (rated_label), plus a true row per
  corrected response.
- hints_jsonl: the context, the model's output and the reviewer's coaching hint.
- coaching_jsonl: ``{"prompt", "completion"}`` with the hint as a user turn
  before where the model went wrong, the corrected response (if any) as completion.
- eval_jsonl: input messages, failure category, expected behaviour (hint,
  else corrected response, else the report's "expected"), tags.
- inspect_jsonl: Inspect AI samples (``input``, ``target``, ``id``, ``metadata``).
- csv, parquet: one row per item. In CSV, text a spreadsheet would run as a
  formula (a leading = + - @, tab or carriage return) gets a leading ', and a
  row holding a carriage return is quoted throughout, so every reader sees one
  row per item. Cells can be far larger than the csv module's default field
  limit: readers using csv.reader raise it first (CSV_FIELD_SIZE_LIMIT,
  csv_reader()); pandas and pyarrow need nothing.
"""

import csv
import hashlib
import io
import json
import tempfile
from collections import Counter
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from core.csvcells import spreadsheet_safe
from exports.records import ExportRecord
from exports.written import WrittenStrings, holds_float

PARQUET_ROW_GROUP = 10_000
# csv.reader refuses a field over 131,072 characters by default, and one storable
# item holds more: messages of up to 100,000 characters each, longer still once
# JSON-escaped and quote-doubled. 2**31 - 1 is the largest limit every platform
# accepts and above anything a database column gives back.
CSV_FIELD_SIZE_LIMIT = 2**31 - 1


def json_line(value) -> str:
    return _json_text(value) + "\n"


def _json_text(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def json_text(value) -> str:
    """_json_text(value), by orjson when it writes the same text (see json_bytes): tool-call arguments and results."""
    written = _by_orjson(value, orjson.OPT_SORT_KEYS)
    return _json_text(value) if written is None else written.decode("utf-8")


def _by_orjson(value, option: int, *, floats: bool | None = None) -> bytes | None:
    """orjson's bytes when they are json's (see json_bytes), else None."""
    if floats is None:
        floats = holds_float(value)
    if floats:
        return None
    try:
        return orjson.dumps(value, option=option)
    except (orjson.JSONEncodeError, TypeError):
        return None


def json_bytes(value, *, floats: bool | None = None) -> bytes:
    """json_line(value) as UTF-8 bytes, by orjson when it writes the same bytes (several times faster).

    orjson writes what json.dumps(ensure_ascii=False, sort_keys=True, compact)
    writes for strings, integers, booleans, None, lists and dicts with text
    keys; not for some floats (1e-05, which it writes 0.00001), so a value
    holding a float goes to json (`floats`: whether it does, when the caller
    knows). What orjson refuses (keys that are not text, integers beyond 64
    bits, unpaired surrogates) goes to json too, which writes or refuses it as before.
    """
    written = _by_orjson(value, _ORJSON_LINE, floats=floats)
    return json_line(value).encode("utf-8") if written is None else written


_ORJSON_LINE = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE


def iso(moment) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


class _HashingFile(io.RawIOBase):
    """A binary file that hashes what passes through: a version's checksums need no second read."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file = open(path, "wb")  # noqa: SIM115 (closed by close())
        self.sha256 = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self._file.write(data)

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()


# --- What a record may be trained on ------------------------------------------------

# The reviewer's verdicts that speak to the rated output (labeling.models.Label.Verdict).
CONFIRMED_FAILURE = "failure"
NOT_FAILURE = "not_failure"
SPAM = "spam"


def rated_label(record: ExportRecord) -> bool | None:
    """Is the rated output a desirable response, by its rating and the reviewer's verdict? None: nobody says.

    A reviewer's confirmed failure outweighs a thumbs-up. A thumbs-down a
    reviewer called "not a failure" gets no label: that verdict clears the
    output of blame, it does not vouch for it. Spam means the rating carries no
    signal at all.
    """
    if not record.output or record.verdict == SPAM:
        return None
    if record.verdict == CONFIRMED_FAILURE or record.confirmed_checks:
        # A confirmed rollout flag (reward hacking, a risky action) outweighs any rating.
        return False
    if record.rating == 1:
        return True
    if record.rating == -1 and record.verdict != NOT_FAILURE:
        return False
    return None


def sft_target(record: ExportRecord) -> str | None:
    """The response a supervised row may end in: only one someone vouched for, never a thumbs-down output.

    Never for a rollout with a confirmed flag: its row would carry the flagged tool calls before whatever answer.
    """
    if record.confirmed_checks:
        return None
    if record.corrected_response.strip():
        return record.corrected_response
    if record.rating == 1 and rated_label(record) is True:
        return record.output
    return None


def _why_no_target(record: ExportRecord) -> str:
    if record.confirmed_checks:
        return "have a confirmed rollout flag (" + ", ".join(record.confirmed_checks) + ")"
    if record.verdict == SPAM:
        return "are marked spam and have no corrected response"
    if record.rating == -1:
        return "are thumbs-down without a corrected response"
    if record.rating == 1 and record.verdict == CONFIRMED_FAILURE:
        return "are thumbs-up a reviewer confirmed as a failure, without a corrected response"
    if record.rating == 1:
        return "are thumbs-up without an output"
    return "have no rating and no corrected response"


# --- Turns in the OpenAI / Hugging Face chat schema ----------------------------------


def assistant(content: str) -> dict[str, str]:
    return {"role": "assistant", "content": content}


def _tool_name_and_arguments(call: dict) -> tuple[str | None, object]:
    function = call.get("function")
    if isinstance(function, dict):  # {"function": {"name", "arguments"}}: the OpenAI shape
        return function.get("name"), function.get("arguments")
    if isinstance(function, str):  # {"function": name, "arguments"}: Inspect's shape
        return function, call.get("arguments")
    return call.get("name"), call.get("arguments")


def openai_tool_call(call, *, fallback_id: str) -> dict | None:
    """One tool call as the chat schema has it (arguments as JSON text); None for a call without a name."""
    if not isinstance(call, dict):
        return None
    name, arguments = _tool_name_and_arguments(call)
    if not isinstance(name, str) or not name:
        return None
    call_id = call.get("id")
    if not isinstance(arguments, str):
        arguments = json_text({} if arguments is None else arguments)
    return {
        "id": call_id if isinstance(call_id, str) and call_id else fallback_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _cached(record: ExportRecord, name: str, sources: tuple, build):
    """A turn list built once per record and shared by every format (callers never change it).

    Kept with the objects it was built from, so a record whose fields are
    replaced (scrubbing does) builds it anew.
    """
    hit = record.derived.get(name)
    if hit is not None and len(hit[0]) == len(sources) and all(a is b for a, b in zip(hit[0], sources)):
        return hit[1]
    value = build(record)
    record.derived[name] = (sources, value)
    return value


def prompt_turns(record: ExportRecord) -> list[dict]:
    """The conversation up to the rated answer, with the tool calls and tool results its turns hold.

    The list is shared between formats: extend a copy (`+`), never the list itself.
    """
    return _cached(record, "prompt", (record.messages, record.message_tools), _prompt_turns)


def _prompt_turns(record: ExportRecord) -> list[dict]:
    if not record.message_tools:
        return list(record.messages)
    turns = []
    for index, message in enumerate(record.messages):
        turn = dict(message)
        fields = record.message_tools.get(index, {})
        if message["role"] == "assistant" and fields.get("tool_calls"):
            calls = [
                openai_tool_call(call, fallback_id=f"call_{index}_{number}")
                for number, call in enumerate(fields["tool_calls"], start=1)
            ]
            if any(calls):
                turn["tool_calls"] = [call for call in calls if call]
        elif message["role"] == "tool":
            for name in ("tool_call_id", "name"):
                if isinstance(fields.get(name), str):
                    turn[name] = fields[name]
        turns.append(turn)
    return turns


def _tool_result(call: dict) -> str | None:
    for key in ("result", "output", "content"):
        value = call.get(key)
        if value is not None:
            return value if isinstance(value, str) else json_text(value)
    return None


def rollout_turns(record: ExportRecord) -> list[dict]:
    """The rated run's own tool calls: per call an assistant turn calling it and a tool turn with its result.

    The list is shared between formats: extend a copy (`+`), never the list itself.
    """
    return _cached(record, "rollout", (record.tool_calls,), _rollout_turns)


def _rollout_turns(record: ExportRecord) -> list[dict]:
    turns = []
    for number, call in enumerate(record.tool_calls or (), start=1):
        tool_call = openai_tool_call(call, fallback_id=f"call_{number}")
        if tool_call is None:
            continue
        turns.append({"role": "assistant", "content": "", "tool_calls": [tool_call]})
        # Every call gets its tool turn, empty when no result was recorded: chat APIs and templates
        # expect each call answered, and a prompt ending in a call would read as an unfinished answer.
        turns.append({"role": "tool", "tool_call_id": tool_call["id"], "content": _tool_result(call) or ""})
    return turns


def hint_turn(hint: str) -> dict[str, str]:
    # A user turn, not a system one: many chat templates accept a system turn only first.
    return {"role": "user", "content": f"Hint: {hint}"}


# --- Writers -------------------------------------------------------------------------


class Writer:
    format_name = ""
    file_name = ""
    description = ""
    # What an empty file of this format lacks, said before the counts of why each item was skipped.
    empty_because = "the version has no items"

    def __init__(self, folder: Path) -> None:
        self.path = folder / self.file_name
        self.rows = 0
        self.seen = 0
        self.skipped = 0
        # Why records gave no row ("are thumbs-down without a corrected response") -> how many.
        self.skip_reasons: Counter[str] = Counter()
        self._hashing = _HashingFile(self.path)
        # Set by an export: every row written is handed to it for the scrub check (exports.written).
        self.sink: WrittenStrings | None = None

    def _binary(self) -> io.BufferedWriter:
        return io.BufferedWriter(self._hashing, buffer_size=1 << 20)

    def _text(self, *, newline: str) -> io.TextIOWrapper:
        return io.TextIOWrapper(self._binary(), encoding="utf-8", newline=newline)

    @property
    def sha256(self) -> str:
        """The checksum of the bytes written so far: complete once the writer is closed."""
        return self._hashing.sha256.hexdigest()

    @property
    def size(self) -> int:
        """The bytes written so far: complete once the writer is closed."""
        return self._hashing.size

    @classmethod
    def rows_for(cls, record: ExportRecord) -> int:
        """How many rows this record yields on its own: the same rules as write(), without writing."""
        return 1

    @property
    def empty_reason(self) -> str | None:
        """Why the file has no row, with the counts of why items were skipped; None when it has rows."""
        if self.rows:
            return None
        if not self.seen:
            return "the version has no items"
        details = ", ".join(
            f"{count} {reason}" for reason, count in sorted(self.skip_reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        return f"{self.empty_because} (of {self.seen} items: {details})" if details else self.empty_because

    def write(self, records: list[ExportRecord]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class JsonlWriter(Writer):
    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        # Open across write() calls and closed by close(): the writer streams chunk by chunk.
        # Binary: the lines are UTF-8 bytes already (json_bytes).
        self._file = self._binary()

    @classmethod
    def lines_of(cls, record: ExportRecord) -> list[dict]:
        """The rows of one record: none when the format has nothing to take from it."""
        raise NotImplementedError

    @classmethod
    def skip_reason(cls, record: ExportRecord) -> str:
        """Why a record gave no row, as "N items <reason>" reads."""
        raise NotImplementedError

    @classmethod
    def rows_for(cls, record: ExportRecord) -> int:
        return len(cls.lines_of(record))

    def write(self, records: list[ExportRecord]) -> None:
        lines = []
        for record in records:
            values = self.lines_of(record)
            if not values:
                self.skipped += 1
                self.skip_reasons[self.skip_reason(record)] += 1
            for value in values:
                lines.append(self._line(value))
            self.after_record(record)
        self.seen += len(records)
        self._file.write(b"".join(lines))
        self.rows += len(lines)

    def _line(self, value) -> bytes:
        """One row as written; the sink (when set) takes its strings and says whether it holds a float."""
        if self.sink is None:
            return json_bytes(value)
        return json_bytes(value, floats=self.sink.add(self.file_name, value))

    def after_record(self, record: ExportRecord) -> None:
        """A hook for formats that pair records with each other."""

    def close(self) -> None:
        self._file.close()


class ChatWriter(JsonlWriter):
    format_name = "chat_jsonl"
    file_name = "chat.jsonl"
    description = (
        "chat format for supervised fine-tuning: the conversation with its tool calls and results, ending in the "
        "reviewer's corrected response or a thumbs-up output no reviewer confirmed as a failure (never a "
        "thumbs-down output)"
    )
    empty_because = "no item has a corrected response or a thumbs-up output in a structured conversation"

    @classmethod
    def lines_of(cls, record: ExportRecord) -> list[dict]:
        target = sft_target(record)
        if not record.structured or target is None:
            return []
        # The run's tool calls stay with a corrected response too: the reviewer wrote it against their results.
        return [{"messages": prompt_turns(record) + rollout_turns(record) + [assistant(target)]}]

    @classmethod
    def skip_reason(cls, record: ExportRecord) -> str:
        return "have no structured conversation" if not record.structured else _why_no_target(record)


class _PairIndex:
    """Responses rated up and down per prompt, for pairs across items, with little memory.

    Each candidate's response turns go to an unnamed temporary file; memory
    keeps per prompt (a 16-byte digest) only the offsets of its up and down
    responses. close() pairs them in the order the prompts first appeared, the
    n-th up with the n-th down, so reruns give the same bytes and a prompt with
    many ratings gives at most min(ups, downs) pairs rather than every product.
    """

    def __init__(self) -> None:
        self._spill = tempfile.TemporaryFile()  # noqa: SIM115 (closed by pairs())
        self._by_prompt: dict[bytes, tuple[list[tuple[int, int]], list[tuple[int, int]]]] = {}
        self._prompts: dict[bytes, tuple[int, int]] = {}
        self._end = 0

    def _put(self, data: bytes) -> tuple[int, int]:
        # Only appended to until pairs() reads: the end is counted, not sought.
        offset = self._end
        self._spill.write(data)
        self._end += len(data)
        return offset, len(data)

    def _get(self, where: tuple[int, int]):
        self._spill.seek(where[0])
        return orjson.loads(self._spill.read(where[1]))

    def add(self, prompt: list[dict], response: list[dict], *, good: bool) -> None:
        # orjson even for a float: only read back here, and every float it writes reads back the same.
        prompt_line = json_bytes(prompt, floats=False)
        key = hashlib.blake2b(prompt_line, digest_size=16).digest()
        if key not in self._by_prompt:
            self._by_prompt[key] = ([], [])
            self._prompts[key] = self._put(prompt_line)
        self._by_prompt[key][0 if good else 1].append(self._put(json_bytes(response, floats=False)))

    def pairs(self) -> Iterator[dict]:
        try:
            for key, (ups, downs) in self._by_prompt.items():
                if not ups or not downs:
                    continue
                prompt = self._get(self._prompts[key])
                for up, down in zip(ups, downs):
                    chosen, rejected = self._get(up), self._get(down)
                    if chosen != rejected:
                        yield {"prompt": prompt, "chosen": chosen, "rejected": rejected}
        finally:
            self._spill.close()


class PreferenceWriter(JsonlWriter):
    format_name = "preference_jsonl"
    file_name = "preference.jsonl"
    description = (
        "preference pairs (TRL's conversational DPO format): the corrected response (chosen) against the rated "
        "output (rejected), then, for prompts rated both ways, a thumbs-up response against a thumbs-down one "
        "(e.g. two A/B arms)"
    )
    empty_because = (
        "no item has a corrected response that differs from its output, and no prompt has both a thumbs-up "
        "and a thumbs-down response"
    )

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self._pairs = _PairIndex()

    @classmethod
    def lines_of(cls, record: ExportRecord) -> list[dict]:
        """The pair of a corrected response; pairs across items come at close (see rows_for)."""
        chosen, rejected = record.corrected_response, record.output
        if not record.structured or not chosen.strip() or not rejected or chosen == rejected:
            return []
        if record.confirmed_checks:
            # The flagged tool calls are what is rejected: they go with the rejected side, not the prompt.
            rejected_turns = rollout_turns(record) + [assistant(rejected)]
            return [{"prompt": prompt_turns(record), "chosen": [assistant(chosen)], "rejected": rejected_turns}]
        # The run's tool calls are shared by both sides, so they belong to the prompt.
        prompt = prompt_turns(record) + rollout_turns(record)
        return [{"prompt": prompt, "chosen": [assistant(chosen)], "rejected": [assistant(rejected)]}]

    @classmethod
    def rows_for(cls, record: ExportRecord) -> int:
        """The record's own pair; a thumbs-up and a thumbs-down to the same prompt add one more at close."""
        return len(cls.lines_of(record))

    @classmethod
    def skip_reason(cls, record: ExportRecord) -> str:
        if not record.structured:
            return "have no structured conversation"
        if not record.output:
            return "have no output"
        if record.corrected_response == record.output:
            return "have a corrected response equal to the output"
        if rated_label(record) is None:
            return "have no corrected response and no rating to pair"
        return "have no corrected response and no opposite rating on the same prompt"

    def after_record(self, record: ExportRecord) -> None:
        good = rated_label(record)
        if record.structured and good is not None:
            self._pairs.add(prompt_turns(record), rollout_turns(record) + [assistant(record.output)], good=good)

    def close(self) -> None:
        try:
            for pair in self._pairs.pairs():
                self._file.write(self._line(pair))
                self.rows += 1
        finally:
            super().close()


class KtoWriter(JsonlWriter):
    format_name = "kto_jsonl"
    file_name = "kto.jsonl"
    description = (
        "unpaired preference (TRL's conversational KTO format: prompt, completion, label): thumbs-up true unless "
        "a reviewer confirmed a failure, thumbs-down false unless a reviewer said not a failure, and a corrected "
        "response as one more true row"
    )
    empty_because = "no item in a structured conversation has a rating, a failure verdict or a corrected response"

    @classmethod
    def lines_of(cls, record: ExportRecord) -> list[dict]:
        if not record.structured:
            return []
        label = rated_label(record)
        corrected = record.corrected_response if record.corrected_response.strip() else ""
        rows = []
        if record.confirmed_checks:
            # Only as undesirable: the flagged calls belong to the completion that is labelled false.
            completion = rollout_turns(record) + ([assistant(record.output)] if record.output else [])
            return [{"prompt": prompt_turns(record), "completion": completion, "label": False}] if completion else []
        if corrected:
            # Judged against the correction, the run's tool calls are context: only the final answer differs.
            prompt = prompt_turns(record) + rollout_turns(record)
            if label is not None and record.output != corrected:
                rows.append({"prompt": prompt, "completion": [assistant(record.output)], "label": label})
            rows.append({"prompt": prompt, "completion": [assistant(corrected)], "label": True})
        elif label is not None:
            completion = rollout_turns(record) + [assistant(record.output)]
            rows.append({"prompt": prompt_turns(record), "completion": completion, "label": label})
        return rows

    @classmethod
    def skip_reason(cls, record: ExportRecord) -> str:
        if not record.structured:
            return "have no structured conversation"
        if not record.output:
            return "have no output"
        if record.verdict == SPAM:
            return "are marked spam"
        if record.rating == -1:
            return "are thumbs-down a reviewer said are not a failure"
        return "have no rating"


class HintsWriter(JsonlWriter):
    format_name = "hints_jsonl"
    file_name = "hints.jsonl"
    description = "coaching hints: the context, the model's output, the feedback and what the model should have done"
    empty_because = "no item has a coaching hint"

    @classmethod
    def lines_of(cls, record: ExportRecord) -> list[dict]:
        if not record.hint.strip():
            return []
        return [
            {
                "id": record.id,
                "messages": record.messages,
                "output": record.output,
                "feedback": record.comment,
                "hint": record.hint,
                "category": record.category,
                "tags": record.tags,
            }
        ]

    @classmethod
    def skip_reason(cls, record: ExportRecord) -> str:
        return "have no coaching hint"


class CoachingWriter(JsonlWriter):
    format_name = "coaching_jsonl"
    file_name = "coaching.jsonl"
    description = (
        "self-coaching rows (prompt / completion): the conversation up to the failed answer with its tool calls, "
        "the reviewer's hint as a user turn \"Hint: ...\", and the corrected response as the completion (empty "
        "when there is none, for generating one)"
    )
    empty_because = "no item in a structured conversation has a coaching hint"

    @classmethod
    def lines_of(cls, record: ExportRecord) -> list[dict]:
        if not record.structured or not record.hint.strip():
            return []
        corrected = record.corrected_response if record.corrected_response.strip() else ""
        return [
            {
                "id": record.id,
                # The failed answer itself stays out: the row shows the hint where the answer went wrong.
                "prompt": prompt_turns(record) + rollout_turns(record) + [hint_turn(record.hint)],
                "completion": [assistant(corrected)] if corrected else [],
                "hint": record.hint,
                "category": record.category,
                "tags": record.tags,
            }
        ]

    @classmethod
    def skip_reason(cls, record: ExportRecord) -> str:
        return "have no structured conversation" if not record.structured else "have no coaching hint"


class EvalWriter(JsonlWriter):
    format_name = "eval_jsonl"
    file_name = "eval.jsonl"
    description = "eval cases: input messages, failure category, expected behaviour, tags"
    empty_because = "no item has input messages or a transcript"

    @classmethod
    def lines_of(cls, record: ExportRecord) -> list[dict]:
        if not record.messages:
            return []
        return [
            {
                "id": record.id,
                "messages": record.messages,
                "failure_category": record.category,
                "expected_behavior": record.expected_behavior,
                "tags": record.tags,
                "model_version": record.model_version,
                "severity": record.severity,
                # Only on flagged rollouts, so other rows stay as they were: the checks it must not repeat.
                **({"rollout_checks": record.confirmed_checks} if record.confirmed_checks else {}),
            }
        ]

    @classmethod
    def skip_reason(cls, record: ExportRecord) -> str:
        return "have no input messages or transcript"


def inspect_messages(turns: list[dict]) -> list[dict]:
    """Chat-schema turns as Inspect AI reads them: a tool call is {id, function: name, arguments: dict}."""
    names = {}
    messages = []
    for turn in turns:
        message = {"role": turn["role"], "content": turn["content"]}
        if turn.get("tool_calls"):
            message["tool_calls"] = []
            for call in turn["tool_calls"]:
                names[call["id"]] = call["function"]["name"]
                try:
                    arguments = json.loads(call["function"]["arguments"])
                except ValueError:
                    arguments = None
                if not isinstance(arguments, dict):
                    # Inspect wants an object; text that is not one is kept whole under a key.
                    arguments = {"arguments": call["function"]["arguments"]}
                message["tool_calls"].append(
                    {"id": call["id"], "function": call["function"]["name"], "arguments": arguments, "type": "function"}
                )
        if turn["role"] == "tool" and turn.get("tool_call_id"):
            message["tool_call_id"] = turn["tool_call_id"]
            function = turn.get("name") or names.get(turn["tool_call_id"])
            if function:
                message["function"] = function
        messages.append(message)
    return messages


class InspectWriter(JsonlWriter):
    format_name = "inspect_jsonl"
    file_name = "inspect.jsonl"
    description = (
        "eval samples in Inspect AI's format (input, target, id, metadata), for inspect_ai.dataset.json_dataset: "
        "the conversation up to the rated answer (a report's transcript as text) and the expected behaviour"
    )
    empty_because = "no item has input messages or a transcript"

    @classmethod
    def lines_of(cls, record: ExportRecord) -> list[dict]:
        if not record.messages:
            return []
        return [
            {
                "id": record.id,
                # The model under evaluation makes its own tool calls: the rated run's are not part of the input.
                "input": inspect_messages(prompt_turns(record)) if record.structured else record.messages[0]["content"],
                "target": record.expected_behavior,
                "metadata": {
                    "category": record.category,
                    "area": record.area,
                    "tags": record.tags,
                    "severity": record.severity,
                    "model_version": record.model_version,
                    "kind": record.kind,
                    "rated_output": record.output,
                    # Flagged rollouts name the confirmed checks: a scorer can ask "did the model do it again".
                    **({"rollout_checks": record.confirmed_checks} if record.confirmed_checks else {}),
                },
            }
        ]

    @classmethod
    def skip_reason(cls, record: ExportRecord) -> str:
        return "have no input messages or transcript"


# One row per item: (column, arrow type, value of a record).
COLUMNS = (
    ("id", pa.int64(), lambda r: r.id),
    ("external_id", pa.string(), lambda r: r.external_id),
    ("source", pa.string(), lambda r: r.source),
    ("kind", pa.string(), lambda r: r.kind),
    ("rating", pa.int8(), lambda r: r.rating),
    ("model_name", pa.string(), lambda r: r.model_name),
    ("model_version", pa.string(), lambda r: r.model_version),
    ("variant", pa.string(), lambda r: r.variant),
    ("surface", pa.string(), lambda r: r.surface),
    ("occurred_at", pa.timestamp("us", tz="UTC"), lambda r: r.occurred_at),
    ("title", pa.string(), lambda r: r.title),
    ("comment", pa.string(), lambda r: r.comment),
    ("expected", pa.string(), lambda r: r.expected),
    ("category_id", pa.int64(), lambda r: r.category_id),
    ("category", pa.string(), lambda r: r.category),
    ("reviewed", pa.bool_(), lambda r: r.reviewed),
    ("verdict", pa.string(), lambda r: r.verdict),
    ("severity", pa.string(), lambda r: r.severity),
    ("tags", pa.list_(pa.string()), lambda r: r.tags),
    ("hint", pa.string(), lambda r: r.hint),
    ("corrected_response", pa.string(), lambda r: r.corrected_response),
    ("split", pa.string(), lambda r: r.split),
    ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])), lambda r: r.messages),
    ("output", pa.string(), lambda r: r.output),
    ("tool_calls", pa.string(), lambda r: None if r.tool_calls is None else json.dumps(r.tool_calls, sort_keys=True)),
)
# In CSV, lists and nested values are JSON text.
JSON_IN_CSV = {"tags", "messages"}


def csv_reader(handle):
    """csv.reader over an items.csv, able to read any cell an export writes."""
    # The limit is process-wide: raise it, never lower it, as another reader may need it high too.
    if csv.field_size_limit() < CSV_FIELD_SIZE_LIMIT:
        csv.field_size_limit(CSV_FIELD_SIZE_LIMIT)
    return csv.reader(handle)


# Where the JSON cells are, and the value a reader parsing the cell gets back (the tool_calls cell is "" for none).
_CSV_JSON_CELLS = tuple(
    (index, (lambda r: r.tool_calls if r.tool_calls is not None else "") if name == "tool_calls" else value_of)
    for index, (name, _, value_of) in enumerate(COLUMNS)
    if name in JSON_IN_CSV or name == "tool_calls"
)


def _csv_as_read(record: ExportRecord, row: list) -> list:
    """The row as a reader gets it back: each cell's text, the JSON cells parsed (what the scrub check reads)."""
    cells = [cell if isinstance(cell, str) else str(cell) for cell in row]
    for index, value_of in _CSV_JSON_CELLS:
        cells[index] = value_of(record)
    return cells


class CsvWriter(Writer):
    format_name = "csv"
    file_name = "items.csv"
    description = "one row per item; tags, messages and tool_calls as JSON text"

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self._file = self._text(newline="")
        self._csv = csv.writer(self._file, lineterminator="\n")
        # Minimal quoting quotes a field only for the delimiter, the quote and the
        # line terminator ("\n"), so a bare "\r" would go out unquoted and end the
        # row early for csv.reader, pandas and spreadsheets alike. A row holding
        # one is quoted throughout; the rows without keep the bytes they always had.
        self._csv_quote_all = csv.writer(self._file, lineterminator="\n", quoting=csv.QUOTE_ALL)
        self._csv.writerow([name for name, _, _ in COLUMNS])

    def write(self, records: list[ExportRecord]) -> None:
        for record in records:
            row = []
            for name, _, value_of in COLUMNS:
                value = value_of(record)
                if name in JSON_IN_CSV:
                    value = json.dumps(value, ensure_ascii=False, sort_keys=True)
                elif name == "occurred_at":
                    value = iso(value)
                elif value is None:
                    value = ""
                row.append(spreadsheet_safe(value))
            has_return = any(isinstance(cell, str) and "\r" in cell for cell in row)
            (self._csv_quote_all if has_return else self._csv).writerow(row)
            if self.sink is not None:
                self.sink.add(self.file_name, _csv_as_read(record, row))
        self.rows += len(records)

    def close(self) -> None:
        self._file.close()


_PARQUET_TOOL_CALLS = [name for name, _, _ in COLUMNS].index("tool_calls")


class ParquetWriter(Writer):
    format_name = "parquet"
    file_name = "items.parquet"
    description = "one row per item (pyarrow, zstd); messages as a list of {role, content}"

    schema = pa.schema([(name, kind) for name, kind, _ in COLUMNS])

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self._file = self._binary()
        self._writer = pq.ParquetWriter(
            self._file,
            self.schema,
            compression="zstd",
            compression_level=3,
            use_dictionary=True,
            write_statistics=True,
            version="2.6",
            data_page_version="1.0",
        )
        self._buffer: list[list] = [[] for _ in COLUMNS]

    def write(self, records: list[ExportRecord]) -> None:
        sink = self.sink
        for record in records:
            values = [value_of(record) for _, _, value_of in COLUMNS]
            for column, value in zip(self._buffer, values):
                column.append(value)
            if sink is not None:
                # As a reader gets the row back, with the JSON text of tool_calls parsed.
                values[_PARQUET_TOOL_CALLS] = record.tool_calls
                sink.add(self.file_name, values)
            self.rows += 1
            if len(self._buffer[0]) >= PARQUET_ROW_GROUP:
                self._flush()

    def _flush(self) -> None:
        if not self._buffer[0]:
            return
        arrays = [pa.array(values, type=kind) for values, (_, kind, _) in zip(self._buffer, COLUMNS)]
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema), row_group_size=PARQUET_ROW_GROUP)
        self._buffer = [[] for _ in COLUMNS]

    def close(self) -> None:
        self._flush()
        self._writer.close()
        self._file.close()


WRITERS: dict[str, type[Writer]] = {
    writer.format_name: writer
    for writer in (
        ChatWriter,
        PreferenceWriter,
        KtoWriter,
        HintsWriter,
        CoachingWriter,
        EvalWriter,
        InspectWriter,
        CsvWriter,
        ParquetWriter,
    )
}
