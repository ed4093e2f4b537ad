"""The owner's step list from draft to closed."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from studies.analysis.rounding import counted
from studies.models import Idea, Study
from studies.overview import (
    BLOCKED,
    CURRENT,
    DONE,
    IMPORTED,
    TODO,
    WITHOUT_TEXT,
    StudyCounts,
    next_step,
    steps_from,
    study_steps,
)
from studies.protocol.template import parse_sections
from studies.services.assignment import assignment_commit, assignment_preview
from studies.services.study import (
    study_close,
    study_create,
    study_open_for_review,
    study_readiness,
)
from studies.status import IMPORTED_STATUS, ideas_without_text, study_status
from tests.factories import make_review_study

NAMES = [
    "Review form chosen",
    "Ideas imported",
    "Sections complete",
    "Topics matched",
    "Ideas normalised",
    "Rewrites signed off",
    "Reviewers invited",
    "Reviewers screened",
    "Assignment committed",
    "Opened for review",
    "Reviews in",
    "Closed",
    "Report built",
    "Judges run",
    "Payments settled",
]


def states(steps):
    return {s.name: s.state for s in steps}


def test_a_fresh_study_asks_for_ideas_first_and_everything_else_waits(owner):
    study = study_create(owner=owner, slug="fresh", title="Fresh")
    steps = study_steps(study)
    assert [s.name for s in steps] == NAMES
    got = states(steps)
    assert got["Review form chosen"] == DONE and "si2024" in steps[0].detail
    assert got["Ideas imported"] == CURRENT
    assert next_step(steps).next_action_url_name == "studies:ideas_import"
    # No payment amounts: nothing is owed, so that step is done from the start.
    assert got["Payments settled"] == DONE
    assert all(got[n] == BLOCKED for n in NAMES[2:-1])
    assert "Import ideas" in steps[1].detail


def _mid_way(owner, commit: bool):
    seeded = make_review_study(owner, slug="midway", commit=commit)
    for idea in seeded.study.ideas.all():
        idea.sections = dict(parse_sections(idea.normalized_text).sections)
        idea.save(update_fields=["sections"])
    return seeded.study


def test_a_prepared_study_with_screened_reviewers_asks_for_the_assignment(owner):
    study = _mid_way(owner, commit=False)
    got = states(study_steps(study))
    for name in NAMES[:8]:
        assert got[name] == DONE, name
    assert got["Assignment committed"] == CURRENT
    assert got["Opened for review"] == TODO  # ready, but after the assignment in the list
    assert got["Reviews in"] == BLOCKED
    assert got["Judges run"] == TODO  # judges need signed-off text only
    assert got["Report built"] == BLOCKED and got["Closed"] == BLOCKED


def test_a_study_under_review_asks_for_the_reviews_and_then_the_close(owner):
    study = _mid_way(owner, commit=False)
    job, result, _ = assignment_preview(study=study, seed=7)
    assert result.feasible
    assignment_commit(study=study, job=job)
    study.refresh_from_db()
    # Committing the assignment does not open the study: that is the next step.
    assert study.status == Study.Status.DRAFT
    steps = study_steps(study)
    got = states(steps)
    assert got["Assignment committed"] == DONE
    assert got["Opened for review"] == CURRENT and got["Reviews in"] == BLOCKED
    assert next_step(steps).next_action_url_name == "studies:study_open"
    study_open_for_review(study=study)
    study.refresh_from_db()
    steps = study_steps(study)
    got = states(steps)
    assert got["Opened for review"] == DONE
    assert got["Reviews in"] == CURRENT
    assert "0 submitted" in next_step(steps).detail
    study_close(study=study)
    study.refresh_from_db()
    steps = study_steps(study)
    got = states(steps)
    assert got["Closed"] == DONE
    # Once closed, only the report, the judges and the payments can still be current.
    assert next_step(steps).name in ("Report built", "Judges run", "Payments settled")


def test_an_unsigned_idea_keeps_sign_off_current_and_blocks_the_assignment(owner):
    study = _mid_way(owner, commit=False)
    Idea.objects.filter(pk=study.ideas.first().pk).update(
        normalization_status=Idea.NormalizationStatus.PROPOSED
    )
    steps = study_steps(study)
    got = states(steps)
    assert got["Ideas normalised"] == DONE
    assert got["Rewrites signed off"] == CURRENT
    assert got["Assignment committed"] == BLOCKED
    assert got["Judges run"] == BLOCKED
    assert "9 of 10" in next(s for s in steps if s.name == "Rewrites signed off").detail


def test_a_signed_off_text_completes_an_idea_whose_imported_sections_were_incomplete(owner):
    """Reviewers read the text a person signed off; sections missing from the imported
    text no longer keep the step open (it stayed the next step after the study opened)."""
    study = make_review_study(owner, slug="partial", commit=True).study
    first = study.ideas.order_by("pk").first()
    Idea.objects.filter(pk=first.pk).update(sections={"title": "Only a title"})
    assert states(study_steps(study))["Sections complete"] == DONE
    Idea.objects.filter(pk=first.pk).update(normalization_status=Idea.NormalizationStatus.NONE)
    steps = study_steps(study)
    assert states(steps)["Sections complete"] != DONE
    detail = next(s for s in steps if s.name == "Sections complete").detail
    assert "1 idea misses template sections" in detail


def test_si2024_marks_preparation_as_imported_dataset_and_asks_for_the_report(si2024_study):
    steps = study_steps(si2024_study)
    got = states(steps)
    for step in steps[:11]:
        assert step.state == DONE, step.name
        assert IMPORTED in step.detail, step.name
    assert "reviews imported" in steps[10].detail
    # Closing is left to its owner (the progress page offers it).
    assert steps[11].name == "Closed" and steps[11].state == TODO
    assert got["Report built"] == CURRENT
    # Its ideas came without texts: a judge has nothing to read until texts are entered.
    assert got["Judges run"] == BLOCKED
    assert (
        "no idea has a text a judge could read" in {s.name: s for s in steps}["Judges run"].detail
    )
    assert got["Payments settled"] == DONE


def test_an_interim_report_needs_only_some_reviews():
    counts = StudyCounts(
        status=Study.Status.REVIEWING,
        ideas=4,
        normalised=4,
        signed_off=4,
        invitations=2,
        reviewers=2,
        approved_reviewers=2,
        assignments=8,
        open_assignments=3,
        submitted_reviews=5,
    )
    got = states(steps_from(counts))
    assert got["Reviews in"] == CURRENT
    assert got["Report built"] == TODO and got["Closed"] == BLOCKED


def test_payments_wait_for_a_decision_on_every_submitted_review():
    base = dict(
        status=Study.Status.CLOSED,
        ideas=4,
        normalised=4,
        signed_off=4,
        invitations=2,
        reviewers=2,
        approved_reviewers=2,
        assignments=8,
        submitted_reviews=8,
        reports=1,
        judge_runs_done=1,
        judge_runs_on_text=1,
        payments_set=True,
    )
    steps = steps_from(StudyCounts(**base, undecided_reviews=3))
    got = states(steps)
    # A closed study still has its payments to settle: that is what comes next.
    assert got["Closed"] == DONE and got["Payments settled"] == CURRENT
    assert "3 submitted reviews wait" in next_step(steps).detail
    assert next_step(steps).next_action_url_name == "studies:study_payments"
    got = states(steps_from(StudyCounts(**base, undecided_reviews=0)))
    assert set(got.values()) == {DONE}


def test_invitations_come_before_screening():
    counts = StudyCounts(status=Study.Status.PREPARING, ideas=2, normalised=2, signed_off=2)
    got = states(steps_from(counts))
    assert got["Reviewers invited"] == CURRENT and got["Reviewers screened"] == BLOCKED


def test_the_invitation_step_counts_dropped_reviewers_among_those_who_signed_up():
    base = {"status": Study.Status.PREPARING, "ideas": 2, "invitations": 5}
    step = {s.name: s for s in steps_from(StudyCounts(**base, reviewers=4, dropped_reviewers=1))}
    assert step["Reviewers invited"].detail == (
        "5 invitations, 5 reviewers signed up, 1 of them dropped"
    )
    step = {s.name: s for s in steps_from(StudyCounts(**base, reviewers=5))}
    assert step["Reviewers invited"].detail == "5 invitations, 5 reviewers signed up"


def test_the_study_page_shows_the_steps_and_what_to_do_next(owner, other_researcher):
    study = study_create(owner=owner, slug="paged", title="Paged")
    client = Client()
    client.force_login(owner)
    page = client.get(reverse("studies:study_detail", args=[study.slug])).content.decode()
    assert "Where the study stands" in page
    assert page.count('data-state="blocked"') == 12
    assert reverse("studies:ideas_import", args=[study.slug]) in page
    # the filled button is the next step, not the report a fresh study does not have
    button = page[page.index('id="next-step"') :].split("</a>", 1)[0]
    assert reverse("studies:ideas_import", args=[study.slug]) in button
    report = reverse("studies:study_report", args=[study.slug])
    assert f'class="button" href="{report}"' not in page and f'href="{report}"' in page
    # Two kinds of flag, never one number under one name: the import's consent and
    # pledge flags are counted here, the quality flags on the progress page.
    assert "Flagged reviews" not in page
    # Only reviews from a review file carry import flags: a study without any does not
    # count them.
    assert "Flagged at import" not in page
    progress = reverse("studies:study_progress", args=[study.slug])
    assert f'<a href="{progress}#quality">' in page
    # A new study is asked for ideas first; a review file is the other way in.
    empty = page[page.index("Data quality of the last import") :]
    assert empty.index(reverse("studies:ideas_import", args=[study.slug])) < empty.index(
        reverse("studies:reviews_import_page", args=[study.slug])
    )
    client.force_login(other_researcher)
    assert client.get(reverse("studies:study_detail", args=[study.slug])).status_code == 404


def test_the_study_menu_links_back_to_the_overview_from_its_pages_only(owner):
    study = study_create(owner=owner, slug="menu", title="Menu study")
    client = Client()
    client.force_login(owner)
    overview = reverse("studies:study_detail", args=[study.slug])
    back = f'<a href="{overview}">← Menu study</a>'

    def menu(url: str) -> str:
        page = client.get(url).content.decode()
        return page[page.index('id="study-menu"') :].split("</nav>", 1)[0]

    assert back not in menu(overview)
    assert back in menu(reverse("studies:study_progress", args=[study.slug]))
    assert back in menu(reverse("judging:home", args=[study.slug]))


@pytest.mark.parametrize("status", [Study.Status.DRAFT, Study.Status.CLOSED])
def test_every_step_has_a_url_that_resolves(owner, status):
    study = study_create(owner=owner, slug=f"urls-{status}", title="Urls")
    study.status = status
    study.save()
    for step in study_steps(study):
        assert reverse(step.next_action_url_name, args=[study.slug])


def test_the_judges_step_counts_the_runs_judging_reports(owner, monkeypatch):
    from judging.models import JudgeRun
    from llm.models import JudgeConfig
    from studies import overview

    study = study_create(owner=owner, slug="judged", title="Judged")
    config = JudgeConfig.objects.create(name="j", base_url="http://127.0.0.1:9/v1", model="m")
    for status in ("done", "done", "queued", "running", "failed"):
        JudgeRun.objects.create(study=study, config=config, method="direct", status=status)
    other = study_create(owner=owner, slug="other", title="Other")
    JudgeRun.objects.create(study=other, config=config, method="direct", status="done")
    step = {s.name: s for s in study_steps(study)}["Judges run"]
    assert step.detail == "2 runs done, 2 running"
    # Without judging's counter the study simply has no judge runs.
    monkeypatch.setattr(overview, "_counters", [])
    step = {s.name: s for s in study_steps(study)}["Judges run"]
    assert step.detail == "0 runs done" and step.state != DONE


# --------------------------------------------------------------------------- imported reviews


def _page(client, name, study, **kwargs):
    return client.get(reverse(name, args=[study.slug]), **kwargs).content.decode()


def test_a_study_of_imported_reviews_reads_imported_and_is_never_offered_the_opening(
    si2024_study, owner
):
    """Its checklist says every step up to "Closed" happened elsewhere: the header must
    not say "Draft" nor offer an opening that its textless ideas could never pass."""
    state = study_status(si2024_study)
    assert state.label == IMPORTED_STATUS and state.imported and not state.can_open
    client = Client()
    client.force_login(owner)
    detail = _page(client, "studies:study_detail", si2024_study)
    assert f'id="study-status">{IMPORTED_STATUS}<' in detail
    assert "Draft" not in detail and 'id="imported-study"' in detail
    for name in ("studies:study_progress", "studies:ideas_list", "studies:study_open"):
        page = _page(client, name, si2024_study)
        assert f"status: {IMPORTED_STATUS}" in page, name
        assert 'id="nav-open"' not in page, name
    opening = _page(client, "studies:study_open", si2024_study)
    assert 'id="open-form"' not in opening and "Before the study can open" not in opening
    assert "nothing to open for review" in opening
    progress = _page(client, "studies:study_progress", si2024_study)
    assert 'id="imported-reviews"' in progress and 'id="not-open"' not in progress
    # The study list says the same as the study's own page.
    assert (
        f"<td>{IMPORTED_STATUS}</td>" in client.get(reverse("studies:study_list")).content.decode()
    )
    # Opening by hand (a stale page, the command line) is refused with the one reason.
    reasons = study_readiness(study=si2024_study)
    assert len(reasons) == 1 and "imported from a file" in reasons[0]
    response = client.post(reverse("studies:study_open", args=[si2024_study.slug]), follow=True)
    assert "nothing to open for review" in response.content.decode()
    si2024_study.refresh_from_db()
    assert si2024_study.status == Study.Status.DRAFT
    steps = {s.name: s for s in study_steps(si2024_study)}
    assert steps["Opened for review"].is_done
    assert f"form {si2024_study.review_form}" in steps["Review form chosen"].detail
    assert "not done in this app" not in steps["Review form chosen"].detail
    assert 'id="glance-import-flags"' in detail
    # The progress page offers the closing, so the step is not done yet; it is offered,
    # not asked for before the report.
    assert "Close the study" in progress
    assert steps["Closed"].state == TODO and not steps["Closed"].is_done
    assert next_step(list(steps.values())).name != "Closed"
    # Its owner may still close it, and then it reads closed like any other.
    study_close(study=si2024_study)
    si2024_study.refresh_from_db()
    assert study_status(si2024_study).label == "Closed"
    assert {s.name: s for s in study_steps(si2024_study)}["Closed"].is_done
    progress = _page(client, "studies:study_progress", si2024_study)
    assert "Close the study" not in progress
    assert "reviews imported from a file" in progress and "0 of 0" not in progress


def test_a_study_of_imported_reviews_offers_no_invitations_reminders_or_due_date(
    si2024_study, owner
):
    """Its reviewing happened elsewhere: the pages do not offer work for reviewers who
    will never come, and a request sent anyway (a stale page) is refused with the reason."""
    from studies.models import Invitation

    client = Client()
    client.force_login(owner)
    invitations = _page(client, "studies:study_invitations", si2024_study)
    assert 'id="imported-reviews"' in invitations and "invites no reviewers" in invitations
    assert "Invite one reviewer" not in invitations and "Invite from a CSV" not in invitations
    progress = _page(client, "studies:study_progress", si2024_study)
    assert "Send reminders" not in progress and "reviews_due_at" not in progress
    assert "Close the study" in progress  # its owner may still freeze it
    posts = [
        ("studies:study_invitations", {"email": "x@example.org", "name": "X"}, "invites no"),
        ("studies:invitations_upload", {}, "invites no"),
        ("studies:study_reminders", {}, "sends no reminders"),
        ("studies:study_due", {"reviews_due_at": "2030-01-01T10:00"}, "has no due date"),
    ]
    for name, data, said in posts:
        response = client.post(reverse(name, args=[si2024_study.slug]), data, follow=True)
        assert response.status_code == 200 and said in response.content.decode(), name
    si2024_study.refresh_from_db()
    assert not Invitation.objects.filter(study=si2024_study).exists()
    assert si2024_study.reviews_due_at is None


def test_a_study_reviewed_here_still_reads_its_status_and_is_offered_the_opening(owner):
    study = _mid_way(owner, commit=False)
    state = study_status(study)
    assert state.label == "Draft" and state.can_open and not state.imported
    client = Client()
    client.force_login(owner)
    progress = _page(client, "studies:study_progress", study)
    assert 'id="nav-open"' in progress and "Send reminders" in progress
    assert "reviews_due_at" in progress
    assert "Invite one reviewer" in _page(client, "studies:study_invitations", study)
    assert 'id="study-status">Draft<' in _page(client, "studies:study_detail", study)


def test_ideas_that_came_with_imported_reviews_read_as_such_on_the_list_and_the_step(
    si2024_study, owner
):
    """A review file names its ideas without their texts: the ideas page says so instead
    of reporting every section missing, and the study page's step agrees with it."""
    n = si2024_study.ideas.count()
    assert ideas_without_text(si2024_study) == set(si2024_study.ideas.values_list("pk", flat=True))
    client = Client()
    client.force_login(owner)
    page = _page(client, "studies:ideas_list", si2024_study)
    assert f'<span id="without-text">{n} with {WITHOUT_TEXT}</span>' in page
    assert "missing or empty sections" not in page and "0/7 found" not in page
    assert "missing: " not in page
    step = {s.name: s for s in study_steps(si2024_study)}["Sections complete"]
    assert step.is_done and f"{counted(n, 'idea')} with {WITHOUT_TEXT}" in step.detail
    # An imported idea given part of a text by hand is an idea with sections again, on
    # both pages.
    first = si2024_study.ideas.order_by("pk").first()
    Idea.objects.filter(pk=first.pk).update(sections={"title": "Only a title"})
    page = _page(client, "studies:ideas_list", si2024_study)
    assert f"{n - 1} with {WITHOUT_TEXT}" in page
    assert "1 with missing or empty sections" in page and "1/7 found" in page
    step = {s.name: s for s in study_steps(si2024_study)}["Sections complete"]
    assert (
        f"{counted(n - 1, 'idea')} with {WITHOUT_TEXT}, 1 with missing or empty sections"
        in step.detail
    )
    # The row an edit swaps in says the same as the list.
    second = si2024_study.ideas.order_by("pk")[1]
    row = client.get(
        reverse("studies:idea_row", args=[si2024_study.slug, second.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert ">no text (imported)</span>" in row and "/7 found" not in row


def test_the_sections_step_of_a_study_reviewed_here_names_ideas_without_text():
    counts = StudyCounts(status=Study.Status.DRAFT, ideas=5, incomplete_ideas=0, textless_ideas=2)
    step = {s.name: s for s in steps_from(counts)}["Sections complete"]
    assert step.is_done
    assert step.detail == (
        f"every idea with a text has the seven sections; 2 ideas with {WITHOUT_TEXT}"
    )


def test_the_judges_step_is_blocked_only_while_no_idea_has_a_text_a_judge_could_read():
    base = {"status": Study.Status.DRAFT, "ideas": 4, "imported_reviews": 8, "reports": 1}
    step = {s.name: s for s in steps_from(StudyCounts(**base, textless_ideas=4))}
    assert step["Judges run"].state == BLOCKED
    assert "Fix sections" in step["Judges run"].detail
    # One idea given its text: a run can judge it (and leave the others out).
    step = {s.name: s for s in steps_from(StudyCounts(**base, textless_ideas=3))}
    assert step["Judges run"].state == CURRENT
    assert "3 of 4 ideas have no text: a run leaves them out" in step["Judges run"].detail
    # Once a run that read the texts is done the step says what ran, without the remedy.
    done = StudyCounts(**base, textless_ideas=3, judge_runs_done=1, judge_runs_on_text=1)
    step = {s.name: s for s in steps_from(done)}
    assert step["Judges run"].state == DONE and step["Judges run"].detail == "1 run done"


def test_a_random_baseline_alone_is_not_the_judges_having_run():
    """A random baseline reads no idea's text: finished alone it leaves the step as it was,
    blocked while no idea has a text and open to work on once one has."""
    base = {"status": Study.Status.DRAFT, "ideas": 4, "imported_reviews": 8, "reports": 1}
    step = {s.name: s for s in steps_from(StudyCounts(**base, textless_ideas=4, judge_runs_done=1))}
    assert step["Judges run"].state == BLOCKED
    assert "none of them read an idea's text" in step["Judges run"].detail
    assert "Fix sections" in step["Judges run"].detail
    step = {s.name: s for s in steps_from(StudyCounts(**base, judge_runs_done=1))}
    assert step["Judges run"].state == CURRENT
    # Beside a judge that read the texts the baseline is simply one more run.
    both = StudyCounts(**base, judge_runs_done=2, judge_runs_on_text=1)
    step = {s.name: s for s in steps_from(both)}
    assert step["Judges run"].state == DONE and step["Judges run"].detail == "2 runs done"


def test_a_random_run_made_before_the_refusal_leaves_the_step_open_and_its_pages_work(
    si2024_study, owner, monkeypatch
):
    """A study of imported reviews may hold a random baseline run accepted when no idea had
    a text: its run page and the study page still open, and the step counts it as no judge
    run; a finished run of a judge that read texts does count."""
    from judging.models import JudgeRun
    from judging.services import judge_run_create, judge_run_execute, runs

    monkeypatch.setattr(runs, "_refuse_textless", lambda study, method, ideas: None)
    run = judge_run_execute(run=judge_run_create(study=si2024_study, method="baseline_random"))
    assert run.status == JudgeRun.Status.DONE, run.message
    monkeypatch.undo()
    client = Client()
    client.force_login(owner)
    page = client.get(reverse("judging:run_detail", args=[si2024_study.slug, run.pk]))
    assert page.status_code == 200 and "Baseline: random" in page.content.decode()
    assert client.get(reverse("judging:home", args=[si2024_study.slug])).status_code == 200
    assert client.get(reverse("studies:study_detail", args=[si2024_study.slug])).status_code == 200
    step = {s.name: s for s in study_steps(si2024_study)}["Judges run"]
    assert step.state == BLOCKED and "none of them read an idea's text" in step.detail
    JudgeRun.objects.create(study=si2024_study, method="direct", status=JudgeRun.Status.DONE)
    step = {s.name: s for s in study_steps(si2024_study)}["Judges run"]
    assert step.is_done and step.detail == "2 runs done"
