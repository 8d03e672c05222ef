from django.urls import path

from labeling.search import views

urlpatterns = [
    path("search/", views.search, name="search"),
]
