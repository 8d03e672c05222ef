"""The held-out promise: nothing in an eval set, and nothing nearly identical to it, reaches a train export.

A train export drops, in this order of reasons:

- an item that is a member of any eval version (`in_eval_version`);
- an item whose latest label says its intended split is eval (`marked_eval`);
- an item whose normalised text equals an eval item's (`duplicate_of_eval_text`);
- an item whose conversation (the input messages a chat row is built from)
  equals an eval item's after normalising, or opens with all of it
  (`same_conversation_as_eval`);
- an item with words but no vector yet, while eval vectors exist: it cannot
  be checked, so it waits for a later version (`not_embedded`);
- an item whose vector is within `HOLDOUT_SIMILARITY` cosine (default 0.92)
  of an eval item's vector (`near_duplicate_of_eval`).

Normalising folds what a reader cannot tell apart: Unicode compatibility
forms (NFKC: full-width letters, ligatures), look-alike letters of other
scripts (Cyrillic "а", Greek "ο", from Unicode's confusables data as packaged
by `confusable-homoglyphs`), invisible characters (zero-width spaces, joiners,
bidi controls, variation selectors), case, punctuation and whitespace.

Every eval item is compared by meaning under the current text recipe: one
without such a vector (not embedded yet, or embedded under an older recipe)
is embedded during the export, and when that fails no train version is
written. A text disguised with look-alikes is embedded once more as the
plain text it imitates, so a reworded look-alike copy is caught by meaning.

An eval export drops items already in a train version (`in_train_version`)
and deduplicates itself the same way: the lowest item id of a group of
equal or near-equal texts stays (`duplicate_text_within_eval`,
`near_duplicate_within_eval`).

The text is the one the similarity index embeds (feedback.pipeline.embed_text_for),
so both rules judge the same words.
"""

import functools
import hashlib
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from confusable_homoglyphs import confusables
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from exports.records import ExportRecord
from feedback.models import FeedbackItem
from feedback.pipeline import embed_text_for
from feedback.scrubber import scrub

DIMENSIONS = 384

IN_EVAL_VERSION = "in_eval_version"
MARKED_EVAL = "marked_eval"
DUPLICATE_OF_EVAL_TEXT = "duplicate_of_eval_text"
SAME_CONVERSATION_AS_EVAL = "same_conversation_as_eval"
NOT_EMBEDDED = "not_embedded"
NEAR_DUPLICATE_OF_EVAL = "near_duplicate_of_eval"
IN_TRAIN_VERSION = "in_train_version"
DUPLICATE_TEXT_WITHIN_EVAL = "duplicate_text_within_eval"
NEAR_DUPLICATE_WITHIN_EVAL = "near_duplicate_within_eval"

REASONS = {
    IN_EVAL_VERSION: "is in an eval dataset version",
    MARKED_EVAL: "a reviewer marked it for the eval split",
    DUPLICATE_OF_EVAL_TEXT: "same text as an eval item (after normalising)",
    SAME_CONVERSATION_AS_EVAL: "same conversation as an eval item (its input messages, after normalising)",
    NOT_EMBEDDED: "has no vector yet, so it cannot be checked against the eval items",
    NEAR_DUPLICATE_OF_EVAL: "nearly the same text as an eval item (cosine at or above the threshold)",
    IN_TRAIN_VERSION: "is in a train dataset version",
    DUPLICATE_TEXT_WITHIN_EVAL: "same text as another item of this eval set",
    NEAR_DUPLICATE_WITHIN_EVAL: "nearly the same text as another item of this eval set",
}

# How many texts one call of the embedder gets while an export checks eval items.
EMBED_BATCH = 2000


class HeldOutUncheckable(Exception):
    """An eval item cannot be compared by meaning, so no train version may be written."""


# --- Normalising: what a reader cannot tell apart counts as the same -----------------

# Every punctuation character Unicode knows, and every format character (Cf), mapped to nothing.
_PUNCTUATION: dict[int, None] = {}
_FORMAT: dict[int, None] = {}
for _code in range(sys.maxunicode + 1):
    _category = unicodedata.category(chr(_code))
    if _category[0] == "P":
        _PUNCTUATION[_code] = None
    elif _category == "Cf":
        _FORMAT[_code] = None
del _code, _category

# Characters that show nothing: format characters (Cf: zero-width space and
# joiners, soft hyphen, bidi controls, tags) and the default-ignorable code
# points outside Cf (combining grapheme joiner, Hangul fillers, Khmer inherent
# vowels, Mongolian and other variation selectors).
_IGNORABLE_OUTSIDE_CF = (
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x3164, 0xFFA0]
    + list(range(0xFE00, 0xFE10))
    + list(range(0xE0100, 0xE01F0))
)
_INVISIBLE = _FORMAT | {code: None for code in _IGNORABLE_OUTSIDE_CF}

# Bidi marks that the confusables data wraps right-to-left characters in.
_BIDI_MARKS = str.maketrans("", "", "\u200e\u200f")


def _lookalike_table() -> dict[int, str]:
    """Each non-ASCII character that Unicode's confusables data says looks like ASCII, mapped to that ASCII.

    The data (Unicode TR39, through `confusable-homoglyphs`) gives at most one
    ASCII look-alike per character. Its prototype for the I / l / 1 group is
    "l"; an upper-case look-alike (Cyrillic "І", Greek "Ι") imitates "I", so
    it becomes "I" and casefolds like the letter it copies.
    """
    table = {}
    for character, homoglyphs in confusables.confusables_data.items():
        character = character.translate(_BIDI_MARKS)
        if len(character) != 1 or character.isascii():
            continue
        ascii_lookalikes = [glyph["c"].translate(_BIDI_MARKS) for glyph in homoglyphs]
        ascii_lookalikes = [glyph for glyph in ascii_lookalikes if glyph and glyph.isascii()]
        if not ascii_lookalikes:
            continue
        target = ascii_lookalikes[0]
        if target == "l" and character.isupper():
            target = "I"
        table[ord(character)] = target
    return table


_LOOKALIKES = _lookalike_table()


def lookalikes_fold(text: str) -> str:
    """The text as it reads: compatibility forms (NFKC), look-alike letters as the ASCII they imitate,
    invisible characters removed; case, punctuation and spacing kept.

    "Ｔｈｅ аgеnt edi\u200bted it" -> "The agent edited it".
    """
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE).translate(_LOOKALIKES)


def text_normalise(text: str) -> str:
    """Look-alikes folded, casefolded, punctuation stripped, whitespace collapsed:
    "The  agent EDITED it!" and "Тhе аgеnt еditеd it" -> "the agent edited it"."""
    folded = lookalikes_fold(text).casefold()
    if not folded.isascii():
        # Casefolding can make a look-alike of its own ("Ѕ" -> "ѕ"): fold those too.
        folded = unicodedata.normalize("NFKC", folded.translate(_LOOKALIKES))
    return " ".join(folded.translate(_PUNCTUATION).split())


def text_key(text: str) -> bytes | None:
    """A compact fingerprint of the normalised text; None for a text with no words."""
    normalised = text_normalise(text)
    if not normalised:
        return None
    return hashlib.blake2b(normalised.encode(), digest_size=16).digest()


def _turn_comparable(content: str, *, extra_patterns: Sequence[tuple[str, str]]) -> str:
    # A message is scrubbed as exported; a disguised e-mail address is only found once it reads as one.
    folded = lookalikes_fold(content)
    return content if folded == content else scrub(folded, extra_patterns=extra_patterns).text


def conversation_keys(
    messages: Sequence[dict[str, str]], *, extra_patterns: Sequence[tuple[str, str]] = ()
) -> list[bytes]:
    """Fingerprints of a conversation's openings: its first turn, its first two, ..., all of it (last).

    Only the words count, normalised like texts: roles, and where one turn
    ends and the next begins, do not, so moving an eval prompt to another
    role or splitting it into two turns gives the same fingerprint.
    """
    digest = hashlib.blake2b(digest_size=16)
    keys: list[bytes] = []
    for message in messages:
        words = text_normalise(_turn_comparable(message["content"], extra_patterns=extra_patterns))
        if not words:
            continue
        digest.update(f" {words}".encode() if keys else words.encode())
        keys.append(digest.copy().digest())
    return keys


@functools.lru_cache(maxsize=4096)
def _imitates_ascii(character: str) -> bool:
    """A letter or digit of another script, or a compatibility form, that reads as an ASCII one.

    Latin letters with accents or strokes ("é", "ø", "æ") are the writer's own
    language, not a disguise.
    """
    if character.isascii() or character.isspace() or unicodedata.name(character, "").startswith("LATIN "):
        return False
    folded = lookalikes_fold(character)
    return folded.isascii() and any(c.isalnum() for c in folded)


def _latin_or_not_a_letter(character: str) -> bool:
    return character.isascii() or not character.isalpha() or unicodedata.name(character, "").startswith("LATIN ")


def is_disguised(text: str) -> bool:
    """True for a text that hides its plain reading: invisible characters inside it, or Latin
    words written partly with look-alikes ("Thе tеsts раssеd", Cyrillic е, а, р; full-width letters).

    A text in another script ("Тесты прошли") keeps letters that imitate
    nothing, so it is no disguise; nor are accents, curly quotes or a
    no-break space. Only disguised texts cost extra work in an export.
    """
    if text.isascii():
        return False
    characters = set(text)
    if any(ord(character) in _INVISIBLE for character in characters):
        return True
    if not any(_imitates_ascii(character) for character in characters):
        return False
    return all(_latin_or_not_a_letter(character) for character in set(lookalikes_fold(text)))


def _fold_strings(value):
    """Every string inside nested dicts and lists folded (keys stay)."""
    if isinstance(value, str):
        return lookalikes_fold(value)
    if isinstance(value, dict):
        return {key: _fold_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_fold_strings(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class _Undisguised:
    title: str
    comment: str
    expected: str
    context: dict


def undisguised_text(item, *, extra_patterns: Sequence[tuple[str, str]] = ()) -> str:
    """The text the recipe makes of an item once every field reads plainly (see `lookalikes_fold`).

    Folding the embedded text is not enough: the recipe decided on the
    disguised words. Zero-width characters split "claimed" into letters, so
    the comment looked vague and the run's output was added; "utils.рy"
    (Cyrillic "р") escaped the mask that turns "utils.py" into "file".
    Takes anything with ``title``, ``comment``, ``expected`` and ``context``.
    """
    plain = _Undisguised(
        title=lookalikes_fold(item.title),
        comment=lookalikes_fold(item.comment),
        expected=lookalikes_fold(item.expected),
        context=_fold_strings(item.context) if isinstance(item.context, dict) else {},
    )
    return embed_text_for(plain, extra_patterns=extra_patterns)


_TEXT_FIELDS = ("id", "title", "comment", "expected", "context")


def _recipe_texts(
    item_ids: list[int], *, undisguise: bool, extra_patterns: Sequence[tuple[str, str]]
) -> dict[int, str]:
    """Id -> the item's text under the current recipe (undisguised if asked), for the items that have words."""
    if not item_ids:
        return {}
    items = FeedbackItem.objects.filter(id__in=item_ids).only(*_TEXT_FIELDS).order_by("id")
    derive = undisguised_text if undisguise else embed_text_for
    texts = {item.id: derive(item, extra_patterns=extra_patterns) for item in items}
    return {item_id: text for item_id, text in texts.items() if text}


def similarity_threshold() -> float:
    threshold = float(settings.HOLDOUT_SIMILARITY)
    if not 0.0 < threshold <= 1.0:
        # Above 1 nothing is ever held out; at 0 or below, everything is.
        raise ImproperlyConfigured(f"HOLDOUT_SIMILARITY must be in (0, 1], got {threshold}")
    return threshold


class VectorSet:
    """A growing matrix of L2-normalised vectors that answers "how close is the nearest?"."""

    def __init__(self) -> None:
        self._matrix = np.empty((1024, DIMENSIONS), dtype=np.float32)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, DIMENSIONS)
        needed = self._size + len(vectors)
        if needed > len(self._matrix):
            grown = np.empty((max(needed, 2 * len(self._matrix)), DIMENSIONS), dtype=np.float32)
            grown[: self._size] = self._matrix[: self._size]
            self._matrix = grown
        self._matrix[self._size : needed] = vectors
        self._size = needed

    def max_similarity(self, queries: np.ndarray, *, block: int = 8192) -> np.ndarray:
        """For each query row, the highest cosine to any stored vector (-1 when empty)."""
        best = np.full(len(queries), -1.0, dtype=np.float32)
        # In blocks, so 2,000 queries against 100,000 vectors never build one 800 MB matrix.
        for start in range(0, self._size, block):
            similarities = queries @ self._matrix[start : min(start + block, self._size)].T
            np.maximum(best, similarities.max(axis=1), out=best)
        return best


def _vectors_of(records: list[ExportRecord]) -> np.ndarray:
    return np.vstack([record.vector for record in records]) if records else np.zeros((0, DIMENSIONS), np.float32)


def _embed_texts(texts: list[str]) -> np.ndarray:
    from feedback import (
        embedder,  # heavy (onnxruntime): loaded only when an export needs it
    )

    return embedder.embed_texts(texts)


class TrainGuard:
    """Keeps eval items, disguised copies of them, their conversations and their near-duplicates out of train.

    `eval_records` are the eval items as the export reads them (chunks of
    records with their stored vectors); `outdated_ids` those whose text and
    vector were made by an older recipe. Every eval item with words that has
    no vector of the current recipe is embedded here, so none is ever
    compared by its exact text alone; `heartbeat` is called after each batch.
    """

    def __init__(
        self,
        *,
        eval_records: Iterable[list[ExportRecord]],
        outdated_ids: set[int],
        threshold: float,
        extra_patterns: Sequence[tuple[str, str]] = (),
        embed: Callable[[list[str]], np.ndarray] = _embed_texts,
        heartbeat: Callable[[], None] = lambda: None,
    ) -> None:
        self.threshold = threshold
        self.extra_patterns = extra_patterns
        self.embed = embed
        self.keys: set[bytes] = set()
        self.conversations: set[bytes] = set()
        self.vectors = VectorSet()
        self.held = Counter()
        self.eval_item_count = 0
        # Eval items embedded by this export because they had no vector of the current recipe.
        self.embedded_now = 0
        unchecked: list[int] = []
        for records in eval_records:
            self.eval_item_count += len(records)
            with_vectors = [record for record in records if record.vector is not None]
            if with_vectors:
                # An outdated vector still stands for what the item said then; it stays beside the new one.
                self.vectors.add(_vectors_of(with_vectors))
            for record in records:
                key = self._key_add(record.text)
                conversation = conversation_keys(record.messages, extra_patterns=extra_patterns)
                if conversation:
                    self.conversations.add(conversation[-1])
                if record.id in outdated_ids or (record.vector is None and key is not None):
                    unchecked.append(record.id)
            self._plain_readings_add([record.id for record in records if is_disguised(record.text)])
        for start in range(0, len(unchecked), EMBED_BATCH):
            batch = unchecked[start : start + EMBED_BATCH]
            current = _recipe_texts(batch, undisguise=False, extra_patterns=extra_patterns)
            if not current:
                continue
            for text in current.values():
                self._key_add(text)
            first = next(iter(current))
            more = f" (and {len(current) - 1} more)" if len(current) > 1 else ""
            what = f"eval item {first}{more} has no vector of the current text recipe"
            self.vectors.add(self._embed_for_check(list(current.values()), what=what))
            self.embedded_now += len(current)
            # Embedding a large eval set takes minutes: the run must not look stuck meanwhile.
            heartbeat()
            self._plain_readings_add([item_id for item_id, text in current.items() if is_disguised(text)])

    def _key_add(self, text: str) -> bytes | None:
        key = text_key(text)
        if key is not None:
            self.keys.add(key)
        return key

    def _plain_readings_add(self, item_ids: list[int]) -> None:
        """Key and embed what disguised eval items read as, so that copies and rewordings of it are caught."""
        plain = _recipe_texts(item_ids, undisguise=True, extra_patterns=self.extra_patterns)
        for text in plain.values():
            self._key_add(text)
        if plain:
            first = next(iter(plain))
            what = f"eval item {first} hides its text behind look-alike or invisible characters"
            self.vectors.add(self._embed_for_check(list(plain.values()), what=what))

    def _embed_for_check(self, texts: list[str], *, what: str) -> np.ndarray:
        try:
            return self.embed(texts)
        except Exception as exc:  # whatever stops the embedder, the check cannot be made
            raise HeldOutUncheckable(
                f"{what}, and embedding it for the held-out check failed ({type(exc).__name__}: {exc}); "
                "no train version is written until it can be checked"
            ) from exc

    def keep(self, records: list[ExportRecord]) -> list[ExportRecord]:
        """The records that may go into the train export; the others are counted in `held`."""
        if not self.keys and not self.conversations and not len(self.vectors):
            # No eval items yet: only the reviewers' split marks can hold anything out.
            kept = [r for r in records if not r.in_opposite_purpose and r.split != "eval"]
            self.held[MARKED_EVAL] += len(records) - len(kept)
            return kept
        undecided = [r for r in records if not r.in_opposite_purpose and r.split != "eval"]
        # Id -> what a disguised record reads as: keyed, and compared by meaning, beside its own text.
        plain = _recipe_texts(
            [r.id for r in undecided if is_disguised(r.text)], undisguise=True, extra_patterns=self.extra_patterns
        )
        candidates = []
        for record in records:
            if record.in_opposite_purpose:
                self.held[IN_EVAL_VERSION] += 1
                continue
            if record.split == "eval":
                self.held[MARKED_EVAL] += 1
                continue
            keys = {text_key(record.text), text_key(plain.get(record.id, ""))} - {None}
            if not self.keys.isdisjoint(keys):
                self.held[DUPLICATE_OF_EVAL_TEXT] += 1
            elif self.conversations and not self.conversations.isdisjoint(
                conversation_keys(record.messages, extra_patterns=self.extra_patterns)
            ):
                self.held[SAME_CONVERSATION_AS_EVAL] += 1
            elif len(self.vectors) and record.vector is None and keys:
                self.held[NOT_EMBEDDED] += 1
            else:
                candidates.append(record)
        with_vectors = [record for record in candidates if record.vector is not None]
        if not len(self.vectors) or not with_vectors:
            return candidates
        similarities = self.vectors.max_similarity(_vectors_of(with_vectors)).tolist()
        nearest = {record.id: similarity for record, similarity in zip(with_vectors, similarities)}
        readings = {record_id: text for record_id, text in plain.items() if record_id in nearest}
        if readings:
            what = f"item {next(iter(readings))} hides its text behind look-alike or invisible characters"
            vectors = self._embed_for_check(list(readings.values()), what=what)
            for record_id, similarity in zip(readings, self.vectors.max_similarity(vectors).tolist()):
                nearest[record_id] = max(nearest[record_id], similarity)
        too_close = {record_id for record_id, similarity in nearest.items() if similarity >= self.threshold}
        self.held[NEAR_DUPLICATE_OF_EVAL] += len(too_close)
        return [record for record in candidates if record.id not in too_close]


class EvalDeduplicator:
    """Keeps the first of each group of equal or near-equal texts in an eval export."""

    def __init__(self, *, threshold: float) -> None:
        self.threshold = threshold
        self.keys: set[bytes] = set()
        self.vectors = VectorSet()
        self.held = Counter()
        self.eval_item_count = 0

    def keep(self, records: list[ExportRecord]) -> list[ExportRecord]:
        with_vectors = [record for record in records if record.vector is not None and not record.in_opposite_purpose]
        queries = _vectors_of(with_vectors)
        row_of = {record.id: row for row, record in enumerate(with_vectors)}
        earlier = self.vectors.max_similarity(queries) if len(self.vectors) else np.full(len(queries), -1.0)
        within = queries @ queries.T
        kept_rows: list[int] = []
        kept = []
        for record in records:
            if record.in_opposite_purpose:
                self.held[IN_TRAIN_VERSION] += 1
                continue
            key = text_key(record.text)
            if key is not None and key in self.keys:
                self.held[DUPLICATE_TEXT_WITHIN_EVAL] += 1
                continue
            row = row_of.get(record.id)
            if row is not None and (
                earlier[row] >= self.threshold or (kept_rows and within[row, kept_rows].max() >= self.threshold)
            ):
                self.held[NEAR_DUPLICATE_WITHIN_EVAL] += 1
                continue
            if key is not None:
                self.keys.add(key)
            if row is not None:
                kept_rows.append(row)
            kept.append(record)
        if kept_rows:
            self.vectors.add(queries[kept_rows])
        return kept


def held_out_summary(*, held: Counter, threshold: float, checked_against: dict) -> dict:
    return {
        "total": sum(held.values()),
        "reasons": {reason: held[reason] for reason in sorted(held) if held[reason]},
        "similarity_threshold": threshold,
        "checked_against": checked_against,
    }
