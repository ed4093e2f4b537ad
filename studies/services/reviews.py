"""Reviewers' work: review drafts and submission, pair tasks, progress and reminders.

Keyword-only workflows named `<entity>_<action>` (docs/architecture.md). They take model
instances and plain values, never a request; links in mails are built by the caller
(`link_for`) because only the caller knows the site's address.

Blinding: nothing here hands a reviewer an idea's condition, author, institution,
external id or import position. Reviewer-facing URLs carry assignment and pair-task ids
(created in shuffled order) or signed random tokens, never an idea's primary key.
"""

from __future__ import annotations

import functools
import random
import secrets
from collections import Counter, defaultdict
from typing import Any

from django.core.mail import send_mail
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from .. import csvsafe
from ..draft_sql import assignment_activity_update, draft_save_at_once, review_draft_update
from ..models import (
    Assignment,
    Idea,
    IdeaCondition,
    PairJudgment,
    PairTask,
    Review,
    ReviewAcceptance,
    Reviewer,
    ReviewRevision,
    ReviewScore,
    Study,
)
from ..protocol.forms import FormDefinition
from ..protocol.textcheck import control_character_problem
from ..status import PAIRS, refuse_if_imported
from .assignment import IDLE_CAP_SECONDS, assignment_touch
from .audit import audit
from .ideas import idea_label
from .invitations import (
    LinkFor,
    RecruitmentError,
    TextRejected,
    default_link_for,
    invitation_send,
    reviewer_greeting,
)

PAIR_DIMENSIONS = ["overall", "novelty", "feasibility", "excitement", "effectiveness"]
MAX_ANSWER_CHARS = 20_000


def pair_dimensions(study: Study) -> list[str]:
    """What reviewers compare idea pairs on: the form's own `pair_metrics` when it names
    them, else the usual dimensions the form has, else its last metric (forms end with
    their holistic score)."""
    definition = study.form_definition()
    if definition.pair_metrics:
        return list(definition.pair_metrics)
    keys = definition.metric_keys
    return [d for d in PAIR_DIMENSIONS if d in keys] or keys[-1:]


def _review_for(assignment: Assignment) -> Review:
    review = Review.objects.filter(assignment=assignment).first()
    if review is None:
        review = _review_create(assignment)
    return review


def _review_create(assignment: Assignment) -> Review:
    try:
        with transaction.atomic():
            return Review.objects.create(
                study_id=assignment.study_id,
                idea_id=assignment.idea_id,
                reviewer_id=assignment.reviewer_id,
                assignment=assignment,
                status=Review.Status.DRAFT,
            )
    except IntegrityError:  # another tab created it first
        return Review.objects.get(assignment=assignment)


class StaleReview(RecruitmentError):
    """The page that sent answers was opened before the review was last submitted (in
    another tab or window); its answers are not stored over the submitted ones without a
    warning."""

    def __init__(self, review: Review):
        last = review.revisions.order_by("-number").first()
        when = timezone.localtime(last.created_at if last else timezone.now())
        super().__init__(
            f"This review was submitted from another tab or window at {when:%H:%M:%S}, after "
            "this page was opened, so these answers were not saved over it. Reload the page "
            "to see the submitted answers; copy anything you want to keep first."
        )
        self.version = review.version


CLOSED_MESSAGE = "The study is closed; reviews can no longer be changed."
DECIDED_MESSAGE = (
    "The study team has already decided on this review, so it is kept as it was when they "
    "decided and can no longer be changed."
)


def review_decided(review: Review | None) -> bool:
    """Whether the study team has accepted or rejected the review (the decision itself is
    not the reviewer's to see). A decided review is kept as it was decided: what was paid
    for, or refused, is what the analysis reads. Uses the decision read with the review
    when there is one (studies/page_sql.py, studies/draft_sql.py), else asks."""
    if review is None or review.pk is None:
        return False
    if Review.acceptance.is_cached(review):  # type: ignore[attr-defined]
        return getattr(review, "acceptance", None) is not None
    return ReviewAcceptance.objects.filter(review_id=review.pk).exists()


def review_locked_reason(*, study: Study, review: Review | None) -> str:
    """Why the reviewer can no longer change this review ("" while they can)."""
    if study.is_closed():
        return CLOSED_MESSAGE
    if review_decided(review):
        return DECIDED_MESSAGE
    return ""


def _check_version(review: Review, version: int | None) -> None:
    if version is not None and version != review.version:
        raise StaleReview(review)


def review_draft_save(
    *,
    assignment: Assignment,
    draft: dict[str, str],
    version: int | None = None,
    definition: FormDefinition | None = None,
) -> Review:
    """Keep the answers typed so far. With `version` (the review's number of submits when
    the page was opened), a page opened before a later submit gets StaleReview instead:
    its draft would otherwise show over the submitted answers. `definition` is the
    study's parsed form when the caller has it already. A review the study team has
    decided on takes no draft (review_decided).

    Autosaves come every few seconds from every reviewer typing, so this is a handful of
    statements and no read under lock (on PostgreSQL usually one statement,
    draft_save_at_once): the version is checked by the UPDATE itself (a
    submit that holds the review row makes it wait, and PostgreSQL then re-checks the
    version on the submitted row), and the assignment's activity is written only if no
    other request touched it since `assignment` was read (else it is read again under
    lock). The assignment row is written before the review row, in the order
    review_submit locks them, so the two never deadlock."""
    if assignment.study.is_closed():
        raise RecruitmentError(CLOSED_MESSAGE)
    if not assignment.study.is_open_to_reviewers():
        raise RecruitmentError("The study is not open for review yet.")
    _draft_check_text(definition or assignment.study.form_definition(), draft)
    now = timezone.now()
    stored = {k: str(v)[:MAX_ANSWER_CHARS] for k, v in draft.items()}
    review = _review_cached(assignment)
    if review_decided(review):
        raise RecruitmentError(DECIDED_MESSAGE)
    if review is not None and _draft_save_quick(assignment, review, stored, now, version):
        return review
    with transaction.atomic():
        _commit_without_waiting_for_disk()
        _assignment_touch_for_draft(assignment, now)
        if review is None:
            review = _review_for(assignment)
            if review_decided(review):
                raise RecruitmentError(DECIDED_MESSAGE)
        if not review_draft_update(review_id=review.pk, draft=stored, at=now, version=version):
            raise StaleReview(Review.objects.get(pk=review.pk))
    review.draft, review.draft_saved_at = stored, now
    return review


def _draft_save_quick(
    assignment: Assignment, review: Review, stored: dict[str, str], now: Any, version: int | None
) -> bool:
    """The usual autosave (its review exists, no other request touched the assignment
    since it was read) in one statement on PostgreSQL (draft_save_at_once). False, with
    `assignment` as it was read, when that does not apply; the draft is then not stored."""
    if connection.vendor != "postgresql":
        return False
    before = (assignment.opened_at, assignment.last_seen_at, assignment.active_seconds)
    assignment.record_activity(now, IDLE_CAP_SECONDS)
    if draft_save_at_once(
        assignment=assignment,
        seen=before[1],
        draft_status=assignment.status == Assignment.Status.PENDING,
        review_id=review.pk,
        draft=stored,
        at=now,
        version=version,
        quick_commit=not connection.in_atomic_block,
    ):
        review.draft, review.draft_saved_at = stored, now
        return True
    assignment.opened_at, assignment.last_seen_at, assignment.active_seconds = before
    return False


def _review_cached(assignment: Assignment) -> Review | None:
    """The review read with the assignment (select_related), without a query."""
    if not Assignment.review.is_cached(assignment):  # type: ignore[attr-defined]
        return None
    return getattr(assignment, "review", None)


def _assignment_touch_for_draft(assignment: Assignment, now: Any) -> None:
    """assignment_touch, and PENDING becomes DRAFT, in one UPDATE that applies only if
    the row still has the activity `assignment` was read with; otherwise another request
    touched it meanwhile, and the row is read again under lock."""
    seen = assignment.last_seen_at
    assignment.record_activity(now, IDLE_CAP_SECONDS)
    pending = assignment.status == Assignment.Status.PENDING
    if assignment_activity_update(assignment=assignment, seen=seen, draft_status=pending):
        return
    locked = Assignment.objects.select_for_update().get(pk=assignment.pk)
    assignment_touch(assignment=locked, now=now)
    if locked.status == Assignment.Status.PENDING:
        locked.status = Assignment.Status.DRAFT
        locked.save(update_fields=["status"])


def _commit_without_waiting_for_disk() -> None:
    """Drafts arrive every few seconds while a reviewer types and each replaces the last:
    on PostgreSQL this transaction's commit does not wait for its WAL flush, which is most
    of an autosave's time on a busy disk. A database crash can lose the last draft (a few
    seconds of typing, sent again by the next autosave); submitted reviews keep the full
    guarantee."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


def _draft_check_text(definition: FormDefinition, draft: dict[str, str]) -> None:
    """A control character refuses the draft with the field named (PostgreSQL would refuse
    a NUL with an error page)."""
    labels = {f"{m.key}_rationale": f"{m.label} rationale" for m in definition.metrics}
    for key, value in draft.items():
        problem = control_character_problem(str(value))
        if problem:
            raise TextRejected(f"Not saved: {labels.get(key, key)} {problem}.")


def review_current_values(review: Review | None, *, with_draft: bool = True) -> dict[str, str]:
    """What the form shows: the draft over the submitted answers (the submitted answers
    alone without `with_draft`)."""
    if review is None:
        return {}
    values: dict[str, str] = {}
    if review.status == Review.Status.SUBMITTED:
        for s in review.scores.all():
            values[s.metric] = str(int(s.score)) if float(s.score).is_integer() else str(s.score)
            values[f"{s.metric}_rationale"] = s.rationale
        if review.familiarity is not None:
            values["familiarity"] = str(review.familiarity)
        if review.confidence is not None:
            values["confidence"] = str(review.confidence)
        if review.minutes is not None:
            values["minutes"] = f"{review.minutes:g}"
        values.update({k: str(v) for k, v in (review.extra or {}).get("attention", {}).items()})
    if with_draft:
        values.update({k: v for k, v in (review.draft or {}).items()})
    return values


def review_submit(
    *, assignment: Assignment, cleaned: dict[str, Any], version: int | None = None
) -> tuple[Review, bool]:
    """Store the validated answers as the assignment's one review; returns (review,
    changed). A repeated submit of the same answers (double click, second tab) changes
    nothing; a different one after submission is an edit and gets a new revision. With
    `version`, different answers from a page opened before the review last changed get
    StaleReview. Once the study team has decided on the review, nothing changes it."""
    study = assignment.study
    if study.is_closed():
        raise RecruitmentError(CLOSED_MESSAGE)
    if not study.is_open_to_reviewers():
        raise RecruitmentError("The study is not open for review yet.")
    metrics = study.form_definition().metric_keys
    data: dict[str, Any] = {
        "scores": {m: int(cleaned[m]) for m in metrics},
        "rationales": {m: (cleaned.get(f"{m}_rationale") or "").strip() for m in metrics},
        "familiarity": int(cleaned["familiarity"]),
        "confidence": int(cleaned["confidence"]),
        "minutes": cleaned.get("minutes"),
    }
    checks = study.form_definition().attention_checks
    if checks:  # only then: revisions of forms without checks keep their shape
        data["attention"] = {c.key: int(cleaned[c.key]) for c in checks}
    with transaction.atomic():
        assignment = (
            Assignment.objects.select_for_update().select_related("study").get(pk=assignment.pk)
        )
        if assignment.status == Assignment.Status.WITHDRAWN:
            raise RecruitmentError("This idea is no longer assigned to you.")
        review = Review.objects.select_for_update().filter(assignment=assignment).first()
        if review is None:
            review = _review_for(assignment)
        # Read under the review's lock, which review_decide takes too.
        if review_decided(review):
            raise RecruitmentError(DECIDED_MESSAGE)
        last = review.revisions.order_by("-number").first()
        if review.status == Review.Status.SUBMITTED and last is not None and last.data == data:
            if review.draft:
                review.draft = {}
                review.save(update_fields=["draft"])
            return review, False
        _check_version(review, version)
        assignment_touch(assignment=assignment)
        now = timezone.now()
        review.version += 1
        review.status = Review.Status.SUBMITTED
        review.familiarity = data["familiarity"]
        review.confidence = data["confidence"]
        review.minutes = data["minutes"]
        review.minutes_raw = "" if data["minutes"] is None else f"{data['minutes']:g}"
        review.minutes_measured = round(assignment.active_seconds / 60.0, 2)
        review.honor_code_raw = "accepted" if assignment.reviewer.honor_code_at else ""
        review.consent_raw = "given" if assignment.reviewer.consent_at else ""
        review.submitted_at = review.submitted_at or now
        if checks:
            review.extra = {**(review.extra or {}), "attention": data["attention"]}
        review.draft = {}
        review.save()
        review.scores.all().delete()
        ReviewScore.objects.bulk_create(
            [
                ReviewScore(
                    review=review,
                    metric=m,
                    score=data["scores"][m],
                    rationale=data["rationales"][m],
                )
                for m in metrics
            ]
        )
        ReviewRevision.objects.create(
            review=review,
            number=(last.number + 1) if last else 1,
            data=data,
            minutes_measured=review.minutes_measured,
        )
        assignment.status = Assignment.Status.SUBMITTED
        assignment.save(update_fields=["status"])
        audit(
            study=study,
            actor=assignment.reviewer.user,
            verb="review_submitted" if last is None else "review_edited",
            assignment=assignment.pk,
        )
    return review, True


# --------------------------------------------------------------------------- pair tasks


def _reviewer_may_see(reviewer: Reviewer, idea: Idea, keys: frozenset[str]) -> bool:
    from ..protocol.institutions import institution_keys

    return not (institution_keys([idea.author_institution]) & keys)


def _pairs_between(
    pools: list[list[Idea]],
    conds_of: dict[int, set[str]],
    have: set[frozenset[int]],
    condition_a: str,
    condition_b: str,
    k: int,
    rng: random.Random,
) -> list[tuple[Idea, Idea]]:
    """Up to k pairs with A from `condition_a` and B from `condition_b`, at random."""
    options = [
        (x, y)
        for pool in pools
        for x in pool
        for y in pool
        if x.pk != y.pk
        and condition_a in conds_of[x.pk]
        and condition_b in conds_of[y.pk]
        # An idea in both conditions compares nothing.
        and conds_of[x.pk] != conds_of[y.pk]
        and frozenset((x.pk, y.pk)) not in have
    ]
    rng.shuffle(options)
    chosen: list[tuple[Idea, Idea]] = []
    used: set[frozenset[int]] = set()
    for x, y in options:
        key = frozenset((x.pk, y.pk))
        if key not in used:
            used.add(key)
            chosen.append((x, y))
    return chosen[:k]


def _pairs_balanced(
    pools: list[list[Idea]],
    conds_of: dict[int, set[str]],
    have: set[frozenset[int]],
    k: int,
    rng: random.Random,
) -> list[tuple[Idea, Idea]]:
    """Up to k same-topic pairs of ideas from different conditions, spread evenly over
    the condition pairs the reviewer's topics offer (see `protocol.pairs`)."""
    from ..protocol.pairs import Candidate, condition_pairs, pick_balanced

    by_pk = {i.pk: i for pool in pools for i in pool}
    candidates = []
    for pool in pools:
        for x in pool:
            for y in pool:
                cps = condition_pairs(conds_of[x.pk], conds_of[y.pk])
                if x.pk < y.pk and cps and frozenset((x.pk, y.pk)) not in have:
                    candidates.append(Candidate(x.pk, y.pk, cps))
    # Pairs the reviewer already has count, so a second batch evens out the first.
    earlier = Counter(
        cp
        for key in have
        if len(key) == 2 and all(pk in conds_of for pk in key)
        for cp in condition_pairs(*(conds_of[pk] for pk in sorted(key)))
    )
    picked = pick_balanced(candidates, k, rng, earlier)
    # Which idea is A is drawn too, so A/B order says nothing about the conditions.
    return [
        (by_pk[c.first], by_pk[c.second])
        if rng.random() < 0.5
        else (by_pk[c.second], by_pk[c.first])
        for c in picked
    ]


def pair_tasks_create(
    *,
    study: Study,
    per_reviewer: int,
    condition_a: str = "",
    condition_b: str = "",
    seed: int | None = None,
    actor: Any = None,
) -> tuple[int, list[str]]:
    """Give each approved reviewer up to `per_reviewer` new pairs of same-topic ideas from
    their own topics (never from their institution, never an idea pair they already
    have). With `condition_a`/`condition_b`, A comes from the first and B from the
    second; otherwise both are drawn at random. Sides are drawn per task. Gold ideas are
    never paired: their reviews check the reviewer, and a pair rating would enter the
    analysis."""
    refuse_if_imported(study, PAIRS)
    from ..protocol.institutions import institution_keys

    seed = seed if seed is not None else secrets.randbits(32)
    rng = random.Random(seed)
    reviewable = [Idea.NormalizationStatus.APPROVED, Idea.NormalizationStatus.EDITED]
    ideas = list(
        study.ideas.filter(
            normalization_status__in=reviewable, exclusion__isnull=True, gold_ranges__isnull=True
        )
        .select_related("topic")
        .prefetch_related("memberships__condition")
    )
    conds_of = {i.pk: {m.condition.key for m in i.memberships.all()} for i in ideas}
    by_topic: dict[str, list[Idea]] = defaultdict(list)
    for i in ideas:
        by_topic[i.topic.name].append(i)
    problems: list[str] = []
    created: list[PairTask] = []
    dims = pair_dimensions(study)
    reviewers = (
        Reviewer.objects.filter(
            study=study, screening=Reviewer.Screening.APPROVED, dropped_at__isnull=True
        )
        .exclude(user__study_memberships__study=study)
        .select_related("user")
    )
    for rev in reviewers:
        keys = institution_keys(
            [rev.institution], [(rev.user.email if rev.user else "") or rev.email]
        )
        have = {
            frozenset((a, b))
            for a, b in PairTask.objects.filter(reviewer=rev).values_list("idea_a", "idea_b")
        }
        pools = [
            [i for i in by_topic.get(topic, []) if _reviewer_may_see(rev, i, keys)]
            for topic in dict.fromkeys(rev.topic_preferences or [])
        ]
        if condition_a and condition_b:
            chosen = _pairs_between(
                pools, conds_of, have, condition_a, condition_b, per_reviewer, rng
            )
        else:
            chosen = _pairs_balanced(pools, conds_of, have, per_reviewer, rng)
        if len(chosen) < per_reviewer:
            problems.append(
                f"{rev.pseudonym}: only {len(chosen)} of {per_reviewer} pairs available in "
                f"their topics"
            )
        for x, y in chosen:
            created.append(
                PairTask(
                    study=study,
                    reviewer=rev,
                    idea_a=x,
                    idea_b=y,
                    condition_a=condition_a if condition_a and condition_b else "",
                    condition_b=condition_b if condition_a and condition_b else "",
                    a_on_left=rng.random() < 0.5,
                    dimensions=dims,
                    source="conditions" if condition_a and condition_b else "balanced",
                )
            )
    rng.shuffle(created)
    PairTask.objects.bulk_create(created)
    audit(study=study, actor=actor, verb="pair_tasks_created", n=len(created), seed=seed)
    return len(created), problems


def pair_tasks_upload(
    *, study: Study, data: bytes, seed: int | None = None, actor: Any = None
) -> tuple[int, list[str]]:
    """CSV rows reviewer,idea_a,idea_b (pseudonym and external ids). All or nothing."""
    refuse_if_imported(study, PAIRS)
    from ..protocol.institutions import institution_keys

    rng = random.Random(seed if seed is not None else secrets.randbits(32))
    try:
        rows = csvsafe.csv_rows(data.decode("utf-8-sig"), "pair tasks file")
    except UnicodeDecodeError:
        return 0, ["the file is not UTF-8 text"]
    except csvsafe.ReadProblem as exc:
        return 0, [str(exc)]
    rows = [r for r in rows if any(c.strip() for c in r)]
    if rows and rows[0][0].strip().lower() == "reviewer":
        rows = rows[1:]
    reviewers = {r.pseudonym: r for r in study.reviewers.select_related("user")}
    by_ext = {
        m.external_id: m.idea
        for m in IdeaCondition.objects.filter(study=study).select_related("idea__topic")
    }
    dims = pair_dimensions(study)
    problems: list[str] = []
    tasks: list[PairTask] = []
    for n, row in enumerate(rows, start=1):
        if len(row) < 3:
            problems.append(f"row {n}: needs reviewer,idea_a,idea_b")
            continue
        rp, ea, eb = (c.strip() for c in row[:3])
        rev, a, b = reviewers.get(rp), by_ext.get(ea), by_ext.get(eb)
        if rev is None or not rev.is_approved:
            problems.append(f"row {n}: {rp} is not an approved reviewer of this study")
            continue
        if a is None or b is None or a.pk == b.pk:
            problems.append(f"row {n}: {ea} and {eb} must be two ideas of this study")
            continue
        if a.topic_id != b.topic_id:
            problems.append(f"row {n}: {ea} and {eb} are from different topics")
            continue
        keys = institution_keys(
            [rev.institution], [(rev.user.email if rev.user else "") or rev.email]
        )
        if not (_reviewer_may_see(rev, a, keys) and _reviewer_may_see(rev, b, keys)):
            problems.append(f"row {n}: {rp} shares an institution with an author")
            continue
        tasks.append(
            PairTask(
                study=study,
                reviewer=rev,
                idea_a=a,
                idea_b=b,
                a_on_left=rng.random() < 0.5,
                dimensions=dims,
                source="upload",
            )
        )
    if problems:
        return 0, problems
    try:
        with transaction.atomic():
            rng.shuffle(tasks)
            PairTask.objects.bulk_create(tasks)
    except IntegrityError:
        return 0, ["some pairs are already assigned to the same reviewer"]
    audit(study=study, actor=actor, verb="pair_tasks_uploaded", n=len(tasks))
    return len(tasks), []


def pair_task_submit(*, task: PairTask, choices: dict[str, str], rationale: str = "") -> bool:
    """Store one judgment per dimension; repeating the same submit changes nothing."""
    if task.study.is_closed():
        raise RecruitmentError("The study is closed; ratings can no longer be changed.")
    with transaction.atomic():
        task = PairTask.objects.select_for_update().select_related("study").get(pk=task.pk)
        if task.status == PairTask.Status.WITHDRAWN:
            raise RecruitmentError("This pair is no longer assigned to you.")
        current = dict(task.judgments.values_list("dimension", "choice"))
        if (
            task.status == PairTask.Status.SUBMITTED
            and current == choices
            and task.rationale == rationale.strip()
        ):
            return False
        task.judgments.all().delete()
        flip = {"first": "a", "second": "b", "tie": "tie"}
        if not task.a_on_left:
            flip = {"first": "b", "second": "a", "tie": "tie"}
        PairJudgment.objects.bulk_create(
            [
                PairJudgment(task=task, dimension=d, choice=choices[d], winner=flip[choices[d]])
                for d in task.dimensions
            ]
        )
        task.rationale = rationale.strip()[:MAX_ANSWER_CHARS]
        task.status = PairTask.Status.SUBMITTED
        task.submitted_at = timezone.now()
        task.save(update_fields=["rationale", "status", "submitted_at"])
        audit(study=task.study, actor=task.reviewer.user, verb="pair_task_submitted", task=task.pk)
    return True


# --------------------------------------------------------------------------- progress, mail


def progress_summary(*, study: Study) -> dict[str, Any]:
    now = timezone.now()
    due = study.reviews_due_at
    reviewers = list(study.reviewers.filter(user__isnull=False).select_related("study"))
    status_counts = Counter(r.status_label for r in reviewers)
    invitations = Counter(i.status_label for i in study.invitations.all())
    live = list(
        Assignment.objects.filter(study=study)
        .exclude(status=Assignment.Status.WITHDRAWN)
        .select_related("reviewer", "idea__topic")
    )
    tasks = list(PairTask.objects.filter(study=study).exclude(status=PairTask.Status.WITHDRAWN))

    def bar(done: int, total: int, overdue: int = 0) -> dict[str, Any]:
        return {
            "done": done,
            "total": total,
            "pending": total - done,
            "overdue": overdue,
            "percent": round(100 * done / total) if total else 0,
        }

    per_reviewer: dict[int, dict[str, int]] = defaultdict(Counter)  # type: ignore[arg-type]
    for a in live:
        c = per_reviewer[a.reviewer_id]
        c["total"] += 1
        c["done"] += a.status == Assignment.Status.SUBMITTED
        c["overdue"] += bool(a.is_open and due and now > due)
    pair_counts: dict[int, Counter[str]] = defaultdict(Counter)
    for t in tasks:
        pair_counts[t.reviewer_id]["total"] += 1
        pair_counts[t.reviewer_id]["done"] += t.status == PairTask.Status.SUBMITTED
    reviewer_rows: list[dict[str, Any]] = [
        {
            "reviewer": r,
            "bar": bar(
                per_reviewer[r.pk]["done"],
                per_reviewer[r.pk]["total"],
                per_reviewer[r.pk]["overdue"],
            ),
            "pairs": bar(pair_counts[r.pk]["done"], pair_counts[r.pk]["total"]),
        }
        for r in sorted(reviewers, key=lambda r: r.pseudonym)
    ]
    memberships: dict[int, list[IdeaCondition]] = defaultdict(list)
    for m in IdeaCondition.objects.filter(study=study).select_related("condition"):
        memberships[m.idea_id].append(m)
    per_idea: dict[int, Counter[str]] = defaultdict(Counter)
    idea_obj: dict[int, Idea] = {}
    for a in live:
        per_idea[a.idea_id]["total"] += 1
        per_idea[a.idea_id]["done"] += a.status == Assignment.Status.SUBMITTED
        idea_obj[a.idea_id] = a.idea
    idea_rows = sorted(
        (
            {
                "label": idea_label(idea_obj[pk], memberships.get(pk, [])),
                "topic": idea_obj[pk].topic.name,
                "bar": bar(c["done"], c["total"]),
            }
            for pk, c in per_idea.items()
        ),
        key=lambda row: (row["topic"], row["label"]),
    )
    per_condition: dict[str, Counter[str]] = defaultdict(Counter)
    for a in live:
        for m in memberships.get(a.idea_id, []):
            per_condition[m.condition.key]["total"] += 1
            per_condition[m.condition.key]["done"] += a.status == Assignment.Status.SUBMITTED
    done = sum(1 for a in live if a.status == Assignment.Status.SUBMITTED)
    return {
        "reviewer_status": dict(sorted(status_counts.items())),
        "invitations": dict(sorted(invitations.items())),
        "overall": bar(done, len(live), sum(r["bar"]["overdue"] for r in reviewer_rows)),
        "pairs": bar(sum(1 for t in tasks if t.status == PairTask.Status.SUBMITTED), len(tasks)),
        "reviewers": reviewer_rows,
        "ideas": idea_rows,
        "conditions": [
            {"key": k, "bar": bar(c["done"], c["total"])} for k, c in sorted(per_condition.items())
        ],
    }


def _open_work_text(reviews: int, pairs: int) -> str:
    """ "2 idea reviews and 1 pair rating", leaving out a kind with none open."""
    parts = [
        f"{n} {word}{'' if n == 1 else 's'}"
        for n, word in ((reviews, "idea review"), (pairs, "pair rating"))
        if n
    ]
    return " and ".join(parts)


def reminders_send(
    *, study: Study, link_for: LinkFor | None = None, actor: Any = None
) -> dict[str, int]:
    """Mail reviewers with open work, and re-send open invitations (with a fresh link).
    A closed study is refused (RecruitmentError): its reviews can no longer be changed."""
    refuse_if_imported(study, "sends no reminders")
    from django.urls import reverse

    if study.is_closed():
        raise RecruitmentError(
            "The study is closed: its reviews can no longer be changed, so it sends no reminders."
        )
    link = (link_for or default_link_for)(reverse("studies:reviewer_home"))
    reviewers = 0
    # Before the study opens reviewers cannot see their work: nothing to remind them of.
    open_work = (
        Reviewer.objects.filter(
            study=study,
            dropped_at__isnull=True,
            user__isnull=False,
            study__status=Study.Status.REVIEWING,
        )
        .filter(
            Q(assignments__status__in=[Assignment.Status.PENDING, Assignment.Status.DRAFT])
            | Q(pair_tasks__status=PairTask.Status.PENDING)
        )
        .select_related("user")
        .distinct()
    )
    for rev in open_work:
        n_open = rev.assignments.filter(
            status__in=[Assignment.Status.PENDING, Assignment.Status.DRAFT]
        ).count()
        n_pairs = rev.pair_tasks.filter(status=PairTask.Status.PENDING).count()
        email = (rev.user.email if rev.user else "") or rev.email
        if not email:
            continue
        due = (
            f"\nReviews are due by {study.reviews_due_at:%Y-%m-%d %H:%M} UTC.\n"
            if study.reviews_due_at
            else ""
        )
        send_mail(
            f"Reminder: your reviews for {study.title}",
            f"{reviewer_greeting(rev)}\n\nYou have {_open_work_text(n_open, n_pairs)} still "
            f"open in “{study.title}”.{due}\nContinue here: {link}\n\nThank you!\n",
            None,
            [email],
        )
        reviewers += 1
    invitations = 0
    for inv in study.invitations.filter(
        used_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
    ):
        invitation_send(invitation=inv, link_for=link_for, reminder=True)
        invitations += 1
    audit(
        study=study,
        actor=actor,
        verb="reminders_sent",
        reviewers=reviewers,
        invitations=invitations,
    )
    return {"reviewers": reviewers, "invitations": invitations}


def reminders_send_all() -> dict[str, dict[str, int]]:
    """Reminders for every study in review (Celery beat runs this once a day)."""
    return {
        study.slug: reminders_send(study=study)
        for study in Study.objects.filter(status=Study.Status.REVIEWING)
    }


# --------------------------------------------------------------------------- blind text


def idea_sections(text: str) -> list[tuple[str, str]]:
    """Approved text split into the template's sections (heading, body), in template
    order, by the project's one proposal parser; empty sections are left out."""
    return list(_sections_of(text))


@functools.lru_cache(maxsize=1024)
def _sections_of(text: str) -> tuple[tuple[str, str], ...]:
    """idea_sections, kept per text: every reviewer of an idea, on every visit, has it
    split again. The key is the whole text, so an edited text is parsed anew; the value
    is a tuple, which no caller can change."""
    from ..protocol.template import SECTIONS, parse_sections

    if not text.strip():
        return ()
    parsed = parse_sections(text)
    headings = {s.key: s.heading for s in SECTIONS}
    out = [("", parsed.preamble)] if parsed.preamble.strip() else []
    out += [(headings.get(k, k), body) for k, body in parsed.sections.items() if body.strip()]
    return tuple(out)


def words(text: str) -> int:
    return len(text.split())
