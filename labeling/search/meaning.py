"""Search by meaning: the items nearest to a text, or to another item, that pass the search filters.

A query text is prepared the way an item's text is (whitespace folded,
scrubbed, repository names masked: feedback.text) and embedded by the same
model, so a query and an item that say the same thing in other words get
near vectors. The vectors come from the in-process index
(feedback.vector_index); the filters are the word search's, applied in SQL.

Filters and vectors meet in one of two ways:

1. the nearest thousand items are checked against the filters by id: a
   filter that a fifth or more of them meet costs one small query;
2. otherwise the filter matches few items near the query: the ids that pass
   it are read and only their vectors are scored.

The similarity product is computed once per search whichever way is taken.
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from feedback import custom_patterns
from feedback.models import FeedbackItem
from feedback.scrubber import scrub
from feedback.text import mask_identifiers
from feedback.vector_index import Neighbour, shared_index
from labeling.review.selectors import item_snippet
from labeling.search.selectors import SearchFilters, items_search

# The nearest this many items are listed (a few pages): far beyond them,
# nearness says little, and every one costs a filter check.
MEANING_LIMIT = 200
# The cuts checked against the filters before only the filtered items are
# scored. One: at 100,000 items, checking a second, wider cut of thousands of
# ids cost more than reading the ids a filter passes and scoring those.
ROUNDS = (5 * MEANING_LIMIT,)
# The model reads about the first 250 words of a text; a query is a sentence or two.
QUERY_MAX_CHARS = 1000


def query_text(text: str) -> str:
    """What the model embeds for a query: the recipe of item texts (scrubbed, then masked).

    Secrets pasted into the search box never reach the model, and a file or
    function name in the query does not pull towards items of that
    repository, just as it does not for items.
    """
    folded = " ".join(text.split())
    if not folded:
        return ""
    return mask_identifiers(scrub(folded, extra_patterns=custom_patterns.all_sources()).text)


@lru_cache(maxsize=256)
def _embedded(backend: str, text: str) -> np.ndarray:
    # Keyed by backend too: the two backends' vectors are close, not equal.
    from feedback import (
        embedder,  # heavy (onnxruntime): loaded on the first search by meaning
    )

    vector = embedder.embed_texts([text])[0]
    vector.setflags(write=False)  # shared between requests
    return vector


def query_vector(text: str) -> np.ndarray | None:
    """The normalised vector of a query text, or None when it has no words.

    Kept for the last few hundred texts: paging through results or changing
    a filter does not embed the same text again.
    """
    from feedback import embedder

    prepared = query_text(text)
    if not prepared:
        return None
    return _embedded(embedder.backend_name(), prepared)


class Ranking(Sequence):
    """The nearest items, best first, for a paginator: a slice reads its own rows in one query.

    Each item read carries `similarity` (cosine, -1..1) and
    `similarity_percent`, besides what `items_search` annotates.
    """

    def __init__(self, neighbours: list[Neighbour], rows) -> None:
        self.neighbours = neighbours
        self._rows = rows

    @property
    def item_ids(self) -> list[int]:
        return [n.item_id for n in self.neighbours]

    def __len__(self) -> int:
        return len(self.neighbours)

    def __getitem__(self, index):
        if not isinstance(index, slice):
            position = range(len(self))[index]  # raises IndexError as a list does
            return self[position : position + 1][0]
        chosen = self.neighbours[index]
        rows = self._rows.in_bulk([n.item_id for n in chosen]) if chosen else {}
        found = []
        for neighbour in chosen:
            item = rows.get(neighbour.item_id)
            if item is None:  # deleted since the search
                continue
            item.similarity = neighbour.similarity
            item.similarity_percent = round(100 * neighbour.similarity)
            found.append(item)
        return found


def items_nearest(
    *,
    filters: SearchFilters,
    vector: np.ndarray,
    viewer=None,
    exclude_item: int | None = None,
    limit: int = MEANING_LIMIT,
) -> Ranking:
    """The `limit` items nearest to `vector` that pass every filter, best first.

    The filters (and what `viewer` may not see: labels and categories of a
    blind second review stay hidden and unfilterable) are `items_search`'s;
    `filters.q` is not a word filter here, the vector is the query.
    `exclude_item`: the item a "more like this" started from.
    """
    rows = items_search(filters=replace(filters, q=""), viewer=viewer).order_by()
    index = shared_index()
    similarities = index.similarities(vector)
    found: list[Neighbour] = []
    examined, complete = 0, False
    rounds = index.nearest_in_rounds(similarities, sizes=ROUNDS, exclude_item=exclude_item)
    for size, candidates in zip(ROUNDS, rounds):
        if candidates:
            passed = set(rows.filter(id__in=[n.item_id for n in candidates]).values_list("id", flat=True))
            found += [n for n in candidates if n.item_id in passed]
            examined += len(candidates)
        complete = size + 16 >= len(similarities)
        if len(found) >= limit or complete:
            break
        # At the pass rate seen so far, even the widest cut would not fill the
        # list: checking its thousands of ids would be wasted.
        if examined and len(found) / examined * ROUNDS[-1] < limit:
            break
    if len(found) < limit and not complete:
        # The cuts left rows unseen: score every item that passes the filters instead.
        matching = rows.filter(embedding__isnull=False).values_list("id", flat=True)
        found = index.nearest_among(similarities, item_ids=matching.iterator(chunk_size=10_000), k=limit,
                                    exclude_item=exclude_item)
    found.sort(key=lambda n: (-n.similarity, n.item_id))
    return Ranking(found[:limit], rows)


@dataclass
class MeaningSearch:
    """What a search by meaning found, or why it found nothing."""

    ranking: Ranking | None = None
    # "More like this": the item the search started from.
    like_item: FeedbackItem | None = None
    like_preview: str = ""
    # A reason the list is empty that is no fault of the input.
    notice: str = ""
    # A fault of the input: shown like a bad filter, and nothing is listed.
    error: str = ""


def items_by_meaning(
    *, filters: SearchFilters, text: str = "", like_item_id: int | None = None, viewer=None
) -> MeaningSearch:
    """Items nearest to another item (`like_item_id`, which wins) or to a text, under the filters."""
    if like_item_id is not None:
        like_item = FeedbackItem.objects.filter(id=like_item_id).only("id", "title", "comment").first()
        if like_item is None:
            return MeaningSearch(error=f"There is no item #{like_item_id}.")
        found = MeaningSearch(like_item=like_item, like_preview=item_snippet(like_item))
        vector = shared_index().vector_of_item(like_item.id)
        if vector is None:
            found.notice = (
                f"Item #{like_item.id} has no vector yet (its text is waiting to be embedded, or it has no words), "
                "so there is nothing to compare with it."
            )
            return found
        found.ranking = items_nearest(filters=filters, vector=vector, viewer=viewer, exclude_item=like_item.id)
        return found
    vector = query_vector(text)
    if vector is None:
        return MeaningSearch(error="Type what went wrong to search by meaning, or use “More like this” on an item.")
    return MeaningSearch(ranking=items_nearest(filters=filters, vector=vector, viewer=viewer))
