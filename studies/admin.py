from typing import Any

from django import forms
from django.contrib import admin

from . import models
from .protocol.forms import FormFileError, form_validate


class StudyMemberInline(admin.TabularInline):
    model = models.StudyMember
    fk_name = "study"
    fields = ["user", "role", "added_at"]
    readonly_fields = ["added_at"]
    extra = 0


@admin.register(models.Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "owner", "status", "created_at"]
    search_fields = ["slug", "title"]
    inlines = [StudyMemberInline]

    def save_related(self, request, form, formsets, change):  # type: ignore[no-untyped-def]
        super().save_related(request, form, formsets, change)
        # A study added here gets its creator on the team, as study_create does.
        models.StudyMember.objects.get_or_create(
            study=form.instance,
            user=form.instance.owner,
            defaults={"role": models.StudyMember.Role.OWNER, "added_by": request.user},
        )


class ReviewFormAdminForm(forms.ModelForm):
    """A form added here is checked as a form file is; key and version come from it."""

    class Meta:
        model = models.ReviewForm
        fields = ["definition"]

    def clean_definition(self) -> Any:
        data = self.cleaned_data["definition"]
        try:
            definition = form_validate(data, source="definition")
        except FormFileError as exc:
            raise forms.ValidationError(exc.problems) from None
        if models.ReviewForm.objects.filter(
            key=definition.key, version=definition.version
        ).exists():
            raise forms.ValidationError(
                f"{definition.key} v{definition.version} exists; give the form a new version"
            )
        self.instance.key, self.instance.version = definition.key, definition.version
        self.instance.title = definition.title
        return definition.to_dict()


@admin.register(models.ReviewForm)
class ReviewFormAdmin(admin.ModelAdmin):
    """Stored versions are immutable (studies and reviews refer to them): read-only once
    saved."""

    list_display = ["key", "version", "title", "created_at"]
    form = ReviewFormAdminForm

    def get_readonly_fields(self, request: Any, obj: Any = None) -> list[str]:
        return ["key", "version", "title", "definition", "created_at"] if obj else []

    def get_fields(self, request: Any, obj: Any = None) -> Any:
        return self.get_readonly_fields(request, obj) if obj else ["definition"]


@admin.register(models.Idea)
class IdeaAdmin(admin.ModelAdmin):
    list_display = ["id", "study", "topic", "title", "normalization_status"]
    list_filter = ["study", "normalization_status"]


@admin.register(models.Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = ["id", "study", "idea", "reviewer", "status", "flags"]
    list_filter = ["study", "status"]


for model in [
    models.Topic,
    models.Condition,
    models.IdeaCondition,
    models.Reviewer,
    models.Assignment,
    models.ReviewScore,
    models.ImportBatch,
    models.JobRun,
    models.StudyReport,
    models.AuditEvent,
    models.Invitation,
    models.ReviewRevision,
    models.PairTask,
    models.PairJudgment,
]:
    admin.site.register(model)
