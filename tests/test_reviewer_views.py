"""Reviewer pages against the personas: the assigned reviewer, an unassigned reviewer,
the owner, another researcher and anonymous visitors; plus the sign-up flow."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from studies.models import Assignment, Invitation, PairTask, Review, Reviewer, StudyMember
from studies.services.invitations import invitation_create, invitation_token
from studies.services.reviews import pair_tasks_create
from studies.services.study import study_close
from tests.factories import full_answers, make_review_study


@pytest.fixture
def seeded(db, owner):
    s = make_review_study(owner)
    pair_tasks_create(study=s.study, per_reviewer=1, seed=2)
    User = get_user_model()
    # An approved reviewer of the study with nothing assigned.
    idle_user = User.objects.create_user("idle@example.org", email="idle@example.org", password="x")
    s.unassigned = Reviewer.objects.create(
        study=s.study,
        user=idle_user,
        pseudonym="R050",
        screening="approved",
        consent_at=timezone.now(),
        honor_code_at=timezone.now(),
        profile_completed_at=timezone.now(),
        topic_preferences=["Bias"],
        preferred_load=2,
    )
    return s


def reviewer_urls(assignment: Assignment, task: PairTask) -> dict[str, tuple[str, str]]:
    """name -> (method, url) of every reviewer view bound to one object."""
    return {
        "review_page": ("get", reverse("studies:review_page", args=[assignment.pk])),
        "review_autosave": ("post", reverse("studies:review_autosave", args=[assignment.pk])),
        "review_submit": ("post", reverse("studies:review_submit", args=[assignment.pk])),
        "pair_page": ("get", reverse("studies:pair_page", args=[task.pk])),
        "pair_submit": ("post", reverse("studies:pair_submit", args=[task.pk])),
        "consent": ("get", reverse("studies:reviewer_consent", args=[assignment.reviewer_id])),
        "profile": ("get", reverse("studies:reviewer_profile", args=[assignment.reviewer_id])),
    }


def first_work(seeded, k: int = 0) -> tuple[Assignment, PairTask]:
    rev = seeded.reviewers[k]
    return (
        Assignment.objects.filter(reviewer=rev).order_by("pk").first(),
        PairTask.objects.filter(reviewer=rev).order_by("pk").first(),
    )


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_the_reviewer_login(client, seeded):
    a, t = first_work(seeded)
    for name, (method, url) in {
        **reviewer_urls(a, t),
        "home": ("get", reverse("studies:reviewer_home")),
    }.items():
        response = getattr(client, method)(url)
        assert response.status_code == 302, name
        assert response["Location"].startswith(reverse("studies:reviewer_login")), name


@pytest.mark.django_db
def test_assigned_reviewer_opens_their_own_review_and_pair_pages(client, seeded):
    a, t = first_work(seeded)
    client.force_login(seeded.users[0])
    home = client.get(reverse("studies:reviewer_home")).content.decode()
    assert reverse("studies:review_page", args=[a.pk]) in home
    assert reverse("studies:pair_page", args=[t.pk]) in home
    page = client.get(reverse("studies:review_page", args=[a.pk])).content.decode()
    assert "Problem Statement" in page and "Fallback Plan" in page
    # Every anchor of every scale is on the page.
    for m in seeded.study.form_definition().metrics:
        for anchor in m.anchors.values():
            assert anchor.replace("'", "&#x27;") in page
    assert client.get(reverse("studies:pair_page", args=[t.pk])).status_code == 200


@pytest.mark.django_db
def test_reviewer_cannot_open_other_reviewers_assignment(client, seeded):
    a, t = first_work(seeded, 1)
    client.force_login(seeded.users[0])
    for name, (method, url) in reviewer_urls(a, t).items():
        assert getattr(client, method)(url).status_code == 404, name


@pytest.mark.django_db
def test_unassigned_reviewer_gets_404_for_every_assignment(client, seeded):
    a, t = first_work(seeded)
    client.force_login(seeded.unassigned.user)
    for name, (method, url) in reviewer_urls(a, t).items():
        assert getattr(client, method)(url).status_code == 404, name
    home = client.get(reverse("studies:reviewer_home")).content.decode()
    assert "No ideas assigned yet" in home


@pytest.mark.django_db
def test_owner_and_other_researcher_cannot_open_reviewer_pages(client, seeded, other_researcher):
    a, t = first_work(seeded)
    for user in (seeded.owner, other_researcher):
        client.force_login(user)
        for name, (method, url) in reviewer_urls(a, t).items():
            assert getattr(client, method)(url).status_code == 404, name
        assert client.get(reverse("studies:reviewer_home")).status_code == 200


@pytest.mark.django_db
def test_withdrawn_and_dropped_work_is_out_of_reach(client, seeded):
    a, t = first_work(seeded)
    client.force_login(seeded.users[0])
    Assignment.objects.filter(pk=a.pk).update(status="withdrawn")
    assert client.get(reverse("studies:review_page", args=[a.pk])).status_code == 404
    Reviewer.objects.filter(pk=seeded.reviewers[0].pk).update(dropped_at=timezone.now())
    assert client.get(reverse("studies:pair_page", args=[t.pk])).status_code == 404


@pytest.mark.django_db
def test_state_changes_need_post_and_csrf(seeded):
    a, t = first_work(seeded)
    c = Client(enforce_csrf_checks=True)
    c.force_login(seeded.users[0])
    for url in [
        reverse("studies:review_autosave", args=[a.pk]),
        reverse("studies:review_submit", args=[a.pk]),
        reverse("studies:pair_submit", args=[t.pk]),
    ]:
        assert c.get(url).status_code == 405
        assert c.post(url, {}).status_code == 403


# --------------------------------------------------------------------------- sign-up


@pytest.mark.django_db
def test_invitation_sign_up_consent_and_profile(client, owner):
    s = make_review_study(owner, commit=False)
    inv = invitation_create(study=s.study, email="new@example.org", name="Nia")
    url = reverse("studies:invitation_open", args=[invitation_token(inv)])
    assert url in mail.outbox[0].body
    page = client.get(url)
    assert page.status_code == 200 and "new@example.org" in page.content.decode()
    bad = client.post(url, {"email": "new@example.org", "password1": "a", "password2": "b"})
    assert bad.status_code == 400
    r = client.post(
        url,
        {"email": "new@example.org", "password1": "Str0ng-pass-9", "password2": "Str0ng-pass-9"},
    )
    reviewer = Reviewer.objects.get(study=s.study, user__username="new@example.org")
    assert r["Location"] == reverse("studies:reviewer_consent", args=[reviewer.pk])
    # Profile before consent goes back to consent.
    assert client.get(reverse("studies:reviewer_profile", args=[reviewer.pk]))["Location"].endswith(
        reverse("studies:reviewer_consent", args=[reviewer.pk])
    )
    assert (
        client.post(
            reverse("studies:reviewer_consent", args=[reviewer.pk]), {"consent": "on"}
        ).status_code
        == 400
    )
    client.post(
        reverse("studies:reviewer_consent", args=[reviewer.pk]),
        {"consent": "on", "honor_code": "on"},
    )
    profile = {
        "institution": "Elsewhere Lab",
        "position": "Postdoc",
        "major_venue_papers": "3",
        "scholar_url": "https://scholar.example.org/x",
        "reviewing_experience": "ACL twice",
        "topic_first": "Coding",
        "topic_second": "Coding",
        "preferred_load": "3",
    }
    assert (
        client.post(reverse("studies:reviewer_profile", args=[reviewer.pk]), profile).status_code
        == 400
    )
    profile["topic_second"] = "Bias"
    profile["preferred_load"] = "9"  # outside the study's range
    assert (
        client.post(reverse("studies:reviewer_profile", args=[reviewer.pk]), profile).status_code
        == 400
    )
    profile["preferred_load"] = "3"
    client.post(reverse("studies:reviewer_profile", args=[reviewer.pk]), profile)
    reviewer.refresh_from_db()
    assert reviewer.topic_preferences == ["Coding", "Bias"] and reviewer.preferred_load == 3
    assert reviewer.next_step() == "screening" and reviewer.consent_at and reviewer.honor_code_at
    # The link is single-use: a second visit gets a clear page, not an error.
    client.logout()
    again = client.get(url)
    assert again.status_code == 410 and "already been used" in again.content.decode()


@pytest.mark.django_db
def test_logged_in_user_joins_with_the_existing_account(client, owner, other_researcher):
    s = make_review_study(owner, commit=False, n_reviewers=0)
    inv = invitation_create(study=s.study, email="other@example.org", send=False)
    url = reverse("studies:invitation_open", args=[invitation_token(inv)])
    client.force_login(other_researcher)
    assert "Join the study with this account" in client.get(url).content.decode()
    client.post(url, {"action": "accept"})
    assert Reviewer.objects.get(study=s.study).user == other_researcher


@pytest.mark.django_db
def test_bad_links_get_clear_pages_and_probing_is_limited(client, owner):
    s = make_review_study(owner, commit=False, n_reviewers=0)
    inv = invitation_create(study=s.study, email="x@example.org", send=False)
    token = invitation_token(inv)
    tampered = client.get(reverse("studies:invitation_open", args=[token[:-3] + "abc"]))
    assert tampered.status_code == 400 and "not valid" in tampered.content.decode()
    Invitation.objects.filter(pk=inv.pk).update(expires_at=timezone.now() - timedelta(days=1))
    expired = client.get(reverse("studies:invitation_open", args=[token]))
    assert expired.status_code == 410 and "expired" in expired.content.decode()
    codes = [
        client.get(reverse("studies:invitation_open", args=[f"guess{n}"])).status_code
        for n in range(25)
    ]
    assert codes[-1] == 429 and 500 not in codes


@pytest.mark.django_db
def test_login_attempts_are_rate_limited(client, seeded):
    url = reverse("studies:reviewer_login")
    user = seeded.users[0]
    codes = [
        client.post(url, {"username": user.username, "password": "wrong"}).status_code
        for _ in range(11)
    ]
    assert codes[:10] == [400] * 10 and codes[10] == 429
    # Even the right password waits out the window.
    assert (
        client.post(url, {"username": user.username, "password": "pw-Rev-12345"}).status_code == 429
    )


@pytest.mark.django_db
def test_reviewer_login_redirects_to_a_safe_next_only(client, seeded):
    url = reverse("studies:reviewer_login")
    user = seeded.users[0]
    r = client.post(
        url,
        {"username": user.username, "password": "pw-Rev-12345", "next": "https://evil.example/"},
    )
    assert r["Location"] == reverse("studies:reviewer_home")


@pytest.mark.django_db
def test_the_site_root_and_a_login_land_reviewers_on_their_reviews_and_teams_on_studies(
    client, seeded
):
    # The walk of a reviewer who opens the site: the root asks them to log in first.
    login_page = client.get("/", follow=True)
    next_url = login_page.context["next"]
    user = seeded.users[0]
    r = client.post(
        reverse("login"),
        {"username": user.username, "password": "pw-Rev-12345", "next": next_url},
        follow=True,
    )
    assert r.redirect_chain[-1][0] == reverse("studies:reviewer_home")
    # A same-site next is kept.
    client.logout()
    form = {"username": user.username, "password": "pw-Rev-12345", "next": "/studies/"}
    assert client.post(reverse("login"), form)["Location"] == "/studies/"
    client.force_login(seeded.study.owner)
    assert client.get("/")["Location"] == reverse("studies:study_list")
    # An owner who also reviews somewhere keeps the studies, with a link to the reviews.
    Reviewer.objects.create(study=seeded.study, user=seeded.study.owner, pseudonym="R099")
    assert client.get("/")["Location"] == reverse("studies:study_list")
    studies = client.get(reverse("studies:study_list")).content.decode()
    assert f'href="{reverse("studies:reviewer_home")}"' in studies


@pytest.mark.django_db
def test_a_reviewer_who_opens_the_studies_page_goes_to_their_reviews(client, seeded):
    """A reviewer on no team sees no empty researchers' page; a team member keeps it."""
    client.force_login(seeded.users[0])
    r = client.get(reverse("studies:study_list"))
    assert r.status_code == 302 and r["Location"] == reverse("studies:reviewer_home")
    # The same reviewer made a viewer of a study (not a researcher) sees the studies.
    StudyMember.objects.create(
        study=seeded.study, user=seeded.users[0], role=StudyMember.Role.VIEWER
    )
    page = client.get(reverse("studies:study_list"))
    assert page.status_code == 200 and seeded.study.title in page.content.decode()


# --------------------------------------------------------------------------- the review


@pytest.mark.django_db
def test_autosave_keeps_a_draft_and_reload_shows_it(client, seeded):
    a, _ = first_work(seeded)
    client.force_login(seeded.users[0])
    client.get(reverse("studies:review_page", args=[a.pk]))
    r = client.post(
        reverse("studies:review_autosave", args=[a.pk]),
        {"novelty": "7", "novelty_rationale": "draft words here", "version": "0"},
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 200 and "Draft saved" in r.content.decode()
    assert "<html" not in r.content.decode()
    page = client.get(reverse("studies:review_page", args=[a.pk])).content.decode()
    assert "draft words here" in page and 'value="7" checked' in page
    a.refresh_from_db()
    assert a.status == "draft" and a.opened_at is not None
    # Without htmx, the same endpoint saves and redirects back.
    r = client.post(
        reverse("studies:review_autosave", args=[a.pk]), {"novelty": "5", "version": "0"}
    )
    assert r.status_code == 302


@pytest.mark.django_db
def test_submit_lists_exactly_what_is_missing(client, seeded):
    a, _ = first_work(seeded)
    client.force_login(seeded.users[0])
    data = full_answers(seeded.study)
    del data["feasibility"]
    data["novelty_rationale"] = "too short"
    r = client.post(reverse("studies:review_submit", args=[a.pk]), data)
    page = r.content.decode()
    assert r.status_code == 400
    assert "Feasibility: a score is missing." in page
    assert "Novelty rationale has 2 words; write at least 25." in page
    assert not Review.objects.filter(assignment=a, status="submitted").exists()
    # What was typed is kept as a draft.
    assert Review.objects.get(assignment=a).draft["novelty_rationale"] == "too short"


@pytest.mark.django_db
def test_double_submit_stores_one_review_and_edits_until_close(client, seeded):
    a, _ = first_work(seeded)
    client.force_login(seeded.users[0])
    data = full_answers(seeded.study)
    url = reverse("studies:review_submit", args=[a.pk])
    assert client.post(url, data).status_code == 302
    assert client.post(url, data).status_code == 302
    review = Review.objects.get(assignment=a)
    assert review.status == "submitted" and review.revisions.count() == 1
    assert review.minutes == 25 and review.minutes_measured is not None
    data["overall"] = "9"
    client.post(url, data)
    assert review.revisions.count() == 2
    study_close(study=seeded.study)
    data["overall"] = "1"
    client.post(url, data)
    assert Review.objects.get(assignment=a).scores.get(metric="overall").score == 9
    page = client.get(reverse("studies:review_page", args=[a.pk])).content.decode()
    assert "can no longer be changed" in page


@pytest.mark.django_db
def test_a_closed_studys_work_is_offered_to_view_not_to_edit_or_start(client, seeded):
    a, _ = first_work(seeded)
    client.force_login(seeded.users[0])
    client.post(reverse("studies:review_submit", args=[a.pk]), full_answers(seeded.study))
    home = reverse("studies:reviewer_home")
    page = client.get(home).content.decode()
    assert "View or edit" in page and ">Start<" in page and ">Rate<" in page
    study_close(study=seeded.study)
    page = client.get(home).content.decode()
    assert "View or edit" not in page and ">Start<" not in page and ">Rate<" not in page
    assert ">View<" in page


@pytest.mark.django_db
def test_pair_page_shows_both_sides_and_stores_judgments(client, seeded):
    _, t = first_work(seeded)
    client.force_login(seeded.users[0])
    page = client.get(reverse("studies:pair_page", args=[t.pk])).content.decode()
    assert "First idea" in page and "Second idea" in page
    url = reverse("studies:pair_submit", args=[t.pk])
    partial = {d: "tie" for d in t.dimensions[:-1]}
    r = client.post(url, partial)
    assert r.status_code == 400 and "choose one" in r.content.decode()
    full = {d: "second" for d in t.dimensions}
    assert client.post(url, full).status_code == 302
    assert client.post(url, full).status_code == 302
    t.refresh_from_db()
    assert t.status == "submitted" and t.judgments.count() == len(t.dimensions)
    expected = "a" if not t.a_on_left else "b"
    assert set(t.judgments.values_list("winner", flat=True)) == {expected}
    assert (
        'id="submit-pair"' in client.get(reverse("studies:pair_page", args=[t.pk])).content.decode()
    )
    # Closed: the rating is shown as it is, with no button that looks usable.
    from studies.services.study import study_close

    study_close(study=seeded.study)
    page = client.get(reverse("studies:pair_page", args=[t.pk])).content.decode()
    assert "can no longer be changed" in page and 'id="submit-pair"' not in page


@pytest.mark.django_db
def test_a_stale_second_tab_never_replaces_a_submitted_review_without_a_warning(client, seeded):
    a, _ = first_work(seeded)
    client.force_login(seeded.users[0])
    page = client.get(reverse("studies:review_page", args=[a.pk])).content.decode()
    assert 'name="version" value="0"' in page  # both tabs opened now
    data = full_answers(seeded.study)
    submit = reverse("studies:review_submit", args=[a.pk])
    autosave = reverse("studies:review_autosave", args=[a.pk])
    # tab A saves drafts and submits: its own drafts never make it stale
    assert (
        client.post(autosave, {**data, "version": "0"}, HTTP_HX_REQUEST="true").status_code == 200
    )
    assert client.post(submit, {**data, "version": "0"}).status_code == 302
    review = Review.objects.get(assignment=a)
    assert review.version == 1 and review.draft == {}

    # tab B, opened before, autosaves what it still shows: refused with a message
    stale = {**data, "overall": "2", "overall_rationale": "an old draft " * 10, "version": "0"}
    r = client.post(autosave, stale, HTTP_HX_REQUEST="true")
    assert r.status_code == 409
    assert "submitted from another tab or window" in r.content.decode()
    review.refresh_from_db()
    assert review.draft == {}
    page = client.get(reverse("studies:review_page", args=[a.pk])).content.decode()
    assert 'value="6" checked' in page and "an old draft" not in page

    # tab B submits: the page comes back with the warning and what it sent; nothing stored
    r = client.post(submit, stale)
    assert r.status_code == 409
    body = r.content.decode()
    assert 'id="stale"' in body and "an old draft" in body
    assert 'name="version" value="1"' in body
    assert review.revisions.count() == 1
    assert review.scores.get(metric="overall").score == 6
    # submitting again from the warned page is a deliberate edit
    assert client.post(submit, {**stale, "version": "1"}).status_code == 302
    assert review.revisions.count() == 2
    assert Review.objects.get(assignment=a).scores.get(metric="overall").score == 2


@pytest.mark.django_db
def test_a_double_click_on_submit_is_not_taken_for_a_stale_tab(client, seeded):
    a, _ = first_work(seeded)
    client.force_login(seeded.users[0])
    data = {**full_answers(seeded.study), "version": "0"}
    submit = reverse("studies:review_submit", args=[a.pk])
    assert client.post(submit, data).status_code == 302
    assert client.post(submit, data).status_code == 302
    assert Review.objects.get(assignment=a).revisions.count() == 1


@pytest.mark.django_db
def test_a_reviewers_menu_leads_to_their_reviews_and_a_researchers_to_the_studies(seeded, client):
    client.force_login(seeded.users[0])
    page = client.get(reverse("studies:reviewer_home")).content.decode()
    menu = page.split("<main>")[0]
    assert reverse("studies:reviewer_home") in menu
    assert f'href="{reverse("studies:study_list")}"' not in menu
    client.force_login(seeded.study.owner)
    menu = client.get(reverse("studies:study_list")).content.decode().split("<main>")[0]
    assert f'href="{reverse("studies:study_list")}"' in menu
    assert reverse("studies:reviewer_home") not in menu
