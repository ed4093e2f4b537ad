"""Participant platforms: the public arrival link and the completion step a participant
reaches (reviewer side), and the owner's participants page with the link's settings,
the participant list and the bulk files for the platform.

The platform ids are personal data: the participants page and the bulk files are the
owner's alone (editors and viewers see the settings and counts, never the ids). The
arrival page tells a participant only about their own place.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ideareview.throttle import client_address, token_blocked, token_failed

from ..analysis.rounding import counted
from ..models import Reviewer, Study
from ..services.audit import audit
from ..services.errors import ImportedStudyRefused
from ..services.invitations import RecruitmentError
from ..services.platform import (
    COOKIE_SALT,
    ArrivalRefused,
    NoPlatformLink,
    completion_redirect_url,
    platform_arrival_url,
    platform_arrive,
    platform_complete,
    platform_cookie_name,
    platform_decisions,
    platform_file,
    platform_link_for,
    platform_link_set,
    platform_participant_rows,
    platform_places_held,
    platform_places_sweep,
)
from ..study_forms import PlatformLinkForm
from .study import EDITOR, OWNER, get_study_for_member, refused_as_imported, role_by_method

# The resume cookie outlives any sensible abandonment time; the place's release ends it.
COOKIE_MAX_AGE = 14 * 24 * 3600


@require_GET
def platform_arrive_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Where the platform sends its participants: a place given or resumed, then the
    reviewer's next step (consent, profile, their reviews)."""
    study = get_object_or_404(Study, slug=slug)
    address = client_address(request)
    if token_blocked(address=address):
        return render(request, "studies/reviewer/rate_limited.html", {"what": "links"}, status=429)
    cookie = request.get_signed_cookie(
        platform_cookie_name(study), default="", salt=COOKIE_SALT, max_age=COOKIE_MAX_AGE
    )
    try:
        arrival = platform_arrive(study=study, query=request.GET, cookie_secret=cookie or "")
    except ArrivalRefused as exc:
        # Refusals are counted like bad invitation links, so ids cannot be probed in bulk.
        token_failed(address=address)
        if isinstance(exc, NoPlatformLink):
            raise Http404("no such study link") from exc
        return render(
            request,
            "studies/reviewer/platform_refused.html",
            {"study": study, "message": str(exc)},
            status=403,
        )
    login(request, arrival.user, backend=settings.AUTHENTICATION_BACKENDS[0])
    reviewer = arrival.reviewer
    step = reviewer.next_step()
    if step == "consent":
        target = reverse("studies:reviewer_consent", args=[reviewer.pk])
    elif step == "profile":
        target = reverse("studies:reviewer_profile", args=[reviewer.pk])
    else:
        target = reverse("studies:reviewer_home")
    response = redirect(target)
    response.set_signed_cookie(
        platform_cookie_name(study),
        arrival.participant.secret,
        salt=COOKIE_SALT,
        max_age=COOKIE_MAX_AGE,
        httponly=True,
        samesite="Lax",
        secure=request.is_secure(),
        path=reverse("studies:platform_arrive", args=[study.slug]),
    )
    return response


@login_required(login_url="studies:reviewer_login")
@require_POST
def platform_complete_view(request: HttpRequest, reviewer_id: int) -> HttpResponse:
    """Finish: back to the platform's completion URL, carrying the study's code."""
    reviewer = get_object_or_404(Reviewer, pk=reviewer_id, user=request.user)
    try:
        url = platform_complete(reviewer=reviewer)
    except RecruitmentError as exc:
        messages.error(request, str(exc))
        return redirect("studies:reviewer_home")
    return HttpResponseRedirect(url)


@login_required
@require_http_methods(["GET", "POST"])
def study_platform(request: HttpRequest, slug: str) -> HttpResponse:
    """The link's settings, the link to copy, and (owners) the participants."""
    study = get_study_for_member(request, slug, role=role_by_method(request))
    if request.method == "POST" and refused_as_imported(
        request, study, "takes no participants from a platform"
    ):
        return redirect("studies:study_platform", slug=study.slug)
    link = platform_link_for(study)
    form = PlatformLinkForm(request.POST or None, instance=link)
    if not study.may.edit:  # type: ignore[attr-defined]
        for field in form.fields.values():
            field.disabled = True
    error = ""
    if request.method == "POST" and form.is_valid():
        try:
            platform_link_set(study=study, data=form.cleaned_data, actor=request.user)
        except RecruitmentError as exc:
            error = str(exc)
        else:
            messages.success(request, "Platform link saved.")
            return redirect("studies:study_platform", slug=study.slug)
    owner = bool(study.may.own)  # type: ignore[attr-defined]
    base = request.build_absolute_uri(reverse("studies:platform_arrive", args=[study.slug]))
    return render(
        request,
        "studies/owner/platform.html",
        {
            "study": study,
            "form": form,
            "error": error,
            "link": link,
            "arrival_url": platform_arrival_url(link, base),
            "completion_url": completion_redirect_url(link) if link.completion_url else "",
            "held": platform_places_held(study=study),
            "rows": platform_participant_rows(study=study) if owner else None,
            "decisions": platform_decisions(study=study) if owner else None,
        },
        status=400 if error or form.errors else 200,
    )


@login_required
@require_POST
def platform_sweep_view(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    try:
        n = platform_places_sweep(study=study)
    except ImportedStudyRefused as exc:
        messages.error(request, str(exc))
        return redirect("studies:study_platform", slug=study.slug)
    messages.success(request, f"Released {counted(n, 'idle place')}.")
    return redirect("studies:study_platform", slug=study.slug)


PLATFORM_FILES = {
    "approve": "approve.txt",
    "reject": "reject.csv",
    "bonus": "bonus.csv",
}


@login_required
@require_GET
def platform_file_view(request: HttpRequest, slug: str, kind: str) -> HttpResponse:
    """A bulk file for the platform: the owner's only (it names participants by their
    platform ids)."""
    study = get_study_for_member(request, slug, role=OWNER)
    if kind not in PLATFORM_FILES:
        return HttpResponse("No such file.", status=404, content_type="text/plain")
    body = platform_file(study=study, kind=kind)
    audit(study=study, actor=request.user, verb="platform_file_exported", kind=kind)
    content_type = "text/plain" if kind == "approve" else "text/csv"
    response = HttpResponse(body, content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-{PLATFORM_FILES[kind]}"'
    return response
