"""The audit log becomes a hash chain per study (and one for the server's own events):
existing entries are numbered in the order they were written and hashed."""

import hashlib
import json
from datetime import UTC

from django.db import migrations, models

GENESIS = "0" * 64


def _hash(prev, seq, verb, detail, at, actor):
    # The same arithmetic as studies.protocol.auditchain.entry_hash, frozen here so this
    # migration keeps meaning what it meant when it ran.
    body = json.dumps(
        {
            "seq": seq,
            "verb": verb,
            "detail": detail,
            "at": at.astimezone(UTC).isoformat(timespec="microseconds"),
            "actor": actor,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(f"{prev}\n{body}".encode()).hexdigest()


def chain_existing(apps, schema_editor):
    AuditEvent = apps.get_model("studies", "AuditEvent")
    chains = {}
    for e in AuditEvent.objects.select_related("actor").order_by("at", "id").iterator():
        prev, seq = chains.get(e.study_id, (GENESIS, 0))
        seq += 1
        e.seq, e.prev_hash = seq, prev
        e.actor_name = e.actor.username if e.actor_id else ""
        e.hash = _hash(prev, seq, e.verb, e.detail, e.at, e.actor_name)
        e.save(update_fields=["seq", "prev_hash", "actor_name", "hash"])
        chains[e.study_id] = (e.hash, seq)


class Migration(migrations.Migration):
    dependencies = [
        ("studies", "0014_reviewer_payment_handle"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="seq",
            field=models.PositiveIntegerField(default=0),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="auditevent",
            name="actor_name",
            field=models.CharField(blank=True, max_length=150),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="prev_hash",
            field=models.CharField(default="", max_length=64),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="auditevent",
            name="hash",
            field=models.CharField(default="", max_length=64),
            preserve_default=False,
        ),
        migrations.RunPython(chain_existing, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="auditevent",
            constraint=models.UniqueConstraint(
                condition=models.Q(("study__isnull", False)),
                fields=("study", "seq"),
                name="auditevent_study_seq_unique",
            ),
        ),
        migrations.AddConstraint(
            model_name="auditevent",
            constraint=models.UniqueConstraint(
                condition=models.Q(("study__isnull", True)),
                fields=("seq",),
                name="auditevent_server_seq_unique",
            ),
        ),
    ]
