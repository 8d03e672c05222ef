from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path

from config.api import api


def favicon(request):
    # Pages without base.html (the admin, the API docs) still make browsers ask for /favicon.ico.
    return redirect(static("favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("feedback.urls")),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("datasets/", include("exports.urls")),
    path("rollouts/", include("rollouts.urls")),
    path("notifications/", include("notifications.urls")),
    path("", include("labeling.urls")),
]
