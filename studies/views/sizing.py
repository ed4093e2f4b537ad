"""The sizing page: how many reviewers and ideas the next study needs, from this one's
reviews. Viewers read the latest result; editors start a sizing job (docs/power.md)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from ..analysis.plan import TESTS
from ..analysis.sizing_plots import power_curve_svg
from ..design_sizing import (
    SIZING_JOB,
    TEST_LABELS,
    SizingError,
    SizingRequest,
    sizing_defaults,
    sizing_enqueue,
    sizing_latest,
)
from ..http import is_htmx
from ..jobs import job_latest
from ..models import Study
from .study import get_study_for_member, role_by_method


class SizingForm(forms.Form):
    metric = forms.ChoiceField(label="Metric")
    test = forms.ChoiceField(label="Test", choices=[(t, TEST_LABELS[t]) for t in TESTS])
    condition = forms.ChoiceField(label="Compared with the baseline")
    effect = forms.FloatField(
        label="Smallest difference worth detecting (points)",
        required=False,
        min_value=0.001,
        help_text="Leave empty to use this study's estimate, which is noisy when the study is "
        "small: the size needed grows as 1 / difference², so a noisy estimate gives a noisy size.",
    )
    power = forms.FloatField(label="Power wanted", min_value=0.05, max_value=0.99, initial=0.8)
    reviews_per_idea = forms.CharField(
        label="Reviews per idea to consider",
        initial="2, 3, 4",
        help_text="Whole numbers separated by commas; the cheapest is recommended.",
    )
    load = forms.IntegerField(
        label="Reviews each reviewer writes",
        required=False,
        min_value=1,
        max_value=200,
        help_text="Leave empty to use this study's median; needed when its reviews carry no "
        "reviewer ids.",
    )
    n_boot = forms.IntegerField(
        label="Bootstrap pilots",
        initial=200,
        min_value=20,
        max_value=2000,
        help_text="Each is re-fitted and sized again; their spread is the interval shown.",
    )

    def __init__(self, *args: Any, study: Study, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        form = study.form_definition()
        labels = form.labels()
        metric = self.fields["metric"]
        assert isinstance(metric, forms.ChoiceField)
        metric.choices = [(m, labels.get(m, m)) for m in form.metric_keys]
        baseline = study.baseline()
        condition = self.fields["condition"]
        assert isinstance(condition, forms.ChoiceField)
        condition.choices = [
            (c.key, f"{c.key} vs {baseline}")
            for c in study.conditions.order_by("key")
            if c.key != baseline
        ]

    def clean_reviews_per_idea(self) -> tuple[int, ...]:
        text = self.cleaned_data["reviews_per_idea"]
        try:
            counts = tuple(sorted({int(part) for part in text.replace(" ", "").split(",") if part}))
        except ValueError:
            raise forms.ValidationError(
                "Whole numbers separated by commas, e.g. 2, 3, 4."
            ) from None
        if not counts or counts[0] < 1 or counts[-1] > 20:
            raise forms.ValidationError("Give at least one count between 1 and 20.")
        return counts

    def request(self) -> SizingRequest:
        d = self.cleaned_data
        return SizingRequest(
            metric=d["metric"],
            test=d["test"],
            condition=d["condition"],
            effect=d["effect"],
            power=d["power"],
            reviews_per_idea=d["reviews_per_idea"],
            load=d["load"],
            n_boot=d["n_boot"],
        )


def _initial(study: Study) -> dict[str, Any]:
    """The last sizing's settings, so a second run changes one thing; else the plan's
    primary test."""
    last = job_latest(study=study, kind=SIZING_JOB)
    if last is not None and last.params.get("metric"):
        p = last.params
        initial = {k: p.get(k) for k in ("metric", "test", "condition", "effect", "power")}
        initial["reviews_per_idea"] = ", ".join(str(k) for k in p.get("reviews_per_idea", ()))
        initial["load"], initial["n_boot"] = p.get("load"), p.get("n_boot")
        return {k: v for k, v in initial.items() if v not in (None, "")}
    d = sizing_defaults(study)
    return {k: d[k] for k in ("metric", "test", "condition", "effect", "power") if d[k] is not None}


@login_required
@require_http_methods(["GET", "POST"])
def sizing(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=role_by_method(request))
    if request.method == "POST":
        form = SizingForm(request.POST, study=study)
        if form.is_valid():
            try:
                job = sizing_enqueue(study=study, actor=request.user, request=form.request())
            except SizingError as exc:
                form.add_error(None, str(exc))
            else:
                if is_htmx(request):
                    return render(request, "studies/_job.html", {"study": study, "job": job})
                messages.info(request, "Sizing started: this page shows its progress.")
                return redirect("studies:sizing", study.slug)
    else:
        form = SizingForm(initial=_initial(study), study=study)
    latest = sizing_latest(study)
    result = (latest.params or {}).get("result") if latest else None
    return render(
        request,
        "studies/owner/sizing.html",
        {
            "study": study,
            "form": form,
            "job": job_latest(study=study, kind=SIZING_JOB),
            "latest": latest,
            "result": result,
            "plot": power_curve_svg(result) if result and result.get("curve") else "",
            "defaults": sizing_defaults(study),
        },
    )
