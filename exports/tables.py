"""One row per item: CSV (safe to open in a spreadsheet, readable with any field size) and parquet."""

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from core.csvcells import spreadsheet_safe
from exports.encoding import iso
from exports.files import Writer
from exports.records import ExportRecord

PARQUET_ROW_GROUP = 10_000

# csv.reader refuses a field over 131,072 characters by default, and one storable
# item holds more: messages of up to 100,000 characters each, longer still once
# JSON-escaped and quote-doubled. 2**31 - 1 is the largest limit every platform
# accepts and above anything a database column gives back.
CSV_FIELD_SIZE_LIMIT = 2**31 - 1

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

    def format_problem(self, size: int) -> str:
        """CSV: the header names the columns and the first row has a cell for each."""
        with open(self.path, encoding="utf-8", newline="") as handle:
            reader = csv_reader(handle)
            header = next(reader, [])
            first = next(reader, None) if self.rows else None
        if header != [name for name, _, _ in COLUMNS] or (self.rows and (first is None or len(first) != len(header))):
            return "the header or first row does not read back"
        return ""


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

    def format_problem(self, size: int) -> str:
        """Parquet: the footer opens, its schema and row count are the writer's, and its last row group reads."""
        parquet = pq.ParquetFile(self.path)
        groups = parquet.metadata.num_row_groups
        if parquet.metadata.num_rows != self.rows or not parquet.schema_arrow.equals(self.schema):
            return f"{parquet.metadata.num_rows} rows or its schema differ from what was written"
        if groups and parquet.read_row_group(groups - 1).num_rows != parquet.metadata.row_group(groups - 1).num_rows:
            return "its last row group does not read back"
        return ""
