"""Create a study from the command line.

    python manage.py study_create ideas-2025 --title "Ideas 2025" --owner ada \
        --form si2024 --conditions Human,AI --baseline Human --topics "Math,Coding"

--form takes a built-in form name, a stored form's key or a JSON form file
(docs/forms.md). Conditions starting with "Human" are human, the rest AI; write
KEY:human or KEY:ai to say so. The owner must be a researcher (create_researcher).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from studies.protocol.forms import FormFileError
from studies.reviewer_forms import review_form_resolve
from studies.services.study import (
    SetupError,
    conditions_parse,
    is_researcher,
    study_create,
    topics_parse,
)


class Command(BaseCommand):
    help = "Create a study with its review form, conditions, baseline and topics."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--title", default="")
        parser.add_argument("--description", default="")
        parser.add_argument("--owner", required=True, help="a researcher's username")
        parser.add_argument("--form", default="si2024", help="built-in name or JSON form file")
        parser.add_argument("--conditions", default="Human,AI", help="e.g. Human,AI,AI_Rerank")
        parser.add_argument("--baseline", default="", help="default: the first human condition")
        parser.add_argument("--topics", default="", help='comma-separated, e.g. "Math,Coding"')

    def handle(self, *args: Any, **opts: Any) -> None:
        owner = get_user_model().objects.filter(username=opts["owner"]).first()
        if owner is None:
            raise CommandError(f"--owner {opts['owner']!r}: no such user")
        if not is_researcher(owner):
            raise CommandError(
                f"--owner {opts['owner']!r} is not a researcher; run create_researcher first"
            )
        try:
            form = review_form_resolve(opts["form"])
            conditions = conditions_parse(opts["conditions"])
            topics = topics_parse(opts["topics"])
        except FormFileError as exc:
            raise CommandError(f"--form: {exc}") from None
        except SetupError as exc:
            raise CommandError(str(exc)) from None
        baseline = opts["baseline"] or next((k for k, kind in conditions if kind == "human"), "")
        try:
            study = study_create(
                owner=owner,
                slug=opts["slug"],
                title=opts["title"],
                description=opts["description"],
                form=form,
                conditions=conditions,
                baseline_condition=baseline,
                topics=topics,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"study {study.slug} created: form {form.key} v{form.version}, conditions "
            f"{', '.join(k for k, _ in conditions) or '(none yet)'}, baseline "
            f"{baseline or '(none)'}, {len(topics)} topics"
        )
