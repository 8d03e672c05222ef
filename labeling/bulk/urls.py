from django.urls import path

from labeling.bulk import views

urlpatterns = [
    path("bulk/", views.bulk_apply, name="bulk_apply"),
    path("bulk/<int:action_id>/undo", views.bulk_undo, name="bulk_undo"),
]
