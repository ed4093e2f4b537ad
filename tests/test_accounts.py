"""Researcher accounts: invitation links (signed, single-use, expiring), self-service
sign-up waiting for approval, password reset, deactivation with a handover of studies,
an owner's invitation from the team page; and that no public answer says whether an
address has an account."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail, signing
from django.urls import reverse

from accounts.models import ResearcherInvitation, SignUpRequest
from accounts.roles import is_researcher, researcher_grant
from accounts.services import (
    AccountError,
    researcher_deactivate,
    researcher_invitation_create,
    researcher_invitation_token,
)
from studies.models import AuditEvent, StudyMember
from studies.services import study_create

pytestmark = pytest.mark.django_db
User = get_user_model()
PASSWORD = "a-long-pass-phrase-7"


@pytest.fixture
def admin_user(db):
    return User.objects.create_user("admin", email="admin@lab.org", password="x", is_staff=True)


@pytest.fixture
def researcher(owner):
    researcher_grant(user=owner)
    return owner


def _link(text: str) -> str:
    return re.search(r"https?://\S+", text).group(0)  # type: ignore[union-attr]


def _path(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def _without_csrf(response) -> str:
    return re.sub(r'"X-CSRFToken": "[^"]*"', "", response.content.decode())


def _accept(client, path: str, **extra):
    data = {"first_name": "Ada", "last_name": "Byron", "password1": PASSWORD}
    data["password2"] = PASSWORD
    data.update(extra)
    return client.post(path, data)


def test_an_administrator_invites_by_mail_and_page_and_the_link_works_once(client, admin_user):
    client.force_login(admin_user)
    page = client.post(reverse("accounts:researchers"), {"email": "ada@lab.org"})
    assert page.status_code == 200
    shown = re.search(r'id="invitation-link" readonly value="([^"]+)"', page.content.decode())
    assert shown and len(mail.outbox) == 1 and mail.outbox[0].to == ["ada@lab.org"]
    assert _link(mail.outbox[0].body) == shown.group(1)
    client.logout()
    path = _path(shown.group(1))
    assert client.get(path).status_code == 200
    response = _accept(client, path)
    assert response.status_code == 302 and response.url == reverse("studies:study_list")
    ada = User.objects.get(username="ada@lab.org")
    assert is_researcher(ada) and ada.get_full_name() == "Ada Byron"
    assert client.get(reverse("studies:study_new")).status_code == 200  # logged in
    client.logout()
    assert client.get(path).status_code == 410  # used
    assert _accept(client, path).status_code == 410
    assert User.objects.filter(email="ada@lab.org").count() == 1


def test_a_tampered_or_expired_invitation_is_refused(client, admin_user, monkeypatch):
    invitation, url = researcher_invitation_create(email="bo@lab.org", invited_by=admin_user)
    path = _path(url)
    assert client.get(path[:-3] + "xx/").status_code == 400
    old = signing.TimestampSigner.timestamp
    monkeypatch.setattr(
        signing.TimestampSigner,
        "timestamp",
        lambda self: signing.b62_encode(int(signing.b62_decode(old(self))) - 15 * 86400),
    )
    stale = researcher_invitation_token(invitation)
    monkeypatch.undo()
    assert client.get(reverse("accounts:invitation_open", args=[stale])).status_code == 410
    assert not User.objects.filter(email="bo@lab.org").exists()


def test_a_weak_password_or_an_existing_account_is_answered_without_using_the_link(
    client, admin_user, owner
):
    owner.email = "owner@lab.org"
    owner.save()
    _, url = researcher_invitation_create(email="cy@lab.org", invited_by=admin_user)
    weak = _accept(client, _path(url), password1="123", password2="123")
    assert weak.status_code == 400
    _, taken = researcher_invitation_create(email="owner@lab.org", invited_by=admin_user)
    answer = _accept(client, _path(taken))
    assert answer.status_code == 400 and b"log in, then open the link again" in answer.content
    assert ResearcherInvitation.objects.filter(accepted_at__isnull=True).count() == 2
    other = User.objects.create_user("other", email="other@lab.org", password="x")
    client.force_login(other)  # a forwarded link makes nobody else a researcher
    assert b"this invitation is for owner@lab.org" in client.post(_path(taken)).content.lower()
    client.force_login(owner)  # logged in, the owner of the address accepts
    assert client.post(_path(taken)).status_code == 302
    assert is_researcher(User.objects.get(pk=owner.pk))
    assert not is_researcher(User.objects.get(pk=other.pk))


def test_only_administrators_reach_the_researchers_page(client, researcher):
    client.force_login(researcher)
    assert client.get(reverse("accounts:researchers")).status_code == 403
    assert client.post(reverse("accounts:researchers"), {"email": "x@y.org"}).status_code == 403
    assert not ResearcherInvitation.objects.exists()


def test_sign_up_is_off_by_default(client):
    assert client.get(reverse("accounts:signup")).status_code == 404


def _sign_up(client, email: str):
    return client.post(
        reverse("accounts:signup"),
        {
            "email": email,
            "first_name": "Dee",
            "last_name": "Ray",
            "password1": PASSWORD,
            "password2": PASSWORD,
        },
    )


def test_sign_up_waits_for_approval_and_answers_alike_for_a_taken_address(
    client, settings, admin_user, owner
):
    settings.IDEAREVIEW_SIGNUP = True
    owner.email = "owner@lab.org"
    owner.save()
    new, taken = _sign_up(client, "dee@lab.org"), _sign_up(client, "OWNER@lab.org")
    assert new.status_code == taken.status_code == 302 and new.url == taken.url
    assert _without_csrf(client.get(new.url)) == _without_csrf(client.get(taken.url))
    assert not User.objects.filter(email__iexact="owner@lab.org").exclude(pk=owner.pk).exists()
    to = sorted(tuple(m.to) for m in mail.outbox)
    assert to == [("admin@lab.org",), ("owner@lab.org",)]  # the administrator; the taken address
    dee = User.objects.get(email="dee@lab.org")
    assert not dee.is_active and not is_researcher(dee)
    assert not client.login(username="dee@lab.org", password=PASSWORD)
    client.force_login(admin_user)
    pending = client.get(reverse("accounts:researchers")).content.decode()
    assert "dee@lab.org" in pending
    row = SignUpRequest.objects.get(user=dee)
    client.post(reverse("accounts:signup_decide", args=[row.pk]), {"decision": "approve"})
    dee.refresh_from_db()
    assert dee.is_active and is_researcher(dee)
    assert mail.outbox[-1].to == ["dee@lab.org"]
    row.refresh_from_db()
    assert row.status == "approved" and row.decided_by == admin_user


def test_sign_up_and_reset_are_rate_limited(client, settings):
    settings.IDEAREVIEW_SIGNUP = True
    answers = [_sign_up(client, f"p{i}@lab.org").status_code for i in range(6)]
    assert answers[:5] == [302] * 5 and answers[5] == 429
    resets = [
        client.post(reverse("accounts:password_reset"), {"email": f"q{i}@lab.org"}).status_code
        for i in range(11)
    ]
    assert resets[:10] == [302] * 10 and resets[10] == 429


def test_password_reset_answers_alike_and_its_link_works_once(client, owner):
    owner.email = "owner@lab.org"
    owner.save()
    known = client.post(reverse("accounts:password_reset"), {"email": "owner@lab.org"})
    unknown = client.post(reverse("accounts:password_reset"), {"email": "nobody@lab.org"})
    assert known.status_code == unknown.status_code == 302 and known.url == unknown.url
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["owner@lab.org"]
    path = _path(_link(mail.outbox[0].body))
    form = client.get(path, follow=True)  # Django swaps the token for a session marker
    assert b'id="password-set"' in form.content
    set_url = form.redirect_chain[-1][0]
    done = client.post(set_url, {"new_password1": PASSWORD, "new_password2": PASSWORD})
    assert done.status_code == 302
    assert client.login(username="owner", password=PASSWORD)
    client.logout()
    again = client.get(path, follow=True)
    assert b"cannot be used" in again.content
    # A fourth request for one address within the hour sends nothing, answering the same.
    for _ in range(3):
        client.post(reverse("accounts:password_reset"), {"email": "owner@lab.org"})
    assert len(mail.outbox) == 3


def test_deactivating_hands_studies_to_a_successor_in_each_audit_log(admin_user, researcher):
    study = study_create(owner=researcher, slug="leaving", title="Leaving study")
    heir = User.objects.create_user("heir", password="x")
    with pytest.raises(AccountError, match="choose who takes them over"):
        researcher_deactivate(user=researcher, successor=None, actor=admin_user)
    with pytest.raises(AccountError, match="not an active researcher"):
        researcher_deactivate(user=researcher, successor=heir, actor=admin_user)
    researcher_grant(user=heir)
    heir = User.objects.get(pk=heir.pk)  # permissions are cached per instance
    handed = researcher_deactivate(user=researcher, successor=heir, actor=admin_user)
    assert handed == 1
    researcher.refresh_from_db()
    assert not researcher.is_active
    assert list(study.members.values_list("user__username", "role")) == [("heir", "owner")]
    verbs = list(
        AuditEvent.objects.filter(study=study).order_by("seq").values_list("verb", flat=True)
    )
    assert "ownership_handed_over" in verbs and verbs[-1] == "member_removed"


def test_the_deactivation_page_shows_what_is_handed_over_and_changes_nothing_until_sent(
    client, admin_user, researcher
):
    study_create(owner=researcher, slug="shown", title="Shown study")
    client.force_login(admin_user)
    url = reverse("accounts:researcher_deactivate", args=[researcher.pk])
    page = client.get(url)
    assert page.status_code == 200 and "Shown study (shown)" in page.content.decode()
    assert client.post(url, {"successor": ""}).status_code == 400
    researcher.refresh_from_db()
    assert researcher.is_active


def test_an_owner_invites_a_colleague_into_the_team_when_allowed(client, settings, researcher):
    study = study_create(owner=researcher, slug="team-invite", title="Team study")
    client.force_login(researcher)
    url = reverse("studies:study_members", args=[study.slug])
    off = client.post(url, {"identifier": "eve@lab.org", "role": "editor"})
    assert off.status_code == 400 and not ResearcherInvitation.objects.exists()
    settings.IDEAREVIEW_OWNER_INVITES = True
    on = client.post(url, {"identifier": "eve@lab.org", "role": "editor"})
    assert on.status_code == 200 and mail.outbox[-1].to == ["eve@lab.org"]
    link = re.search(r'id="invitation-link" readonly value="([^"]+)"', on.content.decode())
    client.logout()
    assert _accept(client, _path(link.group(1))).status_code == 302  # type: ignore[union-attr]
    eve = StudyMember.objects.get(study=study, user__username="eve@lab.org")
    assert eve.role == "editor" and eve.added_by == researcher
    verbs = list(
        AuditEvent.objects.filter(study=study).order_by("seq").values_list("verb", flat=True)
    )
    assert verbs[-2:] == ["member_invited", "member_added"]
