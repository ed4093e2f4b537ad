"""The study settings page: every parameter, locked ones disabled with the reason."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from ..services.study import (
    REVIEWER_VISIBLE,
    SettingsChange,
    SetupError,
    source_warnings,
    study_locks,
    study_settings_update,
    study_source_mentions,
)
from ..status import study_status
from ..study_forms import SETTINGS_FIELDS, StudySettingsForm
from .study import get_study_for_member, role_by_method


@login_required
@require_http_methods(["GET", "POST"])
def study_settings(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=role_by_method(request))
    may_edit = study.may.edit  # type: ignore[attr-defined]
    locks = study_locks(study)
    imported = study_status(study).imported
    form = StudySettingsForm(request.POST or None, instance=study, locks=locks, imported=imported)
    if not may_edit:
        for field in form.fields.values():
            field.disabled = True
    error = ""
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        change = SettingsChange(
            # A field left off the page keeps its stored value.
            fields={name: data[name] for name in SETTINGS_FIELDS if name in form.fields},
            conditions=data["conditions"],
            topics=data["topics"],
            form=data["review_form"],
        )
        try:
            changed = study_settings_update(study=study, change=change, actor=request.user)
        except SetupError as exc:
            error = str(exc)
        else:
            what = ", ".join(str(form.fields[n].label or n) for n in changed if n in form.fields)
            messages.success(request, f"Saved: {what}." if changed else "Nothing changed.")
            for warning in source_warnings(study_source_mentions(study)):
                messages.warning(request, warning)
            return redirect("studies:study_settings", slug=study.slug)
    return render(
        request,
        "studies/study_settings.html",
        {
            "study": study,
            "form": form,
            "locks": locks,
            "error": error,
            "reviewer_visible": REVIEWER_VISIBLE,
            "imported": imported,
            "source_warnings": source_warnings(study_source_mentions(study)),
        },
        status=400 if error or form.errors else 200,
    )
