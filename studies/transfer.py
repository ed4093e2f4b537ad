"""A whole study as one JSON file, and back: `study_export` and `study_import`.

The file holds every row that belongs to the study, in sections that apps register:
studies registers its own models here, judging registers its runs, calls and outcomes
from `judging/apps.py` (studies never imports judging's runs). Two kinds of rows:

- **Study rows** (ideas, reviews, assignments, jobs, judge runs, calls, ...) keep their
  primary keys, so ids stored inside JSON fields (a job's idea ids, a run's parameters)
  stay right. Importing therefore needs a database where those ids are free: an empty
  one, or one that never held this study. A clash is refused before anything is written.
- **Shared rows** (users, review forms, judge configs, reference corpora) belong to the
  installation, not to the study. They are written by natural key (a username, a form's
  key and version, a config's name), matched by it on import and created when missing;
  foreign keys to them are written as that natural key. Users come without passwords:
  imported accounts must set one (password reset) before they can log in.

Rows are written in a fixed order (sections in registration order, rows by primary key,
shared rows by natural key, every JSON object with sorted keys), so exporting, importing
into an empty database and exporting again gives the same file byte for byte.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.core import serializers
from django.core.management.color import no_style
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, models, transaction

from . import csvsafe
from . import models as m
from .protocol import jsonsafe

FORMAT = "ideareview-study"
VERSION = 1


class TransferError(ValueError):
    """The file cannot be imported (the message says why); nothing was written."""


@dataclass(frozen=True)
class StudySection:
    """Rows of one model that belong to a study."""

    model: type[models.Model]
    rows: Callable[[m.Study], models.QuerySet]


@dataclass(frozen=True)
class SharedModel:
    """An installation-wide model referenced by study rows, written by natural key."""

    model: type[models.Model]
    key: tuple[str, ...]  # the fields that identify a row across installations
    fields: tuple[str, ...]  # what is written and created (besides the key)


MOVED_LABELS = {"judging.judgeconfig": "llm.judgeconfig", "judging.llmcall": "llm.llmcall"}
"""Models that moved app since files were written: their old labels still read."""

STUDY_SECTIONS: list[StudySection] = []
SHARED_MODELS: dict[str, SharedModel] = {}


def transfer_section_register(model: type[models.Model], rows: Callable[..., Any]) -> None:
    if all(s.model is not model for s in STUDY_SECTIONS):
        STUDY_SECTIONS.append(StudySection(model, rows))


def transfer_shared_register(
    model: type[models.Model], *, key: tuple[str, ...], fields: tuple[str, ...]
) -> None:
    SHARED_MODELS[model._meta.label_lower] = SharedModel(model, key, fields)


def _register_studies() -> None:
    by_study = [
        m.Study,
        m.StudyMember,
        m.Topic,
        m.Condition,
        m.Idea,
        m.IdeaCondition,
        m.Reviewer,
        m.Invitation,
        m.Assignment,
        m.Review,
        m.PairTask,
        m.ImportBatch,
        m.JobRun,
        m.StudyReport,
        m.AuditEvent,
        m.IdeaUpload,
        m.IdeaExclusion,
        m.DuplicatePair,
        m.LeakageExport,
    ]
    transfer_section_register(m.Study, lambda s: m.Study.objects.filter(pk=s.pk))
    for model in by_study[1:]:
        transfer_section_register(model, lambda s, model=model: model.objects.filter(study=s))
    transfer_section_register(
        m.ReviewAcceptance, lambda s: m.ReviewAcceptance.objects.filter(review__study=s)
    )
    transfer_section_register(
        m.ReviewScore, lambda s: m.ReviewScore.objects.filter(review__study=s)
    )
    transfer_section_register(
        m.ReviewRevision, lambda s: m.ReviewRevision.objects.filter(review__study=s)
    )
    transfer_section_register(
        m.PairJudgment, lambda s: m.PairJudgment.objects.filter(task__study=s)
    )
    transfer_section_register(
        m.NormalizationResult, lambda s: m.NormalizationResult.objects.filter(idea__study=s)
    )
    transfer_section_register(
        m.IdeaRevision, lambda s: m.IdeaRevision.objects.filter(idea__study=s)
    )
    user = get_user_model()
    transfer_shared_register(
        user,
        key=("username",),
        fields=("email", "first_name", "last_name", "is_active", "date_joined"),
    )
    transfer_shared_register(m.ReviewForm, key=("key", "version"), fields=("title", "definition"))


# --------------------------------------------------------------------------- export


def _natural(obj: models.Model, shared: SharedModel) -> list[Any]:
    return [getattr(obj, f) for f in shared.key]


def _label(model: Any) -> str:
    return str(model._meta.label_lower)


def _shared_fks(model: type[models.Model]) -> dict[str, SharedModel]:
    """The model's foreign keys to shared models, by field name."""
    return {
        f.name: SHARED_MODELS[_label(f.related_model)]
        for f in model._meta.concrete_fields
        if f.is_relation and _label(f.related_model) in SHARED_MODELS
    }


def study_export_data(*, study: m.Study) -> dict[str, Any]:
    """Every row of the study, and the shared rows they refer to."""
    referenced: dict[str, set[Any]] = {label: set() for label in SHARED_MODELS}
    sections = []
    for section in STUDY_SECTIONS:
        label = section.model._meta.label_lower
        if label in SHARED_MODELS:
            continue
        fks = _shared_fks(section.model)
        rows = serializers.serialize("python", section.rows(study).order_by("pk"))
        for row in rows:
            for name, shared in fks.items():
                if row["fields"][name] is not None:
                    referenced[shared.model._meta.label_lower].add(row["fields"][name])
            if label == "studies.study":
                # A link to an earlier phase names a study of this deployment, which the
                # file does not carry: link again after importing.
                row["fields"]["previous_phase"] = None
        sections.append((label, rows, fks))
    shared_rows = _shared_export(referenced)
    # Foreign keys to shared rows become their natural keys.
    naturals = {
        label: {obj.pk: _natural(obj, SHARED_MODELS[label]) for obj in objs}
        for label, objs in shared_rows.items()
    }
    out_sections = {}
    for label, rows, fks in sections:
        for row in rows:
            for name, shared in fks.items():
                value = row["fields"][name]
                if value is not None:
                    row["fields"][name] = naturals[shared.model._meta.label_lower][value]
            del row["model"]
        out_sections[label] = rows
    return {
        "format": FORMAT,
        "version": VERSION,
        "study": study.slug,
        "shared": {
            label: [_shared_row(obj, SHARED_MODELS[label], naturals) for obj in objs]
            for label, objs in shared_rows.items()
        },
        "sections": out_sections,
    }


def _shared_export(referenced: dict[str, set[Any]]) -> dict[str, list[models.Model]]:
    """The shared rows referenced, sorted by natural key; a shared row's own references
    to other shared rows (a config's creator) are followed."""
    out: dict[str, list[models.Model]] = {}
    pending = dict(referenced)
    for _ in range(3):  # shared models refer to each other at most two deep
        for label, pks in pending.items():
            shared = SHARED_MODELS[label]
            for obj in shared.model._default_manager.filter(pk__in=pks):
                if all(o.pk != obj.pk for o in out.setdefault(label, [])):
                    out[label].append(obj)
        pending = {label: set() for label in SHARED_MODELS}
        for label, objs in out.items():
            for name, target in _shared_fks(SHARED_MODELS[label].model).items():
                for obj in objs:
                    value = getattr(obj, f"{name}_id")
                    target_label = target.model._meta.label_lower
                    if value is not None and all(o.pk != value for o in out.get(target_label, [])):
                        pending[target_label].add(value)
    for label, objs in out.items():
        spec = SHARED_MODELS[label]
        objs.sort(key=lambda o: [str(v) for v in _natural(o, spec)])  # noqa: B023 (used now)
    return out


def _shared_row(obj: models.Model, shared: SharedModel, naturals: dict[str, dict]) -> dict:
    row: dict[str, Any] = {f: getattr(obj, f) for f in shared.key}
    fks = _shared_fks(shared.model)
    for f in shared.fields:
        if f in fks:
            value = getattr(obj, f"{f}_id")
            row[f] = naturals[fks[f].model._meta.label_lower].get(value) if value else None
        else:
            row[f] = getattr(obj, f)
    return row


class _Encoder(DjangoJSONEncoder):
    """Django's encoder, but times keep their microseconds (nothing is lost)."""

    def default(self, o: Any) -> Any:
        if isinstance(o, dt.datetime | dt.time):
            return o.isoformat()
        return super().default(o)


def study_export(*, study: m.Study) -> str:
    return json.dumps(study_export_data(study=study), cls=_Encoder, sort_keys=True, indent=1)


# --------------------------------------------------------------------------- import


def study_import(*, text: str) -> m.Study:
    """Write a study file into this database in one transaction, or raise TransferError
    (nothing written) naming what is wrong."""
    try:
        data = jsonsafe.loads(text)
    except json.JSONDecodeError as exc:
        raise TransferError(f"not a study file: {exc}") from exc
    if not isinstance(data, dict):
        raise TransferError("not a study file: the file must hold a JSON object")
    problem = csvsafe.json_text_problem(data)
    if problem:
        raise TransferError(f"the study file cannot be stored: {problem}")
    if data.get("format") != FORMAT or data.get("version") != VERSION:
        raise TransferError(f"not a {FORMAT} file of version {VERSION}")
    if m.Study.objects.filter(slug=data["study"]).exists():
        raise TransferError(f"a study {data['study']!r} exists here already")
    if not isinstance(data.get("shared"), dict) or not isinstance(data.get("sections"), dict):
        raise TransferError("not a study file: 'shared' and 'sections' must be objects")
    try:
        with transaction.atomic():
            naturals = _shared_import(_relabelled(data["shared"]))
            models_written = _rows_import(_relabelled(data["sections"]), naturals)
            _reset_sequences(models_written)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        # A file of the right format whose rows are not what this version writes: the
        # transaction is rolled back, nothing is kept.
        raise TransferError(
            f"the study file's rows cannot be read ({type(exc).__name__}: {exc})"
        ) from None
    return m.Study.objects.get(slug=data["study"])


def _relabelled(by_label: dict[str, Any]) -> dict[str, Any]:
    return {MOVED_LABELS.get(label, label): rows for label, rows in by_label.items()}


def _shared_import(shared: dict[str, list[dict]]) -> dict[str, dict[tuple, int]]:
    """Match or create each shared row; returns natural key → pk per model."""
    naturals: dict[str, dict[tuple, int]] = {label: {} for label in SHARED_MODELS}
    # Users first: the other shared rows refer to them.
    user_label = get_user_model()._meta.label_lower
    for label in sorted(shared, key=lambda lbl: lbl != user_label):
        if label not in SHARED_MODELS:
            raise TransferError(f"unknown shared model {label!r} in the file")
        spec = SHARED_MODELS[label]
        fks = _shared_fks(spec.model)
        for row in shared[label]:
            key = {f: row[f] for f in spec.key}
            defaults = {}
            for f in spec.fields:
                if f in fks:
                    target = fks[f].model._meta.label_lower
                    defaults[f"{f}_id"] = naturals[target][tuple(row[f])] if row[f] else None
                else:
                    field: Any = spec.model._meta.get_field(f)
                    defaults[f] = field.to_python(row[f])
            obj = spec.model._default_manager.filter(**key).first()
            if obj is None:
                obj = spec.model(**key, **defaults)
                if label == user_label:
                    obj.set_unusable_password()  # type: ignore[attr-defined]
                obj.save()
            naturals[label][tuple(row[f] for f in spec.key)] = obj.pk
    return naturals


def _rows_import(sections: dict[str, list[dict]], naturals: dict) -> list[type[models.Model]]:
    by_label = {s.model._meta.label_lower: s for s in STUDY_SECTIONS}
    written = []
    objects = []
    for label, rows in sections.items():
        if label not in by_label:
            raise TransferError(f"unknown section {label!r} in the file")
        model = by_label[label].model
        if label == CALLS_LABEL:
            rows = _calls_not_here(rows)
        taken = model._default_manager.filter(pk__in=[r["pk"] for r in rows]).count()
        if taken:
            raise TransferError(
                f"{taken} {model._meta.verbose_name_plural} with the file's ids exist here "
                "already; import into an empty database"
            )
        fks = _shared_fks(model)
        for row in rows:
            fields = dict(row["fields"])
            if label == "studies.study":
                fields["previous_phase"] = None  # see study_export_data
            for name, shared in fks.items():
                if fields[name] is not None:
                    fields[name] = naturals[shared.model._meta.label_lower][tuple(fields[name])]
            objects.append({"model": label, "pk": row["pk"], "fields": fields})
        written.append(model)
    # Saved raw, as loaddata does: auto_now fields keep their recorded times, and the
    # database checks foreign keys at commit, so the order of sections does not matter.
    for obj in serializers.deserialize("python", objects):
        obj.save()
    return written


CALLS_LABEL = "llm.llmcall"


def _calls_not_here(rows: list[dict]) -> list[dict]:
    """The file's LLM calls minus those this database holds already under the same id and
    cache key: a call another study's outcome reused stays when its study is deleted, so
    the study's own export, imported back, finds it. Such a call gets its run back when
    it had lost it; any other clash of ids is refused as before."""
    from judging.llm.models import LLMCall

    here = dict(
        LLMCall.objects.filter(pk__in=[r["pk"] for r in rows]).values_list("pk", "cache_key")
    )
    same = {r["pk"] for r in rows if here.get(r["pk"]) == r["fields"]["cache_key"]}
    for r in rows:
        if r["pk"] in same and r["fields"].get("run") is not None:
            LLMCall.objects.filter(pk=r["pk"], run__isnull=True).update(run_id=r["fields"]["run"])
    return [r for r in rows if r["pk"] not in same]


def _reset_sequences(model_list: list[type[models.Model]]) -> None:
    """Rows came with their ids: PostgreSQL's id sequences must move past them."""
    statements = connection.ops.sequence_reset_sql(no_style(), model_list)
    if statements:
        with connection.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql)


_register_studies()
