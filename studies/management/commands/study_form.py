"""Show a study's review form, or give the study another one while it has no reviews.

manage.py study_form SLUG                 # the form: metrics, scales, rationale rules
manage.py study_form SLUG execution       # a built-in (si2024, execution, KEY@VERSION)
manage.py study_form SLUG my-form.json    # a form file (docs/forms.md)
manage.py study_form SLUG --json          # the form as a form file
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from studies.models import Study
from studies.protocol.forms import FormDefinition, FormFileError
from studies.reviewer_forms import review_form_resolve
from studies.services.study import study_form_set


class Command(BaseCommand):
    help = "Show a study's review form, or set it (a built-in name or a JSON form file)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="the study's slug")
        parser.add_argument("form", nargs="?", default="", help="built-in name or JSON file")
        parser.add_argument("--json", action="store_true", help="print the form as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        study = Study.objects.filter(slug=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study {opts['study']!r}")
        if opts["form"]:
            try:
                definition = review_form_resolve(opts["form"])
                study_form_set(study=study, definition=definition)
            except (FormFileError, ValueError) as exc:
                raise CommandError(str(exc)) from exc
        definition = study.form_definition()
        if opts["json"]:
            self.stdout.write(definition.to_json())
        else:
            self._describe(definition)

    def _describe(self, form: FormDefinition) -> None:
        self.stdout.write(f"{form.title} ({form.key} v{form.version})")
        for m in form.metrics:
            words = form.rationale_words(m)
            rule = {"required": f"rationale ≥ {words} words", "optional": "rationale optional"}
            anchored = ", ".join(str(v) for v in sorted(m.anchors)) or "none"
            self.stdout.write(
                f"  {m.key}: {m.label}, {m.range_text()}, "
                f"{rule.get(m.rationale_mode, 'no rationale')}; anchored levels: {anchored}"
            )
        for q in form.questions:
            self.stdout.write(f"  {q.key}: {q.label}, {q.range_text()}")
