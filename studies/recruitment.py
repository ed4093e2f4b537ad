"""The human half of a study: invitations, sign-up, screening, assignment, reviews, pairs.

Keyword-only workflows named `<entity>_<action>` (docs/architecture.md). They take model
instances and plain values, never a request; links in mails are built by the caller
(`link_for`) because only the caller knows the site's address.

Blinding: nothing here hands a reviewer an idea's condition, author, institution,
external id or import position. Reviewer-facing URLs carry assignment and pair-task ids
(created in shuffled order) or signed random tokens, never an idea's primary key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import secrets
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.cache import cache
from django.core.mail import send_mail
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from . import csvsafe
from .draft_sql import assignment_activity_update, draft_save_at_once, review_draft_update
from .jobs import ACTIVE as JOB_ACTIVE
from .jobs import JobStopped, job_enqueue, job_finish, job_progress, job_start
from .models import (
    Assignment,
    Idea,
    IdeaCondition,
    Invitation,
    JobRun,
    PairJudgment,
    PairTask,
    Review,
    Reviewer,
    ReviewRevision,
    ReviewScore,
    Study,
)
from .protocol import assignment as solver
from .protocol import jsonsafe
from .protocol.forms import FormDefinition
from .protocol.textcheck import control_character_problem
from .services import audit

log = logging.getLogger(__name__)

INVITATION_SALT = "ideareview.invitation.v1"
# Gaps between a reviewer's events longer than this count as this long: a tab left open
# over lunch is not time on task.
IDLE_CAP_SECONDS = float(settings.IDEAREVIEW_IDLE_CAP_SECONDS)
PAIR_DIMENSIONS = ["overall", "novelty", "feasibility", "excitement", "effectiveness"]
MAX_TEXT = 20_000

LinkFor = Callable[[str], str]


def pair_dimensions(study: Study) -> list[str]:
    """What reviewers compare idea pairs on: the form's own `pair_metrics` when it names
    them, else the usual dimensions the form has, else its last metric (forms end with
    their holistic score)."""
    definition = study.form_definition()
    if definition.pair_metrics:
        return list(definition.pair_metrics)
    keys = definition.metric_keys
    return [d for d in PAIR_DIMENSIONS if d in keys] or keys[-1:]


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


# --------------------------------------------------------------------------- rate limits


def _rate_window(key: str, window: int) -> tuple[str, str, float]:
    """The current and the previous fixed window's cache keys for `key`, and how far
    into the current window we are (0 to 1)."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    now = timezone.now().timestamp()
    index = int(now) // window
    return (
        f"ratelimit:{digest}:{index}",
        f"ratelimit:{digest}:{index - 1}",
        (now - index * window) / window,
    )


def _rate_over(previous: int, current: int, fraction: float, limit: float) -> bool:
    # A sliding-window estimate: the previous window's attempts count in proportion to
    # how much of it still lies within one window of now. An address that reached the
    # limit in the previous window stays blocked through the current one, so neither a
    # window boundary nor a burst split across it lets more attempts through.
    # Rounded up, so an attempt counts in full until its share has slid out.
    return previous >= limit or math.ceil(previous * (1 - fraction)) + current >= limit


def rate_limit_hit(key: str, *, limit: int, window: int) -> bool:
    """Count one attempt under `key`; True when the caller is over `limit` per `window` s.

    Counted in the default cache, in fixed windows weighed as a sliding window (see
    `_rate_over`); a lock-out lasts between one and two windows. Good enough to slow
    password guessing and token probing; not a substitute for a proxy's limits at scale.
    """
    bucket, previous_bucket, fraction = _rate_window(key, window)
    # Buckets outlive their window by one more: the next window still weighs them.
    ttl = 2 * window + 5
    if cache.add(bucket, 1, timeout=ttl):
        count = 1
    else:
        try:
            count = cache.incr(bucket)
        except ValueError:  # expired between add and incr
            cache.set(bucket, 1, timeout=ttl)
            count = 1
        # Caches without a native increment (file, database) re-store the value with
        # their default timeout; put the bucket's own lifetime back.
        cache.touch(bucket, ttl)
    previous = cache.get(previous_bucket) or 0
    return _rate_over(previous, count, fraction, limit + 1)


def rate_limit_refund(key: str, *, window: int) -> None:
    """Take back one attempt counted under `key` in the current window (a success)."""
    bucket, _, _ = _rate_window(key, window)
    try:
        if cache.decr(bucket) < 0:
            cache.delete(bucket)
    except ValueError:  # expired, or a new window began
        pass


def rate_limited(key: str, *, limit: int, window: int) -> bool:
    """True if `key` is already over its limit, without counting an attempt."""
    bucket, previous_bucket, fraction = _rate_window(key, window)
    got = cache.get_many([bucket, previous_bucket])
    return _rate_over(got.get(previous_bucket, 0), got.get(bucket, 0), fraction, limit)


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


def invitation_send(
    *, invitation: Invitation, link_for: LinkFor | None = None, reminder: bool = False
) -> None:
    study = invitation.study
    link = invitation_link(invitation, link_for)
    greeting = f"Dear {invitation.name}," if invitation.name else "Hello,"
    subject = (
        "Reminder: " if reminder else ""
    ) + f"Invitation to review research ideas: {study.title}"
    body = (
        f"{greeting}\n\n"
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
        reviewer = Reviewer.objects.filter(study=study, user=user).first()
        if reviewer is None:
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
    not (the audit event says that they changed, not what they are)."""
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
        "Hello,\n\n"
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


# --------------------------------------------------------------------------- assignment


def idea_label(idea: Idea, memberships: list[IdeaCondition] | None = None) -> str:
    """The owner-side name of an idea (its external id); reviewers never see it."""
    rows = memberships if memberships is not None else list(idea.memberships.all())
    if rows:
        rows = sorted(rows, key=lambda m: (m.condition.kind != "human", m.condition.key))
        return rows[0].external_id
    return f"idea-{idea.pk}"


@dataclass
class AssignmentPlan:
    """Solver inputs built from rows, with the maps back from solver ids to rows."""

    inputs: solver.AssignmentInputs
    reviewer_by_id: dict[str, Reviewer]
    idea_by_id: dict[str, Idea]
    fingerprint: str
    skipped_ideas: int = 0
    notes: list[str] = field(default_factory=list)


def _plan_fixed_assignments(*, study: Study, mode: str) -> list[Assignment]:
    """The assignments the plan keeps: submitted ones, and in "keep" mode every live one
    of a reviewer still in the study."""
    live = list(
        Assignment.objects.filter(study=study)
        .exclude(status=Assignment.Status.WITHDRAWN)
        .select_related("reviewer", "idea")
    )
    return [
        a
        for a in live
        if a.status == Assignment.Status.SUBMITTED
        or (mode == "keep" and a.reviewer.dropped_at is None)
    ]


def _plan_ideas(
    *, study: Study, fixed_idea_ids: set[int]
) -> tuple[dict[str, Idea], list[solver.IdeaInput], tuple[int, int]]:
    """The solver's ideas by label, and how many of the study's ideas are left out: for
    want of an approved text, and by topic matching."""
    reviewable = {
        Idea.NormalizationStatus.APPROVED,
        Idea.NormalizationStatus.EDITED,
    }
    memberships: dict[int, list[IdeaCondition]] = defaultdict(list)
    for m in IdeaCondition.objects.filter(study=study).select_related("condition"):
        memberships[m.idea_id].append(m)
    every = list(study.ideas.select_related("topic", "exclusion").order_by("pk"))
    ideas = [
        i
        # Ideas left out by topic matching are not assigned (unless already reviewed).
        for i in every
        if (i.normalization_status in reviewable and not i.is_excluded()) or i.pk in fixed_idea_ids
    ]
    kept = {i.pk for i in ideas}
    excluded = sum(1 for i in every if i.pk not in kept and i.is_excluded())
    skipped = (len(every) - len(ideas) - excluded, excluded)
    idea_by_id: dict[str, Idea] = {}
    solver_ideas = []
    for idea in ideas:
        rows = memberships.get(idea.pk, [])
        if not rows:
            continue
        iid = idea_label(idea, rows)
        idea_by_id[iid] = idea
        solver_ideas.append(
            solver.IdeaInput(
                id=iid,
                topic=idea.topic.name,
                conditions=tuple(sorted({m.condition.key for m in rows})),
                institutions=(idea.author_institution,) if idea.author_institution else (),
            )
        )
    return idea_by_id, solver_ideas, skipped


def _plan_reviewers(
    *, study: Study, fixed_rows: list[Assignment], extra_load: bool
) -> tuple[dict[str, Reviewer], list[solver.ReviewerInput]]:
    """The solver's reviewers by pseudonym: the active ones, each held to a load that
    covers the assignments kept for them."""
    fixed_by_reviewer: Counter[int] = Counter(a.reviewer_id for a in fixed_rows)
    reviewer_by_id: dict[str, Reviewer] = {}
    solver_reviewers = []
    # The study's team never reviews in it.
    candidates = (
        Reviewer.objects.filter(study=study)
        .exclude(user__study_memberships__study=study)
        .select_related("user")
        .order_by("pk")
    )
    for rev in candidates:
        n_fixed = fixed_by_reviewer.get(rev.pk, 0)
        active = (
            rev.screening == Reviewer.Screening.APPROVED
            and rev.dropped_at is None
            and rev.profile_completed_at is not None
            and rev.topic_preferences
        )
        if active:
            preferred = min(
                max(rev.preferred_load or study.min_load, study.min_load), study.max_load
            )
            lo = max(preferred, n_fixed)
            hi = max(lo, study.max_load) if extra_load else lo
        else:
            continue
        reviewer_by_id[rev.pseudonym] = rev
        solver_reviewers.append(
            solver.ReviewerInput(
                id=rev.pseudonym,
                topics=tuple(rev.topic_preferences or ()),
                load_min=lo,
                load_max=hi,
                institution=rev.institution,
                email=(rev.user.email if rev.user else "") or rev.email,
            )
        )
    return reviewer_by_id, solver_reviewers


def _plan_fingerprint(
    *,
    solver_ideas: list[solver.IdeaInput],
    solver_reviewers: list[solver.ReviewerInput],
    fixed: list[tuple[str, str]],
    conditions: dict[str, str],
    params: solver.Parameters,
) -> str:
    """A hash of everything the solver is given but the seed and time limit."""
    return hashlib.sha256(
        json.dumps(
            {
                "ideas": [(i.id, i.topic, i.conditions, i.institutions) for i in solver_ideas],
                "reviewers": [
                    (r.id, r.topics, r.load_min, r.load_max, r.institution, r.email)
                    for r in solver_reviewers
                ],
                "fixed": sorted(fixed),
                "conditions": conditions,
                "reviews": [params.min_reviews, params.max_reviews],
                "topic_choice": params.topic_choice,
            },
            sort_keys=True,
            default=list,
        ).encode()
    ).hexdigest()


def _plan_notes(
    *,
    skipped: tuple[int, int],
    fixed_rows: list[Assignment],
    reviewer_by_id: dict[str, Reviewer],
    label_of: dict[int, str],
) -> list[str]:
    """What the plan leaves out or counts on top, for the researcher."""
    notes: list[str] = []
    unapproved, excluded = skipped
    if unapproved:
        notes.append(f"{unapproved} idea(s) have no approved text yet and are left out")
    if excluded:
        notes.append(f"{excluded} idea(s) left out by topic matching are not assigned")
    # Reviews submitted by reviewers who dropped out stay in the study but not in the
    # program (the solver would hold a dropped reviewer to the per-reviewer rules).
    outside = Counter(
        a.idea_id
        for a in fixed_rows
        if a.reviewer.pseudonym not in reviewer_by_id and a.idea_id in label_of
    )
    if outside:
        notes.append(
            f"{sum(outside.values())} submitted review(s) from dropped reviewers on "
            f"{len(outside)} idea(s) come on top of the counts below"
        )
    return notes


def assignment_plan(
    *, study: Study, seed: int | None = None, mode: str = "keep", extra_load: bool = False
) -> AssignmentPlan:
    """`mode="keep"` keeps every live assignment and fills the gap (reviewers who joined
    or dropped); `mode="resolve"` keeps only submitted reviews and re-draws the rest."""
    if mode not in ("keep", "resolve"):
        raise ValueError("mode must be 'keep' or 'resolve'")
    fixed_rows = _plan_fixed_assignments(study=study, mode=mode)
    fixed_idea_ids = {a.idea_id for a in fixed_rows}
    idea_by_id, solver_ideas, skipped = _plan_ideas(study=study, fixed_idea_ids=fixed_idea_ids)
    label_of = {idea.pk: iid for iid, idea in idea_by_id.items()}
    reviewer_by_id, solver_reviewers = _plan_reviewers(
        study=study, fixed_rows=fixed_rows, extra_load=extra_load
    )
    fixed = [
        (a.reviewer.pseudonym, label_of[a.idea_id])
        for a in fixed_rows
        if a.idea_id in label_of and a.reviewer.pseudonym in reviewer_by_id
    ]
    conditions = {c.key: c.kind for c in study.conditions.all()}
    params = solver.Parameters(
        min_reviews=study.min_reviews_per_idea,
        max_reviews=study.max_reviews_per_idea,
        seed=seed,
        time_limit=float(settings.IDEAREVIEW_ASSIGNMENT_TIME_LIMIT),
        topic_choice=study.topic_choice_use,
    )
    inputs = solver.AssignmentInputs(
        ideas=tuple(solver_ideas),
        conditions=conditions,
        reviewers=tuple(solver_reviewers),
        fixed=tuple(sorted(fixed)),
        params=params,
    )
    fingerprint = _plan_fingerprint(
        solver_ideas=solver_ideas,
        solver_reviewers=solver_reviewers,
        fixed=fixed,
        conditions=conditions,
        params=params,
    )
    notes = _plan_notes(
        skipped=skipped, fixed_rows=fixed_rows, reviewer_by_id=reviewer_by_id, label_of=label_of
    )
    return AssignmentPlan(inputs, reviewer_by_id, idea_by_id, fingerprint, sum(skipped), notes)


ASSIGNMENT_JOB = "assignment"


def assignment_preview_enqueue(
    *,
    study: Study,
    seed: int | None = None,
    mode: str = "keep",
    extra_load: bool = False,
    actor: Any = None,
) -> JobRun:
    """Start a preview as a background job. The seed is drawn here when not given and
    stored in the job, so the job (and any retry of it) gives one result."""
    if mode not in ("keep", "resolve"):
        raise ValueError("mode must be 'keep' or 'resolve'")
    job = job_start(
        study=study,
        kind=ASSIGNMENT_JOB,
        actor=actor,
        total=3,
        seed=seed if seed is not None else secrets.randbits(32),
        mode=mode,
        extra_load=extra_load,
    )
    return job_enqueue(job=job)


def assignment_preview_run(*, job: JobRun) -> tuple[solver.AssignmentResult, AssignmentPlan]:
    """Solve the job's preview and keep the result (pairs, tables) in its row, so the
    owner commits exactly what they saw."""
    params = job.params
    job_progress(job=job, done=0, total=3, message="reading reviewers, ideas and reviews")
    plan = assignment_plan(
        study=job.study,
        seed=params["seed"],
        mode=params["mode"],
        extra_load=params.get("extra_load", False),
    )
    job_progress(
        job=job,
        done=1,
        message=f"solving for {len(plan.inputs.reviewers)} reviewer(s) and "
        f"{len(plan.inputs.ideas)} idea(s)",
    )
    result = solver.solve_assignment(plan.inputs)
    job_progress(job=job, done=2, message="drawing up the tables")
    summary: dict[str, Any] = {}
    if result.feasible:
        summary = solver.preview_summary(plan.inputs, result.pairs)
        for row in summary["reviewers"]:
            row["preferred"] = plan.reviewer_by_id[row["reviewer"]].preferred_load
    job.params = {
        **params,
        "seed": result.seed,
        "fingerprint": plan.fingerprint,
        "status": result.status,
        "pairs": [list(p) for p in result.pairs],
        "problems": [str(p) for p in result.problems],
        "notes": [*plan.notes, *result.notes],
        "objective": result.objective,
        "solve_seconds": round(result.solve_seconds, 3),
        "summary": summary,
    }
    job.message = f"{result.status}: {len(result.pairs)} assignments"
    # Written only while this run still holds the job (not after a cancel or a takeover).
    held = JobRun.objects.filter(pk=job.pk, lease=job.lease, status__in=JOB_ACTIVE)
    if not held.update(params=job.params, message=job.message):
        raise JobStopped(f"job {job.pk} was cancelled or taken over")
    return result, plan


def assignment_preview(
    *,
    study: Study,
    seed: int | None = None,
    mode: str = "keep",
    extra_load: bool = False,
    actor: Any = None,
) -> tuple[JobRun, solver.AssignmentResult, AssignmentPlan]:
    """The same preview run in this process (the command line, tests)."""
    job = job_start(
        study=study,
        kind=ASSIGNMENT_JOB,
        actor=actor,
        total=3,
        seed=seed if seed is not None else secrets.randbits(32),
        mode=mode,
        extra_load=extra_load,
    )
    result, plan = assignment_preview_run(job=job)
    job_finish(job=job)
    return job, result, plan


def assignment_commit(
    *, study: Study, job: JobRun, actor: Any = None, link_for: LinkFor | None = None
) -> dict[str, int]:
    """Write a previewed solution: new pairs are created (in shuffled order, so ids say
    nothing about ideas), open pairs no longer wanted are withdrawn, submitted ones stay.
    The study's status does not change: reviewers see the work once it is open."""
    params = job.params
    if job.kind != ASSIGNMENT_JOB or job.status != JobRun.Status.DONE or "pairs" not in params:
        raise RecruitmentError("This preview has not finished: wait for it, or preview again.")
    if params.get("status") == "infeasible":
        raise RecruitmentError("This preview has no assignment to commit.")
    if params.get("committed_at"):
        raise RecruitmentError("This preview was committed already.")
    with transaction.atomic():
        Study.objects.select_for_update().get(pk=study.pk)
        plan = assignment_plan(
            study=study,
            seed=params["seed"],
            mode=params["mode"],
            extra_load=params.get("extra_load", False),
        )
        if plan.fingerprint != params["fingerprint"]:
            raise RecruitmentError(
                "Reviewers, ideas or reviews changed since this preview; preview again."
            )
        wanted = {(plan.reviewer_by_id[r].pk, plan.idea_by_id[i].pk) for r, i in params["pairs"]}
        existing = {(a.reviewer_id, a.idea_id): a for a in Assignment.objects.filter(study=study)}
        withdrawn = 0
        for key, a in existing.items():
            if a.is_open and key not in wanted:
                a.status = Assignment.Status.WITHDRAWN
                a.save(update_fields=["status"])
                withdrawn += 1
        restored = 0
        new_keys: list[tuple[int, int]] = []
        for key in sorted(wanted):
            found = existing.get(key)
            if found is None:
                new_keys.append(key)
            elif found.status == Assignment.Status.WITHDRAWN:
                has_draft = Review.objects.filter(assignment=found).exists()
                found.status = Assignment.Status.DRAFT if has_draft else Assignment.Status.PENDING
                found.save(update_fields=["status"])
                restored += 1
        random.Random(params["seed"]).shuffle(new_keys)
        Assignment.objects.bulk_create(
            [Assignment(study=study, reviewer_id=r, idea_id=i) for r, i in new_keys]
        )
        study.assignment_seed = params["seed"]
        study.save(update_fields=["assignment_seed", "updated_at"])
        job.params = {**params, "committed_at": timezone.now().isoformat()}
        job.save(update_fields=["params"])
        summary = {"created": len(new_keys), "withdrawn": withdrawn, "restored": restored}
        # Committing does not open the study ("Open for review" does): before it opens,
        # reviewers see no assignment and get no mail; opening mails those waiting.
        is_open = study.status == Study.Status.REVIEWING
        audit(
            study=study,
            actor=actor,
            verb="assignment_committed",
            seed=params["seed"],
            study_open=is_open,
            **summary,
        )
        notify = sorted({r for r, _ in new_keys}) if is_open else []
        if notify:
            transaction.on_commit(
                lambda: reviewers_notify_new_work(
                    study=study, reviewer_ids=notify, link_for=link_for
                )
            )
    return summary


def reviewers_notify_new_work(
    *, study: Study, reviewer_ids: list[int], link_for: LinkFor | None = None
) -> int:
    from django.urls import reverse

    link = (link_for or default_link_for)(reverse("studies:reviewer_home"))
    sent = 0
    for rev in Reviewer.objects.filter(pk__in=reviewer_ids).select_related("user"):
        email = (rev.user.email if rev.user else "") or rev.email
        if not email:
            continue
        send_mail(
            f"Your ideas to review are ready: {study.title}",
            f"Hello,\n\nThe ideas you will review in “{study.title}” are ready.\n"
            f"Start here: {link}\n\nThank you for your help!\n",
            None,
            [email],
        )
        sent += 1
    return sent


# --------------------------------------------------------------------------- reviews


def assignment_touch(*, assignment: Assignment, now: Any = None) -> None:
    """Record reviewer activity on an assignment (page open, autosave, heartbeat)."""
    now = now or timezone.now()
    assignment.record_activity(now, IDLE_CAP_SECONDS)
    Assignment.objects.filter(pk=assignment.pk).update(
        opened_at=assignment.opened_at,
        last_seen_at=assignment.last_seen_at,
        active_seconds=assignment.active_seconds,
    )


def _review_for(assignment: Assignment) -> Review:
    review = Review.objects.filter(assignment=assignment).first()
    if review is None:
        review = _review_create(assignment)
    return review


def _review_create(assignment: Assignment) -> Review:
    try:
        with transaction.atomic():
            return Review.objects.create(
                study_id=assignment.study_id,
                idea_id=assignment.idea_id,
                reviewer_id=assignment.reviewer_id,
                assignment=assignment,
                status=Review.Status.DRAFT,
            )
    except IntegrityError:  # another tab created it first
        return Review.objects.get(assignment=assignment)


class StaleReview(RecruitmentError):
    """The page that sent answers was opened before the review was last submitted (in
    another tab or window); its answers are not stored over the submitted ones without a
    warning."""

    def __init__(self, review: Review):
        last = review.revisions.order_by("-number").first()
        when = timezone.localtime(last.created_at if last else timezone.now())
        super().__init__(
            f"This review was submitted from another tab or window at {when:%H:%M:%S}, after "
            "this page was opened, so these answers were not saved over it. Reload the page "
            "to see the submitted answers; copy anything you want to keep first."
        )
        self.version = review.version


def _check_version(review: Review, version: int | None) -> None:
    if version is not None and version != review.version:
        raise StaleReview(review)


def review_draft_save(
    *,
    assignment: Assignment,
    draft: dict[str, str],
    version: int | None = None,
    definition: FormDefinition | None = None,
) -> Review:
    """Keep the answers typed so far. With `version` (the review's number of submits when
    the page was opened), a page opened before a later submit gets StaleReview instead:
    its draft would otherwise show over the submitted answers. `definition` is the
    study's parsed form when the caller has it already.

    Autosaves come every few seconds from every reviewer typing, so this is a handful of
    statements and no read under lock (on PostgreSQL usually one statement,
    draft_save_at_once): the version is checked by the UPDATE itself (a
    submit that holds the review row makes it wait, and PostgreSQL then re-checks the
    version on the submitted row), and the assignment's activity is written only if no
    other request touched it since `assignment` was read (else it is read again under
    lock). The assignment row is written before the review row, in the order
    review_submit locks them, so the two never deadlock."""
    if assignment.study.is_closed():
        raise RecruitmentError("The study is closed; reviews can no longer be changed.")
    if not assignment.study.is_open_to_reviewers():
        raise RecruitmentError("The study is not open for review yet.")
    _draft_check_text(definition or assignment.study.form_definition(), draft)
    now = timezone.now()
    stored = {k: str(v)[:MAX_TEXT] for k, v in draft.items()}
    review = _review_cached(assignment)
    if review is not None and _draft_save_quick(assignment, review, stored, now, version):
        return review
    with transaction.atomic():
        _commit_without_waiting_for_disk()
        _assignment_touch_for_draft(assignment, now)
        review = review or _review_for(assignment)
        if not review_draft_update(review_id=review.pk, draft=stored, at=now, version=version):
            raise StaleReview(Review.objects.get(pk=review.pk))
    review.draft, review.draft_saved_at = stored, now
    return review


def _draft_save_quick(
    assignment: Assignment, review: Review, stored: dict[str, str], now: Any, version: int | None
) -> bool:
    """The usual autosave (its review exists, no other request touched the assignment
    since it was read) in one statement on PostgreSQL (draft_save_at_once). False, with
    `assignment` as it was read, when that does not apply; the draft is then not stored."""
    if connection.vendor != "postgresql":
        return False
    before = (assignment.opened_at, assignment.last_seen_at, assignment.active_seconds)
    assignment.record_activity(now, IDLE_CAP_SECONDS)
    if draft_save_at_once(
        assignment=assignment,
        seen=before[1],
        draft_status=assignment.status == Assignment.Status.PENDING,
        review_id=review.pk,
        draft=stored,
        at=now,
        version=version,
        quick_commit=not connection.in_atomic_block,
    ):
        review.draft, review.draft_saved_at = stored, now
        return True
    assignment.opened_at, assignment.last_seen_at, assignment.active_seconds = before
    return False


def _review_cached(assignment: Assignment) -> Review | None:
    """The review read with the assignment (select_related), without a query."""
    if not Assignment.review.is_cached(assignment):  # type: ignore[attr-defined]
        return None
    return getattr(assignment, "review", None)


def _assignment_touch_for_draft(assignment: Assignment, now: Any) -> None:
    """assignment_touch, and PENDING becomes DRAFT, in one UPDATE that applies only if
    the row still has the activity `assignment` was read with; otherwise another request
    touched it meanwhile, and the row is read again under lock."""
    seen = assignment.last_seen_at
    assignment.record_activity(now, IDLE_CAP_SECONDS)
    pending = assignment.status == Assignment.Status.PENDING
    if assignment_activity_update(assignment=assignment, seen=seen, draft_status=pending):
        return
    locked = Assignment.objects.select_for_update().get(pk=assignment.pk)
    assignment_touch(assignment=locked, now=now)
    if locked.status == Assignment.Status.PENDING:
        locked.status = Assignment.Status.DRAFT
        locked.save(update_fields=["status"])


def _commit_without_waiting_for_disk() -> None:
    """Drafts arrive every few seconds while a reviewer types and each replaces the last:
    on PostgreSQL this transaction's commit does not wait for its WAL flush, which is most
    of an autosave's time on a busy disk. A database crash can lose the last draft (a few
    seconds of typing, sent again by the next autosave); submitted reviews keep the full
    guarantee."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


def _draft_check_text(definition: FormDefinition, draft: dict[str, str]) -> None:
    """A control character refuses the draft with the field named (PostgreSQL would refuse
    a NUL with an error page)."""
    labels = {f"{m.key}_rationale": f"{m.label} rationale" for m in definition.metrics}
    for key, value in draft.items():
        problem = control_character_problem(str(value))
        if problem:
            raise TextRejected(f"Not saved: {labels.get(key, key)} {problem}.")


def review_current_values(review: Review | None) -> dict[str, str]:
    """What the form shows: the draft over the submitted answers."""
    if review is None:
        return {}
    values: dict[str, str] = {}
    if review.status == Review.Status.SUBMITTED:
        for s in review.scores.all():
            values[s.metric] = str(int(s.score)) if float(s.score).is_integer() else str(s.score)
            values[f"{s.metric}_rationale"] = s.rationale
        if review.familiarity is not None:
            values["familiarity"] = str(review.familiarity)
        if review.confidence is not None:
            values["confidence"] = str(review.confidence)
        if review.minutes is not None:
            values["minutes"] = f"{review.minutes:g}"
    values.update({k: v for k, v in (review.draft or {}).items()})
    return values


def review_submit(
    *, assignment: Assignment, cleaned: dict[str, Any], version: int | None = None
) -> tuple[Review, bool]:
    """Store the validated answers as the assignment's one review; returns (review,
    changed). A repeated submit of the same answers (double click, second tab) changes
    nothing; a different one after submission is an edit and gets a new revision. With
    `version`, different answers from a page opened before the review last changed get
    StaleReview."""
    study = assignment.study
    if study.is_closed():
        raise RecruitmentError("The study is closed; reviews can no longer be changed.")
    if not study.is_open_to_reviewers():
        raise RecruitmentError("The study is not open for review yet.")
    metrics = study.form_definition().metric_keys
    data: dict[str, Any] = {
        "scores": {m: int(cleaned[m]) for m in metrics},
        "rationales": {m: (cleaned.get(f"{m}_rationale") or "").strip() for m in metrics},
        "familiarity": int(cleaned["familiarity"]),
        "confidence": int(cleaned["confidence"]),
        "minutes": cleaned.get("minutes"),
    }
    with transaction.atomic():
        assignment = (
            Assignment.objects.select_for_update().select_related("study").get(pk=assignment.pk)
        )
        if assignment.status == Assignment.Status.WITHDRAWN:
            raise RecruitmentError("This idea is no longer assigned to you.")
        review = Review.objects.select_for_update().filter(assignment=assignment).first()
        if review is None:
            review = _review_for(assignment)
        last = review.revisions.order_by("-number").first()
        if review.status == Review.Status.SUBMITTED and last is not None and last.data == data:
            if review.draft:
                review.draft = {}
                review.save(update_fields=["draft"])
            return review, False
        _check_version(review, version)
        assignment_touch(assignment=assignment)
        now = timezone.now()
        review.version += 1
        review.status = Review.Status.SUBMITTED
        review.familiarity = data["familiarity"]
        review.confidence = data["confidence"]
        review.minutes = data["minutes"]
        review.minutes_raw = "" if data["minutes"] is None else f"{data['minutes']:g}"
        review.minutes_measured = round(assignment.active_seconds / 60.0, 2)
        review.honor_code_raw = "accepted" if assignment.reviewer.honor_code_at else ""
        review.consent_raw = "given" if assignment.reviewer.consent_at else ""
        review.submitted_at = review.submitted_at or now
        review.draft = {}
        review.save()
        review.scores.all().delete()
        ReviewScore.objects.bulk_create(
            [
                ReviewScore(
                    review=review,
                    metric=m,
                    score=data["scores"][m],
                    rationale=data["rationales"][m],
                )
                for m in metrics
            ]
        )
        ReviewRevision.objects.create(
            review=review,
            number=(last.number + 1) if last else 1,
            data=data,
            minutes_measured=review.minutes_measured,
        )
        assignment.status = Assignment.Status.SUBMITTED
        assignment.save(update_fields=["status"])
        audit(
            study=study,
            actor=assignment.reviewer.user,
            verb="review_submitted" if last is None else "review_edited",
            assignment=assignment.pk,
        )
    return review, True


# --------------------------------------------------------------------------- pair tasks


def _reviewer_may_see(reviewer: Reviewer, idea: Idea, keys: frozenset[str]) -> bool:
    from .protocol.institutions import institution_keys

    return not (institution_keys([idea.author_institution]) & keys)


def _pairs_between(
    pools: list[list[Idea]],
    conds_of: dict[int, set[str]],
    have: set[frozenset[int]],
    condition_a: str,
    condition_b: str,
    k: int,
    rng: random.Random,
) -> list[tuple[Idea, Idea]]:
    """Up to k pairs with A from `condition_a` and B from `condition_b`, at random."""
    options = [
        (x, y)
        for pool in pools
        for x in pool
        for y in pool
        if x.pk != y.pk
        and condition_a in conds_of[x.pk]
        and condition_b in conds_of[y.pk]
        # An idea in both conditions compares nothing.
        and conds_of[x.pk] != conds_of[y.pk]
        and frozenset((x.pk, y.pk)) not in have
    ]
    rng.shuffle(options)
    chosen: list[tuple[Idea, Idea]] = []
    used: set[frozenset[int]] = set()
    for x, y in options:
        key = frozenset((x.pk, y.pk))
        if key not in used:
            used.add(key)
            chosen.append((x, y))
    return chosen[:k]


def _pairs_balanced(
    pools: list[list[Idea]],
    conds_of: dict[int, set[str]],
    have: set[frozenset[int]],
    k: int,
    rng: random.Random,
) -> list[tuple[Idea, Idea]]:
    """Up to k same-topic pairs of ideas from different conditions, spread evenly over
    the condition pairs the reviewer's topics offer (see `protocol.pairs`)."""
    from .protocol.pairs import Candidate, condition_pairs, pick_balanced

    by_pk = {i.pk: i for pool in pools for i in pool}
    candidates = []
    for pool in pools:
        for x in pool:
            for y in pool:
                cps = condition_pairs(conds_of[x.pk], conds_of[y.pk])
                if x.pk < y.pk and cps and frozenset((x.pk, y.pk)) not in have:
                    candidates.append(Candidate(x.pk, y.pk, cps))
    # Pairs the reviewer already has count, so a second batch evens out the first.
    earlier = Counter(
        cp
        for key in have
        if len(key) == 2 and all(pk in conds_of for pk in key)
        for cp in condition_pairs(*(conds_of[pk] for pk in sorted(key)))
    )
    picked = pick_balanced(candidates, k, rng, earlier)
    # Which idea is A is drawn too, so A/B order says nothing about the conditions.
    return [
        (by_pk[c.first], by_pk[c.second])
        if rng.random() < 0.5
        else (by_pk[c.second], by_pk[c.first])
        for c in picked
    ]


def pair_tasks_create(
    *,
    study: Study,
    per_reviewer: int,
    condition_a: str = "",
    condition_b: str = "",
    seed: int | None = None,
    actor: Any = None,
) -> tuple[int, list[str]]:
    """Give each approved reviewer up to `per_reviewer` new pairs of same-topic ideas from
    their own topics (never from their institution, never an idea pair they already
    have). With `condition_a`/`condition_b`, A comes from the first and B from the
    second; otherwise both are drawn at random. Sides are drawn per task."""
    from .protocol.institutions import institution_keys

    seed = seed if seed is not None else secrets.randbits(32)
    rng = random.Random(seed)
    reviewable = [Idea.NormalizationStatus.APPROVED, Idea.NormalizationStatus.EDITED]
    ideas = list(
        study.ideas.filter(normalization_status__in=reviewable, exclusion__isnull=True)
        .select_related("topic")
        .prefetch_related("memberships__condition")
    )
    conds_of = {i.pk: {m.condition.key for m in i.memberships.all()} for i in ideas}
    by_topic: dict[str, list[Idea]] = defaultdict(list)
    for i in ideas:
        by_topic[i.topic.name].append(i)
    problems: list[str] = []
    created: list[PairTask] = []
    dims = pair_dimensions(study)
    reviewers = (
        Reviewer.objects.filter(
            study=study, screening=Reviewer.Screening.APPROVED, dropped_at__isnull=True
        )
        .exclude(user__study_memberships__study=study)
        .select_related("user")
    )
    for rev in reviewers:
        keys = institution_keys(
            [rev.institution], [(rev.user.email if rev.user else "") or rev.email]
        )
        have = {
            frozenset((a, b))
            for a, b in PairTask.objects.filter(reviewer=rev).values_list("idea_a", "idea_b")
        }
        pools = [
            [i for i in by_topic.get(topic, []) if _reviewer_may_see(rev, i, keys)]
            for topic in dict.fromkeys(rev.topic_preferences or [])
        ]
        if condition_a and condition_b:
            chosen = _pairs_between(
                pools, conds_of, have, condition_a, condition_b, per_reviewer, rng
            )
        else:
            chosen = _pairs_balanced(pools, conds_of, have, per_reviewer, rng)
        if len(chosen) < per_reviewer:
            problems.append(
                f"{rev.pseudonym}: only {len(chosen)} of {per_reviewer} pairs available in "
                f"their topics"
            )
        for x, y in chosen:
            created.append(
                PairTask(
                    study=study,
                    reviewer=rev,
                    idea_a=x,
                    idea_b=y,
                    condition_a=condition_a if condition_a and condition_b else "",
                    condition_b=condition_b if condition_a and condition_b else "",
                    a_on_left=rng.random() < 0.5,
                    dimensions=dims,
                    source="conditions" if condition_a and condition_b else "balanced",
                )
            )
    rng.shuffle(created)
    PairTask.objects.bulk_create(created)
    audit(study=study, actor=actor, verb="pair_tasks_created", n=len(created), seed=seed)
    return len(created), problems


def pair_tasks_upload(
    *, study: Study, data: bytes, seed: int | None = None, actor: Any = None
) -> tuple[int, list[str]]:
    """CSV rows reviewer,idea_a,idea_b (pseudonym and external ids). All or nothing."""
    from .protocol.institutions import institution_keys

    rng = random.Random(seed if seed is not None else secrets.randbits(32))
    try:
        rows = csvsafe.csv_rows(data.decode("utf-8-sig"), "pair tasks file")
    except UnicodeDecodeError:
        return 0, ["the file is not UTF-8 text"]
    except csvsafe.ReadProblem as exc:
        return 0, [str(exc)]
    rows = [r for r in rows if any(c.strip() for c in r)]
    if rows and rows[0][0].strip().lower() == "reviewer":
        rows = rows[1:]
    reviewers = {r.pseudonym: r for r in study.reviewers.select_related("user")}
    by_ext = {
        m.external_id: m.idea
        for m in IdeaCondition.objects.filter(study=study).select_related("idea__topic")
    }
    dims = pair_dimensions(study)
    problems: list[str] = []
    tasks: list[PairTask] = []
    for n, row in enumerate(rows, start=1):
        if len(row) < 3:
            problems.append(f"row {n}: needs reviewer,idea_a,idea_b")
            continue
        rp, ea, eb = (c.strip() for c in row[:3])
        rev, a, b = reviewers.get(rp), by_ext.get(ea), by_ext.get(eb)
        if rev is None or not rev.is_approved:
            problems.append(f"row {n}: {rp} is not an approved reviewer of this study")
            continue
        if a is None or b is None or a.pk == b.pk:
            problems.append(f"row {n}: {ea} and {eb} must be two ideas of this study")
            continue
        if a.topic_id != b.topic_id:
            problems.append(f"row {n}: {ea} and {eb} are from different topics")
            continue
        keys = institution_keys(
            [rev.institution], [(rev.user.email if rev.user else "") or rev.email]
        )
        if not (_reviewer_may_see(rev, a, keys) and _reviewer_may_see(rev, b, keys)):
            problems.append(f"row {n}: {rp} shares an institution with an author")
            continue
        tasks.append(
            PairTask(
                study=study,
                reviewer=rev,
                idea_a=a,
                idea_b=b,
                a_on_left=rng.random() < 0.5,
                dimensions=dims,
                source="upload",
            )
        )
    if problems:
        return 0, problems
    try:
        with transaction.atomic():
            rng.shuffle(tasks)
            PairTask.objects.bulk_create(tasks)
    except IntegrityError:
        return 0, ["some pairs are already assigned to the same reviewer"]
    audit(study=study, actor=actor, verb="pair_tasks_uploaded", n=len(tasks))
    return len(tasks), []


def pair_task_submit(*, task: PairTask, choices: dict[str, str], rationale: str = "") -> bool:
    """Store one judgment per dimension; repeating the same submit changes nothing."""
    if task.study.is_closed():
        raise RecruitmentError("The study is closed; ratings can no longer be changed.")
    with transaction.atomic():
        task = PairTask.objects.select_for_update().select_related("study").get(pk=task.pk)
        if task.status == PairTask.Status.WITHDRAWN:
            raise RecruitmentError("This pair is no longer assigned to you.")
        current = dict(task.judgments.values_list("dimension", "choice"))
        if (
            task.status == PairTask.Status.SUBMITTED
            and current == choices
            and task.rationale == rationale.strip()
        ):
            return False
        task.judgments.all().delete()
        flip = {"first": "a", "second": "b", "tie": "tie"}
        if not task.a_on_left:
            flip = {"first": "b", "second": "a", "tie": "tie"}
        PairJudgment.objects.bulk_create(
            [
                PairJudgment(task=task, dimension=d, choice=choices[d], winner=flip[choices[d]])
                for d in task.dimensions
            ]
        )
        task.rationale = rationale.strip()[:MAX_TEXT]
        task.status = PairTask.Status.SUBMITTED
        task.submitted_at = timezone.now()
        task.save(update_fields=["rationale", "status", "submitted_at"])
        audit(study=task.study, actor=task.reviewer.user, verb="pair_task_submitted", task=task.pk)
    return True


# --------------------------------------------------------------------------- progress, mail


def progress_summary(*, study: Study) -> dict[str, Any]:
    now = timezone.now()
    due = study.reviews_due_at
    reviewers = list(study.reviewers.filter(user__isnull=False).select_related("study"))
    status_counts = Counter(r.status_label for r in reviewers)
    invitations = Counter(i.status_label for i in study.invitations.all())
    live = list(
        Assignment.objects.filter(study=study)
        .exclude(status=Assignment.Status.WITHDRAWN)
        .select_related("reviewer", "idea__topic")
    )
    tasks = list(PairTask.objects.filter(study=study).exclude(status=PairTask.Status.WITHDRAWN))

    def bar(done: int, total: int, overdue: int = 0) -> dict[str, Any]:
        return {
            "done": done,
            "total": total,
            "pending": total - done,
            "overdue": overdue,
            "percent": round(100 * done / total) if total else 0,
        }

    per_reviewer: dict[int, dict[str, int]] = defaultdict(Counter)  # type: ignore[arg-type]
    for a in live:
        c = per_reviewer[a.reviewer_id]
        c["total"] += 1
        c["done"] += a.status == Assignment.Status.SUBMITTED
        c["overdue"] += bool(a.is_open and due and now > due)
    pair_counts: dict[int, Counter[str]] = defaultdict(Counter)
    for t in tasks:
        pair_counts[t.reviewer_id]["total"] += 1
        pair_counts[t.reviewer_id]["done"] += t.status == PairTask.Status.SUBMITTED
    reviewer_rows: list[dict[str, Any]] = [
        {
            "reviewer": r,
            "bar": bar(
                per_reviewer[r.pk]["done"],
                per_reviewer[r.pk]["total"],
                per_reviewer[r.pk]["overdue"],
            ),
            "pairs": bar(pair_counts[r.pk]["done"], pair_counts[r.pk]["total"]),
        }
        for r in sorted(reviewers, key=lambda r: r.pseudonym)
    ]
    memberships: dict[int, list[IdeaCondition]] = defaultdict(list)
    for m in IdeaCondition.objects.filter(study=study).select_related("condition"):
        memberships[m.idea_id].append(m)
    per_idea: dict[int, Counter[str]] = defaultdict(Counter)
    idea_obj: dict[int, Idea] = {}
    for a in live:
        per_idea[a.idea_id]["total"] += 1
        per_idea[a.idea_id]["done"] += a.status == Assignment.Status.SUBMITTED
        idea_obj[a.idea_id] = a.idea
    idea_rows = sorted(
        (
            {
                "label": idea_label(idea_obj[pk], memberships.get(pk, [])),
                "topic": idea_obj[pk].topic.name,
                "bar": bar(c["done"], c["total"]),
            }
            for pk, c in per_idea.items()
        ),
        key=lambda row: (row["topic"], row["label"]),
    )
    per_condition: dict[str, Counter[str]] = defaultdict(Counter)
    for a in live:
        for m in memberships.get(a.idea_id, []):
            per_condition[m.condition.key]["total"] += 1
            per_condition[m.condition.key]["done"] += a.status == Assignment.Status.SUBMITTED
    done = sum(1 for a in live if a.status == Assignment.Status.SUBMITTED)
    return {
        "reviewer_status": dict(sorted(status_counts.items())),
        "invitations": dict(sorted(invitations.items())),
        "overall": bar(done, len(live), sum(r["bar"]["overdue"] for r in reviewer_rows)),
        "pairs": bar(sum(1 for t in tasks if t.status == PairTask.Status.SUBMITTED), len(tasks)),
        "reviewers": reviewer_rows,
        "ideas": idea_rows,
        "conditions": [
            {"key": k, "bar": bar(c["done"], c["total"])} for k, c in sorted(per_condition.items())
        ],
    }


def reminders_send(
    *, study: Study, link_for: LinkFor | None = None, actor: Any = None
) -> dict[str, int]:
    """Mail reviewers with open work, and re-send open invitations (with a fresh link)."""
    from django.urls import reverse

    if study.is_closed():
        return {"reviewers": 0, "invitations": 0}
    link = (link_for or default_link_for)(reverse("studies:reviewer_home"))
    reviewers = 0
    # Before the study opens reviewers cannot see their work: nothing to remind them of.
    open_work = (
        Reviewer.objects.filter(
            study=study,
            dropped_at__isnull=True,
            user__isnull=False,
            study__status=Study.Status.REVIEWING,
        )
        .filter(
            Q(assignments__status__in=[Assignment.Status.PENDING, Assignment.Status.DRAFT])
            | Q(pair_tasks__status=PairTask.Status.PENDING)
        )
        .select_related("user")
        .distinct()
    )
    for rev in open_work:
        n_open = rev.assignments.filter(
            status__in=[Assignment.Status.PENDING, Assignment.Status.DRAFT]
        ).count()
        n_pairs = rev.pair_tasks.filter(status=PairTask.Status.PENDING).count()
        email = (rev.user.email if rev.user else "") or rev.email
        if not email:
            continue
        due = (
            f"\nReviews are due by {study.reviews_due_at:%Y-%m-%d %H:%M} UTC.\n"
            if study.reviews_due_at
            else ""
        )
        send_mail(
            f"Reminder: your reviews for {study.title}",
            f"Hello,\n\nYou have {n_open} idea review(s) and {n_pairs} pair rating(s) still "
            f"open in “{study.title}”.{due}\nContinue here: {link}\n\nThank you!\n",
            None,
            [email],
        )
        reviewers += 1
    invitations = 0
    for inv in study.invitations.filter(
        used_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
    ):
        invitation_send(invitation=inv, link_for=link_for, reminder=True)
        invitations += 1
    audit(
        study=study,
        actor=actor,
        verb="reminders_sent",
        reviewers=reviewers,
        invitations=invitations,
    )
    return {"reviewers": reviewers, "invitations": invitations}


def reminders_send_all() -> dict[str, dict[str, int]]:
    """Reminders for every study in review (Celery beat runs this once a day)."""
    return {
        study.slug: reminders_send(study=study)
        for study in Study.objects.filter(status=Study.Status.REVIEWING)
    }


def study_close(*, study: Study, actor: Any = None) -> None:
    study.status = Study.Status.CLOSED
    study.closed_at = timezone.now()
    study.save(update_fields=["status", "closed_at", "updated_at"])
    audit(study=study, actor=actor, verb="study_closed")


def study_set_due(*, study: Study, due: Any, actor: Any = None) -> None:
    study.reviews_due_at = due
    study.save(update_fields=["reviews_due_at", "updated_at"])
    audit(study=study, actor=actor, verb="study_due_set", due=str(due))


# --------------------------------------------------------------------------- blind text


def idea_sections(text: str) -> list[tuple[str, str]]:
    """Approved text split into the template's sections (heading, body), in template
    order, by the project's one proposal parser; empty sections are left out."""
    from .protocol.template import SECTIONS, parse_sections

    if not text.strip():
        return []
    parsed = parse_sections(text)
    headings = {s.key: s.heading for s in SECTIONS}
    out = [("", parsed.preamble)] if parsed.preamble.strip() else []
    out += [(headings.get(k, k), body) for k, body in parsed.sections.items() if body.strip()]
    return out


def words(text: str) -> int:
    return len(text.split())
