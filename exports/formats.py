"""The file formats of a dataset version, written row by row so memory stays flat.

Every writer is deterministic: rows in item-id order, JSON with sorted keys
and no spaces, CSV with "\\n" line ends, parquet with fixed options and row
groups of a fixed size (not the size of the chunks it was fed), so the same
records always give the same bytes.

- chat_jsonl: ``{"messages": [...]}`` in the OpenAI / Hugging Face chat format;
  the last assistant turn is the reviewer's corrected response, else the
  model's output. Items without a structured conversation are skipped.
- preference_jsonl: ``{"prompt": [...], "chosen": [...], "rejected": [...]}``
  (TRL's conversational preference format) for items with a corrected
  response (chosen) and the rated output (rejected).
- hints_jsonl: the context, the model's output and the reviewer's coaching hint.
- eval_jsonl: input messages, failure category, expected behaviour (hint,
  else corrected response, else the report's "expected"), tags.
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
from datetime import UTC
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from config.csvcells import spreadsheet_safe
from exports.records import ExportRecord

PARQUET_ROW_GROUP = 10_000
# csv.reader refuses a field over 131,072 characters by default, and one storable
# item holds more: messages of up to 100,000 characters each, longer still once
# JSON-escaped and quote-doubled. 2**31 - 1 is the largest limit every platform
# accepts and above anything a database column gives back.
CSV_FIELD_SIZE_LIMIT = 2**31 - 1


def json_line(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


def iso(moment) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


class _HashingFile(io.RawIOBase):
    """A binary file that hashes what passes through: a version's checksums need no second read."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file = open(path, "wb")  # noqa: SIM115 (closed by close())
        self.sha256 = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.sha256.update(data)
        return self._file.write(data)

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()


class Writer:
    format_name = ""
    file_name = ""
    description = ""

    def __init__(self, folder: Path) -> None:
        self.path = folder / self.file_name
        self.rows = 0
        self.skipped = 0
        self._hashing = _HashingFile(self.path)

    def _binary(self) -> io.BufferedWriter:
        return io.BufferedWriter(self._hashing, buffer_size=1 << 20)

    def _text(self, *, newline: str) -> io.TextIOWrapper:
        return io.TextIOWrapper(self._binary(), encoding="utf-8", newline=newline)

    @property
    def sha256(self) -> str:
        """The checksum of the bytes written so far: complete once the writer is closed."""
        return self._hashing.sha256.hexdigest()

    def write(self, records: list[ExportRecord]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class JsonlWriter(Writer):
    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        # Open across write() calls and closed by close(): the writer streams chunk by chunk.
        self._file = self._text(newline="\n")

    def line(self, record: ExportRecord) -> dict | None:
        raise NotImplementedError

    def write(self, records: list[ExportRecord]) -> None:
        lines = []
        for record in records:
            value = self.line(record)
            if value is None:
                self.skipped += 1
                continue
            lines.append(json_line(value))
        self._file.write("".join(lines))
        self.rows += len(lines)

    def close(self) -> None:
        self._file.close()


def assistant(content: str) -> dict[str, str]:
    return {"role": "assistant", "content": content}


class ChatWriter(JsonlWriter):
    format_name = "chat_jsonl"
    file_name = "chat.jsonl"
    description = "chat format: the conversation, ending with the corrected response or else the model's output"

    def line(self, record: ExportRecord) -> dict | None:
        answer = record.corrected_response or record.output
        if not record.structured or not answer:
            return None
        return {"messages": record.messages + [assistant(answer)]}


class PreferenceWriter(JsonlWriter):
    format_name = "preference_jsonl"
    file_name = "preference.jsonl"
    description = "preference pairs: the corrected response (chosen) against the rated output (rejected)"

    def line(self, record: ExportRecord) -> dict | None:
        chosen, rejected = record.corrected_response, record.output
        if not record.structured or not chosen or not rejected or chosen == rejected:
            return None
        return {"prompt": record.messages, "chosen": [assistant(chosen)], "rejected": [assistant(rejected)]}


class HintsWriter(JsonlWriter):
    format_name = "hints_jsonl"
    file_name = "hints.jsonl"
    description = "coaching hints: the context, the model's output, the feedback and what the model should have done"

    def line(self, record: ExportRecord) -> dict | None:
        if not record.hint.strip():
            return None
        return {
            "id": record.id,
            "messages": record.messages,
            "output": record.output,
            "feedback": record.comment,
            "hint": record.hint,
            "category": record.category,
            "tags": record.tags,
        }


class EvalWriter(JsonlWriter):
    format_name = "eval_jsonl"
    file_name = "eval.jsonl"
    description = "eval cases: input messages, failure category, expected behaviour, tags"

    def line(self, record: ExportRecord) -> dict | None:
        if not record.messages:
            return None
        return {
            "id": record.id,
            "messages": record.messages,
            "failure_category": record.category,
            "expected_behavior": record.expected_behavior,
            "tags": record.tags,
            "model_version": record.model_version,
            "severity": record.severity,
        }


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
        self.rows += len(records)

    def close(self) -> None:
        self._file.close()


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
        for record in records:
            for column, (_, _, value_of) in zip(self._buffer, COLUMNS):
                column.append(value_of(record))
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
    for writer in (ChatWriter, PreferenceWriter, HintsWriter, EvalWriter, CsvWriter, ParquetWriter)
}
