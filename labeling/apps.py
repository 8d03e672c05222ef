from django.apps import AppConfig


class LabelingConfig(AppConfig):
    name = "labeling"
    verbose_name = "Labeling"

    def ready(self) -> None:
        # Register the tasks in every process, not only in workers: the
        # feedback pipeline hands embedded items on to them by name.
        from labeling import tasks  # noqa: F401
