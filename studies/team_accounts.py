"""What studies gives the accounts app (registered in `StudiesConfig.ready()`): joining a
study's team when an owner's invitation is accepted, and handing a deactivated
researcher's studies to a successor. Both write the study's audit events."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from accounts.services import AccountError, researcher_invitation_create

from .models import Study, StudyMember
from .services.audit import audit
from .services.errors import SetupError


def member_invite(*, study: Study, email: str, role: str, actor: Any) -> str:
    """Invite an address with no account to become a researcher and join the team as
    `role` (IDEAREVIEW_OWNER_INVITES); returns the link (also mailed)."""
    if not settings.IDEAREVIEW_OWNER_INVITES:
        raise SetupError(
            "no account uses this address; ask an administrator to invite them as a researcher"
        )
    if role not in StudyMember.Role.values:
        raise SetupError(f"unknown role {role!r}")
    with transaction.atomic():
        try:
            invitation, link = researcher_invitation_create(
                email=email,
                invited_by=actor,
                team_id=study.pk,
                team_role=role,
                team_label=study.title,
            )
        except AccountError as exc:
            raise SetupError(str(exc)) from None
        audit(study=study, actor=actor, verb="member_invited", email=invitation.email, role=role)
    return link


def team_join(*, team_id: int, role: str, user: Any, invited_by: Any) -> None:
    """An accepted owner's invitation: the new researcher joins the team (a study gone
    since, or a reviewer of it, is skipped: the account is made all the same)."""
    study = Study.objects.filter(pk=team_id).first()
    if study is None or study.reviewers.filter(user=user).exists():
        return
    _member, created = StudyMember.objects.get_or_create(
        study=study, user=user, defaults={"role": role, "added_by": invited_by}
    )
    if created:
        audit(
            study=study,
            actor=invited_by,
            verb="member_added",
            user=user.pk,
            role=role,
            invited=True,
        )


class StudyHandover:
    """A deactivated researcher's studies: the successor becomes an owner of each study
    the researcher owned, and the researcher leaves every team. `Study.owner` stays the
    creator."""

    def owned(self, user: Any) -> list[str]:
        studies = Study.objects.filter(
            members__user=user, members__role=StudyMember.Role.OWNER
        ).order_by("title")
        return [f"{s.title} ({s.slug})" for s in studies]

    def hand_over(self, *, user: Any, successor: Any, actor: Any) -> int:
        handed = 0
        memberships = StudyMember.objects.filter(user=user).select_related("study")
        for member in memberships:
            study = member.study
            if member.role == StudyMember.Role.OWNER:
                if study.reviewers.filter(user=successor).exists():
                    raise ValueError(
                        f"{successor.get_username()} reviews in “{study.title}” and so cannot own it"
                    )
                StudyMember.objects.update_or_create(
                    study=study,
                    user=successor,
                    defaults={"role": StudyMember.Role.OWNER},
                    create_defaults={"role": StudyMember.Role.OWNER, "added_by": actor},
                )
                audit(
                    study=study,
                    actor=actor,
                    verb="ownership_handed_over",
                    user=user.pk,
                    successor=successor.pk,
                )
                handed += 1
            member.delete()
            audit(study=study, actor=actor, verb="member_removed", user=user.pk, deactivated=True)
        return handed


STUDY_HANDOVER = StudyHandover()
