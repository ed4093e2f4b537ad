"""The report's CSV tables carry the judges' reliability figures: a pairwise panel's
members', its own and panel − best member's agreement with the reviewers (correlation with
their means, accuracy on their pair ratings), with intervals, in `judge_panel.csv`; each
run's reliability panel in `judge_reliability.csv`. The figures are computed again here
with scipy and numpy from the rows."""

from __future__ import annotations

import csv
import json
import random
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats

from tests.factories import FAST, make_agreement_study

pytestmark = pytest.mark.slow  # a report


def _add_noisy_member(seeded):
    """A second judge on the pairwise run, seat 1: the quality order, with much noise."""
    from judging.models import PairwiseOutcome, PanelMember
    from llm.models import JudgeConfig

    run = seeded.pairwise
    config = JudgeConfig.objects.create(
        name="noisy-llm", study=seeded.study, base_url="http://127.0.0.1:9/v1", model="noisy-1"
    )
    PanelMember.objects.create(run=run, config=config, seat=1)
    rng = random.Random(11)
    for o in list(PairwiseOutcome.objects.filter(run=run, member=0)):
        diff = seeded.quality[o.idea_a_id] - seeded.quality[o.idea_b_id] + rng.gauss(0, 3.0)
        PairwiseOutcome.objects.create(
            run=run, member=1, idea_a_id=o.idea_a_id, idea_b_id=o.idea_b_id,
            first_shown_id=o.first_shown_id, verdict="A" if diff > 0 else "B",
        )  # fmt: skip


@pytest.fixture
def built(db, owner, tmp_path, settings):
    from studies.report_files import report_build

    settings.REPORTS_ROOT = tmp_path
    seeded = make_agreement_study(owner)
    _add_noisy_member(seeded)
    report_build(study=seeded.study, out_dir=tmp_path / "rep", options=FAST)
    return seeded, tmp_path / "rep"


def _num(v):
    return None if v in ("", None) else float(v)


def _by_hand(seeded):
    """Per member and for the panel: the net wins of each idea (the 1–5 pairwise score is
    an increasing linear map of it: every idea meets the same number of opponents), and
    the preference on each pair; and the reviewers' means and pair ratings."""
    from judging.models import PairwiseOutcome
    from studies.models import PairJudgment, ReviewScore

    net: dict[object, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    margin: dict[object, dict[tuple, int]] = defaultdict(lambda: defaultdict(int))
    orders: dict[tuple, list[str]] = defaultdict(list)
    for o in PairwiseOutcome.objects.filter(run=seeded.pairwise):
        orders[(o.idea_a_id, o.idea_b_id, o.first_shown_id)].append(o.verdict)
        rows = [(o.member, o.verdict)]
        for who, verdict in rows:
            sign = {"A": 1, "B": -1}.get(verdict, 0)
            net[who][o.idea_a_id] += sign
            net[who][o.idea_b_id] -= sign
            x, y = sorted((o.idea_a_id, o.idea_b_id))
            margin[who][(x, y)] += sign if o.idea_a_id == x else -sign
    for (a, b, _first), verdicts in orders.items():
        n_a, n_b = verdicts.count("A"), verdicts.count("B")
        sign = 1 if n_a > n_b else -1 if n_b > n_a else 0
        net["panel"][a] += sign
        net["panel"][b] -= sign
        x, y = sorted((a, b))
        margin["panel"][(x, y)] += sign if a == x else -sign
    means: dict[int, list[float]] = defaultdict(list)
    for idea, score in ReviewScore.objects.filter(
        review__study=seeded.study, metric="overall"
    ).values_list("review__idea_id", "score"):
        means[idea].append(score)
    ratings = []
    for a, b, winner in PairJudgment.objects.filter(
        task__study=seeded.study, dimension="overall"
    ).values_list("task__idea_a_id", "task__idea_b_id", "winner"):
        x, y = sorted((a, b))
        side = "tie" if winner == "tie" else "x" if (winner == "a") == (a == x) else "y"
        ratings.append((x, y, side))
    return net, margin, {i: float(np.mean(v)) for i, v in means.items()}, ratings


def test_the_reports_csv_tables_carry_a_panels_figures_with_intervals(built):
    seeded, out = built
    report = json.loads((out / "report.json").read_text())
    assert "judge_panel.csv" in report["files"]["csv"]
    assert "judge_reliability.csv" in report["files"]["csv"]
    rows = list(csv.DictReader((out / "judge_panel.csv").open()))
    key = f"run{seeded.pairwise.pk}"
    mine = [r for r in rows if r["judge"] == key]
    assert {r["figure"] for r in mine} == {
        "agreement_with_reviewer_means",
        "accuracy_on_pair_ratings",
    }
    net, margin, human, ratings = _by_hand(seeded)
    labels = {0: "pair-llm", 1: "noisy-llm", "panel": "panel"}
    n_boot, seed = FAST.panel_bootstrap, seeded.pairwise.pk

    # Spearman of each judge's net wins against the reviewers' means, and its bootstrap
    # over ideas (the ideas in id order, one set of resamples).
    ideas = sorted(human)
    y = np.array([human[i] for i in ideas])
    idx = np.random.default_rng(seed).integers(0, len(ideas), size=(n_boot, len(ideas)))
    draws = {}
    for who, label in labels.items():
        x = np.array([net[who][i] for i in ideas], float)
        (row,) = [
            r for r in mine
            if r["figure"] == "agreement_with_reviewer_means" and r["measure"] == "spearman"
            and r["of"] == label
        ]  # fmt: skip
        assert _num(row["value"]) == pytest.approx(stats.spearmanr(x, y).statistic)
        draws[label] = np.array([stats.spearmanr(x[k], y[k]).statistic for k in idx])
        low, high = np.nanquantile(draws[label], [0.025, 0.975])
        assert (_num(row["ci_low"]), _num(row["ci_high"])) == pytest.approx((low, high))
        assert int(row["n"]) == len(ideas)
    (diff,) = [
        r for r in mine
        if r["figure"] == "agreement_with_reviewer_means" and r["measure"] == "spearman"
        and r["kind"] == "difference"
    ]  # fmt: skip
    best = diff["best_member"]
    assert best == "pair-llm"  # the steadier judge
    d = draws["panel"] - np.maximum(draws["pair-llm"], draws["noisy-llm"])
    assert (_num(diff["ci_low"]), _num(diff["ci_high"])) == pytest.approx(
        tuple(np.nanquantile(d, [0.025, 0.975]))
    )

    # Accuracy on the reviewers' pair ratings (ties a label), with the vertex bootstrap.
    items = [r for r in ratings if all((r[0], r[1]) in margin[w] for w in labels)]
    pool = sorted({i for r in items for i in r[:2]})
    pos = {i: k for k, i in enumerate(pool)}
    rng = np.random.default_rng(seed)
    counts = np.array(
        [
            np.bincount(rng.integers(0, len(pool), len(pool)), minlength=len(pool))
            for _ in range(n_boot)
        ]  # fmt: skip
    )
    w = counts[:, [pos[r[0]] for r in items]] * counts[:, [pos[r[1]] for r in items]]
    for who, label in labels.items():
        pref = ["x" if margin[who][r[:2]] > 0 else "y" if margin[who][r[:2]] < 0 else "tie" for r in items]  # fmt: skip
        hit = np.array([p == r[2] for p, r in zip(pref, items, strict=True)], float)
        (row,) = [
            r for r in mine
            if r["figure"] == "accuracy_on_pair_ratings" and r["measure"] == "with_ties"
            and r["of"] == label
        ]  # fmt: skip
        assert _num(row["value"]) == pytest.approx(hit.mean()) and int(row["n"]) == len(items)
        low, high = np.nanquantile((w @ hit) / w.sum(axis=1), [0.025, 0.975])
        assert (_num(row["ci_low"]), _num(row["ci_high"])) == pytest.approx((low, high))

    # Beside them, the reviewers against each other on the same pairs: every two ratings
    # of one pair an item.
    groups = defaultdict(list)
    for x, y, side in items:
        groups[(x, y)].append(side)
    same = [u == v for ws in groups.values() for i, u in enumerate(ws) for v in ws[i + 1 :]]
    (row,) = [
        r for r in mine
        if r["figure"] == "accuracy_on_pair_ratings" and r["measure"] == "with_ties"
        and r["kind"] == "reviewers"
    ]  # fmt: skip
    assert _num(row["value"]) == pytest.approx(np.mean(same)) and int(row["n"]) == len(same)

    # The CSV is report.json's panel, number for number.
    (entry,) = [j for j in report["agreement"]["judges"] if j["key"] == key]
    panel = entry["info"]["panel"]
    fig = panel["metrics"][0]["measures"]["kendall"]["panel"]
    (row,) = [r for r in mine if r["measure"] == "kendall" and r["of"] == "panel"]
    assert (_num(row["value"]), _num(row["ci_low"]), _num(row["ci_high"])) == pytest.approx(
        (fig["value"], fig["low"], fig["high"])
    )

    # judge_reliability.csv: the direct run's calibration slope is the least-squares slope
    # of the reviewers' means on the judge's scores.
    from judging.models import Judgment

    judge = dict(
        Judgment.objects.filter(run=seeded.direct, metric="overall").values_list("idea_id", "score")
    )
    both = sorted(set(judge) & set(human))
    slope = np.polyfit([judge[i] for i in both], [human[i] for i in both], 1)[0]
    reliability = list(csv.DictReader((out / "judge_reliability.csv").open()))
    (row,) = [
        r for r in reliability
        if r["judge"] == f"run{seeded.direct.pk}" and r["figure"] == "calibration"
        and r["on"] == "overall" and r["item"] == "slope"
    ]  # fmt: skip
    assert _num(row["value"]) == pytest.approx(slope)
    assert _num(row["ci_low"]) < slope < _num(row["ci_high"])
