"""Researcher accounts' pages: the invitation link, self-service sign-up, password reset
(Django's views with our templates and limits), the administrators' researcher list."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse_lazy
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from ideareview.throttle import (
    client_address,
    rate_limit_hit,
    token_blocked,
    token_failed,
)

from .forms import DeactivateForm, InviteForm, PasswordPairForm, SignUpRequestForm
from .models import ResearcherInvitation, SignUpRequest
from .roles import researchers
from .services import (
    AccountError,
    researcher_deactivate,
    researcher_invitation_accept,
    researcher_invitation_accept_as,
    researcher_invitation_check,
    researcher_invitation_create,
    researcher_invitation_revoke,
    researcher_owned,
    researcher_reactivate,
    signup_request_approve,
    signup_request_create,
    signup_request_reject,
)

# (attempts, window in seconds) per client address, and per address asked about
SIGNUP_LIMIT = (5, 3600)
RESET_ADDRESS_LIMIT = (10, 900)
RESET_EMAIL_LIMIT = (3, 3600)

STATUS_FOR = {"invalid": 400, "expired": 410, "used": 410, "has_account": 409, "refused": 400}


def _too_many(request: HttpRequest, what: str) -> HttpResponse:
    return render(request, "accounts/rate_limited.html", {"what": what}, status=429)


def _administrator(request: HttpRequest) -> None:
    user = request.user
    if not (user.is_active and (user.is_staff or user.is_superuser)):
        raise PermissionDenied("Only administrators manage researchers.")


# --------------------------------------------------------------------------- invitation


@require_http_methods(["GET", "POST"])
def invitation_open(request: HttpRequest, token: str) -> HttpResponse:
    address = client_address(request)
    if token_blocked(address=address):
        return _too_many(request, "invitation links")
    try:
        invitation = researcher_invitation_check(token)
    except AccountError as exc:
        token_failed(address=address)  # links cannot be probed in bulk
        return render(
            request,
            "accounts/invitation_error.html",
            {"message": str(exc)},
            status=STATUS_FOR[exc.kind],
        )
    form = PasswordPairForm(request.POST or None, email=invitation.email)
    error = ""
    if request.method == "POST":
        try:
            if request.user.is_authenticated:
                researcher_invitation_accept_as(token=token, user=request.user)
                messages.success(request, "You are a researcher now: you may create studies.")
                return redirect("studies:study_list")
            if form.is_valid():
                user = researcher_invitation_accept(
                    token=token,
                    first_name=form.cleaned_data["first_name"],
                    last_name=form.cleaned_data["last_name"],
                    password=form.cleaned_data["password1"],
                )
                login(request, user, backend=settings.AUTHENTICATION_BACKENDS[0])
                messages.success(request, "Welcome: your researcher account is ready.")
                return redirect("studies:study_list")
        except AccountError as exc:
            if exc.kind in {"used", "expired", "invalid"}:
                return render(
                    request,
                    "accounts/invitation_error.html",
                    {"message": str(exc)},
                    status=STATUS_FOR[exc.kind],
                )
            error = str(exc)
    return render(
        request,
        "accounts/invitation.html",
        {"invitation": invitation, "form": form, "error": error},
        status=400 if form.errors or error else 200,
    )


# --------------------------------------------------------------------------- sign-up


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if not settings.IDEAREVIEW_SIGNUP:
        raise Http404("Sign-up is not open on this server.")
    form = SignUpRequestForm(request.POST or None)
    if request.method == "POST":
        limit, window = SIGNUP_LIMIT
        if rate_limit_hit(f"signup:{client_address(request)}", limit=limit, window=window):
            return _too_many(request, "sign-up requests")
        if form.is_valid():
            data = form.cleaned_data
            signup_request_create(
                email=data["email"],
                first_name=data["first_name"],
                last_name=data["last_name"],
                password=data["password1"],
                note=data["note"],
            )
            # The same page whether or not the address has an account.
            return redirect("accounts:signup_sent")
    return render(
        request, "accounts/signup.html", {"form": form}, status=400 if form.errors else 200
    )


def signup_sent(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/signup_sent.html")


# --------------------------------------------------------------------------- password reset


class PasswordReset(auth_views.PasswordResetView):
    """Django's reset (the same answer whether or not the address has an account; the
    token is single-use because it hashes the password and last login), limited per
    client and per address asked about. Over the address's limit nothing is sent, and
    the answer is still the same."""

    template_name = "accounts/password_reset.html"
    email_template_name = "accounts/password_reset_email.txt"
    subject_template_name = "accounts/password_reset_subject.txt"
    success_url = reverse_lazy("accounts:password_reset_done")
    extra_email_context = {"base_url": settings.IDEAREVIEW_BASE_URL}

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        limit, window = RESET_ADDRESS_LIMIT
        if rate_limit_hit(f"reset:{client_address(request)}", limit=limit, window=window):
            return _too_many(request, "password reset requests")
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: Any) -> HttpResponse:
        email = form.cleaned_data["email"].strip().casefold()
        limit, window = RESET_EMAIL_LIMIT
        if rate_limit_hit(f"reset-email:{email}", limit=limit, window=window):
            return redirect(self.get_success_url())
        return super().form_valid(form)


password_reset = PasswordReset.as_view()
password_reset_done = auth_views.PasswordResetDoneView.as_view(
    template_name="accounts/password_reset_done.html"
)
password_reset_confirm = auth_views.PasswordResetConfirmView.as_view(
    template_name="accounts/password_reset_confirm.html",
    success_url=reverse_lazy("accounts:password_reset_complete"),
)
password_reset_complete = auth_views.PasswordResetCompleteView.as_view(
    template_name="accounts/password_reset_complete.html"
)


# --------------------------------------------------------------------------- administrators


@login_required
@require_http_methods(["GET", "POST"])
def researcher_list(request: HttpRequest) -> HttpResponse:
    """Researchers, sign-ups waiting for approval, open invitations; and the invite form
    (whose answer shows the link, to send by other means if mail fails)."""
    _administrator(request)
    form = InviteForm(request.POST or None)
    link = ""
    if request.method == "POST" and form.is_valid():
        try:
            invitation, link = researcher_invitation_create(
                email=form.cleaned_data["email"], invited_by=request.user
            )
        except AccountError as exc:
            form.add_error("email", str(exc))
        else:
            messages.success(request, f"Invitation sent to {invitation.email}.")
            form = InviteForm()
    context = {
        "form": form,
        "link": link,
        "researchers": researchers().order_by("-is_active", "username"),
        "pending": SignUpRequest.objects.filter(status=SignUpRequest.Status.PENDING)
        .select_related("user")
        .order_by("created_at"),
        "invitations": ResearcherInvitation.objects.filter(
            accepted_at__isnull=True,
            revoked_at__isnull=True,
            created_at__gt=timezone.now()
            - timedelta(days=settings.IDEAREVIEW_RESEARCHER_INVITATION_DAYS),
        ).select_related("invited_by"),
        "signup_open": settings.IDEAREVIEW_SIGNUP,
    }
    return render(request, "accounts/researchers.html", context, status=400 if form.errors else 200)


def _pending(request_id: int) -> SignUpRequest:
    return get_object_or_404(SignUpRequest.objects.select_related("user"), pk=request_id)


@login_required
@require_POST
def signup_decide(request: HttpRequest, request_id: int) -> HttpResponse:
    _administrator(request)
    row = _pending(request_id)
    try:
        if request.POST.get("decision") == "approve":
            signup_request_approve(request_row=row, actor=request.user)
            messages.success(request, f"{row.user.get_username()} is a researcher now.")
        elif request.POST.get("decision") == "reject":
            signup_request_reject(request_row=row, actor=request.user)
            messages.success(request, f"{row.user.get_username()}'s request was rejected.")
        else:
            messages.error(request, "Choose approve or reject.")
    except AccountError as exc:
        messages.error(request, str(exc))
    return redirect("accounts:researchers")


@login_required
@require_POST
def invitation_revoke(request: HttpRequest, invitation_id: int) -> HttpResponse:
    _administrator(request)
    invitation = get_object_or_404(ResearcherInvitation, pk=invitation_id)
    researcher_invitation_revoke(invitation=invitation)
    messages.success(request, f"The invitation of {invitation.email} no longer works.")
    return redirect("accounts:researchers")


@login_required
@require_http_methods(["GET", "POST"])
def researcher_deactivate_view(request: HttpRequest, user_id: int) -> HttpResponse:
    """What the researcher owns, and who takes it over; deactivating changes nothing
    until the form is sent."""
    _administrator(request)
    user = get_object_or_404(researchers(), pk=user_id)
    candidates = researchers().filter(is_active=True).exclude(pk=user.pk).order_by("username")
    form = DeactivateForm(request.POST or None, candidates=candidates)
    if request.method == "POST" and form.is_valid():
        try:
            handed = researcher_deactivate(
                user=user, successor=form.cleaned_data["successor"], actor=request.user
            )
        except AccountError as exc:
            form.add_error("successor", str(exc))
        else:
            messages.success(
                request,
                f"{user.get_username()} is deactivated; {handed} stud(ies) handed over.",
            )
            return redirect("accounts:researchers")
    return render(
        request,
        "accounts/researcher_deactivate.html",
        {"target": user, "owned": researcher_owned(user), "form": form},
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def researcher_reactivate_view(request: HttpRequest, user_id: int) -> HttpResponse:
    _administrator(request)
    user = get_object_or_404(get_user_model(), pk=user_id, is_active=False)
    researcher_reactivate(user=user)
    messages.success(request, f"{user.get_username()} may log in again.")
    return redirect("accounts:researchers")


def sso_page(request: HttpRequest, kind: str) -> HttpResponse:
    """The pages allauth's sign-on flow redirects to by name: cancelled, or refused."""
    reason = {
        "cancelled": "The sign-in was cancelled.",
        "inactive": "This account is inactive.",
    }.get(kind, "Signing in this way needs an email address your provider confirms.")
    return render(request, "accounts/sso_refused.html", {"reason": reason}, status=403)
