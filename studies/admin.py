import json
from typing import Any

from allauth.socialaccount.admin import SocialAccountAdmin
from allauth.socialaccount.models import SocialAccount
from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import JSONField
from django.forms.fields import InvalidJSONInput

from . import models
from .protocol import jsonsafe
from .protocol.forms import FormFileError, form_validate


class LimitedJSONFormField(forms.JSONField):
    """The admin's JSON fields read text through the project's depth-limited reader, so
    deep nesting is a form error instead of a RecursionError (a 500), also when the
    refused text is shown again."""

    def _too_deep(self, value: Any) -> str:
        if not isinstance(value, str | bytes):
            return ""
        try:
            jsonsafe.loads(value)
        except json.JSONDecodeError as exc:
            return str(exc) if "nested deeper" in str(exc) else ""
        return ""

    def to_python(self, value: Any) -> Any:
        problem = self._too_deep(value)
        if problem:
            raise ValidationError(f"Not accepted: {problem}.", code="invalid")
        return super().to_python(value)

    def bound_data(self, data: Any, initial: Any) -> Any:
        if self._too_deep(data):
            return InvalidJSONInput(data)
        return super().bound_data(data, initial)


class ProjectAdmin(admin.ModelAdmin):
    """Every admin page of the project: JSON fields through the depth-limited reader."""

    formfield_overrides = {JSONField: {"form_class": LimitedJSONFormField}}


class StudyMemberInline(admin.TabularInline):
    model = models.StudyMember
    fk_name = "study"
    fields = ["user", "role", "added_at"]
    readonly_fields = ["added_at"]
    extra = 0


@admin.register(models.Study)
class StudyAdmin(ProjectAdmin):
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
class ReviewFormAdmin(ProjectAdmin):
    """Stored versions are immutable (studies and reviews refer to them): read-only once
    saved."""

    list_display = ["key", "version", "title", "created_at"]
    form = ReviewFormAdminForm

    def get_readonly_fields(self, request: Any, obj: Any = None) -> list[str]:
        return ["key", "version", "title", "definition", "created_at"] if obj else []

    def get_fields(self, request: Any, obj: Any = None) -> Any:
        return self.get_readonly_fields(request, obj) if obj else ["definition"]


@admin.register(models.Idea)
class IdeaAdmin(ProjectAdmin):
    list_display = ["id", "study", "topic", "title", "normalization_status"]
    list_filter = ["study", "normalization_status"]


@admin.register(models.Review)
class ReviewAdmin(ProjectAdmin):
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
    admin.site.register(model, ProjectAdmin)


# Single sign-on's linked identities (allauth's page, registered before this app's) read
# their JSON through the same reader.
if admin.site.is_registered(SocialAccount):
    admin.site.unregister(SocialAccount)


@admin.register(SocialAccount)
class LinkedIdentityAdmin(ProjectAdmin, SocialAccountAdmin):
    pass
