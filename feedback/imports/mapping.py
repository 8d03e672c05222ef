"""Mappers turn one record of an import file into `Candidate`s: a rating event as the webhook takes
it (validated later by feedback.schemas.RatingEvent, exactly as a webhook
event), or a report (feedback.schemas.ReportIn), or a refusal naming the
field. One Langfuse trace or LangSmith run can carry several scores or
feedback entries, so one record can give several candidates.

Formats:

- ``jsonl``: one webhook event per line (``{"id", "type": "feedback.rating", ...}``).
- ``csv``: either this project's own export (items.csv: columns ``external_id``,
  ``kind``, ``rating``, ``messages``...) or events flattened to columns
  (``id``, ``rating``, ``model.name``, ``context`` as JSON text...).
- ``parquet``: the same two shapes (items.parquet, or event fields as columns).
- ``langfuse``: JSONL of scores joined with their traces, either a score with a
  ``trace`` object or a trace with a ``scores`` list.
- ``langsmith``: JSONL of runs with their feedback, either a run with a
  ``feedback`` list or a feedback entry with a ``run`` object."""

import json
from typing import Any

from core.csvcells import FORMULA_STARTS
from feedback.imports.readers import Candidate

# The columns of this project's items.csv / items.parquet (exports.tables.COLUMNS) that mark that shape.
EXPORT_MARKERS = {"external_id", "kind"}

# Columns of the event schema that hold JSON when flattened into a CSV cell.
JSON_COLUMNS = {"context", "model", "context.messages", "context.tool_calls", "context.metadata"}


def refusal(reason: str, field: str = "", raw: Any = None, shown_id: str | None = None) -> Candidate:
    return Candidate("refused", raw=raw, reason=reason, field=field, shown_id=shown_id)


def map_record(value: Any, file_format: str, *, names: frozenset[str] = frozenset()) -> list[Candidate]:
    """The candidates one record gives. `names`: the score (Langfuse) or feedback key (LangSmith) names to take."""
    if not isinstance(value, dict):
        return [refusal("must be a JSON object", "")]
    if file_format == "langfuse":
        return map_langfuse(value, names=names)
    if file_format == "langsmith":
        return map_langsmith(value, names=names)
    if EXPORT_MARKERS <= value.keys():
        return [map_export_row(value, from_csv=file_format == "csv")]
    if file_format == "jsonl":
        return [Candidate("rating", value, raw=value)]
    return [map_flat_event(value)]


def map_flat_event(row: dict[str, Any]) -> Candidate:
    """An event whose nested fields are columns named with dots (``model.name``), JSON text in CSV."""
    event: dict[str, Any] = {}
    for column, cell in row.items():
        value = cell
        # In CSV every nested value is JSON text; parquet may hold it nested already, or as text.
        if column in JSON_COLUMNS and isinstance(cell, str):
            try:
                value = json.loads(cell)
            except ValueError:
                return refusal(f"{column}: must be JSON text", column, raw=row, shown_id=_text_id(row.get("id")))
        target = event
        parts = column.split(".")
        for part in parts[:-1]:
            nested = target.setdefault(part, {})
            if not isinstance(nested, dict):
                return refusal(f"{column}: {part} is given twice", column, raw=row)
            target = nested
        target[parts[-1]] = value
    event.setdefault("type", "feedback.rating")
    return Candidate("rating", event, raw=row)


def _unsafe_cell(value: Any) -> Any:
    """Undo the leading ' that an export puts before text a spreadsheet would run as a formula."""
    if isinstance(value, str) and value.startswith("'") and value[1:].startswith(FORMULA_STARTS):
        return value[1:]
    return value


def _json_cell(value: Any, column: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise _CellError(f"{column}: must be JSON text", column) from None
    return value


class _CellError(Exception):
    def __init__(self, reason: str, field: str) -> None:
        super().__init__(reason)
        self.reason, self.field = reason, field


def map_export_row(row: dict[str, Any], *, from_csv: bool) -> Candidate:
    """A row of this project's items.csv / items.parquet back into the event or report it came from.

    Reviewer labels (category, verdict, tags, hint...) belong to the labeling
    app and are not imported; the item's own id and source column are not
    either (the import's source is given, and ids are the receiving app's).
    """
    cells = {key: _unsafe_cell(value) for key, value in row.items()} if from_csv else dict(row)
    shown = _text_id(cells.get("external_id"))
    try:
        messages = _json_cell(cells.get("messages", []), "messages")
        tool_calls = _json_cell(cells.get("tool_calls"), "tool_calls") if cells.get("tool_calls") is not None else None
    except _CellError as exc:
        return refusal(exc.reason, exc.field, raw=row, shown_id=shown)
    kind = cells.get("kind")
    if kind == "report":
        transcript = ""
        if isinstance(messages, list) and len(messages) == 1 and isinstance(messages[0], dict):
            transcript = messages[0].get("content", "")
        report = {
            "id": cells.get("external_id"),
            "title": cells.get("title", ""),
            "what_happened": cells.get("comment", ""),
            "expected": cells.get("expected", ""),
            "model_version": cells.get("model_version", ""),
            "transcript": transcript,
            "occurred_at": cells.get("occurred_at"),
        }
        if cells.get("severity"):
            report["severity"] = cells["severity"]
        return Candidate("report", report, raw=row)
    if kind != "rating":
        return refusal(f"kind: must be 'rating' or 'report', not {kind!r}", "kind", raw=row, shown_id=shown)
    rating = cells.get("rating")
    if isinstance(rating, str) and rating.strip() in ("1", "-1"):
        rating = int(rating)
    if rating not in (1, -1):
        return refusal("rating: must be 1 or -1 for a rating", "rating", raw=row, shown_id=shown)
    context: dict[str, Any] = {"messages": messages}
    if cells.get("output") is not None:
        context["output"] = cells["output"]
    if tool_calls is not None:
        context["tool_calls"] = tool_calls
    event = {
        "id": cells.get("external_id"),
        "type": "feedback.rating",
        "occurred_at": cells.get("occurred_at"),
        "rating": "up" if rating == 1 else "down",
        "model": {"name": cells.get("model_name", ""), "version": cells.get("model_version", "")},
        "variant": cells.get("variant", ""),
        "surface": cells.get("surface", ""),
        "context": context,
    }
    if cells.get("comment"):
        event["comment"] = cells["comment"]
    return Candidate("rating", event, raw=row)


def _text_id(value: Any) -> str | None:
    return value if isinstance(value, str) and len(value) <= 255 else None


# Values that read as a thumbs-up or a thumbs-down, for categorical scores and string values.
UP_WORDS = {"up", "thumbs_up", "thumbs-up", "thumbsup", "positive", "good", "yes", "true", "1", "👍", "like", "helpful"}
DOWN_WORDS = {"down", "thumbs_down", "thumbs-down", "thumbsdown", "negative", "bad", "no", "false", "0", "-1", "👎",
              "dislike", "unhelpful"}


def thumb_of(number: Any, text: Any) -> str | None:
    """"up", "down", or None when neither a number nor a word says which.

    Numbers: 1 (or true) is a thumbs-up; 0, -1 (or false) a thumbs-down, the
    values Langfuse's and LangSmith's user-feedback guides send. Any other
    number (0.7 from an evaluator) is a score, not a thumb.
    """
    if isinstance(text, str) and text.strip():
        word = text.strip().lower()
        if word in UP_WORDS:
            return "up"
        if word in DOWN_WORDS:
            return "down"
    if isinstance(number, bool):
        return "up" if number else "down"
    if isinstance(number, int | float) and not isinstance(number, bool):
        if number == 1:
            return "up"
        if number in (0, -1):
            return "down"
    return None


def _messages_of(value: Any) -> list[dict[str, Any]]:
    """A trace's or run's input as chat turns: a list of turns, {"messages": [...]}, or text as one user turn."""
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, list):
        # LangChain sometimes nests the turns once more: [[turn, turn]].
        if len(value) == 1 and isinstance(value[0], list):
            value = value[0]
        turns = [_turn(item) for item in value]
        if turns and all(turn is not None for turn in turns):
            return turns
    text = _single_text(value)
    if text is not None:
        return [{"role": "user", "content": text}]
    if value is None:
        return []
    return [{"role": "user", "content": json.dumps(value, ensure_ascii=False, sort_keys=True)}]


ROLE_NAMES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "user": "user",
              "assistant": "assistant", "function": "tool"}


def _turn(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        return None
    # A serialised LangChain message: {"lc": 1, "type": "constructor", "kwargs": {"content", "type"}}.
    if isinstance(item.get("kwargs"), dict):
        kwargs = item["kwargs"]
        role = ROLE_NAMES.get(str(kwargs.get("type", "")).lower()) or _lc_role(item.get("id"))
        item = {"role": role, "content": kwargs.get("content")}
    role = ROLE_NAMES.get(str(item.get("role") or item.get("type") or "").lower())
    content = item.get("content")
    if role is None:
        return None
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if content is None:
        content = ""
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False, sort_keys=True)
    return {"role": role, "content": content}


def _lc_role(identifier: Any) -> str | None:
    if isinstance(identifier, list) and identifier:
        name = str(identifier[-1]).lower()
        for prefix, role in (("human", "user"), ("ai", "assistant"), ("system", "system"), ("tool", "tool")):
            if name.startswith(prefix):
                return role
    return None


# Keys that commonly hold the one text of an input or output object.
TEXT_KEYS = ("content", "text", "output", "answer", "response", "completion", "input", "question", "query", "prompt")


def _single_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in TEXT_KEYS:
            if isinstance(value.get(key), str):
                return value[key]
        strings = [item for item in value.values() if isinstance(item, str)]
        if len(value) == 1 and strings:
            return strings[0]
    return None


def _output_of(value: Any) -> str | None:
    """A trace's or run's output as text: the text itself, an assistant turn's content, a generation's text."""
    if value is None:
        return None
    if isinstance(value, dict):
        generations = value.get("generations")
        if isinstance(generations, list) and generations:
            first = generations[0][0] if isinstance(generations[0], list) and generations[0] else generations[0]
            if isinstance(first, dict) and isinstance(first.get("text"), str):
                return first["text"]
        choices = value.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                return message["content"]
        if isinstance(value.get("output"), dict | list):
            inner = _output_of(value["output"])
            if inner is not None:
                return inner
    if isinstance(value, list) and value:
        turn = _turn(value[-1])
        if turn is not None:
            return turn["content"]
    text = _single_text(value)
    if text is not None:
        return text
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _short(value: Any, limit: int = 100) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _moment(value: Any, *, naive_is_utc: bool) -> Any:
    """A time as the event schema takes it; LangSmith writes UTC times without an offset."""
    if naive_is_utc and isinstance(value, str) and "T" in value:
        tail = value.split("T", 1)[1]
        if not (tail.endswith("Z") or "+" in tail or "-" in tail):
            return value + "Z"
    return value


def _entries(record: dict[str, Any], list_key: str, parent_key: str) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """(parent, [(path, entry)]) for a parent holding a list of entries, or one entry holding its parent."""
    if isinstance(record.get(list_key), list):
        return record, [(f"{list_key}[{index}]", entry) for index, entry in enumerate(record[list_key])]
    parent = record.get(parent_key)
    return (parent if isinstance(parent, dict) else {}), [("", record)]


def _field(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def map_langfuse(record: dict[str, Any], *, names: frozenset[str]) -> list[Candidate]:
    """Langfuse scores joined with traces, as rating events.

    Score: ``id`` -> id, ``value``/``stringValue`` -> rating, ``comment`` ->
    comment, ``timestamp`` -> occurred_at. Trace: ``input`` -> context.messages,
    ``output`` -> context.output, ``userId`` -> user_ref, ``name`` -> surface,
    ``release`` (else ``version``) -> model.version, ``metadata.model`` ->
    model.name, ``metadata.variant`` -> variant; the trace id, session, score
    name and tags go to context.metadata.langfuse.
    """
    trace, entries = _entries(record, "scores", "trace")
    candidates = []
    for prefix, score in entries:
        if not isinstance(score, dict):
            candidates.append(refusal(f"{prefix or 'record'}: must be a JSON object", prefix, raw=record))
            continue
        if names and score.get("name") not in names:
            candidates.append(Candidate("skipped"))
            continue
        shown = _text_id(score.get("id"))
        thumb = thumb_of(score.get("value"), score.get("stringValue"))
        if thumb is None:
            where = _field(prefix, "value")
            shown_value = score.get("stringValue", score.get("value"))
            candidates.append(refusal(
                f"{where}: {shown_value!r} is not a thumbs-up (1, true, 'up') or thumbs-down (0, -1, false, 'down')",
                where, raw=record, shown_id=shown))
            continue
        metadata = trace.get("metadata") if isinstance(trace.get("metadata"), dict) else {}
        trace_id = score.get("traceId") or trace.get("id")
        event = _rating_event(
            id=score.get("id") if score.get("id") is not None else _joined_id(trace_id, score.get("name")),
            occurred_at=score.get("timestamp") or score.get("createdAt") or trace.get("timestamp"),
            rating=thumb,
            model_name=metadata.get("model"),
            model_version=_short(trace.get("release")) or _short(trace.get("version")),
            variant=metadata.get("variant"),
            surface=trace.get("name"),
            user_ref=trace.get("userId"),
            messages=_messages_of(trace.get("input")),
            metadata={"langfuse": _present({
                "trace_id": trace_id, "session_id": trace.get("sessionId"), "score_name": score.get("name"),
                "score_source": score.get("source"), "observation_id": score.get("observationId"),
                "tags": trace.get("tags"), "environment": trace.get("environment"),
            })},
            output=trace.get("output"),
            comment=score.get("comment"),
        )
        candidates.append(Candidate("rating", event, raw=record, prefix=prefix, shown_id=shown))
    return candidates or [refusal("holds no scores", "scores", raw=record)]


def map_langsmith(record: dict[str, Any], *, names: frozenset[str]) -> list[Candidate]:
    """LangSmith runs with their feedback, as rating events.

    Feedback: ``id`` -> id, ``score`` (else ``value``) -> rating, ``comment``
    -> comment, ``created_at`` -> occurred_at (UTC when it carries no offset),
    ``correction`` -> context.metadata.langsmith.correction. Run: ``inputs`` ->
    context.messages, ``outputs`` -> context.output, ``name`` -> surface,
    ``extra.metadata``: ``ls_model_name`` -> model.name, ``model_version``
    (else ``revision_id``) -> model.version, ``variant`` -> variant,
    ``user_id`` -> user_ref; run, trace and project ids and the feedback key
    go to context.metadata.langsmith.
    """
    run, entries = _entries(record, "feedback", "run")
    candidates = []
    for prefix, feedback in entries:
        if not isinstance(feedback, dict):
            candidates.append(refusal(f"{prefix or 'record'}: must be a JSON object", prefix, raw=record))
            continue
        if names and feedback.get("key") not in names:
            candidates.append(Candidate("skipped"))
            continue
        shown = _text_id(feedback.get("id"))
        value = feedback.get("value")
        thumb = thumb_of(feedback.get("score"), value if isinstance(value, str) else None)
        if thumb is None and feedback.get("score") is None and isinstance(value, int | float | bool):
            thumb = thumb_of(value, None)
        if thumb is None:
            where = _field(prefix, "score")
            candidates.append(refusal(
                f"{where}: {feedback.get('score', value)!r} is not a thumbs-up (1, true, 'up') or thumbs-down "
                "(0, -1, false, 'down')", where, raw=record, shown_id=shown))
            continue
        extra = run.get("extra") if isinstance(run.get("extra"), dict) else {}
        metadata = extra.get("metadata") if isinstance(extra.get("metadata"), dict) else {}
        run_id = feedback.get("run_id") or run.get("id")
        source = feedback.get("feedback_source")
        event = _rating_event(
            id=feedback.get("id") if feedback.get("id") is not None else _joined_id(run_id, feedback.get("key")),
            occurred_at=_moment(
                feedback.get("created_at") or run.get("end_time") or run.get("start_time"), naive_is_utc=True
            ),
            rating=thumb,
            model_name=metadata.get("ls_model_name"),
            model_version=_short(metadata.get("model_version")) or _short(metadata.get("revision_id")),
            variant=metadata.get("variant"),
            surface=run.get("name"),
            user_ref=metadata.get("user_id"),
            messages=_messages_of(run.get("inputs")),
            metadata={"langsmith": _present({
                "run_id": run_id, "trace_id": feedback.get("trace_id") or run.get("trace_id"),
                "project_id": feedback.get("session_id") or run.get("session_id"),
                "feedback_key": feedback.get("key"), "correction": feedback.get("correction"),
                "feedback_source": source.get("type") if isinstance(source, dict) else None,
                "tags": run.get("tags"),
            })},
            output=run.get("outputs"),
            comment=feedback.get("comment"),
        )
        candidates.append(Candidate("rating", event, raw=record, prefix=prefix, shown_id=shown))
    return candidates or [refusal("holds no feedback", "feedback", raw=record)]


def _rating_event(
    *, id, occurred_at, rating, model_name, model_version, variant, surface, user_ref, messages, metadata, output,
    comment,
) -> dict[str, Any]:
    """A rating event in this app's webhook schema, from the fields an export's record mapped."""
    event = {
        "id": id,
        "type": "feedback.rating",
        "occurred_at": occurred_at,
        "rating": rating,
        "model": {"name": _short(model_name), "version": model_version},
        "variant": _short(variant),
        "surface": _short(surface),
        "user_ref": _short(user_ref, 200),
        "context": {"messages": messages, "metadata": metadata},
    }
    output = _output_of(output)
    if output is not None:
        event["context"]["output"] = output
    if isinstance(comment, str) and comment:
        event["comment"] = comment
    return event


def _joined_id(parent_id: Any, name: Any) -> Any:
    """An entry without its own id is known by its parent's id and its name: one thumb per name and run."""
    if isinstance(parent_id, str) and isinstance(name, str):
        return f"{parent_id}:{name}"
    return None


def _present(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value not in (None, "", [], {})}
