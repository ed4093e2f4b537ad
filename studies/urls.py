from django.urls import path

from .views import (
    audit,
    ideas,
    members,
    owner,
    payments,
    phases,
    plan,
    review_form,
    reviewer,
    sizing,
    study,
    study_settings,
)

app_name = "studies"

# Reviewer pages come first and live under "r/": their second path segments (login,
# invite, home, …) are words no owner page uses after a study slug, so a study called
# "r" keeps all its pages.
reviewer_patterns = [
    path("r/login/", reviewer.reviewer_login, name="reviewer_login"),
    path("r/invite/<str:token>/", reviewer.invitation_open, name="invitation_open"),
    path("r/home/", reviewer.reviewer_home, name="reviewer_home"),
    path(
        "r/profile/<int:reviewer_id>/consent/",
        reviewer.reviewer_consent_view,
        name="reviewer_consent",
    ),
    path(
        "r/profile/<int:reviewer_id>/",
        reviewer.reviewer_profile_view,
        name="reviewer_profile",
    ),
    path(
        "r/profile/<int:reviewer_id>/payment/",
        reviewer.reviewer_payment_view,
        name="reviewer_payment",
    ),
    path("r/assignments/<int:assignment_id>/", reviewer.review_page, name="review_page"),
    path(
        "r/assignments/<int:assignment_id>/draft/",
        reviewer.review_autosave,
        name="review_autosave",
    ),
    path(
        "r/assignments/<int:assignment_id>/submit/",
        reviewer.review_submit_view,
        name="review_submit",
    ),
    path("r/pairs/<int:task_id>/", reviewer.pair_page, name="pair_page"),
    path("r/pairs/<int:task_id>/submit/", reviewer.pair_submit_view, name="pair_submit"),
]

urlpatterns = [
    *reviewer_patterns,
    path("", study.study_list, name="study_list"),
    path("new/", study.study_new, name="study_new"),
    path("<slug:slug>/", study.study_detail, name="study_detail"),
    path("<slug:slug>/import/", study.study_import, name="study_import"),
    path("<slug:slug>/settings/", study_settings.study_settings, name="study_settings"),
    path("<slug:slug>/delete/", study.study_delete_view, name="study_delete"),
    path("<slug:slug>/export.json", study.study_export_view, name="study_export"),
    path("<slug:slug>/audit/", audit.study_audit, name="study_audit"),
    path("<slug:slug>/members/", members.study_members, name="study_members"),
    path("<slug:slug>/members/<int:member_id>/role/", members.member_role, name="member_role"),
    path(
        "<slug:slug>/members/<int:member_id>/remove/",
        members.member_remove_view,
        name="member_remove",
    ),
    path("<slug:slug>/form/", review_form.study_form, name="study_form"),
    path(
        "<slug:slug>/samples/<slug:kind>.<slug:fmt>",
        review_form.import_sample,
        name="import_sample",
    ),
    path("<slug:slug>/report/", study.study_report, name="study_report"),
    path("<slug:slug>/report/build/", study.study_report_build, name="study_report_build"),
    path("<slug:slug>/report/files/<str:name>", study.study_report_file, name="study_report_file"),
    path("<slug:slug>/jobs/<int:job_id>/", study.job_status, name="job_status"),
    path("<slug:slug>/jobs/<int:job_id>/cancel/", study.job_cancel_view, name="job_cancel"),
    path("<slug:slug>/jobs/<int:job_id>/retry/", study.job_retry_view, name="job_retry"),
    # Recruitment, assignment and progress (owner only).
    path("<slug:slug>/progress/", owner.study_progress, name="study_progress"),
    path("<slug:slug>/progress/remind/", owner.study_reminders, name="study_reminders"),
    path("<slug:slug>/progress/close/", owner.study_close_view, name="study_close"),
    path("<slug:slug>/progress/due/", owner.study_due, name="study_due"),
    path("<slug:slug>/reviewers/", owner.study_reviewers, name="study_reviewers"),
    path(
        "<slug:slug>/reviewers/approve-by-rule/",
        owner.reviewers_approve_by_rule,
        name="reviewers_approve_by_rule",
    ),
    path(
        "<slug:slug>/reviewers/<int:reviewer_id>/screen/",
        owner.reviewer_screen_view,
        name="reviewer_screen",
    ),
    path(
        "<slug:slug>/reviewers/<int:reviewer_id>/drop/",
        owner.reviewer_drop_view,
        name="reviewer_drop",
    ),
    path("<slug:slug>/invitations/", owner.study_invitations, name="study_invitations"),
    path(
        "<slug:slug>/invitations/upload/",
        owner.invitations_upload,
        name="invitations_upload",
    ),
    path(
        "<slug:slug>/invitations/<int:invitation_id>/resend/",
        owner.invitation_resend,
        name="invitation_resend",
    ),
    path("<slug:slug>/assignment/", owner.assignment_preview_view, name="assignment_preview"),
    path("<slug:slug>/plan/", plan.study_plan_page, name="study_plan"),
    path("<slug:slug>/phases/", phases.study_phases, name="study_phases"),
    path("<slug:slug>/phases/link/", phases.study_phase_link, name="study_phase_link"),
    path("<slug:slug>/phases/unlink/", phases.study_phase_unlink, name="study_phase_unlink"),
    path("<slug:slug>/plan/freeze/", plan.study_plan_freeze_view, name="study_plan_freeze"),
    path(
        "<slug:slug>/plan/preregistration.<str:fmt>",
        plan.study_preregistration_view,
        name="study_preregistration",
    ),
    path("<slug:slug>/sizing/", sizing.sizing, name="sizing"),
    path("<slug:slug>/payments/", payments.study_payments, name="study_payments"),
    path("<slug:slug>/payments.csv", payments.payments_export, name="payments_export"),
    path("<slug:slug>/payments/reviews/", payments.payment_reviews, name="payment_reviews"),
    path(
        "<slug:slug>/payments/reviews/<int:review_id>/decide/",
        payments.payment_review_decide,
        name="payment_review_decide",
    ),
    path(
        "<slug:slug>/payments/reviews/accept-undecided/",
        payments.payment_reviews_accept_undecided,
        name="payment_reviews_accept_undecided",
    ),
    path(
        "<slug:slug>/assignment/commit/",
        owner.assignment_commit_view,
        name="assignment_commit",
    ),
    path("<slug:slug>/pair-tasks/", owner.pair_tasks_view, name="pair_tasks"),
    path(
        "<slug:slug>/pair-tasks/upload/",
        owner.pair_tasks_upload_view,
        name="pair_tasks_upload",
    ),
    # Idea preparation (owner only): intake, sections, topic matching, duplicates,
    # style normalization and its sign-off, the leakage-check export.
    path("<slug:slug>/ideas/", ideas.ideas_list, name="ideas_list"),
    path("<slug:slug>/ideas/import/", ideas.ideas_import_view, name="ideas_import"),
    path("<slug:slug>/ideas/topics/", ideas.topic_matching, name="topic_matching"),
    path(
        "<slug:slug>/ideas/topics/apply/",
        ideas.topic_matching_apply,
        name="topic_matching_apply",
    ),
    path("<slug:slug>/ideas/topics/reason/", ideas.topic_reason, name="topic_reason"),
    path("<slug:slug>/ideas/open/", ideas.study_open_view, name="study_open"),
    path("<slug:slug>/ideas/duplicates/", ideas.duplicates, name="duplicates"),
    path("<slug:slug>/ideas/duplicates/run/", ideas.duplicates_run, name="duplicates_run"),
    path("<slug:slug>/ideas/normalization/", ideas.normalization, name="normalization"),
    path(
        "<slug:slug>/ideas/normalization/config/",
        ideas.normalization_config,
        name="normalization_config",
    ),
    path(
        "<slug:slug>/ideas/normalization/run/",
        ideas.normalization_start,
        name="normalization_start",
    ),
    path("<slug:slug>/ideas/leakage/", ideas.leakage, name="leakage"),
    path(
        "<slug:slug>/ideas/leakage/<int:export_id>/<str:kind>.csv",
        ideas.leakage_download,
        name="leakage_download",
    ),
    path("<slug:slug>/ideas/<int:idea_id>/row/", ideas.idea_row, name="idea_row"),
    path(
        "<slug:slug>/ideas/<int:idea_id>/sections/",
        ideas.idea_sections,
        name="idea_sections",
    ),
    path(
        "<slug:slug>/ideas/<int:idea_id>/include/",
        ideas.idea_include_view,
        name="idea_include",
    ),
    path(
        "<slug:slug>/ideas/normalization/approve-passed/",
        ideas.signoff_approve_passed,
        name="signoff_approve_passed",
    ),
    path("<slug:slug>/ideas/<int:idea_id>/signoff/", ideas.idea_signoff, name="idea_signoff"),
    path(
        "<slug:slug>/ideas/<int:idea_id>/signoff/decide/",
        ideas.idea_decide,
        name="idea_decide",
    ),
]
