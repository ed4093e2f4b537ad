"""A judge's own reliability panel: its figures pooled over its finished runs in one study
(as the run's judge or as a panel member), on its page and as CSV, each computed again
here with scipy and numpy from the rows; and never a figure from another study's runs,
even of a judge the administrator shares with every study."""

from __future__ import annotations

import csv
import io
from collections import defaultdict

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse
from scipy import stats

from judging.config_panel import config_reliability
from judging.models import JudgeRun, Judgment, PairwiseOutcome
from judging.reliability_panel import PANEL_BOOT
from llm.models import JudgeConfig
from studies.models import PairJudgment, ReviewScore
from tests.factories import make_agreement_study, make_direct_run

DONE = JudgeRun.Status.DONE


def _human_means(study, metric="overall"):
    means = defaultdict(list)
    for idea, score in ReviewScore.objects.filter(review__study=study, metric=metric).values_list(
        "review__idea_id", "score"
    ):
        means[idea].append(score)
    return {i: float(np.mean(v)) for i, v in means.items()}


def _spearman_with_bootstrap(x: dict, y: dict, seed: int, n_boot: int = PANEL_BOOT):
    ideas = sorted(set(x) & set(y))
    a = np.array([x[i] for i in ideas], float)
    b = np.array([y[i] for i in ideas], float)
    idx = np.random.default_rng(seed).integers(0, len(ideas), size=(n_boot, len(ideas)))
    draws = np.array([stats.spearmanr(a[k], b[k]).statistic for k in idx])
    return stats.spearmanr(a, b).statistic, tuple(np.nanquantile(draws, [0.025, 0.975])), ideas


@pytest.mark.django_db
def test_a_judges_page_pools_its_runs_in_the_study_wherever_it_sat(owner):
    seeded = make_agreement_study(owner)
    study = seeded.study
    scorer = seeded.direct.config
    other = JudgeConfig.objects.create(name="other-llm", study=study, base_url="http://127.0.0.1:9/v1", model="other-1")  # fmt: skip
    second = make_direct_run(seeded, scorer, noise=1.5, seed=3)
    as_member = make_direct_run(seeded, scorer, noise=1.0, seed=4, panel_with=other)
    # An unfinished run of the judge is not pooled.
    JudgeRun.objects.create(study=study, config=scorer, method="direct", status=JudgeRun.Status.RUNNING)  # fmt: skip

    panel = config_reliability(study, scorer)
    assert [r["id"] for r in panel["runs"]] == [seeded.direct.pk, second.pk, as_member.pk]
    assert [r["seat"] for r in panel["runs"]] == [0, 0, 1]
    # By hand: the judge's score of an idea is the mean over the three runs of its own
    # scores (seat 1 in the panel run; seat 0 there is the other judge's).
    per_idea = defaultdict(list)
    for run, seat in ((seeded.direct, 0), (second, 0), (as_member, 1)):
        for idea, score in Judgment.objects.filter(run=run, member=seat, metric="overall").values_list("idea_id", "score"):  # fmt: skip
            per_idea[idea].append(score)
    pooled = {i: float(np.mean(v)) for i, v in per_idea.items()}
    assert all(len(v) == 3 for v in per_idea.values())
    human = _human_means(study)
    rho, (low, high), ideas = _spearman_with_bootstrap(pooled, human, scorer.pk)
    (block,) = [b for b in panel["agreement"] if (b["method"], b["metric"]) == ("direct", "overall")]  # fmt: skip
    got = block["measures"]["spearman"]
    assert block["n_ideas"] == len(ideas) == 32
    assert got["value"] == pytest.approx(rho) and (got["low"], got["high"]) == pytest.approx((low, high))  # fmt: skip
    tau = stats.kendalltau([pooled[i] for i in ideas], [human[i] for i in ideas]).statistic
    assert block["measures"]["kendall"]["value"] == pytest.approx(tau)
    # Calibration: least squares of the reviewers' means on the pooled scores.
    (cal,) = [b for b in panel["calibration"] if (b["method"], b["metric"]) == ("direct", "overall")]  # fmt: skip
    slope, intercept = np.polyfit([pooled[i] for i in ideas], [human[i] for i in ideas], 1)
    assert cal["slope"]["value"] == pytest.approx(slope)
    assert cal["intercept"]["value"] == pytest.approx(intercept)
    assert cal["slope"]["low"] < slope < cal["slope"]["high"]

    # The page and its CSV show the same numbers.
    c = Client()
    c.force_login(owner)
    home = c.get(reverse("judging:home", args=[study.slug])).content.decode()
    url = reverse("judging:config_detail", args=[study.slug, scorer.pk])
    assert f'href="{url}"' in home
    page = c.get(url).content.decode()
    assert 'id="config-agreement-direct-overall"' in page
    assert f"{rho:.3f}" in page and f"{low:.3f} to {high:.3f}" in page
    assert f"#{as_member.pk}" in page and "panel seat 1" in page
    body = c.get(reverse("judging:config_reliability_csv", args=[study.slug, scorer.pk])).content.decode()  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(body)))
    (row,) = [r for r in rows if r["figure"] == "agreement_spearman" and r["source"] == "direct" and r["metric_or_dimension"] == "overall"]  # fmt: skip
    assert float(row["value"]) == pytest.approx(rho)
    assert (float(row["ci_low"]), float(row["ci_high"])) == pytest.approx((low, high))


@pytest.mark.django_db
def test_a_pairwise_judges_page_gives_its_accuracy_on_the_reviewers_pair_ratings(owner):
    seeded = make_agreement_study(owner)
    study, judge = seeded.study, seeded.pairwise.config
    panel = config_reliability(study, judge)
    # By hand: the judge's preference per pair from its verdicts over both orders, each
    # reviewer rating one item; the vertex bootstrap written out with numpy.
    margin = defaultdict(int)
    for a, b, verdict in PairwiseOutcome.objects.filter(run=seeded.pairwise).values_list("idea_a_id", "idea_b_id", "verdict"):  # fmt: skip
        x, y = sorted((a, b))
        sign = {"A": 1, "B": -1}.get(verdict, 0)
        margin[(x, y)] += sign if a == x else -sign
    items = []
    for a, b, winner in PairJudgment.objects.filter(task__study=study).values_list("task__idea_a_id", "task__idea_b_id", "winner"):  # fmt: skip
        x, y = sorted((a, b))
        if (x, y) in margin:
            items.append((x, y, "tie" if winner == "tie" else "x" if (winner == "a") == (a == x) else "y"))  # fmt: skip
    pref = ["x" if margin[r[:2]] > 0 else "y" if margin[r[:2]] < 0 else "tie" for r in items]
    hit = np.array([p == r[2] for p, r in zip(pref, items, strict=True)], float)
    pool = sorted({i for r in items for i in r[:2]})
    pos = {i: k for k, i in enumerate(pool)}
    rng = np.random.default_rng(judge.pk)
    counts = np.array([np.bincount(rng.integers(0, len(pool), len(pool)), minlength=len(pool)) for _ in range(PANEL_BOOT)])  # fmt: skip
    w = counts[:, [pos[r[0]] for r in items]] * counts[:, [pos[r[1]] for r in items]]
    (block,) = panel["pair_accuracy"]
    got = block["measures"]["with_ties"]["members"][judge.name]
    assert block["n_ratings"] == len(items) > 0
    assert got["value"] == pytest.approx(hit.mean())
    # A draw that picks no rated pair has no accuracy (0 / 0): left out, as the panel does.
    with np.errstate(invalid="ignore"):
        boot = (w @ hit) / w.sum(axis=1)
    assert (got["low"], got["high"]) == pytest.approx(tuple(np.nanquantile(boot, [0.025, 0.975])))  # fmt: skip
    assert block["measures"]["with_ties"]["panel"] is None  # one judge: no panel figure
    # Its agreement with the reviewers' overall mean from its 1–5 pairwise scores: an
    # increasing linear map of its net wins (every idea meets the same number of others).
    net = defaultdict(int)
    for a, b, verdict in PairwiseOutcome.objects.filter(run=seeded.pairwise).values_list("idea_a_id", "idea_b_id", "verdict"):  # fmt: skip
        sign = {"A": 1, "B": -1}.get(verdict, 0)
        net[a] += sign
        net[b] -= sign
    rho, (low, high), ideas = _spearman_with_bootstrap(net, _human_means(study), judge.pk)
    (agreement,) = [b for b in panel["agreement"] if b["method"] == "pairwise"]
    assert agreement["metric"] == "overall" and agreement["n_ideas"] == len(ideas)
    got = agreement["measures"]["spearman"]
    assert got["value"] == pytest.approx(rho) and (got["low"], got["high"]) == pytest.approx((low, high))  # fmt: skip
    c = Client()
    c.force_login(owner)
    page = c.get(reverse("judging:config_detail", args=[study.slug, judge.pk])).content.decode()
    assert 'id="config-pairs-overall"' in page and f"{hit.mean():.3f}" in page


@pytest.mark.django_db
def test_a_judge_page_never_shows_another_teams_runs_or_judges(owner, other_researcher):
    """The administrator's judge, shared by every study, is run in two teams' studies: each
    study's page of it pools that study's runs alone. Another team's own judge is a 404
    under this study's address, and this study's pages are a 404 to the other team."""
    ours = make_agreement_study(owner, slug="ours")
    theirs = make_agreement_study(other_researcher, slug="theirs")
    shared = JudgeConfig.objects.create(name="shared-llm", base_url="http://127.0.0.1:9/v1", model="shared-1")  # fmt: skip
    mine = make_direct_run(ours, shared, noise=1.0, seed=5)
    # Their run of the shared judge disagrees with everything: were it pooled, our figures
    # would move.
    their_run = make_direct_run(theirs, shared, noise=25.0, seed=6)

    panel = config_reliability(ours.study, shared)
    assert [r["id"] for r in panel["runs"]] == [mine.pk]
    scores = dict(Judgment.objects.filter(run=mine, metric="overall").values_list("idea_id", "score"))  # fmt: skip
    rho, _ci, ideas = _spearman_with_bootstrap(scores, _human_means(ours.study), shared.pk)
    (block,) = [b for b in panel["agreement"] if b["metric"] == "overall"]
    assert block["measures"]["spearman"]["value"] == pytest.approx(rho)
    assert block["n_ideas"] == len(ideas) and not set(ideas) & {i.pk for i in theirs.ideas}
    their_rho = config_reliability(theirs.study, shared)["agreement"][0]["measures"]["spearman"]

    c = Client()
    c.force_login(owner)
    page = c.get(reverse("judging:config_detail", args=[ours.study.slug, shared.pk])).content.decode()  # fmt: skip
    assert f"#{mine.pk}" in page and f"#{their_run.pk}" not in page
    assert f"runs/{their_run.pk}/" not in page and f"{their_rho['value']:.3f}" not in page
    body = c.get(reverse("judging:config_reliability_csv", args=[ours.study.slug, shared.pk])).content.decode()  # fmt: skip
    assert f"{their_rho['value']}" not in body
    # Their team's own judge: a 404 under our study's address, page and CSV alike.
    their_judge = theirs.direct.config
    for name in ("judging:config_detail", "judging:config_reliability_csv"):
        assert c.get(reverse(name, args=[ours.study.slug, their_judge.pk])).status_code == 404
        assert c.get(reverse(name, args=[theirs.study.slug, their_judge.pk])).status_code == 404
        assert c.get(reverse(name, args=[theirs.study.slug, shared.pk])).status_code == 404
    # Their run of the shared judge, under our study's address: a 404, page and CSV.
    for name in ("judging:run_detail", "judging:run_reliability_csv"):
        assert c.get(reverse(name, args=[ours.study.slug, their_run.pk])).status_code == 404
    # And the other team cannot open ours.
    c.force_login(other_researcher)
    for name in ("judging:config_detail", "judging:config_reliability_csv"):
        assert c.get(reverse(name, args=[ours.study.slug, shared.pk])).status_code == 404
        assert (
            c.get(reverse(name, args=[ours.study.slug, ours.direct.config.pk])).status_code == 404
        )


@pytest.mark.django_db
def test_a_judges_repetition_and_self_preference_pool_its_runs(study):
    """A gpt judge of the test server's profile "all" (self-preference and repetition
    noise injected) runs twice, on each topic in turn, asking every prompt again; the
    ideas of the AI condition, named as gpt-4o's, carry the family's marker. Its page pools
    both runs: the identical-verdict share over both runs' repeated prompts and the
    self-preference on both runs' mixed pairs, computed again here from the rows."""
    from judging.services import judge_run_create, judge_run_execute
    from judging.testserver import Rules, TestServer
    from llm.models import LLMCall
    from studies.models import Condition, Idea, Topic

    Condition.objects.filter(study=study, key="AI").update(generating_model="gpt-4o")
    for idea in Idea.objects.filter(study=study, conditions__key="AI"):
        idea.normalized_text += " [style:openai]"
        idea.save(update_fields=["normalized_text"])
    with TestServer(Rules(profile="all")) as server:
        judge = JudgeConfig.objects.create(
            name="gpt", study=study, base_url=server.base_url, model="gpt-4o-mini",
            parameters={}, api_key_env="IDEAREVIEW_TEST_KEY", timeout_seconds=5,
            backoff_seconds=0.001,
        )  # fmt: skip
        runs = []
        for topic in Topic.objects.filter(study=study).order_by("pk"):
            params = {"repeat_share": 1.0, "topic_ids": [topic.pk]}
            r = judge_run_create(study=study, method="pairwise", config=judge, params=params)
            runs.append(judge_run_execute(run=r))
    assert all(r.status == DONE for r in runs)
    panel = config_reliability(study, judge)

    # Identical verdicts: per repeated prompt (the order its repeat was asked in, run by
    # run) whether the two answers agree; the mean, and its percentile bootstrap.
    shares = []
    for r in runs:
        outcome_calls = set(PairwiseOutcome.objects.filter(run=r).values_list("call_id", flat=True))  # fmt: skip
        answers = defaultdict(list)
        order = []
        for call in LLMCall.objects.filter(run=r, error="").order_by("pk"):
            answers[call.prompt_hash].append((call.pk in outcome_calls, (call.parsed or {}).get("winner")))  # fmt: skip
            if call.pk not in outcome_calls and call.prompt_hash not in order:
                order.append(call.prompt_hash)
        for digest in order:
            first = [w for is_first, w in answers[digest] if is_first]
            again = [w for is_first, w in answers[digest] if not is_first]
            kept = [w for w in first + again if w is not None]
            if len(kept) == 2:
                shares.append(float(kept[0] == kept[1]))
    shares = np.array(shares)
    rng = np.random.default_rng(judge.pk)
    draws = [shares[rng.integers(0, len(shares), len(shares))].mean() for _ in range(PANEL_BOOT)]
    (row,) = panel["repetition"]
    assert row["prompts"] == 12 == len(shares)  # 6 ordered pairs in each topic's run
    assert row["judge"]["value"] == pytest.approx(shares.mean())
    assert (row["judge"]["low"], row["judge"]["high"]) == pytest.approx(tuple(np.percentile(draws, [2.5, 97.5])))  # fmt: skip

    # Self-preference: the own-family (AI) idea's mean result on each mixed pair over both
    # orders, and its vertex bootstrap over ideas.
    ai = set(Idea.objects.filter(study=study, conditions__key="AI").values_list("pk", flat=True))
    results = defaultdict(list)
    for r in runs:
        for a, b, verdict in PairwiseOutcome.objects.filter(run=r).values_list("idea_a_id", "idea_b_id", "verdict"):  # fmt: skip
            if (a in ai) == (b in ai) or verdict not in ("A", "B", "tie"):
                continue
            own, other = (a, b) if a in ai else (b, a)
            score = {"A": 1.0, "B": 0.0, "tie": 0.5}[verdict]
            results[(own, other)].append(score if own == a else 1.0 - score)
    pairs = sorted(results)
    values = np.array([np.mean(results[p]) for p in pairs])
    ids = sorted({i for p in pairs for i in p}, key=repr)
    pos = {i: k for k, i in enumerate(ids)}
    rng = np.random.default_rng(judge.pk)
    draws = []
    for _ in range(PANEL_BOOT):
        m = np.bincount(rng.integers(0, len(ids), len(ids)), minlength=len(ids))
        w = np.array([m[pos[o]] * m[pos[x]] for o, x in pairs], float)
        if w.sum() > 0:
            draws.append(np.average(values, weights=w))
    sp = panel["self_preference"]
    assert sp["judge_family"] == "openai"
    (fig,) = sp["rows"]
    assert fig["pairs"] == len(pairs) > 0
    assert fig["judge"]["value"] == pytest.approx(values.mean())
    assert (fig["judge"]["low"], fig["judge"]["high"]) == pytest.approx(tuple(np.percentile(draws, [2.5, 97.5])))  # fmt: skip
    c = Client()
    c.force_login(study.owner)
    page = c.get(reverse("judging:config_detail", args=[study.slug, judge.pk])).content.decode()
    assert 'id="config-repetition"' in page and 'id="config-self-preference"' in page

    # The conditions' Bradley–Terry ratings, raw and style-controlled, from both runs'
    # games between ideas of different conditions (counted here from the rows): more games
    # than either run's own panel rates them from.
    from judging.config_panel import config_reliability_rows
    from judging.reliability_panel import run_reliability

    mixed = [
        sum(
            1
            for a, b, verdict in PairwiseOutcome.objects.filter(run=r).values_list(
                "idea_a_id", "idea_b_id", "verdict"
            )  # fmt: skip
            if (a in ai) != (b in ai) and verdict in ("A", "B", "tie")
        )
        for r in runs
    ]
    (block,) = panel["style"]
    assert block["games"] == sum(mixed) > max(mixed) > 0
    for r, own in zip(runs, mixed, strict=True):
        (single,) = run_reliability(r)["style"]
        assert single["games"] == own
    assert {x["condition"] for x in block["ratings"]} == {"AI", "Human"}
    figures = {(x["figure"], x["item"]) for x in config_reliability_rows(panel)}
    for condition in ("AI", "Human"):
        assert ("bt_raw", condition) in figures and ("bt_style_controlled", condition) in figures
    assert 'id="config-style-note"' in page and f'id="style-{block["dimension"]}"' in page
    assert "style-controlled: no pairwise games" not in page
