from django.contrib import admin
from django.db import transaction

from llm.models import JudgeConfig, LLMCall
from llm.services import judge_config_admin_saved, judge_config_delete
from studies.admin import ProjectAdmin

from .models import (
    Formalisation,
    IdeaRating,
    JudgeRun,
    Judgment,
    PairwiseOutcome,
    PanelMember,
    ReferenceComparison,
    ReferenceCorpus,
    ReferencePaper,
)


@admin.register(JudgeConfig)
class JudgeConfigAdmin(ProjectAdmin):
    """Judges added, changed and removed here are audit events of their study, as on the
    judging pages."""

    list_display = ["name", "study", "base_url", "model", "concurrency", "is_baseline"]
    search_fields = ["name", "model", "study__slug"]
    raw_id_fields = ["study", "created_by", "endpoint_key"]

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        before = JudgeConfig.objects.filter(pk=obj.pk).first() if change else None
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            judge_config_admin_saved(config=obj, before=before, actor=request.user)

    def delete_model(self, request, obj):  # type: ignore[no-untyped-def]
        judge_config_delete(config=obj, actor=request.user)

    def delete_queryset(self, request, queryset):  # type: ignore[no-untyped-def]
        for config in queryset:
            judge_config_delete(config=config, actor=request.user)


class PanelMemberInline(admin.TabularInline):
    """A panel run's further judges, by seat (read here; a run's panel is set when it is
    created)."""

    model = PanelMember
    extra = 0
    fields = ["seat", "config"]
    readonly_fields = ["seat", "config"]
    can_delete = False

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(JudgeRun)
class JudgeRunAdmin(ProjectAdmin):
    inlines = [PanelMemberInline]
    list_display = [
        "id",
        "study",
        "method",
        "config",
        "status",
        "done_calls",
        "total_calls",
        "cost",
    ]
    list_filter = ["method", "status"]
    raw_id_fields = ["study", "config", "created_by"]


@admin.register(LLMCall)
class LLMCallAdmin(ProjectAdmin):
    list_display = ["id", "model", "prompt_version", "attempts", "latency_ms", "cost", "error"]
    list_filter = ["model", "prompt_version"]
    search_fields = ["cache_key"]
    raw_id_fields = ["run", "config"]


@admin.register(Judgment)
class JudgmentAdmin(ProjectAdmin):
    list_display = ["run", "member", "idea", "metric", "score", "sample"]
    raw_id_fields = ["run", "idea", "call"]


@admin.register(PairwiseOutcome)
class PairwiseOutcomeAdmin(ProjectAdmin):
    list_display = [
        "run",
        "member",
        "round",
        "dimension",
        "idea_a",
        "idea_b",
        "first_shown",
        "verdict",
    ]
    list_filter = ["verdict", "dimension"]
    raw_id_fields = ["run", "idea_a", "idea_b", "first_shown", "call"]


@admin.register(IdeaRating)
class IdeaRatingAdmin(ProjectAdmin):
    list_display = ["run", "idea", "dimension", "score"]
    list_filter = ["dimension"]
    raw_id_fields = ["run", "idea"]


@admin.register(Formalisation)
class FormalisationAdmin(ProjectAdmin):
    list_display = ["run", "idea", "parse_error"]
    raw_id_fields = ["run", "idea", "call"]


@admin.register(ReferenceCorpus)
class ReferenceCorpusAdmin(ProjectAdmin):
    list_display = ["name", "source", "created_by", "created_at"]
    search_fields = ["name"]
    raw_id_fields = ["created_by"]


@admin.register(ReferencePaper)
class ReferencePaperAdmin(ProjectAdmin):
    list_display = ["title", "corpus", "venue", "year", "decision", "rating", "rating_debiased"]
    list_filter = ["venue", "year", "decision"]
    search_fields = ["title"]
    raw_id_fields = ["corpus"]
    exclude = ["minilm"]


@admin.register(ReferenceComparison)
class ReferenceComparisonAdmin(ProjectAdmin):
    list_display = ["run", "idea", "target_reference", "reference", "dimension", "verdict"]
    list_filter = ["verdict", "dimension"]
    raw_id_fields = ["run", "idea", "target_reference", "reference", "call"]
