"""Where a study stands: the owner's step list from the review form to the payments.

`study_steps(study)` reads counts from the database and hands them to `steps_from`, a
pure function, so the rules are tested on plain numbers as well as on real studies.
A study built from an imported review dataset (si2024) never went through preparation,
recruitment or assignment here: those steps say "imported dataset" instead of asking
for work that can no longer be done. Its status says the same ("Imported reviews", not
"Draft"), and it is never offered "Open for review": its reviewing happened elsewhere
and is over (`status.study_status`, shared by the study page, the owner pages' header,
the open page and the opening service). Its ideas often came with the reviews and no
text of their own; they are "reviews imported without idea texts"
(`status.ideas_without_text`), not ideas missing their template sections, and while no
idea has a text the "Judges run" step is blocked: a judge would have nothing to read.
The step is done once a run that read the ideas' texts has finished: a random baseline
reads none (nor does a judge validation, which reads a reference corpus), so such runs
alone do not count as the study's judges having run.

The judge runs are judging's rows: the "Judges run" step asks the registered counter
(`judge_run_counter_register`, filled in `JudgingConfig.ready()`; docs/architecture.md,
"Interfaces studies defines"). With none registered the study has no judge runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .analysis.rounding import counted
from .models import Assignment, Idea, Review, Reviewer, Study, StudyReport
from .services.ideas import REVIEWABLE
from .status import ideas_without_text, imported_review_count

DONE, CURRENT, TODO, BLOCKED = "done", "current", "todo", "blocked"
IMPORTED = "imported dataset"
WITHOUT_TEXT = "reviews imported without idea texts"


# What each step needs before it can be worked on; steps not listed can start at once.
NEEDS: dict[str, tuple[str, ...]] = {
    "Sections complete": ("Ideas imported",),
    "Topics matched": ("Ideas imported",),
    "Ideas normalised": ("Ideas imported",),
    "Rewrites signed off": ("Ideas normalised",),
    "Reviewers invited": ("Ideas imported",),
    "Reviewers screened": ("Reviewers invited",),
    "Assignment committed": (
        "Sections complete",
        "Topics matched",
        "Rewrites signed off",
        "Reviewers screened",
    ),
    "Opened for review": ("Sections complete", "Topics matched", "Rewrites signed off"),
    "Reviews in": ("Assignment committed", "Opened for review"),
    "Closed": ("Reviews in",),
    "Report built": ("Reviews in",),
    "Judges run": ("Rewrites signed off",),
    "Payments settled": ("Reviews in",),
}


@dataclass(frozen=True)
class JudgeRunCounts:
    """A study's judge runs by state: finished, and queued or running; `on_text`: the
    finished runs that read the ideas' texts (not a random baseline, not a validation)."""

    done: int = 0
    active: int = 0
    on_text: int = 0


class JudgeRunCounter(Protocol):
    def __call__(self, study: Study) -> JudgeRunCounts: ...


_counters: list[JudgeRunCounter] = []


def judge_run_counter_register(counter: JudgeRunCounter) -> None:
    """Install the counter (the last registered one answers; registering the same one
    again is a no-op, so a repeated `ready()` does not duplicate it)."""
    if counter not in _counters:
        _counters.append(counter)


def judge_run_counts(study: Study) -> JudgeRunCounts:
    return _counters[-1](study) if _counters else JudgeRunCounts()


@dataclass(frozen=True)
class Step:
    name: str
    state: str  # done | current | todo | blocked
    detail: str
    next_action_url_name: str  # a "studies:…" or "judging:…" URL name taking the slug

    @property
    def is_done(self) -> bool:
        return self.state == DONE


@dataclass(frozen=True)
class StudyCounts:
    """Everything the step list needs, as plain numbers."""

    status: str
    form: str = ""
    ideas: int = 0
    incomplete_ideas: int = 0
    unbalanced_topics: int = 0
    topic_reason: bool = False
    normalised: int = 0
    signed_off: int = 0
    invitations: int = 0
    reviewers: int = 0
    dropped_reviewers: int = 0
    approved_reviewers: int = 0
    pending_reviewers: int = 0
    assignments: int = 0
    open_assignments: int = 0
    submitted_reviews: int = 0
    imported_reviews: int = 0
    judge_runs_done: int = 0
    judge_runs_active: int = 0
    judge_runs_on_text: int = 0
    reports: int = 0
    payments_set: bool = False
    undecided_reviews: int = 0
    textless_ideas: int = 0

    @property
    def imported(self) -> bool:
        """Reviews came from a file, not from reviewers working in this app."""
        return self.imported_reviews > 0 and self.assignments == 0


def study_counts(study: Study) -> StudyCounts:
    from .services.ideas import study_ideas, topic_matching_table

    ideas = list(study_ideas(study).only("sections", "normalization_status"))
    textless = ideas_without_text(study)
    incomplete = 0
    for idea in ideas:
        # Once a person signed off an idea's text, that text is what reviewers read; the
        # imported sections no longer matter. An idea that came with imported reviews and
        # no text has no sections to miss.
        if idea.normalization_status in REVIEWABLE or idea.pk in textless:
            continue
        sections = idea.section_status()
        incomplete += bool(sections["missing"] or sections["empty"])
    table = topic_matching_table(study=study) if ideas else None
    reviewers = Reviewer.objects.filter(study=study, dropped_at__isnull=True)
    assignments = Assignment.objects.filter(study=study).exclude(status=Assignment.Status.WITHDRAWN)
    submitted = Review.objects.filter(study=study, status=Review.Status.SUBMITTED)
    runs = judge_run_counts(study)
    none = Idea.NormalizationStatus.NONE
    return StudyCounts(
        status=study.status,
        form=str(study.review_form),
        ideas=len(ideas),
        incomplete_ideas=incomplete,
        unbalanced_topics=len(table.unbalanced) if table else 0,
        topic_reason=bool(study.topic_mismatch_reason.strip()),
        normalised=sum(1 for i in ideas if i.normalization_status != none),
        signed_off=sum(1 for i in ideas if i.normalization_status in REVIEWABLE),
        invitations=study.invitations.count(),
        reviewers=reviewers.count(),
        dropped_reviewers=Reviewer.objects.filter(study=study, dropped_at__isnull=False).count(),
        approved_reviewers=reviewers.filter(screening=Reviewer.Screening.APPROVED).count(),
        pending_reviewers=reviewers.filter(
            screening=Reviewer.Screening.PENDING, profile_completed_at__isnull=False
        ).count(),
        assignments=assignments.count(),
        open_assignments=sum(1 for a in assignments if a.is_open),
        submitted_reviews=submitted.count(),
        imported_reviews=imported_review_count(study),
        judge_runs_done=runs.done,
        judge_runs_active=runs.active,
        judge_runs_on_text=runs.on_text,
        reports=StudyReport.objects.filter(study=study).count(),
        payments_set=any((study.payment_per_review, study.payment_per_idea, study.payment_bonus)),
        undecided_reviews=submitted.filter(acceptance__isnull=True).count(),
        textless_ideas=sum(1 for i in ideas if i.pk in textless),
    )


Raw = tuple[str, bool, str, str]  # name, done, detail, URL name


def _imported_steps(c: StudyCounts) -> list[Raw]:
    """A review dataset imported as is: the steps that made it happened elsewhere."""
    elsewhere = f"{IMPORTED}: not done in this app"
    if c.textless_ideas:
        sections = f"{IMPORTED}: {counted(c.textless_ideas, 'idea')} with {WITHOUT_TEXT}"
        if c.incomplete_ideas:
            sections += f", {c.incomplete_ideas} with missing or empty sections"
    else:
        sections = elsewhere
    raw: list[Raw] = [
        ("Review form chosen", True, f"{IMPORTED}: form {c.form}", "studies:study_form"),
        ("Ideas imported", True, f"{IMPORTED}: {counted(c.ideas, 'idea')}", "studies:ideas_list"),
        ("Sections complete", True, sections, "studies:ideas_list"),
    ]
    raw += [
        (name, True, elsewhere, url)
        for name, url in [
            ("Topics matched", "studies:topic_matching"),
            ("Ideas normalised", "studies:normalization"),
            ("Rewrites signed off", "studies:normalization"),
            ("Reviewers invited", "studies:study_invitations"),
            ("Reviewers screened", "studies:study_reviewers"),
            ("Assignment committed", "studies:assignment_preview"),
        ]
    ]
    raw.append(
        (
            "Opened for review",
            True,
            f"{IMPORTED}: reviewed elsewhere, so it does not open for review here",
            "studies:study_open",
        )
    )
    raw.append(
        (
            "Reviews in",
            True,
            f"{IMPORTED}: {counted(c.imported_reviews, 'review')} imported",
            "studies:reviews_import_page",
        )
    )
    raw.append(
        (
            "Closed",
            c.status == Study.Status.CLOSED,
            "closed"
            if c.status == Study.Status.CLOSED
            else f"{IMPORTED}: the reviews are final; closing the study (progress page) "
            "stops further edits",
            "studies:study_progress",
        )
    )
    return raw


def _preparation_steps(c: StudyCounts) -> list[Raw]:
    """From the review form to signed-off text."""
    if c.incomplete_ideas:
        sections = (
            f"{counted(c.incomplete_ideas, 'idea')} "
            f"{'misses' if c.incomplete_ideas == 1 else 'miss'} template sections: fill them in"
        )
    elif c.textless_ideas:
        sections = "every idea with a text has the seven sections"
    else:
        sections = "every idea has the seven sections"
    if c.textless_ideas:
        sections += f"; {counted(c.textless_ideas, 'idea')} with {WITHOUT_TEXT}"
    matched = c.ideas > 0 and (c.unbalanced_topics == 0 or c.topic_reason)
    if c.unbalanced_topics and not c.topic_reason:
        topics = (
            f"{counted(c.unbalanced_topics, 'topic')} "
            f"{'differs' if c.unbalanced_topics == 1 else 'differ'} across conditions: "
            "leave ideas out or "
            "record a reason"
        )
    else:
        topics = (
            "conditions balanced per topic"
            if not c.unbalanced_topics
            else ("unbalanced, reason recorded")
        )
    return [
        ("Review form chosen", True, c.form or "the built-in form", "studies:study_form"),
        (
            "Ideas imported",
            c.ideas > 0,
            counted(c.ideas, "idea") if c.ideas else "Import ideas: a file, a folder or a paste.",
            "studies:ideas_import",
        ),
        (
            "Sections complete",
            c.ideas > 0 and c.incomplete_ideas == 0,
            sections,
            "studies:ideas_list",
        ),
        ("Topics matched", matched, topics, "studies:topic_matching"),
        (
            "Ideas normalised",
            c.ideas > 0 and c.normalised == c.ideas,
            f"{c.normalised} of {counted(c.ideas, 'idea')} "
            f"{'has' if c.normalised == 1 else 'have'} a style-normalised rewrite",
            "studies:normalization",
        ),
        (
            "Rewrites signed off",
            c.ideas > 0 and c.signed_off == c.ideas,
            f"{c.signed_off} of {counted(c.ideas, 'idea')} "
            f"{'has' if c.signed_off == 1 else 'have'} approved text",
            "studies:normalization",
        ),
    ]


def _recruitment_steps(c: StudyCounts, closed: bool) -> list[Raw]:
    """From invitations to the reviews and the close."""
    return [
        (
            "Reviewers invited",
            c.invitations > 0 or c.reviewers + c.dropped_reviewers > 0,
            f"{counted(c.invitations, 'invitation')}, "
            f"{counted(c.reviewers + c.dropped_reviewers, 'reviewer')} "
            "signed up"
            + (f", {c.dropped_reviewers} of them dropped" if c.dropped_reviewers else "")
            if c.invitations or c.reviewers or c.dropped_reviewers
            else "Invite reviewers: one address or a CSV.",
            "studies:study_invitations",
        ),
        (
            "Reviewers screened",
            c.approved_reviewers > 0 and c.pending_reviewers == 0,
            f"{c.approved_reviewers} approved, {c.pending_reviewers} waiting for screening",
            "studies:study_reviewers",
        ),
        (
            "Assignment committed",
            c.assignments > 0,
            counted(c.assignments, "assignment") if c.assignments else "Preview and commit one.",
            "studies:assignment_preview",
        ),
        (
            "Opened for review",
            c.status in (Study.Status.REVIEWING, Study.Status.CLOSED),
            "open: reviewers see their assignments"
            if c.status == Study.Status.REVIEWING
            else "closed"
            if c.status == Study.Status.CLOSED
            else "Open it when the assignment is committed: reviewers see nothing before "
            "(committing does not open it).",
            "studies:study_open",
        ),
        (
            "Reviews in",
            c.assignments > 0 and c.open_assignments == 0,
            f"{c.submitted_reviews} submitted, {c.open_assignments} open",
            "studies:study_progress",
        ),
        (
            "Closed",
            closed,
            "closed" if closed else "Close the study when reviews are in.",
            "studies:study_progress",
        ),
    ]


def _closing_steps(c: StudyCounts) -> list[Raw]:
    """Report, judges and payments."""
    if c.imported:
        payments: Raw = (
            "Payments settled",
            True,
            f"{IMPORTED}: no payments here",
            "studies:study_payments",
        )
    elif not c.payments_set:
        payments = (
            "Payments settled",
            True,
            "no payment amounts set (none owed)",
            "studies:study_payments",
        )
    else:
        payments = (
            "Payments settled",
            c.submitted_reviews > 0 and c.undecided_reviews == 0,
            f"{counted(c.undecided_reviews, 'submitted review')} "
            f"{'waits' if c.undecided_reviews == 1 else 'wait'} to be accepted or rejected"
            if c.undecided_reviews
            else "every submitted review accepted or rejected",
            "studies:study_payments",
        )
    judges = f"{counted(c.judge_runs_done, 'run')} done" + (
        f", {c.judge_runs_active} running" if c.judge_runs_active else ""
    )
    if c.judge_runs_done and not c.judge_runs_on_text:
        judges += (
            "; none of them read an idea's text (a random baseline or a judge validation), "
            "so they do not count"
        )
    if _no_text_to_judge(c):
        judges += (
            f"; no idea has a text a judge could read (all {c.ideas} are {WITHOUT_TEXT}): "
            "enter texts with Fix sections on the ideas page"
        )
    elif c.textless_ideas and not c.judge_runs_on_text:
        judges += (
            f"; {c.textless_ideas} of {counted(c.ideas, 'idea')} "
            f"{'has' if c.textless_ideas == 1 else 'have'} no text: a run leaves them out "
            "or their texts are entered first"
        )
    return [
        (
            "Report built",
            c.reports > 0,
            counted(c.reports, "report") if c.reports else "Build the report.",
            "studies:study_report",
        ),
        (
            "Judges run",
            c.judge_runs_on_text > 0 and c.judge_runs_active == 0,
            judges,
            "judging:home",
        ),
        payments,
    ]


def _no_text_to_judge(c: StudyCounts) -> bool:
    """Every idea came with imported reviews and no text: a judge has nothing to read, so
    the step is blocked rather than offered as what to do next (a run that read no text,
    such as a random baseline, does not unblock it)."""
    return c.ideas > 0 and c.textless_ideas >= c.ideas and c.judge_runs_on_text == 0


def steps_from(c: StudyCounts) -> list[Step]:
    """The steps with their states: the first step that can be worked on is current;
    a step waiting for an unfinished step it needs (`NEEDS`) is blocked."""
    closed = c.status == Study.Status.CLOSED
    if c.imported:
        raw = _imported_steps(c)
    else:
        raw = _preparation_steps(c) + _recruitment_steps(c, closed)
    raw += _closing_steps(c)
    steps: list[Step] = []
    done_names = {name for name, done, _, _ in raw if done}
    current_given = False
    for name, done, detail, url in raw:
        if done or (closed and name not in ("Payments settled", "Report built", "Judges run")):
            steps.append(Step(name, DONE if done else TODO, detail, url))
            continue
        ready = all(n in done_names for n in NEEDS.get(name, ()))
        if name == "Closed" and c.imported:
            # Its reviews are final already: closing only freezes the settings, so it is
            # offered, not asked for as the next step before the report.
            steps.append(Step(name, TODO, detail, url))
            continue
        if name == "Judges run" and _no_text_to_judge(c):
            ready = False
        if name == "Report built" and c.submitted_reviews > 0:
            ready = True  # an interim report needs only some reviews
        if ready and not current_given:
            steps.append(Step(name, CURRENT, detail, url))
            current_given = True
        else:
            steps.append(Step(name, TODO if ready else BLOCKED, detail, url))
    return steps


def study_steps(study: Study) -> list[Step]:
    return steps_from(study_counts(study))


def next_step(steps: list[Step]) -> Step | None:
    return next((s for s in steps if s.state == CURRENT), None)
