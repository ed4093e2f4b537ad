from django.apps import AppConfig


class StudiesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "studies"
    verbose_name = "Studies"

    def ready(self) -> None:
        from accounts.hooks import handover_register, team_joiner_register

        # The tasks module registers each job kind (its task, page and label).
        from . import tasks  # noqa: F401

        # Accounts asks studies to add invited colleagues to teams and to hand a
        # deactivated researcher's studies over.
        from .team_accounts import STUDY_HANDOVER, team_join

        team_joiner_register(team_join)
        handover_register(STUDY_HANDOVER)

        # The LLM layer asks studies to write judges added, changed and removed to the
        # study's audit log.
        from llm.services import judge_config_recorder_register

        from .services.audit import audit

        judge_config_recorder_register(audit)
