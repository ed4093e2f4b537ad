"""The assignment preview as the owner runs it: the study's settings reach the solver,
the preview runs as a background job, its tables and plots, and its commit."""

from __future__ import annotations

from collections import Counter

import pytest
from django.urls import reverse

from studies.models import Assignment, JobRun, TopicChoiceUse
from studies.services.assignment import (
    assignment_commit,
    assignment_plan,
    assignment_preview,
    assignment_preview_enqueue,
)
from studies.services.ideas import idea_label
from studies.services.invitations import RecruitmentError
from studies.tasks import preview_assignment
from tests.factories import make_review_study


@pytest.mark.django_db
def test_the_studys_topic_choice_use_reaches_the_solver_and_its_fingerprint(owner):
    s = make_review_study(owner, commit=False)
    first = assignment_plan(study=s.study, seed=3)
    assert first.inputs.params.topic_choice == "first"
    s.study.topic_choice_use = TopicChoiceUse.EQUAL
    s.study.save()
    equal = assignment_plan(study=s.study, seed=3)
    assert equal.inputs.params.topic_choice == "equal"
    # A preview made under the other rule must not be committed as if nothing changed.
    assert equal.fingerprint != first.fingerprint


@pytest.mark.django_db
def test_preview_runs_as_a_job_with_progress_then_shows_readable_tables_and_plots(
    client, owner, django_capture_on_commit_callbacks
):
    s = make_review_study(owner, commit=False)
    client.force_login(owner)
    url = reverse("studies:assignment_preview", args=[s.study.slug])
    with django_capture_on_commit_callbacks(execute=False) as sent:
        response = client.post(url, {"mode": "keep", "seed": "11"})
    assert len(sent) == 1  # the task goes out once the job row is committed
    job = JobRun.objects.get(study=s.study, kind="assignment")
    assert job.status == "queued" and job.params["seed"] == 11
    # The request did not solve anything: the page shows the job's progress and polls.
    waiting = client.get(response["Location"]).content.decode()
    assert "<progress" in waiting and "hx-get" in waiting and "reviewer-table" not in waiting
    # It polls the one job-status endpoint every job page shares.
    status = reverse("studies:job_status", args=[s.study.slug, job.pk])
    assert status in waiting
    fragment = client.get(status, headers={"HX-Request": "true"})
    assert "<progress" in fragment.content.decode() and "HX-Refresh" not in fragment

    preview_assignment(job.pk)
    job.refresh_from_db()
    assert job.status == "done" and job.percent == 100
    done = client.get(status, headers={"HX-Request": "true"})
    assert done["HX-Refresh"] == "true"
    # Without a job in the address the page shows the newest preview.
    assert "reviewer-table" in client.get(url).content.decode()
    page = client.get(response["Location"]).content.decode()
    for table in ("reviewer-table", "topic-table", "reviews-per-idea", "conditions-seen"):
        assert f'id="{table}"' in page
    assert page.count('<img src="data:image/svg+xml;base64,') == 4
    # No raw Python containers and no database ids: idea labels and pseudonyms only.
    assert "{'" not in page and "['" not in page
    assert "XID-" in page and "R001" in page
    idea_pks = [str(i.pk) for i in s.ideas]
    table = page[page.index('id="idea-table"') :]
    cells = [c.split("</td>")[0] for c in table.split("<td>")[1:]]
    assert not any(c in idea_pks for c in cells if not c.startswith("XID-"))
    assert "Commit this assignment" in page


@pytest.mark.django_db
def test_the_summary_counts_what_the_pairs_say(owner):
    s = make_review_study(owner, commit=False)
    job, result, plan = assignment_preview(study=s.study, seed=5)
    summary = job.params["summary"]
    pairs = [tuple(p) for p in job.params["pairs"]]
    per_reviewer = Counter(r for r, _ in pairs)
    for row in summary["reviewers"]:
        assert row["assigned"] == per_reviewer[row["reviewer"]]
        assert row["first_choice"] + row["second_choice"] == row["assigned"]
        assert sum(row["conditions"]) >= row["assigned"]  # an idea may be in two
        assert row["preferred"] == 3
    per_idea = Counter(i for _, i in pairs)
    hist = Counter(per_idea[i.id] for i in plan.inputs.ideas)
    assert summary["reviews_per_idea"] == [[k, n] for k, n in sorted(hist.items())]
    # Reviewers R001 and R002 share an institution with some Human ideas of their topics.
    by_id = {r["reviewer"]: r for r in summary["reviewers"]}
    assert by_id["R001"]["conflicts_avoided"] > 0 and by_id["R004"]["conflicts_avoided"] == 0


@pytest.mark.django_db
def test_without_reviewers_of_two_topics_the_topic_choice_plot_is_left_out_and_the_page_says_why(
    client, owner
):
    s = make_review_study(owner, commit=False)
    job, _, _ = assignment_preview(study=s.study, seed=5)
    url = reverse("studies:assignment_preview", args=[s.study.slug]) + f"?job={job.pk}"
    client.force_login(owner)
    page = client.get(url).content.decode()
    assert sum(job.params["summary"]["topic_choice"].values()) > 0
    assert page.count('<img src="data:image/svg+xml;base64,') == 4
    assert 'id="no-topic-choice"' not in page
    # The same preview had every reviewer chosen one topic: nothing to draw for a choice.
    job.params["summary"]["topic_choice"] = {"first": 0, "second": 0}
    job.save(update_fields=["params"])
    page = client.get(url).content.decode()
    assert page.count('<img src="data:image/svg+xml;base64,') == 3
    assert "First and second topic choice" not in page and 'id="no-topic-choice"' in page


@pytest.mark.django_db
def test_the_same_seed_previews_the_same_assignment_and_commit_writes_it(
    client, owner, django_capture_on_commit_callbacks
):
    s = make_review_study(owner, commit=False)
    a, _, _ = assignment_preview(study=s.study, seed=21)
    b, _, _ = assignment_preview(study=s.study, seed=21)
    assert a.params["pairs"] == b.params["pairs"]
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=False):
        client.post(reverse("studies:assignment_commit", args=[s.study.slug]), {"job": b.pk})
    written = {
        (a.reviewer.pseudonym, idea_label(a.idea))
        for a in Assignment.objects.filter(study=s.study).select_related("reviewer", "idea")
    }
    assert written == {tuple(p) for p in b.params["pairs"]}


@pytest.mark.django_db
def test_a_preview_still_running_cannot_be_committed(owner, django_capture_on_commit_callbacks):
    s = make_review_study(owner, commit=False)
    with django_capture_on_commit_callbacks(execute=False):
        job = assignment_preview_enqueue(study=s.study, seed=3)
    with pytest.raises(RecruitmentError, match="not finished"):
        assignment_commit(study=s.study, job=job)


@pytest.mark.django_db
def test_other_researcher_cannot_see_or_poll_a_preview(client, owner, other_researcher):
    s = make_review_study(owner, commit=False)
    job, _, _ = assignment_preview(study=s.study, seed=3)
    client.force_login(other_researcher)
    url = reverse("studies:assignment_preview", args=[s.study.slug]) + f"?job={job.pk}"
    assert client.get(url).status_code == 404
    status = reverse("studies:job_status", args=[s.study.slug, job.pk])
    assert client.get(status, headers={"HX-Request": "true"}).status_code == 404


@pytest.mark.django_db
def test_a_second_preview_while_one_runs_shows_the_running_one(
    client, owner, django_capture_on_commit_callbacks
):
    s = make_review_study(owner, commit=False)
    client.force_login(owner)
    url = reverse("studies:assignment_preview", args=[s.study.slug])
    with django_capture_on_commit_callbacks(execute=False) as sent:
        first = client.post(url, {"mode": "keep", "seed": "1"})
        second = client.post(url, {"mode": "keep", "seed": "2"})
    assert first["Location"] == second["Location"] and len(sent) == 1
    assert JobRun.objects.filter(study=s.study, kind="assignment").count() == 1


def test_preview_bars_keep_their_legend_off_the_bars_and_a_single_level_narrow():
    from studies.analysis.assignment_plots import _bars
    from studies.analysis.plots import pyplot

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(3.6, 2.4))
    # Every reviewer asked for and got 2 ideas: the bars reach the top of the plot.
    _bars(ax, [2], {"asked for": Counter({2: 3}), "assigned": Counter({2: 3})})
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    for bar in ax.patches:
        assert not legend.overlaps(bar.get_window_extent())
    low, high = ax.get_xlim()
    assert high - low > 1.2  # the two bars (0.8 wide together) do not fill the axis
    plt.close(fig)


def test_a_preview_opened_again_reuses_its_figures_and_another_summary_redraws(monkeypatch):
    from studies.analysis import assignment_plots

    plt = assignment_plots.pyplot()
    drawn = []
    subplots = plt.subplots

    def counting(*args, **kwargs):
        drawn.append(args)
        return subplots(*args, **kwargs)

    monkeypatch.setattr(plt, "subplots", counting)
    for draw in ("load_plot", "reviews_per_idea_plot", "conditions_plot", "topic_choice_plot"):
        getattr(assignment_plots, draw).memo.clear()
    summary = {  # the shape preview_summary gives, as the job's JSON keeps it
        "conditions": ["human", "ai"],
        "reviewers": [
            {"load_min": 4, "assigned": 4, "conditions": [2, 2]},
            {"load_min": 3, "assigned": 2, "conditions": [1, 1]},
        ],
        "reviews_per_idea": [[2, 3], [3, 1]],
        "topic_choice": {"first": 5, "second": 1},
    }
    first = assignment_plots.assignment_figures(summary)
    assert len(first) == 4 and len(drawn) == 4
    again = assignment_plots.assignment_figures(summary)
    assert again == first and len(drawn) == 4  # the same preview: nothing drawn
    again[0]["title"] = "changed by a caller"
    assert assignment_plots.assignment_figures(summary)[0]["title"] != "changed by a caller"
    other = {**summary, "reviews_per_idea": [[2, 2], [3, 2]]}
    redrawn = assignment_plots.assignment_figures(other)
    assert len(drawn) == 8 and redrawn[1]["src"] != first[1]["src"]  # each takes the summary
