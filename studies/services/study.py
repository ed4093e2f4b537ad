"""Every study-level action: who may create studies, creating one, its parameters and
when each is locked, its team, its review form, freezing its analysis plan, opening it
for review, its due date, closing and deleting it, and exporting it to or importing it
from a study file (whose format is `transfer.py`'s). Keyword-only `<entity>_<action>`
workflows; views and commands call these.

The lock table is written down in docs/study-settings.md; `study_locks` is its code.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import ForeignObjectRel, ProtectedError, Q
from django.urls import reverse
from django.utils import timezone
from django.utils.text import slugify

# Who is a researcher is accounts' to say; commands and views import it from here.
from accounts.roles import is_researcher, researcher_grant  # noqa: F401
from llm.models import LLMBatch, LLMCall

from .. import csvsafe
from .. import models as m
from ..analysis.plan import AnalysisPlan, PlanError, parse_plan, plan_document, plan_hash
from ..analysis.rounding import counted, fixed, interval_text

# The job lifecycle lives in .jobs; its functions stay importable from here.
from ..jobs import (  # noqa: F401
    JobStopped,
    job_active,
    job_cancel,
    job_enqueue,
    job_finish,
    job_latest,
    job_latest_done,
    job_mark_if_lost,
    job_progress,
    job_retry,
    job_start,
)
from ..models import (
    Assignment,
    Condition,
    PairJudgment,
    Reviewer,
    ReviewForm,
    Study,
    StudyMember,
    Topic,
)
from ..protocol import jsonsafe
from ..protocol.forms import DEFAULT_FORM, FormDefinition
from ..protocol.source_words import SourceMention, source_mentions
from ..status import IMPORTED_STATUS, refuse_if_imported, study_status
from ..storage import reports_storage, storage_folder_remove
from .assignment import reviewers_notify_new_work
from .audit import audit
from .errors import NoAccountError, SetupError
from .ideas import (
    REVIEWABLE,
    StudyNotReady,
    leakage_check_latest,
    leakage_side_reading,
    study_ideas,
    topic_matching_table,
)
from .plans import plan_check_for_study, study_plan
from .transfer import (
    FORMAT,
    STUDY_SECTIONS,
    VERSION,
    TransferError,
    _Encoder,
    _relabelled,
    _reset_sequences,
    _rows_import,
    _shared_import,
    study_export_data,
)

logger = logging.getLogger(__name__)

# Study slugs that would shadow a page under /studies/.
RESERVED_SLUGS = frozenset({"new"})


def review_form_ensure(*, definition: FormDefinition = DEFAULT_FORM) -> ReviewForm:
    """The stored row for a form definition; a changed definition needs a new version."""
    form, created = ReviewForm.objects.get_or_create(
        key=definition.key,
        version=definition.version,
        defaults={"title": definition.title, "definition": definition.to_dict()},
    )
    if not created and form.as_definition() != definition:
        raise ValueError(
            f"review form {definition.key} v{definition.version} already exists with a "
            "different definition; forms are immutable, give the change a new version"
        )
    return form


def study_form_locked_reason(study: Study) -> str:
    """Why the study's review form can no longer change ("" while it can): reviews,
    drafts included, are answers to the form they were written on."""
    n = study.reviews.count()
    if n:
        return (
            f"The study has {counted(n, 'review')} on form {study.review_form.key} "
            f"v{study.review_form.version}; its form can no longer change."
        )
    return ""


def study_form_set(*, study: Study, definition: FormDefinition, actor: Any = None) -> ReviewForm:
    """Give the study another review form (stored as its own immutable version); refused
    once the study has reviews."""
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        reason = study_form_locked_reason(locked)
        if reason:
            raise ValueError(reason)
        form = review_form_ensure(definition=definition)
        locked.review_form = form
        locked.save(update_fields=["review_form", "updated_at"])
        audit(
            study=locked,
            actor=actor,
            verb="review_form_set",
            form=definition.key,
            version=definition.version,
        )
    study.review_form = form
    return form


def review_form_next_version(key: str) -> int:
    """The first version number of `key` not stored yet."""
    last = ReviewForm.objects.filter(key=key).order_by("-version").first()
    return 1 if last is None else last.version + 1


def study_create(
    *,
    owner: Any,
    slug: str,
    title: str = "",
    form: FormDefinition = DEFAULT_FORM,
    baseline_condition: str = "",
    description: str = "",
    conditions: Sequence[tuple[str, str]] = (),
    topics: Sequence[str] = (),
) -> Study:
    """A new study owned by `owner` (its first owner member), with its conditions as
    (key, kind) pairs and its topics; the baseline must be one of the conditions given."""
    slug = slugify(slug)
    if not slug:
        raise ValueError("a study needs a slug made of letters, digits, '-' or '_'")
    if slug in RESERVED_SLUGS:
        raise ValueError(f"{slug!r} names a page of the site; choose another slug")
    keys = [key for key, _ in conditions]
    if baseline_condition and keys and baseline_condition not in keys:
        raise ValueError(
            f"the baseline {baseline_condition!r} is not one of the conditions {', '.join(keys)}"
        )
    with transaction.atomic():
        if Study.objects.filter(slug=slug).exists():
            raise ValueError(f"a study with the slug {slug!r} exists already; choose another")
        study = Study.objects.create(
            slug=slug,
            title=title or slug,
            description=description,
            owner=owner,
            review_form=review_form_ensure(definition=form),
            baseline_condition=baseline_condition,
        )
        StudyMember.objects.create(study=study, user=owner, role=StudyMember.Role.OWNER)
        for key, kind in conditions:
            Condition.objects.create(study=study, key=key, label=key, kind=kind)
        for name in dict.fromkeys(t.strip() for t in topics if t.strip()):
            Topic.objects.create(study=study, name=name)
        audit(study=study, actor=owner, verb="study_created", slug=slug)
    return study


def study_close(*, study: Study, actor: Any = None) -> None:
    study.status = Study.Status.CLOSED
    study.closed_at = timezone.now()
    study.save(update_fields=["status", "closed_at", "updated_at"])
    audit(study=study, actor=actor, verb="study_closed")


def study_set_due(*, study: Study, due: Any, actor: Any = None) -> None:
    refuse_if_imported(study, "has no due date for reviews")
    if study.is_closed():
        raise SetupError(
            "The study is closed: its reviews can no longer be changed, so it takes no due date."
        )
    study.reviews_due_at = due
    study.save(update_fields=["reviews_due_at", "updated_at"])
    audit(study=study, actor=actor, verb="study_due_set", due=str(due))


def study_topic_reason_set(*, study: Study, reason: str, actor: Any = None) -> None:
    study.topic_mismatch_reason = reason.strip()
    study.topic_mismatch_reason_at = timezone.now() if reason.strip() else None
    study.save(update_fields=["topic_mismatch_reason", "topic_mismatch_reason_at", "updated_at"])
    audit(study=study, actor=actor, verb="topic_mismatch_reason_set", reason=reason.strip())


def study_readiness(*, study: Study) -> list[str]:
    """Why the study cannot open for review yet; empty when it can. A study of imported
    reviews gets that one reason: the preparation the others ask for was never meant to
    happen here."""
    if study_status(study).imported:
        return [
            f"its reviews were imported from a file ({IMPORTED_STATUS.lower()}): the "
            "reviewing happened elsewhere, so there is nothing to open for review"
        ]
    reasons: list[str] = []
    if study.status not in (Study.Status.DRAFT, Study.Status.PREPARING):
        reasons.append(f"the study is {study.get_status_display().lower()}, not in preparation")
    ideas = study_ideas(study)
    if not ideas.exists():
        reasons.append("the study has no ideas")
    table = topic_matching_table(study=study)
    if not table.balanced and not study.topic_mismatch_reason.strip():
        reasons.append(
            "conditions differ in ideas per topic ("
            + ", ".join(table.unbalanced)
            + "): leave surplus ideas out or record a reason"
        )
    unsigned = ideas.exclude(normalization_status__in=REVIEWABLE).count()
    if unsigned:
        reasons.append(
            f"{counted(unsigned, 'idea')} {'has' if unsigned == 1 else 'have'} no approved normalised text"
        )
    return reasons


#: What an owner types to open a study whose reviewer-facing texts the leakage check can
#: tell apart by source.
LEAKAGE_ACKNOWLEDGEMENT = "reviewers may tell the sources apart"


class LeakageNotAcknowledged(StudyNotReady):
    """The latest leakage check says the texts reviewers will read give their source away,
    and the owner has not typed the acknowledgement."""


def _acknowledged(text: str) -> bool:
    return " ".join(text.lower().split()).strip(" .") == LEAKAGE_ACKNOWLEDGEMENT


def study_leakage_warning(study: Study) -> dict[str, Any] | None:
    """The latest finished leakage check's result on the approved texts (what reviewers
    read) when it says they are easy to tell apart; None otherwise."""
    latest = leakage_check_latest(study)
    if latest is None:
        return None
    after = (latest.params.get("result") or {}).get("after") or {}
    kind, words = leakage_side_reading(after)
    if kind != "easy":
        return None
    return {
        "job": latest.pk,
        "finished_at": latest.finished_at,
        "auc": after["auc"],
        "ci_low": after["ci_low"],
        "ci_high": after["ci_high"],
        "n_ai": after.get("n_ai"),
        "n_human": after.get("n_human"),
        "verdict": words,
    }


def study_open_status(study: Study) -> dict[str, Any]:
    """What the "Open for review" card shows: whether the study is open, why it cannot
    open yet, the committed work waiting for it, the leakage warning that needs a typed
    acknowledgement, and the reviewer-visible text that names a source."""

    waiting = Assignment.objects.filter(
        study=study,
        status__in=[Assignment.Status.PENDING, Assignment.Status.DRAFT],
        reviewer__dropped_at__isnull=True,
    )
    is_open = study.is_open_to_reviewers()
    return {
        "is_open": is_open,
        "imported": study_status(study).imported,
        "readiness": [] if is_open else study_readiness(study=study),
        "assignments": waiting.count(),
        "reviewers": waiting.values("reviewer_id").distinct().count(),
        "leakage": None if is_open else study_leakage_warning(study),
        "phrase": LEAKAGE_ACKNOWLEDGEMENT,
        "text_warnings": [] if is_open else source_warnings(study_source_mentions(study)),
    }


def study_open_for_review(
    *, study: Study, actor: Any = None, acknowledgement: str = "", link_for: Any = None
) -> Study:
    """Move the study to reviewing, if topic matching and sign-off allow it, and mail the
    reviewers whose committed assignments were waiting for it.

    When the latest leakage check says the approved texts are easy to tell apart by
    source, the owner must type :data:`LEAKAGE_ACKNOWLEDGEMENT`; it is recorded in the
    audit event with the check it answers."""

    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        reasons = study_readiness(study=study)
        if reasons:
            raise StudyNotReady(reasons)
        warning = study_leakage_warning(study)
        if warning is not None and not _acknowledged(acknowledgement):
            raise LeakageNotAcknowledged(
                [
                    f"the latest leakage check says the texts reviewers will read are easy to "
                    f"tell apart by source (AUC {fixed(warning['auc'], 2)}, 95% CI "
                    f"{interval_text(warning['ci_low'], warning['ci_high'], 2)}); to open anyway, "
                    f"type “{LEAKAGE_ACKNOWLEDGEMENT}”"
                ]
            )
        study.status = Study.Status.REVIEWING
        study.save(update_fields=["status", "updated_at"])
        waiting = sorted(
            set(
                Assignment.objects.filter(
                    study=study,
                    status__in=[Assignment.Status.PENDING, Assignment.Status.DRAFT],
                    reviewer__dropped_at__isnull=True,
                ).values_list("reviewer_id", flat=True)
            )
        )
        detail: dict[str, Any] = {"topic_mismatch_reason": study.topic_mismatch_reason}
        if warning is not None:
            detail.update(
                leakage_acknowledged=" ".join(acknowledgement.split()),
                leakage_check=warning["job"],
                leakage_auc=warning["auc"],
                leakage_ci=[warning["ci_low"], warning["ci_high"]],
            )
        audit(
            study=study,
            actor=actor,
            verb="study_opened_for_review",
            reviewers=len(waiting),
            **detail,
        )
        transaction.on_commit(
            lambda: reviewers_notify_new_work(study=study, reviewer_ids=waiting, link_for=link_for)
        )
    return study


# --------------------------------------------------------------------------- addresses

SLUG_SUFFIX_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"  # no 0/o or 1/l to misread
SLUG_SUFFIX_LENGTH = 6
SLUG_NAME_MAX = 64 - SLUG_SUFFIX_LENGTH - 1


def study_slug_new(name: str) -> str:
    """A server-unique slug for a study a researcher creates: the name they chose and
    random characters, always, whatever studies exist. A slug taken by someone else's
    study therefore changes nothing the researcher sees, and the page that creates the
    study can never say that a name is in use (docs/architecture.md, "Teams")."""
    base = slugify(name)[:SLUG_NAME_MAX].strip("-_") or "study"
    while True:
        suffix = "".join(secrets.choice(SLUG_SUFFIX_ALPHABET) for _ in range(SLUG_SUFFIX_LENGTH))
        slug = f"{base}-{suffix}"
        if not Study.objects.filter(slug=slug).exists():
            return slug


# --------------------------------------------------------------------------- reviewer-visible text

#: The study's own texts that reviewers read, and where they read them.
REVIEWER_VISIBLE: dict[str, str] = {
    "title": "every reviewer page and every mail to reviewers (the invitation and its "
    "reminders, “your ideas are ready”, review reminders, the sign-up decision)",
    "description": "the invitation page",
    "topics": "the profile (each reviewer picks their topics), the list of reviews and "
    "each review page",
}


def study_reviewer_texts(study: Study) -> dict[str, str]:
    """The texts of :data:`REVIEWER_VISIBLE` as they stand (topics one per line)."""
    return {
        "title": study.title,
        "description": study.description,
        "topics": "\n".join(study.topics.values_list("name", flat=True)),
    }


def study_source_mentions(study: Study) -> list[SourceMention]:
    """Where the study's reviewer-visible text names one of its conditions (key or
    label) or a source of ideas (AI, GPT, human-written, …)."""
    names = [n for pair in study.conditions.values_list("key", "label") for n in pair if n]
    return source_mentions(study_reviewer_texts(study), conditions=names)


def source_warnings(mentions: Iterable[SourceMention]) -> list[str]:
    """One sentence per mention, naming the field, the words and where reviewers see it."""
    return [
        f"The {m.field} {m.reason} (“{m.term}”: {m.excerpt}); reviewers see it on "
        f"{REVIEWER_VISIBLE[m.field]}."
        for m in mentions
    ]


# --------------------------------------------------------------------------- conditions


def conditions_parse(text: str) -> list[tuple[str, str]]:
    """ "Human, AI, AI_Rerank:ai" → [(key, kind)]. A key's kind is given after a colon
    (human or ai); without one, keys starting with "human" are human, the rest AI."""
    pairs: list[tuple[str, str]] = []
    for item in text.replace("\n", ",").split(","):
        key, _, kind = (part.strip() for part in item.partition(":"))
        if not key:
            continue
        if not kind:
            kind = "human" if key.lower().startswith("human") else "ai"
        kind = kind.lower()
        if kind not in Condition.Kind.values:
            raise SetupError(f"condition {key}: the kind must be human or ai, not {kind!r}")
        if not key.replace("_", "").replace("-", "").isalnum():
            raise SetupError(f"condition {key!r}: use letters, digits, '_' or '-' only")
        if key in {k for k, _ in pairs}:
            raise SetupError(f"condition {key} is listed twice")
        pairs.append((key, kind))
    return pairs


def topics_parse(text: str) -> list[str]:
    """One topic per line (or comma-separated on one line); duplicates are refused."""
    lines = text.splitlines() if "\n" in text.strip() else text.split(",")
    topics: list[str] = []
    for line in lines:
        name = line.strip()
        if not name:
            continue
        if name.lower() in {t.lower() for t in topics}:
            raise SetupError(f"topic {name!r} is listed twice")
        if len(name) > 120:
            raise SetupError(f"topic {name[:40]!r}…: at most 120 characters")
        topics.append(name)
    return topics


def conditions_text(study: Study) -> str:
    return ", ".join(f"{c.key}:{c.kind}" for c in study.conditions.order_by("key"))


def topics_text(study: Study) -> str:
    return "\n".join(t.name for t in study.topics.order_by("name"))


# --------------------------------------------------------------------------- locks

# Each event and the parameters it locks (docs/study-settings.md has the same table).
LOCKS: list[tuple[str, tuple[str, ...]]] = [
    ("ideas", ("conditions", "topics")),
    ("assignment", ("min_load", "max_load", "min_reviews_per_idea", "max_reviews_per_idea")),
    ("assignment", ("topic_choice_use", "gold_per_reviewer")),
    ("screened", ("screening_min_papers",)),
    ("reviews", ("review_form",)),
    ("submitted", ("rationale_min_words", "baseline_condition")),
    (
        "closed",
        (
            "invitation_days",
            "invitation_bind_email",
            "reviews_due_at",
            "payment_currency",
            "payment_per_review",
            "payment_per_idea",
            "payment_bonus",
            "payment_bonus_top_k",
        ),
    ),
]

EVENT_REASONS = {
    "ideas": "ideas have been imported, and each names its topic and conditions",
    "assignment": "the assignment has been committed",
    "screened": "reviewers have been screened under the current rule",
    "reviews": "reviews exist on the current form",
    "submitted": "reviews have been submitted under it",
    # A study of imported reviews: nobody submitted them here.
    "imported": "the imported reviews were written under it",
    "closed": "the study is closed",
}


def _events(study: Study) -> set[str]:
    found = set()
    if study.ideas.exists():
        found.add("ideas")
    if study.assignments.exclude(status=Assignment.Status.WITHDRAWN).exists():
        found.add("assignment")
    if study.reviewers.exclude(screening=Reviewer.Screening.PENDING).exists():
        found.add("screened")
    if study.reviews.exists():
        found.update({"reviews", "ideas"})
    if study.reviews.filter(status="submitted").exists():
        found.add("submitted")
    if study.is_closed():
        found.add("closed")
    return found


def study_locks(study: Study) -> dict[str, str]:
    """Parameter name → why it can no longer change. A closed study locks everything."""
    events = _events(study)
    if "submitted" in events and study_status(study).imported:
        events.add("imported")
    locks: dict[str, str] = {}
    for event, fields in LOCKS:
        if event in events or "closed" in events:
            if "closed" in events:
                event = "closed"
            elif event == "submitted" and "imported" in events:
                event = "imported"
            reason = EVENT_REASONS[event]
            for field in fields:
                locks.setdefault(field, f"Locked: {reason}.")
    return locks


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class SettingsChange:
    """What the settings form cleaned: plain study fields, and the rest by name."""

    fields: dict[str, Any]
    conditions: list[tuple[str, str]] | None = None
    topics: list[str] | None = None
    form: Any = None  # a FormDefinition, or None to keep the study's


def study_settings_update(*, study: Study, change: SettingsChange, actor: Any) -> list[str]:
    """Apply the changes that differ from the study; a change to a locked parameter is
    refused with its reason (nothing is saved then). Returns the names changed."""
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        locks = study_locks(study)
        changed = [n for n, v in change.fields.items() if getattr(study, n) != v]
        if change.conditions is not None and dict(change.conditions) != dict(_conditions(study)):
            changed.append("conditions")
        if change.topics is not None and sorted(change.topics) != sorted(_topics(study)):
            changed.append("topics")
        if change.form is not None and change.form.to_dict() != study.review_form.definition:
            changed.append("review_form")
        refused = [f"{name}: {locks[name]}" for name in changed if name in locks]
        if refused:
            raise SetupError("; ".join(refused))
        for name in changed:
            if name in change.fields:
                setattr(study, name, change.fields[name])
        if "review_form" in changed:
            study.review_form = review_form_ensure(definition=change.form)
        _baseline_check(study, change)
        study.save()
        if "conditions" in changed and change.conditions is not None:
            _conditions_replace(study, change.conditions)
        if "topics" in changed and change.topics is not None:
            _topics_replace(study, change.topics)
        if changed:
            audit(study=study, actor=actor, verb="study_settings_changed", fields=changed)
    return changed


def _conditions(study: Study) -> list[tuple[str, str]]:
    return [(c.key, c.kind) for c in study.conditions.order_by("pk")]


def _topics(study: Study) -> list[str]:
    return list(study.topics.values_list("name", flat=True))


def _baseline_check(study: Study, change: SettingsChange) -> None:
    keys = [k for k, _ in (change.conditions or _conditions(study))]
    if study.baseline_condition and keys and study.baseline_condition not in keys:
        raise SetupError(
            f"baseline_condition: {study.baseline_condition!r} is not one of the "
            f"conditions {', '.join(keys)}"
        )


def _conditions_replace(study: Study, conditions: Iterable[tuple[str, str]]) -> None:
    wanted = dict(conditions)
    study.conditions.exclude(key__in=wanted).delete()
    for key, kind in wanted.items():
        Condition.objects.update_or_create(
            study=study, key=key, defaults={"kind": kind, "label": key}
        )


def _topics_replace(study: Study, topics: Iterable[str]) -> None:
    wanted = list(topics)
    study.topics.exclude(name__in=wanted).delete()
    for name in wanted:
        Topic.objects.get_or_create(study=study, name=name)


# --------------------------------------------------------------------------- deleting


def _study_calls(study: Study) -> set[int]:
    """The LLM calls the study made or reused: the rows its export carries."""

    section = next(s for s in STUDY_SECTIONS if s.model is LLMCall)
    return set(section.rows(study).values_list("pk", flat=True))


def _calls_still_used(ids: set[int]) -> set[int]:
    """Of `ids`, the calls some row still points to (another study's outcome that the
    cache answered from one of them): those stay, and their rows keep them."""
    used: set[int] = set()
    # Hidden relations too: several point here with related_name="+".
    for rel in LLMCall._meta.get_fields(include_hidden=True):
        if not isinstance(rel, ForeignObjectRel) or not rel.one_to_many:
            continue
        name, model = rel.field.name, rel.related_model
        assert model is not None and not isinstance(model, str)
        used.update(
            model._default_manager.filter(**{f"{name}__in": ids}).values_list(name, flat=True)
        )
    return used


def study_delete_plan(study: Study) -> dict[str, int]:
    """What a delete would remove, for the page that asks."""
    calls = _study_calls(study)
    return {
        "ideas": study.ideas.count(),
        "reviews": study.reviews.count(),
        "reviewers": study.reviewers.count(),
        "invitations": study.invitations.count(),
        "reports": study.reports.count(),
        "judge_runs": study.judge_runs.count(),  # type: ignore[attr-defined]
        "calls": len(calls),
        "audit_entries": study.audit_events.count(),
    }


def study_delete(*, study: Study, confirm: str, actor: Any) -> dict[str, int]:
    """Delete the study and everything in it, once the slug is typed to confirm: its
    rows, the LLM calls it made (except those another study's outcomes still use, which
    keep them) and its report files. The "study_deleted" entry goes to the server's
    audit log, which outlives the study. Returns what was removed."""
    if confirm.strip() != study.slug:
        raise SetupError(f"type the study's slug ({study.slug}) to confirm")
    removed = study_delete_plan(study)
    calls = _study_calls(study)
    try:
        with transaction.atomic():
            # Reviews and pair ratings first: nothing but this confirmed delete of the
            # whole study may take them. Then ideas: an idea protects its topic.
            study.reviews.all().delete()
            PairJudgment.objects.filter(task__study=study).delete()
            study.ideas.all().delete()
            # A batch's bookkeeping (ids at the endpoint, custom id → call) outlives its
            # run by design (SET_NULL): with the whole study gone it has nothing to serve.
            LLMBatch.objects.filter(run__study=study).delete()
            slug, pk = study.slug, study.pk
            study.delete()
            kept = _calls_still_used(calls)
            LLMCall.objects.filter(pk__in=calls - kept).delete()
            removed["calls"], removed["calls_kept"] = len(calls - kept), len(kept)
            audit(study=None, actor=actor, verb="study_deleted", slug=slug, pk=pk, **removed)
            # Files go once the rows are gone for good.
            transaction.on_commit(
                lambda: storage_folder_remove(reports_storage(), slug), robust=True
            )
    except ProtectedError as exc:
        kinds = sorted({str(type(o)._meta.verbose_name_plural) for o in exc.protected_objects})
        raise SetupError(f"the study cannot be deleted while it has {', '.join(kinds)}") from None
    return removed


# --------------------------------------------------------------------------- team


def _find_user(identifier: str) -> Any:
    User = get_user_model()
    identifier = identifier.strip()
    users = list(User.objects.filter(Q(username__iexact=identifier) | Q(email__iexact=identifier)))
    if not users:
        raise NoAccountError(f"no single account with the username or email {identifier!r}")
    if len(users) != 1:
        raise SetupError(f"several accounts match {identifier!r}; use the username")
    return users[0]


def member_add(*, study: Study, identifier: str, role: str, actor: Any) -> StudyMember:
    """Add a researcher to the team. Reviewers of the study cannot join it: no member
    may review in the study they run."""
    user = _find_user(identifier)
    if role not in StudyMember.Role.values:
        raise SetupError(f"unknown role {role!r}")
    if not is_researcher(user):
        raise SetupError(f"{user.get_username()} is not a researcher (ask an administrator)")
    if study.reviewers.filter(user=user).exists():
        raise SetupError(
            f"{user.get_username()} is a reviewer in this study; members may not review in it"
        )
    with transaction.atomic():
        if study.members.filter(user=user).exists():  # type: ignore[attr-defined]
            raise SetupError(f"{user.get_username()} is on the team already")
        member = StudyMember.objects.create(study=study, user=user, role=role, added_by=actor)
        audit(study=study, actor=actor, verb="member_added", user=user.pk, role=role)
        transaction.on_commit(lambda: _member_added_mail(member, actor))
    return member


def _member_added_mail(member: StudyMember, actor: Any) -> None:
    """Tell a researcher they were put on a team (nobody joins one unawares), and that
    they may leave it from its Team page. A mail failure is logged, never raised."""
    user = member.user
    if not user.email:
        return
    study = member.study
    who = actor.get_username() if actor is not None and actor.pk else "An administrator"
    base = settings.IDEAREVIEW_BASE_URL
    body = (
        f"{who} added you to the team of the study “{study.title}” as "
        f"{member.get_role_display().lower()}.\n\n"
        f"The study: {base}{reverse('studies:study_detail', args=[study.slug])}\n"
        f"If you should not be on it, leave the team from its Team page: "
        f"{base}{reverse('studies:study_members', args=[study.slug])}\n"
    )
    try:
        send_mail("You were added to a study's team", body, None, [user.email])
    except Exception:  # the membership stands; the pages show it
        logger.exception("member-added mail to user %s failed", user.pk)


def _other_owners(study: Study, member: StudyMember) -> bool:
    return (
        study.members.filter(role=StudyMember.Role.OWNER)  # type: ignore[attr-defined]
        .exclude(pk=member.pk)
        .exists()
    )


def member_role_set(*, member: StudyMember, role: str, actor: Any) -> None:
    if role not in StudyMember.Role.values:
        raise SetupError(f"unknown role {role!r}")
    demoted = member.role == StudyMember.Role.OWNER and role != member.role
    if demoted and not _other_owners(member.study, member):
        raise SetupError("a study keeps at least one owner; make someone else owner first")
    member.role = role
    member.save(update_fields=["role"])
    audit(study=member.study, actor=actor, verb="member_role_set", user=member.user_id, role=role)


def member_remove(*, member: StudyMember, actor: Any) -> None:
    """An owner removes a member, or a member leaves (`actor` is the member)."""
    if member.role == StudyMember.Role.OWNER and not _other_owners(member.study, member):
        raise SetupError("a study keeps at least one owner; make someone else owner first")
    member.delete()
    verb = "member_left" if actor is not None and actor.pk == member.user_id else "member_removed"
    audit(study=member.study, actor=actor, verb=verb, user=member.user_id)


def user_is_member(*, study: Study, user: Any) -> bool:
    """Members run the study and so may never review in it."""
    return bool(user and user.pk and study.members.filter(user_id=user.pk).exists())  # type: ignore[attr-defined]


@transaction.atomic
def study_plan_set(
    *, study: Study, source: str | bytes | Mapping[str, Any], actor: Any
) -> AnalysisPlan:
    """Parse, check and store a plan; PlanError (naming every field that is wrong) leaves
    it unchanged."""
    try:
        plan = parse_plan(source)
    except PlanError as exc:
        if exc.partial is None:
            raise
        # What did parse is checked against the study too, so one answer names it all.
        try:
            plan_check_for_study(exc.partial, study)
        except PlanError as more:
            raise PlanError(*exc.problems, *more.problems) from None
        raise
    plan_check_for_study(plan, study)
    study.analysis_plan = plan_document(plan)
    study.save(update_fields=["analysis_plan", "updated_at"])
    audit(study=study, actor=actor, verb="plan_set", hash=plan_hash(plan))
    return plan


@transaction.atomic
def study_plan_freeze(*, study: Study, actor: Any) -> str:
    """Register the current plan: store a copy, its hash and the time. Returns the hash."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.analysis_plan_frozen_at is not None:
        raise PlanError(
            f"the plan was already frozen at {study.analysis_plan_frozen_at:%Y-%m-%d %H:%M} UTC"
        )
    if study.reports.exists():
        raise PlanError(
            "a report has been built: results by condition have been seen, so the plan can "
            "no longer be registered"
        )
    plan = study_plan(study)
    plan_check_for_study(plan, study)
    digest = plan_hash(plan)
    study.analysis_plan_registered = plan_document(plan)
    study.analysis_plan_hash = digest
    study.analysis_plan_frozen_at = timezone.now()
    study.save(
        update_fields=[
            "analysis_plan_registered",
            "analysis_plan_hash",
            "analysis_plan_frozen_at",
            "updated_at",
        ]
    )
    audit(study=study, actor=actor, verb="plan_frozen", hash=digest)
    return digest


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
    except (KeyError, TypeError, AttributeError, ValueError, IntegrityError) as exc:
        # A file of the right format whose rows are not what this version writes, or that
        # clash with this database's (a corpus of the same owner and name holding other
        # papers at the file's rows): the transaction is rolled back, nothing is kept.
        raise TransferError(
            f"the study file's rows cannot be read ({type(exc).__name__}: {exc})"
        ) from None
    return m.Study.objects.get(slug=data["study"])
