"""Creating studies (web and command line), researchers, the settings page with its
locks, and the team page."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from studies.models import (
    Assignment,
    Condition,
    Idea,
    IdeaCondition,
    Review,
    Reviewer,
    Study,
    StudyMember,
    Topic,
)
from studies.services.invitations import (
    InvitationError,
    invitation_accept,
    invitation_create,
    invitation_token,
)
from studies.services.study import (
    SettingsChange,
    SetupError,
    conditions_parse,
    is_researcher,
    member_add,
    researcher_grant,
    study_create,
    study_locks,
    study_settings_update,
)

User = get_user_model()


@pytest.fixture
def researcher(db):
    user = User.objects.create_user("ada", email="ada@example.org", password="ada-pass-123")
    researcher_grant(user=user)
    return User.objects.get(pk=user.pk)  # a fresh object: permissions are cached


@pytest.fixture
def study(researcher):
    return study_create(
        owner=researcher,
        slug="setup",
        title="Setup study",
        conditions=[("Human", "human"), ("AI", "ai")],
        baseline_condition="Human",
        topics=["Math", "Coding"],
    )


def _idea(study: Study) -> Idea:
    topic = study.topics.first()
    idea = Idea.objects.create(study=study, topic=topic, title="An idea", raw_text="Text.")
    IdeaCondition.objects.create(
        idea=idea, condition=study.conditions.get(key="Human"), study=study, external_id="H1"
    )
    return idea


# --------------------------------------------------------------------------- creating


@pytest.mark.django_db
def test_only_researchers_see_new_study_and_may_create_one(client, owner, researcher):
    client.force_login(owner)
    assert not is_researcher(owner)
    assert "New study" not in client.get(reverse("studies:study_list")).content.decode()
    refused = client.get(reverse("studies:study_new"))
    assert refused.status_code == 403
    # the app's own page, in its frame, saying why, not a bare "403 Forbidden"
    page = refused.content.decode()
    assert '<header class="topbar">' in page and "<h1>Not allowed</h1>" in page
    assert "Only researchers may create studies" in page
    assert client.post(reverse("studies:study_new"), {"slug": "x"}).status_code == 403
    client.force_login(researcher)
    assert "New study" in client.get(reverse("studies:study_list")).content.decode()
    assert client.get(reverse("studies:study_new")).status_code == 200


@pytest.mark.django_db
def test_a_researcher_creates_a_study_in_the_browser(client, researcher):
    client.force_login(researcher)
    response = client.post(
        reverse("studies:study_new"),
        {
            "slug": "ideas-2025",
            "title": "Ideas 2025",
            "review_form": "execution",
            "conditions": "Human, AI, AI_Rerank",
            "baseline_condition": "Human",
            "topics": "Math\nCoding\n",
        },
    )
    assert response.status_code == 302
    study = Study.objects.get(owner=researcher)
    assert re.fullmatch(r"ideas-2025-[a-z0-9]{6}", study.slug)
    assert response["Location"] == reverse("studies:study_detail", args=[study.slug])
    assert study.role_of(researcher) == "owner" and study.owner == researcher
    assert study.review_form.key == "execution"
    assert dict(study.conditions.values_list("key", "kind")) == {
        "Human": "human",
        "AI": "ai",
        "AI_Rerank": "ai",
    }
    assert sorted(study.topics.values_list("name", flat=True)) == ["Coding", "Math"]
    assert client.get(response["Location"]).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize(
    "change, message",
    [
        ({"slug": "not a slug!"}, "Enter a valid"),
        ({"baseline_condition": "Nobody"}, "must be one of the conditions"),
        ({"conditions": "Human, Human"}, "listed twice"),
        ({"conditions": "Human:robot"}, "must be human or ai"),
        ({"topics": "Math\nmath"}, "listed twice"),
    ],
)
def test_a_bad_new_study_says_what_is_wrong_and_creates_nothing(
    client, researcher, study, change, message
):
    client.force_login(researcher)
    data = {
        "slug": "other",
        "title": "Other",
        "review_form": "si2024",
        "conditions": "Human, AI",
        "baseline_condition": "Human",
        "topics": "",
        **change,
    }
    response = client.post(reverse("studies:study_new"), data)
    assert response.status_code == 400 and message in response.content.decode()
    assert Study.objects.count() == 1


@pytest.mark.django_db
def test_the_new_study_form_never_says_a_name_is_taken_by_someone_elses_study(
    client, researcher, other_researcher
):
    """Another researcher's study has the slug "taken": the form takes the name as it
    takes any, and the new study gets an address of its own."""
    study_create(owner=other_researcher, slug="taken")
    client.force_login(researcher)
    data = {"title": "Mine", "review_form": "si2024", "conditions": "Human, AI"}
    for name in ("taken", "taken", "new"):
        response = client.post(reverse("studies:study_new"), {**data, "slug": name})
        assert response.status_code == 302
        assert "exists" not in client.get(response["Location"]).content.decode()
    mine = set(Study.objects.filter(owner=researcher).values_list("slug", flat=True))
    assert len(mine) == 3 and all(re.fullmatch(r"(taken|new)-[a-z0-9]{6}", s) for s in mine)
    assert Study.objects.get(slug="taken").owner == other_researcher


def test_conditions_take_their_kind_from_the_name_or_an_explicit_suffix():
    assert conditions_parse("Human, AI,AI_Rerank:ai, Expert:human") == [
        ("Human", "human"),
        ("AI", "ai"),
        ("AI_Rerank", "ai"),
        ("Expert", "human"),
    ]


@pytest.mark.django_db
def test_create_researcher_and_study_create_commands(tmp_path, capsys):
    call_command("create_researcher", "bo", email="bo@example.org", password="bo-Pass-98765")
    bo = User.objects.get(username="bo")
    assert bo.check_password("bo-Pass-98765") and is_researcher(bo)
    with pytest.raises(CommandError, match="password refused"):
        call_command("create_researcher", "cy", password="123")
    call_command(
        "study_create",
        "exec",
        title="Execution study",
        owner="bo",
        form="execution",
        conditions="Human,AI",
        baseline="Human",
        topics="Math, Coding",
    )
    study = Study.objects.get(slug="exec")
    assert study.review_form.key == "execution" and study.baseline_condition == "Human"
    assert study.role_of(bo) == "owner" and study.topics.count() == 2
    with pytest.raises(CommandError, match="no built-in or stored review form 'nope'"):
        call_command("study_create", "x2", owner="bo", form="nope")
    with pytest.raises(CommandError, match="exists already"):
        call_command("study_create", "exec", owner="bo")
    plain = User.objects.create_user("plain", password="plain-pass-123")
    with pytest.raises(CommandError, match="not a researcher"):
        call_command("study_create", "x3", owner=plain.username)


@pytest.mark.django_db
def test_study_create_reads_a_form_file(tmp_path, researcher):
    from studies.protocol.forms import builtin_form

    definition = builtin_form("execution").to_dict()
    definition.update({"key": "my-form", "title": "My form", "version": 1})
    path = tmp_path / "form.json"
    path.write_text(json.dumps(definition))
    call_command("study_create", "filed", owner=researcher.username, form=str(path))
    assert Study.objects.get(slug="filed").review_form.key == "my-form"


# --------------------------------------------------------------------------- settings


def _settings_data(study: Study, **change: object) -> dict[str, object]:
    data = {
        "title": study.title,
        "description": study.description,
        "baseline_condition": study.baseline_condition,
        "min_load": study.min_load,
        "max_load": study.max_load,
        "min_reviews_per_idea": study.min_reviews_per_idea,
        "max_reviews_per_idea": study.max_reviews_per_idea,
        "topic_choice_use": study.topic_choice_use,
        "gold_per_reviewer": study.gold_per_reviewer,
        "screening_min_papers": study.screening_min_papers,
        "invitation_days": study.invitation_days,
        "reviews_due_at": "",
        "rationale_min_words": "",
        "payment_currency": study.payment_currency,
        "payment_per_review": "0",
        "payment_per_idea": "0",
        "payment_bonus": "0",
        "payment_bonus_top_k": "0",
        "conditions": "Human, AI",
        "topics": "Math\nCoding",
        "review_form": f"{study.review_form.key}@{study.review_form.version}",
    }
    if study.invitation_bind_email:
        data["invitation_bind_email"] = "on"  # an unticked box is not sent at all
    data.update(change)
    return data


@pytest.mark.django_db
@pytest.mark.parametrize("deployment_binds", [False, True])
def test_each_study_chooses_whether_its_invitation_links_are_bound_to_the_address(
    client, researcher, settings, deployment_binds
):
    from django.test import Client

    from studies.services.invitations import invitation_create, invitation_token

    settings.IDEAREVIEW_INVITATION_BIND_EMAIL = deployment_binds
    # a new study starts with the deployment's choice, and its settings page shows it
    study = study_create(owner=researcher, slug="bind", baseline_condition="Human")
    assert study.invitation_bind_email is deployment_binds
    client.force_login(researcher)
    url = reverse("studies:study_settings", args=[study.slug])
    box = client.get(url).content.decode().split('name="invitation_bind_email"')
    assert len(box) == 2 and ("checked" in box[1].split(">")[0]) is deployment_binds
    # the owner turns it the other way for this study only
    data = _settings_data(study, conditions="Human", topics="")
    if deployment_binds:
        del data["invitation_bind_email"]
    else:
        data["invitation_bind_email"] = "on"
    assert client.post(url, data).status_code == 302
    study.refresh_from_db()
    assert study.invitation_bind_email is not deployment_binds
    other = study_create(owner=researcher, slug="other", baseline_condition="Human")
    assert other.invitation_bind_email is deployment_binds

    def forwarded_sign_up(s: Study) -> int:
        invitation = invitation_create(study=s, email="ada.invited@example.org", send=False)
        link = reverse("studies:invitation_open", args=[invitation_token(invitation)])
        password = "Long-pass-9876"
        form = {"email": f"colleague.{s.slug}@example.org", "password1": password}
        return Client().post(link, {**form, "password2": password}).status_code

    # a forwarded link is refused exactly where the study binds its links
    assert forwarded_sign_up(study) == (302 if deployment_binds else 400)
    assert forwarded_sign_up(other) == (400 if deployment_binds else 302)


@pytest.mark.django_db
def test_an_editor_changes_every_kind_of_parameter(client, study, researcher):
    editor = User.objects.create_user("ed", password="ed-pass-12345")
    StudyMember.objects.create(study=study, user=editor, role="editor")
    client.force_login(editor)
    url = reverse("studies:study_settings", args=[study.slug])
    data = _settings_data(
        study,
        min_load=3,
        max_load=5,
        topic_choice_use="equal",
        gold_per_reviewer=2,
        payment_per_review="25.00",
        payment_per_idea="300",
        payment_bonus="1000",
        payment_bonus_top_k=5,
        rationale_min_words=40,
        reviews_due_at="2030-01-31T12:00",
        conditions="Human, AI, AI_Rerank",
        topics="Math\nCoding\nSafety",
        review_form="execution",
    )
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    study.refresh_from_db()
    assert (study.min_load, study.max_load, study.topic_choice_use) == (3, 5, "equal")
    assert study.gold_per_reviewer == 2
    assert (study.payment_per_review, study.payment_bonus_top_k) == (25, 5)
    assert study.rationale_minimum() == 40 and study.reviews_due_at.year == 2030
    assert study.conditions.count() == 3 and study.topics.count() == 3
    assert study.review_form.key == "execution"
    assert "Saved" in client.get(url).content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "change, message",
    [
        ({"min_load": 6, "max_load": 3}, "must be at least the smallest"),
        ({"min_reviews_per_idea": 5, "max_reviews_per_idea": 2}, "must be at least the smallest"),
        ({"payment_per_review": "-1"}, "cannot be negative"),
        ({"min_load": 0}, "must be at least 1"),
        ({"baseline_condition": "Robots"}, "must be one of the conditions"),
        # the server's signature limit (90 days by default) caps what a study may promise
        ({"invitation_days": 91}, "stop working after 90 days"),
    ],
)
def test_inconsistent_settings_are_refused_with_a_message(
    client, study, researcher, change, message
):
    client.force_login(researcher)
    url = reverse("studies:study_settings", args=[study.slug])
    response = client.post(url, _settings_data(study, **change))
    assert response.status_code == 400 and message in response.content.decode()
    study.refresh_from_db()
    assert (study.min_load, study.max_load, study.payment_per_review) == (2, 7, 0)


@pytest.mark.django_db
def test_each_event_locks_the_parameters_it_governs(study, researcher):
    assert study_locks(study) == {}
    idea = _idea(study)
    assert set(study_locks(study)) == {"conditions", "topics"}
    reviewer = Reviewer.objects.create(study=study, pseudonym="R001", screening="approved")
    assert "screening_min_papers" in study_locks(study)
    assignment = Assignment.objects.create(study=study, reviewer=reviewer, idea=idea)
    assert {"min_load", "max_reviews_per_idea", "topic_choice_use"} <= set(study_locks(study))
    Review.objects.create(study=study, idea=idea, assignment=assignment, status="draft")
    assert "review_form" in study_locks(study) and "rationale_min_words" not in study_locks(study)
    Review.objects.filter(study=study).update(status="submitted")
    assert {"rationale_min_words", "baseline_condition"} <= set(study_locks(study))
    study.status = Study.Status.CLOSED
    study.closed_at = timezone.now()
    study.save()
    assert {"payment_per_review", "reviews_due_at"} <= set(study_locks(study))
    assert all("closed" in reason for reason in study_locks(study).values())


@pytest.mark.django_db
def test_a_locked_parameter_is_shown_disabled_with_its_reason_and_cannot_change(
    client, study, researcher
):
    _idea(study)
    client.force_login(researcher)
    url = reverse("studies:study_settings", args=[study.slug])
    page = client.get(url).content.decode()
    assert "ideas have been imported" in page
    assert 'name="conditions"' in page and "disabled" in page.split('name="conditions"')[1][:200]
    # A posted value for a disabled field is ignored; the rest is saved.
    client.post(url, _settings_data(study, conditions="Human, AI, Extra", max_load=6))
    study.refresh_from_db()
    assert study.conditions.count() == 2 and study.max_load == 6
    with pytest.raises(SetupError, match="topics: Locked: ideas have been imported"):
        study_settings_update(
            study=study, change=SettingsChange(fields={}, topics=["Other"]), actor=researcher
        )


@pytest.mark.django_db
def test_a_viewer_reads_the_settings_but_cannot_save_them(client, study):
    viewer = User.objects.create_user("vi", password="vi-pass-12345")
    StudyMember.objects.create(study=study, user=viewer, role="viewer")
    client.force_login(viewer)
    url = reverse("studies:study_settings", args=[study.slug])
    page = client.get(url).content.decode()
    assert "Save settings" not in page and 'id="read-only"' in page
    assert client.post(url, _settings_data(study, max_load=3)).status_code == 403


# --------------------------------------------------------------------------- team


@pytest.mark.django_db
def test_the_owner_adds_changes_and_removes_team_members(client, study, researcher):
    bo = User.objects.create_user("bo", email="bo@example.org", password="bo-pass-12345")
    researcher_grant(user=bo)
    client.force_login(researcher)
    url = reverse("studies:study_members", args=[study.slug])
    assert client.post(url, {"identifier": "BO@example.org", "role": "editor"}).status_code == 302
    member = StudyMember.objects.get(study=study, user=bo)
    assert member.role == "editor" and member.added_by == researcher
    page = client.get(url).content.decode()
    assert "bo@example.org" in page and "added as Editor" in page
    role_url = reverse("studies:member_role", args=[study.slug, member.pk])
    client.post(role_url, {"role": "owner"})
    member.refresh_from_db()
    assert member.role == "owner"
    client.post(reverse("studies:member_remove", args=[study.slug, member.pk]))
    assert not StudyMember.objects.filter(pk=member.pk).exists()


@pytest.mark.django_db
def test_the_team_page_names_a_colleague_and_gives_their_email_once(client, study, researcher):
    bea = User.objects.create_user(
        "bea@example.org", email="bea@example.org", password="bea-pass-12345"
    )
    bea.first_name, bea.last_name = "Bea", "Berg"
    bea.save()
    researcher_grant(user=bea)
    StudyMember.objects.create(study=study, user=bea, role="editor")
    client.force_login(researcher)
    url = reverse("studies:study_members", args=[study.slug])

    def beas_cell() -> str:
        rows = client.get(url).content.decode().split("<tr>")
        return next(r for r in rows if "bea@example.org" in r).split("</td>", 1)[0]

    assert "Bea Berg" in beas_cell() and beas_cell().count("bea@example.org") == 1
    # Without a name, the username stands alone when it is the email.
    bea.first_name = bea.last_name = ""
    bea.save()
    assert beas_cell().count("bea@example.org") == 1


@pytest.mark.django_db
def test_a_study_always_keeps_an_owner(client, study, researcher):
    me = StudyMember.objects.get(study=study, user=researcher)
    client.force_login(researcher)
    client.post(reverse("studies:member_role", args=[study.slug, me.pk]), {"role": "viewer"})
    client.post(reverse("studies:member_remove", args=[study.slug, me.pk]))
    me.refresh_from_db()
    assert me.role == "owner"
    assert (
        "keeps at least one owner"
        in client.get(reverse("studies:study_members", args=[study.slug])).content.decode()
    )


@pytest.mark.django_db
def test_the_only_owner_is_offered_no_change_that_would_be_refused(client, study, researcher):
    me = StudyMember.objects.get(study=study, user=researcher)
    client.force_login(researcher)
    url = reverse("studies:study_members", args=[study.slug])
    page = client.get(url).content.decode()
    assert reverse("studies:member_role", args=[study.slug, me.pk]) not in page
    assert reverse("studies:member_remove", args=[study.slug, me.pk]) not in page
    assert "make someone else owner first" in page
    # A second owner: either may now step down, so both are offered the controls.
    bo = User.objects.create_user("bo", email="bo@example.org", password="bo-pass-12345")
    researcher_grant(user=bo)
    client.post(url, {"identifier": "bo", "role": "owner"})
    page = client.get(url).content.decode()
    assert reverse("studies:member_remove", args=[study.slug, me.pk]) in page
    assert "make someone else owner first" not in page


@pytest.mark.django_db
def test_a_researcher_put_on_a_team_is_told_by_mail_and_may_leave_it(
    client, study, researcher, mailoutbox, django_capture_on_commit_callbacks
):
    from studies.models import AuditEvent

    bo = User.objects.create_user("bo", email="bo@example.org", password="bo-pass-12345")
    researcher_grant(user=bo)
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("studies:study_members", args=[study.slug]),
            {"identifier": "bo", "role": "viewer"},
        )
    assert len(mailoutbox) == 1 and mailoutbox[0].to == ["bo@example.org"]
    body = mailoutbox[0].body
    assert study.title in body and "as viewer" in body and researcher.get_username() in body
    assert f"/studies/{study.slug}/members/" in body
    # bo leaves from the team page; he is off the team and the audit log says he left.
    client.force_login(bo)
    page = client.get(reverse("studies:study_members", args=[study.slug])).content.decode()
    leave = reverse("studies:member_leave", args=[study.slug])
    assert leave in page
    assert client.post(leave).status_code == 302
    assert not StudyMember.objects.filter(study=study, user=bo).exists()
    assert AuditEvent.objects.filter(study=study, verb="member_left").exists()
    assert client.get(reverse("studies:study_detail", args=[study.slug])).status_code == 404
    # The only owner cannot leave (nor is offered it): the study keeps an owner.
    client.force_login(researcher)
    assert (
        leave
        not in client.get(reverse("studies:study_members", args=[study.slug])).content.decode()
    )
    client.post(leave)
    assert StudyMember.objects.filter(study=study, user=researcher).exists()


@pytest.mark.django_db
def test_adding_a_colleague_without_an_account_says_how_they_get_one(
    client, study, researcher, settings
):
    settings.IDEAREVIEW_OWNER_INVITES = False
    client.force_login(researcher)
    url = reverse("studies:study_members", args=[study.slug])
    page = client.post(url, {"identifier": "new@lab.example", "role": "editor"})
    body = page.content.decode()
    assert page.status_code == 400
    assert "no single account" in body and "ask an administrator to invite them" in body
    body = client.post(url, {"identifier": "nobody", "role": "editor"}).content.decode()
    assert "or the username of an account they already have" in body


@pytest.mark.django_db
def test_only_researchers_who_do_not_review_in_the_study_join_its_team(study, researcher):
    plain = User.objects.create_user("plain", password="plain-pass-123")
    with pytest.raises(SetupError, match="not a researcher"):
        member_add(study=study, identifier="plain", role="viewer", actor=researcher)
    researcher_grant(user=plain)
    Reviewer.objects.create(study=study, user=plain, pseudonym="R001")
    with pytest.raises(SetupError, match="members may not review"):
        member_add(study=study, identifier="plain", role="viewer", actor=researcher)
    with pytest.raises(SetupError, match="no single account"):
        member_add(study=study, identifier="nobody", role="viewer", actor=researcher)


@pytest.mark.django_db
def test_a_team_member_cannot_accept_an_invitation_to_review_in_the_study(study, researcher):
    invitation = invitation_create(study=study, email="ada@example.org", send=False)
    with pytest.raises(InvitationError) as caught:
        invitation_accept(token=invitation_token(invitation), user=researcher)
    assert caught.value.kind == "member"
    assert not study.reviewers.exists()


@pytest.mark.django_db
def test_the_assignment_never_gives_a_team_member_work(study, researcher):
    from studies.services.assignment import assignment_plan

    math = Topic.objects.get(study=study, name="Math")
    human, ai = Condition.objects.get(key="Human"), Condition.objects.get(key="AI")
    for n in range(4):
        idea = Idea.objects.create(
            study=study, topic=math, title=f"I{n}", normalization_status="approved"
        )
        IdeaCondition.objects.create(
            idea=idea, condition=human if n % 2 else ai, study=study, external_id=f"X{n}"
        )
    now = timezone.now()
    profile = {
        "screening": "approved",
        "consent_at": now,
        "honor_code_at": now,
        "profile_completed_at": now,
        "topic_preferences": ["Math"],
        "preferred_load": 2,
        "major_venue_papers": 3,
    }
    outsider = User.objects.create_user("rev@example.org", password="rev-pass-12345")
    Reviewer.objects.create(study=study, user=outsider, pseudonym="R001", **profile)
    # Made directly: the team page refuses reviewers, but data from elsewhere may not.
    Reviewer.objects.create(study=study, user=researcher, pseudonym="R002", **profile)
    plan = assignment_plan(study=study, seed=1)
    assert "R002" not in plan.reviewer_by_id and "R001" in plan.reviewer_by_id


@pytest.mark.django_db
def test_only_an_owner_deletes_a_study_and_only_after_typing_its_slug(client, study, researcher):
    _idea(study)
    editor = User.objects.create_user("ed", password="ed-pass-12345")
    StudyMember.objects.create(study=study, user=editor, role="editor")
    url = reverse("studies:study_delete", args=[study.slug])
    client.force_login(editor)
    assert client.post(url, {"confirm": study.slug}).status_code == 403
    client.force_login(researcher)
    assert "1 idea and" in client.get(url).content.decode()
    response = client.post(url, {"confirm": "wrong"})
    assert response.status_code == 400 and "to confirm" in response.content.decode()
    assert Study.objects.filter(pk=study.pk).exists()
    assert client.post(url, {"confirm": study.slug}).status_code == 302
    assert not Study.objects.filter(pk=study.pk).exists()


@pytest.mark.django_db
def test_a_study_with_imported_reviews_can_be_deleted(si2024_study, owner):
    from studies.services.study import study_delete

    study_delete(study=si2024_study, confirm="si2024", actor=owner)
    assert not Study.objects.filter(slug="si2024").exists()
    assert not Review.objects.exists() and not Idea.objects.exists()


@pytest.mark.django_db
def test_deleting_a_study_removes_its_runs_batch_records_and_keeps_other_studies(owner):
    from judging.models import JudgeRun
    from llm.models import JudgeConfig, LLMBatch
    from studies.services.study import study_create, study_delete

    batches = {}
    for slug in ("gone", "kept"):
        study = study_create(owner=owner, slug=slug, title=slug, baseline_condition="Human")
        config = JudgeConfig.objects.create(
            study=study, name="batched", base_url="http://127.0.0.1:9/v1", model="m"
        )
        run = JudgeRun.objects.create(study=study, config=config, method=JudgeRun.Method.DIRECT)
        batches[slug] = LLMBatch.objects.create(
            batch_id=f"batch_{slug}", input_file_id="file_1", base_url=config.base_url, run=run
        )
    study_delete(study=Study.objects.get(slug="gone"), confirm="gone", actor=owner)
    assert list(LLMBatch.objects.values_list("batch_id", flat=True)) == ["batch_kept"]


def test_the_settings_page_shows_every_parameter_once():
    from studies.study_forms import SETTINGS_FIELDS, StudySettingsForm

    names = [n for _, group in StudySettingsForm.GROUPS for n in group]
    assert sorted(names) == sorted([*SETTINGS_FIELDS, "conditions", "topics", "review_form"])


@pytest.mark.django_db
def test_the_demo_researcher_may_create_studies(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    call_command("load_demo", "--no-report", stdout=io.StringIO())
    demo = User.objects.get(username="demo")
    assert is_researcher(demo)
    assert Study.objects.get(slug="si2024").role_of(demo) == "owner"


@pytest.mark.django_db
def test_the_settings_page_says_what_reviewers_see_and_warns_when_it_names_a_source(
    client, study, researcher
):
    client.force_login(researcher)
    url = reverse("studies:study_settings", args=[study.slug])
    page = client.get(url).content.decode()
    assert 'id="reviewer-visible"' in page and 'id="source-warnings"' not in page
    for field in ("title", "description", "topics"):
        help_text = page.split(f'id="id_{field}_helptext"', 1)[1].split("</div>", 1)[0]
        assert "Reviewers see this on" in help_text, field
    assert "every mail to reviewers" in page
    response = client.post(
        url,
        _settings_data(
            study,
            title="Human vs AI research ideas",
            description="Some proposals were drafted by GPT-4; the paid reviewers said so.",
        ),
        follow=True,
    )
    page = response.content.decode()
    warnings = page.split('id="source-warnings"', 1)[1].split("</div>", 1)[0]
    assert "The title names a source of ideas (“Human vs AI”" in warnings
    assert "The description names a source of ideas (“GPT-4”" in warnings
    assert "every reviewer page and every mail" in warnings
    assert warnings.count("<li>") == 2  # "said" and "paid" hold no "AI": word boundaries
    # and the save itself says so
    assert page.count('class="warning"') == 2
