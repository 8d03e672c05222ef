from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        # The apps that do the work announce it; notifications listens, so the
        # imports run one way (notifications reads them, they never import it).
        from exports import signals as export_signals
        from labeling import signals as labeling_signals
        from notifications import events

        labeling_signals.cluster_run_done.connect(
            lambda sender, run_id, **kwargs: events.cluster_run_done(run_id=run_id),
            dispatch_uid="notifications.cluster_run_done",
            weak=False,
        )
        export_signals.export_version_made.connect(
            lambda sender, version, run, **kwargs: events.export_version_made(version=version, run=run),
            dispatch_uid="notifications.export_version_made",
            weak=False,
        )
        export_signals.export_failed.connect(
            lambda sender, run_id, **kwargs: events.export_failed(run_id=run_id),
            dispatch_uid="notifications.export_failed",
            weak=False,
        )
