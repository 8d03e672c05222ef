from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from config.api import api
from feedback import views as feedback_views

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("reports/new", feedback_views.report_new, name="report_new"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("datasets/", include("exports.urls")),
    path("", include("labeling.urls")),
]
