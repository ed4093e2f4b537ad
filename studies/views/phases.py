"""The link between a study and its earlier phase: see the match, link, unlink.

Editors and owners only, of both studies: the page offers only studies on whose team the
user is an editor or owner, and answers 404 for any other. docs/phases.md describes the
link and the comparison the report then adds.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from ..models import Study
from ..phase_links import (
    PhaseLinkError,
    may_link,
    phase_candidates,
    phase_link,
    phase_link_check,
    phase_unlink,
)
from ..services.plans import study_plan
from .study import EDITOR, get_study_for_member


def _earlier(request: HttpRequest, later: Study, slug: str) -> Study:
    """The proposed earlier study, if the user may link it: 404 otherwise (another team's
    study is neither shown nor confirmed to exist)."""
    for s in phase_candidates(later=later, user=request.user):
        if s.slug == slug:
            return s
    raise Http404("no such study among those you may link")


@login_required
@require_GET
def study_phases(request: HttpRequest, slug: str) -> HttpResponse:
    """The current link, the studies it could be made to, and the check of one of them."""
    study = get_study_for_member(request, slug, role=EDITOR)
    linked = study.previous_phase
    # Linked by someone on both teams: the earlier study's name is not this user's to see
    # unless they may edit it too.
    linked_shown = linked if linked is not None and may_link(linked, request.user) else None
    proposed = request.GET.get("previous", "").strip()
    check = None
    if proposed:
        check = phase_link_check(later=study, earlier=_earlier(request, study, proposed))
    elif linked_shown is not None:
        check = phase_link_check(later=study, earlier=linked_shown)
    plan = study_plan(study)
    return render(
        request,
        "studies/owner/phases.html",
        {
            "study": study,
            "linked": linked,
            "linked_shown": linked_shown,
            "candidates": phase_candidates(later=study, user=request.user),
            # Studies that name this one as their earlier phase (those the user may edit).
            "later_phases": [s for s in study.next_phases.all() if may_link(s, request.user)],
            "check": check,
            "proposed": proposed,
            "plan": plan,
        },
    )


@login_required
@require_POST
def study_phase_link(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    name = request.POST.get("previous", "").strip()
    try:
        earlier = _earlier(request, study, name)
    except Http404:
        # The same answer for a study that does not exist and one of another team.
        messages.error(request, f"Not linked: no study {name!r} among those you may link.")
        return redirect("studies:study_phases", slug=study.slug)
    try:
        check = phase_link(later=study, earlier=earlier, actor=request.user)
    except PhaseLinkError as exc:
        messages.error(request, f"Not linked: {exc}.")
        response = redirect("studies:study_phases", slug=study.slug)
        response["Location"] += f"?previous={earlier.slug}"
        return response
    messages.success(
        request,
        f"Linked: {study.slug} is the later phase of {earlier.slug} "
        f"({len(check.compared)} ideas in both). Build the report to see the comparison.",
    )
    return redirect("studies:study_phases", slug=study.slug)


@login_required
@require_POST
def study_phase_unlink(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    earlier = phase_unlink(later=study, actor=request.user)
    if earlier is None:
        messages.info(request, "The study was not linked to an earlier phase.")
    else:
        messages.success(request, "Unlinked: the next report has no phase comparison.")
    return redirect("studies:study_phases", slug=study.slug)
