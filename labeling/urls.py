"""Reviewer pages. Each view module lists its own routes."""

from django.urls import path

from labeling import views
from labeling.views_areas import urlpatterns as area_urls
from labeling.views_bulk import urlpatterns as bulk_urls
from labeling.views_categories import urlpatterns as category_urls
from labeling.views_compare import urlpatterns as compare_urls
from labeling.views_review import urlpatterns as review_urls

urlpatterns = [
    path("", views.overview, name="home"),
    path("search/", views.search, name="search"),
    *category_urls,
    *area_urls,
    *review_urls,
    *compare_urls,
    *bulk_urls,
]
