"""The strings an export writes, gathered while it writes them, for its scrub check.

No written text may hold anything the scrubber would replace. The check used
to read every file back and walk every value; the values are at hand while
they are written, so each writer hands its rows here instead: every string
inside them (dict keys aside, which are not scrubbed), exactly the strings a
reader of the file gets back. For a CSV that is every cell as written (a
number as its text, the leading ' of a formula-like cell included) and the
strings inside its JSON cells; for parquet the strings of every column, those
inside the JSON text of `tool_calls` included.

Rows of different formats share their pieces (an item's messages, its turns):
a list or dict already walked in this chunk is not walked again, and its
strings are checked once. The rows are kept until `check()`, so the ids of
the pieces stay those of live objects, and a failure can name every file
holding an unscrubbed text.
"""

from collections.abc import Iterable

from feedback.scrubber import ScrubMemo

_CONTAINERS = (dict, list, tuple)


def strings_in(value, into: list[str]) -> list[str]:
    """Append every string inside nested dicts, lists and tuples to `into` (keys are not scrubbed, so not checked)."""
    if isinstance(value, str):
        into.append(value)
        return into
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, _CONTAINERS):
            continue
        for item in node:
            if isinstance(item, str):
                into.append(item)
            elif isinstance(item, _CONTAINERS):
                stack.append(item)
    return into


def holds_float(value) -> bool:
    """Does the value hold a float anywhere? (orjson and json write some floats differently: 1e-05.)"""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, float):
            return True
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return False


class WrittenStrings:
    """The strings of the rows written for one chunk of records, per file.

    With a `memo`, rows are also checked whenever `max_rows` of them are held
    (the pairs a preference file writes at its close come all at once), so
    memory stays flat; what those checks find waits in `found`.
    """

    def __init__(self, memo: ScrubMemo | None = None, *, max_rows: int = 4_000) -> None:
        self.memo = memo
        self.max_rows = max_rows
        self.found: dict[str, set[str]] = {}
        self._held = 0
        self.rows: dict[str, list] = {}
        self._strings: list[str] = []
        # id of a list or dict walked in this chunk -> whether it holds a float.
        self._walked: dict[int, bool] = {}

    def add(self, file_name: str, row) -> bool:
        """Take one written row (a dict, or a list of cells); True when it holds a float."""
        rows = self.rows.get(file_name)
        if rows is None:
            rows = self.rows[file_name] = []
        rows.append(row)
        self._held += 1
        if self.memo is not None and self._held > self.max_rows:
            floats = self._walk(row) if not isinstance(row, str) else False
            for name, files in self.check(self.memo).items():
                self.found.setdefault(name, set()).update(files)
            return floats
        if isinstance(row, str):
            self._strings.append(row)
            return False
        known = self._walked.get(id(row))
        return self._walk(row) if known is None else known

    def _walk(self, node) -> bool:
        # Recursive: stored values nest at most 64 levels (core.storable.MAX_JSON_DEPTH).
        # type() first, then isinstance for subclasses: this runs over every value of every row.
        walked = self._walked
        strings = self._strings
        floats = False
        for value in node.values() if isinstance(node, dict) else node:
            kind = type(value)
            if kind is str:
                strings.append(value)
            elif kind is dict or kind is list or kind is tuple or isinstance(value, _CONTAINERS):
                known = walked.get(id(value))
                if known is None:
                    known = self._walk(value)
                floats = floats or known
            elif kind is float or isinstance(value, float):
                floats = True
            elif isinstance(value, str):
                strings.append(value)
        walked[id(node)] = floats
        return floats

    def check(self, memo: ScrubMemo) -> dict[str, set[str]]:
        """Row names the scrubber would still replace something for -> the files holding such text; then start afresh."""
        try:
            unscrubbed = memo.unscrubbed
            names: set[str] = set()
            for text in set(self._strings):
                found = unscrubbed(text)
                if found:
                    names.update(found)
            if not names:
                return {}
            # Rare: name each file that holds one, walking its rows whole.
            by_name: dict[str, set[str]] = {}
            for file_name, rows in self.rows.items():
                for name in _names_in(rows, unscrubbed):
                    by_name.setdefault(name, set()).add(file_name)
            return by_name
        finally:
            self.rows = {}
            self._strings = []
            self._walked = {}
            self._held = 0


def _names_in(rows: Iterable, unscrubbed) -> set[str]:
    texts: list[str] = []
    for row in rows:
        strings_in(row, texts)
    names: set[str] = set()
    for text in set(texts):
        names.update(unscrubbed(text))
    return names
