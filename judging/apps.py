from django.apps import AppConfig


class JudgingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "judging"
    verbose_name = "LLM judges"

    def ready(self) -> None:
        # Studies defines the interface its report reads judge ratings through; judging
        # fills it here, so studies never imports judging's runs or methods.
        from studies.judge_ratings import register_provider

        from .services.ratings import RUN_RATINGS

        register_provider(RUN_RATINGS)
