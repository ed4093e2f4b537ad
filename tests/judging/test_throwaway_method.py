"""A judge method added the way docs/architecture.md says ("A judge method"), at test time.

The registry entry is the step that joins a method to the rest: the run form's choices,
the baselines, the labels of the pages and the report, the planning of a run and its
driver all read it. The other steps (a pure module, a driver) are reused here: the
throwaway methods drive the direct-scoring and longer-text drivers. The generated
migration is stood in for by swapping the database's method check for the one the
registry now gives (`judging.models.method_check`), and back afterwards.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.urls import reverse

from judging.forms import JudgeRunForm
from judging.methods import registry
from judging.methods.registry import SCORES, MethodSpec
from judging.models import JudgeRun, Judgment, method_check
from judging.services import judge_run_create, judge_run_execute, judge_run_plan
from judging.services.ratings import RUN_RATINGS
from tests.judging.conftest import make_study

SCORED = MethodSpec(
    key="throwaway_twice",
    label="Throwaway: direct scoring, two samples",
    driver="judging.services.drivers.score:ScoreDriver",
    llm=True,
    defaults={"samples": 2},
    min_ideas=1,
    agreement=SCORES,
)
BASELINE = MethodSpec(
    key="throwaway_longer",
    label="Throwaway baseline: longer text",
    driver="judging.services.drivers.pairwise:LongerDriver",
    llm=False,
    defaults={"group_by": "topic", "sample_pairs": None, "seed": 0, "bt_bootstrap": 0},
    rating_metrics={"pairwise": "overall"},
)


def _swap_method_check(constraint) -> None:
    """Put `constraint` in the place of the model's method check, in the model and in
    the database (SQLite rebuilds the table from the model's constraints)."""
    old = next(c for c in JudgeRun._meta.constraints if c.name == constraint.name)
    JudgeRun._meta.constraints = [
        constraint if c.name == constraint.name else c for c in JudgeRun._meta.constraints
    ]
    with connection.schema_editor() as editor:
        editor.remove_constraint(JudgeRun, old)
        editor.add_constraint(JudgeRun, constraint)


@pytest.fixture
def throwaway(transactional_db, monkeypatch):
    for spec in (SCORED, BASELINE):
        monkeypatch.setitem(registry.METHODS, spec.key, spec)
    before = next(c for c in JudgeRun._meta.constraints if c.name == "judge_run_method_valid")
    _swap_method_check(method_check())
    yield
    JudgeRun.objects.filter(method__in=[SCORED.key, BASELINE.key]).delete()
    _swap_method_check(before)


def test_the_registry_entry_is_what_the_choices_baselines_and_check_read(throwaway):
    choices = dict(JudgeRunForm(configs=None).fields["method"].choices)
    assert choices[SCORED.key] == SCORED.label
    assert choices[BASELINE.key] == BASELINE.label
    assert BASELINE.key in JudgeRun.BASELINES and SCORED.key not in JudgeRun.BASELINES
    assert SCORED.key in registry.LLM_METHODS and BASELINE.key not in registry.LLM_METHODS
    assert registry.DEFAULT_PARAMS[SCORED.key] == {"samples": 2}
    (check,) = [c for c in JudgeRun._meta.constraints if c.name == "judge_run_method_valid"]
    assert check.condition.children == [("method__in", list(registry.METHODS))]


def test_a_throwaway_method_is_offered_run_and_reported_by_its_label(
    throwaway, client, owner, judge, scripted, monkeypatch
):
    study = make_study(owner, slug="throwaway")
    client.force_login(owner)
    page = client.get(reverse("judging:run_create", args=[study.slug]))
    assert page.status_code == 200
    body = page.content.decode()
    assert f'value="{SCORED.key}"' in body and SCORED.label in body
    assert f'value="{BASELINE.key}"' in body

    assert judge_run_plan(study=study, method=SCORED.key)["params"]["samples"] == 2
    # The form starts the run; the worker's part (sending the task) is done below by hand.
    queued: list[JudgeRun] = []
    monkeypatch.setattr("judging.views.judge_run_enqueue", lambda *, run: queued.append(run))
    response = client.post(page.request["PATH_INFO"], {"method": SCORED.key, "config": judge.pk})
    assert response.status_code == 302, response.content.decode()
    (scored,) = queued
    scored = judge_run_execute(run=scored)
    assert scored.method == SCORED.key and scored.status == JudgeRun.Status.DONE, scored.error
    n_ideas = study.ideas.count()
    metrics = [m.key for m in study.form_definition().metrics]
    # Two samples of every idea, one call each, scoring every metric of the form.
    assert scored.http_calls == 2 * n_ideas
    assert Judgment.objects.filter(run=scored).count() == 2 * n_ideas * len(metrics)
    baseline = judge_run_execute(run=judge_run_create(study=study, method=BASELINE.key))
    assert baseline.status == JudgeRun.Status.DONE, baseline.error
    assert baseline.method_is_baseline and baseline.http_calls == 0

    detail = client.get(reverse("judging:run_detail", args=[study.slug, scored.pk]))
    assert SCORED.label in detail.content.decode()
    home = client.get(reverse("judging:home", args=[study.slug])).content.decode()
    assert SCORED.label in home and BASELINE.label in home

    # What the report reads: both runs, the baseline by its label.
    inputs = {j.method: j for j in RUN_RATINGS.judge_inputs(study, metrics, panel_bootstrap=100)}
    assert set(inputs) == {SCORED.key, BASELINE.key}
    assert inputs[BASELINE.key].label == f"{BASELINE.label} (run {baseline.pk})"
    assert inputs[BASELINE.key].baseline and not inputs[SCORED.key].baseline
    scores = inputs[SCORED.key].judge_scores
    assert scores is not None
    assert set(scores["metric"]) == set(metrics)
    assert scores.groupby(["idea_id", "metric"]).size().eq(2).all()
    assert BASELINE.key in RUN_RATINGS.baseline_availability(study)
