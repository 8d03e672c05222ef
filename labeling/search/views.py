"""The search page: items by filters (keyset pages), or by meaning."""

from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.roles import reviewer_required
from labeling.bulk.views import bulk_panel_for
from labeling.search import meaning, selectors
from labeling.search.forms import SearchForm
from labeling.search.keyset import keyset_page, page_number_parse


@reviewer_required
def search(request: HttpRequest) -> HttpResponse:
    form = SearchForm(request.GET or None)
    page = None
    by_meaning = None
    if form.is_bound and form.is_valid() and form.by_meaning():
        by_meaning = meaning.items_by_meaning(
            filters=form.filters(), text=form.cleaned_data["q"], like_item_id=form.like_item_id(), viewer=request.user
        )
        if by_meaning.error:
            form.add_error("like" if form.like_item_id() else "q", by_meaning.error)
        if by_meaning.ranking is not None:
            # At most MEANING_LIMIT ranked items, already in memory: numbered pages.
            page = Paginator(by_meaning.ranking, 50).get_page(request.GET.get("page"))
            count = page.paginator.count
    elif not form.is_bound or form.is_valid():
        filters = form.filters() if form.is_bound else selectors.SearchFilters()
        page = keyset_page(
            selectors.items_search(filters=filters, viewer=request.user),
            **(form.cursors() if form.is_bound else {}),
            page_number=page_number_parse(request.GET.get("page")),
            count=selectors.items_search_count(filters=filters),
        )
        count = page.count
    query = {key: value for key, value in request.GET.items() if key not in ("page", "after", "before") and value}
    context = {
        "form": form,
        "page": page,
        "count": count if page is not None else 0,
        "query": urlencode(query),
        "choices": selectors.search_choices(),
        "bulk": bulk_panel_for(request, scope="search", total=count) if page is not None else None,
        "by_meaning": by_meaning,
        "meaning_limit": meaning.MEANING_LIMIT,
        # "Search by a text instead" of more like an item: the same filters, by meaning.
        "unlike_query": urlencode({key: value for key, value in query.items() if key != "like"} | {"mode": "meaning"}),
    }
    return render(request, "labeling/search.html", context, status=422 if form.errors else 200)
