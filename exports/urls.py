"""Dataset pages, mounted at /datasets/."""

from django.urls import path

from exports import views

urlpatterns = [
    path("", views.dataset_list, name="dataset_list"),
    path("new", views.dataset_new, name="dataset_new"),
    path("preview", views.dataset_preview, name="dataset_preview"),
    path("<int:dataset_id>/", views.dataset_detail, name="dataset_detail"),
    path("<int:dataset_id>/edit", views.dataset_edit, name="dataset_edit"),
    path("<int:dataset_id>/preview", views.dataset_preview, name="dataset_edit_preview"),
    path("<int:dataset_id>/export", views.dataset_export, name="dataset_export"),
    path("<int:dataset_id>/runs/<int:run_id>/status", views.run_status, name="dataset_run_status"),
    path("<int:dataset_id>/schedule", views.dataset_schedule, name="dataset_schedule"),
    path("<int:dataset_id>/delete", views.dataset_delete, name="dataset_delete"),
    path("<int:dataset_id>/diff", views.version_diff, name="dataset_diff"),
    path("<int:dataset_id>/v<int:number>/", views.version_detail, name="dataset_version"),
    path("<int:dataset_id>/v<int:number>/<str:name>", views.version_file, name="dataset_version_file"),
]
