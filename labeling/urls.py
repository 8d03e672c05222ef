"""Reviewer pages: each sub-domain package lists its own routes."""

from django.urls import include, path

urlpatterns = [
    path("", include("labeling.overview.urls")),
    path("", include("labeling.search.urls")),
    path("", include("labeling.categories.urls")),
    path("", include("labeling.areas.urls")),
    path("", include("labeling.review.urls")),
    path("", include("labeling.compare.urls")),
    path("", include("labeling.bulk.urls")),
]
