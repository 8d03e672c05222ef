from django.apps import AppConfig


class RolloutsConfig(AppConfig):
    name = "rollouts"
    verbose_name = "Rollout checks"
    default_auto_field = "django.db.models.BigAutoField"
