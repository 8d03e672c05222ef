from django.urls import path

from rollouts import views

urlpatterns = [
    path("", views.checks_page, name="rollout_checks"),
    path("flags/<int:flag_id>/decide", views.flag_decide, name="rollout_flag_decide"),
    path("items/<int:item_id>/flags", views.item_flags, name="rollout_item_flags"),
    path("compare/", views.compare_rows, name="rollout_compare"),
    path("rates", views.overview_rates, name="rollout_rates"),
    path("sources/<slug:slug>/", views.source_settings, name="rollout_source_settings"),
]
