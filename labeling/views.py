"""Reviewer pages: the overview and search."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from feedback import selectors as feedback_selectors
from labeling.permissions import is_reviewer, reviewer_required


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    if not is_reviewer(request.user):
        # Staff without a review role come to file reports.
        return redirect("report_new")
    pipeline = feedback_selectors.pipeline_counts()
    context = {
        "pipeline": pipeline,
        "total": sum(pipeline.values()),
        "recent": feedback_selectors.items_recent()[:25],
    }
    return render(request, "labeling/overview.html", context)


@reviewer_required
def search(request: HttpRequest) -> HttpResponse:
    return render(request, "labeling/overview.html", {"recent": []})
