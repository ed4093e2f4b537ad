"""End to end in a real browser: quality control of participants who arrive from a
platform. The owner registers a plan with two exclusion rules; three participants arrive
through the study's link with Prolific's parameters, consent, pass screening, review and
are sent back with the completion code. One fails the form's attention check on every
review, one gives the same score to every metric. The progress page flags exactly those
two; the report, built by the worker, shows the primary tests with and without their
reviews and which rule removed what; the bulk files approve, reject and pay the right
participants, by the study's rate.

The study also has reviews by three invited reviewers (written through the services), so
that the tests on the kept reviews have data in every condition."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from studies.models import (
    Assignment,
    IdeaCondition,
    PlatformParticipant,
    Review,
    ReviewAcceptance,
    Reviewer,
    StudyReport,
)
from studies.protocol.forms import SI2024_FORM, AttentionCheck, Scale
from studies.reviewer_forms import ReviewAnswersForm
from studies.services.platform import platform_link_for
from studies.services.reviews import review_submit
from studies.services.study import study_form_set
from tests.e2e.pages import (
    distinct_text,
    download_text,
    new_page,
    owner_login,
    plan_freeze,
    plan_save,
    platform_arrive,
    platform_finish,
    platform_sign_up,
    report_build,
    reviews_complete,
)
from tests.factories import PLATFORM_CODE, make_platform_study

pytestmark = pytest.mark.e2e

CHECK = AttentionCheck(
    scale=Scale(
        key="careful",
        label="Careful reading",
        question="To show that you read every question, choose 3 on this scale.",
        minimum=1,
        maximum=10,
        anchors={},
        rationale=False,
        rationale_required=False,
    ),
    expected=3,
    after="feasibility",
)
FORM = dataclasses.replace(SI2024_FORM, key="crowd-qc", version=1, attention_checks=(CHECK,))
METRICS = FORM.metric_keys
RATE = Decimal("3.75")
PLAN = {
    "primary_metrics": ["overall"],
    # Browser reviews take seconds: no time floor, so the only flags are the two planted.
    "quality": {"min_minutes": 0, "exclude": ["attention", "straight_line"]},
}
REASON = "failed the attention check"


def _varied(n: int, careful: int = 3) -> dict[str, int]:
    """Scores that differ across metrics and from review to review."""
    out = {m: 3 + (n * 2 + k) % 6 for k, m in enumerate(METRICS)}
    return {**out, "careful": careful}


def _invited_reviews(study) -> None:
    """Three invited reviewers, each with four submitted reviews of the Coding ideas
    (which cover every condition); the participants take Bias ideas."""
    coding = list(study.ideas.filter(topic__name="Coding").order_by("pk"))
    now = timezone.now()
    for j in range(3):
        user = get_user_model().objects.create_user(f"invited{j}", password=None)
        reviewer = Reviewer.objects.create(
            study=study, user=user, pseudonym=f"R{j + 1:03d}", email=f"invited{j}@example.org",
            institution="Invited Lab", position="Postdoc", major_venue_papers=3,
            topic_preferences=["Coding"], preferred_load=4, consent_at=now, honor_code_at=now,
            profile_completed_at=now, screening=Reviewer.Screening.APPROVED,
        )  # fmt: skip
        for k, idea in enumerate(coding[j : j + 3] + coding[:1] if j else coding[:4]):
            a = Assignment.objects.create(study=study, reviewer=reviewer, idea=idea)
            data = {m: str(s) for m, s in _varied(j * 5 + k).items()}
            for m in METRICS:
                data[f"{m}_rationale"] = distinct_text(f"invited-{j}-{k}-{m}")
            data.update(familiarity="3", confidence="4", minutes="20")
            form = ReviewAnswersForm(data, definition=FORM)
            assert form.is_valid(), form.errors
            review_submit(assignment=a, cleaned=form.cleaned_data)


def _participant(browser, base, slug, pid, *, load, scores, completion):
    """One participant's whole visit; returns the URL they were sent back to."""
    context, page = new_page(browser, base)
    platform_arrive(page, slug, pid, session=f"S-{pid}")
    platform_sign_up(page, topic="Bias", load=load)
    assert reviews_complete(page, scores, text=lambda n: lambda box: distinct_text((pid, n, box)))
    url = platform_finish(page, completion)
    context.close()
    return url


def _rows(table) -> list[list[str]]:
    return [row.locator("td").all_inner_texts() for row in table.locator("tbody tr").all()]


def _expected_tests(study, removed: set[str]) -> dict[str, dict[str, tuple[int, float]]]:
    """Test 1 (by review) of overall, from the database: per compared condition, the
    review rows and the difference from the baseline's mean, on all reviews and on the
    reviews of no removed reviewer."""
    scores = {
        (r.pk, r.reviewer.pseudonym): r.scores.get(metric="overall").score
        for r in Review.objects.filter(study=study, status="submitted").select_related("reviewer")
    }
    by_idea = {}
    for m in IdeaCondition.objects.filter(study=study).select_related("condition"):
        by_idea.setdefault(m.idea_id, []).append(m.condition.key)
    ideas = dict(Review.objects.filter(study=study).values_list("pk", "idea_id"))
    out = {}
    for side, keep in (("all", lambda who: True), ("kept", lambda who: who not in removed)):
        values: dict[str, list[float]] = {}
        for (pk, who), score in scores.items():
            if keep(who):
                for cond in by_idea[ideas[pk]]:
                    values.setdefault(cond, []).append(score)
        base = values["Human_Experts"]
        out[side] = {
            c: (len(v), sum(v) / len(v) - sum(base) / len(base))
            for c, v in values.items()
            if c != "Human_Experts"
        }
    return out


def test_platform_participants_flagged_excluded_in_the_report_and_paid_by_the_bulk_files(
    browser, live_server, owner, worker, settings, tmp_path, artifacts
):
    settings.REPORTS_ROOT = str(tmp_path / "reports")
    settings.ANALYSIS_CONSISTENCY_SPLITS = 50
    settings.ANALYSIS_MIXED_STARTS = 1
    settings.IDEAREVIEW_CHROMIUM = str(tmp_path / "no-pdf")
    settings.QUALITY_EMBED_PER_VIEW = 500  # every rationale compared on the first view
    base = live_server.url
    study = make_platform_study(owner, slug="crowdqc", places=3).study
    study_form_set(study=study, definition=FORM)
    study.payment_per_review = RATE
    study.save(update_fields=["payment_per_review"])
    link = platform_link_for(study)
    link.completion_url = f"{base}/healthz?from=platform"  # a loopback page
    link.save()
    _invited_reviews(study)

    # The owner registers the plan before anyone arrives.
    o_ctx, po = new_page(browser, base)
    owner_login(po)
    plan_save(po, study.slug, PLAN)
    plan_freeze(po, study.slug)
    assert "Exclusion rules: attention, straight_line." in po.inner_text("#plan-quality")

    # Three participants: honest, failing the attention check, straight-lining.
    completion = rf"/healthz\?from=platform&cc={PLATFORM_CODE}$"
    visits = {
        "HONEST01": dict(load="3", scores=_varied),
        "CARELESS02": dict(load="2", scores=lambda n: _varied(n, careful=7)),
        "FLAT03": dict(load="2", scores={"careful": 3, **{m: 7 for m in METRICS}}),
    }
    for pid, how in visits.items():
        url = _participant(browser, base, study.slug, pid, completion=completion, **how)
        assert url == f"{base}/healthz?from=platform&cc={PLATFORM_CODE}"
    who = {
        p.participant_id: p.reviewer
        for p in PlatformParticipant.objects.filter(study=study).select_related("reviewer")
    }
    # Each was screened in by the study's rule and marked complete.
    assert {r.screening for r in who.values()} == {Reviewer.Screening.APPROVED}
    assert all(
        PlatformParticipant.objects.filter(study=study).values_list("completed_at", flat=True)
    )
    n = {
        pid: Review.objects.filter(reviewer=r, status="submitted").count() for pid, r in who.items()
    }
    assert n == {"HONEST01": 3, "CARELESS02": 2, "FLAT03": 2}
    careless, flat = who["CARELESS02"].pseudonym, who["FLAT03"].pseudonym

    # Progress: one row per flagged reviewer, with exactly their flag on every review.
    po.goto(f"/studies/{study.slug}/progress/")
    kinds = po.locator("#quality-flags thead th").all_inner_texts()[1:]
    flagged = {
        row[0]: dict(zip(kinds, row[1:], strict=True))
        for row in _rows(po.locator("#quality-flags"))
    }
    assert set(flagged) == {careless, flat}
    assert {k: v for k, v in flagged[careless].items() if v != "·"} == {"attention": "2"}
    assert {k: v for k, v in flagged[flat].items() if v != "·"} == {"straight_line": "2"}
    po.click("#quality summary:text('Every flag')")
    reasons = po.inner_text("#quality details")
    assert reasons.count("careful: answered 7, instructed 3") == 2
    assert reasons.count("7 on all 5 metrics") == 2
    po.locator("#quality").screenshot(path=str(artifacts / "platform-quality-flags.png"))

    # The report: which rule removed what, and the primary tests with and without.
    report_build(po, study.slug)
    section = po.locator("article.report")
    notes = section.locator("h3:text('Exclusion rules') + p.note").inner_text()
    assert "The analysis plan's exclusion rules." in notes
    assert "4 of 19 analysed reviews removed, 15 kept." in notes
    assert _rows(section.locator("#quality-exclusions")) == [
        ["attention", "2", "2"],
        ["straight_line", "2", "2"],
    ]
    expected = _expected_tests(study, {careless, flat})
    table = {(r[0], r[2]): r for r in _rows(section.locator("#quality-with-without"))}
    assert set(table) == {
        (test, cond) for test in ("by_review", "by_idea", "by_reviewer") for cond in expected["all"]
    }
    data = StudyReport.objects.filter(study=study).first().data["quality"]
    json_rows = {(r["test"], r["condition"]): r for r in data["with_without"]}
    assert {r["kept_note"] for r in data["with_without"]} == {""}  # no condition emptied
    for cond, (n_all, diff_all) in expected["all"].items():
        n_kept, diff_kept = expected["kept"][cond]
        row = json_rows[("by_review", cond)]
        assert (row["n_all"], row["n_kept"]) == (n_all, n_kept)
        assert row["diff_all"] == pytest.approx(diff_all)
        assert row["diff_kept"] == pytest.approx(diff_kept)
        # The page shows the same figures, beside each other.
        shown = table[("by_review", cond)]
        assert (shown[3], shown[6]) == (f"{row['diff_all']:.2f}", f"{row['diff_kept']:.2f}")
    section.locator("#quality-with-without").screenshot(
        path=str(artifacts / "platform-quality-with-without.png")
    )

    # Payments: the careless participant's reviews rejected with a reason, the rest
    # accepted; the bulk files follow.
    po.goto(f"/studies/{study.slug}/payments/reviews/")
    for _ in range(n["CARELESS02"]):
        row = po.locator("#review-decisions tbody tr", has=po.locator(f"td:text-is('{careless}')"))
        row = row.filter(has_text="waiting").first
        row.locator("input[value=rejected]").check()
        row.locator("input[name=reason]").fill(REASON)
        with po.expect_navigation():
            row.locator("button[type=submit]").click()
    po.check("input[name=confirm]")
    po.click("text=/^Accept \\d+$/")
    po.wait_for_selector("text=0 of 19 submitted reviews have no decision yet")
    accepted = {
        pid: ReviewAcceptance.objects.filter(review__reviewer=r, decision="accepted").count()
        for pid, r in who.items()
    }
    assert accepted == {"HONEST01": 3, "CARELESS02": 0, "FLAT03": 2}

    po.goto(f"/studies/{study.slug}/platform/")
    files = {
        kind: download_text(po, f"a:text-is('{kind}')")
        for kind in ("approve.txt", "reject.csv", "bonus.csv")
    }
    assert files["approve.txt"] == (f"{study.slug}-approve.txt", "HONEST01\nFLAT03\n")
    assert files["reject.csv"][1] == f"CARELESS02,{REASON}\n"
    # Bonus: the study's rate for each accepted review (3 x 3.75, 2 x 3.75).
    assert files["bonus.csv"][1] == "HONEST01,11.25\nFLAT03,7.50\n"
    o_ctx.close()
