"""Endpoint configurations: creating, changing and removing one, and the ones a study's
team may see and use.

Each of those changes is written to the study's audit log (the server's for an
administrator's judge) by the recorder the studies app registers in its `ready()`
(`judge_config_recorder_register`): this layer imports neither app.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet

from .models import JudgeConfig


class JudgeConfigRefused(ValueError):
    """The judge cannot be made or used here; the message says why."""


# A recorder gets the study (None: the administrator's judge), the actor, a verb and the
# event's detail, inside the change's transaction.
JudgeConfigRecorder = Callable[..., object]
_recorders: list[JudgeConfigRecorder] = []

# What an audit entry tells of a judge: every setting of where its calls go and how (a
# key by its label); its name, team, creator and the legacy key name aside.
_DESCRIBED = tuple(
    f.name
    for f in JudgeConfig._meta.concrete_fields
    if f.name not in ("id", "name", "study", "created_by", "created_at", "api_key_env")
)


def judge_config_recorder_register(recorder: JudgeConfigRecorder) -> None:
    if recorder not in _recorders:
        _recorders.append(recorder)


def _record(config: JudgeConfig, actor: Any, verb: str, **detail: Any) -> None:
    study = config.study if config.study_id else None
    for recorder in _recorders:
        recorder(study=study, actor=actor, verb=verb, config=config.pk, name=config.name, **detail)


def _value(config: JudgeConfig, field: str) -> Any:
    """A field as the audit log states it: JSON-safe, a saved key by its label only."""
    if field == "endpoint_key":
        return str(config.endpoint_key) if config.endpoint_key_id else None
    if field in ("study", "created_by"):
        return getattr(config, f"{field}_id")
    value = getattr(config, field)
    return (
        value if isinstance(value, (str, int, float, bool, dict, list, type(None))) else str(value)
    )


def _described(config: JudgeConfig) -> dict[str, Any]:
    return {
        field: _value(config, field)
        for field in _DESCRIBED
        if _value(config, field) not in ("", None)
    }


def judge_config_create(
    *, name: str, study: Any = None, actor: Any = None, **fields: Any
) -> JudgeConfig:
    """A judge config of `study`'s team: a provider's, or a researcher's own endpoint with
    one of their own saved keys (EndpointKey), never a key in plain text. Without a study
    it is the administrator's, offered to every study (the command line only)."""
    if "api_key" in fields:
        raise ValueError("save the key as an EndpointKey (encrypted), never on the config")
    key = fields.get("endpoint_key")
    if key is not None and key.owner_id != getattr(actor, "pk", None):
        raise ValueError("a judge may use only its creator's own keys")
    name = name.strip()
    if judge_configs_of(study).filter(name=name).exists():
        raise JudgeConfigRefused(f"this study has a judge named {name!r} already")
    with transaction.atomic():
        config = JudgeConfig.objects.create(
            name=name,
            study=study,
            created_by=actor if getattr(actor, "pk", None) else None,
            **fields,
        )
        _record(config, actor, "judge_config_added", **_described(config))
    return config


def judge_config_update(*, config: JudgeConfig, actor: Any = None, **fields: Any) -> JudgeConfig:
    """Change a judge's endpoint, model or sampling (`fields`: the model's fields); the
    audit entry names each changed field with its old and new value. A new name must be
    free among the judges the study's team sees; a key must be the actor's own."""
    if "api_key" in fields:
        raise ValueError("save the key as an EndpointKey (encrypted), never on the config")
    if {"study", "created_by"} & set(fields):
        raise ValueError("a judge stays with the team it was made for")
    if fields.get("endpoint_key") is not None and fields["endpoint_key"].owner_id != getattr(
        actor, "pk", None
    ):
        raise ValueError("a judge may use only its creator's own keys")
    if "name" in fields:
        fields["name"] = fields["name"].strip()
        taken = judge_configs_of(config.study if config.study_id else None)
        if taken.filter(name=fields["name"]).exclude(pk=config.pk).exists():
            raise JudgeConfigRefused(f"this study has a judge named {fields['name']!r} already")
    with transaction.atomic():
        before = {field: _value(config, field) for field in fields}
        for field, value in fields.items():
            setattr(config, field, value)
        changed = {
            field: [before[field], _value(config, field)]
            for field in fields
            if before[field] != _value(config, field)
        }
        if changed:
            config.save(update_fields=list(fields))
            _record(config, actor, "judge_config_changed", changed=changed)
    return config


def judge_config_admin_saved(
    *, config: JudgeConfig, before: JudgeConfig | None, actor: Any
) -> None:
    """Record a judge Django's admin site has saved: added (`before` None) or changed
    (`before`: the row as it was), with its study, name and creator among the fields."""
    if before is None:
        _record(config, actor, "judge_config_added", via="admin", **_described(config))
        return
    fields = ("name", "study", "created_by", *_DESCRIBED)
    changed = {
        field: [_value(before, field), _value(config, field)]
        for field in fields
        if _value(before, field) != _value(config, field)
    }
    if changed:
        _record(config, actor, "judge_config_changed", via="admin", changed=changed)


def judge_configs_of(study: Any) -> QuerySet[JudgeConfig]:
    """The judges a study's team sees and uses: the study's own and the administrator's
    (no study, no creator). Another study's are never among them, whoever made them."""
    installation = Q(study__isnull=True, created_by__isnull=True)
    if study is None:
        return JudgeConfig.objects.filter(installation)
    return JudgeConfig.objects.filter(Q(study_id=study.pk) | installation)


def judge_config_usable(config: JudgeConfig | None, study: Any) -> bool:
    """Whether `study`'s team may use `config` (no judge: trivially yes)."""
    if config is None:
        return True
    return judge_configs_of(study).filter(pk=config.pk).exists()


def judge_config_delete(*, config: JudgeConfig, actor: Any = None) -> None:
    """Remove a study's judge; one that judge runs used stays, since their results and
    calls name it."""
    # A panel member counts as used too (its seats: the reverse name of judging's rows).
    if config.runs.exists() or config.panel_seats.exists():  # type: ignore[attr-defined]
        raise JudgeConfigRefused(
            f"judge {config.name!r} stays: judge runs used it and their results name it"
        )
    with transaction.atomic():
        _record(config, actor, "judge_config_removed", **_described(config))
        config.delete()
