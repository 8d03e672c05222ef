"""The shapes of what senders post, validated strictly.

Strings must be strings and numbers numbers: a sender that posts
``"rating": 1`` gets an error naming ``rating`` instead of a guess.
"""

import re
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError

ShortText = Annotated[str, StringConstraints(strict=True, max_length=200)]
# No wider than the FeedbackItem column it is stored in: PostgreSQL refuses a
# longer value (a 500), where SQLite would have kept it.
ColumnText = Annotated[str, StringConstraints(strict=True, max_length=100)]
LongText = Annotated[str, StringConstraints(strict=True, max_length=100_000)]
EventId = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=255)]


_NUMERIC = re.compile(r"\s*[+-]?\d+(?:\.\d*)?\s*")


def iso_text_only(value: Any) -> Any:
    """Dates and times come as ISO 8601 text: a number, even in quotes, would be read as
    seconds (or milliseconds) since 1970, a guess."""
    if isinstance(value, int | float) or (isinstance(value, str) and _NUMERIC.fullmatch(value)):
        raise ValueError("must be ISO 8601 text, not a number")
    return value


# Lax parsing, but not of numbers; a date or datetime object (from a form) passes.
Timestamp = Annotated[AwareDatetime, BeforeValidator(iso_text_only)]
Day = Annotated[date, BeforeValidator(iso_text_only)]


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool"]
    content: LongText


class ModelRef(BaseModel):
    name: ColumnText = ""
    version: ColumnText = ""


class RatedContext(BaseModel):
    """What the user rated: the conversation, the model's output, its tool calls."""

    model_config = ConfigDict(extra="allow")

    messages: list[Message] = Field(default_factory=list, max_length=500)
    output: LongText | None = None
    tool_calls: list[dict[str, Any]] | None = Field(default=None, max_length=500)
    metadata: dict[str, Any] | None = None


class RatingEvent(BaseModel):
    """One ``feedback.rating`` event. Unknown top-level fields are kept in the raw payload."""

    id: EventId | None = Field(default=None, description="Idempotency key. For a single event: the webhook-id.")
    type: Literal["feedback.rating"]
    occurred_at: Timestamp
    rating: Literal["up", "down"]
    comment: LongText | None = None
    model: ModelRef | None = None
    variant: ColumnText = ""
    surface: ColumnText = ""
    user_ref: ShortText = ""
    context: RatedContext = Field(default_factory=RatedContext)


class EventBatch(BaseModel):
    events: list[dict[str, Any]] = Field(description="Up to 1,000 rating events, each with its own id.")


class ReportIn(BaseModel):
    """A dogfooding report, from the form or ``POST /api/v1/reports``."""

    id: EventId | None = Field(default=None, description="Optional idempotency key; a repeat is a duplicate.")
    title: Annotated[str, StringConstraints(strict=True, min_length=1, max_length=300, strip_whitespace=True)]
    what_happened: Annotated[str, StringConstraints(strict=True, min_length=1, max_length=100_000)]
    expected: LongText = ""
    severity: Literal["low", "medium", "high", "critical"] = "medium"
    model_version: ColumnText = ""
    transcript: LongText = ""
    occurred_at: Timestamp | None = None


# Escapes that decode to text no database column can hold: NUL (PostgreSQL
# refuses it in text and JSON) and UTF-16 surrogates (not encodable as UTF-8).
# Raw, they are invalid in a UTF-8 JSON body, so only escaped ones need looking for.
_UNSTORABLE_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


def may_hold_unstorable_text(raw: bytes) -> bool:
    """Could this JSON body decode to a string no column can store? (Cheap: most bodies skip the walk.)"""
    return _UNSTORABLE_ESCAPE.search(raw) is not None


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def unstorable_error(value: Any, path: str = "") -> tuple[str, str] | None:
    """(message, json path) for the first string or key that cannot be stored, or None."""
    if isinstance(value, str):
        if _storable(value):
            return None
        return f"{path or 'body'}: text must not contain NUL (\\u0000) or unpaired surrogates", path
    if isinstance(value, list):
        items: Any = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    elif isinstance(value, dict):
        items = ((f"{path}.{key}" if path else str(key), item) for key, item in value.items())
    else:
        return None
    for item_path, item in items:
        if not _storable(item_path):
            shown = item_path.encode("utf-8", "backslashreplace").decode().replace("\x00", "\\u0000")
            return f"{shown}: keys must not contain NUL (\\u0000) or unpaired surrogates", shown
        found = unstorable_error(item, item_path)
        if found is not None:
            return found
    return None


def error_path(loc: tuple[Any, ...], prefix: str = "") -> str:
    """``("context", "messages", 0, "role")`` -> ``context.messages[0].role``."""
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def first_error(exc: ValidationError, prefix: str = "") -> tuple[str, str]:
    """The first problem as (one-line message, json path of the field)."""
    error = exc.errors(include_url=False)[0]
    field = error_path(tuple(error["loc"]), prefix)
    message = error["msg"]
    if error["type"] == "missing":
        message = "is required"
    return (f"{field}: {message}" if field else message), field
