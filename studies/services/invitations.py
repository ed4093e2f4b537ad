"""Bringing reviewers in: invitations and their links, sign-up, consent, profiles,
screening and dropping a reviewer. Keyword-only `<entity>_<action>` workflows; links in
mails are built by the caller (`link_for`) because only the caller knows the site's address.

Blinding: nothing here hands a reviewer an idea's condition, author or institution.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from .. import csvsafe
from ..models import (
    Assignment,
    Invitation,
    PairTask,
    PlatformParticipant,
    Review,
    Reviewer,
    Study,
)
from ..protocol import jsonsafe
from ..protocol.textcheck import control_character_problem
from ..status import INVITES, SCREENS, refuse_if_imported
from .audit import audit

INVITATION_SALT = "ideareview.invitation.v1"

LinkFor = Callable[[str], str]


class RecruitmentError(Exception):
    """A request that cannot be honoured; the message is safe to show to its sender."""


class TextRejected(RecruitmentError):
    """Typed text the server will not store (a control character); a field error."""


class InvitationError(RecruitmentError):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # invalid, expired, used, revoked, member


def _base_url() -> str:
    return str(settings.IDEAREVIEW_BASE_URL).rstrip("/")


def default_link_for(path: str) -> str:
    return _base_url() + path


# --------------------------------------------------------------------------- invitations


def invitation_token(invitation: Invitation) -> str:
    return signing.TimestampSigner(salt=INVITATION_SALT).sign(invitation.nonce)


def invitation_link(invitation: Invitation, link_for: LinkFor | None = None) -> str:
    from django.urls import reverse

    path = reverse("studies:invitation_open", args=[invitation_token(invitation)])
    return (link_for or default_link_for)(path)


def invitation_create(
    *,
    study: Study,
    email: str,
    name: str = "",
    actor: Any = None,
    link_for: LinkFor | None = None,
    send: bool = True,
) -> Invitation:
    refuse_if_imported(study, INVITES)
    email = email.strip().lower()
    invitation = Invitation.objects.create(
        study=study,
        email=email,
        name=name.strip(),
        nonce=secrets.token_urlsafe(24),
        expires_at=timezone.now() + timedelta(days=study.invitation_days),
        created_by=actor if getattr(actor, "pk", None) else None,
    )
    audit(study=study, actor=actor, verb="invitation_created", invitation=invitation.pk)
    if send:
        invitation_send(invitation=invitation, link_for=link_for)
    return invitation


@dataclass(frozen=True)
class InvitationRow:
    row: int  # 1-based data row (a header row is not counted)
    name: str
    email: str


def _invitation_records(
    text: str, jsonl: bool, source: str = "invitations.csv"
) -> list[tuple[int, str, str]] | str:
    """(row, name, email) per non-empty row, or a message for a file that cannot be read."""
    if jsonl:
        records = []
        for n, line in enumerate((ln for ln in text.splitlines() if ln.strip()), start=1):
            try:
                obj = jsonsafe.loads(line)
            except json.JSONDecodeError as exc:
                return f"{source}, row {n}: not valid JSON ({exc.msg})"
            if not isinstance(obj, dict):
                return f"{source}, row {n}: each line must be a JSON object with name and email"
            problem = csvsafe.json_text_problem(obj)
            if problem:
                return f"{source}, row {n}: {problem}"
            name, email = obj.get("name") or "", obj.get("email") or ""
            if not isinstance(name, str) or not isinstance(email, str):
                return f"{source}, row {n}: name and email must be text"
            if max(len(name), len(email)) > csvsafe.FIELD_LIMIT:
                return f"{source}, row {n}: a field is over {csvsafe.FIELD_LIMIT:,} characters"
            records.append((n, name, email))
        return records
    try:
        rows = [r for r in csvsafe.csv_rows(text, source) if any(c.strip() for c in r)]
    except csvsafe.ReadProblem as exc:
        return str(exc)
    if rows and [c.strip().lower() for c in rows[0]][:2] in (["name", "email"], ["email", "name"]):
        header = [c.strip().lower() for c in rows[0]]
        return [
            (n, (d := dict(zip(header, r, strict=False))).get("name", ""), d.get("email", ""))
            for n, r in enumerate(rows[1:], start=1)
        ]
    return [(n, r[0], r[1]) if len(r) > 1 else (n, "", r[0]) for n, r in enumerate(rows, start=1)]


def invitations_read(
    *, study: Study, data: bytes, name: str = "invitations.csv"
) -> tuple[list[InvitationRow], list[str]]:
    """The valid rows of an invitation file (CSV of name,email with an optional header, or
    JSONL objects with name and email), and one problem per bad row, naming row and
    reason. Nothing is written."""
    from django.core.exceptions import ValidationError
    from django.core.validators import validate_email

    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return [], ["the file is not UTF-8 text"]
    records = _invitation_records(text, name.lower().endswith(".jsonl"), name)
    if isinstance(records, str):
        return [], [records]
    open_emails = {
        inv.email for inv in study.invitations.all() if inv.status_label in ("open", "used")
    }
    problems: list[str] = []
    seen: set[str] = set()
    valid: list[InvitationRow] = []
    for n, person, email in records:
        email = (email or "").strip().lower()
        try:
            validate_email(email)
        except ValidationError:
            problems.append(f"row {n}: {email or '(empty)'} is not an email address")
            continue
        if email in seen:
            problems.append(f"row {n}: {email} appears twice")
            continue
        if email in open_emails:
            problems.append(f"row {n}: {email} already has an invitation to this study")
            continue
        seen.add(email)
        problem = control_character_problem(person or "")
        if problem:
            problems.append(f"row {n}, field name: {problem}")
            continue
        valid.append(InvitationRow(n, (person or "").strip(), email))
    if not valid and not problems:
        problems.append("the file holds no rows")
    return valid, problems


def invitations_create_from_csv(
    *,
    study: Study,
    data: bytes,
    actor: Any = None,
    link_for: LinkFor | None = None,
    name: str = "invitations.csv",
    valid_only: bool = False,
) -> tuple[list[Invitation], list[str]]:
    """Invite everyone in an invitation file; returns (invitations, problems). When any
    row is bad nothing is created, unless `valid_only`: then the valid rows are invited
    and the bad ones returned as problems."""
    refuse_if_imported(study, INVITES)
    rows, problems = invitations_read(study=study, data=data, name=name)
    if problems and not valid_only:
        return [], problems
    with transaction.atomic():
        created = [
            invitation_create(
                study=study, email=r.email, name=r.name, actor=actor, link_for=link_for, send=False
            )
            for r in rows
        ]
    for inv in created:
        invitation_send(invitation=inv, link_for=link_for)
    return created, problems


def mail_greeting(name: str) -> str:
    """The first line of a mail to a (future) reviewer: their name when it is known."""
    name = name.strip()
    return f"Dear {name}," if name else "Hello,"


def reviewer_greeting(reviewer: Reviewer) -> str:
    """`mail_greeting` for a reviewer: the name on their profile, else their account's."""
    user = reviewer.user
    return mail_greeting(reviewer.name or (user.get_full_name() if user else ""))


def invitation_send(
    *, invitation: Invitation, link_for: LinkFor | None = None, reminder: bool = False
) -> None:
    refuse_if_imported(invitation.study, INVITES)
    study = invitation.study
    link = invitation_link(invitation, link_for)
    subject = (
        "Reminder: " if reminder else ""
    ) + f"Invitation to review research ideas: {study.title}"
    body = (
        f"{mail_greeting(invitation.name)}\n\n"
        f"You are invited to take part as an expert reviewer in the study “{study.title}”.\n"
        "Reviewers read research ideas written to one template and rate them on an "
        "anchored form. You choose your topics and how many ideas you review.\n\n"
        f"Sign up here (the link works once and expires on "
        f"{invitation.expires_at:%Y-%m-%d}):\n{link}\n\n"
        "If you did not expect this message you can ignore it.\n"
    )
    send_mail(subject, body, None, [invitation.email])
    Invitation.objects.filter(pk=invitation.pk).update(
        sent_count=invitation.sent_count + 1, last_sent_at=timezone.now()
    )
    invitation.sent_count += 1


def invitation_check(token: str) -> Invitation:
    """The invitation a token names, or InvitationError saying why it cannot be used."""
    signer = signing.TimestampSigner(salt=INVITATION_SALT)
    max_age = timedelta(days=settings.IDEAREVIEW_INVITATION_MAX_DAYS)
    try:
        nonce = signer.unsign(token, max_age=max_age)
    except signing.SignatureExpired:
        raise InvitationError(
            "expired", "This invitation link has expired. Ask the study team for a new one."
        ) from None
    except signing.BadSignature:
        raise InvitationError(
            "invalid",
            "This invitation link is not valid. Check that you copied the whole link from "
            "the email, or ask the study team for a new one.",
        ) from None
    invitation = Invitation.objects.select_related("study").filter(nonce=nonce).first()
    if invitation is None or invitation.revoked_at:
        raise InvitationError(
            "revoked", "This invitation was withdrawn. Ask the study team for a new one."
        )
    if invitation.used_at:
        raise InvitationError(
            "used",
            "This invitation link has already been used. Log in with the account you "
            "created to continue.",
        )
    if invitation.is_expired():
        raise InvitationError(
            "expired", "This invitation link has expired. Ask the study team for a new one."
        )
    if invitation.study.is_closed():
        raise InvitationError("expired", "This study is closed and takes no new reviewers.")
    return invitation


def _next_pseudonym(study: Study) -> str:
    numbers = [
        int(p[1:])
        for p in Reviewer.objects.filter(study=study, pseudonym__regex=r"^R\d+$").values_list(
            "pseudonym", flat=True
        )
    ]
    return f"R{max(numbers, default=0) + 1:03d}"


def invitation_check_address(invitation: Invitation, email: str) -> None:
    """In a study that binds its links (``Study.invitation_bind_email``, by default
    IDEAREVIEW_INVITATION_BIND_EMAIL), only the invited address may take the link (a
    forwarded link is no use to anyone else)."""
    if not invitation.study.invitation_bind_email or not invitation.email:
        return
    if email.strip().lower() != invitation.email.strip().lower():
        raise InvitationError(
            "other_address",
            "This invitation was sent to another email address. Sign up or log in with "
            "that address, or ask the study team to invite yours.",
        )


def _reviewer_return(*, reviewer: Reviewer, actor: Any) -> None:
    """A new invitation taken by someone who already has a profile in the study: the
    team asked them back. A dropped reviewer works again (pseudonym, screening and
    submitted reviews kept; withdrawn work stays withdrawn, the next assignment gives
    new work); a reviewer rejected at screening is screened again. A platform place
    that was released is not taken back this way: the platform counts it as ended."""
    fields: list[str] = []
    if reviewer.dropped_at is not None:
        if PlatformParticipant.objects.filter(reviewer=reviewer).exists():
            raise InvitationError(
                "refused",
                "Your place in this study, taken through a recruitment platform, was "
                "released and cannot be taken back with an invitation. Ask the study team.",
            )
        reviewer.dropped_at = None
        fields.append("dropped_at")
    rescreen = reviewer.screening == Reviewer.Screening.REJECTED
    if rescreen:
        reviewer.screening = Reviewer.Screening.PENDING
        reviewer.screening_reason = ""
        reviewer.screened_at = None
        fields += ["screening", "screening_reason", "screened_at"]
    if fields:
        reviewer.save(update_fields=fields)
        audit(
            study=reviewer.study,
            actor=actor,
            verb="reviewer_returned",
            reviewer=reviewer.pseudonym,
            undropped="dropped_at" in fields,
            rescreen=rescreen,
        )


def invitation_accept(*, token: str, user: Any) -> Reviewer:
    """Turn a valid invitation into the user's reviewer profile for its study, once."""
    with transaction.atomic():
        invitation = invitation_check(token)
        invitation_check_address(invitation, user.email or "")
        # Locks the row: two tabs accepting the same link create one reviewer.
        invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
        if invitation.used_at:
            raise InvitationError("used", "This invitation link has already been used.")
        study = invitation.study
        if study.members.filter(user_id=user.pk).exists():  # type: ignore[attr-defined]
            raise InvitationError(
                "member", "You are on this study's team, and its team members may not review in it."
            )
        reviewer = Reviewer.objects.select_for_update().filter(study=study, user=user).first()
        if reviewer is not None:
            _reviewer_return(reviewer=reviewer, actor=user)
        else:
            for _ in range(5):
                try:
                    with transaction.atomic():
                        reviewer = Reviewer.objects.create(
                            study=study,
                            user=user,
                            pseudonym=_next_pseudonym(study),
                            name=invitation.name,
                            email=invitation.email,
                            joined_at=timezone.now(),
                        )
                    break
                except IntegrityError:
                    continue
            if reviewer is None:
                raise RecruitmentError("Could not create your reviewer profile; try again.")
        # A reviewer holds one invitation: an earlier one stays listed as used, detached.
        Invitation.objects.filter(reviewer=reviewer).update(reviewer=None)
        invitation.used_at = timezone.now()
        invitation.reviewer = reviewer
        invitation.save(update_fields=["used_at", "reviewer"])
        audit(study=study, actor=user, verb="invitation_accepted", reviewer=reviewer.pseudonym)
    return reviewer


def reviewer_sign_up(*, token: str, email: str, password: str) -> tuple[Any, Reviewer]:
    """Create the account and accept the invitation in one transaction."""
    User = get_user_model()
    email = email.strip().lower()
    with transaction.atomic():
        invitation = invitation_check(token)
        try:
            invitation_check_address(invitation, email)
        except InvitationError as exc:  # a field error on the form, not a dead end
            raise RecruitmentError(str(exc)) from None
        if User.objects.filter(Q(username__iexact=email) | Q(email__iexact=email)).exists():
            raise RecruitmentError(
                "An account with this email address exists already: log in instead."
            )
        user = User.objects.create_user(username=email, email=email, password=password)
        reviewer = invitation_accept(token=token, user=user)
    return user, reviewer


# --------------------------------------------------------------------------- reviewer profile


def reviewer_consent(*, reviewer: Reviewer) -> None:
    now = timezone.now()
    reviewer.consent_at = reviewer.consent_at or now
    reviewer.honor_code_at = reviewer.honor_code_at or now
    reviewer.save(update_fields=["consent_at", "honor_code_at"])
    audit(study=reviewer.study, actor=reviewer.user, verb="reviewer_consented")


def reviewer_profile_save(*, reviewer: Reviewer, data: dict[str, Any]) -> None:
    if reviewer.next_step() == "consent":
        raise RecruitmentError("Give your consent and accept the honour code first.")
    reviewer.institution = data["institution"]
    reviewer.position = data["position"]
    reviewer.major_venue_papers = data["major_venue_papers"]
    reviewer.scholar_url = data.get("scholar_url", "")
    reviewer.reviewing_experience = data.get("reviewing_experience", "")
    reviewer.topic_preferences = [t for t in [data["topic_first"], data.get("topic_second")] if t]
    reviewer.preferred_load = data["preferred_load"]
    reviewer.profile_completed_at = reviewer.profile_completed_at or timezone.now()
    reviewer.save()
    audit(study=reviewer.study, actor=reviewer.user, verb="reviewer_profile_saved")


def reviewer_payment_handle_set(*, reviewer: Reviewer, handle: str) -> None:
    """The reviewer's own payment details; they may change them at any time, screened or
    not (the audit event says that they changed, not what they are). A participant from a
    platform is paid through the platform and gives none: theirs stays pseudonymous."""
    if PlatformParticipant.objects.filter(reviewer=reviewer).exists():
        raise RecruitmentError(
            "You are paid through the platform you came from: no payment details are kept here."
        )
    problem = control_character_problem(handle)
    if problem:
        raise RecruitmentError(f"Payment details: {problem}")
    handle = " ".join(handle.split())
    if handle == reviewer.payment_handle:
        return
    reviewer.payment_handle = handle
    reviewer.save(update_fields=["payment_handle"])
    audit(
        study=reviewer.study,
        actor=reviewer.user,
        verb="reviewer_payment_handle_set",
        reviewer=reviewer.pseudonym,
        given=bool(handle),
    )


def reviewer_screen(*, reviewer: Reviewer, approve: bool, reason: str = "", actor: Any) -> None:
    refuse_if_imported(reviewer.study, SCREENS)
    if reviewer.profile_completed_at is None:
        raise RecruitmentError(f"{reviewer.pseudonym} has not completed the profile yet.")
    if not approve and not reason.strip():
        raise RecruitmentError("Give a reason for the rejection.")
    newly_rejected = not approve and reviewer.screening != Reviewer.Screening.REJECTED
    reviewer.screening = Reviewer.Screening.APPROVED if approve else Reviewer.Screening.REJECTED
    reviewer.screening_reason = reason.strip()
    reviewer.screened_at = timezone.now()
    reviewer.save(update_fields=["screening", "screening_reason", "screened_at"])
    audit(
        study=reviewer.study,
        actor=actor,
        verb="reviewer_screened",
        reviewer=reviewer.pseudonym,
        decision=reviewer.screening,
    )
    if newly_rejected:
        reviewer_id = reviewer.pk
        transaction.on_commit(lambda: reviewer_notify_rejected(reviewer_id=reviewer_id))


def reviewer_notify_rejected(*, reviewer_id: int) -> bool:
    """Tell a reviewer, politely, that their sign-up was not accepted (True if mailed).

    The mail names the study they signed up to and nothing else: not the owner's reason
    (free text that may mention people or ideas), not the other reviewers, not the ideas.
    """
    from django.urls import reverse

    reviewer = Reviewer.objects.select_related("study", "user").get(pk=reviewer_id)
    email = (reviewer.user.email if reviewer.user else "") or reviewer.email
    if not email:
        return False
    title = reviewer.study.title
    send_mail(
        f"Your sign-up to review: {title}",
        f"{reviewer_greeting(reviewer)}\n\n"
        f"Thank you for signing up to review research ideas in the study “{title}” and for "
        "completing your profile. The study team has reviewed the sign-ups, and this time "
        "they cannot include you as a reviewer, so no ideas will be assigned to you.\n\n"
        "There is nothing more you need to do. Your account stays open; you can see its "
        f"status here: {default_link_for(reverse('studies:reviewer_home'))}\n\n"
        "Thank you again for your time and interest.\n",
        None,
        [email],
    )
    return True


def reviewers_screen_by_rule(*, study: Study, actor: Any) -> int:
    """Approve every pending, complete profile that meets the study's rule."""
    refuse_if_imported(study, SCREENS)
    n = 0
    for reviewer in Reviewer.objects.filter(
        study=study, screening=Reviewer.Screening.PENDING, profile_completed_at__isnull=False
    ).select_related("study"):
        if reviewer.meets_screening_rule():
            reviewer_screen(reviewer=reviewer, approve=True, actor=actor, reason="meets the rule")
            n += 1
    return n


def reviewer_drop_counts(*, reviewer: Reviewer) -> dict[str, int]:
    """What reviewer_drop would withdraw (open reviews and pair ratings) and keep
    (submitted reviews)."""
    open_status = [Assignment.Status.PENDING, Assignment.Status.DRAFT]
    return {
        "open_reviews": Assignment.objects.filter(
            reviewer=reviewer, status__in=open_status
        ).count(),
        "open_pairs": PairTask.objects.filter(
            reviewer=reviewer, status=PairTask.Status.PENDING
        ).count(),
        "submitted": Review.objects.filter(
            reviewer=reviewer, status=Review.Status.SUBMITTED
        ).count(),
    }


def reviewer_drop(*, reviewer: Reviewer, actor: Any) -> int:
    """Mark a reviewer as dropped out; their open work is withdrawn (returns how much)."""
    with transaction.atomic():
        reviewer.dropped_at = timezone.now()
        reviewer.save(update_fields=["dropped_at"])
        n = Assignment.objects.filter(
            reviewer=reviewer, status__in=[Assignment.Status.PENDING, Assignment.Status.DRAFT]
        ).update(status=Assignment.Status.WITHDRAWN)
        n += PairTask.objects.filter(reviewer=reviewer, status=PairTask.Status.PENDING).update(
            status=PairTask.Status.WITHDRAWN
        )
        audit(
            study=reviewer.study,
            actor=actor,
            verb="reviewer_dropped",
            reviewer=reviewer.pseudonym,
            withdrawn=n,
        )
    return n


def reviewer_topics_change(
    *, reviewer: Reviewer, topics: list[str], preferred_load: int, actor: Any, note: str = ""
) -> bool:
    """The study team changes a screened reviewer's topics and load, as the reviewer
    asked them to (the reviewer's own profile is locked once screened). Returns whether
    anything changed; each change is an audit entry with the values before and after.

    Checked like the reviewer's own profile: one or two different topics of the study, a
    load the study offers. Once an assignment gave the reviewer ideas, their topics are
    kept: that work was chosen from those topics and a new preview keeps it, so new
    topics would leave the reviewer holding ideas outside what they chose. Their load
    may still grow (a preview keeping current work then adds ideas), but not fall below
    the ideas they hold already, which the next preview would keep all the same."""
    study = reviewer.study
    refuse_if_imported(study, SCREENS)
    who = reviewer.pseudonym
    names = set(study.topics.values_list("name", flat=True))
    topics = [t.strip() for t in topics if t and t.strip()]
    unknown = [t for t in topics if t not in names]
    if not topics:
        raise RecruitmentError(f"{who}: choose a first-choice topic.")
    if unknown:
        raise RecruitmentError(f"{who}: {', '.join(unknown)} is not a topic of this study.")
    if len(topics) > 2 or len(set(topics)) < len(topics):
        raise RecruitmentError(f"{who}: choose one topic, or two different ones.")
    if preferred_load not in study.load_choices():
        lo, hi = study.min_load, study.max_load
        raise RecruitmentError(f"{who}: the load must be between {lo} and {hi} ideas.")
    problem = control_character_problem(note)
    if problem:
        raise RecruitmentError(f"{who}: the note {problem}.")
    with transaction.atomic():
        # The study row is what committing an assignment locks: a commit waits for this.
        Study.objects.select_for_update().get(pk=study.pk)
        reviewer = Reviewer.objects.select_for_update().get(pk=reviewer.pk)
        if reviewer.dropped_at is not None:
            raise RecruitmentError(f"{who} has dropped out of the study.")
        if reviewer.profile_completed_at is None:
            raise RecruitmentError(f"{who} has not completed the profile yet.")
        if reviewer.screening == Reviewer.Screening.PENDING:
            raise RecruitmentError(
                f"{who}'s profile is not screened yet: the reviewer can still change it."
            )
        before_topics = list(reviewer.topic_preferences or [])
        before_load = reviewer.preferred_load
        if topics == before_topics and preferred_load == before_load:
            return False
        held = Assignment.objects.filter(reviewer=reviewer).exclude(
            status=Assignment.Status.WITHDRAWN
        )
        n_held = held.count()
        ideas = f"{n_held} assigned idea{'' if n_held == 1 else 's'}"
        if n_held and topics != before_topics:
            raise RecruitmentError(
                f"{who} already holds {ideas} chosen from their current "
                "topics, which a new preview keeps: their topics can no longer change. "
                "Their load can still grow."
            )
        if preferred_load < n_held:
            raise RecruitmentError(
                f"{who} already holds {ideas}: the load cannot be lower than that."
            )
        reviewer.topic_preferences = topics
        reviewer.preferred_load = preferred_load
        reviewer.save(update_fields=["topic_preferences", "preferred_load"])
        audit(
            study=study,
            actor=actor,
            verb="reviewer_topics_changed",
            reviewer=who,
            topics_before=before_topics,
            topics=topics,
            load_before=before_load,
            load=preferred_load,
            note=note.strip(),
        )
    return True
