"""The study's audit log: every service writes its events here, each chained to the one
before by its hash, so an edited or deleted event shows (`audit_chain_check`).
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from ..models import (
    AuditEvent,
    Study,
)
from ..protocol.auditchain import GENESIS, ChainCheck, chain_verify, entry_hash

# The advisory-lock class that serialises appends to one audit chain on PostgreSQL
# (SQLite's IMMEDIATE transactions serialise every write already).
_AUDIT_LOCK_CLASS = 0x1DEA


def audit(*, study: Study | None, actor: Any, verb: str, **detail: Any) -> AuditEvent:
    """Append an entry to the study's audit chain (the server's without a study)."""
    actor = actor if getattr(actor, "pk", None) else None
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)",
                    [_AUDIT_LOCK_CLASS, study.pk if study is not None else 0],
                )
        chain = (
            AuditEvent.objects.filter(study=study)
            if study
            else AuditEvent.objects.filter(study__isnull=True)
        )
        last = chain.order_by("-seq").values_list("seq", "hash").first()
        seq, prev = (last[0] + 1, last[1]) if last else (1, GENESIS)
        at = timezone.now()
        name = actor.get_username() if actor is not None else ""
        # Round-trip the detail through JSON first: what is hashed is what is stored.
        detail = json.loads(json.dumps(detail))
        return AuditEvent.objects.create(
            study=study,
            actor=actor,
            verb=verb,
            detail=detail,
            at=at,
            seq=seq,
            actor_name=name,
            prev_hash=prev,
            hash=entry_hash(prev=prev, seq=seq, verb=verb, detail=detail, at=at, actor=name),
        )


def audit_chain_check(study: Study | None) -> ChainCheck:
    """Verify the study's audit chain (the server's without a study) from its rows."""
    chain = (
        AuditEvent.objects.filter(study=study)
        if study
        else AuditEvent.objects.filter(study__isnull=True)
    )
    rows = chain.order_by("seq").values(
        "seq", "verb", "detail", "at", "prev_hash", "hash", "actor_name"
    )
    return chain_verify({**row, "actor": row["actor_name"]} for row in rows.iterator())
