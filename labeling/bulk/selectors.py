"""Reads for bulk actions: which items a selection stands for, and the bulk actions a page lists.

A selection is either a list of item ids (the ticked rows) or, after
"select all N matching", the filter of the page it came from: the search
filters, a category's item filters, or an area's unsorted bucket. A filter
is resolved when the action runs, with the same selectors the pages use, so
the items a reviewer may not see on the page (a blind second review still
owed) are not in it either.
"""

from dataclasses import dataclass, field

from django.apps import apps
from django.db.models import Q, QuerySet

from core.ids import id_parse
from feedback.models import FeedbackItem
from labeling.areas import selectors as area_selectors
from labeling.categories import selectors as category_selectors
from labeling.models import Area, BulkAction, Category, Label
from labeling.review.services import LABEL_TAGS

# Large enough for any category of the demo and most real ones; an action on
# more is a filter that should be narrowed first (and stays under 2 s of writes).
BULK_MAX_ITEMS = 10_000
SCOPES = ("search", "category", "area")
HISTORY_SHOWN = 10
CATEGORY_PARAMS = ("rating", "model_version", "variant", "assigned_by")


class SelectionRefused(Exception):
    """A selection that cannot be acted on; `status` is the HTTP answer that fits."""

    def __init__(self, message: str, *, status: int, field: str = "items") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.field = field


@dataclass(frozen=True)
class Selection:
    ids: tuple[int, ...] = ()
    # Set for "select all matching": the filter is the selection.
    scope: str = ""
    scope_id: int | None = None
    params: dict[str, str] = field(default_factory=dict)
    # A token's source: only that source's items may be touched.
    source_id: int | None = None

    @property
    def is_filter(self) -> bool:
        return bool(self.scope)


def _ids_text(ids: list[int], shown: int = 5) -> str:
    text = ", ".join(str(i) for i in ids[:shown])
    return text + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


def selection_filter_items(*, selection: Selection, viewer) -> QuerySet[FeedbackItem]:
    """The items a page's filter lists for `viewer`; SelectionRefused if the filter is broken."""
    # Imported here: the search form imports the search selectors, which import the review selectors.
    from labeling.search.forms import SearchForm

    params = {key: value for key, value in selection.params.items() if isinstance(value, str)}
    if selection.scope == "search":
        # Every field the search form knows: the selection is exactly what the page listed.
        form = SearchForm(params)
        if not form.is_valid():
            name, errors = next(iter(form.errors.items()))
            raise SelectionRefused(f"filter {name}: {errors[0]}", status=422, field=f"filter.params.{name}")
        if form.by_meaning():
            items = _nearest_items(form, viewer=viewer)
        else:
            from labeling.search.selectors import items_search

            items = items_search(filters=form.filters(), viewer=viewer)
    elif selection.scope == "category":
        category = Category.objects.filter(id=selection.scope_id).first() if selection.scope_id else None
        if category is None:
            raise SelectionRefused("the category of the filter does not exist", status=404, field="filter.id")
        filters = category_selectors.CategoryItemFilters(
            **{key: params.get(key, "")[:100] for key in CATEGORY_PARAMS}
        )
        items = category_selectors.category_items(category=category, filters=filters, viewer=viewer)
    elif selection.scope == "area":
        area = Area.objects.filter(id=selection.scope_id).first() if selection.scope_id else None
        if area is None:
            raise SelectionRefused("the area of the filter does not exist", status=404, field="filter.id")
        items = area_selectors.area_unsorted_items(area=area)
    else:
        raise SelectionRefused(
            f"filter scope must be one of {', '.join(SCOPES)}", status=422, field="filter.scope"
        )
    if selection.source_id is not None:
        items = items.filter(source_id=selection.source_id)
    return items


def _nearest_items(form, *, viewer) -> QuerySet[FeedbackItem]:
    """A search by meaning lists its nearest items: those are the ones "all matching" takes."""
    from labeling.search import meaning

    found = meaning.items_by_meaning(
        filters=form.filters(), text=form.cleaned_data["q"], like_item_id=form.like_item_id(), viewer=viewer
    )
    if found.error:
        raise SelectionRefused(f"filter: {found.error}", status=422, field="filter.params.q")
    ids = found.ranking.item_ids if found.ranking is not None else []
    return FeedbackItem.objects.filter(id__in=ids)


def selection_resolve(*, selection: Selection, viewer) -> list[int]:
    """The ids of the selected items, sorted; SelectionRefused when empty, too large, unknown or foreign.

    Two queries at most: the ids (one more than allowed, to tell "too many"
    without counting everything) and, only when refusing, the count.
    """
    if selection.is_filter:
        items = selection_filter_items(selection=selection, viewer=viewer).order_by()
        ids = list(items.values_list("id", flat=True)[: BULK_MAX_ITEMS + 1])
        if len(ids) > BULK_MAX_ITEMS:
            total = items.count()
            raise SelectionRefused(
                f"{total:,} items match; a bulk action takes at most {BULK_MAX_ITEMS:,}: narrow the filters",
                status=413,
            )
        if not ids:
            raise SelectionRefused("no items match this filter: nothing to do", status=422)
        return sorted(set(ids))

    ids = sorted(set(selection.ids))
    if not ids:
        raise SelectionRefused("the selection is empty: tick some items, or select all matching", status=422)
    if len(ids) > BULK_MAX_ITEMS:
        raise SelectionRefused(
            f"{len(ids):,} items selected; a bulk action takes at most {BULK_MAX_ITEMS:,}", status=413
        )
    sources = dict(FeedbackItem.objects.filter(id__in=ids).values_list("id", "source_id"))
    missing = [item_id for item_id in ids if item_id not in sources]
    if missing:
        raise SelectionRefused(
            f"{len(missing)} of the selected items do not exist: {_ids_text(missing)}", status=404
        )
    if selection.source_id is not None:
        foreign = [item_id for item_id in ids if sources[item_id] != selection.source_id]
        if foreign:
            raise SelectionRefused(
                f"{len(foreign)} of the selected items belong to another source than this token's: "
                f"{_ids_text(foreign)}",
                status=403,
            )
    return ids


# --- What the pages show ------------------------------------------------------------------


def datasets_for_pinning() -> list[tuple[int, str]]:
    """(id, name) of every dataset; the exports app owns them, so it is looked up by name."""
    dataset = apps.get_model("exports", "Dataset")
    return list(dataset.objects.order_by("name").values_list("id", "name"))


def bulk_history(
    *, origin: str = "", category: Category | None = None, area: Area | None = None, limit: int = HISTORY_SHOWN
) -> list[BulkAction]:
    """The latest bulk actions started on a page or about its category or area, newest first."""
    condition = Q(origin=origin) if origin else Q(pk__in=[])
    if category is not None:
        condition |= Q(category=category)
    if area is not None:
        condition |= Q(area=area)
    # The undo data can be large and is read only by the undo itself.
    return list(BulkAction.objects.filter(condition).select_related("undone_by").defer("undo")[:limit])


def bulk_panel(
    *, scope: str, total: int, query: str, next_url: str, scope_id: int | None = None,
    category: Category | None = None, area: Area | None = None,
) -> dict:
    """Everything the selection bar and the bulk history of a page need."""
    origin = f"{scope}:{scope_id}" if scope_id else scope
    return {
        "scope": scope,
        "scope_id": scope_id or "",
        "query": query,
        "next": next_url,
        "total": total,
        "max": BULK_MAX_ITEMS,
        "categories": list(
            Category.objects.open().order_by("name", "id").values_list("id", "name")
        ),
        "verdicts": Label.Verdict.choices,
        "splits": Label.Split.choices,
        "tags": LABEL_TAGS,
        "datasets": datasets_for_pinning(),
        "history": bulk_history(origin=origin, category=category, area=area),
    }


def bulk_action_get(*, action_id) -> BulkAction | None:
    action_id = id_parse(action_id)
    return BulkAction.objects.filter(id=action_id).first() if action_id else None
