from django.urls import path

from labeling.areas import views

urlpatterns = [
    path("areas/", views.area_list, name="area_list"),
    path("areas/<int:area_id>/", views.area_detail, name="area_detail"),
    path("areas/<int:area_id>/rename", views.area_rename, name="area_rename"),
    path("areas/<int:area_id>/confirm", views.area_confirm, name="area_confirm"),
    path("areas/<int:area_id>/merge", views.area_merge, name="area_merge"),
]
