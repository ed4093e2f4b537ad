"""The study's team: who is on it with which role. Everyone on the team sees it; only
owners add, change or remove members."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from ..models import StudyMember
from ..services.study import (
    NoAccountError,
    SetupError,
    member_add,
    member_remove,
    member_role_set,
)
from ..study_forms import MemberAddForm, MemberRoleForm
from ..team_accounts import member_invite
from .study import OWNER, VIEWER, get_study_for_member


@login_required
@require_http_methods(["GET", "POST"])
def study_members(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER if request.method == "GET" else OWNER)
    form = MemberAddForm(request.POST or None)
    link = ""
    if request.method == "POST" and form.is_valid():
        identifier, role = form.cleaned_data["identifier"], form.cleaned_data["role"]
        try:
            try:
                member = member_add(
                    study=study, identifier=identifier, role=role, actor=request.user
                )
            except NoAccountError as exc:
                if "@" not in identifier or not settings.IDEAREVIEW_OWNER_INVITES:
                    raise SetupError(f"{exc}. {_without_account(identifier)}") from exc
                # An address without an account: invited, joins on accepting.
                link = member_invite(study=study, email=identifier, role=role, actor=request.user)
                messages.success(
                    request, f"No account uses {identifier.strip()}: an invitation was sent."
                )
                form = MemberAddForm()
            else:
                messages.success(request, f"{member.user} added as {member.get_role_display()}.")
                return redirect("studies:study_members", slug=study.slug)
        except SetupError as exc:
            form.add_error("identifier", str(exc))
    members = study.members.select_related("user").order_by("user__username")  # type: ignore[attr-defined]
    owners = sum(1 for m in members if m.role == StudyMember.Role.OWNER)
    return render(
        request,
        "studies/study_members.html",
        {
            "study": study,
            "members": members,
            "form": form,
            "roles": StudyMember.Role.choices,
            "link": link,
            "may_invite": settings.IDEAREVIEW_OWNER_INVITES,
            "sole_owner": owners == 1,
        },
        status=400 if form.errors else 200,
    )


def _without_account(identifier: str) -> str:
    """What to do about a colleague who has no account here yet."""
    if "@" in identifier and not settings.IDEAREVIEW_OWNER_INVITES:
        return (
            "This server does not let study owners invite new researchers: ask an "
            "administrator to invite them (the Researchers page), then add them here"
        )
    return "Give their email address, or the username of an account they already have"


@login_required
@require_POST
def member_leave(request: HttpRequest, slug: str) -> HttpResponse:
    """A member leaves the team (a team's only owner hands it over first)."""
    study = get_study_for_member(request, slug, role=VIEWER)
    member = get_object_or_404(StudyMember, study=study, user=request.user)
    try:
        member_remove(member=member, actor=request.user)
    except SetupError as exc:
        messages.error(request, str(exc))
        return redirect("studies:study_members", slug=slug)
    messages.success(request, f"You left the team of {study.title}.")
    return redirect("studies:study_list")


def _member(request: HttpRequest, slug: str, member_id: int) -> StudyMember:
    study = get_study_for_member(request, slug, role=OWNER)
    return get_object_or_404(
        StudyMember.objects.select_related("user", "study"), pk=member_id, study=study
    )


@login_required
@require_POST
def member_role(request: HttpRequest, slug: str, member_id: int) -> HttpResponse:
    member = _member(request, slug, member_id)
    form = MemberRoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose owner, editor or viewer.")
    else:
        try:
            member_role_set(member=member, role=form.cleaned_data["role"], actor=request.user)
        except SetupError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"{member.user} is now {member.get_role_display()}.")
    return redirect("studies:study_members", slug=slug)


@login_required
@require_POST
def member_remove_view(request: HttpRequest, slug: str, member_id: int) -> HttpResponse:
    member = _member(request, slug, member_id)
    try:
        member_remove(member=member, actor=request.user)
    except SetupError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{member.user} removed from the team.")
        if member.user_id == request.user.pk:
            return redirect("studies:study_list")
    return redirect("studies:study_members", slug=slug)
