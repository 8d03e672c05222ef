"""Reviewer pages: the overview and search."""

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from labeling import area_selectors, selectors
from labeling.compare import pinned_regressions
from labeling.permissions import is_reviewer, reviewer_required
from labeling.search_form import SearchForm


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    if not is_reviewer(request.user):
        # Staff without a review role come here to file reports.
        return redirect("report_new")
    days, series = selectors.ratings_over_time(days=30)
    context = {
        "chart": {"days": days, "series": [vars(s) for s in series]},
        "versions": selectors.version_summary(),
        "top_categories": selectors.top_categories(limit=10),
        "top_areas": area_selectors.top_areas(limit=10),
        "health": selectors.pipeline_health(),
        "pinned_comparisons": pinned_regressions(),
    }
    return render(request, "labeling/overview.html", context)


@reviewer_required
def search(request: HttpRequest) -> HttpResponse:
    form = SearchForm(request.GET or None)
    page = None
    if form.is_bound and form.is_valid():
        items = selectors.items_search(filters=form.filters(), viewer=request.user)
    elif not form.is_bound:
        items = selectors.items_search(filters=selectors.SearchFilters(), viewer=request.user)
    else:
        items = None
    if items is not None:
        page = Paginator(items, 50).get_page(request.GET.get("page"))
    query = {key: value for key, value in request.GET.items() if key != "page" and value}
    context = {
        "form": form,
        "page": page,
        "query": urlencode(query),
        "choices": selectors.search_choices(),
    }
    return render(request, "labeling/search.html", context, status=422 if form.errors else 200)
