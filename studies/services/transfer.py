"""A whole study as one JSON file, and back (the format; `study_export` and
`study_import` are in `study.py`), and importing reviews written elsewhere
(`reviews_import`).

The file holds every row that belongs to the study, in sections that apps register:
studies registers its own models here, judging registers its runs, calls and outcomes
from `judging/apps.py` (studies never imports judging's runs). Two kinds of rows:

- **Study rows** (ideas, reviews, assignments, jobs, judge runs, calls, ...) keep their
  primary keys, so ids stored inside JSON fields (a job's idea ids, a run's parameters)
  stay right. Importing therefore needs a database where those ids are free: an empty
  one, or one that never held this study. A clash is refused before anything is written.
- **Shared rows** (users, review forms, judge configs, reference corpora) are written by
  natural key (a username, a form's key and version, a judge's study id and name: a
  judge belongs to its study's team, or to the administrator with no study; a corpus's
  owner and name: names are unique per owner), matched by it on import and created when
  missing; foreign keys to them are written as that natural key, and so are the ids a
  section's JSON fields hold (a run's corpus). A key may itself hold a foreign key to
  another shared model (a corpus's owner, as a username). Users come without passwords:
  imported accounts must set one (password reset) before they can log in.

Rows are written in a fixed order (sections in registration order, rows by primary key,
shared rows by natural key, every JSON object with sorted keys), so exporting, importing
into an empty database and exporting again gives the same file byte for byte.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.core import serializers
from django.core.management.color import no_style
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, models, transaction
from django.utils import timezone

from .. import models as m
from ..analysis.rounding import counted
from ..importers import ImportFailed, ParsedImport, RowProblem

# The job lifecycle lives in .jobs; its functions stay importable from here.
from ..jobs import (  # noqa: F401
    job_active,
    job_cancel,
    job_finish,
    job_latest,
    job_mark_if_lost,
    job_progress,
    job_retry,
    job_start,
)
from ..models import (
    Condition,
    Idea,
    IdeaCondition,
    ImportBatch,
    JobRun,
    Review,
    ReviewScore,
    Study,
    Topic,
)
from ..protocol import jsonsafe
from .audit import audit
from .transfer_sections import (  # noqa: F401  (re-exported)
    MOVED_LABELS,
    SHARED_MODELS,
    STUDY_SECTIONS,
    SharedModel,
    StudySection,
    transfer_section_register,
    transfer_shared_register,
)


def reviews_import(
    *,
    study: Study,
    parsed: ParsedImport,
    kind: str,
    actor: Any = None,
) -> dict[str, Any]:
    """Write a parsed import in one transaction; re-importing the same data changes nothing.

    Ideas are matched by external id, reviews by their content key. Returns the parser's
    data-quality summary extended with what was created and what already existed. The
    stages: the form's metrics, conditions, topics, ideas, reviews, then the batch record.
    """
    _import_check_metrics(study=study, parsed=parsed)
    with transaction.atomic():
        conditions, new_conditions = _import_conditions(study=study, parsed=parsed)
        topics = {t.name: t for t in study.topics.all()}
        new_topics = 0
        for name in parsed.topics:
            if name not in topics:
                topics[name] = Topic.objects.create(study=study, name=name)
                new_topics += 1
        idea_for_ref, new_ideas = _import_ideas(
            study=study, parsed=parsed, conditions=conditions, topics=topics
        )
        reviewers = _reviewers_for(study, parsed)
        new_reviews = _import_reviews(
            study=study, parsed=parsed, idea_for_ref=idea_for_ref, reviewers=reviewers
        )
        summary = dict(parsed.summary)
        summary.update(
            created={
                "conditions": new_conditions,
                "topics": new_topics,
                "ideas": new_ideas,
                "reviews": new_reviews,
                "reviewers": sum(1 for r in reviewers.values() if getattr(r, "_created", False)),
            },
            unchanged_reviews=len(parsed.reviews) - new_reviews,
            changed_anything=bool(new_conditions or new_topics or new_ideas or new_reviews),
        )
        if summary["changed_anything"]:
            _import_record(study=study, parsed=parsed, kind=kind, actor=actor, summary=summary)
    return summary


def _import_check_metrics(*, study: Study, parsed: ParsedImport) -> None:
    """Every metric of the file is one of the study's form."""
    form = study.form_definition()
    missing = [m for m in parsed.metrics if m not in form.metric_keys]
    if missing:
        raise ImportFailed(
            [
                RowProblem(
                    parsed.source,
                    None,
                    m,
                    f"metric not in the study's form {form.key} v{form.version}",
                )
                for m in missing
            ]
        )


def _import_conditions(*, study: Study, parsed: ParsedImport) -> tuple[dict[str, Condition], int]:
    """The study's conditions with the file's new ones created; a known condition whose
    kind differs in the file is refused."""
    existing_conditions = {c.key: c for c in study.conditions.all()}
    problems = [
        RowProblem(
            parsed.source,
            None,
            "condition",
            f"condition {key!r} exists as {existing_conditions[key].kind}, the file says {kind_}",
        )
        for key, kind_ in parsed.conditions.items()
        if key in existing_conditions and existing_conditions[key].kind != kind_
    ]
    if problems:
        raise ImportFailed(problems)
    conditions = dict(existing_conditions)
    new_conditions = 0
    for key, kind_ in parsed.conditions.items():
        if key not in conditions:
            conditions[key] = Condition.objects.create(study=study, key=key, label=key, kind=kind_)
            new_conditions += 1
    return conditions, new_conditions


def _import_ideas(
    *,
    study: Study,
    parsed: ParsedImport,
    conditions: dict[str, Condition],
    topics: dict[str, Topic],
) -> tuple[dict[str, Idea], int]:
    """Each parsed idea matched by its external ids or created, with its memberships;
    the idea of every external id, and how many ideas were new."""
    by_external = {
        m.external_id: m
        for m in IdeaCondition.objects.filter(study=study).select_related("idea", "idea__topic")
    }
    idea_for_ref: dict[str, Idea] = {}
    new_ideas = 0
    for pi in parsed.ideas:
        found = {by_external[e].idea for e in pi.external_ids.values() if e in by_external}
        if len(found) > 1:
            raise ImportFailed(
                [
                    RowProblem(
                        parsed.source,
                        None,
                        "idea_id",
                        f"ids {sorted(pi.external_ids.values())} belong to different ideas already in the study",
                    )
                ]
            )
        if found:
            idea = found.pop()
            if idea.topic.name != pi.topic:
                raise ImportFailed(
                    [
                        RowProblem(
                            parsed.source,
                            None,
                            "topic",
                            f"idea {next(iter(pi.external_ids.values()))!r} has topic {idea.topic.name!r} in the study, {pi.topic!r} in the file",
                        )
                    ]
                )
        else:
            idea = Idea.objects.create(
                study=study,
                topic=topics[pi.topic],
                title=pi.title,
                author_institution=pi.author_institution,
            )
            new_ideas += 1
        for cond_key, ext in pi.external_ids.items():
            if ext not in by_external:
                by_external[ext] = IdeaCondition.objects.create(
                    idea=idea, condition=conditions[cond_key], study=study, external_id=ext
                )
            idea_for_ref[ext] = idea
    return idea_for_ref, new_ideas


def _import_reviews(
    *,
    study: Study,
    parsed: ParsedImport,
    idea_for_ref: dict[str, Idea],
    reviewers: dict[str, Any],
) -> int:
    """The reviews not already stored (by content key), with their scores; how many."""
    known_keys = set(
        Review.objects.filter(
            study=study, source_key__in=[r.key for r in parsed.reviews]
        ).values_list("source_key", flat=True)
    )
    new_reviews = 0
    scores: list[ReviewScore] = []
    now = timezone.now()
    for pr in parsed.reviews:
        if pr.key in known_keys:
            continue
        review = Review.objects.create(
            study=study,
            idea=idea_for_ref[parsed.review_ideas[pr.key]],
            reviewer=reviewers.get(pr.reviewer_ref) if pr.reviewer_ref else None,
            status=Review.Status.SUBMITTED,
            familiarity=pr.familiarity,
            familiarity_raw=pr.familiarity_raw,
            confidence=pr.confidence,
            confidence_raw=pr.confidence_raw,
            minutes=pr.minutes,
            minutes_raw=pr.minutes_raw,
            consent_raw=pr.consent_raw,
            honor_code_raw=pr.honor_code_raw,
            flags=pr.flags,
            extra={**pr.extra, "source_row": pr.row},
            source_key=pr.key,
            submitted_at=now,
        )
        scores.extend(
            ReviewScore(review=review, metric=m, score=v, rationale=pr.rationales.get(m, ""))
            for m, v in pr.scores.items()
        )
        new_reviews += 1
    ReviewScore.objects.bulk_create(scores)
    return new_reviews


def _import_record(
    *, study: Study, parsed: ParsedImport, kind: str, actor: Any, summary: dict[str, Any]
) -> None:
    """The import batch, the study's baseline when it had none, and the audit event."""
    ImportBatch.objects.create(
        study=study,
        kind=kind,
        filename=parsed.source,
        sha256=parsed.sha256,
        summary=summary,
        created_by=actor if getattr(actor, "pk", None) else None,
    )
    if not study.baseline_condition:
        study.baseline_condition = study.baseline()
        study.save(update_fields=["baseline_condition", "updated_at"])
    audit(
        study=study,
        actor=actor,
        verb="reviews_imported",
        source=parsed.source,
        reviews=summary["created"]["reviews"],
    )


def _reviewers_for(study: Study, parsed: ParsedImport) -> dict[str, Any]:
    """Imported reviewer ids become pseudonymous reviewers (R001, …); names are not kept."""
    from ..models import Reviewer

    refs = sorted({r.reviewer_ref for r in parsed.reviews if r.reviewer_ref})
    found = {r.external_id: r for r in Reviewer.objects.filter(study=study, external_id__in=refs)}
    n = Reviewer.objects.filter(study=study).count()
    for ref in refs:
        if ref not in found:
            n += 1
            reviewer = Reviewer.objects.create(
                study=study,
                external_id=ref,
                pseudonym=f"R{n:03d}",
                screening=Reviewer.Screening.APPROVED,
            )
            reviewer._created = True  # type: ignore[attr-defined]
            found[ref] = reviewer
    return found


def reviews_parse(
    *,
    study: Study,
    fmt: str,
    reviews: bytes,
    reviews_name: str,
    titles: bytes | None = None,
    titles_name: str = "",
    mapping: dict[str, str] | None = None,
    human_conditions: list[str] | None = None,
) -> ParsedImport:
    """Parse an upload against the study's form and conditions (nothing is written)."""
    from ..importers import (
        RowInput,
        default_mapping,
        mapping_check,
        parse_rows,
        parse_si2024,
        read_table,
        sha256_bytes,
    )

    form = study.form_definition()
    existing = {c.key: c.kind for c in study.conditions.all()}
    if fmt == "si2024":
        return parse_si2024(
            reviews,
            reviews_name=reviews_name,
            form=form,
            titles=titles,
            titles_name=titles_name or "titles.csv",
            known_conditions=existing or None,
        )
    if fmt != "generic":
        raise ValueError(f"unknown import format {fmt!r} (use si2024 or generic)")
    rows = read_table(reviews, reviews_name)
    header: list[str] = list(dict.fromkeys(k for r in rows for k in r))
    mapping_check(mapping or {}, form=form, header=header, name=reviews_name)
    kinds = {c: "human" for c in (human_conditions or [])}
    return parse_rows(
        rows,
        name=reviews_name,
        sha256=sha256_bytes(reviews),
        target=RowInput(
            form=form,
            known_conditions=existing or None,
            condition_kinds=kinds,
        ),
        mapping=default_mapping(header, form.metric_keys, mapping or {}),
        titles=None,
        condition_kind_guess=not human_conditions,
    )


# --------------------------------------------------------------------------- large imports


def import_row_estimate(data: bytes, name: str) -> int:
    """A quick upper estimate of an upload's rows, to decide whether it runs as a job:
    the rows of a JSON file (a list of rows, or columns), else the file's lines."""
    if data.lstrip()[:1] in (b"[", b"{") and not name.lower().endswith(".jsonl"):
        try:
            value = jsonsafe.loads(data)
        except ValueError:  # not JSON, nested too deep, or not UTF-8
            return 0  # the import itself names the problem, at once
        if isinstance(value, dict):
            return max((len(v) for v in value.values() if isinstance(v, list | dict)), default=1)
        return len(value) if isinstance(value, list) else 1
    return data.count(b"\n")


def reviews_import_enqueue(
    *,
    study: Study,
    fmt: str,
    reviews: bytes,
    reviews_name: str,
    titles: bytes | None = None,
    titles_name: str = "",
    mapping: dict[str, str] | None = None,
    human_conditions: list[str] | None = None,
    actor: Any = None,
) -> JobRun:
    """Keep the upload in the default storage and import it in a job (with progress)."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from ..jobs import job_enqueue

    folder = f"imports/{study.slug}/{uuid.uuid4().hex}"
    paths = {"reviews_path": default_storage.save(f"{folder}/reviews", ContentFile(reviews))}
    if titles is not None:
        paths["titles_path"] = default_storage.save(f"{folder}/titles", ContentFile(titles))
    job = job_start(
        study=study,
        kind="import",
        actor=actor,
        total=3,
        fmt=fmt,
        reviews_name=reviews_name,
        titles_name=titles_name,
        mapping=mapping or {},
        human_conditions=human_conditions or [],
        **paths,
    )
    return job_enqueue(job=job)


def reviews_import_job(*, job: JobRun) -> dict[str, Any]:
    """The work of an import job: parse the stored upload, write it in one transaction
    (so a retried job imports it whole or not at all; a second run changes nothing), and
    keep the summary or the problems in the job's params."""
    from django.core.files.storage import default_storage

    p = job.params

    def read(key: str) -> bytes | None:
        if not p.get(key):
            return None
        with default_storage.open(p[key], "rb") as fh:
            return fh.read()

    job_progress(job=job, done=0, total=3, message="reading the upload")
    reviews = read("reviews_path") or b""
    job_progress(job=job, done=1, total=3, message="checking every row")
    try:
        parsed = reviews_parse(
            study=job.study,
            fmt=p["fmt"],
            reviews=reviews,
            reviews_name=p["reviews_name"],
            titles=read("titles_path"),
            titles_name=p["titles_name"],
            mapping=p["mapping"],
            human_conditions=p["human_conditions"],
        )
        job_progress(job=job, done=2, total=3, message=f"writing {len(parsed.reviews)} reviews")
        summary = reviews_import(
            study=job.study, parsed=parsed, kind=p["fmt"], actor=job.created_by
        )
    except ImportFailed as exc:
        JobRun.objects.filter(pk=job.pk).update(
            params={**p, "problems": [str(x) for x in exc.problems]}
        )
        raise
    created = summary["created"]
    # The done line shows the job's message: the outcome, not the last step's name.
    message = (
        f"{counted(created['reviews'], 'review')} and {counted(created['ideas'], 'idea')} added, "
        f"{counted(summary['unchanged_reviews'], 'review')} already here"
    )
    JobRun.objects.filter(pk=job.pk).update(params={**p, "summary": summary}, message=message)
    for key in ("reviews_path", "titles_path"):
        if p.get(key):
            default_storage.delete(p[key])
    return summary


FORMAT = "ideareview-study"
VERSION = 1


class TransferError(ValueError):
    """The file cannot be imported (the message says why); nothing was written."""


def _frozen(value: Any) -> Any:
    """A natural key as a dict key: JSON's lists become tuples, all the way down."""
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


# --------------------------------------------------------------------------- export


def _natural(obj: models.Model, shared: SharedModel, naturals: dict[str, dict]) -> list[Any]:
    """The row's natural key; a key field that points to another shared row is that
    row's natural key (`naturals`, by model label and id)."""
    fks = _shared_fks(shared.model)
    out = []
    for f in shared.key:
        if f in fks:
            value = getattr(obj, f"{f}_id")
            out.append(naturals[_label(fks[f].model)][value] if value is not None else None)
        else:
            out.append(getattr(obj, f))
    return out


def _key_depth(label: str) -> int:
    """How many shared models deep a model's natural key reaches (0: none)."""
    spec = SHARED_MODELS[label]
    fks = _shared_fks(spec.model)
    return max([1 + _key_depth(_label(fks[f].model)) for f in spec.key if f in fks], default=0)


def _naturals_of(shared_rows: dict[str, list[models.Model]]) -> dict[str, dict[Any, list]]:
    """Natural keys by model label and id; models whose keys name others come later."""
    naturals: dict[str, dict[Any, list]] = {label: {} for label in SHARED_MODELS}
    for label in sorted(shared_rows, key=_key_depth):
        spec = SHARED_MODELS[label]
        naturals[label] = {obj.pk: _natural(obj, spec, naturals) for obj in shared_rows[label]}
    return naturals


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
        if section.scrub is not None:
            section.scrub(rows)
        for row in rows:
            for name, shared in fks.items():
                if row["fields"][name] is not None:
                    referenced[shared.model._meta.label_lower].add(row["fields"][name])
            for field, key, target in section.json_refs:
                value = _json_ref(row["fields"][field], key)
                if value is not None:
                    referenced[_label(target)].add(value)
            if label == "studies.study":
                # A link to an earlier phase names a study of this deployment, which the
                # file does not carry: link again after importing.
                row["fields"]["previous_phase"] = None
        sections.append((label, rows, fks, section.json_refs))
    shared_rows = _shared_export(referenced)
    # Foreign keys to shared rows become their natural keys.
    naturals = _naturals_of(shared_rows)
    for label, objs in shared_rows.items():
        objs.sort(key=lambda o: [str(v) for v in naturals[label][o.pk]])  # noqa: B023 (used now)
    out_sections = {}
    for label, rows, fks, json_refs in sections:
        for row in rows:
            for name, shared in fks.items():
                value = row["fields"][name]
                if value is not None:
                    row["fields"][name] = naturals[shared.model._meta.label_lower][value]
            for field, key, target in json_refs:
                value = _json_ref(row["fields"][field], key)
                if value is not None:
                    # One that no longer exists is written as none: its id would name
                    # another row wherever the file goes.
                    row["fields"][field][key] = naturals[_label(target)].get(value)
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


def _json_ref(obj: Any, key: str) -> int | None:
    """The id a JSON field holds under `key`, if it holds one."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _shared_export(referenced: dict[str, set[Any]]) -> dict[str, list[models.Model]]:
    """The shared rows referenced; a shared row's own references to other shared rows (a
    config's creator, a corpus's owner) are followed."""
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
    return out


def _shared_row(obj: models.Model, shared: SharedModel, naturals: dict[str, dict]) -> dict:
    row: dict[str, Any] = dict(zip(shared.key, naturals[_label(shared.model)][obj.pk], strict=True))
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


def _relabelled(by_label: dict[str, Any]) -> dict[str, Any]:
    return {MOVED_LABELS.get(label, label): rows for label, rows in by_label.items()}


def _shared_import(shared: dict[str, list[dict]]) -> dict[str, dict[tuple, int]]:
    """Match or create each shared row; returns natural key → pk per model."""
    naturals: dict[str, dict[tuple, int]] = {label: {} for label in SHARED_MODELS}
    unknown = sorted(set(shared) - set(SHARED_MODELS))
    if unknown:
        raise TransferError(f"unknown shared model {unknown[0]!r} in the file")
    # Users first: the other shared rows refer to them (and a corpus's key names its owner).
    user_label = get_user_model()._meta.label_lower
    for label in sorted(shared, key=lambda lbl: (lbl != user_label, _key_depth(lbl))):
        spec = SHARED_MODELS[label]
        fks = _shared_fks(spec.model)

        def pk_of(f: str, value: Any) -> int | None:
            target = _label(fks[f].model)  # noqa: B023 (used now)
            return naturals[target][_frozen(value)] if value else None

        for row in shared[label]:
            key = {
                (f"{f}_id" if f in fks else f): (pk_of(f, row[f]) if f in fks else row[f])
                for f in spec.key
            }
            defaults = {}
            for f in spec.fields:
                if f in fks:
                    defaults[f"{f}_id"] = pk_of(f, row[f])
                else:
                    field: Any = spec.model._meta.get_field(f)
                    defaults[f] = field.to_python(row[f])
            obj = spec.model._default_manager.filter(**key).first()
            if obj is None:
                obj = spec.model(**key, **defaults)
                if label == user_label:
                    obj.set_unusable_password()  # type: ignore[attr-defined]
                obj.save()
            naturals[label][_frozen([row[f] for f in spec.key])] = obj.pk
            if spec.legacy_key and all(f in row for f in spec.legacy_key):
                naturals[label].setdefault(_frozen([row[f] for f in spec.legacy_key]), obj.pk)
    return naturals


def _rows_import(sections: dict[str, list[dict]], naturals: dict) -> list[type[models.Model]]:
    by_label = {s.model._meta.label_lower: s for s in STUDY_SECTIONS}
    written = []
    objects = []
    for label, rows in sections.items():
        if label not in by_label:
            raise TransferError(f"unknown section {label!r} in the file")
        section = by_label[label]
        model = section.model
        if label == CALLS_LABEL:
            rows = _calls_not_here(rows, naturals)
        fks = _shared_fks(model)
        mapped = []
        for row in rows:
            fields = dict(row["fields"])
            if label == "studies.study":
                fields["previous_phase"] = None  # see study_export_data
            for name, shared in fks.items():
                if fields[name] is not None:
                    fields[name] = naturals[shared.model._meta.label_lower][_frozen(fields[name])]
            for field, key, target in section.json_refs:
                if isinstance(fields[field], dict) and key in fields[field]:
                    fields[field] = {
                        **fields[field],
                        key: _json_ref_import(fields[field][key], naturals[_label(target)]),
                    }
            mapped.append({"model": label, "pk": row["pk"], "fields": fields})
        mapped = _rows_not_here(model, section.same_if, mapped)
        taken = model._default_manager.filter(pk__in=[r["pk"] for r in mapped]).count()
        if taken:
            raise TransferError(
                f"{taken} {model._meta.verbose_name_plural} with the file's ids exist here "
                "already; import into an empty database"
            )
        objects.extend(mapped)
        written.append(model)
    # Saved raw, as loaddata does: auto_now fields keep their recorded times, and the
    # database checks foreign keys at commit, so the order of sections does not matter.
    for obj in serializers.deserialize("python", objects):
        obj.save()
    return written


def _json_ref_import(value: Any, naturals: dict[tuple, int]) -> Any:
    """A shared row's natural key inside a JSON field, as this database's id. An id
    (files of an earlier version wrote the source database's) means the file's only row
    of that model, and is refused when the file has several."""
    if _json_ref({"id": value}, "id") is None and not isinstance(value, list):
        return value  # none, or not an id ("auto")
    if isinstance(value, list):
        if _frozen(value) not in naturals:
            raise TransferError(f"the file refers to {value!r}, which its shared rows lack")
        return naturals[_frozen(value)]
    ids = set(naturals.values())
    if len(ids) != 1:
        raise TransferError(f"the file refers to row {value!r} by an id of its own database")
    return ids.pop()


def _rows_not_here(model: Any, same_if: tuple[str, ...], rows: list[dict]) -> list[dict]:
    """`rows` minus those this database holds under the same id with the same `same_if`
    fields (a corpus's paper that outlived the study it was exported with)."""
    if not same_if:
        return rows
    here = {
        r["pk"]: r
        for r in model._default_manager.filter(pk__in=[r["pk"] for r in rows]).values(
            "pk", *same_if
        )
    }
    return [
        r
        for r in rows
        if r["pk"] not in here or any(here[r["pk"]][f] != r["fields"][f] for f in same_if)
    ]


CALLS_LABEL = "llm.llmcall"
CONFIGS_LABEL = "llm.judgeconfig"


def _calls_not_here(rows: list[dict], naturals: dict) -> list[dict]:
    """The file's LLM calls minus those this database holds already under the same id and
    cache key: a call another study's outcome reused stays when its study is deleted, so
    the study's own export, imported back, finds it. Such a call gets its run, study and
    judge back when it had lost them (the judge by its natural key, as the file writes
    it); any other clash of ids is refused as before."""
    from llm.models import LLMCall

    here = dict(
        LLMCall.objects.filter(pk__in=[r["pk"] for r in rows]).values_list("pk", "cache_key")
    )
    same = {r["pk"] for r in rows if here.get(r["pk"]) == r["fields"]["cache_key"]}
    for r in rows:
        if r["pk"] not in same:
            continue
        fields = dict(r["fields"])
        if fields.get("config") is not None:
            fields["config"] = naturals[CONFIGS_LABEL][_frozen(fields["config"])]
        for name in ("run", "study", "config"):
            if fields.get(name) is not None:
                LLMCall.objects.filter(pk=r["pk"], **{f"{name}__isnull": True}).update(
                    **{f"{name}_id": fields[name]}
                )
    return [r for r in rows if r["pk"] not in same]


def _reset_sequences(model_list: list[type[models.Model]]) -> None:
    """Rows came with their ids: PostgreSQL's id sequences must move past them."""
    statements = connection.ops.sequence_reset_sql(no_style(), model_list)
    if statements:
        with connection.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql)
