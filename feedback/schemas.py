"""The shapes of what senders post, validated strictly.

Strings must be strings and numbers numbers: a sender that posts
``"rating": 1`` gets an error naming ``rating`` instead of a guess.
"""

import re
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
)

ShortText = Annotated[str, StringConstraints(strict=True, max_length=200)]
# No wider than the FeedbackItem column it is stored in: PostgreSQL refuses a
# longer value (a 500), where SQLite would have kept it.
ColumnText = Annotated[str, StringConstraints(strict=True, max_length=100)]
LongText = Annotated[str, StringConstraints(strict=True, max_length=100_000)]
EVENT_ID_MAX_LENGTH = 255  # FeedbackItem.external_id
EventId = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=EVENT_ID_MAX_LENGTH)]


_NUMERIC = re.compile(r"\s*[+-]?\d+(?:\.\d*)?\s*")


def iso_text_only(value: Any) -> Any:
    """Dates and times come as ISO 8601 text: a number, even in quotes, would be read as
    seconds (or milliseconds) since 1970, a guess."""
    if isinstance(value, int | float) or (isinstance(value, str) and _NUMERIC.fullmatch(value)):
        raise ValueError("must be ISO 8601 text, not a number")
    return value


def in_utc(value: datetime) -> datetime:
    """The same moment in UTC: what the column stores, whatever offset the sender wrote.

    ISO 8601 allows offsets up to +/-23:59, PostgreSQL only up to +/-15:59,
    and a moment near year 1 or 9999 can fall outside the calendar once
    converted ("0001-01-01T00:00:00+23:59" is in year 0).
    """
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("must be a moment between the years 1 and 9999 in UTC") from None


# Lax parsing, but not of numbers; a date or datetime object (from a form) passes.
Timestamp = Annotated[AwareDatetime, BeforeValidator(iso_text_only), AfterValidator(in_utc)]
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

    id: EventId | None = Field(
        default=None,
        description="The event's own id, its idempotency key. Required in a batch; a single event without one "
        "takes the webhook-id.",
    )
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
