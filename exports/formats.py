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
  csv_reader()); pandas and pyarrow need nothing."""

import hashlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson

from exports.encoding import json_bytes
from exports.files import JsonlWriter, Writer
from exports.records import ExportRecord
from exports.tables import CsvWriter, ParquetWriter
from exports.turns import (
    SPAM,
    assistant,
    hint_turn,
    prompt_turns,
    rated_label,
    rollout_turns,
    sft_target,
    why_no_target,
)


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
        return "have no structured conversation" if not record.structured else why_no_target(record)


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
