"""Every study page against every role on the study's team, and against outsiders.

Reading needs viewer, changing anything editor, and roles, closing and deleting owner.
A user off the team gets 404 (the study's existence is not disclosed), a member whose
role is too low 403. The table below must name every page under a study's slug: a new
page fails `test_every_study_page_declares_the_role_it_needs` until it is added here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from judging.models import JudgeRun
from llm.keystore import endpoint_key_save
from llm.models import JudgeConfig
from studies.models import (
    Condition,
    Idea,
    IdeaCondition,
    JobRun,
    LeakageExport,
    Review,
    Reviewer,
    StudyMember,
    StudyReport,
    Topic,
)
from studies.services.invitations import invitation_create
from studies.services.study import study_create

V, E, OW = "viewer", "editor", "owner"
RANK = {"": 0, V: 1, E: 2, OW: 3}

# url name -> (extra args, role for GET, role for POST); None: the method is not allowed.
PAGES: dict[str, tuple[tuple[str, ...], str | None, str | None]] = {
    "studies:study_detail": ((), V, None),
    "studies:reviews_import_page": ((), V, E),
    "studies:study_form": ((), V, E),
    "studies:import_sample": (("sample", "sample_fmt"), V, None),
    "studies:study_report": ((), V, None),
    "studies:study_report_build": ((), None, E),
    "studies:study_report_file": (("name",), V, None),
    "studies:job_status": (("report_job",), V, None),
    "studies:job_cancel": (("report_job",), None, E),
    "studies:job_retry": (("report_job",), None, E),
    "studies:study_progress": ((), V, None),
    "studies:study_reminders": ((), None, E),
    "studies:study_close": ((), None, OW),
    "studies:study_due": ((), None, E),
    "studies:study_reviewers": ((), V, None),
    "studies:reviewers_approve_by_rule": ((), None, E),
    "studies:reviewer_screen": (("reviewer",), None, E),
    # Before reviewer_drop, which drops the reviewer both pages need.
    "studies:reviewer_topics": (("reviewer",), E, E),
    "studies:reviewer_drop": (("reviewer",), E, E),
    "studies:study_invitations": ((), V, E),
    "studies:invitations_upload": ((), None, E),
    "studies:invitation_resend": (("invitation",), None, E),
    "studies:assignment_preview": ((), V, E),
    "studies:assignment_commit": ((), None, E),
    "studies:pair_tasks": ((), V, E),
    "studies:pair_tasks_upload": ((), None, E),
    "studies:ideas_list": ((), V, None),
    "studies:ideas_import": ((), V, E),
    "studies:topic_matching": ((), V, None),
    "studies:topic_matching_apply": ((), None, E),
    "studies:topic_reason": ((), None, E),
    "studies:study_open": ((), V, E),
    "studies:duplicates": ((), V, None),
    "studies:duplicates_run": ((), None, E),
    "studies:normalization": ((), V, None),
    "studies:normalization_config": ((), None, E),
    "studies:normalization_start": ((), None, E),
    "studies:leakage": ((), V, E),
    "studies:leakage_download": (("export", "kind"), V, None),
    "studies:idea_row": (("idea",), V, None),
    "studies:idea_sections": (("idea",), V, E),
    "studies:idea_include": (("idea",), None, E),
    "studies:idea_signoff": (("idea",), V, None),
    "studies:idea_decide": (("idea",), None, E),
    "studies:signoff_approve_passed": ((), V, E),
    "studies:study_settings": ((), V, E),
    "studies:study_plan": ((), V, E),
    "studies:ideas_gold": ((), V, E),
    "studies:study_plan_freeze": ((), None, OW),
    "studies:study_phases": ((), E, None),
    "studies:study_phase_link": ((), None, E),
    "studies:study_phase_unlink": ((), None, E),
    "studies:study_delete": ((), OW, OW),
    "studies:study_export": ((), OW, None),
    "studies:study_audit": ((), OW, None),
    "studies:sizing": ((), V, E),
    "studies:study_preregistration": (("prereg_fmt",), V, None),
    "studies:study_members": ((), V, OW),
    "studies:member_role": (("member_editor",), None, OW),
    "studies:member_remove": (("member_viewer",), None, OW),
    "studies:member_leave": ((), None, V),
    "studies:study_payments": ((), V, None),
    "studies:payments_export": ((), V, None),
    "studies:study_platform": ((), V, E),
    "studies:platform_sweep": ((), None, E),
    "studies:platform_file": (("platform_kind",), OW, None),
    "studies:payment_reviews": ((), V, None),
    "studies:payment_review_decide": (("review",), None, E),
    "studies:payment_reviews_accept_undecided": ((), None, E),
    "judging:home": ((), V, None),
    "judging:config_create": ((), OW, OW),
    "judging:config_delete": (("judge",), None, OW),
    "judging:config_detail": (("run_judge",), V, None),
    "judging:config_reliability_csv": (("run_judge",), V, None),
    "judging:run_create": ((), V, E),
    "judging:key_create": ((), None, OW),
    "judging:key_delete": (("endpoint_key",), None, OW),
    "judging:run_detail": (("run",), V, None),
    "judging:run_reliability_csv": (("done_run",), V, None),
    "judging:run_cancel": (("run",), None, E),
    "judging:run_resume": (("run",), None, E),
    "judging:corpora": ((), V, OW),
}


@dataclass
class Team:
    study: Any
    users: dict[str, Any]
    args: dict[str, Any]


@pytest.fixture
def team(db, owner, other_researcher, settings, tmp_path) -> Team:
    study = study_create(owner=owner, slug="roles", title="Roles study")
    settings.REPORTS_ROOT = str(tmp_path)
    (tmp_path / "roles" / "v1").mkdir(parents=True)
    (tmp_path / "roles" / "v1" / "report.html").write_text("<html><body>report</body></html>")
    StudyReport.objects.create(study=study, data={}, directory="roles/v1")
    User = get_user_model()
    users = {"owner": owner, "outsider": other_researcher}
    for role in ("owner", "editor", "viewer"):
        user = User.objects.create_user(f"co-{role}", password="co-pass-12345")
        StudyMember.objects.create(study=study, user=user, role=role)
        users[f"co-{role}"] = user
    topic = Topic.objects.create(study=study, name="Math")
    human = Condition.objects.create(study=study, key="Human", kind="human")
    idea = Idea.objects.create(study=study, topic=topic, title="An idea", raw_text="Text.")
    IdeaCondition.objects.create(idea=idea, condition=human, study=study, external_id="H1")
    reviewer_user = User.objects.create_user("rev@example.org", password="rev-pass-12345")
    reviewer = Reviewer.objects.create(study=study, user=reviewer_user, pseudonym="R001")
    users["reviewer"] = reviewer_user
    config = JudgeConfig.objects.create(name="roles-judge", model="m", study=study)
    args = {
        "name": "report.html",
        "report_job": JobRun.objects.create(study=study, kind="report").pk,
        "assignment_job": JobRun.objects.create(
            study=study, kind="assignment", params={"status": "infeasible"}
        ).pk,
        "reviewer": reviewer.pk,
        "invitation": invitation_create(study=study, email="x@example.org", send=False).pk,
        "export": LeakageExport.objects.create(study=study, seed=1).pk,
        "kind": "key",
        "sample": "reviews",
        "sample_fmt": "csv",
        "idea": idea.pk,
        "review": Review.objects.create(study=study, idea=idea, status="submitted").pk,
        "member_editor": StudyMember.objects.get(study=study, user=users["co-editor"]).pk,
        "member_viewer": StudyMember.objects.get(study=study, user=users["co-viewer"]).pk,
        "run": JudgeRun.objects.create(study=study, config=config, method="baseline_random").pk,
        "judge": JudgeConfig.objects.create(name="unused", model="m", study=study).pk,
        "run_judge": config.pk,  # kept: "judge" is deleted by config_delete
        "endpoint_key": endpoint_key_save(owner=owner, label="k", secret="sk-roles-0123456789").pk,
        "done_run": JudgeRun.objects.create(
            study=study, config=config, method="direct", status="done"
        ).pk,
        "prereg_fmt": "md",
        "platform_kind": "approve",
    }
    return Team(study=study, users=users, args=args)


def _study_page_names() -> set[str]:
    names: set[str] = set()
    for top in get_resolver().url_patterns:
        if not isinstance(top, URLResolver) or top.namespace not in ("studies", "judging"):
            continue
        for p in top.url_patterns:
            if isinstance(p, URLPattern) and str(p.pattern).startswith("<slug:slug>/"):
                names.add(f"{top.namespace}:{p.name}")
    return names


def test_every_study_page_declares_the_role_it_needs():
    missing = _study_page_names() - set(PAGES)
    assert not missing, f"add these pages to PAGES with their roles: {sorted(missing)}"


def _url(team: Team, name: str) -> str:
    extra, _, _ = PAGES[name]
    return reverse(name, args=[team.study.slug, *(team.args[a] for a in extra)])


def _expected(member_role: str, needed: str) -> str:
    if not member_role:
        return "hidden"
    return "allowed" if RANK[member_role] >= RANK[needed] else "forbidden"


def _check(status: int, expected: str, what: str) -> None:
    if expected == "hidden":
        assert status == 404, what
    elif expected == "forbidden":
        assert status == 403, what
    else:
        assert status not in (403, 404, 405) and status < 500, what


# Form fields a page needs to get past its own object lookup, named by `Team.args` keys.
POST_DATA = {"studies:assignment_commit": {"job": "assignment_job"}}

# Closing changes what later pages show, and removing a member (or leaving) takes one
# persona off the team: they are tried last, leaving the very last.
LAST = ("studies:member_remove", "studies:study_close", "studies:member_leave")
ORDER = sorted(PAGES, key=lambda n: LAST.index(n) + 1 if n in LAST else 0)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "persona, member_role",
    [
        ("owner", OW),
        ("co-owner", OW),
        ("co-editor", E),
        ("co-viewer", V),
        ("outsider", ""),
        ("reviewer", ""),
    ],
)
def test_each_persona_reaches_exactly_the_pages_its_role_allows(
    client, team, persona, member_role, settings
):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    client.force_login(team.users[persona])
    for name in ORDER:
        _, get_role, post_role = PAGES[name]
        url = _url(team, name)
        if get_role:
            status = client.get(url).status_code
            _check(status, _expected(member_role, get_role), f"GET {name} as {persona}: {status}")
        if post_role:
            data = {k: team.args[v] for k, v in POST_DATA.get(name, {}).items()}
            status = client.post(url, data).status_code
            _check(status, _expected(member_role, post_role), f"POST {name} as {persona}: {status}")


# page -> (an action it offers, the role that action needs). Each member must see exactly
# the actions its role allows (the crawl checks the viewer is offered none that answer 403;
# this checks the actions are still offered to those who may take them).
OFFERED = {
    "studies:study_report": ("studies:study_report_build", E),
    "studies:study_progress": ("studies:study_close", OW),
    "studies:study_reviewers": ("studies:reviewers_approve_by_rule", E),
    "studies:study_settings": ("studies:study_settings", E),
    "studies:study_plan": ("studies:study_plan", E),
    "studies:reviews_import_page": ("studies:reviews_import_page", E),
    "studies:pair_tasks": ("studies:pair_tasks_upload", E),
    "studies:study_open": ("studies:study_open", E),
    "judging:run_create": ("judging:run_create", E),
}

# Pages that tell a viewer, once, why their actions are missing.
NOTED = {"studies:study_progress", "studies:study_reviewers", "studies:reviews_import_page"}


def _posts_to(html: str, page_url: str, target: str) -> bool:
    """Whether a form on the page posts to `target` (a form without action posts to its page)."""
    for tag in re.findall(r"<form\b[^>]*>", html):
        if 'method="post"' not in tag:
            continue
        action = re.search(r'action="([^"]*)"', tag)
        if (action.group(1) if action else page_url) == target:
            return True
    return False


@pytest.mark.django_db
@pytest.mark.parametrize(
    "persona, member_role", [("co-owner", OW), ("co-editor", E), ("co-viewer", V)]
)
def test_pages_offer_exactly_the_actions_the_role_may_take(client, team, persona, member_role):
    client.force_login(team.users[persona])
    for page, (action, needed) in OFFERED.items():
        page_url = reverse(page, args=[team.study.slug])
        html = client.get(page_url).content.decode()
        offered = _posts_to(html, page_url, reverse(action, args=[team.study.slug]))
        assert offered == (RANK[member_role] >= RANK[needed]), f"{persona} on {page}: {offered}"
        if page in NOTED:
            assert ('id="read-only"' in html) == (member_role == V), f"{persona} on {page}"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "persona, member_role", [("co-owner", OW), ("co-editor", E), ("co-viewer", V)]
)
def test_the_job_partial_offers_cancel_and_retry_only_to_editors_and_owners(
    client, team, persona, member_role
):
    client.force_login(team.users[persona])
    slug, pk = team.study.slug, team.args["report_job"]
    page_url = reverse("studies:study_report", args=[slug])
    may = RANK[member_role] >= RANK[E]
    cancel = reverse("studies:job_cancel", args=[slug, pk])
    assert _posts_to(client.get(page_url).content.decode(), page_url, cancel) == may
    JobRun.objects.filter(pk=pk).update(status=JobRun.Status.FAILED, error="broker down")
    retry = reverse("studies:job_retry", args=[slug, pk])
    html = client.get(page_url).content.decode()
    assert _posts_to(html, page_url, retry) == may
    assert ("An editor or the owner can retry it." in html) == (not may)
    # the status endpoint the page polls renders the same partial
    status_url = reverse("studies:job_status", args=[slug, pk])
    assert (
        _posts_to(client.get(status_url, HTTP_HX_REQUEST="true").content.decode(), "", retry) == may
    )
