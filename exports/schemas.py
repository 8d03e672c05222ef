"""The shapes of a dataset definition, validated strictly (API bodies and the stored filters).

Types are strict, as for ingestion: ``"categories": "3"`` is refused with the
field named instead of guessed. Rules that need the database (does that
category exist? is the name free?) are checked by exports.datasets.
"""

from datetime import date
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    model_validator,
)
from pydantic_core import PydanticCustomError

from feedback.schemas import Day

FORMATS = (
    "chat_jsonl",
    "preference_jsonl",
    "kto_jsonl",
    "hints_jsonl",
    "coaching_jsonl",
    "eval_jsonl",
    "inspect_jsonl",
    "csv",
    "parquet",
)
# Literal of a tuple is the Literal of its members: one list of names for both.
FormatName = Literal[FORMATS]
Verdict = Literal["failure", "not_failure", "duplicate", "spam"]
ModeName = Literal["snapshot", "incremental"]

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,99}$"
DatasetName = Annotated[str, StringConstraints(strict=True, pattern=NAME_PATTERN)]
Value = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=200)]
Cron = Annotated[str, StringConstraints(strict=True, max_length=100, strip_whitespace=True)]
Description = Annotated[str, StringConstraints(strict=True, max_length=5000)]
MAX_VALUES = 200
# A row id: positive and within a 64-bit column, so a lookup can never overflow the database driver.
RowId = Annotated[StrictInt, Field(ge=1, le=2**63 - 1)]
# The days a filter may name: wider than any feedback, and far from the ends of
# what `date` holds, where the day after date_to (the filter's exclusive end)
# cannot be computed. The same range as the compare page's.
EARLIEST_FILTER_DAY = date(1970, 1, 1)
LATEST_FILTER_DAY = date(2999, 12, 31)


def filter_day_in_range(day: date) -> date:
    if not EARLIEST_FILTER_DAY <= day <= LATEST_FILTER_DAY:
        raise PydanticCustomError(
            "day_out_of_range",
            "must be a day from {earliest} to {latest}",
            {"earliest": EARLIEST_FILTER_DAY.isoformat(), "latest": LATEST_FILTER_DAY.isoformat()},
        )
    return day


FilterDay = Annotated[Day, AfterValidator(filter_day_in_range)]


class StoredFilters(BaseModel):
    """Which items a dataset takes, as kept on the dataset. Empty lists and unset values mean no restriction.

    Exports read the stored filters with this model: it takes any calendar day,
    so a dataset saved before the day range was checked still exports.
    """

    model_config = ConfigDict(extra="forbid")

    categories: list[RowId] = Field(default_factory=list, max_length=MAX_VALUES, description="Category ids.")
    areas: list[RowId] = Field(
        default_factory=list,
        max_length=MAX_VALUES,
        description="Area ids: items whose assignment is in one of these areas (in a category or unsorted). "
        "A merged area's id stands for the area it was merged into.",
    )
    verdicts: list[Verdict] = Field(default_factory=list, description="Verdict of the item's latest label.")
    tags: list[Value] = Field(default_factory=list, max_length=MAX_VALUES, description="Any of these label tags.")
    rating: Literal["up", "down", "none"] | None = Field(default=None, description="'none': items without a rating.")
    kinds: list[Literal["rating", "report"]] = Field(default_factory=list)
    model_versions: list[Value] = Field(default_factory=list, max_length=MAX_VALUES)
    variants: list[Value] = Field(default_factory=list, max_length=MAX_VALUES)
    sources: list[Value] = Field(default_factory=list, max_length=MAX_VALUES, description="Source slugs.")
    date_from: Day | None = Field(default=None, description="occurred_at on or after this day (UTC).")
    date_to: Day | None = Field(default=None, description="occurred_at on or before this day (UTC).")
    reviewed_only: StrictBool = Field(default=False, description="Only items a reviewer labelled.")
    has_hint: StrictBool = False
    has_corrected_response: StrictBool = False

    @model_validator(mode="after")
    def _dates_in_order(self) -> "StoredFilters":
        if self.date_from and self.date_to and self.date_from > self.date_to:
            raise ValueError("date_from is after date_to")
        return self

    def stored(self) -> dict:
        """The JSON form kept on the dataset: only what restricts, in a stable order."""
        data = self.model_dump(mode="json")
        return {key: data[key] for key in sorted(data) if data[key] not in (None, False, [])}


class DatasetFilters(StoredFilters):
    """Which items a dataset takes, as a new or changed definition sends them: days within the supported range."""

    date_from: FilterDay | None = Field(
        default=None,
        description=f"occurred_at on or after this day (UTC), {EARLIEST_FILTER_DAY} to {LATEST_FILTER_DAY}.",
    )
    date_to: FilterDay | None = Field(
        default=None,
        description=f"occurred_at on or before this day (UTC), {EARLIEST_FILTER_DAY} to {LATEST_FILTER_DAY}.",
    )


class ScheduleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cron: Cron = Field(description="Five cron fields (minute hour day-of-month month day-of-week), UTC; '' for none.")
    mode: ModeName = "snapshot"


class DatasetIn(BaseModel):
    """A new dataset."""

    model_config = ConfigDict(extra="forbid")

    name: DatasetName = Field(description="Lower-case letters, digits, '-' and '_': the folder of its versions.")
    purpose: Literal["train", "eval"]
    description: Description = ""
    filters: DatasetFilters = Field(default_factory=DatasetFilters)
    formats: list[FormatName] = Field(min_length=1, max_length=len(FORMATS))
    schedule: ScheduleIn | None = Field(default=None, description="Admins only.")


class DatasetPatch(BaseModel):
    """Changes to a dataset: only the fields sent are changed."""

    model_config = ConfigDict(extra="forbid")

    name: DatasetName | None = None
    purpose: Literal["train", "eval"] | None = None
    description: Description | None = None
    filters: DatasetFilters | None = None
    formats: list[FormatName] | None = Field(default=None, min_length=1, max_length=len(FORMATS))
    schedule: ScheduleIn | None = Field(default=None, description="Admins only.")


class ExportIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: ModeName = "snapshot"
    force: StrictBool = Field(
        default=False, description="Make a version even when its data would equal the latest version's."
    )
