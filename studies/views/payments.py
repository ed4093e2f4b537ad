"""Owner pages for paying reviewers and idea authors: accept or reject each submitted
review, the study's payment run, and its CSV. Viewers read; editors decide."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from ..analysis.rounding import counted
from ..forms import PaymentSeedForm, ReviewDecisionForm
from ..models import Review, Study
from ..selectors import idea_labels
from ..services.errors import ImportedStudyRefused
from ..services.payments import (
    PaymentError,
    payment_seed_default,
    payments_export_csv,
    review_decide,
    reviews_accept_undecided,
    study_payment_run,
)
from .study import EDITOR, VIEWER, get_study_for_member, refused_as_imported


def _seed(request: HttpRequest, study: Study) -> int:
    form = PaymentSeedForm(request.GET or None)
    if form.is_valid() and form.cleaned_data["seed"] is not None:
        return int(form.cleaned_data["seed"])
    return payment_seed_default(study)


@login_required
@require_GET
def study_payments(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    seed = _seed(request, study)
    return render(
        request,
        "studies/owner/payments.html",
        {
            "study": study,
            "run": study_payment_run(study=study, seed=seed),
            "seed_form": PaymentSeedForm(initial={"seed": seed}),
            "seed": seed,
        },
    )


@login_required
@require_GET
def payments_export(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    try:
        # Only owners get the reviewers' names, emails and payment details beside the
        # pseudonyms; editors and viewers the pseudonymous list.
        run, text = payments_export_csv(
            study=study,
            seed=_seed(request, study),
            contacts=bool(study.may.own),  # type: ignore[attr-defined]
            actor=request.user,
        )
    except ImportedStudyRefused as exc:
        messages.error(request, str(exc))
        return redirect("studies:study_payments", study.slug)
    response = HttpResponse(text, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="{study.slug}-payments-seed{run.seed}.csv"'
    )
    return response


@login_required
@require_GET
def payment_reviews(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=VIEWER)
    labels = idea_labels(study)
    reviews = (
        Review.objects.filter(study=study, status=Review.Status.SUBMITTED)
        .select_related("reviewer", "acceptance")
        .prefetch_related("scores")
        .order_by("reviewer__pseudonym", "submitted_at", "pk")
    )
    rows = [
        {
            "review": r,
            "idea": labels.get(r.idea_id, ""),
            "overall": next((s.score for s in r.scores.all() if s.metric == "overall"), None),
            "acceptance": getattr(r, "acceptance", None),
        }
        for r in reviews
    ]
    return render(
        request,
        "studies/owner/payment_reviews.html",
        {
            "study": study,
            "rows": rows,
            "undecided": sum(1 for row in rows if row["acceptance"] is None),
        },
    )


@login_required
@require_POST
def payment_review_decide(request: HttpRequest, slug: str, review_id: int) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    review = get_object_or_404(Review, pk=review_id, study=study)
    if refused_as_imported(request, study, "pays no reviewers"):
        return redirect("studies:payment_reviews", study.slug)
    form = ReviewDecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose accept or reject.")
    else:
        try:
            review_decide(
                review=review,
                decision=form.cleaned_data["decision"],
                reason=form.cleaned_data["reason"],
                actor=request.user,
            )
            messages.success(request, f"Review {form.cleaned_data['decision']}.")
        except PaymentError as exc:
            messages.error(request, str(exc))
    return redirect("studies:payment_reviews", study.slug)


@login_required
@require_POST
def payment_reviews_accept_undecided(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=EDITOR)
    if refused_as_imported(request, study, "pays no reviewers"):
        return redirect("studies:payment_reviews", study.slug)
    if request.POST.get("confirm") != "yes":
        messages.error(request, "Tick the box to confirm.")
    else:
        n = reviews_accept_undecided(study=study, actor=request.user)
        messages.success(request, f"Accepted {counted(n, 'review')} that had no decision.")
    return redirect("studies:payment_reviews", study.slug)
