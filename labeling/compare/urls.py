from django.urls import path

from labeling.compare import views

urlpatterns = [
    path("compare/", views.compare_page, name="compare"),
    path("compare/saved/", views.saved_create, name="compare_saved_create"),
    path("compare/saved/<int:saved_id>/pin", views.saved_pin, name="compare_saved_pin"),
    path("compare/saved/<int:saved_id>/delete", views.saved_delete, name="compare_saved_delete"),
]
