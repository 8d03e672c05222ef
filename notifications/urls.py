"""The notifications page, mounted at /notifications/ (admins only)."""

from django.urls import path

from notifications import views

urlpatterns = [
    path("", views.notifications_page, name="notifications"),
    path("destinations/new", views.destination_new, name="notification_destination_new"),
    path("destinations/<int:destination_id>/edit", views.destination_edit, name="notification_destination_edit"),
    path("destinations/<int:destination_id>/test", views.destination_test, name="notification_destination_test"),
    path("destinations/<int:destination_id>/delete", views.destination_delete, name="notification_destination_delete"),
    path("deliveries/<int:delivery_id>/retry", views.delivery_retry, name="notification_delivery_retry"),
]
