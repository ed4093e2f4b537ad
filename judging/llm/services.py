"""Endpoint configurations: creating one and the ones a researcher may use."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from .models import JudgeConfig


def judge_config_create(*, name: str, actor: Any = None, **fields: Any) -> JudgeConfig:
    """A judge config: a provider's, or a researcher's own endpoint with one of their own
    saved keys (EndpointKey), never a key in plain text."""
    if "api_key" in fields:
        raise ValueError("save the key as an EndpointKey (encrypted), never on the config")
    key = fields.get("endpoint_key")
    if key is not None and key.owner_id != getattr(actor, "pk", None):
        raise ValueError("a judge may use only its creator's own keys")
    return JudgeConfig.objects.create(
        name=name, created_by=actor if getattr(actor, "pk", None) else None, **fields
    )


def judge_configs_for(user: Any) -> QuerySet[JudgeConfig]:
    """Judges a researcher may run: their own and shared ones (created by nobody, e.g. from
    the command line). Rows hold no keys, but endpoints can be private."""
    uid = getattr(user, "pk", None) or 0
    return JudgeConfig.objects.filter(Q(created_by_id=uid) | Q(created_by__isnull=True))
