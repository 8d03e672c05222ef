from django.urls import path

from labeling.categories import views

urlpatterns = [
    path("categories/", views.category_list, name="category_list"),
    path("categories/<int:category_id>/", views.category_detail, name="category_detail"),
    path("categories/<int:category_id>/edit", views.category_edit, name="category_edit"),
    path("categories/<int:category_id>/confirm", views.category_confirm, name="category_confirm"),
    path("categories/<int:category_id>/archive", views.category_archive, name="category_archive"),
    path("categories/<int:category_id>/merge", views.category_merge, name="category_merge"),
    path("categories/<int:category_id>/split", views.category_split, name="category_split"),
    path("categories/<int:category_id>/delete", views.category_delete, name="category_delete"),
    path("categories/<int:category_id>/area", views.category_move_to_area, name="category_move_to_area"),
    path("runs/", views.run_list, name="run_list"),
    path("runs/start", views.run_start, name="run_start"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/progress", views.run_progress, name="run_progress"),
]
