"""The study's analysis plan page: read it, edit it (JSON), freeze it (pre-registration).

Viewers read; editors change the plan; owners freeze it. docs/analysis-plan.md describes
the document.
"""

from __future__ import annotations

import json

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ..analysis.options import CHANCE_RANKINGS, CHANCE_RANKINGS_MAX, CHANCE_RANKINGS_MIN
from ..analysis.plan import CORRECTIONS, PlanError, plan_document, plan_hash
from ..models import Study
from ..preregistrations import plan_directions, plan_families, study_preregistration
from ..services.plans import study_plan
from ..services.study import study_plan_freeze, study_plan_set
from .study import OWNER, VIEWER, get_study_for_member, role_by_method


class PlanDocumentForm(forms.Form):
    document = forms.CharField(
        label="Analysis plan (JSON)",
        widget=forms.Textarea(attrs={"rows": 24, "cols": 80, "spellcheck": "false"}),
        help_text="An empty object {} is the default plan: two-sided tests, Bonferroni over "
        "the metrics within each test and comparison.",
    )


def _context(study: Study, form: PlanDocumentForm) -> dict[str, object]:
    plan = study_plan(study)
    digest = plan_hash(plan)
    form.fields["document"].disabled = not study.may.edit  # type: ignore[attr-defined]
    return {
        "study": study,
        "form": form,
        "plan": plan,
        "hash": digest,
        "method_label": CORRECTIONS[plan.method],
        # The sidedness and families as the pre-registration words them: a one-sided
        # plan's status must not read like the default two-sided one.
        "directions": [f"one-sided ({d})" for d in plan_directions(plan)] or ["two-sided"],
        "families": plan_families(plan) if plan.method != "none" else "",
        "metrics": plan.metrics(study.form_definition().metric_keys),
        "frozen": study.analysis_plan_frozen_at is not None,
        "changed_since_freeze": study.analysis_plan_frozen_at is not None
        and digest != study.analysis_plan_hash,
        "can_freeze": study.analysis_plan_frozen_at is None and not study.reports.exists(),
        "chance": {
            "rankings": plan.chance_rankings or CHANCE_RANKINGS,
            "default": CHANCE_RANKINGS,
            "low": CHANCE_RANKINGS_MIN,
            "high": CHANCE_RANKINGS_MAX,
        },
    }


@login_required
@require_http_methods(["GET", "POST"])
def study_plan_page(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=role_by_method(request))
    if request.method == "POST":
        form = PlanDocumentForm(request.POST)
        if form.is_valid():
            try:
                study_plan_set(
                    study=study, source=form.cleaned_data["document"], actor=request.user
                )
            except PlanError as exc:
                form.add_error("document", exc.problems)
            else:
                messages.success(request, "Analysis plan saved.")
                return redirect("studies:study_plan", slug=study.slug)
        return render(request, "studies/owner/plan.html", _context(study, form), status=400)
    text = json.dumps(plan_document(study_plan(study)), indent=2)
    return render(
        request,
        "studies/owner/plan.html",
        _context(study, PlanDocumentForm(initial={"document": text})),
    )


@login_required
@require_POST
def study_plan_freeze_view(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=OWNER)
    # A registration is for good (there is no unfreezing), so it takes a ticked box, as
    # closing the study does.
    if request.POST.get("confirm") != "freeze":
        messages.error(request, "Tick the confirmation to freeze the plan.")
        return redirect("studies:study_plan", slug=study.slug)
    try:
        digest = study_plan_freeze(study=study, actor=request.user)
    except PlanError as exc:
        messages.error(request, f"The plan was not frozen: {exc}.")
    else:
        messages.success(request, f"Analysis plan frozen (hash {digest[:12]}).")
    return redirect("studies:study_plan", slug=study.slug)


@login_required
@require_GET
def study_preregistration_view(request: HttpRequest, slug: str, fmt: str) -> HttpResponse:
    """The pre-registration document, as Markdown or as its JSON record."""
    study = get_study_for_member(request, slug, role=VIEWER)
    if fmt not in ("md", "json"):
        raise Http404("The pre-registration document is .md or .json.")
    doc, markdown = study_preregistration(study)
    if fmt == "json":
        body, kind = json.dumps(doc, indent=2, ensure_ascii=False), "application/json"
    else:
        body, kind = markdown, "text/markdown; charset=utf-8"
    response = HttpResponse(body, content_type=kind)
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-preregistration.{fmt}"'
    return response
