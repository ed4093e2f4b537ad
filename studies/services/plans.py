"""A study's analysis plan: reading, setting and freezing it (pre-registration).

The plan itself is pure data (:mod:`studies.analysis.plan`); this module stores it on the
study, checks it against the study's form and conditions, and freezes it. A plan can be
frozen until the first report is built: a report is the moment the owner first sees
results by condition, so a plan frozen later would register nothing. Changing a plan
after freezing stays possible; every report then shows the deviation and both results.
"""

from __future__ import annotations

from typing import Any

from ..analysis.plan import AnalysisPlan, parse_plan
from ..models import Study


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


def plan_registration(study: Study) -> dict[str, Any] | None:
    """Hash and freeze time of the registered plan, for the report and the package."""
    if study.analysis_plan_frozen_at is None:
        return None
    return {
        "hash": study.analysis_plan_hash,
        "frozen_at": study.analysis_plan_frozen_at.isoformat(timespec="seconds"),
    }
