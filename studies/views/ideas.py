"""Owner pages for preparing ideas: intake, sections, topic matching, duplicates,
normalization and sign-off. Each view starts with a permission-checked getter (404 for
what is not yours); work happens in `studies.services.ideas`."""

from __future__ import annotations

import json
import secrets
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from llm.models import JudgeConfig
from llm.services import judge_config_create

from .. import services
from ..analysis.rounding import counted
from ..http import is_htmx
from ..idea_forms import (
    ConditionForm,
    ConfigChoiceForm,
    ConfigCreateForm,
    DecisionForm,
    DuplicatesForm,
    GeneratingModelForm,
    IdeaPasteForm,
    IdeaUploadForm,
    SectionsForm,
    TopicApplyForm,
    TopicForm,
    TopicReasonForm,
)
from ..import_samples import IDEA_FILE_COLUMNS
from ..models import DuplicatePair, Idea, IdeaUpload, JobRun, LeakageExport, Study
from ..overview import WITHOUT_TEXT
from ..protocol import jsonsafe
from ..protocol.ideafiles import IdeaBatch
from ..protocol.normalization import (
    NORMALIZATION_PROMPT,
    NORMALIZATION_PROMPT_VERSION,
    prompt_sha256,
    word_diff,
)
from ..protocol.template import SECTIONS
from ..selectors import idea_labels
from ..services import job_latest
from ..services.ideas import idea_conditions_by_id, idea_label
from ..services.quality import GoldRefused, idea_gold_set
from ..status import ideas_without_text
from ..uploads import UploadGone
from .study import EDITOR, OWNER, VIEWER, get_study_for_member, role_by_method

HEADINGS = {s.key: s.heading for s in SECTIONS}


def get_idea_for_member(
    request: HttpRequest, slug: str, idea_id: int, *, role: str
) -> tuple[Study, Idea]:
    study = get_study_for_member(request, slug, role=role)
    idea = get_object_or_404(Idea.objects.select_related("topic", "study"), pk=idea_id, study=study)
    return study, idea


def _row(idea: Idea, number: int, textless: set[int]) -> dict[str, Any]:
    """One line of the ideas list; `number` is its row (ideas are named to owners by
    their external id and counted by row, never by database id). An idea in `textless`
    came with imported reviews and no text: it has no sections to report missing."""
    status = idea.section_status()
    without_text = idea.pk in textless
    if without_text:
        status = {"found": [], "missing": [], "empty": []}
    return {
        "idea": idea,
        "number": number,
        "without_text": without_text,
        "found": [HEADINGS[k] for k in status["found"]],
        "missing": [HEADINGS[k] for k in status["missing"]],
        "empty": [HEADINGS[k] for k in status["empty"]],
        "words": idea.word_count(),
        "conditions": [m.condition.key for m in idea.memberships.all()],
        "external_id": next((m.external_id for m in idea.memberships.all()), ""),
    }


def _row_alone(study: Study, idea: Idea) -> dict[str, Any]:
    """The row of one idea, numbered as the whole list numbers it."""
    ideas = _ideas_qs(study)
    return _row(
        ideas.get(pk=idea.pk), ideas.filter(pk__lt=idea.pk).count() + 1, ideas_without_text(study)
    )


def _ideas_qs(study: Study):  # type: ignore[no-untyped-def]
    return (
        study.ideas.select_related("topic", "exclusion")
        .prefetch_related("memberships__condition")
        .order_by("pk")
    )


# --------------------------------------------------------------------------- list and sections


@login_required
@require_GET
def ideas_list(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    textless = ideas_without_text(study)
    rows = [_row(i, n, textless) for n, i in enumerate(_ideas_qs(study), start=1)]
    return render(
        request,
        "studies/ideas/list.html",
        {
            "study": study,
            "rows": rows,
            "incomplete": sum(1 for r in rows if r["missing"] or r["empty"]),
            "without_text": sum(1 for r in rows if r["without_text"]),
            "without_text_words": WITHOUT_TEXT,
        },
    )


@login_required
@require_GET
def idea_row(request: HttpRequest, slug: str, idea_id: int) -> HttpResponse:
    study, idea = get_idea_for_member(request, slug, idea_id, role=VIEWER)
    if not is_htmx(request):
        return redirect(reverse("studies:ideas_list", args=[study.slug]) + f"#idea-{idea.pk}")
    return render(
        request, "studies/ideas/list.html#row", {"study": study, "r": _row_alone(study, idea)}
    )


@login_required
@require_http_methods(["GET", "POST"])
def idea_sections_page(request: HttpRequest, slug: str, idea_id: int) -> HttpResponse:
    study, idea = get_idea_for_member(request, slug, idea_id, role=role_by_method(request))
    initial = {k: v for k, v in (idea.sections or {}).items() if k in HEADINGS}
    # An idea imported with its reviews has a title but no sections: the form starts from
    # it, or saving would leave the title section empty.
    if not str(initial.get("title") or "").strip() and idea.title:
        initial["title"] = idea.title
    form = SectionsForm(request.POST or None, initial=initial)
    error = ""
    if request.method == "POST" and form.is_valid():
        try:
            services.idea_sections_update(idea=idea, sections=form.cleaned_data, actor=request.user)
        except services.PreparationError as exc:
            error = str(exc)
        else:
            if is_htmx(request):
                return render(
                    request,
                    "studies/ideas/list.html#row",
                    {"study": study, "r": _row_alone(study, idea)},
                )
            messages.success(request, f"Sections of {idea_label(idea)} saved.")
            return redirect(reverse("studies:ideas_list", args=[study.slug]) + f"#idea-{idea.pk}")
    context = {
        "study": study,
        "idea": idea,
        "label": idea_label(idea),
        "form": form,
        "error": error,
    }
    if is_htmx(request):
        return render(request, "studies/ideas/list.html#edit", context)
    return render(request, "studies/ideas/sections.html", context)


# --------------------------------------------------------------------------- intake


def _problems(batch: IdeaBatch) -> list[dict[str, str]]:
    return [
        {"where": p.where, "message": p.message, "level": p.level}
        for p in sorted(batch.problems, key=lambda p: (p.level != "error", p.source, p.row or 0))
    ]


def _imported(request: HttpRequest, outcome: services.IdeaImportOutcome, source: str) -> bool:
    """Tell the owner what an import did; True if it imported anything."""
    summary = outcome.summary
    if summary is None:
        if outcome.refused:
            messages.error(request, outcome.refused)
        return False
    skipped = (
        f", {summary['skipped_rows']} with problems skipped" if summary["skipped_rows"] else ""
    )
    incomplete = (
        f"; {summary['incomplete']} miss sections: fix them below" if summary["incomplete"] else ""
    )
    messages.success(
        request, f"Imported {counted(summary['ideas'], 'idea')} from {source}{skipped}{incomplete}."
    )
    return True


@login_required
@require_http_methods(["GET", "POST"])
def ideas_import_view(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=role_by_method(request))
    which = request.POST.get("form", "") if request.method == "POST" else ""
    upload_form = IdeaUploadForm(
        request.POST if which == "upload" else None, request.FILES if which == "upload" else None
    )
    paste_form = IdeaPasteForm(request.POST if which == "paste" else None, study=study)
    topic_form = TopicForm(request.POST if which == "topic" else None, study=study)
    condition_form = ConditionForm(request.POST if which == "condition" else None, study=study)
    problems: list[dict[str, str]] = []
    staged: IdeaUpload | None = None
    valid_count = 0
    status = 200

    if which == "topic" and topic_form.is_valid():
        topic = services.topic_add(
            study=study, name=topic_form.cleaned_data["name"], actor=request.user
        )
        messages.success(request, f"Topic '{topic.name}' added.")
        return redirect("studies:ideas_import", study.slug)
    if which == "condition" and condition_form.is_valid():
        try:
            condition = services.condition_add(
                study=study,
                key=condition_form.cleaned_data["key"],
                kind=condition_form.cleaned_data["kind"],
                actor=request.user,
            )
        except services.PreparationError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(
                request, f"Condition '{condition.key}' ({condition.get_kind_display()}) added."
            )
        return redirect("studies:ideas_import", study.slug)
    model_form = GeneratingModelForm(request.POST if which == "model" else None, study=study)
    if which == "model" and model_form.is_valid():
        try:
            condition = services.condition_set_generating_model(
                study=study,
                key=model_form.cleaned_data["condition"],
                model=model_form.cleaned_data["generating_model"],
                actor=request.user,
            )
        except services.PreparationError as exc:
            messages.error(request, str(exc))
        else:
            named = condition.generating_model or "no model"
            messages.success(request, f"Condition '{condition.key}': generated by {named}.")
        return redirect("studies:ideas_import", study.slug)
    if which in ("topic", "condition", "model"):
        status = 400  # the form says why, beside its field

    if which == "upload" and upload_form.is_valid():
        try:
            outcome = services.ideas_import_upload(
                study=study, cleaned=upload_form.cleaned_data, actor=request.user
            )
        except UploadGone as exc:
            messages.error(request, f"{exc}.")
            return redirect("studies:ideas_import", study.slug)
        staged = outcome.staged
        if _imported(request, outcome, staged.name if staged else ""):
            return redirect("studies:ideas_list", study.slug)
        problems, valid_count, status = _problems(outcome.batch), len(outcome.batch.records), 400
    if which == "paste" and paste_form.is_valid():
        outcome = services.ideas_import_pasted(
            study=study, cleaned=paste_form.cleaned_data, actor=request.user
        )
        if _imported(request, outcome, services.PASTED_SOURCE):
            return redirect("studies:ideas_list", study.slug)
        problems, status = _problems(outcome.batch), 400
    elif which in ("upload", "paste") and not problems:
        status = 400
    return render(
        request,
        "studies/ideas/import.html",
        {
            "study": study,
            "upload_form": upload_form,
            "paste_form": paste_form,
            "topic_form": topic_form,
            "condition_form": condition_form,
            "model_form": model_form,
            "problems": problems,
            "errors": sum(1 for p in problems if p["level"] == "error"),
            "staged": staged if problems else None,
            "valid_count": valid_count,
            "columns": IDEA_FILE_COLUMNS,
            "topics": study.topics.all(),
            "conditions": study.conditions.all(),
        },
        status=status,
    )


# --------------------------------------------------------------------------- topic matching


@login_required
@require_GET
def topic_matching(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    table = services.topic_matching_table(study=study)
    proposal: list[Idea] | None = None
    seed: int | None = None
    if "seed" in request.GET:
        try:
            seed = int(request.GET["seed"])
        except ValueError:
            seed = None
        if seed is None:
            messages.error(request, "The seed is a whole number.")
        else:
            proposal = services.topic_matching_propose(study=study, seed=seed)
    excluded = list(
        study.ideas.filter(exclusion__isnull=False).select_related("exclusion", "topic")
    )
    return render(
        request,
        "studies/ideas/topics.html",
        {
            "study": study,
            "table": table,
            "proposal": proposal,
            "proposal_ids": ",".join(str(i.pk) for i in proposal or []),
            "seed": seed,
            "new_seed": secrets.randbelow(10**6),
            "excluded": excluded,
            "labels": idea_labels(study),
            "reason_form": TopicReasonForm(initial={"reason": study.topic_mismatch_reason}),
            "opening": services.study_open_status(study),
        },
    )


@login_required
@require_POST
def topic_matching_apply(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    form = TopicApplyForm(request.POST)
    if form.is_valid():
        ideas = list(study.ideas.filter(pk__in=form.cleaned_data["idea_ids"]))
        n = services.ideas_exclude(
            study=study,
            ideas=ideas,
            reason=f"topic matching (seed {form.cleaned_data['seed']})",
            seed=form.cleaned_data["seed"],
            actor=request.user,
        )
        messages.success(
            request, f"{counted(n, 'idea')} left out to match topics across conditions."
        )
    else:
        messages.error(request, "That proposal could not be applied.")
    return redirect("studies:topic_matching", study.slug)


@login_required
@require_POST
def topic_reason(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    form = TopicReasonForm(request.POST)
    if form.is_valid():
        services.study_topic_reason_set(
            study=study, reason=form.cleaned_data["reason"], actor=request.user
        )
        messages.success(
            request, "Reason saved." if form.cleaned_data["reason"] else "Reason removed."
        )
    return redirect("studies:topic_matching", study.slug)


@login_required
@require_POST
def idea_include_view(request: HttpRequest, slug: str, idea_id: int) -> HttpResponse:
    study, idea = get_idea_for_member(request, slug, idea_id, role=EDITOR)
    services.idea_include(idea=idea, actor=request.user)
    messages.success(request, f"Idea {idea_label(idea)} is back in the study.")
    return redirect("studies:topic_matching", study.slug)


@login_required
@require_http_methods(["GET", "POST"])
def study_open_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Opening the study for review: its own step, apart from committing an assignment."""
    study = get_study_for_member(request, slug, role=role_by_method(request))
    if request.method == "POST":
        try:
            services.study_open_for_review(
                study=study,
                actor=request.user,
                acknowledgement=request.POST.get("acknowledgement", ""),
                link_for=request.build_absolute_uri,
            )
        except services.StudyNotReady as exc:
            messages.error(request, "The study cannot open for review: " + "; ".join(exc.reasons))
            return redirect("studies:study_open", study.slug)
        messages.success(request, "The study is open for review.")
        return redirect("studies:study_detail", study.slug)
    return render(
        request,
        "studies/ideas/open.html",
        {"study": study, "opening": services.study_open_status(study)},
    )


# --------------------------------------------------------------------------- jobs


# --------------------------------------------------------------------------- duplicates


@login_required
@require_GET
def duplicates(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    job = job_latest(study=study, kind=services.DUPLICATES_JOB)
    done = JobRun.objects.filter(study=study, kind=services.DUPLICATES_JOB, status="done").first()
    problem = services.duplicates_problem(study)
    if problem:  # what an earlier check found compared ideas that have no text
        done = None
        job = job if job is not None and job.is_active else None
    pairs = []
    if done is not None:
        pairs = list(
            DuplicatePair.objects.filter(job=done).select_related("idea_a__topic", "idea_b__topic")
        )
        conds = idea_conditions_by_id(study)
        for p in pairs:
            p.conds_a = conds.get(p.idea_a_id, [])  # type: ignore[attr-defined]
            p.conds_b = conds.get(p.idea_b_id, [])  # type: ignore[attr-defined]
    return render(
        request,
        "studies/ideas/duplicates.html",
        {
            "study": study,
            "job": job,
            "done": done,
            "problem": problem,
            "pairs": pairs,
            "within": sum(1 for p in pairs if p.scope == "within"),
            "labels": idea_labels(study),
            "form": DuplicatesForm(
                initial={"threshold": done.params.get("threshold", 0.8) if done else 0.8}
            ),
        },
    )


@login_required
@require_POST
def duplicates_run(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    form = DuplicatesForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The threshold is a cosine between 0.01 and 0.99.")
        return redirect("studies:duplicates", study.slug)
    try:
        job = services.duplicates_enqueue(
            study=study, threshold=form.cleaned_data["threshold"], actor=request.user
        )
    except services.PreparationError as exc:
        messages.error(request, str(exc))
        return redirect("studies:duplicates", study.slug)
    if is_htmx(request):
        return render(request, "studies/_job.html", {"study": study, "job": job})
    return redirect("studies:duplicates", study.slug)


# --------------------------------------------------------------------------- normalization


@login_required
@require_GET
def normalization(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    job = job_latest(study=study, kind=services.NORMALIZATION_JOB)
    return render(
        request,
        "studies/ideas/normalization.html",
        {
            "study": study,
            "job": job,
            "problem": services.normalization_problem(study),
            "choice_form": ConfigChoiceForm(
                initial={"config": study.normalization_config}, study=study
            ),
            "create_form": ConfigCreateForm(user=request.user, study=study),
            "overview": services.normalization_overview(study),
            "queue": services.signoff_queue(study),
            "n_passed": len(services.signoff_passed(study)),
            "n_waiting": services.normalization_waiting(study),
            "n_textless": len(ideas_without_text(study)),
            "prompt_version": NORMALIZATION_PROMPT_VERSION,
            "prompt_hash": prompt_sha256(NORMALIZATION_PROMPT),
            "prompt": NORMALIZATION_PROMPT,
        },
    )


@login_required
@require_POST
def normalization_config(request: HttpRequest, slug: str) -> HttpResponse:
    # Editors choose among the team's judges; adding one to the team is an owner's.
    creating = request.POST.get("form") == "create"
    study = get_study_for_member(request, slug, role=OWNER if creating else EDITOR)
    if creating:
        create = ConfigCreateForm(request.POST, user=request.user, study=study)
        if not create.is_valid():
            messages.error(
                request,
                "The judge config was not created: "
                + "; ".join(
                    f"{k}: {' '.join(str(e) for e in v)}" for k, v in create.errors.items()
                ),
            )
            return redirect("studies:normalization", study.slug)
        config: JudgeConfig | None = judge_config_create(
            study=study, actor=request.user, **create.cleaned_data
        )
    else:
        choice = ConfigChoiceForm(request.POST, study=study)
        if not choice.is_valid():
            messages.error(request, "Choose one of the listed judge configs.")
            return redirect("studies:normalization", study.slug)
        config = choice.cleaned_data["config"]
    services.normalization_config_choose(study=study, config=config, actor=request.user)
    messages.success(request, f"Normalization uses {config.name if config else 'no judge'}.")
    return redirect("studies:normalization", study.slug)


@login_required
@require_POST
def normalization_start(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    try:
        job = services.normalization_enqueue(study=study, actor=request.user)
    except services.PreparationError as exc:
        messages.error(request, str(exc))
        return redirect("studies:normalization", study.slug)
    if is_htmx(request):
        return render(request, "studies/_job.html", {"study": study, "job": job})
    return redirect("studies:normalization", study.slug)


# --------------------------------------------------------------------------- sign-off


def _sides(a: str, b: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    ops = word_diff(a, b)
    return (
        [(op, t) for op, t in ops if op in ("equal", "delete")],
        [(op, t) for op, t in ops if op in ("equal", "insert")],
    )


@login_required
@require_GET
def idea_signoff(request: HttpRequest, slug: str, idea_id: int) -> HttpResponse:
    study, idea = get_idea_for_member(request, slug, idea_id, role=VIEWER)
    result = services.latest_result(idea)
    shown = idea.normalized_text or (result.output_text if result else "")
    left, right = _sides(idea.raw_text, shown) if shown else ([], [])
    queue = services.signoff_queue(study)
    later = [i for i in queue if i != idea.pk]
    return render(
        request,
        "studies/ideas/signoff.html",
        {
            "study": study,
            "idea": idea,
            "result": result,
            "failed": result.failed if result else [],
            "passed": [c for c in (result.checks if result else []) if c.get("passed")],
            "left": left,
            "right": right,
            "form": DecisionForm(initial={"text": shown}),
            "locked": idea.is_text_locked(),
            "revisions": list(idea.revisions.order_by("-number")),
            "next_id": later[0] if later else None,
            "waiting": len(queue),
            "label": idea_label(idea),
        },
    )


@login_required
@require_POST
def idea_decide(request: HttpRequest, slug: str, idea_id: int) -> HttpResponse:
    study, idea = get_idea_for_member(request, slug, idea_id, role=EDITOR)
    form = DecisionForm(request.POST)
    here = redirect("studies:idea_signoff", study.slug, idea.pk)
    if not form.is_valid():
        messages.error(request, "; ".join(str(e) for errs in form.errors.values() for e in errs))
        return here
    data = form.cleaned_data
    try:
        if data["action"] == "approve":
            services.normalization_approve(idea=idea, actor=request.user)
            messages.success(request, f"Idea {idea_label(idea)}: rewrite approved.")
        elif data["action"] == "edit":
            services.normalization_edit(idea=idea, text=data["text"], actor=request.user)
            messages.success(request, f"Idea {idea_label(idea)}: your edit is approved.")
        elif data["action"] == "reject":
            services.normalization_reject(idea=idea, actor=request.user, reason=data["reason"])
            messages.success(request, f"Idea {idea_label(idea)}: rewrite rejected.")
            return here
        else:
            services.normalization_rerun(idea=idea, actor=request.user)
            messages.success(request, f"Idea {idea_label(idea)}: a new rewrite is on its way.")
            return redirect("studies:normalization", study.slug)
    except services.PreparationError as exc:
        messages.error(request, str(exc))
        return here
    queue = services.signoff_queue(study)
    if queue:
        return redirect("studies:idea_signoff", study.slug, queue[0])
    return redirect("studies:normalization", study.slug)


@login_required
@require_http_methods(["GET", "POST"])
def signoff_approve_passed(request: HttpRequest, slug: str) -> HttpResponse:
    """Approve every rewrite that passed every check, after a confirmation page that
    lists them; the POST approves exactly the list that page showed."""
    study = get_study_for_member(request, slug, role=role_by_method(request))
    if request.method == "POST":
        if request.POST.get("confirm") != "yes":
            messages.error(request, "Tick the box to confirm the approval.")
            return redirect("studies:signoff_approve_passed", study.slug)
        try:
            approved = services.normalization_approve_passed(
                study=study, actor=request.user, token=request.POST.get("token", "")
            )
        except services.PreparationError as exc:
            messages.error(request, str(exc))
            return redirect("studies:signoff_approve_passed", study.slug)
        messages.success(
            request, f"Approved {counted(len(approved), 'rewrite')} that passed every check."
        )
        return redirect("studies:normalization", study.slug)
    ideas = services.signoff_passed(study)
    rows = [
        {
            "label": next((m.external_id for m in i.memberships.all()), "") or f"idea {n}",
            "idea": i,
        }
        for n, i in enumerate(ideas, start=1)
    ]
    return render(
        request,
        "studies/ideas/approve_passed.html",
        {
            "study": study,
            "rows": rows,
            "token": services.signoff_token(ideas),
            "waiting": len(services.signoff_queue(study)),
        },
    )


# --------------------------------------------------------------------------- leakage export


def _leakage_sides(job: JobRun | None) -> list[dict[str, Any]]:
    result = (job.params.get("result") or {}) if job is not None else {}
    sides = []
    for key, label in services.LEAKAGE_SIDES:
        side = {"key": key, **(result.get(key) or {"label": label, "error": "not computed"})}
        side["reading"], side["verdict"] = services.leakage_side_reading(side)
        sides.append(side)
    return sides


@login_required
@require_http_methods(["GET", "POST"])
def leakage(request: HttpRequest, slug: str) -> HttpResponse:
    from ..analysis.leakage_plots import leakage_svg

    study = get_study_for_member(request, slug, role=role_by_method(request))
    if request.method == "POST" and request.POST.get("form") == "classifier":
        try:
            started = services.leakage_check_enqueue(
                study=study, actor=request.user, llm=request.POST.get("llm") == "on"
            )
        except services.PreparationError as exc:
            messages.error(request, str(exc))
        else:
            if is_htmx(request):
                return render(request, "studies/_job.html", {"study": study, "job": started})
        return redirect("studies:leakage", study.slug)
    if request.method == "POST":
        try:
            export = services.leakage_export_create(study=study, actor=request.user)
        except services.PreparationError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(
                request, f"Export {export.pk} made from {counted(len(export.key), 'text')}."
            )
        return redirect("studies:leakage", study.slug)
    job = job_latest(study=study, kind=services.LEAKAGE_JOB)
    latest = services.leakage_check_latest(study)
    sides = _leakage_sides(latest)
    computed = [(s["label"], s) for s in sides if s.get("auc") is not None]
    return render(
        request,
        "studies/ideas/leakage.html",
        {
            "study": study,
            "exports": LeakageExport.objects.filter(study=study),
            "job": job,
            "latest": latest,
            "sides": sides,
            "notes": (latest.params.get("result") or {}).get("notes", []) if latest else [],
            "fold_notes": (latest.params.get("result") or {}).get("fold_notes", [])
            if latest
            else [],
            "plot": leakage_svg(computed) if computed else "",
            "plan": services.leakage_check_plan(study),
            "llm_problem": services.normalization_problem(study),
        },
    )


@login_required
@require_GET
def leakage_download(request: HttpRequest, slug: str, export_id: int, kind: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    export = get_object_or_404(LeakageExport, pk=export_id, study=study)
    if kind not in ("texts", "key"):
        raise Http404("no such file")
    response = HttpResponse(services.leakage_csv(export, kind), content_type="text/csv")
    name = f"{study.slug}-leakage-{export.pk}-{kind}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


# --------------------------------------------------------------------------- gold items


class GoldForm(forms.Form):
    idea = forms.IntegerField(widget=forms.HiddenInput)
    ranges = forms.CharField(
        required=False,
        label="Expected ranges (JSON)",
        help_text='For example {"overall": [1, 3]}; empty: not a gold item.',
        max_length=2000,
    )


@login_required
@require_http_methods(["GET", "POST"])
def ideas_gold(request: HttpRequest, slug: str) -> HttpResponse:
    """Gold items: the ideas whose expected score ranges test reviewers (docs/quality.md)."""
    study = get_study_for_member(request, slug, role=role_by_method(request))
    status = 200
    if request.method == "POST":
        form = GoldForm(request.POST)
        idea = None
        if form.is_valid():
            idea = Idea.objects.filter(study=study, pk=form.cleaned_data["idea"]).first()
        if not form.is_valid() and "ranges" in form.errors:
            messages.error(request, "Expected ranges: " + " ".join(map(str, form.errors["ranges"])))
            status = 400
        elif idea is None:
            messages.error(request, "Choose an idea of this study.")
            status = 400
        else:
            text = form.cleaned_data["ranges"].strip()
            try:
                ranges = jsonsafe.loads(text) if text else None
                idea_gold_set(idea=idea, ranges=ranges, actor=request.user)
            except (ValueError, GoldRefused) as exc:
                messages.error(request, f"{idea_label(idea)}: {exc}")
                status = 400
            else:
                messages.success(
                    request,
                    f"{idea_label(idea)} is {'a gold item' if ranges is not None else 'not gold'}.",
                )
                return redirect("studies:ideas_gold", study.slug)
    ideas = list(study.ideas.select_related("topic").order_by("pk"))
    labels = idea_labels(study)  # one query for the page, not two per idea
    reviewed = set(
        Idea.objects.filter(study=study, reviews__isnull=False).values_list("pk", flat=True)
    )
    rows = [
        {
            "idea": i,
            "label": labels.get(i.pk) or f"idea-{i.pk}",
            "ranges": json.dumps(i.gold_ranges) if i.gold_ranges is not None else "",
            "locked": i.pk in reviewed,
        }
        for i in ideas
    ]
    context = {
        "study": study,
        "rows": rows,
        "gold": sum(1 for i in ideas if i.is_gold),
        "metrics": study.form_definition().scales(),
    }
    return render(request, "studies/ideas/gold.html", context, status=status)
