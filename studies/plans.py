"""A study's analysis plan: reading, setting and freezing it (pre-registration).

The plan itself is pure data (:mod:`studies.analysis.plan`); this module stores it on the
study, checks it against the study's form and conditions, and freezes it. A plan can be
frozen until the first report is built: a report is the moment the owner first sees
results by condition, so a plan frozen later would register nothing. Changing a plan
after freezing stays possible; every report then shows the deviation and both results.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from .analysis.plan import AnalysisPlan, PlanError, parse_plan, plan_document, plan_hash
from .models import Study
from .services import audit


def study_plan(study: Study) -> AnalysisPlan:
    """The study's current plan (the default plan when none is stored)."""
    return parse_plan(study.analysis_plan or None)


def study_registered_plan(study: Study) -> AnalysisPlan | None:
    """The frozen plan, or None when the study has not frozen one."""
    if study.analysis_plan_registered is None:
        return None
    return parse_plan(study.analysis_plan_registered)


def plan_check_for_study(plan: AnalysisPlan, study: Study) -> None:
    """PlanError when the plan names a metric, condition or direction the study lacks."""
    plan.check(
        metrics=study.form_definition().metric_keys,
        conditions=[c.key for c in study.conditions.all()],
        baseline=study.baseline(),
    )


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


def plan_registration(study: Study) -> dict[str, Any] | None:
    """Hash and freeze time of the registered plan, for the report and the package."""
    if study.analysis_plan_frozen_at is None:
        return None
    return {
        "hash": study.analysis_plan_hash,
        "frozen_at": study.analysis_plan_frozen_at.isoformat(timespec="seconds"),
    }
