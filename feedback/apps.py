from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class FeedbackConfig(AppConfig):
    name = "feedback"
    verbose_name = "Feedback"

    def ready(self) -> None:
        from feedback import custom_patterns
        from feedback.models import Source

        post_save.connect(custom_patterns.forget, sender=Source, dispatch_uid="custom_patterns_forget_save")
        post_delete.connect(custom_patterns.forget, sender=Source, dispatch_uid="custom_patterns_forget_delete")
