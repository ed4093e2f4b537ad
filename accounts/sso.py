"""Single sign-on through OpenID Connect (django-allauth), and the rule for who may come
in that way.

The rule, checked on every sign-on whose identity is not yet linked to an account:

1. The provider must vouch for the address (`email_verified`); without a verified
   address nobody is let in or linked.
2. An active account with that address (username or email, one only) is linked to the
   identity and logged in: a researcher stays a researcher, a reviewer a reviewer.
3. Otherwise a new account is made only when an open invitation names the address: it
   becomes a researcher and the invitation is used (joining the team it names, if any);
   or, with IDEAREVIEW_SIGNUP on, it waits inactive for an administrator's approval, as
   a sign-up from the form does.
4. Anyone else is refused with a page saying to ask an administrator for an invitation.

An identity already linked logs in its account, unless that account is inactive
(waiting for approval or deactivated).
"""

from __future__ import annotations

from typing import Any

from allauth.account.adapter import DefaultAccountAdapter
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialLogin
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from .services import (
    researcher_invitation_for_email,
    researcher_invitation_take_for_email,
    signup_request_pending_for,
)


def sso_providers() -> list[dict[str, str]]:
    """The configured providers, as the login page lists them (id and name)."""
    providers: dict[str, Any] = settings.SOCIALACCOUNT_PROVIDERS
    apps: list[dict[str, Any]] = providers.get("openid_connect", {}).get("APPS", [])
    return [{"id": a["provider_id"], "name": a["name"]} for a in apps]


def _verified_email(sociallogin: SocialLogin) -> str:
    addresses: Any = sociallogin.email_addresses or []
    for address in addresses:
        if address.verified and address.email:
            return str(address.email).strip()
    return ""


def _refused(request: HttpRequest, reason: str) -> ImmediateHttpResponse:
    return ImmediateHttpResponse(
        render(request, "accounts/sso_refused.html", {"reason": reason}, status=403)
    )


class LocalAccountAdapter(DefaultAccountAdapter):
    """allauth's own sign-up forms are not mounted; researchers join through accounts'
    invitations and sign-up page. An inactive account's sign-on gets our page."""

    def is_open_for_signup(self, request: HttpRequest) -> bool:
        return False

    def respond_user_inactive(self, request: HttpRequest, user: Any) -> HttpResponse:
        pending = getattr(user, "signup_request", None)
        waiting = pending is not None and pending.status == pending.Status.PENDING
        return render(request, "accounts/sso_inactive.html", {"waiting": waiting}, status=403)


class SsoAccountAdapter(DefaultSocialAccountAdapter):
    def pre_social_login(self, request: HttpRequest, sociallogin: SocialLogin) -> None:
        if sociallogin.is_existing:
            return
        email = _verified_email(sociallogin)
        if not email:
            raise _refused(request, "Your identity provider did not confirm an email address.")
        User = get_user_model()
        matches = list(User.objects.filter(Q(username__iexact=email) | Q(email__iexact=email)))
        if len(matches) > 1:
            raise _refused(request, "Several accounts use this address; ask an administrator.")
        if matches:
            # Linked, then logged in (or told it is inactive) by allauth's own flow.
            sociallogin.connect(request, matches[0])
            return
        if researcher_invitation_for_email(email) is None and not settings.IDEAREVIEW_SIGNUP:
            raise _refused(
                request,
                "There is no account for this address. Ask an administrator for an "
                "invitation to ideareview.",
            )

    def is_open_for_signup(self, request: HttpRequest, sociallogin: SocialLogin) -> bool:
        # pre_social_login refused everyone the rule does not let in.
        return True

    def populate_user(self, request: HttpRequest, sociallogin: SocialLogin, data: Any) -> Any:
        user = super().populate_user(request, sociallogin, data)
        email = _verified_email(sociallogin)
        user.username = email  # as every account made here: the address is the username
        user.email = email
        return user

    def save_user(self, request: HttpRequest, sociallogin: SocialLogin, form: Any = None) -> Any:
        user = super().save_user(request, sociallogin, form)
        email = _verified_email(sociallogin)
        if not researcher_invitation_take_for_email(email=email, user=user):
            signup_request_pending_for(user=user, via=f"sign-on {sociallogin.account.provider}")
        return user
