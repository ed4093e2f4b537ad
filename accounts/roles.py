"""Who is a researcher. Researchers may create studies: the `studies.add_study`
permission, granted directly, through the Researchers group, or by being a superuser.
The permission is named here by its label only: this app imports no other app."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db.models import Q, QuerySet

RESEARCHERS_GROUP = "Researchers"
CREATE_STUDY_PERMISSION = "studies.add_study"


def is_researcher(user: Any) -> bool:
    return bool(user.is_authenticated and user.has_perm(CREATE_STUDY_PERMISSION))


def researcher_grant(*, user: Any) -> None:
    """Put the user in the Researchers group (created with its permission if needed)."""
    group, _ = Group.objects.get_or_create(name=RESEARCHERS_GROUP)
    app_label, codename = CREATE_STUDY_PERMISSION.split(".")
    permission = Permission.objects.get(content_type__app_label=app_label, codename=codename)
    group.permissions.add(permission)
    user.groups.add(group)


def researchers() -> QuerySet:
    """Every account that may create studies, active or not (`is_researcher` asks the
    same of one logged-in user)."""
    app_label, codename = CREATE_STUDY_PERMISSION.split(".")
    perm = Q(content_type__app_label=app_label, codename=codename)
    permission = Permission.objects.filter(perm)
    return (
        get_user_model()
        .objects.filter(
            Q(is_superuser=True)
            | Q(user_permissions__in=permission)
            | Q(groups__permissions__in=permission)
        )
        .distinct()
    )
