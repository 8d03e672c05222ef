"""What each member of a version looked like when it was exported.

A version records, per member, the judgement it was written with: category,
area, verdict, split, and short hashes of the coaching hint and the corrected
response. Two versions can then say which of their common items changed and
how, without keeping a second copy of the texts.

The states are gathered in the export's own streaming pass, in flat arrays
(about 50 bytes per member), and inserted with the member rows.
"""

import hashlib
import sys
from array import array
from collections.abc import Iterator

from exports.records import ExportRecord

# Hashes are 8 bytes of blake2b, stored as a signed 64-bit integer: enough to
# tell one text from another among a version's items, and a small column.
HASH_BYTES = 8
# In the arrays, 0 stands for "none" (no category or area; an empty text).
NONE = 0


def text_hash(text: str | None) -> int | None:
    """The short hash of an exported text; None for an empty one, so "added" and "removed" can be told apart."""
    if not text:
        return None
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=HASH_BYTES).digest()
    return int.from_bytes(digest, "big", signed=True) or 1  # 0 is kept for "none"


class MemberStates:
    """The ids and exported states of a version's members, in the order they were written."""

    def __init__(self) -> None:
        self.ids = array("q")
        self.category_ids = array("q")
        self.area_ids = array("q")
        self.hint_hashes = array("q")
        self.corrected_hashes = array("q")
        # Few distinct values: interned, so each entry costs a pointer.
        self.verdicts: list[str | None] = []
        self.splits: list[str | None] = []

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, records: list[ExportRecord]) -> None:
        for record in records:
            self.ids.append(record.id)
            self.category_ids.append(record.category_id or NONE)
            self.area_ids.append(record.area_id or NONE)
            self.hint_hashes.append(text_hash(record.hint) or NONE)
            self.corrected_hashes.append(text_hash(record.corrected_response) or NONE)
            self.verdicts.append(sys.intern(record.verdict) if record.verdict else None)
            self.splits.append(sys.intern(record.split) if record.split else None)

    def rows(self, *, version_id: int, start: int, stop: int) -> Iterator[tuple]:
        """Rows for the member insert: (version, item, category, area, verdict, split, hint hash, corrected hash)."""
        columns = zip(
            self.ids[start:stop],
            self.category_ids[start:stop],
            self.area_ids[start:stop],
            self.verdicts[start:stop],
            self.splits[start:stop],
            self.hint_hashes[start:stop],
            self.corrected_hashes[start:stop],
            strict=True,
        )
        for item_id, category_id, area_id, verdict, split, hint_hash, corrected_hash in columns:
            yield (
                version_id,
                item_id,
                category_id or None,
                area_id or None,
                verdict,
                split,
                hint_hash or None,
                corrected_hash or None,
            )


# The columns of DatasetVersionItem that `rows` fills, in its order.
ROW_COLUMNS = (
    "version_id",
    "item_id",
    "category_id",
    "area_id",
    "verdict",
    "split",
    "hint_hash",
    "corrected_response_hash",
)
