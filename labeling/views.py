"""Reviewer pages."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from feedback import selectors as feedback_selectors


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    pipeline = feedback_selectors.pipeline_counts()
    context = {
        "pipeline": pipeline,
        "total": sum(pipeline.values()),
        "recent": feedback_selectors.items_recent()[:25],
    }
    return render(request, "labeling/overview.html", context)
