"""Participants from a participant platform (Prolific by default, any other by a mapping
of URL parameters): the study's arrival link and its settings, arriving and returning,
screening and work on arrival, releasing abandoned places, completion, and the bulk files
the platform reads back (approvals, rejections with reasons, bonuses). No call to the
platform is made: the platform sends people to the link and reads the files.

Who may resume a place. A participant id travels in a URL and is no secret (anyone who
saw it, or guessed one, could type it), so the id alone never hands over a place that
exists. A place resumes only for a browser holding the place's secret in a signed cookie
set on arrival, or for a link carrying the same platform session id as the first arrival
(the platform gives that id to the participant's own attempt, and it is not guessable).
Anything else is refused with a message saying to continue in the first browser or from
the platform. The participant is logged in with a Django session for the reviewer pages,
like any reviewer, and the blinding rules of those pages hold as for any reviewer.

Platform ids are personal data: they are kept in `PlatformParticipant` for the study's
team (the participants page, the bulk files), and nowhere else: the user account is named
at random, audit events and every export name the reviewer's pseudonym.
"""

from __future__ import annotations

import io
import secrets
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Max, Q
from django.utils import timezone

from .. import csvsafe
from ..analysis.rounding import counted
from ..models import (
    Assignment,
    IdeaCondition,
    PairTask,
    PlatformLink,
    PlatformParticipant,
    Review,
    ReviewAcceptance,
    Reviewer,
    Study,
)
from ..protocol import arrivals
from ..protocol import payments as pay
from ..status import refuse_if_imported
from .audit import audit
from .ideas import REVIEWABLE, idea_label
from .invitations import (
    RecruitmentError,
    _next_pseudonym,
    reviewer_drop,
    reviewer_profile_save,
    reviewer_screen,
)
from .payments import study_payment_run

COOKIE_SALT = "ideareview.platform.v1"
ArrivalRefused = arrivals.ArrivalRefused


class NoPlatformLink(ArrivalRefused):
    """The study takes no one through a platform link: to a visitor, the same as a study
    that does not exist (a 404), so a guessed address does not confirm a study."""


def platform_cookie_name(study: Study) -> str:
    return f"platform_{study.pk}"


# --------------------------------------------------------------------------- settings


def platform_link_for(study: Study) -> PlatformLink:
    """The study's link settings (unsaved defaults, Prolific's, when none are stored)."""
    found = PlatformLink.objects.filter(study=study).first()
    return found or PlatformLink(study=study)


LINK_FIELDS = (
    "enabled",
    "platform",
    "participant_param",
    "study_param",
    "session_param",
    "platform_study_id",
    "places",
    "abandon_minutes",
    "completion_url",
    "completion_code",
    "code_param",
)


def platform_link_set(*, study: Study, data: Mapping[str, Any], actor: Any) -> PlatformLink:
    """Store the link's settings (validated by the form); enabling needs a completion URL
    and code, since a participant who finishes must be sent back with them."""
    refuse_if_imported(study, "takes no participants from a platform")
    link = platform_link_for(study)
    for name in LINK_FIELDS:
        setattr(link, name, data[name])
    names = [link.participant_param, link.study_param, link.session_param]
    given = [n for n in names if n]
    if len(set(given)) != len(given):
        raise RecruitmentError(
            "The participant, study and session parameters need different names."
        )
    if link.enabled and not (link.completion_url and link.completion_code):
        raise RecruitmentError(
            "Give the completion URL and code before enabling the link: participants who "
            "finish are sent there with the code."
        )
    with transaction.atomic():
        link.save()
        audit(
            study=study,
            actor=actor,
            verb="platform_link_set",
            enabled=link.enabled,
            places=link.places,
            abandon_minutes=link.abandon_minutes,
        )
    return link


def platform_arrival_url(link: PlatformLink, base: str) -> str:
    """The link to paste into the platform: the study's arrival page, with each
    parameter filled by the platform's placeholder (Prolific's `{{%NAME%}}` form)."""
    params = [p for p in (link.participant_param, link.study_param, link.session_param) if p]
    query = "&".join(f"{p}={{{{%{p}%}}}}" for p in params)
    return f"{base}?{query}"


def completion_redirect_url(link: PlatformLink) -> str:
    """Where a participant who finished goes: the completion URL with the code, in its
    `{code}` placeholder or as the code parameter."""
    url, code = link.completion_url, link.completion_code
    if "{code}" in url:
        return url.replace("{code}", code)
    if not link.code_param:
        return url
    parts = urlsplit(url)
    query = (parts.query + "&" if parts.query else "") + urlencode({link.code_param: code})
    return urlunsplit(parts._replace(query=query))


# --------------------------------------------------------------------------- arrival


@dataclass(frozen=True)
class Arrival:
    participant: PlatformParticipant
    reviewer: Reviewer
    user: Any
    resumed: bool


def _open_link(study: Study) -> PlatformLink:
    link = PlatformLink.objects.filter(study=study, enabled=True).first()
    if link is None:
        raise NoPlatformLink("This study takes no participants through a platform link.")
    if study.status != Study.Status.REVIEWING:
        raise ArrivalRefused(
            "This study is not open for review at the moment. Return it on the platform, "
            "or try again later."
        )
    return link


def _resume(
    found: PlatformParticipant, ids: arrivals.ArrivalIds, cookie_secret: str, now: Any
) -> PlatformParticipant:
    if found.released_at is not None:
        raise ArrivalRefused(
            "Your place in this study was released"
            + (f" ({found.release_reason})" if found.release_reason else "")
            + ". Return the study on the platform."
        )
    by_cookie = bool(cookie_secret) and secrets.compare_digest(cookie_secret, found.secret)
    by_session = bool(ids.session and found.session_id) and secrets.compare_digest(
        ids.session, found.session_id
    )
    if not (by_cookie or by_session):
        raise ArrivalRefused(
            "This participant id already has a place in this study, taken in another "
            "browser. Continue in the browser you started in, or open the study again "
            "from the platform's page."
        )
    found.last_seen_at = now
    found.save(update_fields=["last_seen_at"])
    return found


def _participant_create(*, study: Study, ids: arrivals.ArrivalIds, now: Any) -> PlatformParticipant:
    user = get_user_model().objects.create_user(
        username=f"platform-{secrets.token_hex(8)}", email="", password=None
    )
    for _ in range(5):
        try:
            with transaction.atomic():
                reviewer = Reviewer.objects.create(
                    study=study, user=user, pseudonym=_next_pseudonym(study), joined_at=now
                )
            break
        except IntegrityError:
            continue
    else:
        raise ArrivalRefused("Could not create your place; open the link again.")
    participant = PlatformParticipant.objects.create(
        study=study,
        reviewer=reviewer,
        participant_id=ids.participant,
        platform_study_id=ids.study,
        session_id=ids.session,
        secret=secrets.token_urlsafe(32),
        arrived_at=now,
        last_seen_at=now,
    )
    audit(study=study, actor=None, verb="platform_participant_arrived", reviewer=reviewer.pseudonym)
    return participant


def platform_arrive(
    *, study: Study, query: Mapping[str, str], cookie_secret: str = "", now: Any = None
) -> Arrival:
    """Take an arrival from the study's link: resume the participant's place, or give a
    new one while places remain. Raises ArrivalRefused with a message for them."""
    now = now or timezone.now()
    link = _open_link(study)
    ids = arrivals.arrival_ids(
        query,
        participant_param=link.participant_param,
        study_param=link.study_param,
        session_param=link.session_param,
    )
    if link.platform_study_id and ids.study != link.platform_study_id:
        raise ArrivalRefused(
            "This link belongs to another study on the platform; open the study from its "
            "own page on the platform."
        )
    platform_places_sweep(study=study, now=now)
    with transaction.atomic():
        Study.objects.select_for_update().get(pk=study.pk)
        found = (
            PlatformParticipant.objects.select_related("reviewer__user")
            .filter(study=study, participant_id=ids.participant)
            .first()
        )
        if found is not None:
            found = _resume(found, ids, cookie_secret, now)
            return Arrival(found, found.reviewer, found.reviewer.user, True)
        held = PlatformParticipant.objects.filter(study=study, released_at__isnull=True).count()
        if held >= link.places:
            raise ArrivalRefused(
                "All places in this study are taken. Thank you for your interest: please "
                "return the study on the platform."
            )
        created = _participant_create(study=study, ids=ids, now=now)
    return Arrival(created, created.reviewer, created.reviewer.user, False)


def platform_participant_of(reviewer: Reviewer) -> PlatformParticipant | None:
    """The reviewer's platform row, if they came from a platform; read with the reviewer
    when it was selected with it (the dashboard's cards), else by a query."""
    if Reviewer.platform_participant.is_cached(reviewer):  # type: ignore[attr-defined]
        return getattr(reviewer, "platform_participant", None)
    return PlatformParticipant.objects.filter(reviewer=reviewer).first()


# --------------------------------------------------------------------------- screening, work


def _release(participant: PlatformParticipant, reason: str, now: Any) -> int:
    """Release a place: the reviewer is dropped (their open work withdrawn, as for any
    reviewer who stops) and the place counts no more."""
    n = 0
    if participant.reviewer.dropped_at is None:
        n = reviewer_drop(reviewer=participant.reviewer, actor=None)
    participant.released_at = now
    participant.release_reason = reason
    participant.save(update_fields=["released_at", "release_reason"])
    return n


def participant_work_assign(*, reviewer: Reviewer, seed: int | None = None) -> int:
    """Give an approved participant their load of ideas at once (arrivals.arrival_pick),
    under the study's lock so that two arrivals never both take an idea's last review."""
    study = reviewer.study
    with transaction.atomic():
        Study.objects.select_for_update().get(pk=study.pk)
        memberships: dict[int, list[IdeaCondition]] = {}
        for m in IdeaCondition.objects.filter(study=study).select_related("condition"):
            memberships.setdefault(m.idea_id, []).append(m)
        live = Counter(
            Assignment.objects.filter(study=study)
            .exclude(status=Assignment.Status.WITHDRAWN)
            .values_list("idea_id", flat=True)
        )
        ideas = {}
        offered = []
        for idea in study.ideas.filter(normalization_status__in=REVIEWABLE).select_related(
            "topic", "exclusion"
        ):
            rows = memberships.get(idea.pk)
            if not rows or idea.is_excluded():
                continue
            label = idea_label(idea, rows)
            ideas[label] = idea
            offered.append(
                arrivals.OfferedIdea(
                    id=label,
                    topic=idea.topic.name,
                    conditions=tuple(sorted({m.condition.key for m in rows})),
                    institutions=(idea.author_institution,) if idea.author_institution else (),
                    reviews=live[idea.pk],
                )
            )
        load = min(max(reviewer.preferred_load or study.min_load, study.min_load), study.max_load)
        picked = arrivals.arrival_pick(
            offered,
            condition_kinds={c.key: c.kind for c in study.conditions.all()},
            topics=list(reviewer.topic_preferences or []),
            load=load,
            institution=reviewer.institution,
            max_reviews=study.max_reviews_per_idea,
            seed=seed if seed is not None else secrets.randbits(32),
        )
        Assignment.objects.bulk_create(
            [Assignment(study=study, reviewer=reviewer, idea=ideas[label]) for label in picked]
        )
        audit(
            study=study,
            actor=None,
            verb="platform_work_assigned",
            reviewer=reviewer.pseudonym,
            n=len(picked),
        )
    return len(picked)


def platform_profile_save(*, reviewer: Reviewer, data: dict[str, Any], now: Any = None) -> str:
    """A participant's profile: saved as any reviewer's, then screened at once by the
    study's rule (a participant cannot wait for a person), and an approved one given
    work. Returns "approved", "rejected" or "no_work"; the place of a participant who
    cannot continue is released."""
    now = now or timezone.now()
    participant = platform_participant_of(reviewer)
    if participant is None:
        raise RecruitmentError("This profile did not come through a platform link.")
    reviewer_profile_save(reviewer=reviewer, data=data)
    reviewer.refresh_from_db()
    if not reviewer.meets_screening_rule():
        reason = (
            f"below the study's screening rule ({reviewer.study.screening_min_papers} or more "
            "papers at major venues)"
        )
        with transaction.atomic():
            reviewer_screen(reviewer=reviewer, approve=False, reason=reason, actor=None)
            _release(participant, "screened out", now)
        return "rejected"
    reviewer_screen(reviewer=reviewer, approve=True, reason="meets the rule", actor=None)
    if participant_work_assign(reviewer=reviewer) == 0:
        _release(participant, "no ideas left to review", now)
        return "no_work"
    return "approved"


# --------------------------------------------------------------------------- completion


def participant_unfinished(reviewer: Reviewer) -> int:
    """How many of the reviewer's reviews and pair ratings are still open."""
    return (
        Assignment.objects.filter(
            reviewer=reviewer, status__in=[Assignment.Status.PENDING, Assignment.Status.DRAFT]
        ).count()
        + PairTask.objects.filter(reviewer=reviewer, status=PairTask.Status.PENDING).count()
    )


def platform_complete(*, reviewer: Reviewer, now: Any = None) -> str:
    """Mark the participant's work complete and return the platform's completion URL
    with the study's code; refused while work is open."""
    participant = platform_participant_of(reviewer)
    if participant is None or participant.released_at is not None:
        raise RecruitmentError("There is no open place of yours in this study to complete.")
    link = platform_link_for(reviewer.study)
    submitted = Assignment.objects.filter(
        reviewer=reviewer, status=Assignment.Status.SUBMITTED
    ).count()
    if not submitted or participant_unfinished(reviewer):
        raise RecruitmentError("Submit every review assigned to you first.")
    if participant.completed_at is None:
        participant.completed_at = now or timezone.now()
        participant.save(update_fields=["completed_at"])
        audit(
            study=reviewer.study,
            actor=reviewer.user,
            verb="platform_participant_completed",
            reviewer=reviewer.pseudonym,
        )
    return completion_redirect_url(link)


@dataclass(frozen=True)
class PlatformCard:
    """What the reviewer's home page says to a platform participant about finishing."""

    platform: str
    can_complete: bool
    completed: bool
    released: bool


def platform_card(reviewer: Reviewer) -> PlatformCard | None:
    participant = platform_participant_of(reviewer)
    if participant is None:
        return None
    submitted = Assignment.objects.filter(
        reviewer=reviewer, status=Assignment.Status.SUBMITTED
    ).exists()
    return PlatformCard(
        platform=platform_link_for(reviewer.study).platform,
        can_complete=submitted and not participant_unfinished(reviewer),
        completed=participant.completed_at is not None,
        released=participant.released_at is not None,
    )


# --------------------------------------------------------------------------- abandonment


def _last_activity(participant: PlatformParticipant) -> Any:
    rev = participant.reviewer
    seen = Assignment.objects.filter(reviewer=rev).aggregate(m=Max("last_seen_at"))["m"]
    saved = Review.objects.filter(reviewer=rev).aggregate(
        d=Max("draft_saved_at"), s=Max("submitted_at")
    )
    times = [
        participant.last_seen_at,
        rev.consent_at,
        rev.profile_completed_at,
        seen,
        saved["d"],
        saved["s"],
    ]
    return max(t for t in times if t is not None)


def platform_places_sweep(*, study: Study | None = None, now: Any = None) -> int:
    """Release the places of participants idle longer than their study's abandonment
    time who have not completed: their open work is withdrawn. Returns how many."""
    if study is not None:
        refuse_if_imported(study, "takes no participants through a platform link")
    now = now or timezone.now()
    links = PlatformLink.objects.filter(enabled=True)
    if study is not None:
        links = links.filter(study=study)
    released = 0
    for link in links.select_related("study"):
        cutoff = now - timedelta(minutes=link.abandon_minutes)
        idle = PlatformParticipant.objects.filter(
            study=link.study,
            released_at__isnull=True,
            completed_at__isnull=True,
            last_seen_at__lt=cutoff,
        ).select_related("reviewer__study", "reviewer__user")
        for participant in idle:
            if _last_activity(participant) >= cutoff:
                continue
            with transaction.atomic():
                _release(participant, f"no activity for {link.abandon_minutes} minutes", now)
                audit(
                    study=link.study,
                    actor=None,
                    verb="platform_place_released",
                    reviewer=participant.reviewer.pseudonym,
                )
            released += 1
    return released


# --------------------------------------------------------------------------- bulk files


@dataclass
class PlatformDecisions:
    """What to tell the platform, from the study's payment run: whom to approve, whom to
    reject and why, what bonus each is owed; and who is left out and why."""

    approve: list[str] = field(default_factory=list)
    reject: list[tuple[str, str]] = field(default_factory=list)
    bonus: list[tuple[str, Decimal]] = field(default_factory=list)
    waiting: list[tuple[str, str]] = field(default_factory=list)
    currency: str = "USD"


def _rejection_reasons(study: Study) -> dict[int, list[str]]:
    reasons: dict[int, list[str]] = {}
    for reviewer_id, reason in ReviewAcceptance.objects.filter(
        review__study=study, decision=pay.REJECTED
    ).values_list("review__reviewer_id", "reason"):
        reasons.setdefault(reviewer_id, []).append(reason)
    return reasons


def platform_decisions(*, study: Study) -> PlatformDecisions:
    """Approve a participant with an accepted review and no review still undecided; reject
    one whose every submitted review was rejected (the reasons joined); bonus = what the
    study's payments owe them. Participants without submitted reviews are left to the
    platform (returned or timed out there)."""
    run = study_payment_run(study=study)
    owed = {r.reviewer: r for r in run.reviewers}
    reasons = _rejection_reasons(study)
    out = PlatformDecisions(currency=run.rates.currency)
    for p in PlatformParticipant.objects.filter(study=study).select_related("reviewer"):
        pid, row = p.participant_id, owed.get(p.reviewer.pseudonym)
        if row is None or row.submitted == 0:
            out.waiting.append((pid, p.release_reason or "no submitted review"))
        elif row.pending:
            out.waiting.append(
                (pid, f"{counted(row.pending, 'review')} not yet accepted or rejected")
            )
        elif row.accepted:
            out.approve.append(pid)
            if row.amount > 0:
                out.bonus.append((pid, row.amount))
        else:
            text = "; ".join(dict.fromkeys(r for r in reasons.get(p.reviewer_id, []) if r))
            out.reject.append((pid, text or "reviews rejected"))
    return out


def _line(*cells: str) -> str:
    # Ids are checked on arrival (letters, digits, - _ . : @); reasons are the owner's
    # text, quoted as CSV so a comma stays in its cell, and neutralised like every CSV
    # the site writes (a cell starting "=" is not a formula).
    buf = io.StringIO()
    csvsafe.writer(buf, lineterminator="\n").writerow(cells)
    return buf.getvalue()


def platform_file(*, study: Study, kind: str) -> str:
    """One bulk file: "approve" (one participant id a line), "reject"
    (participant_id,reason) or "bonus" (participant_id,amount with two decimals), without
    a header line, as the platform's bulk boxes read them."""
    decisions = platform_decisions(study=study)
    if kind == "approve":
        return "".join(f"{pid}\n" for pid in decisions.approve)
    if kind == "reject":
        return "".join(_line(pid, reason) for pid, reason in decisions.reject)
    if kind == "bonus":
        return "".join(_line(pid, f"{amount:.2f}") for pid, amount in decisions.bonus)
    raise ValueError(f"unknown platform file {kind!r}")


def platform_participant_rows(*, study: Study) -> list[dict[str, Any]]:
    """The participants page's rows: platform ids beside pseudonyms (the team only)."""
    open_work = Counter(
        Assignment.objects.filter(
            study=study, status__in=[Assignment.Status.PENDING, Assignment.Status.DRAFT]
        ).values_list("reviewer_id", flat=True)
    )
    done = Counter(
        Assignment.objects.filter(study=study, status=Assignment.Status.SUBMITTED).values_list(
            "reviewer_id", flat=True
        )
    )
    rows = []
    for p in PlatformParticipant.objects.filter(study=study).select_related("reviewer"):
        if p.released_at:
            state = f"released: {p.release_reason}"
        elif p.completed_at:
            state = "completed"
        else:
            state = p.reviewer.status_label
        rows.append(
            {
                "participant_id": p.participant_id,
                "session_id": p.session_id,
                "pseudonym": p.reviewer.pseudonym,
                "arrived_at": p.arrived_at,
                "state": state,
                "submitted": done[p.reviewer_id],
                "open": open_work[p.reviewer_id],
            }
        )
    return rows


def platform_places_held(*, study: Study) -> int:
    return PlatformParticipant.objects.filter(Q(study=study) & Q(released_at__isnull=True)).count()
