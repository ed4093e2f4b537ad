"""Arrival from a participant platform: ids from the link, places and their cap, resuming
only with the browser's secret or the platform session, screening and work on arrival,
release of abandoned places, completion with the code, the bulk files, and the ids kept
out of every export."""

from __future__ import annotations

import json
import re
import zipfile
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from studies.models import Assignment, PlatformParticipant, Review, Reviewer
from studies.protocol.arrivals import (
    ArrivalRefused,
    OfferedIdea,
    arrival_ids,
    arrival_pick,
)
from studies.services.invitations import (
    RecruitmentError,
    invitation_create,
    invitation_token,
    reviewer_consent,
    reviewer_payment_handle_set,
)
from studies.services.payments import review_decide
from studies.services.platform import (
    completion_redirect_url,
    platform_arrival_url,
    platform_arrive,
    platform_complete,
    platform_decisions,
    platform_file,
    platform_link_for,
    platform_places_sweep,
    platform_profile_save,
)
from studies.services.reviews import review_submit
from tests.factories import (
    PLATFORM_CODE,
    PLATFORM_COMPLETION_URL,
    cleaned,
    make_platform_study,
    platform_profile,
)

PID = "5f3c9a7e2b1d4e6f8a0b1c2d"


def q(pid: str = PID, session: str = "sess-1", study: str = "plat-study") -> dict[str, str]:
    return {"PROLIFIC_PID": pid, "STUDY_ID": study, "SESSION_ID": session}


# --------------------------------------------------------------------------- pure


def test_arrival_ids_read_the_mapped_parameters_and_refuse_a_missing_or_odd_id():
    ids = arrival_ids(
        {"wid": "W-77", "sid": "S1"}, participant_param="wid", study_param="sid", session_param=""
    )
    assert (ids.participant, ids.study, ids.session) == ("W-77", "S1", "")
    with pytest.raises(ArrivalRefused, match="URL parameter wid"):
        arrival_ids({}, participant_param="wid", study_param="", session_param="")
    with pytest.raises(ArrivalRefused, match="not a valid id"):
        arrival_ids({"wid": "<script>"}, participant_param="wid", study_param="", session_param="")


def test_arrival_pick_gives_both_kinds_skips_full_and_own_institution_ideas():
    kinds = {"H": "human", "A": "ai"}
    ideas = [
        OfferedIdea("h1", "Bias", ("H",), ("Crowd Lab",), 0),  # own institution
        OfferedIdea("h2", "Bias", ("H",), (), 3),  # full (max 3)
        OfferedIdea("h3", "Bias", ("H",), (), 1),
        OfferedIdea("a1", "Bias", ("A",), (), 2),
        OfferedIdea("a2", "Bias", ("A",), (), 0),
        OfferedIdea("c1", "Coding", ("A",), (), 0),  # other topic
    ]
    picked = arrival_pick(
        ideas,
        condition_kinds=kinds,
        topics=["Bias"],
        load=2,
        institution="Crowd Lab",
        max_reviews=3,
        seed=1,
    )
    assert sorted(picked) == ["a2", "h3"]
    # More load than ideas on offer: all that can be given, no more.
    everything = arrival_pick(
        ideas,
        condition_kinds=kinds,
        topics=["Bias"],
        load=6,
        institution="Crowd Lab",
        max_reviews=3,
        seed=1,
    )
    assert sorted(everything) == ["a1", "a2", "h3"]


# --------------------------------------------------------------------------- services


def _approved(study, pid=PID, session="sess-1"):
    arrival = platform_arrive(study=study, query=q(pid, session))
    reviewer_consent(reviewer=arrival.reviewer)
    outcome = platform_profile_save(reviewer=arrival.reviewer, data=platform_profile())
    return arrival, outcome


def test_arrival_creates_a_pseudonymous_reviewer_without_mail_and_resumes_only_with_a_secret(
    owner,
):
    study = make_platform_study(owner).study
    first = platform_arrive(study=study, query=q())
    rev = first.reviewer
    assert not first.resumed and rev.pseudonym.startswith("R") and rev.email == ""
    assert PID not in first.user.username and not first.user.has_usable_password()
    assert rev.next_step() == "consent"
    # The same browser (its cookie) or the same platform session resumes the place.
    again = platform_arrive(
        study=study, query=q(session="other"), cookie_secret=first.participant.secret
    )
    assert again.resumed and again.reviewer.pk == rev.pk
    assert platform_arrive(study=study, query=q()).reviewer.pk == rev.pk
    # The PID alone, from another browser with another session, does not.
    with pytest.raises(ArrivalRefused, match="already has a place"):
        platform_arrive(study=study, query=q(session="guessed"))
    with pytest.raises(ArrivalRefused, match="already has a place"):
        platform_arrive(study=study, query=q(session=""), cookie_secret="not-the-secret")
    assert Reviewer.objects.filter(study=study).count() == 1


def test_the_cap_refuses_one_more_and_a_released_place_frees_one(owner):
    study = make_platform_study(owner, places=2, abandon_minutes=30).study
    platform_arrive(study=study, query=q("P1"))
    platform_arrive(study=study, query=q("P2"))
    with pytest.raises(ArrivalRefused, match="All places"):
        platform_arrive(study=study, query=q("P3"))
    # P1 goes idle: the next arrival's sweep releases the place and P3 gets it.
    later = timezone.now() + timedelta(minutes=31)
    PlatformParticipant.objects.filter(participant_id="P2").update(last_seen_at=later)
    third = platform_arrive(study=study, query=q("P3"), now=later)
    assert not third.resumed
    p1 = PlatformParticipant.objects.get(participant_id="P1")
    assert p1.released_at is not None and p1.reviewer.dropped_at is not None
    with pytest.raises(ArrivalRefused, match="released"):
        platform_arrive(study=study, query=q("P1"), cookie_secret=p1.secret, now=later)


def test_refused_when_link_off_study_closed_or_study_id_differs(owner):
    study = make_platform_study(owner).study
    link = platform_link_for(study)
    link.platform_study_id = "plat-study"
    link.save()
    with pytest.raises(ArrivalRefused, match="another study"):
        platform_arrive(study=study, query=q(study="elsewhere"))
    link.enabled = False
    link.save()
    with pytest.raises(ArrivalRefused, match="no participants"):
        platform_arrive(study=study, query=q())


def test_screening_by_rule_assigns_work_or_releases_the_place(owner):
    study = make_platform_study(owner, places=3).study
    arrival, outcome = _approved(study)
    assert outcome == "approved"
    work = Assignment.objects.filter(reviewer=arrival.reviewer)
    assert work.count() == 2
    kinds = {m.condition.kind for a in work for m in a.idea.memberships.all()}
    assert kinds == {"human", "ai"}
    assert {a.idea.topic.name for a in work} == {"Bias"}

    low = platform_arrive(study=study, query=q("LOW"))
    reviewer_consent(reviewer=low.reviewer)
    outcome = platform_profile_save(reviewer=low.reviewer, data=platform_profile(papers=0))
    assert outcome == "rejected"
    low.participant.refresh_from_db()
    assert low.participant.released_at is not None
    assert not Assignment.objects.filter(reviewer=low.reviewer).exists()


def test_abandoned_place_withdraws_open_work_and_completion_carries_the_code(owner):
    study = make_platform_study(owner, places=3, abandon_minutes=30).study
    done, _ = _approved(study, "DONE")
    idle, _ = _approved(study, "IDLE")
    with pytest.raises(RecruitmentError, match="Submit every review"):
        platform_complete(reviewer=done.reviewer)
    for a in Assignment.objects.filter(reviewer=done.reviewer):
        review_submit(assignment=a, cleaned=cleaned(study))
    url = platform_complete(reviewer=done.reviewer)
    assert url == f"{PLATFORM_COMPLETION_URL}?cc={PLATFORM_CODE}"
    assert platform_places_sweep(study=study, now=timezone.now() + timedelta(minutes=31)) == 1
    assert set(
        Assignment.objects.filter(reviewer=idle.reviewer).values_list("status", flat=True)
    ) == {"withdrawn"}
    # The completed participant keeps the place and the submitted reviews.
    assert PlatformParticipant.objects.get(participant_id="DONE").released_at is None


def test_completion_url_placeholder_and_link_with_prolific_placeholders(owner):
    study = make_platform_study(owner).study
    link = platform_link_for(study)
    link.completion_url = "https://other.example/done/{code}/"
    assert completion_redirect_url(link) == f"https://other.example/done/{PLATFORM_CODE}/"
    url = platform_arrival_url(link, "https://ir.example/studies/r/join/crowd/")
    assert url.endswith(
        "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )


def test_bulk_files_approve_reject_with_reasons_and_bonus_from_the_payments(owner):
    seeded = make_platform_study(owner, places=4)
    study = seeded.study
    study.payment_per_review = Decimal("2.50")
    study.save()
    for pid in ("GOOD", "BAD", "WAIT"):
        arrival, _ = _approved(study, pid)
        for a in Assignment.objects.filter(reviewer=arrival.reviewer):
            review_submit(assignment=a, cleaned=cleaned(study))
    for review in Review.objects.filter(study=study).select_related("reviewer"):
        pid = review.reviewer.platform_participant.participant_id
        if pid == "GOOD":
            review_decide(review=review, decision="accepted", actor=owner)
        elif pid == "BAD":
            review_decide(review=review, decision="rejected", reason="copied, text", actor=owner)
    decisions = platform_decisions(study=study)
    assert decisions.approve == ["GOOD"]
    assert decisions.reject == [("BAD", "copied, text")]
    assert platform_file(study=study, kind="approve") == "GOOD\n"
    assert platform_file(study=study, kind="bonus") == "GOOD,5.00\n"
    assert platform_file(study=study, kind="reject") == 'BAD,"copied, text"\n'
    assert [pid for pid, _ in decisions.waiting] == ["WAIT"]


def test_platform_ids_stay_out_of_the_study_file_and_the_package(owner, tmp_path):
    from studies.package import package_build
    from studies.services.study import study_export

    study = make_platform_study(owner).study
    arrival, _ = _approved(study, PID, "SESSION-SECRET-77")
    for a in Assignment.objects.filter(reviewer=arrival.reviewer):
        review_submit(assignment=a, cleaned=cleaned(study))
    text = study_export(study=study)
    assert PID not in text and "SESSION-SECRET-77" not in text
    assert arrival.participant.secret not in text
    rows = json.loads(text)["sections"]["studies.platformparticipant"]
    assert rows[0]["fields"]["participant_id"] == arrival.reviewer.pseudonym
    package_build(study=study, out=tmp_path / "package.zip", use_report=False)
    with zipfile.ZipFile(tmp_path / "package.zip") as z:
        for name in z.namelist():
            body = z.read(name).decode("utf-8", "replace")
            assert PID not in body and "SESSION-SECRET-77" not in body, name


# --------------------------------------------------------------------------- pages


def test_arrival_page_logs_in_sets_the_cookie_and_the_same_browser_resumes(owner, client):
    study = make_platform_study(owner).study
    url = f"/studies/r/join/{study.slug}/"
    first = client.get(url, q())
    reviewer = Reviewer.objects.get(study=study)
    assert first.status_code == 302 and first["Location"].endswith(
        f"/r/profile/{reviewer.pk}/consent/"
    )
    assert f"platform_{study.pk}" in first.cookies
    # Back with a new platform session: the cookie resumes the place.
    again = client.get(url, q(session="new-session"))
    assert again.status_code == 302
    # A stranger's browser with the PID (and a guessed session) is refused.
    stranger = Client().get(url, q(session="guess"))
    assert stranger.status_code == 403
    assert "already has a place" in stranger.content.decode()
    assert PID not in stranger.content.decode()


def test_a_study_without_a_platform_link_answers_its_join_address_as_an_unknown_study(
    owner, client
):
    """A guessed join address must not confirm that a study exists: a study that takes
    no one through a platform link answers as one that does not exist."""
    study = make_platform_study(owner).study
    link = platform_link_for(study)
    link.enabled = False
    link.save()
    closed = client.get(f"/studies/r/join/{study.slug}/", q())
    unknown = client.get("/studies/r/join/no-such-study-x1/", q())
    assert closed.status_code == unknown.status_code == 404

    def page(response):  # the same page, but for each response's nonce and CSRF token
        body = re.sub(r'nonce="[^"]*"', "", response.content.decode())
        return re.sub(r'"X-CSRFToken": "[^"]*"', "", body)

    assert page(closed) == page(unknown)
    assert study.title not in closed.content.decode()
    assert not Reviewer.objects.filter(study=study).exists()


def test_participants_page_and_bulk_files_are_the_owners_only(
    owner, other_researcher, client, django_user_model
):
    from studies.models import StudyMember

    study = make_platform_study(owner).study
    platform_arrive(study=study, query=q())
    editor = django_user_model.objects.create_user("ed", password="pw-Ed-12345")
    StudyMember.objects.create(study=study, user=editor, role=StudyMember.Role.EDITOR)
    page = f"/studies/{study.slug}/platform/"
    client.force_login(owner)
    body = client.get(page).content.decode()
    assert PID in body and "PROLIFIC_PID={{%PROLIFIC_PID%}}" in body
    assert client.get(f"/studies/{study.slug}/platform/files/approve/").status_code == 200
    client.force_login(editor)
    body = client.get(page).content.decode()
    assert PID not in body and "Places held" in body
    assert client.get(f"/studies/{study.slug}/platform/files/bonus/").status_code == 403
    client.force_login(other_researcher)
    assert client.get(page).status_code == 404


def test_owner_saves_a_mapping_for_another_platform_and_bad_input_is_named(owner, client):
    study = make_platform_study(owner).study
    client.force_login(owner)
    form = {
        "enabled": "on",
        "platform": "Other panel",
        "places": "5",
        "abandon_minutes": "45",
        "completion_url": "https://panel.example/done",
        "completion_code": "XYZ",
        "participant_param": "worker_id",
        "study_param": "",
        "session_param": "",
        "code_param": "code",
        "platform_study_id": "",
    }
    bad = client.post(f"/studies/{study.slug}/platform/", {**form, "participant_param": "a b"})
    assert bad.status_code == 400 and "letters, digits" in bad.content.decode()
    ok = client.post(f"/studies/{study.slug}/platform/", form)
    assert ok.status_code == 302
    link = platform_link_for(study)
    assert (link.participant_param, link.places) == ("worker_id", 5)
    arrival = platform_arrive(study=study, query={"worker_id": "W9"})
    assert arrival.participant.participant_id == "W9"
    assert completion_redirect_url(link) == "https://panel.example/done?code=XYZ"


def test_a_participants_pages_keep_the_blinding_rules(owner, client):
    seeded = make_platform_study(owner)
    study = seeded.study
    arrival, outcome = _approved(study)
    assert outcome == "approved"
    client.force_login(arrival.user)
    pages = [client.get("/studies/r/home/")]
    for a in Assignment.objects.filter(reviewer=arrival.reviewer):
        pages.append(client.get(f"/studies/r/assignments/{a.pk}/"))
    for a in Assignment.objects.filter(reviewer=arrival.reviewer):
        review_submit(assignment=a, cleaned=cleaned(study))
    pages.append(client.get("/studies/r/home/"))
    assert all(p.status_code == 200 for p in pages)
    assert "Finish and return to Prolific" in pages[-1].content.decode()
    for page in pages:
        body = page.content.decode()
        leaked = [s for s in seeded.secrets if s in body]
        assert leaked == []


def test_a_participants_consent_and_profile_say_what_is_kept_and_ask_no_payment_details(
    owner, client
):
    """A participant gave no name, email or payment details: the consent says what is
    kept (the platform id for the owners, answers under the pseudonym), the profile asks
    for no payment details, and a payment value posted anyway is not stored. An invited
    reviewer of the same study still reads the team's promise and gives payment details."""
    study = make_platform_study(owner).study
    client.get(f"/studies/r/join/{study.slug}/", q())
    reviewer = Reviewer.objects.get(study=study)
    consent_url = f"/studies/r/profile/{reviewer.pk}/consent/"
    consent = client.get(consent_url).content.decode()
    assert "name and email are seen" not in consent
    assert "Prolific participant id, which only the study's owners see" in consent
    assert f"stored under a pseudonym ({reviewer.pseudonym})" in consent
    assert PID not in consent
    client.post(consent_url, {"consent": "on", "honor_code": "on"})
    profile_url = f"/studies/r/profile/{reviewer.pk}/"
    profile = client.get(profile_url).content.decode()
    assert 'name="payment_handle"' not in profile and "PayPal" not in profile
    assert "You are paid through Prolific" in profile
    assert "payment details" not in client.get("/studies/r/home/").content.decode()
    handle = {"payment_handle": "paypal: p@pay.example"}
    assert client.post(f"{profile_url}payment/", handle).status_code == 302
    client.post(profile_url, {**platform_profile(), **handle})
    reviewer.refresh_from_db()
    assert reviewer.payment_handle == "" and reviewer.profile_completed_at is not None
    with pytest.raises(RecruitmentError, match="paid through the platform"):
        reviewer_payment_handle_set(reviewer=reviewer, handle=handle["payment_handle"])
    reviewer.refresh_from_db()
    assert reviewer.payment_handle == ""

    invited = Client()
    inv = invitation_create(study=study, email="pia@example.org", name="Pia")
    invited.post(
        f"/studies/r/invite/{invitation_token(inv)}/",
        {"email": "pia@example.org", "password1": "Str0ng-pass-9", "password2": "Str0ng-pass-9"},
    )
    pia = Reviewer.objects.get(study=study, user__username="pia@example.org")
    consent = invited.get(f"/studies/r/profile/{pia.pk}/consent/").content.decode()
    assert "your name and email are seen only by the study team" in consent
    assert "participant id" not in consent
    invited.post(f"/studies/r/profile/{pia.pk}/consent/", {"consent": "on", "honor_code": "on"})
    profile = invited.get(f"/studies/r/profile/{pia.pk}/").content.decode()
    assert 'name="payment_handle"' in profile and "You are paid through" not in profile
    invited.post(f"/studies/r/profile/{pia.pk}/payment/", handle)
    pia.refresh_from_db()
    assert pia.payment_handle == "paypal: p@pay.example"
