"""Reading files of past signals: JSONL, CSV and parquet, a record at a time.

Readers stream: a JSONL or CSV file is read a line at a time, a parquet file a
batch of rows at a time, so memory stays flat however long the file is. Each
yields `Record`s: the 1-based line (the row, in parquet) where the record
starts, and its value, or why it could not be read."""

import csv
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

from core.storable import may_hold_unstorable_text

FORMATS = ("jsonl", "csv", "parquet", "langfuse", "langsmith")
EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}

# The same limit as exports.tables.CSV_FIELD_SIZE_LIMIT: an exported cell can exceed csv's default.
CSV_FIELD_SIZE_LIMIT = 2**31 - 1
PARQUET_BATCH_ROWS = 2_000

# A line longer than this is refused unread: no storable event comes close
# (500 messages of 100,000 characters is the most a context holds).
MAX_LINE_BYTES = 64 * 1024 * 1024


class FormatError(ValueError):
    """The file as a whole cannot be read in the format asked for (one line)."""


def format_for(file_name: str, requested: str | None = None) -> str:
    """The format to read a file in: the one asked for, else the one its extension names."""
    if requested:
        if requested not in FORMATS:
            raise FormatError(f"unknown format {requested!r}; choose one of {', '.join(FORMATS)}")
        return requested
    suffix = Path(file_name).suffix.lower()
    if suffix not in EXTENSIONS:
        known = ", ".join(sorted(EXTENSIONS))
        raise FormatError(f"cannot tell the format of {file_name!r} from its extension ({known}); name it with --format")
    return EXTENSIONS[suffix]


@dataclass(slots=True)
class Record:
    line: int
    # Where a step that stopped after this record goes on from (records(start=seq)).
    seq: int
    value: Any = None
    error: str | None = None
    # Could the value hold text no column can store? A JSON line cannot unless it
    # escapes NUL or a surrogate (raw ones are invalid JSON), so most lines skip that check.
    screen_text: bool = True


@dataclass(slots=True)
class Candidate:
    kind: str  # "rating" | "report" | "refused" | "skipped"
    data: dict[str, Any] | None = None
    raw: Any = None
    # For a refusal: the reason and the field at fault (paths inside the record).
    reason: str = ""
    field: str = ""
    # A record holding several entries (a trace's scores): where this one sits, for its field paths.
    prefix: str = ""
    shown_id: str | None = None
    screen_text: bool = True


class Reader:
    """Iterates a file's records from a given one on; `done` and `total` measure progress."""

    unit = "bytes"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.total = self.path.stat().st_size
        self.done = 0

    def records(self, start: int = 0) -> Iterator[Record]:
        raise NotImplementedError


class JsonlReader(Reader):
    def records(self, start: int = 0) -> Iterator[Record]:
        with open(self.path, "rb") as handle:
            number = 0
            for line in handle:
                self.done += len(line)
                number += 1
                if number == 1 and line.startswith(b"\xef\xbb\xbf"):  # a byte-order mark some editors write
                    line = line[3:]
                # Lines are counted before skipping, so a resumed step sees the same line numbers.
                if number <= start or not line.strip():
                    continue
                yield self._parse(number, line)

    @staticmethod
    def _parse(number: int, line: bytes) -> Record:
        if len(line) > MAX_LINE_BYTES:
            return Record(number, number, error=f"the line is longer than {MAX_LINE_BYTES} bytes")
        try:
            return Record(number, number, orjson.loads(line), screen_text=may_hold_unstorable_text(line))
        except orjson.JSONDecodeError as exc:
            return Record(number, number, error=f"not valid JSON: {_json_problem(exc)}")


def _json_problem(exc: orjson.JSONDecodeError) -> str:
    message = str(exc.msg if hasattr(exc, "msg") else exc)
    return message.split(": line ")[0] if message else "unreadable"


class CsvReader(Reader):
    def records(self, start: int = 0) -> Iterator[Record]:
        if csv.field_size_limit() < CSV_FIELD_SIZE_LIMIT:
            csv.field_size_limit(CSV_FIELD_SIZE_LIMIT)
        with open(self.path, "rb") as handle:
            reader = csv.reader(self._lines(handle))
            try:
                header = next(reader, None)
            except csv.Error as exc:
                raise FormatError(f"the header line cannot be read: {exc}") from None
            if not header:
                return
            header = [name.strip() for name in header]
            if len(set(header)) != len(header):
                raise FormatError("the header line names a column twice")
            index = 0
            while True:
                line = reader.line_num + 1
                try:
                    row = next(reader)
                except StopIteration:
                    return
                except csv.Error as exc:
                    index += 1
                    if index > start:
                        yield Record(line, index, error=f"not valid CSV: {exc}")
                    continue
                if not row:
                    continue
                index += 1
                if index <= start:
                    continue
                if len(row) != len(header):
                    yield Record(line, index, error=f"has {len(row)} cells; the header names {len(header)} columns")
                    continue
                yield Record(line, index, {name: cell for name, cell in zip(header, row) if cell != ""})

    def _lines(self, handle) -> Iterator[str]:
        """The file's lines as text. Bytes that are not UTF-8 become lone surrogates, which the
        storability check refuses in the one record holding them, instead of stopping the whole file."""
        first = True
        for raw in handle:
            self.done += len(raw)
            if first and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            first = False
            yield raw.decode("utf-8", "surrogateescape")


class ParquetReader(Reader):
    unit = "rows"

    def __init__(self, path: Path) -> None:
        import pyarrow.parquet as pq

        self.path = Path(path)
        try:
            self._file = pq.ParquetFile(self.path)
        except Exception as exc:  # pyarrow raises several kinds for a file that is not parquet
            raise FormatError(f"not a parquet file: {exc}") from None
        self.total = self._file.metadata.num_rows
        self.done = 0

    def records(self, start: int = 0) -> Iterator[Record]:
        number = 0
        for group in range(self._file.num_row_groups):
            rows_in_group = self._file.metadata.row_group(group).num_rows
            if number + rows_in_group <= start:
                number += rows_in_group
                self.done = number
                continue
            for batch in self._file.iter_batches(batch_size=PARQUET_BATCH_ROWS, row_groups=[group]):
                for row in batch.to_pylist():
                    number += 1
                    self.done = number
                    if number > start:
                        yield Record(number, number, {key: _plain(value) for key, value in row.items() if value is not None})


def _plain(value: Any) -> Any:
    """A parquet value as JSON has it (times as ISO text), so the raw payload can be stored."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items() if item is not None}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


READERS = {"jsonl": JsonlReader, "csv": CsvReader, "parquet": ParquetReader, "langfuse": JsonlReader, "langsmith": JsonlReader}


def reader_for(path: Path, file_format: str) -> Reader:
    return READERS[file_format](path)
