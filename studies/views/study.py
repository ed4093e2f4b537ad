"""Owner-facing views: thin, each starts with a permission-checked getter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ..forms import ReviewImportForm
from ..http import is_htmx
from ..import_samples import review_columns
from ..importers import ImportFailed, format_quality_summary
from ..job_kinds import JOB_KINDS
from ..jobs import (
    JobNotRetryable,
    job_active,
    job_cancel,
    job_latest,
    job_mark_if_lost,
    job_retry,
)
from ..models import ImportBatch, JobRun, Study, StudyMember, StudyReport
from ..overview import next_step, study_steps
from ..report_formats import REPORT_FORMATS, document_names, report_format
from ..services.audit import audit
from ..services.errors import ImportedStudyRefused
from ..services.study import (
    SetupError,
    is_researcher,
    source_warnings,
    study_create,
    study_delete,
    study_delete_plan,
    study_slug_new,
    study_source_mentions,
)
from ..services.transfer import (
    import_row_estimate,
    reviews_import,
    reviews_import_enqueue,
    reviews_parse,
)
from ..status import imported_review_count, refuse_if_imported, study_status
from ..storage import report_file_open
from ..study_forms import StudyCreateForm
from ..tasks import report_enqueue
from .reviewer import landing_page


def report_file_names(data: dict) -> set[str]:
    """The file names a built report may serve: its documents (`REPORT_FORMATS`) and the
    tables it lists under files.csv, so a table added to the report is downloadable
    without a second list to keep in step."""
    files = data.get("files") or {}
    tables = {str(name) for name in files.get("csv") or [] if "/" not in str(name)}
    return document_names() | tables


def report_downloads(data: dict) -> list[dict[str, Any]]:
    """The report page's download links, one per format the report made (`REPORT_FORMATS`
    order), with the reason for one it could not make."""
    files = data.get("files") or {}
    return [
        {"format": f, "made": bool(files.get(f.key)), "reason": files.get(f"{f.key}_reason")}
        for f in REPORT_FORMATS
        if files.get(f.key) or files.get(f"{f.key}_reason")
    ]


def _user_id(request: HttpRequest) -> int:
    """The logged-in user's id (views are login_required; 0 matches nobody)."""
    return int(request.user.pk or 0)


@dataclass(frozen=True)
class StudyPermissions:
    """What the member may do on a study's pages, for the templates (as `study.may`).

    Pages show an action only where the member may take it, so nobody is offered a
    button that answers 403; the templates read these flags and never compare roles.
    """

    role: str
    edit: bool  # editor or owner: every change to the study
    own: bool  # owner: the team, closing, deleting, freezing the plan

    @classmethod
    def of(cls, role: str) -> StudyPermissions:
        return cls(
            role=role,
            edit=StudyMember.role_at_least(role, StudyMember.Role.EDITOR),
            own=StudyMember.role_at_least(role, StudyMember.Role.OWNER),
        )


def get_study_for_member(request: HttpRequest, slug: str, *, role: str) -> Study:
    """The study if the user is on its team with at least `role` (viewer < editor < owner).

    404, not 403, for studies whose team you are not on: their existence is not
    disclosed. A member whose role is too low gets 403: they know the study exists.
    The member's role is left on the study as `member_role`, and what it allows as
    `may` (`StudyPermissions`), for the templates.
    """
    # One statement: the membership row that lets the user in also says the role (a
    # user is a member of a study at most once).
    study = get_object_or_404(
        Study.objects.select_related("review_form")
        .filter(slug=slug, members__user_id=_user_id(request))
        .annotate(joined_role=F("members__role"))
    )
    member_role = study.joined_role  # type: ignore[attr-defined]
    if not StudyMember.role_at_least(member_role, role):
        raise PermissionDenied(f"This needs the {role} role on the study; you are {member_role}.")
    study.member_role = member_role  # type: ignore[attr-defined]
    study.may = StudyPermissions.of(member_role)  # type: ignore[attr-defined]
    return study


# The minimal role a view needs (docs/architecture.md, "Apps and layers"): reading a study's pages needs
# viewer, changing anything needs editor, and roles, closing and deleting need owner.
VIEWER = StudyMember.Role.VIEWER
EDITOR = StudyMember.Role.EDITOR
OWNER = StudyMember.Role.OWNER


def role_by_method(request: HttpRequest) -> str:
    """For views that show a form and take it: reading needs viewer, sending editor."""
    return VIEWER if request.method in ("GET", "HEAD") else EDITOR


def refused_as_imported(request: HttpRequest, study: Study, what: str) -> bool:
    """A study of imported reviews was reviewed elsewhere: it `what` (invitations,
    reminders, an assignment, payments...). Says the services' reason and returns True
    when the request is refused, before any form is read; the pages show the same reason
    instead of the controls."""
    try:
        refuse_if_imported(study, what)
    except ImportedStudyRefused as exc:
        messages.error(request, str(exc))
        return True
    return False


def get_study_for_owner(request: HttpRequest, slug: str) -> Study:
    """The study if the user is one of its owners (roles, closing, deleting)."""
    return get_study_for_member(request, slug, role=OWNER)


@login_required
@require_GET
def study_list(request: HttpRequest) -> HttpResponse:
    """The user's studies; a reviewer on no study team, who can create none, goes to
    their reviews instead of an empty researchers' page."""
    page = landing_page(request.user)
    if page != "studies:study_list":
        return redirect(page)
    studies = (
        Study.objects.filter(members__user_id=_user_id(request))
        .annotate(my_role=F("members__role"))
        .order_by("-created_at")
    )
    return render(
        request,
        "studies/study_list.html",
        {"studies": studies, "may_create": is_researcher(request.user)},
    )


@login_required
@require_http_methods(["GET", "POST"])
def study_new(request: HttpRequest) -> HttpResponse:
    """Researchers (the studies.add_study permission) create studies; others get 403."""
    if not is_researcher(request.user):
        raise PermissionDenied("Only researchers may create studies; ask an administrator.")
    form = StudyCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            study = study_create(
                owner=request.user,
                slug=study_slug_new(data["slug"]),
                title=data["title"],
                description=data["description"],
                form=data["review_form"],
                conditions=data["conditions"],
                baseline_condition=data["baseline_condition"],
                topics=data["topics"],
            )
        except ValueError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Study “{study.title}” created. Next: import its ideas.")
            for warning in source_warnings(study_source_mentions(study)):
                messages.warning(request, warning)
            return redirect("studies:study_detail", slug=study.slug)
    return render(
        request, "studies/study_new.html", {"form": form}, status=400 if form.errors else 200
    )


@login_required
@require_GET
def study_detail(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    batch = ImportBatch.objects.filter(study=study).first()
    steps = study_steps(study)
    study_state = study_status(study)
    # Ideas left out by topic matching are not part of the study: count them apart, so
    # the figures match the topic-matching page and the assignment.
    conditions = [
        {
            "key": c.key,
            "kind": c.get_kind_display(),
            "generating_model": c.generating_model,
            "ideas": c.memberships.filter(idea__exclusion__isnull=True).count(),
        }
        for c in study.conditions.all()
    ]
    n_left_out = study.ideas.filter(exclusion__isnull=False).count()
    return render(
        request,
        "studies/study_detail.html",
        {
            "study": study,
            "batch": batch,
            "quality_lines": _import_lines(batch),
            "conditions": conditions,
            "topics": study.topics.all(),
            "n_ideas": study.ideas.count() - n_left_out,
            "n_left_out": n_left_out,
            "n_reviews": study.reviews.filter(status="submitted").count(),
            "n_flagged": study.reviews.exclude(flags=[]).count(),
            # Only a review file's reviews can carry import flags.
            "n_imported": imported_review_count(study),
            "report": StudyReport.objects.filter(study=study).first(),
            "steps": steps,
            "next_step": next_step(steps),
            "study_state": study_state,
        },
    )


def _import_lines(batch: ImportBatch | None) -> list[str]:
    """The last import's summary as lines; idea imports keep a shorter summary than reviews."""
    if batch is None:
        return []
    if batch.kind == "ideas":
        s = batch.summary
        return [
            f"ideas imported: {s.get('ideas', 0)}",
            f"  rows with problems skipped: {s.get('skipped_rows', 0)}",
            f"  ideas missing sections: {s.get('incomplete', 0)}",
            *(f"  {line}" for line in s.get("errors", [])[:20]),
        ]
    return format_quality_summary(batch.summary)


@login_required
@require_http_methods(["GET", "POST"])
def study_delete_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Owners only: the page says what goes, the POST needs the slug typed again."""
    study = get_study_for_member(request, slug, role=OWNER)
    error = ""
    if request.method == "POST":
        try:
            study_delete(study=study, confirm=request.POST.get("confirm", ""), actor=request.user)
        except SetupError as exc:
            error = str(exc)
        else:
            messages.success(request, f"Study “{study.title}” deleted.")
            return redirect("studies:study_list")
    return render(
        request,
        "studies/study_delete.html",
        {"study": study, "counts": study_delete_plan(study), "error": error},
        status=400 if error else 200,
    )


@login_required
@require_GET
def study_export_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Owners only: the whole study as a study file (it names reviewers and authors), the
    file `study_import` reads back, here or on another server."""
    from ..services.study import study_export

    study = get_study_for_member(request, slug, role=OWNER)
    body = study_export(study=study)
    audit(study=study, actor=request.user, verb="study_exported", bytes=len(body))
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-study.json"'
    return response


@login_required
@require_http_methods(["GET", "POST"])
def reviews_import_page(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=role_by_method(request))
    form = ReviewImportForm(request.POST or None, request.FILES or None)
    summary_lines: list[str] = []
    problems: list[str] = []
    job = job_latest(study=study, kind="import")
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        titles = data.get("titles")
        upload = {
            "fmt": data["format"],
            "reviews": data["reviews"].read(),
            "reviews_name": data["reviews"].name,
            "titles": titles.read() if titles else None,
            "titles_name": titles.name if titles else "",
            "mapping": data["mapping"],
            "human_conditions": data["human_conditions"],
        }
        if (
            import_row_estimate(upload["reviews"], upload["reviews_name"])
            > settings.IMPORT_JOB_MIN_ROWS
        ):
            job = job_active(study=study, kind="import") or reviews_import_enqueue(
                study=study, actor=request.user, **upload
            )
            return redirect("studies:reviews_import_page", slug=study.slug)
        try:
            with transaction.atomic():
                parsed = reviews_parse(study=study, **upload)
                summary = reviews_import(
                    study=study, parsed=parsed, kind=data["format"], actor=request.user
                )
        except ImportFailed as exc:
            problems = [str(p) for p in exc.problems]
        else:
            summary_lines = format_quality_summary(summary)
            messages.success(request, "Import finished.")
    if job is not None and job.status == JobRun.Status.DONE and not summary_lines:
        summary_lines = format_quality_summary(job.params.get("summary") or {})
    return render(
        request,
        "studies/reviews_import.html",
        {
            "study": study,
            "form": form,
            "summary_lines": summary_lines,
            "problems": problems,
            "columns": review_columns(study.form_definition()),
            "job": job,
            "job_rows": settings.IMPORT_JOB_MIN_ROWS,
        },
        status=400 if problems or (request.method == "POST" and form.errors) else 200,
    )


@login_required
@require_GET
def study_report(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    report = StudyReport.objects.filter(study=study).first()
    job = job_latest(study=study, kind="report")
    html = ""
    document = report_file_open(report.directory, "report.html") if report else None
    if document is not None:
        with document:
            html = _report_body(document.read().decode())
    return render(
        request,
        "studies/study_report.html",
        {
            "study": study,
            "report": report,
            "downloads": report_downloads(report.data) if report else [],
            "job": job,
            "report_body": html,
        },
    )


def _report_body(document: str) -> str:
    """The self-contained file's body, embedded in the app's page (same plots, same text);
    its styles come from static/css/report.css there."""
    start = document.find("<body>")
    end = document.rfind("</body>")
    return document[start + len("<body>") : end] if start >= 0 else document


@login_required
@require_POST
def study_report_build(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    job = job_active(study=study, kind="report")
    if job is None:
        job = report_enqueue(study=study, actor=request.user)
    if is_htmx(request):
        return render(request, "studies/_job.html", {"study": study, "job": job})
    return redirect("studies:study_report", slug=study.slug)


def _job_for_member(
    request: HttpRequest, slug: str, job_id: int, *, role: str
) -> tuple[Study, JobRun]:
    study = get_study_for_member(request, slug, role=role)
    return study, get_object_or_404(JobRun, pk=job_id, study=study, kind__in=list(JOB_KINDS))


def _job_answer(request: HttpRequest, study: Study, job: JobRun) -> HttpResponse:
    """The job's partial for htmx (the page reloads once the job has ended, to show its
    result), or the page that shows the job."""
    if not is_htmx(request):
        return redirect(JOB_KINDS[job.kind].page, study.slug)
    response = render(request, "studies/_job.html", {"study": study, "job": job})
    if not job.is_active and request.method == "GET":
        response["HX-Refresh"] = "true"
    return response


@login_required
@require_GET
def job_status(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    """The one status endpoint that every job page polls."""
    study, job = _job_for_member(request, slug, job_id, role=VIEWER)
    job_mark_if_lost(job=job)
    return _job_answer(request, study, job)


@login_required
@require_POST
def job_cancel_view(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    study, job = _job_for_member(request, slug, job_id, role=EDITOR)
    if job_cancel(job=job):
        messages.info(request, f"{job.label}: cancelled.")
    job.refresh_from_db()
    return _job_answer(request, study, job)


@login_required
@require_POST
def job_retry_view(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    study, job = _job_for_member(request, slug, job_id, role=EDITOR)
    try:
        job_retry(job=job)
    except JobNotRetryable as exc:
        messages.error(request, f"{job.label}: {exc}.")
    job.refresh_from_db()
    return _job_answer(request, study, job)


@login_required
@require_GET
def study_report_file(request: HttpRequest, slug: str, name: str) -> FileResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    report = StudyReport.objects.filter(study=study).first()
    if report is None or name not in report_file_names(report.data):
        raise Http404("no such report file")
    document = report_file_open(report.directory, name)
    if document is None:
        raise Http404("no such report file")
    filename = f"{study.slug}-package.zip" if name == "package.zip" else name
    fmt = report_format(name)
    response = FileResponse(
        document, as_attachment=fmt is None or fmt.attachment, filename=filename
    )
    if name == "report.html":
        # The self-contained document keeps its styles and inline SVG plots inside; it
        # runs no script and loads nothing.
        response["Content-Security-Policy"] = REPORT_DOCUMENT_POLICY
    return response


REPORT_DOCUMENT_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
