from django.contrib import admin

from . import models


@admin.register(models.Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "owner", "status", "created_at"]
    search_fields = ["slug", "title"]


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
