from django.urls import path

from labeling.overview import views

urlpatterns = [
    path("", views.overview, name="home"),
]
