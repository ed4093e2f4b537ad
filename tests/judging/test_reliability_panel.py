"""The run page's reliability panel, wired to the run's rows: calibration of direct scores
against the reviewers' means and the conditions' Bradley-Terry ratings with and without
style control, each checked against an independent fit of the same rows."""

from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from django.test import Client
from django.urls import reverse

from judging.models import Judgment, PairwiseOutcome
from studies.models import IdeaCondition, ReviewScore
from tests.factories import make_agreement_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded(owner):
    return make_agreement_study(owner, slug="panel", n_per_cell=6)


def _page(owner, study, run):
    c = Client()
    c.force_login(owner)
    return c, c.get(reverse("judging:run_detail", args=[study.slug, run.pk])).content.decode()


def test_direct_scores_are_calibrated_against_the_reviewers_means(seeded, owner):
    study, run = seeded.study, seeded.direct
    judge = (
        pd.DataFrame(Judgment.objects.filter(run=run, metric="overall").values("idea_id", "score"))
        .groupby("idea_id")["score"]
        .mean()
    )
    human = (
        pd.DataFrame(
            ReviewScore.objects.filter(review__study=study, metric="overall").values(
                "review__idea_id", "score"
            )
        )
        .groupby("review__idea_id")["score"]
        .mean()
    )
    both = judge.index.intersection(human.index)
    slope, intercept = np.polyfit(judge[both].to_numpy(), human[both].to_numpy(), 1)

    c, page = _page(owner, study, run)
    assert 'id="reliability"' in page and 'id="calibration-overall"' in page
    assert f"<strong>{slope:.2f}</strong>" in page
    assert 'id="calibration-plot-overall"' in page and "<svg" in page
    assert "repetition stability: this run asked each prompt once" in page

    rows = list(
        csv.DictReader(
            io.StringIO(
                c.get(
                    reverse("judging:run_reliability_csv", args=[study.slug, run.pk])
                ).content.decode()
            )
        )
    )
    got = {r["item"]: r for r in rows if r["metric_or_dimension"] == "overall"}
    assert float(got["slope"]["value"]) == pytest.approx(slope, abs=1e-10)
    assert float(got["intercept"]["value"]) == pytest.approx(intercept, abs=1e-10)
    low, high = float(got["slope"]["ci_low"]), float(got["slope"]["ci_high"])
    assert low < slope < high and high - low < 1.0


def test_pairwise_games_rate_the_conditions_raw_and_with_style_held_equal(seeded, owner):
    study, run = seeded.study, seeded.pairwise
    cond = dict(IdeaCondition.objects.filter(study=study).values_list("idea_id", "condition__key"))
    # Independently: a logistic regression of the first-shown idea's result on +1/-1 for
    # "AI shown first" and an intercept for the position, over games across conditions.
    x, y = [], []
    for a, b, first, verdict in PairwiseOutcome.objects.filter(run=run).values_list(
        "idea_a_id", "idea_b_id", "first_shown_id", "verdict"
    ):
        if cond[a] == cond[b]:
            continue
        second = b if first == a else a
        first_won = (verdict == "A") == (first == a)
        x.append(1.0 if cond[first] == "AI" else -1.0)
        assert cond[second] != cond[first]
        y.append(1.0 if first_won else 0.0)
    fit = sm.Logit(np.array(y), sm.add_constant(np.array(x))).fit(disp=0)
    delta = fit.params[1]  # theta_AI - theta_Human

    c, page = _page(owner, study, run)
    assert 'id="style-overall"' in page
    rows = list(
        csv.DictReader(
            io.StringIO(
                c.get(
                    reverse("judging:run_reliability_csv", args=[study.slug, run.pk])
                ).content.decode()
            )
        )
    )
    raw = {r["item"]: float(r["value"]) for r in rows if r["figure"] == "bt_raw"}
    assert raw["AI"] - raw["Human"] == pytest.approx(delta, abs=2e-3)
    controlled = {r["item"]: r for r in rows if r["figure"] == "bt_style_controlled"}
    assert set(controlled) == {"AI", "Human"}
    for r in controlled.values():
        assert float(r["ci_low"]) <= float(r["value"]) <= float(r["ci_high"])
    betas = {r["item"] for r in rows if r["figure"] == "style_beta"}
    assert {"length", "markdown_density", "list_items", "position"} <= betas


def test_no_panel_while_a_run_is_active_and_no_csv_for_it(seeded, owner):
    run = seeded.direct
    run.status = "running"
    run.save(update_fields=["status"])
    c, page = _page(owner, seeded.study, run)
    assert 'id="reliability"' not in page
    url = reverse("judging:run_reliability_csv", args=[seeded.study.slug, run.pk])
    assert c.get(url).status_code == 404


def test_style_features_that_move_together_are_flagged_on_the_run_page(seeded, owner):
    study, run = seeded.study, seeded.pairwise
    # Longer ideas carry proportionally more markup, as generated ideas often do: the
    # length and markdown-density differences of every game are nearly the same.
    for k, idea in enumerate(study.ideas.order_by("pk"), start=1):
        marks = k * k + k % 2
        idea.normalized_text = " ".join(["word"] * (20 * k - marks) + ["**b**"] * marks)
        idea.normalization_status = "approved"
        idea.save(update_fields=["normalized_text", "normalization_status"])
    c, page = _page(owner, study, run)
    assert 'id="style-collinear-overall"' in page
    note = page.split('id="style-collinear-overall"')[1].split("</p>")[0]
    assert "length and markdown_density vary together" in note
    assert "list_items" not in note  # no lists: not estimated, not flagged
    rows = csv.DictReader(
        io.StringIO(
            c.get(
                reverse("judging:run_reliability_csv", args=[study.slug, run.pk])
            ).content.decode()
        )
    )
    vif = {r["item"]: float(r["value"]) for r in rows if r["figure"] == "style_vif" and r["value"]}
    assert vif["length"] > 10 and vif["markdown_density"] > 10


def test_independent_style_features_carry_no_collinearity_note(seeded, owner):
    rng = np.random.default_rng(3)
    for idea in seeded.study.ideas.all():
        words, marks = int(rng.integers(60, 300)), int(rng.integers(1, 12))
        items = "\n".join(f"- item {n}" for n in range(int(rng.integers(1, 6))))
        idea.normalized_text = " ".join(["word"] * words + ["**b**"] * marks) + "\n" + items
        idea.normalization_status = "approved"
        idea.save(update_fields=["normalized_text", "normalization_status"])
    c, page = _page(owner, seeded.study, seeded.pairwise)
    assert 'id="style-overall"' in page and "style-collinear" not in page
    csv_text = c.get(
        reverse("judging:run_reliability_csv", args=[seeded.study.slug, seeded.pairwise.pk])
    ).content.decode()
    betas = {r["item"]: r["value"] for r in csv.DictReader(io.StringIO(csv_text))
             if r["figure"] == "style_beta"}  # fmt: skip
    assert all(betas[k] not in ("", None) for k in ("length", "markdown_density", "list_items"))


def test_the_report_reads_the_panel_without_drawing_its_plots_and_reuses_a_drawn_one(
    seeded, monkeypatch
):
    from django.core.cache import cache

    from judging import reliability_panel as rp

    cache.clear()
    drawn, computed = [], []
    draw, calibrate = rp.reliability_plot, rp._calibration
    monkeypatch.setattr(rp, "reliability_plot", lambda *a, **k: drawn.append(1) or draw(*a, **k))
    monkeypatch.setattr(rp, "_calibration", lambda *a: computed.append(1) or calibrate(*a))
    run = seeded.direct
    bare = rp.run_reliability(run, n_boot=30, plots=False)
    assert bare["calibration"] and all(r["plot"] == "" for r in bare["calibration"])
    assert drawn == [] and len(computed) == 1
    full = rp.run_reliability(run, n_boot=30)
    assert all(r["plot"].startswith("<svg") for r in full["calibration"]) and drawn
    assert [r["slope"] for r in full["calibration"]] == [r["slope"] for r in bare["calibration"]]
    before = (len(drawn), len(computed))
    again = rp.run_reliability(run, n_boot=30, plots=False)  # the drawn panel serves
    assert (len(drawn), len(computed)) == before and again["calibration"][0]["plot"]
