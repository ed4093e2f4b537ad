"""Setting a study up: who may create studies, the study's parameters and when each is
locked, and the study's team. Keyword-only `<entity>_<action>` workflows;
views and commands call these.

The lock table is written down in docs/study-settings.md; `study_locks` is its code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import transaction
from django.db.models import ForeignObjectRel, ProtectedError, Q

from judging.llm.models import LLMCall

from .models import Assignment, Condition, PairJudgment, Reviewer, Study, StudyMember, Topic
from .protocol.source_words import SourceMention, source_mentions
from .services import audit, review_form_ensure
from .storage import reports_storage, storage_folder_remove

RESEARCHERS_GROUP = "Researchers"
CREATE_STUDY_PERMISSION = "studies.add_study"


class SetupError(ValueError):
    """A setting or team change that is refused; the message says why."""


# --------------------------------------------------------------------------- researchers


def is_researcher(user: Any) -> bool:
    """Researchers may create studies: the `studies.add_study` permission, granted
    directly, through the Researchers group, or by being a superuser."""
    return bool(user.is_authenticated and user.has_perm(CREATE_STUDY_PERMISSION))


def researcher_grant(*, user: Any) -> None:
    """Put the user in the Researchers group (created with its permission if needed)."""
    group, _ = Group.objects.get_or_create(name=RESEARCHERS_GROUP)
    app_label, codename = CREATE_STUDY_PERMISSION.split(".")
    permission = Permission.objects.get(content_type__app_label=app_label, codename=codename)
    group.permissions.add(permission)
    user.groups.add(group)


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
    ("assignment", ("topic_choice_use",)),
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
    locks: dict[str, str] = {}
    for event, fields in LOCKS:
        if event in events or "closed" in events:
            reason = EVENT_REASONS["closed" if "closed" in events else event]
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
    from .transfer import STUDY_SECTIONS

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
    if len(users) != 1:
        raise SetupError(
            f"no single account with the username or email {identifier!r}"
            if not users
            else f"several accounts match {identifier!r}; use the username"
        )
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
    return member


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
    if member.role == StudyMember.Role.OWNER and not _other_owners(member.study, member):
        raise SetupError("a study keeps at least one owner; make someone else owner first")
    member.delete()
    audit(study=member.study, actor=actor, verb="member_removed", user=member.user_id)


def user_is_member(*, study: Study, user: Any) -> bool:
    """Members run the study and so may never review in it."""
    return bool(user and user.pk and study.members.filter(user_id=user.pk).exists())  # type: ignore[attr-defined]
