"""The owner's LLM-judge pages: judges, runs with live progress, results, the corpus.

Every view starts with `get_study_for_member` and the role it needs (404 for what is not
yours); a run or a judge is looked up inside the study, so an id of another study's is a
404 too. The study's judges belong to its team: viewers see them, editors run them,
owners add and remove them. Reviewers never own a study, so none of this is reachable
for them.
"""

from __future__ import annotations

from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.forms import ChoiceField
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRefresh

from llm.forms import EndpointKeyForm
from llm.keystore import endpoint_key_save
from llm.models import EndpointKey, JudgeConfig
from llm.spend import study_spend
from studies.http import is_htmx
from studies.models import Study
from studies.views.study import EDITOR, OWNER, VIEWER, get_study_for_member, role_by_method

from .config_panel import config_reliability, config_reliability_csv
from .corpus import CorpusImportError, reference_corpora_of, reference_corpus_import
from .forms import CorpusUploadForm, JudgeConfigForm, JudgeRunForm, RunBudgetForm
from .methods.registry import method_choices, method_spec
from .models import JudgeRun
from .reliability_panel import reliability_csv, run_reliability
from .run_calls import run_calls
from .run_report import judge_run_report
from .services import (
    DEFAULT_PARAMS,
    JudgeConfigRefused,
    JudgeRunRefused,
    RunBudget,
    judge_config_create,
    judge_config_delete,
    judge_configs_of,
    judge_run_cancel,
    judge_run_create,
    judge_run_mark_if_lost,
    judge_run_resume,
    judge_run_textless_problem,
)
from .tasks import judge_run_enqueue


def get_run_for_member(
    request: HttpRequest, slug: str, run_id: int, *, role: str
) -> tuple[Study, JudgeRun]:
    study = get_study_for_member(request, slug, role=role)
    run = get_object_or_404(JudgeRun.objects.select_related("config"), pk=run_id, study=study)
    return study, run


def _configs(study: Study) -> list[dict[str, Any]]:
    return [
        {"config": c, "own": c.study_id == study.pk}
        for c in judge_configs_of(study).select_related("endpoint_key")
    ]


@login_required
@require_GET
def judging_home(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    runs = list(
        JudgeRun.objects.filter(study=study)
        .select_related("config")
        .annotate(panel_size=Count("panel_members"))
    )
    for run in runs:
        if run.is_active:
            judge_run_mark_if_lost(run=run)  # a run whose worker died shows as lost
    return render(
        request,
        "judging/home.html",
        {
            "study": study,
            "runs": runs,
            "configs": _configs(study),
            "corpora": reference_corpora_of(study),
            "spend": study_spend(study_id=study.pk),
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def judge_config_new(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=OWNER)
    form = JudgeConfigForm(request.POST or None, user=request.user, study=study)
    if request.method == "POST" and form.is_valid():
        try:
            config = judge_config_create(study=study, actor=request.user, **form.cleaned_data)
        except JudgeConfigRefused as exc:
            form.add_error("name", str(exc))
        else:
            messages.success(request, f"Judge {config.name!r} saved for this study's team.")
            return redirect("judging:home", study.slug)
    status = 400 if request.method == "POST" else 200  # the form says why, by its field
    return _config_page(request, study, form, EndpointKeyForm(user=request.user), status)


def _config_page(
    request: HttpRequest, study: Study, form: Any, key_form: Any, status: int = 200
) -> HttpResponse:
    return render(
        request,
        "judging/config_form.html",
        {
            "study": study,
            "form": form,
            "key_form": key_form,
            "keys": EndpointKey.objects.filter(owner_id=request.user.pk),
            "configs": _configs(study),
        },
        status=status,
    )


def get_config_for_member(
    request: HttpRequest, slug: str, config_id: int, *, role: str
) -> tuple[Study, JudgeConfig]:
    """A judge the study's team may use (its own or the administrator's); any other id,
    another team's judge included, is a 404 like one nobody uses."""
    study = get_study_for_member(request, slug, role=role)
    return study, get_object_or_404(judge_configs_of(study), pk=config_id)


@login_required
@require_GET
def judge_config_detail(request: HttpRequest, slug: str, config_id: int) -> HttpResponse:
    """A judge's page: its settings and its reliability figures pooled over its finished
    runs in this study (never another study's, for a judge teams share)."""
    study, config = get_config_for_member(request, slug, config_id, role=VIEWER)
    return render(
        request,
        "judging/config_detail.html",
        {"study": study, "config": config, "panel": config_reliability(study, config)},
    )


@login_required
@require_GET
def judge_config_reliability_csv(request: HttpRequest, slug: str, config_id: int) -> HttpResponse:
    """The judge's pooled reliability figures in this study as CSV."""
    study, config = get_config_for_member(request, slug, config_id, role=VIEWER)
    response = HttpResponse(
        config_reliability_csv(config_reliability(study, config)), content_type="text/csv"
    )
    response["Content-Disposition"] = (
        f'attachment; filename="{study.slug}-judge{config.pk}-reliability.csv"'
    )
    return response


@login_required
@require_POST
def endpoint_key_new(request: HttpRequest, slug: str) -> HttpResponse:
    """Save one of the researcher's own keys, encrypted; the page never shows it again."""
    study = get_study_for_member(request, slug, role=OWNER)
    key_form = EndpointKeyForm(request.POST, user=request.user)
    if not key_form.is_valid():
        form = JudgeConfigForm(user=request.user, study=study)
        return _config_page(request, study, form, key_form, status=400)
    endpoint_key_save(
        owner=request.user,
        label=key_form.cleaned_data["label"],
        secret=key_form.cleaned_data["secret"],
    )
    messages.success(request, f"Key {key_form.cleaned_data['label']!r} saved.")
    return redirect("judging:config_create", study.slug)


@login_required
@require_POST
def endpoint_key_remove(request: HttpRequest, slug: str, key_id: int) -> HttpResponse:
    study = get_study_for_member(request, slug, role=OWNER)
    # Only one's own keys: another's answers as a missing one does, saying nothing of it.
    key = EndpointKey.objects.filter(pk=key_id, owner_id=request.user.pk).first()
    if key is None:
        messages.error(request, "You have no such key (removed already?).")
    else:
        label = key.label
        key.delete()
        messages.success(request, f"Key {label!r} removed; judges that used it now send none.")
    return redirect("judging:config_create", study.slug)


@login_required
@require_POST
def judge_config_remove(request: HttpRequest, slug: str, config_id: int) -> HttpResponse:
    """Remove one of the study's own judges (owners). A judge of another study, or the
    administrator's, is a 404 like an id nobody uses; one that runs used stays."""
    study = get_study_for_member(request, slug, role=OWNER)
    config = get_object_or_404(JudgeConfig, pk=config_id, study=study)
    try:
        judge_config_delete(config=config, actor=request.user)
    except JudgeConfigRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Judge {config.name!r} removed.")
    return redirect("judging:home", study.slug)


@login_required
@require_http_methods(["GET", "POST"])
def judge_run_new(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=role_by_method(request))
    configs = judge_configs_of(study).filter(is_baseline=False)
    initial = {"method": request.GET.get("method", JudgeRun.Method.PAIRWISE)}
    form = JudgeRunForm(request.POST or None, configs=configs, initial=initial)
    textless = judge_run_textless_problem(study)
    if textless:  # only methods that judge no idea of the study are left
        cast(ChoiceField, form.fields["method"]).choices = [
            (key, label) for key, label in method_choices() if not method_spec(key).judges_ideas
        ]
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = judge_run_create(
                study=study,
                method=data["method"],
                config=data["config"],
                params=data["params"],
                budget_calls=data["budget_calls"],
                budget_cost=data["budget_cost"],
                actor=request.user,
                panel=data["panel"],
            )
        except JudgeRunRefused as exc:
            form.add_error(None, str(exc))
        else:
            judge_run_enqueue(run=run)
            _say_queued(request, run, f"Run {run.pk} queued: {run.total_calls} units.")
            return redirect("judging:run_detail", study.slug, run.pk)
    return render(
        request,
        "judging/run_form.html",
        {
            "study": study,
            "form": form,
            "defaults": [(label, DEFAULT_PARAMS[value]) for value, label in method_choices()],
            "has_configs": configs.exists(),
            "textless": textless,
            "offer": not textless or reference_corpora_of(study).exists(),
        },
        status=400 if request.method == "POST" else 200,
    )


@login_required
@require_GET
def judge_run_detail(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    study, run = get_run_for_member(request, slug, run_id, role=VIEWER)
    # A run whose worker died is marked lost here (and offered Resume), so the page does
    # not poll a run no worker will finish.
    judge_run_mark_if_lost(run=run)
    context: dict[str, Any] = {
        "study": study,
        "run": run,
        # A running run (its worker lives: it was not marked lost above) is not resumed.
        "resumable": run.can_resume and run.status != JudgeRun.Status.RUNNING,
        "budget_form": RunBudgetForm(
            initial={"budget_calls": run.budget_calls, "budget_cost": run.budget_cost}
        ),
    }
    if is_htmx(request):
        if request.GET.get("poll") and not run.is_active:
            # The run ended since the page was drawn: reload it whole, results included.
            return HttpResponseClientRefresh()
        return render(request, "judging/run_detail.html#progress", context)
    # The set-up names a panel's further judges while the run runs too.
    context["panel_members"] = [m.config for m in run.panel_members.select_related("config")]
    if not run.is_active:
        context["report"] = judge_run_report(run=run)
        context["reliability"] = run_reliability(run)
        context["calls"] = run_calls(run) if not run.method_is_baseline else None
    return render(request, "judging/run_detail.html", context)


@login_required
@require_GET
def judge_run_reliability_csv(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    """The run's reliability panel as CSV (404 while the run has none)."""
    study, run = get_run_for_member(request, slug, run_id, role=VIEWER)
    panel = run_reliability(run)
    if panel is None:
        raise Http404("This run has no reliability panel (it is not a finished scoring run).")
    response = HttpResponse(reliability_csv(panel), content_type="text/csv")
    response["Content-Disposition"] = (
        f'attachment; filename="{study.slug}-run{run.pk}-reliability.csv"'
    )
    return response


@login_required
@require_POST
def judge_run_cancel_view(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    study, run = get_run_for_member(request, slug, run_id, role=EDITOR)
    if run.is_active:
        was = run.status
        run = judge_run_cancel(run=run)
        if run.status != JudgeRun.Status.CANCELLED:
            messages.error(request, f"Run {run.pk} is {run.get_status_display().lower()} now.")
        else:
            messages.success(
                request,
                "Cancelled: the calls in flight finish and are kept."
                if was == JudgeRun.Status.RUNNING
                else "Cancelled.",
            )
    else:
        messages.error(request, f"Run {run.pk} is {run.get_status_display().lower()} already.")
    return redirect("judging:run_detail", study.slug, run.pk)


@login_required
@require_POST
def judge_run_resume_view(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    study, run = get_run_for_member(request, slug, run_id, role=EDITOR)
    form = RunBudgetForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{form.fields[field].label}: {' '.join(map(str, errors))}")
        return redirect("judging:run_detail", study.slug, run.pk)
    # The page's Resume carries the budget fields; a bare POST keeps the run's budget.
    budget = (
        RunBudget(
            budget_calls=form.cleaned_data["budget_calls"],
            budget_cost=form.cleaned_data["budget_cost"],
        )
        if "budget_calls" in request.POST or "budget_cost" in request.POST
        else None
    )
    try:
        judge_run_enqueue(run=judge_run_resume(run=run, budget=budget, actor=request.user))
    except JudgeRunRefused as exc:
        messages.error(request, str(exc))
    else:
        _say_queued(request, run, "Resumed: finished units are kept and not asked again.")
    return redirect("judging:run_detail", study.slug, run.pk)


def _say_queued(request: HttpRequest, run: JudgeRun, success: str) -> None:
    """After a run was sent (outside a transaction the send happens at once): the success
    message, or the broker's refusal, which failed the run with a message and Resume."""
    if run.status == JudgeRun.Status.FAILED:
        messages.error(request, f"Run {run.pk} {run.error}")
    else:
        messages.success(request, success)


@login_required
@require_http_methods(["GET", "POST"])
def reference_corpora(request: HttpRequest, slug: str) -> HttpResponse:
    """The corpora the study's runs use (its owner's and the shared ones), which its
    viewers see; its owners import more, into the study owner's corpora."""
    study = get_study_for_member(request, slug, role=OWNER if request.method == "POST" else VIEWER)
    form = CorpusUploadForm(request.POST or None, request.FILES or None)
    errors: list[str] = []
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            corpus = reference_corpus_import(
                data=upload.read(),
                name=form.cleaned_data["name"],
                filename=upload.name,
                description=form.cleaned_data["description"],
                actor=request.user,
                owner=study.owner,
                study=study,
            )
        except CorpusImportError as exc:
            errors = exc.errors
        else:
            messages.success(
                request, f"Corpus {corpus.name!r} imported: {corpus.papers.count()} papers."
            )
            return redirect("judging:corpora", study.slug)
    corpora = []
    for corpus in reference_corpora_of(study):
        debias = corpus.debias or {}
        venues = sorted({v for d in debias.values() for v in d.get("venue_means", {})})
        corpora.append(
            {
                "corpus": corpus,
                "papers": corpus.papers.count(),
                "dimensions": list(debias),
                "venues": [
                    {
                        "venue": v,
                        "count": next(iter(debias.values()))["counts"].get(v, 0),
                        "means": [debias[d]["venue_means"].get(v) for d in debias],
                    }
                    for v in venues
                ],
                "overall": [debias[d]["overall_mean"] for d in debias],
            }
        )
    return render(
        request,
        "judging/corpora.html",
        {"study": study, "form": form, "errors": errors, "corpora": corpora},
        status=400 if errors or (request.method == "POST" and form.errors) else 200,
    )
