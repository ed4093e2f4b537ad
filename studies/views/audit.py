"""The study's audit log, for its owners: every entry, newest first, and whether the
hash chain still verifies (docs/deploy.md, "The audit log")."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ..models import AuditEvent
from ..services.audit import audit_chain_check
from .study import OWNER, get_study_for_member

PER_PAGE = 100


@login_required
@require_GET
def study_audit(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_study_for_member(request, slug, role=OWNER)
    events = AuditEvent.objects.filter(study=study).order_by("-seq")
    page = Paginator(events, PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "studies/owner/audit.html",
        {"study": study, "page": page, "check": audit_chain_check(study)},
    )
