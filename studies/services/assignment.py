"""Who reviews what: planning an assignment (the solver in `studies/protocol`), previewing
it as a job, committing it, telling reviewers about new work, and recording activity.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from ..jobs import ACTIVE as JOB_ACTIVE
from ..jobs import JobStopped, job_enqueue, job_finish, job_progress, job_start
from ..models import (
    Assignment,
    Idea,
    IdeaCondition,
    JobRun,
    Review,
    Reviewer,
    Study,
)
from ..protocol import assignment as solver
from ..status import ASSIGNS, refuse_if_imported
from .audit import audit
from .ideas import idea_label
from .invitations import LinkFor, RecruitmentError, default_link_for, reviewer_greeting
from .quality import assignment_gold_pairs

# Gaps between a reviewer's events longer than this count as this long: a tab left open
# over lunch is not time on task.
IDLE_CAP_SECONDS = float(settings.IDEAREVIEW_IDLE_CAP_SECONDS)


@dataclass
class AssignmentPlan:
    """Solver inputs built from rows, with the maps back from solver ids to rows."""

    inputs: solver.AssignmentInputs
    reviewer_by_id: dict[str, Reviewer]
    idea_by_id: dict[str, Idea]
    fingerprint: str
    skipped_ideas: int = 0
    notes: list[str] = field(default_factory=list)
    # Of the skipped ideas, those still without an approved text.
    unapproved_ideas: int = 0


def _plan_fixed_assignments(*, study: Study, mode: str) -> list[Assignment]:
    """The assignments the plan keeps: submitted ones, and in "keep" mode every live one
    of a reviewer still in the study."""
    live = list(
        Assignment.objects.filter(study=study)
        .exclude(status=Assignment.Status.WITHDRAWN)
        .select_related("reviewer", "idea")
    )
    return [
        a
        for a in live
        if a.status == Assignment.Status.SUBMITTED
        or (mode == "keep" and a.reviewer.dropped_at is None)
    ]


def _plan_ideas(
    *, study: Study, fixed_idea_ids: set[int]
) -> tuple[dict[str, Idea], list[solver.IdeaInput], tuple[int, int]]:
    """The solver's ideas by label, and how many of the study's ideas are left out: for
    want of an approved text, and by topic matching."""
    reviewable = {
        Idea.NormalizationStatus.APPROVED,
        Idea.NormalizationStatus.EDITED,
    }
    memberships: dict[int, list[IdeaCondition]] = defaultdict(list)
    for m in IdeaCondition.objects.filter(study=study).select_related("condition"):
        memberships[m.idea_id].append(m)
    every = list(study.ideas.select_related("topic", "exclusion").order_by("pk"))
    ideas = [
        i
        # Ideas left out by topic matching are not assigned (unless already reviewed).
        for i in every
        if (i.normalization_status in reviewable and not i.is_excluded()) or i.pk in fixed_idea_ids
    ]
    # Gold items are dealt after the program (assignment_commit): outside its balance and counts.
    ideas = [i for i in ideas if not i.is_gold]
    kept = {i.pk for i in ideas}
    excluded = sum(1 for i in every if i.pk not in kept and i.is_excluded())
    skipped = (len(every) - len(ideas) - excluded, excluded)
    idea_by_id: dict[str, Idea] = {}
    solver_ideas = []
    for idea in ideas:
        rows = memberships.get(idea.pk, [])
        if not rows:
            continue
        iid = idea_label(idea, rows)
        idea_by_id[iid] = idea
        solver_ideas.append(
            solver.IdeaInput(
                id=iid,
                topic=idea.topic.name,
                conditions=tuple(sorted({m.condition.key for m in rows})),
                institutions=(idea.author_institution,) if idea.author_institution else (),
            )
        )
    return idea_by_id, solver_ideas, skipped


def _plan_reviewers(
    *, study: Study, fixed_rows: list[Assignment], extra_load: bool
) -> tuple[dict[str, Reviewer], list[solver.ReviewerInput]]:
    """The solver's reviewers by pseudonym: the active ones, each held to a load that
    covers the assignments kept for them."""
    fixed_by_reviewer: Counter[int] = Counter(a.reviewer_id for a in fixed_rows)
    reviewer_by_id: dict[str, Reviewer] = {}
    solver_reviewers = []
    # The study's team never reviews in it.
    candidates = (
        Reviewer.objects.filter(study=study)
        .exclude(user__study_memberships__study=study)
        .select_related("user")
        .order_by("pk")
    )
    for rev in candidates:
        n_fixed = fixed_by_reviewer.get(rev.pk, 0)
        active = (
            rev.screening == Reviewer.Screening.APPROVED
            and rev.dropped_at is None
            and rev.profile_completed_at is not None
            and rev.topic_preferences
        )
        if active:
            preferred = min(
                max(rev.preferred_load or study.min_load, study.min_load), study.max_load
            )
            lo = max(preferred, n_fixed)
            hi = max(lo, study.max_load) if extra_load else lo
        else:
            continue
        reviewer_by_id[rev.pseudonym] = rev
        solver_reviewers.append(
            solver.ReviewerInput(
                id=rev.pseudonym,
                topics=tuple(rev.topic_preferences or ()),
                load_min=lo,
                load_max=hi,
                institution=rev.institution,
                email=(rev.user.email if rev.user else "") or rev.email,
            )
        )
    return reviewer_by_id, solver_reviewers


def _plan_fingerprint(
    *,
    solver_ideas: list[solver.IdeaInput],
    solver_reviewers: list[solver.ReviewerInput],
    fixed: list[tuple[str, str]],
    conditions: dict[str, str],
    params: solver.Parameters,
) -> str:
    """A hash of everything the solver is given but the seed and time limit."""
    return hashlib.sha256(
        json.dumps(
            {
                "ideas": [(i.id, i.topic, i.conditions, i.institutions) for i in solver_ideas],
                "reviewers": [
                    (r.id, r.topics, r.load_min, r.load_max, r.institution, r.email)
                    for r in solver_reviewers
                ],
                "fixed": sorted(fixed),
                "conditions": conditions,
                "reviews": [params.min_reviews, params.max_reviews],
                "topic_choice": params.topic_choice,
            },
            sort_keys=True,
            default=list,
        ).encode()
    ).hexdigest()


def _count(n: int, noun: str) -> str:
    """A count with its noun in the right number: "1 idea", "2 ideas"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _plan_notes(
    *,
    skipped: tuple[int, int],
    fixed_rows: list[Assignment],
    reviewer_by_id: dict[str, Reviewer],
    label_of: dict[int, str],
) -> list[str]:
    """What the plan leaves out or counts on top, for the researcher."""
    notes: list[str] = []
    unapproved, excluded = skipped
    if unapproved:
        notes.append(
            f"{_count(unapproved, 'idea')} {'has' if unapproved == 1 else 'have'} no approved "
            f"text yet and {'is' if unapproved == 1 else 'are'} left out"
        )
    if excluded:
        notes.append(
            f"{_count(excluded, 'idea')} left out by topic matching "
            f"{'is' if excluded == 1 else 'are'} not assigned"
        )
    # Reviews submitted by reviewers who dropped out stay in the study but not in the
    # program (the solver would hold a dropped reviewer to the per-reviewer rules).
    outside = Counter(
        a.idea_id
        for a in fixed_rows
        if a.reviewer.pseudonym not in reviewer_by_id and a.idea_id in label_of
    )
    if outside:
        notes.append(
            f"{_count(sum(outside.values()), 'submitted review')} from dropped reviewers on "
            f"{_count(len(outside), 'idea')} {'comes' if sum(outside.values()) == 1 else 'come'} "
            "on top of the counts below"
        )
    return notes


def assignment_plan(
    *, study: Study, seed: int | None = None, mode: str = "keep", extra_load: bool = False
) -> AssignmentPlan:
    """`mode="keep"` keeps every live assignment and fills the gap (reviewers who joined
    or dropped); `mode="resolve"` keeps only submitted reviews and re-draws the rest."""
    if mode not in ("keep", "resolve"):
        raise ValueError("mode must be 'keep' or 'resolve'")
    fixed_rows = _plan_fixed_assignments(study=study, mode=mode)
    fixed_idea_ids = {a.idea_id for a in fixed_rows}
    idea_by_id, solver_ideas, skipped = _plan_ideas(study=study, fixed_idea_ids=fixed_idea_ids)
    label_of = {idea.pk: iid for iid, idea in idea_by_id.items()}
    reviewer_by_id, solver_reviewers = _plan_reviewers(
        study=study, fixed_rows=fixed_rows, extra_load=extra_load
    )
    fixed = [
        (a.reviewer.pseudonym, label_of[a.idea_id])
        for a in fixed_rows
        if a.idea_id in label_of and a.reviewer.pseudonym in reviewer_by_id
    ]
    conditions = {c.key: c.kind for c in study.conditions.all()}
    params = solver.Parameters(
        min_reviews=study.min_reviews_per_idea,
        max_reviews=study.max_reviews_per_idea,
        seed=seed,
        time_limit=float(settings.IDEAREVIEW_ASSIGNMENT_TIME_LIMIT),
        topic_choice=study.topic_choice_use,
    )
    inputs = solver.AssignmentInputs(
        ideas=tuple(solver_ideas),
        conditions=conditions,
        reviewers=tuple(solver_reviewers),
        fixed=tuple(sorted(fixed)),
        params=params,
        study_topics=frozenset(study.topics.values_list("name", flat=True)),
    )
    fingerprint = _plan_fingerprint(
        solver_ideas=solver_ideas,
        solver_reviewers=solver_reviewers,
        fixed=fixed,
        conditions=conditions,
        params=params,
    )
    notes = _plan_notes(
        skipped=skipped, fixed_rows=fixed_rows, reviewer_by_id=reviewer_by_id, label_of=label_of
    )
    return AssignmentPlan(
        inputs, reviewer_by_id, idea_by_id, fingerprint, sum(skipped), notes, skipped[0]
    )


ASSIGNMENT_JOB = "assignment"


def assignment_preview_enqueue(
    *,
    study: Study,
    seed: int | None = None,
    mode: str = "keep",
    extra_load: bool = False,
    actor: Any = None,
) -> JobRun:
    """Start a preview as a background job. The seed is drawn here when not given and
    stored in the job, so the job (and any retry of it) gives one result."""
    refuse_if_imported(study, ASSIGNS)
    if mode not in ("keep", "resolve"):
        raise ValueError("mode must be 'keep' or 'resolve'")
    job = job_start(
        study=study,
        kind=ASSIGNMENT_JOB,
        actor=actor,
        total=3,
        seed=seed if seed is not None else secrets.randbits(32),
        mode=mode,
        extra_load=extra_load,
    )
    return job_enqueue(job=job)


def assignment_preview_run(*, job: JobRun) -> tuple[solver.AssignmentResult, AssignmentPlan]:
    """Solve the job's preview and keep the result (pairs, tables) in its row, so the
    owner commits exactly what they saw."""
    params = job.params
    job_progress(job=job, done=0, total=3, message="reading reviewers, ideas and reviews")
    plan = assignment_plan(
        study=job.study,
        seed=params["seed"],
        mode=params["mode"],
        extra_load=params.get("extra_load", False),
    )
    job_progress(
        job=job,
        done=1,
        message=f"solving for {_count(len(plan.inputs.reviewers), 'reviewer')} and "
        f"{_count(len(plan.inputs.ideas), 'idea')}",
    )
    result = solver.solve_assignment(plan.inputs)
    job_progress(job=job, done=2, message="drawing up the tables")
    summary: dict[str, Any] = {}
    if result.feasible:
        summary = solver.preview_summary(plan.inputs, result.pairs)
        for row in summary["reviewers"]:
            row["preferred"] = plan.reviewer_by_id[row["reviewer"]].preferred_load
    job.params = {
        **params,
        "seed": result.seed,
        "fingerprint": plan.fingerprint,
        "status": result.status,
        "pairs": [list(p) for p in result.pairs],
        "problems": _preview_problems(job.study, result.problems),
        "remedies": _preview_remedies(plan, result.problems),
        "unapproved": plan.unapproved_ideas,
        "notes": [*plan.notes, *result.notes],
        "objective": result.objective,
        "solve_seconds": round(result.solve_seconds, 3),
        "summary": summary,
    }
    job.message = f"{result.status}: {len(result.pairs)} assignments"
    # Written only while this run still holds the job (not after a cancel or a takeover).
    held = JobRun.objects.filter(pk=job.pk, lease=job.lease, status__in=JOB_ACTIVE)
    if not held.update(params=job.params, message=job.message):
        raise JobStopped(f"job {job.pk} was cancelled or taken over")
    return result, plan


# Problems that come from what the reviewers may review: the topics they chose, their
# load and (conflicts of interest) their institution.
_TOPIC_RULES = frozenset(
    {
        "conflict",
        "human_idea",
        "ai_idea",
        "conditions",
        "idea_reviews",
        "topic_capacity",
        "reviewer_load",
    }
)


def _preview_remedies(plan: AssignmentPlan, problems: Iterable[solver.Problem]) -> list[str]:
    """Which remedies an infeasible preview offers, in the page's order: "topics" when a
    problem comes from the reviewers' topics, loads or institutions ("named_reviewer" too
    when a problem names a reviewer, whom the advice may then point to), "unapproved" only
    when ideas are still waiting for an approved text (not otherwise: "ideas left out"
    would send the owner looking for ideas that are all in), "reviewers", "load" unless
    every problem is an idea too few reviewers may review (a higher load gives an idea no
    reviewer it lacks), and "reviews"."""
    problems = list(problems)
    rules = {p.rule for p in problems}
    remedies = ["topics"] if rules & _TOPIC_RULES else []
    if remedies and any(p.subject in plan.reviewer_by_id for p in problems):
        remedies.append("named_reviewer")
    if plan.unapproved_ideas:
        remedies.append("unapproved")
    remedies.append("reviewers")
    if rules != {"idea_reviews"}:
        remedies.append("load")
    return [*remedies, "reviews"]


def _preview_problems(study: Study, problems: Iterable[solver.Problem]) -> list[str]:
    """The solver's problems in words for this study. The solver sees only the ideas up
    for assignment: a kind it misses may be one whose ideas the study has but left out
    (no approved text, or left out by topic matching), and "the study has no human
    idea" would then send the owner looking for ideas that are there."""
    said: list[str] = []
    for p in problems:
        if p.rule == "input" and p.subject in solver.KINDS:
            n = (
                IdeaCondition.objects.filter(study=study, condition__kind=p.subject)
                .values("idea")
                .distinct()
                .count()
            )
            if n:
                label = p.subject.replace("ai", "AI")
                said.append(
                    f"none of the study's {_count(n, label + ' idea')} can be assigned: only ideas "
                    "whose text a person approved are, and not those left out by topic "
                    "matching; every reviewer must see at least one human and one AI idea"
                )
                continue
        said.append(str(p))
    return said


def assignment_preview(
    *,
    study: Study,
    seed: int | None = None,
    mode: str = "keep",
    extra_load: bool = False,
    actor: Any = None,
) -> tuple[JobRun, solver.AssignmentResult, AssignmentPlan]:
    """The same preview run in this process (the command line, tests)."""
    refuse_if_imported(study, ASSIGNS)
    job = job_start(
        study=study,
        kind=ASSIGNMENT_JOB,
        actor=actor,
        total=3,
        seed=seed if seed is not None else secrets.randbits(32),
        mode=mode,
        extra_load=extra_load,
    )
    result, plan = assignment_preview_run(job=job)
    job_finish(job=job)
    return job, result, plan


def assignment_commit(
    *, study: Study, job: JobRun, actor: Any = None, link_for: LinkFor | None = None
) -> dict[str, int]:
    """Write a previewed solution: new pairs are created (in shuffled order, so ids say
    nothing about ideas), open pairs no longer wanted are withdrawn, submitted ones stay.
    The study's status does not change: reviewers see the work once it is open."""
    refuse_if_imported(study, ASSIGNS)
    params = job.params
    if job.kind != ASSIGNMENT_JOB or job.status != JobRun.Status.DONE or "pairs" not in params:
        raise RecruitmentError("This preview has not finished: wait for it, or preview again.")
    if params.get("status") == "infeasible":
        raise RecruitmentError("This preview has no assignment to commit.")
    if params.get("committed_at"):
        raise RecruitmentError("This preview was committed already.")
    with transaction.atomic():
        Study.objects.select_for_update().get(pk=study.pk)
        plan = assignment_plan(
            study=study,
            seed=params["seed"],
            mode=params["mode"],
            extra_load=params.get("extra_load", False),
        )
        if plan.fingerprint != params["fingerprint"]:
            raise RecruitmentError(
                "Reviewers, ideas or reviews changed since this preview; preview again."
            )
        wanted = {(plan.reviewer_by_id[r].pk, plan.idea_by_id[i].pk) for r, i in params["pairs"]}
        existing = {(a.reviewer_id, a.idea_id): a for a in Assignment.objects.filter(study=study)}
        gold_ids, gold_pairs = assignment_gold_pairs(
            study=study, reviewers=list(plan.reviewer_by_id.values()), seed=params["seed"]
        )
        withdrawn = 0
        for key, a in existing.items():
            if a.is_open and key not in wanted and key[1] not in gold_ids:
                a.status = Assignment.Status.WITHDRAWN
                a.save(update_fields=["status"])
                withdrawn += 1
        restored = 0
        new_keys: list[tuple[int, int]] = []
        for key in sorted(wanted):
            found = existing.get(key)
            if found is None:
                new_keys.append(key)
            elif found.status == Assignment.Status.WITHDRAWN:
                has_draft = Review.objects.filter(assignment=found).exists()
                found.status = Assignment.Status.DRAFT if has_draft else Assignment.Status.PENDING
                found.save(update_fields=["status"])
                restored += 1
        new_keys += [p for p in gold_pairs if p not in existing]
        random.Random(params["seed"]).shuffle(new_keys)
        Assignment.objects.bulk_create(
            [Assignment(study=study, reviewer_id=r, idea_id=i) for r, i in new_keys]
        )
        study.assignment_seed = params["seed"]
        study.save(update_fields=["assignment_seed", "updated_at"])
        job.params = {**params, "committed_at": timezone.now().isoformat()}
        job.save(update_fields=["params"])
        summary = {
            "created": len(new_keys),
            "withdrawn": withdrawn,
            "restored": restored,
            "gold": len(gold_pairs),
        }
        # Committing does not open the study ("Open for review" does): before it opens,
        # reviewers see no assignment and get no mail; opening mails those waiting.
        is_open = study.status == Study.Status.REVIEWING
        audit(
            study=study,
            actor=actor,
            verb="assignment_committed",
            seed=params["seed"],
            study_open=is_open,
            **summary,
        )
        notify = sorted({r for r, _ in new_keys}) if is_open else []
        if notify:
            transaction.on_commit(
                lambda: reviewers_notify_new_work(
                    study=study, reviewer_ids=notify, link_for=link_for
                )
            )
    return summary


def reviewers_notify_new_work(
    *, study: Study, reviewer_ids: list[int], link_for: LinkFor | None = None
) -> int:
    from django.urls import reverse

    link = (link_for or default_link_for)(reverse("studies:reviewer_home"))
    sent = 0
    for rev in Reviewer.objects.filter(pk__in=reviewer_ids).select_related("user"):
        email = (rev.user.email if rev.user else "") or rev.email
        if not email:
            continue
        send_mail(
            f"Your ideas to review are ready: {study.title}",
            f"{reviewer_greeting(rev)}\n\nThe ideas you will review in “{study.title}” are ready.\n"
            f"Start here: {link}\n\nThank you for your help!\n",
            None,
            [email],
        )
        sent += 1
    return sent


# --------------------------------------------------------------------------- reviews


def assignment_touch(*, assignment: Assignment, now: Any = None) -> None:
    """Record reviewer activity on an assignment (page open, autosave, heartbeat)."""
    now = now or timezone.now()
    assignment.record_activity(now, IDLE_CAP_SECONDS)
    Assignment.objects.filter(pk=assignment.pk).update(
        opened_at=assignment.opened_at,
        last_seen_at=assignment.last_seen_at,
        active_seconds=assignment.active_seconds,
    )
