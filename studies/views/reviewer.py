"""Reviewer-facing views: sign-up from an invitation, consent, profile, the blind review
page and pair ratings.

Every view that shows study material starts with a getter that 404s for anything not
the requesting reviewer's own. Templates here receive idea text and topic only: never a
condition, author, institution, external id, import position or idea primary key.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ideareview.throttle import (
    client_address,
    login_attempt,
    login_succeeded,
    token_blocked,
    token_failed,
)

from ..dashboard_sql import reviewer_dashboard_rows
from ..draft_sql import assignment_for_draft
from ..http import is_htmx
from ..models import Assignment, PairTask, Review, Reviewer
from ..page_sql import OPEN_TO_REVIEWERS, assignment_for_page
from ..protocol.forms import AttentionCheck, Scale
from ..reviewer_forms import (
    ConsentForm,
    PairForm,
    PaymentHandleForm,
    ProfileForm,
    ReviewAnswersForm,
    SignUpForm,
    draft_from_post,
    study_review_definition,
)
from ..services.assignment import assignment_touch
from ..services.invitations import (
    InvitationError,
    RecruitmentError,
    TextRejected,
    invitation_accept,
    invitation_check,
    reviewer_consent,
    reviewer_payment_handle_set,
    reviewer_profile_save,
    reviewer_sign_up,
)
from ..services.platform import (
    platform_card,
    platform_link_for,
    platform_participant_of,
    platform_profile_save,
)
from ..services.reviews import (
    StaleReview,
    idea_sections,
    pair_task_submit,
    review_current_values,
    review_decided,
    review_draft_save,
    review_locked_reason,
    review_submit,
)
from ..services.study import is_researcher

reviewer_login_required = login_required(login_url="studies:reviewer_login")


def _too_many(request: HttpRequest, what: str) -> HttpResponse:
    return render(request, "studies/reviewer/rate_limited.html", {"what": what}, status=429)


# --------------------------------------------------------------------------- getters


def get_reviewer_for_user(request: HttpRequest, reviewer_id: int) -> Reviewer:
    return get_object_or_404(
        Reviewer.objects.select_related("study__review_form"),
        pk=reviewer_id,
        user=request.user,
        dropped_at__isnull=True,
    )


def get_assignment_for_reviewer(
    request: HttpRequest, assignment_id: int, *, with_review: bool = False
) -> Assignment:
    """404 unless the assignment is the requesting, approved reviewer's, not withdrawn, in
    a study that was opened for review; with its study and review form, idea and topic,
    and reviewer loaded (and its review, `with_review`), in one hand-written query
    (studies/page_sql.py)."""
    assignment = assignment_for_page(
        user_id=request.user.pk, assignment_id=assignment_id, with_review=with_review
    )
    if assignment is None:
        raise Http404("No such assignment.")
    return assignment


def get_assignment_for_draft(request: HttpRequest, assignment_id: int) -> Assignment:
    """get_assignment_for_reviewer's check, in one hand-written query that reads only
    what an autosave needs (studies/draft_sql.py)."""
    assignment = assignment_for_draft(user_id=request.user.pk, assignment_id=assignment_id)
    if assignment is None:
        raise Http404("No such assignment.")
    return assignment


def get_pair_task_for_reviewer(request: HttpRequest, task_id: int) -> PairTask:
    return get_object_or_404(
        PairTask.objects.select_related("study__review_form", "idea_a", "idea_b", "reviewer")
        .exclude(status=PairTask.Status.WITHDRAWN)
        .prefetch_related("judgments"),
        pk=task_id,
        reviewer__user=request.user,
        reviewer__screening=Reviewer.Screening.APPROVED,
        reviewer__dropped_at__isnull=True,
        study__status__in=OPEN_TO_REVIEWERS,
    )


# --------------------------------------------------------------------------- log in, invitation


def landing_page(user: Any) -> str:
    """The URL name of a logged-in user's first page: researchers, and anyone on a
    study's team, land on their studies (a reviewer too keeps the menu's link to their
    reviews); everyone else on their reviews."""
    team = is_researcher(user) or user.study_memberships.exists()
    return "studies:study_list" if team else "studies:reviewer_home"


@login_required
@require_GET
def landing(request: HttpRequest) -> HttpResponse:
    """The site's root, and where a log-in without a `next` goes (LOGIN_REDIRECT_URL)."""
    return redirect(landing_page(request.user))


@require_http_methods(["GET", "POST"])
def reviewer_login(request: HttpRequest) -> HttpResponse:
    """Log in with a per-address and per-username attempt limit."""
    next_url = request.POST.get("next") or request.GET.get("next") or ""
    if not url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        next_url = ""
    form = AuthenticationForm(request, data=request.POST or None)
    if request.method == "POST":
        address = client_address(request)
        username = request.POST.get("username") or ""
        # Counted before the password is checked: parallel guesses cannot slip past.
        if login_attempt(address=address, username=username):
            return _too_many(request, "log-in attempts")
        if form.is_valid():
            user = form.get_user()
            login_succeeded(address=address, username=username)
            login(request, user)
            return redirect(next_url or landing_page(user))
    return render(
        request,
        "studies/reviewer/login.html",
        {"form": form, "next": next_url},
        status=400 if request.method == "POST" else 200,
    )


@require_http_methods(["GET", "POST"])
def admin_login(request: HttpRequest) -> HttpResponse:
    """The admin's own login page under the same limits as the reviewers' one."""
    from django.contrib import admin

    if request.method != "POST":
        return admin.site.login(request)
    address = client_address(request)
    username = request.POST.get("username") or ""
    if login_attempt(address=address, username=username):
        return _too_many(request, "log-in attempts")
    response = admin.site.login(request)
    # The admin answers a failed attempt with its form again, a success with a redirect.
    if response.status_code != 200:
        login_succeeded(address=address, username=username)
    return response


def _next_step_url(reviewer: Reviewer) -> str:
    step = reviewer.next_step()
    if step == "consent":
        return reverse("studies:reviewer_consent", args=[reviewer.pk])
    if step == "profile":
        return reverse("studies:reviewer_profile", args=[reviewer.pk])
    return reverse("studies:reviewer_home")


@require_http_methods(["GET", "POST"])
def invitation_open(request: HttpRequest, token: str) -> HttpResponse:
    address = client_address(request)
    if token_blocked(address=address):
        return _too_many(request, "invitation links")
    try:
        invitation = invitation_check(token)
    except InvitationError as exc:
        # Failed look-ups are counted so links cannot be probed in bulk.
        token_failed(address=address)
        return render(
            request,
            "studies/reviewer/invitation_error.html",
            {"message": str(exc), "kind": exc.kind},
            status=400 if exc.kind == "invalid" else 410,
        )
    study = invitation.study
    form = SignUpForm(initial={"email": invitation.email})
    error = ""
    if request.method == "POST":
        try:
            if request.user.is_authenticated:
                reviewer = invitation_accept(token=token, user=request.user)
            else:
                form = SignUpForm(request.POST)
                if not form.is_valid():
                    raise RecruitmentError("")
                user, reviewer = reviewer_sign_up(
                    token=token,
                    email=form.cleaned_data["email"],
                    password=form.cleaned_data["password1"],
                )
                login(request, user, backend=settings.AUTHENTICATION_BACKENDS[0])
        except InvitationError as exc:
            return render(
                request,
                "studies/reviewer/invitation_error.html",
                {"message": str(exc), "kind": exc.kind},
                status=403 if exc.kind in ("other_address", "refused") else 410,
            )
        except RecruitmentError as exc:
            error = str(exc)
        else:
            return redirect(_next_step_url(reviewer))
    return render(
        request,
        "studies/reviewer/invitation.html",
        {"study": study, "invitation": invitation, "form": form, "error": error, "token": token},
        status=400 if request.method == "POST" else 200,
    )


# --------------------------------------------------------------------------- dashboard, profile


@functools.lru_cache(maxsize=1024)
def _idea_title(text: str) -> str:
    """The Title section of an idea's text, as the dashboard lists it. Kept per text (the
    key is the text itself, so an edited idea is parsed anew): the dashboard lists every
    assignment, and parsing each idea on every visit was most of its own work."""
    title = next((body for head, body in idea_sections(text) if head == "Title"), "")
    return title[:200]


@reviewer_login_required
@require_GET
def reviewer_home(request: HttpRequest) -> HttpResponse:
    cards = []
    # profiles newest first, each with its study, platform row and live work (hand-written
    # reads: studies/dashboard_sql.py)
    for row in reviewer_dashboard_rows(user_id=request.user.pk):
        rev = row.reviewer
        # Before the study opens a committed assignment stays with the owner.
        approved = rev.is_approved and rev.study.is_open_to_reviewers()
        items = []
        if approved:
            for n, a in enumerate(row.assignments, start=1):
                items.append(
                    {
                        "number": n,
                        "title": _idea_title(a.idea.reviewable_text()),
                        "topic": a.idea.topic.name,
                        "status": a.get_status_display(),
                        "decided": a.pk in row.decided,
                        "url": reverse("studies:review_page", args=[a.pk]),
                    }
                )
        pairs = [
            {
                "number": n,
                "status": t.get_status_display(),
                "url": reverse("studies:pair_page", args=[t.pk]),
            }
            for n, t in enumerate(row.pair_tasks if approved else [], start=1)
        ]
        cards.append(
            {
                "reviewer": rev,
                "study": rev.study,
                "step": rev.next_step() if rev.dropped_at is None else "dropped",
                "next_url": _next_step_url(rev),
                "assignments": items,
                "pairs": pairs,
                "platform": platform_card(rev),
            }
        )
    # the menu's "is a reviewer" is known when there is a card (templates/base.html)
    return render(
        request, "studies/reviewer/home.html", {"cards": cards, "nav_is_reviewer": bool(cards)}
    )


@reviewer_login_required
@require_http_methods(["GET", "POST"])
def reviewer_consent_view(request: HttpRequest, reviewer_id: int) -> HttpResponse:
    reviewer = get_reviewer_for_user(request, reviewer_id)
    definition = reviewer.study.form_definition()
    form = ConsentForm(request.POST or None, honor_code=definition.honor_code)
    if request.method == "POST" and form.is_valid():
        reviewer_consent(reviewer=reviewer)
        return redirect(_next_step_url(reviewer))
    return render(
        request,
        "studies/reviewer/consent.html",
        {
            "reviewer": reviewer,
            "study": reviewer.study,
            "form": form,
            "platform": _platform_name(reviewer),
        },
        status=400 if request.method == "POST" else 200,
    )


def _platform_name(reviewer: Reviewer) -> str:
    """The platform a participant came from ("Prolific"), or "" for an invited reviewer:
    the consent and profile pages say what a participant gave and how they are paid."""
    if platform_participant_of(reviewer) is None:
        return ""
    return platform_link_for(reviewer.study).platform or "the platform"


@reviewer_login_required
@require_http_methods(["GET", "POST"])
def reviewer_profile_view(request: HttpRequest, reviewer_id: int) -> HttpResponse:
    reviewer = get_reviewer_for_user(request, reviewer_id)
    study = reviewer.study
    if reviewer.next_step() == "consent":
        return redirect("studies:reviewer_consent", reviewer.pk)
    # Topics and load feed the assignment: once approved, changes go through the owner.
    locked = reviewer.screening != Reviewer.Screening.PENDING
    prefs = list(reviewer.topic_preferences or [])
    initial = {
        "institution": reviewer.institution,
        "position": reviewer.position,
        "major_venue_papers": reviewer.major_venue_papers,
        "scholar_url": reviewer.scholar_url,
        "reviewing_experience": reviewer.reviewing_experience,
        "topic_first": prefs[0] if prefs else "",
        "topic_second": prefs[1] if len(prefs) > 1 else "",
        "preferred_load": reviewer.preferred_load,
    }
    form = ProfileForm(request.POST or None, initial=initial, study=study)
    platform = _platform_name(reviewer)
    if request.method == "POST":
        if locked:
            messages.error(
                request, "Your profile was screened already; ask the study team to change it."
            )
            return redirect("studies:reviewer_profile", reviewer.pk)
        if form.is_valid():
            if platform:
                # A participant from a platform is screened by the rule and given work now.
                outcome = platform_profile_save(reviewer=reviewer, data=form.cleaned_data)
                if outcome == "approved":
                    messages.success(request, "Profile saved. Your ideas to review are below.")
                return redirect("studies:reviewer_home")
            reviewer_profile_save(reviewer=reviewer, data=form.cleaned_data)
            messages.success(request, "Profile saved. The study team will screen it shortly.")
            return redirect("studies:reviewer_home")
    return render(
        request,
        "studies/reviewer/profile.html",
        {
            "reviewer": reviewer,
            "study": study,
            "form": form,
            "locked": locked,
            "platform": platform,
            # A participant is paid through the platform: no payment details are asked.
            "payment_form": None
            if platform
            else PaymentHandleForm(initial={"payment_handle": reviewer.payment_handle}),
        },
        status=400 if request.method == "POST" else 200,
    )


@reviewer_login_required
@require_POST
def reviewer_payment_view(request: HttpRequest, reviewer_id: int) -> HttpResponse:
    """The reviewer's payment details: their own to give or change at any time."""
    reviewer = get_reviewer_for_user(request, reviewer_id)
    form = PaymentHandleForm(request.POST)
    if form.is_valid():
        try:
            reviewer_payment_handle_set(
                reviewer=reviewer, handle=form.cleaned_data["payment_handle"]
            )
        except RecruitmentError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, "Payment details saved.")
    else:
        messages.error(
            request, "Payment details: " + " ".join(map(str, form.errors["payment_handle"]))
        )
    return redirect("studies:reviewer_profile", reviewer.pk)


# --------------------------------------------------------------------------- review page


_UNREAD: Any = object()


def _review_context(
    assignment: Assignment,
    values: dict[str, str],
    form: ReviewAnswersForm | None,
    review: Review | None = _UNREAD,
) -> dict[str, Any]:
    """The review page's context; `review` is the assignment's review when the caller has
    just read it (else it is read here)."""
    study = assignment.study
    definition = study_review_definition(study)
    errors = form.errors if form is not None else {}

    def scale(s: Scale) -> dict[str, Any]:
        return {
            "key": s.key,
            "label": s.label,
            "question": s.question,
            "range": s.range_text(),
            "levels": tuple((str(v), s.anchor(v)) for v in s.levels),
            "value": values.get(s.key, ""),
            "rationale": values.get(f"{s.key}_rationale", "") if s.rationale else None,
            "rationale_required": s.rationale_required,
            "min_words": definition.rationale_words(s),
            "errors": list(errors.get(s.key, [])) + list(errors.get(f"{s.key}_rationale", [])),
        }

    if review is _UNREAD:
        review = Review.objects.filter(assignment=assignment).first()
    locked = review_locked_reason(study=study, review=review)
    return {
        "study": study,
        "assignment": assignment,
        "sections": idea_sections(assignment.idea.reviewable_text()),
        # Attention checks among the metrics, looking like them (a check has no rationale).
        "metrics": [
            scale(i.scale if isinstance(i, AttentionCheck) else i) for i in definition.items()
        ],
        "extras": [scale(q) for q in definition.questions],
        "instructions": definition.description,
        "minutes": values.get("minutes", ""),
        "minutes_errors": list(errors.get("minutes", [])),
        "min_words": definition.min_rationale_words,
        "missing": form.missing() if form is not None else [],
        "review": review,
        "version": review.version if review is not None else 0,
        "submitted": review is not None and review.status == Review.Status.SUBMITTED,
        "revisions": list(review.revisions.all()) if review else [],
        "closed": study.is_closed(),
        # the reason the review can no longer be changed, "" while it can
        "locked": locked,
        "topic": assignment.idea.topic.name,
    }


def _page_version(request: HttpRequest) -> int | None:
    """The review's version the page was rendered with (None from a page without one)."""
    raw = request.POST.get("version", "")
    return int(raw) if raw.isdigit() else None


@reviewer_login_required
@require_GET
def review_page(request: HttpRequest, assignment_id: int) -> HttpResponse:
    assignment = get_assignment_for_reviewer(request, assignment_id, with_review=True)
    if not assignment.study.is_closed():
        assignment_touch(assignment=assignment)
    review: Review | None = getattr(assignment, "review", None)  # read with the assignment
    # A decided review shows the answers decided on, not a draft typed before that.
    values = review_current_values(review, with_draft=not review_decided(review))
    context = _review_context(assignment, values, None, review)
    # the assignment is the user's as a reviewer: the menu need not ask (templates/base.html)
    context["nav_is_reviewer"] = True
    return render(request, "studies/reviewer/review.html", context)


@reviewer_login_required
@require_POST
def review_autosave(request: HttpRequest, assignment_id: int) -> HttpResponse:
    assignment = get_assignment_for_draft(request, assignment_id)
    definition = assignment.study.form_definition()
    error, status, review = "", 200, None
    version = _page_version(request)
    try:
        if version is None:
            # The page always sends the version it was opened with; without one a draft
            # could land over a review submitted since.
            error, status = "This save came without the page's version; reload the page.", 400
        else:
            review = review_draft_save(
                assignment=assignment,
                draft=draft_from_post(definition, request.POST),
                version=version,
                definition=definition,
            )
    except RecruitmentError as exc:
        error, status = str(exc), 400 if isinstance(exc, TextRejected) else 409
    if is_htmx(request):
        if review is None:
            review = Review.objects.filter(assignment=assignment).first()
        return render(
            request,
            "studies/reviewer/review.html#save_status",
            {
                "assignment": assignment,
                "review": review,
                "save_error": error,
                # a refused save may be a locked review: the page then stops autosaving
                "locked": review_locked_reason(study=assignment.study, review=review)
                if error
                else "",
            },
            status=status,
        )
    if error:
        messages.error(request, error)
    else:
        messages.success(request, "Draft saved.")
    return redirect("studies:review_page", assignment.pk)


@reviewer_login_required
@require_POST
def review_submit_view(request: HttpRequest, assignment_id: int) -> HttpResponse:
    assignment = get_assignment_for_reviewer(request, assignment_id, with_review=True)
    definition = study_review_definition(assignment.study)
    form = ReviewAnswersForm(request.POST, definition=definition)
    # Checked again by review_submit under the review's lock.
    locked = review_locked_reason(
        study=assignment.study, review=getattr(assignment, "review", None)
    )
    if locked:
        messages.error(request, locked)
        return redirect("studies:review_page", assignment.pk)
    if not form.is_valid():
        # Keep what was typed, so a failed submit loses nothing either.
        with contextlib.suppress(RecruitmentError):
            review_draft_save(
                assignment=assignment,
                draft=draft_from_post(definition, request.POST),
                version=_page_version(request),
                definition=definition,
            )
        values = draft_from_post(definition, request.POST)
        context = _review_context(assignment, values, form)
        return render(request, "studies/reviewer/review.html", context, status=400)
    try:
        _, changed = review_submit(
            assignment=assignment, cleaned=form.cleaned_data, version=_page_version(request)
        )
    except StaleReview as exc:
        # Shown with what this page sent; submitting again is then a deliberate choice.
        context = _review_context(assignment, draft_from_post(definition, request.POST), None)
        context.update(stale=str(exc), version=exc.version)
        return render(request, "studies/reviewer/review.html", context, status=409)
    except RecruitmentError as exc:
        messages.error(request, str(exc))
        return redirect("studies:review_page", assignment.pk)
    messages.success(
        request, "Review submitted. Thank you!" if changed else "Your review was already saved."
    )
    return redirect("studies:reviewer_home")


# --------------------------------------------------------------------------- pair tasks


def _pair_labels(task: PairTask) -> dict[str, str]:
    definition = task.study.form_definition()
    return {m.key: m.label for m in definition.metrics}


def _pair_context(task: PairTask, form: PairForm) -> dict[str, Any]:
    return {
        "study": task.study,
        "task": task,
        "form": form,
        "first": idea_sections(task.left.reviewable_text()),
        "second": idea_sections(task.right.reviewable_text()),
        "dimensions": [form[d] for d in form.dimension_keys],
        "missing": form.missing() if form.is_bound else [],
        "submitted": task.status == PairTask.Status.SUBMITTED,
        "closed": task.study.is_closed(),
    }


@reviewer_login_required
@require_GET
def pair_page(request: HttpRequest, task_id: int) -> HttpResponse:
    task = get_pair_task_for_reviewer(request, task_id)
    if task.opened_at is None:
        PairTask.objects.filter(pk=task.pk).update(opened_at=timezone.now())
    initial: dict[str, Any] = {j.dimension: j.choice for j in task.judgments.all()}
    initial["rationale"] = task.rationale
    form = PairForm(initial=initial, task=task, labels=_pair_labels(task))
    return render(request, "studies/reviewer/pair.html", _pair_context(task, form))


@reviewer_login_required
@require_POST
def pair_submit_view(request: HttpRequest, task_id: int) -> HttpResponse:
    task = get_pair_task_for_reviewer(request, task_id)
    form = PairForm(request.POST, task=task, labels=_pair_labels(task))
    if not form.is_valid():
        return render(request, "studies/reviewer/pair.html", _pair_context(task, form), status=400)
    try:
        changed = pair_task_submit(
            task=task,
            choices={d: form.cleaned_data[d] for d in form.dimension_keys},
            rationale=form.cleaned_data.get("rationale") or "",
        )
    except RecruitmentError as exc:
        messages.error(request, str(exc))
        return redirect("studies:pair_page", task.pk)
    messages.success(
        request, "Rating saved. Thank you!" if changed else "Your rating was already saved."
    )
    return redirect("studies:reviewer_home")
