"""A file of a version as it is written: hashed and counted on the way to disk, rows handed to the
scrub check; the base of every format's writer."""

import hashlib
import io
import json
from collections import Counter
from pathlib import Path

from exports.encoding import json_bytes
from exports.records import ExportRecord
from exports.written import WrittenStrings


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

    def readback_problem(self) -> str:
        """Why the closed file does not read back as its consumer would, or '' when it does.

        Every file: on disk with exactly the bytes hashed while writing. Then
        what the format itself needs, on a sample (format_problem).
        """
        size = self.path.stat().st_size
        if size != self.size:
            return f"{size} bytes on disk, {self.size} written"
        return self.format_problem(size)

    def format_problem(self, size: int) -> str:
        return ""


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

    def format_problem(self, size: int) -> str:
        """JSONL: ends in a newline, and its first and last lines are JSON objects."""
        if not self.rows:
            return ""
        with open(self.path, "rb") as handle:
            first = handle.readline()
            handle.seek(size - 1)
            ends_in_newline = handle.read(1) == b"\n"
        try:
            loadable = all(isinstance(json.loads(line), dict) for line in (first, _last_line(self.path, size)))
        except ValueError:
            loadable = False
        return "" if ends_in_newline and loadable else "a line is not a JSON object"

    def _line(self, value) -> bytes:
        """One row as written; the sink (when set) takes its strings and says whether it holds a float."""
        if self.sink is None:
            return json_bytes(value)
        return json_bytes(value, floats=self.sink.add(self.file_name, value))

    def after_record(self, record: ExportRecord) -> None:
        """A hook for formats that pair records with each other."""

    def close(self) -> None:
        self._file.close()


def _last_line(path: Path, size: int) -> bytes:
    """The last line of a file (without its newline), read from the end in growing blocks."""
    block = 1 << 16
    with open(path, "rb") as handle:
        while True:
            start = max(0, size - 1 - block)
            handle.seek(start)
            tail = handle.read(size - 1 - start)
            cut = tail.rfind(b"\n")
            if cut >= 0 or start == 0:
                return tail[cut + 1 :]
            block *= 4
