from django.apps import AppConfig


class RolloutsConfig(AppConfig):
    name = "rollouts"
    verbose_name = "Rollout checks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The checks' flags on labeling's pages (a review queue per check, the search
        # filter, the comparison's rows per check): rollouts builds on labeling, so it
        # hands labeling what to show instead of labeling importing it.
        from labeling import flags
        from rollouts import compare, selectors
        from rollouts.models import RolloutFlag

        def title(name: str) -> str | None:
            info = selectors.check_info(name)
            return info.title if info else None

        def flagged(*, name: str, pending_only: bool = False):
            statuses = (RolloutFlag.Status.PENDING,) if pending_only else selectors.STANDING
            return selectors.items_with_flag(check_name=name, statuses=statuses)

        flags.register(
            flags.ItemFlags(
                names=selectors.check_names,
                title=title,
                flagged=flagged,
                comparison_rows=compare.check_rows_many,
                rows_json=compare.check_rows_json,
            )
        )
