"""The study's review form page, and the sample files of the import pages.

The form page shows the form as reviewers will see it and lets an editor pick a built-in
form, upload a form file or edit a copy as JSON; each candidate is validated and
previewed before it is used. Once the study has reviews the page only shows the form.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from .. import import_samples
from ..protocol.forms import (
    BUILTIN_FORMS,
    FormDefinition,
    FormFileError,
    builtin_form,
    form_parse_json,
)
from ..reviewer_forms import MAX_FORM_FILE_BYTES
from ..services.study import review_form_next_version, study_form_locked_reason, study_form_set
from .study import VIEWER, get_study_for_member, role_by_method


def form_preview(definition: FormDefinition) -> dict[str, Any]:
    """What the preview template needs: each scale with its levels and anchors."""

    def scale(s: Any) -> dict[str, Any]:
        return {
            "key": s.key,
            "label": s.label,
            "question": s.question,
            "range": s.range_text(),
            "levels": [(v, s.anchor(v)) for v in s.levels],
            "rationale": s.rationale_mode,
            "min_words": definition.rationale_words(s),
        }

    return {
        "definition": definition,
        "metrics": [scale(m) for m in definition.metrics],
        "questions": [scale(q) for q in definition.questions],
    }


def _editable_copy(study: Any, definition: FormDefinition) -> str:
    """The current form as JSON under the study's own key and the next free version."""
    own = definition.key.startswith(study.slug)
    key = (definition.key if own else f"{study.slug.lower()}-form")[:64]
    data = definition.to_dict() | {"key": key, "version": review_form_next_version(key)}
    if not own:
        data["title"] = f"{definition.title} (edited for {study.title})"[:200]
    return FormDefinition.from_dict(data).to_json()


def _candidate(request: HttpRequest) -> tuple[FormDefinition | None, str, list[str]]:
    """The form the POST proposes, its JSON text for the editor, and its problems."""
    source = request.POST.get("source", "")
    if source == "builtin":
        try:
            definition = builtin_form(request.POST.get("builtin", ""))
        except KeyError as exc:
            return None, "", [str(exc.args[0])]
        return definition, definition.to_json(), []
    if source == "upload":
        upload = request.FILES.get("file")
        if upload is None:
            return None, "", ["choose a JSON form file"]
        if upload.size and upload.size > MAX_FORM_FILE_BYTES:
            return None, "", [f"{upload.name}: larger than {MAX_FORM_FILE_BYTES} bytes"]
        raw = upload.read()
        name, text = upload.name or "upload", raw.decode("utf-8-sig", errors="replace")
    else:
        raw = text = request.POST.get("definition", "")
        name = "the edited form"
    try:
        return form_parse_json(raw, source=name), text, []
    except FormFileError as exc:
        return None, text, [f"{exc.source}: {p}" for p in exc.problems]


@login_required
@require_http_methods(["GET", "POST"])
def study_form(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=role_by_method(request))
    current = study.form_definition()
    locked = study_form_locked_reason(study)
    candidate: FormDefinition | None = None
    text = ""
    problems: list[str] = []
    if request.method == "POST":
        candidate, text, problems = _candidate(request)
        if locked:
            problems = [locked]
        elif candidate is not None and request.POST.get("intent") == "use":
            try:
                study_form_set(study=study, definition=candidate, actor=request.user)
            except ValueError as exc:
                problems = [str(exc)]
            else:
                messages.success(
                    request,
                    f"The study now uses {candidate.title} ({candidate.key} v{candidate.version}).",
                )
                return redirect("studies:study_form", study.slug)
    shown = candidate or current
    # The built-in list keeps what the editor just previewed selected, so its "Use this
    # form" applies that form rather than the list's first entry.
    source = request.POST.get("source", "") if request.method == "POST" else ""
    selected = candidate if candidate is not None and source == "builtin" else current
    return render(
        request,
        "studies/forms/form.html",
        {
            "study": study,
            "current": current,
            "locked": locked,
            "candidate": candidate,
            "problems": problems,
            "preview": form_preview(shown),
            "builtins": [
                (
                    f"{f.key}@{f.version}",
                    f"{f.title} ({f.key} v{f.version}, {len(f.metrics)} metrics)",
                    (f.key, f.version) == (selected.key, selected.version),
                )
                for f in BUILTIN_FORMS
            ],
            "source": source,
            "json_text": text or _editable_copy(study, current),
        },
        status=400 if problems else 200,
    )


@login_required
@require_GET
def import_sample(request: HttpRequest, slug: str, kind: str, fmt: str) -> HttpResponse:
    """A sample file for one import page, built for this study's form, topics, conditions."""
    study = get_study_for_member(request, slug, role=VIEWER)
    if kind not in import_samples.SAMPLE_KINDS or fmt not in import_samples.FORMATS:
        raise Http404("no such sample")
    conditions = [c.key for c in study.conditions.order_by("key")]
    topics = [t.name for t in study.topics.order_by("name")]
    if kind == "reviews":
        rows = import_samples.review_sample_rows(
            study.form_definition(), conditions=conditions, topics=topics
        )
    elif kind == "ideas":
        rows = import_samples.idea_sample_rows(conditions=conditions, topics=topics)
    else:
        rows = import_samples.invitation_sample_rows()
    body = import_samples.sample_file(rows, fmt)
    content_type = "text/csv" if fmt == "csv" else "application/x-ndjson"
    response = HttpResponse(body, content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-{kind}-sample.{fmt}"'
    return response
