from django.apps import AppConfig


class LLMConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "llm"
    label = "llm"
    verbose_name = "LLM endpoints and calls"
