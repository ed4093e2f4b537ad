from django.apps import AppConfig


class StudiesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "studies"
    verbose_name = "Studies"

    def ready(self) -> None:
        # The tasks module registers each job kind (its task, page and label).
        from . import tasks  # noqa: F401
