from django.contrib import admin

from . import models


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


@admin.register(models.ReviewForm)
class ReviewFormAdmin(admin.ModelAdmin):
    list_display = ["key", "version", "title", "created_at"]


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
