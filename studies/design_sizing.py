"""Sizing the next study from this one's reviews: the job behind the sizing page and the
``study_size`` command.

The statistics are pure (:mod:`studies.analysis.pilot`, :mod:`studies.analysis.sizing`):
this module reads the study's review frame and plan, checks the request against them,
runs the search as a background job with progress, and keeps the result in the job's
params so the page can show it (and draw its power curve) without computing again.

The comparison is tested at the level and in the direction the study's plan gives it
(its correction, family and hypotheses); the plan's ``primary`` test supplies the
defaults. docs/power.md explains the method and why the effect should be given.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from .analysis.frame import has_reviewer_ids
from .analysis.pilot import size_from_plan
from .analysis.plan import TESTS
from .jobs import job_active, job_enqueue, job_latest_done, job_progress, job_start
from .models import JobRun, Study
from .selectors import review_frame
from .services.audit import audit
from .services.plans import study_plan

SIZING_JOB = "sizing"
#: Progress is reported as a fraction; the job's row counts it in thousandths.
_STEPS = 1000
TEST_LABELS = {
    "by_review": "Test 1: reviews as units (Welch)",
    "by_idea": "Test 2: idea means as units (Welch)",
    "by_reviewer": "Test 3: each reviewer's difference (one-sample t)",
    "mixed": "Mixed model: condition effect (Wald)",
}


class SizingError(ValueError):
    """The request cannot be sized on this study; the message says which field and why."""


@dataclass(frozen=True)
class SizingRequest:
    """What to size for, and how hard to look. ``load`` is the reviews each reviewer of
    the new study writes (None: the pilot's median, which needs reviewer ids)."""

    metric: str
    test: str
    condition: str
    effect: float | None = None
    power: float = 0.8
    reviews_per_idea: tuple[int, ...] = (2, 3, 4)
    load: int | None = None
    n_boot: int = 200
    n_reps: int = 400
    seed: int | None = None


def sizing_defaults(study: Study) -> dict[str, Any]:
    """The form's starting values: the plan's primary test, else the first metric, Test 2
    and the first condition other than the baseline."""
    plan = study_plan(study)
    metrics = study.form_definition().metric_keys
    baseline = study.baseline()
    others = [c.key for c in study.conditions.order_by("key") if c.key != baseline]
    if plan.primary is not None:
        p = plan.primary
        return {
            "metric": p.metric,
            "test": p.test,
            "condition": p.condition,
            "effect": p.effect,
            "power": p.power,
            "from_plan": True,
        }
    return {
        "metric": metrics[0] if metrics else "",
        "test": "by_idea",
        "condition": others[0] if others else "",
        "effect": None,
        "power": 0.8,
        "from_plan": False,
    }


def sizing_check(study: Study, req: SizingRequest) -> list[str]:
    """Every reason the request cannot run on this study (empty: it can)."""
    problems: list[str] = []
    metrics = study.form_definition().metric_keys
    baseline = study.baseline()
    conditions = [c.key for c in study.conditions.all()]
    if req.metric not in metrics:
        problems.append(
            f"metric: {req.metric!r} is not a metric of the form ({', '.join(metrics)})"
        )
    if req.test not in TESTS:
        problems.append(f"test: {req.test!r} is not one of {', '.join(TESTS)}")
    if req.condition not in conditions or req.condition == baseline:
        problems.append(
            f"condition: {req.condition!r} is not a condition compared with the baseline "
            f"{baseline!r}"
        )
    if req.effect is not None and not req.effect > 0:
        problems.append("effect: the smallest difference worth detecting must be positive")
    if not 0 < req.power < 1:
        problems.append("power: must be between 0 and 1")
    if not req.reviews_per_idea or min(req.reviews_per_idea) < 1:
        problems.append("reviews per idea: list at least one count of 1 or more")
    if req.load is not None and req.load < 1:
        problems.append("load: each reviewer writes at least one review")
    if problems:
        return problems
    frame = review_frame(study)
    if frame.empty:
        return ["the study has no submitted reviews to size from"]
    present = set(frame["condition"].astype(str))
    for c in (baseline, req.condition):
        if c not in present:
            problems.append(f"condition: no submitted review of a {c!r} idea yet")
    if req.metric in frame.columns and frame[req.metric].notna().sum() < 8:
        problems.append(f"metric: fewer than 8 scores of {req.metric!r} to estimate from")
    if req.load is None and not has_reviewer_ids(frame):
        problems.append(
            "load: the reviews carry no reviewer ids (as in a released file), so the "
            "reviewers' load cannot be read from them: give it"
        )
    return problems


def sizing_enqueue(*, study: Study, actor: Any, request: SizingRequest) -> JobRun:
    """Start the sizing job (or return the one already running); SizingError names every
    field that is wrong."""
    active = job_active(study=study, kind=SIZING_JOB)
    if active is not None:
        return active
    problems = sizing_check(study, request)
    if problems:
        raise SizingError("; ".join(problems))
    seed = request.seed if request.seed is not None else secrets.randbelow(10**6)
    params = {**asdict(request), "seed": seed}
    params["reviews_per_idea"] = list(request.reviews_per_idea)
    job = job_start(study=study, kind=SIZING_JOB, actor=actor, total=_STEPS, **params)
    audit(study=study, actor=actor, verb="sizing_started", job=job.pk, **params)
    job_enqueue(job=job)
    return job


def sizing_compute(
    study: Study, req: SizingRequest, progress: Callable[[float, str], None] | None = None
) -> dict[str, Any]:
    """The sizing itself (the job's work, and the command's): JSON-ready result."""
    frame = review_frame(study)
    plan = study_plan(study)
    metrics = study.form_definition().metric_keys
    result = size_from_plan(
        frame,
        plan,
        metric=req.metric,
        test=req.test,
        condition=req.condition,
        baseline=study.baseline(),
        metrics=metrics,
        effect=req.effect,
        power=req.power,
        reviews_per_idea=req.reviews_per_idea,
        load=req.load,
        n_boot=req.n_boot,
        n_reps=req.n_reps,
        seed=int(req.seed or 0),
        progress=progress,
    )
    doc = result.to_dict()
    doc["hypothesis"] = {
        "metric": req.metric,
        "test": req.test,
        "test_label": TEST_LABELS[req.test],
        "condition": req.condition,
        "baseline": study.baseline(),
        "alternative": result.alternative,
    }
    return doc


def sizing_run(*, job: JobRun) -> dict[str, Any]:
    """The job: size, store the result in the job's params, say the answer in its
    message."""
    p = dict(job.params)
    req = SizingRequest(
        metric=p["metric"],
        test=p["test"],
        condition=p["condition"],
        effect=p.get("effect"),
        power=float(p.get("power", 0.8)),
        reviews_per_idea=tuple(int(k) for k in p.get("reviews_per_idea", (2, 3, 4))),
        load=p.get("load"),
        n_boot=int(p.get("n_boot", 200)),
        n_reps=int(p.get("n_reps", 400)),
        seed=int(p.get("seed", 0)),
    )

    def progress(fraction: float, message: str) -> None:
        job_progress(job=job, done=round(fraction * _STEPS), total=_STEPS, message=message)

    doc = sizing_compute(job.study, req, progress)
    job.params = {**p, "result": doc}
    design = doc.get("design")
    job.message = (
        f"{design['n_reviews']} reviews: {design['ideas_per_condition']} ideas per condition, "
        f"{design['reviews_per_idea']} reviews each, {design['n_reviewers']} reviewers"
        if design
        else "no design within the cap reaches the power"
    )
    job.save(update_fields=["params", "message"])
    audit(
        study=job.study,
        actor=None,
        verb="sizing_finished",
        job=job.pk,
        size_reviews=doc.get("size_reviews"),
        interval_reviews=doc.get("interval_reviews"),
    )
    return doc


def sizing_latest(study: Study) -> JobRun | None:
    return job_latest_done(study=study, kind=SIZING_JOB)
