"""End to end in a real browser: participants arrive through a platform's study link,
consent, review, finish and land on the completion URL with the code; a returning
participant resumes in their browser, a stranger with their id does not, and the cap
refuses one more."""

from __future__ import annotations

import re

import pytest

from studies.models import Assignment, PlatformParticipant
from studies.services.platform import platform_link_for
from tests.e2e.pages import (
    new_page,
    owner_login,
    platform_arrive,
    platform_finish,
    platform_sign_up,
    reviews_complete,
)
from tests.factories import PLATFORM_CODE, make_platform_study

pytestmark = pytest.mark.e2e


def test_participants_arrive_review_complete_resume_and_meet_the_cap(browser, live_server, owner):
    study = make_platform_study(owner, places=2).study
    base = live_server.url
    link = platform_link_for(study)
    # The completion URL is a loopback page of the test's own server.
    link.completion_url = f"{base}/healthz?from=platform"
    link.save()

    # A arrives, consents, is screened by the rule, reviews both ideas and finishes.
    a_ctx, pa = new_page(browser, base)
    platform_arrive(pa, study.slug, "AAAA1111", session="SA")
    platform_sign_up(pa, topic="Bias")
    assert reviews_complete(pa) == 2
    final = platform_finish(pa, rf"/healthz\?from=platform&cc={PLATFORM_CODE}$")
    assert final.endswith(f"cc={PLATFORM_CODE}")
    a = PlatformParticipant.objects.get(participant_id="AAAA1111")
    assert a.completed_at is not None
    assert set(Assignment.objects.filter(reviewer=a.reviewer).values_list("status", flat=True)) == {
        "submitted"
    }

    # B consents, leaves, and comes back from the platform in the same browser (a new
    # platform session): the cookie resumes the place at the profile step.
    b_ctx, pb = new_page(browser, base)
    platform_arrive(pb, study.slug, "BBBB2222", session="SB1")
    pb.wait_for_url(re.compile(r"/consent/$"))
    pb.check("input[name=consent]")
    pb.check("input[name=honor_code]")
    pb.click("text=Continue")
    pb.wait_for_url(re.compile(r"/studies/r/profile/\d+/$"))
    pb.goto("/healthz")
    platform_arrive(pb, study.slug, "BBBB2222", session="SB2")
    pb.wait_for_url(re.compile(r"/studies/r/profile/\d+/$"))

    # A stranger's browser with B's id cannot take the place; C finds no place left.
    s_ctx, ps = new_page(browser, base)
    platform_arrive(ps, study.slug, "BBBB2222", session="GUESS")
    assert "already has a place" in ps.inner_text("main")
    platform_arrive(ps, study.slug, "CCCC3333", session="SC")
    assert "All places in this study are taken" in ps.inner_text("main")
    assert PlatformParticipant.objects.filter(study=study).count() == 2

    # The owner sees both participants beside their pseudonyms, and the link to copy.
    o_ctx, po = new_page(browser, base)
    owner_login(po)
    po.goto(f"/studies/{study.slug}/platform/")
    assert "PROLIFIC_PID={{%PROLIFIC_PID%}}" in po.input_value("#arrival-url")
    table = po.inner_text("#participants")
    assert "AAAA1111" in table and "BBBB2222" in table and "completed" in table
    for ctx in (a_ctx, b_ctx, s_ctx, o_ctx):
        ctx.close()
