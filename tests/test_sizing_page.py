"""Sizing the next study from a study's reviews: the plan's primary test, the page with its
job and power curve, the command, and what viewers and strangers may do.

The statistics themselves are checked in tests/analysis/test_pilot.py and test_sizing.py;
here the wiring: the page's answer is the pure function's on the same frame and seed, at
the level and in the direction the study's plan gives the comparison."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from studies.analysis.pilot import size_from_plan
from studies.analysis.plan import PlanError, parse_plan, plan_document, plan_hash
from studies.design_sizing import SIZING_JOB, SizingRequest, sizing_check
from studies.models import AuditEvent, JobRun, StudyMember
from studies.selectors import review_frame
from studies.services.plans import study_plan
from studies.services.study import study_plan_set
from studies.tasks import size_design
from tests.factories import make_pilot_study

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

QUICK = {"n_boot": 20, "n_reps": 120}


@pytest.fixture
def pilot(owner):
    return make_pilot_study(owner)


def _post(client: Client, study, **fields):
    data = {
        "metric": "overall",
        "test": "by_idea",
        "condition": "AI",
        "effect": "0.8",
        "power": "0.8",
        "reviews_per_idea": "2, 3",
        "load": "",
        "n_boot": "20",
        **fields,
    }
    return client.post(reverse("studies:sizing", args=[study.slug]), data)


# ------------------------------------------------------------------ the plan's primary test


def test_a_plan_names_its_primary_test_and_plans_without_one_keep_their_hash():
    plain = {"primary_metrics": ["overall"], "multiple_testing": {"method": "holm"}}
    before = parse_plan(plain)
    assert before.primary is None and "primary" not in plan_document(before)
    primary = {"metric": "overall", "test": "mixed", "condition": "AI", "effect": 0.4}
    plan = parse_plan({**plain, "primary": primary})
    assert (plan.primary.metric, plan.primary.test, plan.primary.effect) == (
        "overall",
        "mixed",
        0.4,
    )
    assert plan.primary.power == 0.8
    assert parse_plan(plan_document(plan)) == plan  # round-trips
    assert plan_hash(plan) != plan_hash(before)
    # The hash of a plan without a primary test is the hash of its document as it always
    # was: the canonical JSON of the fields every plan has.
    doc = plan_document(before)
    assert set(doc) == {
        "schema", "primary_metrics", "secondary_metrics", "tests", "mixed_model",
        "hypotheses", "multiple_testing", "alpha",
    }  # fmt: skip


def test_a_wrong_primary_test_is_refused_naming_each_field():
    with pytest.raises(PlanError) as err:
        parse_plan({"primary": {"test": "anova", "condition": "AI", "effect": -1, "power": 2}})
    text = "; ".join(err.value.problems)
    for field in ("primary.metric", "primary.test", "primary.effect", "primary.power"):
        assert field in text
    with pytest.raises(PlanError, match="primary: unknown field"):
        parse_plan({"primary": {"metric": "overall", "condition": "AI", "alpha": 0.1}})


def test_a_primary_test_must_name_the_studys_metric_and_a_compared_condition(pilot, owner):
    with pytest.raises(PlanError) as err:
        study_plan_set(
            study=pilot,
            source={"primary": {"metric": "charm", "condition": "Human"}},
            actor=owner,
        )
    text = "; ".join(err.value.problems)
    assert "primary.metric: 'charm' is not a metric" in text
    assert "primary.condition: 'Human' is not a condition compared with the baseline" in text
    assert study_plan(pilot).primary is None  # nothing stored


# ------------------------------------------------------------------ the page and its job


def test_the_page_sizes_a_design_from_the_reviews_at_the_plans_level(
    pilot, owner, django_capture_on_commit_callbacks
):
    # A one-sided, Benjamini-Hochberg plan with one family per test over two metrics (and
    # the one compared condition): the comparison is tested at alpha / 2, the first step
    # of BH, in the direction "AI > Human".
    study_plan_set(
        study=pilot,
        source={
            "primary_metrics": ["overall", "novelty"],
            "tests": ["by_review", "by_idea"],
            "hypotheses": [{"direction": "AI > Human"}],
            "multiple_testing": {"method": "bh", "families": "per_test"},
            "primary": {"metric": "overall", "test": "by_idea", "condition": "AI", "effect": 0.8},
        },
        actor=owner,
    )
    c = Client()
    c.force_login(owner)
    url = reverse("studies:sizing", args=[pilot.slug])
    page = c.get(url).content.decode()
    assert "The fields start from the plan's primary test" in page
    assert 'value="0.8"' in page and '<option value="overall" selected>' in page

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = _post(c, pilot)
    assert response.status_code == 302 and len(callbacks) == 1
    job = JobRun.objects.get(study=pilot, kind=SIZING_JOB)
    assert 'id="sizing-progress"' in c.get(url).content.decode()  # shown while queued
    job.params.update(QUICK)
    job.save()
    size_design(job.pk)
    job.refresh_from_db()
    assert job.status == JobRun.Status.DONE and job.done == job.total

    result = job.params["result"]
    level = result["plan_level"]
    assert level["alternative"] == "greater" and level["family_size"] == 2
    assert level["level"] == pytest.approx(0.05 / 2)
    # The wiring adds nothing of its own: the pure function on the same frame and seed
    # gives the same design and interval.
    direct = size_from_plan(
        review_frame(pilot),
        study_plan(pilot),
        metric="overall",
        test="by_idea",
        condition="AI",
        baseline="Human",
        metrics=pilot.form_definition().metric_keys,
        effect=0.8,
        power=0.8,
        reviews_per_idea=(2, 3),
        n_boot=20,
        n_reps=120,
        seed=job.params["seed"],
    ).to_dict()
    assert result["design"] == direct["design"] and result["design"] is not None
    assert result["interval_reviews"] == direct["interval_reviews"]

    page = c.get(url).content.decode()
    design = result["design"]
    assert f"<strong>{design['n_reviews']} reviews</strong>" in page
    low, high = design["load_min"], design["load"]
    each = f"{low}–{high}" if low != high else f"{high}"
    assert f"{design['n_reviewers']} reviewers writing {each} reviews each" in page
    # What the reviewers write adds up to the reviews, and the loads stay within the load.
    assert low * design["n_reviewers"] <= design["n_reviews"] <= high * design["n_reviewers"]
    # The table's rows are whole designs (the interpolated crossing beside them); the
    # chosen row is the design above.
    chosen = page[page.index('class="chosen"') :].split("</tr>", 1)[0]
    assert f'<td class="num">{design["ideas_per_condition"]}</td>' in chosen
    assert f'<td class="num">{design["n_reviews"]}</td>' in chosen
    for shape in result["shapes"]:
        if shape["whole_ideas_per_condition"] is not None:
            assert shape["whole_ideas_per_condition"] >= shape["ideas_per_condition"]
            assert shape["whole_ideas_per_condition"] - shape["ideas_per_condition"] < 1
    assert 'id="sizing-plot"' in page and "<svg" in page
    assert "(greater)" in page and "Benjamini" in page
    assert 'value="2, 3"' in page and 'name="n_boot" value="20"' in page  # the last run's
    verbs = set(AuditEvent.objects.filter(study=pilot).values_list("verb", flat=True))
    assert {"sizing_started", "sizing_finished"} <= verbs


def test_a_study_without_reviews_says_so_and_starts_nothing(owner):
    from studies.services.study import study_create

    empty = study_create(
        owner=owner,
        slug="empty",
        title="Empty",
        baseline_condition="Human",
        conditions=[("Human", "human"), ("AI", "ai")],
    )
    c = Client()
    c.force_login(owner)
    assert c.get(reverse("studies:sizing", args=[empty.slug])).status_code == 200
    response = _post(c, empty)
    assert response.status_code == 200
    assert "the study has no submitted reviews to size from" in response.content.decode()
    assert not JobRun.objects.filter(study=empty).exists()


def test_bad_fields_are_named_and_start_nothing(pilot, owner):
    c = Client()
    c.force_login(owner)
    body = _post(c, pilot, reviews_per_idea="two", condition="Human", power="1.5").content.decode()
    assert "Whole numbers separated by commas" in body
    assert "Select a valid choice" in body  # the baseline is not offered against itself
    assert "less than or equal to 0.99" in body
    assert not JobRun.objects.filter(study=pilot).exists()


def test_without_reviewer_ids_the_load_must_be_given(pilot, owner):
    pilot.reviews.update(reviewer=None)
    req = SizingRequest(metric="overall", test="by_idea", condition="AI", effect=0.5)
    assert any(
        p.startswith("load: the reviews carry no reviewer ids") for p in sizing_check(pilot, req)
    )
    assert sizing_check(pilot, SizingRequest(**{**req.__dict__, "load": 6})) == []


def test_viewers_read_the_result_but_cannot_start_and_strangers_see_nothing(pilot, owner):
    viewer = get_user_model().objects.create_user("viewer", password="viewer-pass-123")
    StudyMember.objects.create(study=pilot, user=viewer, role=StudyMember.Role.VIEWER)
    stranger = get_user_model().objects.create_user("stranger", password="stranger-pass-123")
    url = reverse("studies:sizing", args=[pilot.slug])
    c = Client()
    c.force_login(viewer)
    page = c.get(url).content.decode()
    assert "An editor or the owner can start a sizing" in page and 'id="run-sizing"' not in page
    assert _post(c, pilot).status_code == 403
    c.force_login(stranger)
    assert c.get(url).status_code == 404
    assert _post(c, pilot).status_code == 404
    assert not JobRun.objects.filter(study=pilot).exists()


# ------------------------------------------------------------------ the command


def test_the_command_prints_the_design_and_its_interval(pilot, capsys):
    call_command(
        "study_size", pilot.slug, "--metric", "novelty", "--effect", "0.8",
        "--reviews-per-idea", "3", "--bootstrap", "20", "--reps", "120", "--json",
    )  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert doc["hypothesis"]["metric"] == "novelty" and doc["design"]["reviews_per_idea"] == 3
    assert doc["interval_reviews"][0] <= doc["size_reviews"] <= doc["interval_reviews"][1]
    call_command(
        "study_size", pilot.slug, "--effect", "0.8", "--reviews-per-idea", "3",
        "--bootstrap", "20", "--reps", "120",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert f"{doc['design']['reviews_per_idea']} reviews" in out and "interval over 20" in out
    with pytest.raises(CommandError, match="metric: 'charm' is not a metric"):
        call_command("study_size", pilot.slug, "--metric", "charm")
