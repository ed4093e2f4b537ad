"""Owner pages for recruitment, assignment, pair tasks and progress, against the personas."""

from __future__ import annotations

import io

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

from studies.analysis.rounding import counted
from studies.models import Assignment, JobRun, PairTask, Reviewer
from studies.services.invitations import invitation_create
from studies.tasks import preview_assignment
from tests.factories import make_review_study


@pytest.fixture
def seeded(db, owner):
    return make_review_study(owner)


def owner_get_urls(slug: str) -> list[str]:
    return [
        reverse(name, args=[slug])
        for name in [
            "studies:study_progress",
            "studies:study_reviewers",
            "studies:study_invitations",
            "studies:assignment_preview",
            "studies:pair_tasks",
        ]
    ]


def owner_post_urls(seeded) -> list[str]:
    slug = seeded.study.slug
    rev = seeded.reviewers[0]
    inv = invitation_create(study=seeded.study, email="z@example.org", send=False)
    return [
        reverse("studies:study_reminders", args=[slug]),
        reverse("studies:study_close", args=[slug]),
        reverse("studies:study_due", args=[slug]),
        reverse("studies:reviewers_approve_by_rule", args=[slug]),
        reverse("studies:reviewer_screen", args=[slug, rev.pk]),
        reverse("studies:reviewer_drop", args=[slug, rev.pk]),
        reverse("studies:study_invitations", args=[slug]),
        reverse("studies:invitations_upload", args=[slug]),
        reverse("studies:invitation_resend", args=[slug, inv.pk]),
        reverse("studies:assignment_preview", args=[slug]),
        reverse("studies:assignment_commit", args=[slug]),
        reverse("studies:pair_tasks", args=[slug]),
        reverse("studies:pair_tasks_upload", args=[slug]),
    ]


@pytest.mark.django_db
def test_owner_opens_every_recruitment_page(client, seeded):
    client.force_login(seeded.owner)
    for url in owner_get_urls(seeded.study.slug):
        assert client.get(url).status_code == 200, url
    detail = client.get(reverse("studies:study_detail", args=[seeded.study.slug])).content.decode()
    assert reverse("studies:study_progress", args=[seeded.study.slug]) in detail


@pytest.mark.django_db
def test_other_researcher_and_reviewers_get_404_for_every_owner_page(
    client, seeded, other_researcher
):
    posts = owner_post_urls(seeded)
    for user in (other_researcher, seeded.users[0]):
        client.force_login(user)
        for url in owner_get_urls(seeded.study.slug):
            assert client.get(url).status_code == 404, url
        for url in posts:
            assert (
                client.post(url, {"decision": "approve", "confirm": "close"}).status_code == 404
            ), url
    seeded.study.refresh_from_db()
    assert seeded.study.status == "reviewing"


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_log_in(client, seeded):
    for url in owner_get_urls(seeded.study.slug) + owner_post_urls(seeded):
        response = client.post(url) if "/remind/" in url else client.get(url)
        assert response.status_code == 302 and "login" in response["Location"], url


@pytest.mark.django_db
def test_owner_state_changes_need_post_and_csrf(seeded):
    c = Client(enforce_csrf_checks=True)
    c.force_login(seeded.owner)
    for url in owner_post_urls(seeded):
        assert c.post(url, {}).status_code == 403, url
    for name in ["study_reminders", "study_close", "assignment_commit"]:
        assert c.get(reverse(f"studies:{name}", args=[seeded.study.slug])).status_code == 405


@pytest.mark.django_db
def test_owner_invites_one_and_many_reviewers(client, owner):
    s = make_review_study(owner, commit=False, n_reviewers=0)
    client.force_login(owner)
    url = reverse("studies:study_invitations", args=[s.study.slug])
    r = client.post(url, {"name": "Ada", "email": "ada@example.org"})
    assert r.status_code == 302 and len(mail.outbox) == 1
    assert (
        "/studies/r/invite/" in mail.outbox[0].body and "http://testserver" in mail.outbox[0].body
    )
    page = client.get(url).content.decode()
    assert "ada@example.org" in page and "open" in page
    upload = reverse("studies:invitations_upload", args=[s.study.slug])
    bad = io.BytesIO(b"Bo,bo@example.org\nCy,broken\n")
    bad.name = "people.csv"
    r = client.post(upload, {"file": bad})
    assert r.status_code == 400 and "broken is not an email address" in r.content.decode()
    good = io.BytesIO(b"name,email\nBo,bo@example.org\nCy,cy@example.org\n")
    good.name = "people.csv"
    assert client.post(upload, {"file": good}).status_code == 302
    assert s.study.invitations.count() == 3 and len(mail.outbox) == 3
    inv = s.study.invitations.get(email="bo@example.org")
    client.post(reverse("studies:invitation_resend", args=[s.study.slug, inv.pk]))
    assert len(mail.outbox) == 4 and mail.outbox[-1].subject.startswith("Reminder")


@pytest.mark.django_db
def test_owner_screens_reviewers_with_htmx_rows(client, owner):
    s = make_review_study(owner, commit=False)
    rev = s.reviewers[0]
    Reviewer.objects.filter(pk=rev.pk).update(screening="pending")
    client.force_login(owner)
    url = reverse("studies:reviewer_screen", args=[s.study.slug, rev.pk])
    r = client.post(url, {"decision": "reject", "reason": ""}, headers={"HX-Request": "true"})
    assert r.status_code == 400 and "Give a reason" in r.content.decode()
    r = client.post(
        url, {"decision": "reject", "reason": "no papers"}, headers={"HX-Request": "true"}
    )
    body = r.content.decode()
    assert r.status_code == 200 and body.strip().startswith("<tr") and "no papers" in body
    r = client.post(url, {"decision": "approve", "reason": ""})
    assert r.status_code == 302
    rev.refresh_from_db()
    assert rev.screening == "approved"
    page = client.get(reverse("studies:study_reviewers", args=[s.study.slug])).content.decode()
    assert "meets" in page and rev.pseudonym in page


@pytest.mark.django_db
def test_owner_previews_then_commits_the_assignment(
    client, owner, django_capture_on_commit_callbacks
):
    s = make_review_study(owner, commit=False)
    client.force_login(owner)
    url = reverse("studies:assignment_preview", args=[s.study.slug])
    with django_capture_on_commit_callbacks(execute=False):
        r = client.post(url, {"mode": "keep", "seed": "11"})
    assert r.status_code == 302
    preview_assignment(JobRun.objects.get(study=s.study, kind="assignment").pk)
    page = client.get(r["Location"]).content.decode()
    assert "data:image/svg+xml" in page and "Commit this assignment" in page and "R001" in page
    assert not Assignment.objects.filter(study=s.study).exists()
    job = JobRun.objects.get(study=s.study, kind="assignment")
    r = client.post(reverse("studies:assignment_commit", args=[s.study.slug]), {"job": job.pk})
    assert r.status_code == 302
    assert Assignment.objects.filter(study=s.study).count() == 18
    # A second commit of the same preview is refused with a message, not an error.
    r = client.post(reverse("studies:assignment_commit", args=[s.study.slug]), {"job": job.pk})
    assert r.status_code == 302 and f"job={job.pk}" in r["Location"]
    assert (
        client.post(
            reverse("studies:assignment_commit", args=[s.study.slug]), {"job": "x"}
        ).status_code
        == 404
    )


def _preview_page(client, owner, study, capture) -> tuple[str, str]:
    """Preview the assignment as the owner's form does, run the job as the worker would,
    and return the preview page and its list of remedies (empty when it has none)."""
    client.force_login(owner)
    with capture(execute=False):
        r = client.post(reverse("studies:assignment_preview", args=[study.slug]), {"mode": "keep"})
    preview_assignment(JobRun.objects.get(study=study, kind="assignment").pk)
    page = client.get(r["Location"]).content.decode()
    if 'id="problem-remedies"' not in page:
        return page, ""
    return page, page.split('id="problem-remedies"', 1)[1].split("</ul>", 1)[0]


@pytest.mark.django_db
def test_infeasible_preview_explains_the_rule(client, owner, django_capture_on_commit_callbacks):
    s = make_review_study(owner, commit=False)
    Reviewer.objects.filter(study=s.study).exclude(pk=s.reviewers[0].pk).update(
        screening="rejected"
    )
    page, remedies = _preview_page(client, owner, s.study, django_capture_on_commit_callbacks)
    assert "No assignment satisfies every rule" in page and "Commit this assignment" not in page
    # and it says what the owner can change, with links to the pages where they change it
    slug = s.study.slug
    for name in ("studies:study_invitations", "studies:study_reviewers", "studies:study_settings"):
        assert f'href="{reverse(name, args=[slug])}"' in remedies, name
    assert "Largest reviewer load" in remedies and "Fewest reviews per idea" in remedies


@pytest.mark.django_db
def test_an_infeasible_preview_says_which_ideas_it_left_out_and_how_to_bring_them_in(
    client, owner, django_capture_on_commit_callbacks
):
    """With no approved text the solver sees no ideas and reports missing conditions; the
    page must also say why the ideas are missing, or the owner chases the wrong cause."""
    from studies.models import Idea

    s = make_review_study(owner, commit=False)
    Idea.objects.filter(study=s.study).update(
        normalization_status=Idea.NormalizationStatus.PROPOSED
    )
    page, remedies = _preview_page(client, owner, s.study, django_capture_on_commit_callbacks)
    n = Idea.objects.filter(study=s.study).count()
    assert "No assignment satisfies every rule" in page
    assert n > 1 and f"{n} ideas have no approved text yet and are left out" in page
    assert f'href="{reverse("studies:normalization", args=[s.study.slug])}"' in remedies


@pytest.mark.django_db
def test_dropping_a_reviewer_withdraws_their_open_work(client, seeded):
    client.force_login(seeded.owner)
    rev = seeded.reviewers[0]
    # The list's link asks first: it says what would be withdrawn and kept, and changes
    # nothing.
    listing = client.get(reverse("studies:study_reviewers", args=[seeded.study.slug]))
    url = reverse("studies:reviewer_drop", args=[seeded.study.slug, rev.pk])
    assert f'href="{url}"' in listing.content.decode()
    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    open_n = Assignment.objects.filter(reviewer=rev, status__in=["pending", "draft"]).count()
    assert open_n > 0 and counted(open_n, "open review") in html and 'id="drop-confirm"' in html
    rev.refresh_from_db()
    assert rev.dropped_at is None
    r = client.post(reverse("studies:reviewer_drop", args=[seeded.study.slug, rev.pk]))
    assert r["Location"] == reverse("studies:assignment_preview", args=[seeded.study.slug])
    assert set(Assignment.objects.filter(reviewer=rev).values_list("status", flat=True)) == {
        "withdrawn"
    }


@pytest.mark.django_db
def test_owner_creates_and_uploads_pair_tasks(client, seeded):
    client.force_login(seeded.owner)
    url = reverse("studies:pair_tasks", args=[seeded.study.slug])
    r = client.post(url, {"per_reviewer": "1", "condition_a": "Human_Experts", "condition_b": ""})
    assert r.status_code == 400
    r = client.post(
        url,
        {
            "per_reviewer": "1",
            "condition_a": "Human_Experts",
            "condition_b": "AI_Ideas",
            "seed": "4",
        },
    )
    assert r.status_code == 302 and PairTask.objects.filter(study=seeded.study).count() == 6
    ext = {i.pk: i.memberships.first().external_id for i in seeded.ideas}
    bias = [i for i in seeded.ideas if i.topic.name == "Bias" and not i.author_institution]
    rev = next(r for r in seeded.reviewers if "Bias" in r.topic_preferences)
    csv_text = f"reviewer,idea_a,idea_b\n{rev.pseudonym},{ext[bias[0].pk]},{ext[bias[1].pk]}\n"
    upload = io.BytesIO(csv_text.encode())
    upload.name = "pairs.csv"
    r = client.post(
        reverse("studies:pair_tasks_upload", args=[seeded.study.slug]), {"file": upload}
    )
    assert r.status_code in (302, 400)
    if r.status_code == 400:  # the random pairs may already hold this one
        assert "already assigned" in r.content.decode()
    page = client.get(url).content.decode()
    assert "Human_Experts" in page and "Shown first" in page


@pytest.mark.django_db
def test_progress_polls_a_fragment_and_owner_can_remind_and_close(client, seeded):
    client.force_login(seeded.owner)
    url = reverse("studies:study_progress", args=[seeded.study.slug])
    page = client.get(url).content.decode()
    assert 'hx-get="' + url + '"' in page and 'href="' + url + '"' in page
    fragment = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert fragment.strip().startswith('<div id="progress"') and "<html" not in fragment
    assert "0</strong> of 18 submitted" in fragment
    mail.outbox.clear()
    client.post(reverse("studies:study_reminders", args=[seeded.study.slug]))
    assert len(mail.outbox) == len(seeded.reviewers)
    client.post(
        reverse("studies:study_due", args=[seeded.study.slug]),
        {"reviews_due_at": "2000-01-01T10:00"},
    )
    fragment = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "18 overdue" in fragment
    client.post(reverse("studies:study_close", args=[seeded.study.slug]), {})
    seeded.study.refresh_from_db()
    assert seeded.study.status == "reviewing"
    client.post(reverse("studies:study_close", args=[seeded.study.slug]), {"confirm": "close"})
    seeded.study.refresh_from_db()
    assert seeded.study.status == "closed"
    # Closed: no reminders or due date offered, and a reminder posted anyway is refused.
    page = client.get(url).content.decode()
    assert reverse("studies:study_reminders", args=[seeded.study.slug]) not in page
    assert reverse("studies:study_due", args=[seeded.study.slug]) not in page
    mail.outbox.clear()
    r = client.post(reverse("studies:study_reminders", args=[seeded.study.slug]), follow=True)
    assert "closed" in r.content.decode() and "sends no reminders" in r.content.decode()
    assert mail.outbox == []
    due = seeded.study.reviews_due_at
    r = client.post(
        reverse("studies:study_due", args=[seeded.study.slug]),
        {"reviews_due_at": "2030-01-01T10:00"},
        follow=True,
    )
    assert "so it takes no due date" in r.content.decode()
    seeded.study.refresh_from_db()
    assert seeded.study.reviews_due_at == due
