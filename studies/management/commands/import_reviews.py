"""Import a review dataset into a study (created if it does not exist).

    python manage.py import_reviews --format si2024 --reviews FILE.json --titles FILE.csv --study si2024
    python manage.py import_reviews --format generic --reviews FILE.csv --study S \
        --form execution --map idea_id=paper --human-conditions Human
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from studies.importers import ImportFailed, format_quality_summary
from studies.models import Study
from studies.protocol.forms import DEFAULT_FORM, FormDefinition, FormFileError
from studies.reviewer_forms import review_form_resolve
from studies.services.study import study_create
from studies.services.transfer import reviews_import, reviews_parse


class Command(BaseCommand):
    help = "Import reviews (si2024 release or generic CSV/JSON) into a study, atomically."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", choices=["si2024", "generic"], required=True)
        parser.add_argument("--reviews", required=True, type=Path)
        parser.add_argument("--titles", type=Path, help="si2024: the id → title CSV")
        parser.add_argument("--study", required=True, help="study slug; created if missing")
        parser.add_argument(
            "--owner", help="username owning a new study (default: first superuser)"
        )
        parser.add_argument("--title", default="", help="title of a new study")
        parser.add_argument("--baseline", default="", help="baseline condition key")
        parser.add_argument(
            "--form",
            default="",
            help="review form of a new study: a built-in name (si2024, execution, KEY@VERSION) "
            "or a JSON form file (docs/forms.md); default si2024. An existing study keeps its "
            "own form; naming another one is an error.",
        )
        parser.add_argument(
            "--map",
            action="append",
            default=[],
            metavar="FIELD=COLUMN",
            help="generic: which column holds a field (idea_id, condition, topic, reviewer_id, "
            "review_id, title, institution, familiarity, confidence, minutes, consent, "
            "honor_code, timestamp, and each metric of the study's form as <metric> and "
            "<metric>_rationale); repeatable. A field the form lacks, or a column the file "
            "lacks, is an error.",
        )
        parser.add_argument("--mapping-file", type=Path, help="generic: JSON object FIELD → COLUMN")
        parser.add_argument(
            "--human-conditions",
            default="",
            help="generic: comma-separated condition keys of kind human (others are ai)",
        )
        parser.add_argument("--json", action="store_true", help="print the summary as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        reviews_path: Path = opts["reviews"]
        if not reviews_path.exists():
            raise CommandError(f"{reviews_path}: no such file")
        titles_path: Path | None = opts["titles"]
        if titles_path is not None and not titles_path.exists():
            raise CommandError(f"{titles_path}: no such file")
        mapping: dict[str, str] = {}
        if opts["mapping_file"]:
            try:
                mapping.update(json.loads(Path(opts["mapping_file"]).read_text()))
            except (OSError, json.JSONDecodeError) as exc:
                raise CommandError(f"{opts['mapping_file']}: {exc}") from exc
        for item in opts["map"]:
            if "=" not in item:
                raise CommandError(f"--map {item!r}: expected FIELD=COLUMN")
            k, v = item.split("=", 1)
            mapping[k.strip()] = v.strip()

        form = self._form(opts["form"])
        try:
            # One transaction: a refused file leaves no study, idea or review behind.
            with transaction.atomic():
                study = Study.objects.filter(slug=opts["study"]).first()
                if study is None:
                    study = study_create(
                        owner=self._owner(opts["owner"]),
                        slug=opts["study"],
                        title=opts["title"],
                        baseline_condition=opts["baseline"],
                        form=form or DEFAULT_FORM,
                    )
                elif form is not None and study.form_definition() != form:
                    have = study.review_form
                    raise CommandError(
                        f"--form {opts['form']}: study {study.slug} already uses the review form "
                        f"{have.key} v{have.version}; its form cannot change here"
                    )
                parsed = reviews_parse(
                    study=study,
                    fmt=opts["format"],
                    reviews=reviews_path.read_bytes(),
                    reviews_name=reviews_path.name,
                    titles=titles_path.read_bytes() if titles_path else None,
                    titles_name=titles_path.name if titles_path else "",
                    mapping=mapping,
                    human_conditions=[c for c in opts["human_conditions"].split(",") if c],
                )
                summary = reviews_import(study=study, parsed=parsed, kind=opts["format"])
        except ImportFailed as exc:
            raise CommandError(str(exc)) from exc
        if opts["json"]:
            self.stdout.write(json.dumps(summary, indent=2))
        else:
            for line in format_quality_summary(summary):
                self.stdout.write(line)
            self.stdout.write(f"study: {study.slug} ({study.reviews.count()} reviews in total)")

    def _form(self, name: str) -> FormDefinition | None:
        if not name:
            return None
        try:
            return review_form_resolve(name)
        except FormFileError as exc:
            raise CommandError(f"--form: {exc}") from exc

    def _owner(self, username: str | None) -> Any:
        User = get_user_model()
        if username:
            user = User.objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"--owner {username!r}: no such user")
            return user
        user = User.objects.filter(is_superuser=True).order_by("pk").first()
        if user is None:
            user, _ = User.objects.get_or_create(username="analyst", defaults={"is_staff": True})
        return user
