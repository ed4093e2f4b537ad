"""A study's pre-registration document: the facts from its rows, arranged by
:mod:`studies.protocol.preregistration` into JSON and Markdown.

The analysis section is the registered (frozen) plan when there is one, else the current
plan, marked as not registered. The power section is the latest finished sizing job.
Nothing personal enters the document (no reviewer, author or institution).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count

from ideareview import __version__

from .analysis.plan import CORRECTIONS, AnalysisPlan, plan_document, plan_hash
from .analysis.quality import FLAG_KINDS
from .analysis.rounding import fixed
from .design_sizing import TEST_LABELS, sizing_latest
from .models import Condition, Idea, Study
from .protocol.preregistration import preregistration_document, preregistration_markdown
from .services.plans import plan_registration, study_plan, study_registered_plan

_NORMALIZED = (Idea.NormalizationStatus.APPROVED, Idea.NormalizationStatus.EDITED)


def plan_families(plan: AnalysisPlan) -> str:
    """The plan's multiple-testing families in words (the pre-registration's and the plan
    page's)."""
    if plan.family_scope != "custom":
        return {
            "per_comparison": "one per test and comparison with the baseline, over the metrics",
            "per_test": "one per test, over the metrics and conditions",
            "all": "one over every test, metric and condition",
        }[plan.family_scope]
    return "; ".join(
        f"{f.name}: tests {', '.join(f.tests) or 'all'}, metrics {', '.join(f.metrics) or 'all'}, "
        f"conditions {', '.join(f.conditions) or 'all'}"
        for f in plan.families
    )


def plan_directions(plan: AnalysisPlan) -> list[str]:
    """The plan's directional hypotheses as written ("AI > Human on overall"); empty when
    every test is two-sided (the pre-registration's and the plan page's words)."""
    return [
        h.direction
        + ("" if h.metric == "*" else f" on {h.metric}")
        + ("" if h.test == "*" else f" in {h.test}")
        for h in plan.hypotheses
        if h.direction
    ]


def _analysis(plan: AnalysisPlan, metrics: list[str]) -> dict[str, Any]:
    hypotheses = plan_directions(plan)
    topic = "a random intercept" if plan.topic == "random" else "fixed effects"
    covariates = ", ".join(plan.covariates) or "none"
    return {
        "primary_metrics": list(plan.primary_metrics) or metrics,
        "secondary_metrics": list(plan.secondary_metrics),
        "tests": [TEST_LABELS[t] for t in plan.tests],
        "hypotheses": hypotheses,
        "method": plan.method,
        "method_label": CORRECTIONS[plan.method],
        "families": plan_families(plan),
        "alpha": plan.alpha,
        "mixed_model": f"topic as {topic}, reviewer and idea random intercepts, covariates "
        f"{covariates}",
        "primary": None
        if plan.primary is None
        else {
            "metric": plan.primary.metric,
            "test": plan.primary.test,
            "condition": plan.primary.condition,
            "effect": plan.primary.effect,
            "power": plan.primary.power,
        },
        "plan": plan_document(plan),
    }


def _power(study: Study) -> dict[str, Any] | None:
    job = sizing_latest(study)
    if job is None or not (job.params or {}).get("result"):
        return None
    result = job.params["result"]
    h, est = result["hypothesis"], result["estimate"]
    low, high = result["interval_reviews"]
    fmt = lambda x: "beyond the search's cap" if x is None else fixed(x, 0)  # noqa: E731
    return {
        "metric": h["metric"],
        "test": h["test_label"],
        "condition": h["condition"],
        "baseline": h["baseline"],
        "alternative": result["alternative"],
        "level": result["plan_level"]["level"] if result.get("plan_level") else result["alpha"],
        "target_power": result["target_power"],
        "effect": result["effect"],
        "effect_given": result["effect_given"],
        "pilot": f"this study's {est['n_reviews']} reviews of {est['n_ideas']} ideas; variances "
        f"topic {est['variances']['topic']:.3g}, idea {est['variances']['idea']:.3g}, reviewer "
        f"{est['variances']['reviewer']:.3g}, residual {est['variances']['residual']:.3g}",
        "design": result["design"],
        "interval": f"{fixed(result['level'], 0, percent=True)} % interval over {result['bootstrap']['n']} "
        f"simulated pilots: {fmt(low)} to {fmt(high)} reviews",
        "computed_at": job.finished_at.isoformat(timespec="seconds") if job.finished_at else None,
    }


def preregistration_facts(study: Study) -> dict[str, Any]:
    form = study.form_definition()
    registered = study_registered_plan(study)
    plan = registered or study_plan(study)
    registration = plan_registration(study) or {}
    ideas = dict(
        Condition.objects.filter(study=study)
        .annotate(n=Count("memberships"))
        .values_list("key", "n")
    )
    normalized = study.ideas.filter(normalization_status__in=_NORMALIZED).count()
    currency = study.payment_currency
    return {
        "study": {"slug": study.slug, "title": study.title, "description": study.description},
        "registration": {
            "plan_sha256": registration.get("hash") or plan_hash(plan),
            "frozen_at": registration.get("frozen_at"),
            "deviation": registered is not None
            and registration.get("hash") != plan_hash(study_plan(study)),
            "software_version": __version__,
        },
        "evaluated": {
            "baseline": study.baseline(),
            "conditions": [
                {"key": c.key, "kind": c.kind, "ideas": ideas.get(c.key)}
                for c in study.conditions.order_by("key")
            ],
            "topics": [t.name for t in study.topics.order_by("name")],
            "normalization": (
                f"{normalized} of {study.ideas.count()} ideas rewritten into one writing style "
                "by a language model, each rewrite read and approved by a person"
            )
            if normalized
            else "",
        },
        "evaluators": {
            "recruitment": "personal invitations by mail"
            + (", each link bound to the invited address" if study.invitation_bind_email else "")
            + f", valid {study.invitation_days} days",
            "screening_min_papers": study.screening_min_papers,
            "payment": {
                "currency": currency,
                "per_review": str(study.payment_per_review or ""),
                "per_idea": str(study.payment_per_idea or ""),
                "bonus": str(study.payment_bonus or ""),
                "bonus_top_k": study.payment_bonus_top_k,
            },
        },
        "instrument": {
            "key": form.key,
            "version": form.version,
            "title": form.title,
            "metrics": [
                {
                    "key": m.key,
                    "label": m.label,
                    "question": m.question,
                    "minimum": m.minimum,
                    "maximum": m.maximum,
                    "anchors": {str(k): v for k, v in sorted(m.anchors.items())},
                    "rationale": m.rationale,
                    "rationale_required": m.rationale_required,
                    "min_rationale_words": form.rationale_words(m),
                }
                for m in form.metrics
            ],
            "questions": [
                {
                    "label": q.label,
                    "question": q.question,
                    "minimum": q.minimum,
                    "maximum": q.maximum,
                }
                for q in form.questions
            ],
            "honor_code": form.honor_code,
            "attention_checks": [
                {"label": c.scale.label, "question": c.scale.question, "expected": c.expected}
                for c in form.attention_checks
            ],
        },
        "assignment": {
            "min_reviews_per_idea": study.min_reviews_per_idea,
            "max_reviews_per_idea": study.max_reviews_per_idea,
            "min_load": study.min_load,
            "max_load": study.max_load,
            "topic_choice_use": study.get_topic_choice_use_display().lower(),
        },
        "analysis": _analysis(plan, form.metric_keys),
        "exclusions": _exclusions(plan),
        "power": _power(study),
    }


def _exclusions(plan: AnalysisPlan) -> list[str]:
    """The plan's exclusion rules in words, with the thresholds their flags use."""
    q = plan.quality
    if not q.exclude:
        return []
    lines = [
        f"Removed: {FLAG_KINDS[r.flag]} ({r.flag}), "
        + ("the flagged review" if r.unit == "review" else "every review of the reviewer")
        + "."
        for r in q.exclude
    ]
    lines.append(
        f"Thresholds: measured time under {q.min_minutes:g} min; the same score on every "
        f"metric of a form with {q.straight_line_items} or more; rationales of "
        f"{q.duplicate_min_words} words or more with embedding cosine ≥ {q.duplicate_cosine:g}. "
        "Gold reviews are never analysed. The report shows the primary tests with and "
        "without the removed reviews."
    )
    return lines


def study_preregistration(study: Study) -> tuple[dict[str, Any], str]:
    """The document as (JSON record, Markdown)."""
    doc = preregistration_document(preregistration_facts(study))
    return doc, preregistration_markdown(doc)
