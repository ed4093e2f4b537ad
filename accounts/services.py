"""Researcher accounts: invitations, self-service sign-up and its approval, deactivation
with a handover. Keyword-only `<entity>_<action>` workflows; views and the sign-on
adapter call these.

No answer here tells a stranger whether an address has an account: sign-up answers the
same either way (the address's owner gets a mail saying they have one), and password
reset is Django's, which answers the same too.
"""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.contrib.auth.password_validation import validate_password
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from .hooks import handovers, team_joiners
from .models import ResearcherInvitation, SignUpRequest
from .roles import is_researcher, researcher_grant

logger = logging.getLogger(__name__)
INVITATION_SALT = "accounts.researcher-invitation"


class AccountError(ValueError):
    """A refused account action; the message says why. `kind` tells the page which
    status to answer with: invalid (a bad link), expired, used, or refused."""

    def __init__(self, message: str, kind: str = "refused") -> None:
        super().__init__(message)
        self.kind = kind


def _mail(subject: str, body: str, to: list[str]) -> bool:
    """Send one mail; a failure is logged, not raised (the pages show the links too)."""
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, to)
    except Exception:  # a mail server's refusal must not undo the account change
        logger.exception("mail to %s failed: %s", to, subject)
        return False
    return True


def _absolute(path: str) -> str:
    return f"{settings.IDEAREVIEW_BASE_URL}{path}"


def _accounts_with(email: str) -> Any:
    return get_user_model().objects.filter(Q(username__iexact=email) | Q(email__iexact=email))


# --------------------------------------------------------------------------- invitations


def researcher_invitation_token(invitation: ResearcherInvitation) -> str:
    return signing.TimestampSigner(salt=INVITATION_SALT).sign(invitation.nonce)


def researcher_invitation_url(invitation: ResearcherInvitation) -> str:
    token = researcher_invitation_token(invitation)
    return _absolute(reverse("accounts:invitation_open", args=[token]))


def researcher_invitation_create(
    *,
    email: str,
    invited_by: Any,
    team_id: int | None = None,
    team_role: str = "",
    team_label: str = "",
) -> tuple[ResearcherInvitation, str]:
    """Invite `email` to become a researcher (and, with `team_id`, to join that study's
    team as `team_role`); mails the link and returns it for the page to show too."""
    email = get_user_model().objects.normalize_email(email.strip())
    if not email:
        raise AccountError("an email address is needed")
    invitation = ResearcherInvitation.objects.create(
        email=email,
        nonce=secrets.token_urlsafe(24),
        invited_by=invited_by,
        team_id=team_id,
        team_role=team_role if team_id is not None else "",
    )
    url = researcher_invitation_url(invitation)
    who = invited_by.get_full_name() or invited_by.get_username()
    team = (
        f"\nYou will join the team of the study “{team_label}” as {team_role}.\n"
        if team_label
        else ""
    )
    _mail(
        "You are invited to ideareview as a researcher",
        f"{who} invites you to ideareview, where researchers run blind expert reviews "
        f"of research ideas.\n{team}\nOpen this link to choose your name and password "
        f"(it works once, for {settings.IDEAREVIEW_RESEARCHER_INVITATION_DAYS} "
        f"days):\n\n{url}\n",
        [email],
    )
    return invitation, url


def researcher_invitation_check(token: str) -> ResearcherInvitation:
    """The open invitation a token names, or AccountError saying why it cannot be used."""
    max_age = timedelta(days=settings.IDEAREVIEW_RESEARCHER_INVITATION_DAYS)
    try:
        nonce = signing.TimestampSigner(salt=INVITATION_SALT).unsign(token, max_age=max_age)
    except signing.SignatureExpired:
        raise AccountError(
            "This invitation has expired; ask for a new one.", kind="expired"
        ) from None
    except signing.BadSignature:
        raise AccountError("This invitation link is not valid.", kind="invalid") from None
    invitation = ResearcherInvitation.objects.filter(nonce=nonce).first()
    if invitation is None or invitation.revoked_at is not None:
        raise AccountError("This invitation link is not valid.", kind="invalid")
    if invitation.accepted_at is not None:
        raise AccountError("This invitation has been used already.", kind="used")
    return invitation


def _invitation_take(invitation: ResearcherInvitation, user: Any) -> None:
    """Inside a transaction holding the invitation's row: make `user` a researcher, mark
    the invitation used and join the team it names."""
    researcher_grant(user=user)
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    if invitation.team_id is not None:
        for joiner in team_joiners():
            joiner(
                team_id=invitation.team_id,
                role=invitation.team_role,
                user=user,
                invited_by=invitation.invited_by,
            )


def _locked_invitation(token: str) -> ResearcherInvitation:
    invitation = researcher_invitation_check(token)
    # Read again under a row lock: of two parallel acceptances only one finds it open.
    invitation = ResearcherInvitation.objects.select_for_update().get(pk=invitation.pk)
    if not invitation.open:
        raise AccountError("This invitation has been used already.", kind="used")
    return invitation


def researcher_invitation_accept(
    *, token: str, first_name: str, last_name: str, password: str
) -> Any:
    """A new account for the invited address, with the name and password the invitee
    chose; it is a researcher at once. An address that has an account logs in first and
    accepts with `researcher_invitation_accept_as`."""
    User = get_user_model()
    with transaction.atomic():
        invitation = _locked_invitation(token)
        if _accounts_with(invitation.email).exists():
            raise AccountError(
                "An account with this address exists already: log in, then open the link again.",
                kind="has_account",
            )
        user = User(username=invitation.email, email=invitation.email)
        user.first_name, user.last_name = first_name.strip(), last_name.strip()
        try:
            validate_password(password, user)
        except ValidationError as exc:
            raise AccountError(" ".join(exc.messages)) from None
        user.set_password(password)
        user.save()
        _invitation_take(invitation, user)
    return user


def researcher_invitation_accept_as(*, token: str, user: Any) -> None:
    """The logged-in `user` accepts: their account becomes a researcher's. Only the
    account of the invited address may (a forwarded link makes nobody else one)."""
    with transaction.atomic():
        invitation = _locked_invitation(token)
        address = invitation.email.casefold()
        if address not in {(user.email or "").casefold(), user.get_username().casefold()}:
            raise AccountError(
                f"This invitation is for {invitation.email}; you are logged in as "
                f"{user.get_username()}. Log out, or ask for an invitation to your address."
            )
        _invitation_take(invitation, user)


def researcher_invitation_revoke(*, invitation: ResearcherInvitation) -> None:
    if invitation.open:
        invitation.revoked_at = timezone.now()
        invitation.save(update_fields=["revoked_at"])


def researcher_invitation_for_email(email: str) -> ResearcherInvitation | None:
    """The newest open, unexpired invitation of `email` (single sign-on asks this)."""
    cutoff = timezone.now() - timedelta(days=settings.IDEAREVIEW_RESEARCHER_INVITATION_DAYS)
    return (
        ResearcherInvitation.objects.filter(
            email__iexact=email,
            accepted_at__isnull=True,
            revoked_at__isnull=True,
            created_at__gt=cutoff,
        )
        .order_by("-created_at")
        .first()
    )


def researcher_invitation_take_for_email(*, email: str, user: Any) -> bool:
    """Single sign-on's acceptance: the provider vouched for `email`. True when an open
    invitation of that address made `user` a researcher."""
    with transaction.atomic():
        invitation = researcher_invitation_for_email(email)
        if invitation is None:
            return False
        invitation = ResearcherInvitation.objects.select_for_update().get(pk=invitation.pk)
        if not invitation.open:
            return False
        _invitation_take(invitation, user)
    return True


# --------------------------------------------------------------------------- sign-up


def _administrators() -> list[str]:
    User = get_user_model()
    staff = User.objects.filter(Q(is_staff=True) | Q(is_superuser=True), is_active=True)
    return sorted({u.email for u in staff if u.email})


def signup_request_create(
    *, email: str, first_name: str, last_name: str, password: str, note: str = ""
) -> None:
    """Ask for a researcher account. Answers the same whether or not the address has an
    account: a new address gets an inactive account waiting for approval, an address
    with an account gets a mail saying so (and how to reset the password)."""
    User = get_user_model()
    email = User.objects.normalize_email(email.strip())
    with transaction.atomic():
        existing = _accounts_with(email).first()
        if existing is not None:
            email = existing.email or email  # written to the address the account holds
            make_password(password)  # as long as the other answer takes: no timing tell
            reset = _absolute(reverse("accounts:password_reset"))
            _mail(
                "Your ideareview account",
                "Someone (perhaps you) asked for a researcher account on ideareview "
                "with this address, which has an account already. If you forgot its "
                f"password, set a new one here:\n\n{reset}\n\nIf it was not you, "
                "nothing needs doing.\n",
                [email],
            )
            return
        user = User(username=email, email=email, is_active=False)
        user.first_name, user.last_name = first_name.strip(), last_name.strip()
        user.set_password(password)
        user.save()
        SignUpRequest.objects.create(user=user, note=note.strip(), via="form")
        _signup_notify_administrators(user)


def signup_request_pending_for(*, user: Any, via: str) -> SignUpRequest:
    """An account made by single sign-on that waits for approval (inactive until then)."""
    user.is_active = False
    user.save(update_fields=["is_active"])
    request_row, _ = SignUpRequest.objects.get_or_create(user=user, defaults={"via": via})
    _signup_notify_administrators(user)
    return request_row


def _signup_notify_administrators(user: Any) -> None:
    recipients = _administrators()
    if not recipients:
        return
    page = _absolute(reverse("accounts:researchers"))
    name = user.get_full_name() or user.email
    _mail(
        "A researcher account waits for approval",
        f"{name} <{user.email}> asked for a researcher account on ideareview. "
        f"Approve or reject it here:\n\n{page}\n",
        recipients,
    )


def _decide(request_row: SignUpRequest, status: str, actor: Any) -> SignUpRequest:
    with transaction.atomic():
        row = (
            SignUpRequest.objects.select_for_update().select_related("user").get(pk=request_row.pk)
        )
        if row.status != SignUpRequest.Status.PENDING:
            raise AccountError(f"this request was {row.get_status_display().lower()} already")
        row.status = status
        row.decided_at = timezone.now()
        row.decided_by = actor
        row.save(update_fields=["status", "decided_at", "decided_by"])
    return row


def signup_request_approve(*, request_row: SignUpRequest, actor: Any) -> Any:
    """The account becomes an active researcher; its owner is told by mail."""
    with transaction.atomic():
        row = _decide(request_row, SignUpRequest.Status.APPROVED, actor)
        user = row.user
        user.is_active = True
        user.save(update_fields=["is_active"])
        researcher_grant(user=user)
        if user.email:
            login = _absolute(reverse("login"))
            _mail(
                "Your ideareview researcher account is ready",
                f"An administrator approved your account. Log in here:\n\n{login}\n",
                [user.email],
            )
    return user


def signup_request_reject(*, request_row: SignUpRequest, actor: Any) -> None:
    """The account stays inactive (the address cannot ask again unnoticed)."""
    _decide(request_row, SignUpRequest.Status.REJECTED, actor)


# --------------------------------------------------------------------------- deactivation


def researcher_owned(user: Any) -> list[str]:
    """What deactivating `user` would hand over (every registered handover's labels)."""
    return [label for handover in handovers() for label in handover.owned(user)]


def researcher_deactivate(*, user: Any, successor: Any | None, actor: Any) -> int:
    """Deactivate `user` (they can no longer log in) and hand what they own to
    `successor`, an active researcher; in one transaction. Returns how many items were
    handed over. A successor is needed when the user owns anything."""
    if user.pk == getattr(actor, "pk", None):
        raise AccountError("you cannot deactivate your own account")
    if not user.is_active:
        raise AccountError(f"{user.get_username()} is inactive already")
    owned = researcher_owned(user)
    if successor is None:
        if owned:
            raise AccountError(
                f"{user.get_username()} owns {len(owned)} stud(ies): choose who takes them over"
            )
    elif successor.pk == user.pk:
        raise AccountError("the successor must be someone else")
    elif not (successor.is_active and is_researcher(successor)):
        raise AccountError(f"{successor.get_username()} is not an active researcher")
    handed = 0
    with transaction.atomic():
        if successor is not None:
            for handover in handovers():
                try:
                    handed += handover.hand_over(user=user, successor=successor, actor=actor)
                except ValueError as exc:  # nothing is kept: the transaction rolls back
                    raise AccountError(str(exc)) from None
        user.is_active = False
        user.save(update_fields=["is_active"])
    return handed


def researcher_reactivate(*, user: Any) -> None:
    user.is_active = True
    user.save(update_fields=["is_active"])
