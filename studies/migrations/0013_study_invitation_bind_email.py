"""Binding invitation links to the invited address becomes a per-study setting. Studies
that exist keep what the deployment's IDEAREVIEW_INVITATION_BIND_EMAIL says when this
migration runs, which is how their links were checked until now."""

from django.db import migrations, models

import studies.models


class Migration(migrations.Migration):
    dependencies = [
        ("studies", "0012_report_versions_in_storage"),
    ]

    operations = [
        migrations.AddField(
            model_name="study",
            name="invitation_bind_email",
            field=models.BooleanField(
                default=studies.models.invitation_bind_email_default,
                help_text="Only an account with the invited email address may take an invitation link (a forwarded link is no use to anyone else).",
            ),
        ),
    ]
