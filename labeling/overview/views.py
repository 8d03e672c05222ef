"""The overview page: ratings over time, the top categories and areas, the pipeline's health, pinned comparisons."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from core.roles import is_reviewer
from labeling.areas import selectors as area_selectors
from labeling.compare.saved import pinned_regressions
from labeling.overview import selectors


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
