"""Owner views for the human half of a study: invitations, screening, the assignment
preview and commit, pair tasks and progress. Each starts with `get_study_for_member` and the role it needs."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ..analysis.rounding import counted
from ..http import is_htmx
from ..jobs import job_active, job_latest, job_mark_if_lost
from ..models import Assignment, Invitation, JobRun, PairTask, Reviewer, Study
from ..reviewer_forms import (
    AssignmentPreviewForm,
    DueDateForm,
    InvitationForm,
    InvitationUploadForm,
    OwnerTopicsLoadForm,
    PairTaskCreateForm,
    PairTaskUploadForm,
    ScreeningForm,
)
from ..services.assignment import (
    ASSIGNMENT_JOB,
    assignment_commit,
    assignment_plan,
    assignment_preview_enqueue,
)
from ..services.errors import ImportedStudyRefused, SetupError
from ..services.invitations import (
    RecruitmentError,
    invitation_create,
    invitation_link,
    invitation_send,
    invitations_create_from_csv,
    invitations_read,
    reviewer_drop,
    reviewer_drop_counts,
    reviewer_screen,
    reviewer_topics_change,
    reviewers_screen_by_rule,
)
from ..services.quality import progress_quality
from ..services.reviews import (
    pair_tasks_create,
    pair_tasks_upload,
    progress_summary,
    reminders_send,
)
from ..services.study import study_close, study_set_due
from ..status import imported_review_count, study_status
from ..uploads import UploadGone, upload_from_form
from .study import (
    EDITOR,
    OWNER,
    VIEWER,
    get_study_for_member,
    refused_as_imported,
    role_by_method,
)


def _link_for(request: HttpRequest):  # type: ignore[no-untyped-def]
    return request.build_absolute_uri


# --------------------------------------------------------------------------- progress


@login_required
@require_GET
def study_progress(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    context = {
        "study": study,
        "progress": progress_summary(study=study),
        # Its reviews came from a file, not from assignments: "0 of 0 submitted" would
        # hide them, so the counts say how many were imported (closed or not).
        "imported_reviews": 0
        if study.assignments.exclude(status=Assignment.Status.WITHDRAWN).exists()
        else imported_review_count(study),
        "due_form": DueDateForm(initial={"reviews_due_at": study.reviews_due_at}),
    }
    if is_htmx(request):
        return render(request, "studies/owner/progress.html#bars", context)
    # Not in the 10-second refresh: the flags compare rationales, which costs more.
    context["quality"] = progress_quality(study)
    return render(request, "studies/owner/progress.html", context)


@login_required
@require_POST
def study_reminders(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    try:
        sent = reminders_send(study=study, link_for=_link_for(request), actor=request.user)
    except (ImportedStudyRefused, RecruitmentError) as exc:
        messages.error(request, str(exc))
        return redirect("studies:study_progress", study.slug)
    messages.success(
        request,
        f"Reminders sent to {counted(sent['reviewers'], 'reviewer')} and "
        f"{counted(sent['invitations'], 'open invitation')}.",
    )
    return redirect("studies:study_progress", study.slug)


@login_required
@require_POST
def study_close_view(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=OWNER)
    if request.POST.get("confirm") != "close":
        messages.error(request, "Tick the confirmation to close the study.")
    elif not study.is_closed():
        study_close(study=study, actor=request.user)
        messages.success(request, "The study is closed: reviews can no longer be edited.")
    return redirect("studies:study_progress", study.slug)


@login_required
@require_POST
def study_due(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    if refused_as_imported(request, study, "has no due date for reviews"):
        return redirect("studies:study_progress", study.slug)
    form = DueDateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "That is not a date and time.")
        return redirect("studies:study_progress", study.slug)
    try:
        study_set_due(study=study, due=form.cleaned_data["reviews_due_at"], actor=request.user)
    except SetupError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Due date saved.")
    return redirect("studies:study_progress", study.slug)


# --------------------------------------------------------------------------- reviewers


def _reviewer_rows(study: Study) -> list[Reviewer]:
    return list(
        Reviewer.objects.filter(study=study, user__isnull=False)
        .select_related("user", "study")
        .order_by("pseudonym")
    )


@login_required
@require_GET
def study_reviewers(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    return render(
        request,
        "studies/owner/reviewers.html",
        {"study": study, "reviewers": _reviewer_rows(study), "form": ScreeningForm()},
    )


@login_required
@require_POST
def reviewer_screen_view(request: HttpRequest, slug: str, reviewer_id: int) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    reviewer = get_object_or_404(Reviewer, pk=reviewer_id, study=study)
    if refused_as_imported(request, study, "screens no reviewers"):
        return redirect("studies:study_reviewers", study.slug)
    form = ScreeningForm(request.POST)
    error = ""
    if form.is_valid():
        try:
            reviewer_screen(
                reviewer=reviewer,
                approve=form.cleaned_data["decision"] == "approve",
                reason=form.cleaned_data["reason"],
                actor=request.user,
            )
        except RecruitmentError as exc:
            error = str(exc)
    else:
        error = "; ".join(str(e) for errs in form.errors.values() for e in errs)
    if is_htmx(request):
        reviewer.refresh_from_db()
        return render(
            request,
            "studies/owner/reviewers.html#row",
            {"study": study, "r": reviewer, "row_error": error},
            status=400 if error else 200,
        )
    if error:
        messages.error(request, f"{reviewer.pseudonym}: {error}")
    return redirect("studies:study_reviewers", study.slug)


@login_required
@require_POST
def reviewers_approve_by_rule(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    try:
        n = reviewers_screen_by_rule(study=study, actor=request.user)
    except ImportedStudyRefused as exc:
        messages.error(request, str(exc))
        return redirect("studies:study_reviewers", study.slug)
    if n:
        messages.success(request, f"Approved {counted(n, 'reviewer')} who meet the rule.")
    else:
        messages.info(request, "No pending profile meets the rule: no reviewer was approved.")
    return redirect("studies:study_reviewers", study.slug)


@login_required
@require_http_methods(["GET", "POST"])
def reviewer_drop_view(request: HttpRequest, slug: str, reviewer_id: int) -> HttpResponse:
    """GET: what dropping the reviewer would do, with the button that does it (it cannot
    be undone, so the list's link asks first). POST: drop."""
    study = get_study_for_member(request, slug, role=EDITOR)
    reviewer = get_object_or_404(Reviewer, pk=reviewer_id, study=study, dropped_at__isnull=True)
    if request.method == "GET":
        return render(
            request,
            "studies/owner/reviewer_drop.html",
            {"study": study, "reviewer": reviewer, **reviewer_drop_counts(reviewer=reviewer)},
        )
    n = reviewer_drop(reviewer=reviewer, actor=request.user)
    messages.success(
        request,
        f"{reviewer.pseudonym} dropped; {counted(n, 'open task')} withdrawn. Preview the assignment "
        "to give their ideas to other reviewers.",
    )
    return redirect("studies:assignment_preview", study.slug)


@login_required
@require_http_methods(["GET", "POST"])
def reviewer_topics_view(request: HttpRequest, slug: str, reviewer_id: int) -> HttpResponse:
    """A screened reviewer's topics and load, changed by the study team for them (their
    own profile is locked once screened): GET shows the form, POST saves it."""
    study = get_study_for_member(request, slug, role=EDITOR)
    reviewer = get_object_or_404(Reviewer, pk=reviewer_id, study=study, dropped_at__isnull=True)
    prefs = list(reviewer.topic_preferences or [])
    initial = {
        "topic_first": prefs[0] if prefs else "",
        "topic_second": prefs[1] if len(prefs) > 1 else "",
        "preferred_load": reviewer.preferred_load,
    }
    form = OwnerTopicsLoadForm(request.POST or None, initial=initial, study=study)
    error = ""
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            changed = reviewer_topics_change(
                reviewer=reviewer,
                topics=[data["topic_first"], data["topic_second"]],
                preferred_load=data["preferred_load"],
                actor=request.user,
                note=data["note"],
            )
        except (RecruitmentError, ImportedStudyRefused) as exc:
            error = str(exc)
        else:
            if changed:
                messages.success(
                    request,
                    f"{reviewer.pseudonym}'s topics and load changed. Preview the assignment "
                    "again to use them.",
                )
            else:
                messages.info(request, f"{reviewer.pseudonym}: nothing changed.")
            return redirect("studies:study_reviewers", study.slug)
    return render(
        request,
        "studies/owner/reviewer_topics.html",
        {
            "study": study,
            "reviewer": reviewer,
            "form": form,
            "error": error,
            "n_held": reviewer.assignments.exclude(status="withdrawn").count(),
        },
        status=400 if request.method == "POST" else 200,
    )


# --------------------------------------------------------------------------- invitations


@login_required
@require_http_methods(["GET", "POST"])
def study_invitations(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=role_by_method(request))
    if request.method == "POST" and refused_as_imported(request, study, "invites no reviewers"):
        return redirect("studies:study_invitations", study.slug)
    form = InvitationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        invitation_create(
            study=study,
            email=form.cleaned_data["email"],
            name=form.cleaned_data["name"],
            actor=request.user,
            link_for=_link_for(request),
        )
        messages.success(request, f"Invitation sent to {form.cleaned_data['email']}.")
        return redirect("studies:study_invitations", study.slug)
    return _invitations_page(request, study, form, InvitationUploadForm(), [])


def _invitations_page(
    request: HttpRequest,
    study: Study,
    form: Any,
    upload: Any,
    problems: list[str],
    staged: dict[str, Any] | None = None,
) -> HttpResponse:
    rows = [
        {
            "invitation": inv,
            "link": invitation_link(inv, _link_for(request)) if inv.status_label == "open" else "",
        }
        for inv in study.invitations.select_related("reviewer")
    ]
    return render(
        request,
        "studies/owner/invitations.html",
        {
            "study": study,
            "form": form,
            "upload": upload,
            "rows": rows,
            "problems": problems,
            "staged": staged,
            "study_state": study_status(study),
        },
        status=400 if problems or form.errors else 200,
    )


@login_required
@require_POST
def invitations_upload(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    if refused_as_imported(request, study, "invites no reviewers"):
        return redirect("studies:study_invitations", study.slug)
    upload = InvitationUploadForm(request.POST, request.FILES)
    if not upload.is_valid():
        problems = [str(e) for e in upload.non_field_errors()] or ["choose a CSV or JSONL file"]
        return _invitations_page(request, study, InvitationForm(), upload, problems)
    try:
        kept = upload_from_form(study=study, cleaned=upload.cleaned_data, actor=request.user)
    except UploadGone as exc:
        return _invitations_page(request, study, InvitationForm(), upload, [str(exc)])
    data, name = bytes(kept.data), kept.name
    valid, problems = invitations_read(study=study, data=data, name=name)
    if problems and not (upload.cleaned_data["valid_only"] and valid):
        staged = {"pk": kept.pk, "name": name, "valid": len(valid)}
        return _invitations_page(request, study, InvitationForm(), upload, problems, staged)
    created, skipped = invitations_create_from_csv(
        study=study,
        data=data,
        name=name,
        actor=request.user,
        link_for=_link_for(request),
        valid_only=True,
    )
    kept.delete()
    messages.success(request, f"{counted(len(created), 'invitation')} sent.")
    if skipped:
        messages.warning(
            request, f"{counted(len(skipped), 'row')} skipped: " + "; ".join(skipped[:20])
        )
    return redirect("studies:study_invitations", study.slug)


@login_required
@require_POST
def invitation_resend(request: HttpRequest, slug: str, invitation_id: int) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    invitation = get_object_or_404(Invitation, pk=invitation_id, study=study)
    if invitation.status_label == "open":
        try:
            invitation_send(invitation=invitation, link_for=_link_for(request), reminder=True)
        except ImportedStudyRefused as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"Reminder sent to {invitation.email}.")
    else:
        messages.error(
            request, f"The invitation to {invitation.email} is {invitation.status_label}."
        )
    return redirect("studies:study_invitations", study.slug)


# --------------------------------------------------------------------------- assignment


def _preview_tables(study: Study, job: JobRun) -> dict[str, Any]:
    """The finished preview's tables and plots, and whether it is still current."""
    from ..analysis.assignment_plots import assignment_figures  # matplotlib: only when drawn

    params = job.params
    plan = assignment_plan(
        study=study,
        seed=params.get("seed"),
        mode=params.get("mode", "keep"),
        extra_load=params.get("extra_load", False),
    )
    summary = params.get("summary") or {}
    context: dict[str, Any] = {
        "stale": plan.fingerprint != params.get("fingerprint"),
        "summary": summary,
        "figures": assignment_figures(summary) if summary.get("reviewers") else [],
    }
    share = (params.get("objective") or {}).get("first_choice_share")
    context["first_choice_percent"] = None if share is None else round(100 * share)
    # A preview from before remedies were stored offers every one, as it did then.
    context["remedies"] = params.get("remedies") or [
        "topics",
        "named_reviewer",
        "unapproved",
        "reviewers",
        "load",
        "reviews",
    ]
    return context


@login_required
@require_http_methods(["GET", "POST"])
def assignment_preview_view(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=role_by_method(request))
    form = AssignmentPreviewForm(request.POST or None)
    if request.method == "POST" and refused_as_imported(request, study, "has no assignment"):
        return redirect("studies:assignment_preview", study.slug)
    if request.method == "POST" and form.is_valid():
        running = job_active(study=study, kind=ASSIGNMENT_JOB)
        if running is None:
            running = assignment_preview_enqueue(
                study=study,
                seed=form.cleaned_data["seed"],
                mode=form.cleaned_data["mode"],
                extra_load=form.cleaned_data["extra_load"],
                actor=request.user,
            )
        else:
            messages.info(request, "A preview is already running: here is its progress.")
        return redirect(f"{request.path}?job={running.pk}")
    # The preview asked for, else the newest one; the shared progress partial polls it.
    job_id = request.GET.get("job", "")
    job = (
        get_object_or_404(JobRun, pk=int(job_id), study=study, kind=ASSIGNMENT_JOB)
        if job_id.isdigit()
        else job_latest(study=study, kind=ASSIGNMENT_JOB)
    )
    if job is not None:
        job_mark_if_lost(job=job)
    context: dict[str, Any] = {
        "study": study,
        "form": form,
        "job": job,
        "n_live": study.assignments.exclude(status="withdrawn").count(),
        "n_submitted": study.assignments.filter(status="submitted").count(),
        "n_approved": study.reviewers.filter(screening="approved", dropped_at__isnull=True).count(),
    }
    if job is not None and job.status == JobRun.Status.DONE and "pairs" in job.params:
        context.update(_preview_tables(study, job))
    return render(request, "studies/owner/assignment.html", context)


@login_required
@require_POST
def assignment_commit_view(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    job_id = request.POST.get("job", "")
    job = get_object_or_404(
        JobRun, pk=int(job_id) if job_id.isdigit() else 0, study=study, kind="assignment"
    )
    try:
        summary = assignment_commit(
            study=study, job=job, actor=request.user, link_for=_link_for(request)
        )
    except (RecruitmentError, ImportedStudyRefused) as exc:
        messages.error(request, str(exc))
        return redirect(reverse("studies:assignment_preview", args=[study.slug]) + f"?job={job.pk}")
    messages.success(
        request,
        f"Assignment committed: {summary['created']} new, {summary['restored']} restored, "
        f"{summary['withdrawn']} withdrawn"
        + (f"; {summary['gold']} of them gold items." if summary.get("gold") else "."),
    )
    if not study.is_open_to_reviewers():
        messages.warning(
            request,
            "The study is not open for review yet: reviewers see no assignment and get no "
            "mail until you open it.",
        )
        return redirect("studies:study_open", study.slug)
    return redirect("studies:study_progress", study.slug)


# --------------------------------------------------------------------------- pair tasks


@login_required
@require_http_methods(["GET", "POST"])
def pair_tasks_view(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=role_by_method(request))
    if request.method == "POST" and refused_as_imported(request, study, "has no pair tasks"):
        return redirect("studies:pair_tasks", study.slug)
    form = PairTaskCreateForm(request.POST or None, study=study)
    problems: list[str] = []
    if request.method == "POST" and form.is_valid():
        n, problems = pair_tasks_create(
            study=study,
            per_reviewer=form.cleaned_data["per_reviewer"],
            condition_a=form.cleaned_data["condition_a"],
            condition_b=form.cleaned_data["condition_b"],
            seed=form.cleaned_data["seed"],
            actor=request.user,
        )
        if n:
            messages.success(request, f"Created {counted(n, 'pair task')}.")
        elif not problems:
            messages.error(
                request,
                "Created no pair task: the study has no approved reviewer to give pairs "
                "to (study members are never given any).",
            )
        if not problems:
            return redirect("studies:pair_tasks", study.slug)
    return _pair_tasks_page(request, study, form, PairTaskUploadForm(), problems)


def _pair_tasks_page(
    request: HttpRequest, study: Study, form: Any, upload: Any, problems: list[str]
) -> HttpResponse:
    tasks = (
        PairTask.objects.filter(study=study)
        .select_related("reviewer", "idea_a__topic", "idea_b")
        .prefetch_related("idea_a__memberships", "idea_b__memberships", "judgments")
        .order_by("reviewer__pseudonym", "pk")
    )
    rows = [
        {
            "task": t,
            "a": next((m.external_id for m in t.idea_a.memberships.all()), t.idea_a_id),
            "b": next((m.external_id for m in t.idea_b.memberships.all()), t.idea_b_id),
            "judgments": {j.dimension: j.winner for j in t.judgments.all()},
        }
        for t in tasks
    ]
    return render(
        request,
        "studies/owner/pair_tasks.html",
        {"study": study, "form": form, "upload": upload, "rows": rows, "problems": problems},
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def pair_tasks_upload_view(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    if refused_as_imported(request, study, "has no pair tasks"):
        return redirect("studies:pair_tasks", study.slug)
    upload = PairTaskUploadForm(request.POST, request.FILES)
    problems = ["choose a CSV file"]
    if upload.is_valid():
        n, problems = pair_tasks_upload(
            study=study, data=upload.cleaned_data["file"].read(), actor=request.user
        )
        if not problems:
            messages.success(request, f"Created {counted(n, 'pair task')} from the file.")
            return redirect("studies:pair_tasks", study.slug)
    response = _pair_tasks_page(request, study, PairTaskCreateForm(study=study), upload, problems)
    response.status_code = 400
    return response
