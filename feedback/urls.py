from django.urls import path

from feedback import views
from feedback.imports import views as views_import

urlpatterns = [
    path("reports/new", views.report_new, name="report_new"),
    path("imports/", views_import.imports, name="imports"),
    path("imports/<int:run_id>/", views_import.import_run, name="import_run"),
    path("imports/<int:run_id>/status", views_import.import_run_status, name="import_run_status"),
]
