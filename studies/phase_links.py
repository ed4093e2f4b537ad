"""Linking a study to its earlier phase, and the comparison its report adds.

A later study (e.g. the execution study) names the earlier one whose ideas it reviews
again (`Study.previous_phase`). This module checks a proposed link (ideas matched by
external id, conditions that disagree, the metrics the two forms share and their scales),
stores or removes it with an audit event, and builds the report's phase comparison from
both studies' review frames with the later study's plan. The arithmetic is
`analysis/phases.py`; docs/phases.md has the design.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from django.db import transaction

from .analysis.phases import (
    PhaseComparison,
    SharedMetrics,
    compare_phases,
    match_phases,
    shared_metrics,
)
from .analysis.plan import AnalysisPlan
from .analysis.rounding import counted
from .models import IdeaCondition, Study, StudyMember
from .selectors import review_frame
from .services.audit import audit

LINK_ROLE = StudyMember.Role.EDITOR


class PhaseLinkError(ValueError):
    """A link that cannot be made; the message says why."""


@dataclass(frozen=True)
class PhaseLinkCheck:
    """What linking `later` to `earlier` would give, and whether it may be made.

    ``only_earlier``/``only_later`` are external ids in one phase only; ``disagree`` holds
    ``(id, earlier condition, later condition)``; ``shared`` the metrics both forms have
    on equal scales (and those left aside); ``problems`` why the link is refused (empty:
    it may be made).
    """

    earlier: Study
    later: Study
    compared: tuple[str, ...] = ()
    only_earlier: tuple[str, ...] = ()
    only_later: tuple[str, ...] = ()
    disagree: tuple[tuple[str, str, str], ...] = ()
    conditions_earlier: tuple[str, ...] = ()
    conditions_later: tuple[str, ...] = ()
    shared: SharedMetrics | None = None
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def allowed(self) -> bool:
        return not self.problems

    def summary(self) -> dict[str, Any]:
        """Counts and lists for the audit event and the command's output."""
        return {
            "earlier": self.earlier.slug,
            "later": self.later.slug,
            "compared": len(self.compared),
            "only_earlier": len(self.only_earlier),
            "only_later": len(self.only_later),
            "disagree": len(self.disagree),
            "shared_metrics": list(self.shared.metrics) if self.shared else [],
        }


def _membership_frame(study: Study) -> pd.DataFrame:
    """One row per (idea, condition) of the study: its external id and condition."""
    rows = IdeaCondition.objects.filter(study=study).values_list("external_id", "condition__key")
    return pd.DataFrame(list(rows), columns=["source_idea_id", "condition"])


def _chain(study: Study) -> list[int]:
    """The ids of the study's earlier phases, nearest first (stops on a loop)."""
    seen: list[int] = []
    current = study.previous_phase_id
    while current is not None and current not in seen:
        seen.append(current)
        current = (
            Study.objects.filter(pk=current).values_list("previous_phase_id", flat=True).first()
        )
    return seen


def phase_link_check(*, later: Study, earlier: Study) -> PhaseLinkCheck:
    """Match the two studies' ideas by external id and say whether the link may be made.

    Refused when: the studies are the same, the earlier study is itself a later phase of
    this one (a loop), an idea's condition differs between them, no idea is in both, the
    later study's baseline condition is not a condition of the earlier one, or the forms
    share no metric on the same scale.
    """
    problems: list[str] = []
    if later.pk == earlier.pk:
        return PhaseLinkCheck(earlier, later, problems=("a study cannot be its own earlier phase",))
    if later.pk in _chain(earlier):
        problems.append(
            f"{earlier.slug} is already a later phase of {later.slug}: linking would make a loop"
        )
    shared = shared_metrics(earlier.form_definition().scales(), later.form_definition().scales())
    if not shared.metrics:
        problems.append(
            "the two review forms share no metric on the same scale "
            f"({earlier.slug}: {', '.join(earlier.form_definition().metric_keys)}; "
            f"{later.slug}: {', '.join(later.form_definition().metric_keys)})"
        )
    conds_e = tuple(earlier.conditions.order_by("key").values_list("key", flat=True))
    conds_l = tuple(later.conditions.order_by("key").values_list("key", flat=True))
    baseline = later.baseline()
    if baseline and baseline not in conds_e:
        problems.append(
            f"the baseline condition {baseline!r} of {later.slug} is not a condition of "
            f"{earlier.slug} (its conditions: {', '.join(conds_e) or 'none'})"
        )
    try:
        match = match_phases(
            _membership_frame(earlier),
            _membership_frame(later),
            id_column="source_idea_id",
            labels=(earlier.slug, later.slug),
        )
    except ValueError as exc:
        problems.append(str(exc))
        return PhaseLinkCheck(
            earlier,
            later,
            conditions_earlier=conds_e,
            conditions_later=conds_l,
            shared=shared,
            problems=tuple(problems),
        )
    if match.disagree:
        problems.append(
            f"{counted(len(match.disagree), 'idea')} "
            f"{'has' if len(match.disagree) == 1 else 'have'} a different condition "
            "in the two studies "
            "(listed below); correct the conditions before linking"
        )
    if not match.compared and not match.disagree:
        problems.append(f"no idea id of {later.slug} is an idea id of {earlier.slug}")
    return PhaseLinkCheck(
        earlier=earlier,
        later=later,
        compared=match.compared,
        only_earlier=match.only_first,
        only_later=match.only_second,
        disagree=match.disagree,
        conditions_earlier=conds_e,
        conditions_later=conds_l,
        shared=shared,
        problems=tuple(problems),
    )


def phase_candidates(*, later: Study, user: Any) -> list[Study]:
    """The studies `user` may link `later` to: those whose team they are on as editor or
    owner, other than `later` and its own later phases. Nobody else's study is offered."""
    editable = StudyMember.objects.filter(
        user_id=int(getattr(user, "pk", None) or 0),  # 0 matches nobody
        role__in=[StudyMember.Role.EDITOR, StudyMember.Role.OWNER],
    ).values_list("study_id", flat=True)
    return [
        s
        for s in Study.objects.filter(pk__in=editable).exclude(pk=later.pk).order_by("slug")
        if later.pk not in _chain(s)
    ]


def may_link(study: Study, user: Any) -> bool:
    """Whether `user` is an editor or owner of `study` (both ends of a link need it)."""
    return StudyMember.role_at_least(study.role_of(user), LINK_ROLE)


@transaction.atomic
def phase_link(*, later: Study, earlier: Study, actor: Any) -> PhaseLinkCheck:
    """Make `earlier` the previous phase of `later`; PhaseLinkError (nothing stored) when
    the check refuses it. Audited on the later study."""
    later = Study.objects.select_for_update().get(pk=later.pk)
    check = phase_link_check(later=later, earlier=earlier)
    if not check.allowed:
        raise PhaseLinkError("; ".join(check.problems))
    later.previous_phase = earlier
    later.save(update_fields=["previous_phase", "updated_at"])
    audit(study=later, actor=actor, verb="phase_linked", **check.summary())
    return check


@transaction.atomic
def phase_unlink(*, later: Study, actor: Any) -> Study | None:
    """Remove the link to the earlier phase (the next report has no comparison); returns
    the study that was linked, or None when there was none. Audited."""
    later = Study.objects.select_for_update().get(pk=later.pk)
    earlier = later.previous_phase
    if earlier is None:
        return None
    later.previous_phase = None
    later.save(update_fields=["previous_phase", "updated_at"])
    audit(study=later, actor=actor, verb="phase_unlinked", earlier=earlier.slug)
    return earlier


def phase_comparison(
    *, study: Study, plan: AnalysisPlan, seed: int = 0, mixed_starts: int = 3
) -> PhaseComparison:
    """The comparison of a linked study with its earlier phase (ValueError, with the
    reason, when there is no link or the comparison cannot be made)."""
    earlier = study.previous_phase
    if earlier is None:
        raise ValueError("the study is not linked to an earlier phase")
    first, second = review_frame(earlier), review_frame(study)
    if first.empty:
        raise ValueError(f"the earlier phase {earlier.slug} has no submitted reviews")
    if second.empty:
        raise ValueError(f"{study.slug} has no submitted reviews")
    return compare_phases(
        first,
        second,
        scales_first=earlier.form_definition().scales(),
        scales_second=study.form_definition().scales(),
        baseline=study.baseline(),
        metrics=list(plan.phase_metrics) or None,
        plan=plan,
        leave_out=plan.phase_leave_out,
        labels=(earlier.slug, study.slug),
        id_column="source_idea_id",
        mixed_starts=mixed_starts,
        seed=seed,
    )


def phase_report_section(
    *, study: Study, plan: AnalysisPlan, seed: int = 0, mixed_starts: int = 3
) -> tuple[dict[str, Any] | None, PhaseComparison | None]:
    """The report's ``phases`` section (None for a study with no earlier phase) and the
    comparison it came from (None when it could not be made: the section says why)."""
    earlier = study.previous_phase
    if earlier is None:
        return None, None
    head = {
        "earlier": {"slug": earlier.slug, "title": earlier.title},
        "later": {"slug": study.slug, "title": study.title},
        "leave_out_planned": list(plan.phase_leave_out),
        "direction_planned": plan.phase_direction or None,
    }
    try:
        result = phase_comparison(study=study, plan=plan, seed=seed, mixed_starts=mixed_starts)
    except ValueError as exc:
        return {"available": False, "reason": str(exc), **head}, None
    return {"available": True, "reason": None, **head, **result.to_dict()}, result
