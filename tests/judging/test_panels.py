"""Judge panels: one direct-scoring run asks several judges of the study's team the same
prompts under one budget, scores each idea by the mean of its members' scores, and shows
each member's and the panel's agreement with the reviewers, and panel − best member, with
bootstrap intervals over ideas. The runs go over HTTP to local test servers, one per
member, so members answer differently (a behaviour profile each)."""

from __future__ import annotations

import io
import math
import random
from collections import defaultdict

import numpy as np
import pytest
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse
from scipy import stats

from judging.methods import judge_profiles as jp
from judging.methods.panel import (
    majority_verdict,
    member_means,
    pair_accuracy,
    pair_preferences,
    panel_agreement,
    panel_scores,
)
from judging.models import IdeaRating, JudgeRun, Judgment, PanelMember
from judging.reliability_panel import PANEL_BOOT, reliability_csv, run_reliability
from judging.services import JudgeRunRefused, RunBudget, judge_run_create, judge_run_execute
from judging.services.ratings import RUN_RATINGS
from judging.services.runs import judge_run_resume
from judging.testserver import Rules, TestServer
from llm.models import JudgeConfig, LLMCall
from studies.models import (
    AuditEvent,
    Condition,
    Idea,
    IdeaCondition,
    Review,
    Reviewer,
    ReviewScore,
    Topic,
)
from tests.factories import pair_ratings_add

Status = JudgeRun.Status

# --- pure: the combination and its figures ---------------------------------------------


def test_the_panel_score_is_the_mean_of_its_members_parsed_means():
    a = member_means([("x", 0, 4.0), ("x", 1, 6.0), ("y", 0, None), ("z", 0, None)])
    b = member_means([("x", 0, 8.0), ("y", 0, 3.0), ("z", 0, None)])
    assert a == {"x": 5.0} and b == {"x": 8.0, "y": 3.0}
    # x: (5 + 8) / 2; y: only b parsed it; z: nobody did, so the panel has no score.
    assert panel_scores({0: a, 1: b}) == {"x": 6.5, "y": 3.0}


@pytest.mark.parametrize(
    "verdicts,expected",
    [
        (["A", "A", "B"], "A"),
        (["B", "tie", "unparseable"], "B"),
        (["A", "B"], "tie"),
        (["A", "B", "tie"], "tie"),
        (["unparseable", "unparseable"], "unparseable"),
    ],
)
def test_a_pairwise_panel_takes_the_majority_and_calls_a_split_a_tie(verdicts, expected):
    assert majority_verdict(verdicts) == expected


def _spearman_by_hand(x: np.ndarray, y: np.ndarray) -> float:
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def test_panel_agreement_matches_a_bootstrap_done_by_hand():
    rng = np.random.default_rng(3)
    n = 25
    quality = rng.normal(size=n)
    human = {i: float(5 + quality[i] + rng.normal(0, 0.5)) for i in range(n)}
    members = {
        "sharp": {i: float(round(5 + quality[i] + rng.normal(0, 0.7))) for i in range(n)},
        "blunt": {i: float(round(5 + quality[i] + rng.normal(0, 2.0))) for i in range(n)},
    }
    members["blunt"].pop(7)  # an idea one member never scored is left out for all
    panel = panel_scores(members)
    out = panel_agreement(human, members, panel, n_boot=300, seed=11)

    ideas = [i for i in range(n) if i != 7]
    y = np.array([human[i] for i in ideas])
    series = {label: np.array([m[i] for i in ideas]) for label, m in members.items()}
    series["panel"] = (series["sharp"] + series["blunt"]) / 2
    idx = np.random.default_rng(11).integers(0, len(ideas), size=(300, len(ideas)))
    draws = {k: np.array([_spearman_by_hand(v[row], y[row]) for row in idx]) for k, v in series.items()}  # fmt: skip
    spearman = out["measures"]["spearman"]
    assert out["n_ideas"] == len(ideas) == 24
    for label in ("sharp", "blunt"):
        got = spearman["members"][label]
        assert got["value"] == pytest.approx(stats.spearmanr(series[label], y).statistic)
        low, high = np.nanquantile(draws[label], [0.025, 0.975])
        assert (got["low"], got["high"]) == pytest.approx((low, high))
    assert spearman["panel"]["value"] == pytest.approx(_spearman_by_hand(series["panel"], y))
    best = max(("sharp", "blunt"), key=lambda k: _spearman_by_hand(series[k], y))
    assert spearman["best_member"] == best
    diff = draws["panel"] - np.maximum(draws["sharp"], draws["blunt"])
    assert spearman["difference"]["value"] == pytest.approx(
        _spearman_by_hand(series["panel"], y) - _spearman_by_hand(series[best], y)
    )
    low, high = np.nanquantile(diff, [0.025, 0.975])
    assert (spearman["difference"]["low"], spearman["difference"]["high"]) == pytest.approx(
        (low, high)
    )
    pearson = out["measures"]["pearson"]["panel"]["value"]
    assert pearson == pytest.approx(stats.pearsonr(series["panel"], y).statistic)


def test_too_few_ideas_give_no_figure_rather_than_a_wrong_one():
    out = panel_agreement({1: 3.0, 2: 4.0}, {"a": {1: 1.0, 2: 2.0}, "b": {1: 2.0, 2: 1.0}},
                          {1: 1.5, 2: 1.5}, n_boot=50)  # fmt: skip
    fig = out["measures"]["spearman"]
    assert fig["panel"]["value"] is None and fig["difference"]["value"] is None
    assert fig["best_member"] is None


def _vertex_accuracy_by_hand(items, prefs, seed, n_boot, decisive_only):
    """Accuracy and its vertex-bootstrap draws, written out: draw the ideas with
    replacement, weight each rating by the product of its two ideas' counts."""
    ideas = sorted({i for r in items for i in (r[1], r[2])})
    pos = {idea: k for k, idea in enumerate(ideas)}
    rng = np.random.default_rng(seed)
    judged = [prefs[(r[0], r[1], r[2])] for r in items]
    keep = [
        not decisive_only or (j != "tie" and r[3] != "tie")
        for j, r in zip(judged, items, strict=True)
    ]
    hits = [float(j == r[3]) for j, r in zip(judged, items, strict=True)]
    value = sum(h for h, k in zip(hits, keep, strict=True) if k) / sum(keep)
    draws = []
    for _ in range(n_boot):
        m = np.bincount(rng.integers(0, len(ideas), len(ideas)), minlength=len(ideas))
        w = [m[pos[r[1]]] * m[pos[r[2]]] * k for r, k in zip(items, keep, strict=True)]
        draws.append(
            sum(wi * h for wi, h in zip(w, hits, strict=True)) / sum(w) if sum(w) else math.nan
        )
    return value, np.array(draws)


def _vertex_reviewers_by_hand(items, seed, n_boot, decisive_only):
    """The reviewers against each other: every two ratings of one pair an item, weighted
    by the same resamples of the ideas as the judges' items."""
    ideas = sorted({i for r in items for i in (r[1], r[2])})
    pos = {idea: k for k, idea in enumerate(ideas)}
    groups = defaultdict(list)
    for r in items:
        groups[(r[0], r[1], r[2])].append(r[3])
    twos = [(k, u, v) for k, ws in groups.items() for i, u in enumerate(ws) for v in ws[i + 1 :]]
    twos = [t for t in twos if not decisive_only or "tie" not in t[1:]]
    same = np.array([float(u == v) for _, u, v in twos])
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        m = np.bincount(rng.integers(0, len(ideas), len(ideas)), minlength=len(ideas))
        w = np.array([m[pos[k[1]]] * m[pos[k[2]]] for k, _, _ in twos], float)
        draws.append(w @ same / w.sum() if w.sum() else math.nan)
    return same.mean(), np.array(draws), len(twos)


def test_pair_accuracy_matches_a_vertex_bootstrap_done_by_hand():
    rng = random.Random(4)
    quality = {i: rng.gauss(0, 1) for i in range(16)}
    pairs = sorted({tuple(sorted(rng.sample(range(16), 2))) for _ in range(40)})

    def prefer(x, y, noise):
        d = quality[x] - quality[y] + rng.gauss(0, noise)
        return "tie" if abs(d) < 0.15 else "x" if d > 0 else "y"

    ratings = [("overall", x, y, prefer(x, y, 0.8)) for x, y in pairs for _ in range(2)]
    members = {
        "sharp": {("overall", x, y): prefer(x, y, 0.5) for x, y in pairs},
        "blunt": {("overall", x, y): prefer(x, y, 2.0) for x, y in pairs},
    }
    panel = {k: members["sharp"][k] for k in members["sharp"]}
    panel.update({k: "tie" for k in list(panel)[::5]})
    dropped = pairs[3]
    del members["blunt"][("overall", *dropped)]  # a pair one judge never compared: left out
    out = pair_accuracy(ratings, members, panel, n_boot=200, seed=9)

    items = [r for r in ratings if (r[1], r[2]) != dropped]
    assert out["n_ratings"] == len(items) and out["n_pairs"] == len(pairs) - 1
    series = {**members, "panel": panel}
    for measure, decisive in (("with_ties", False), ("without_ties", True)):
        fig = out["measures"][measure]
        draws = {}
        for label, prefs in series.items():
            value, draws[label] = _vertex_accuracy_by_hand(items, prefs, 9, 200, decisive)
            got = fig["panel"] if label == "panel" else fig["members"][label]
            assert got["value"] == pytest.approx(value)
            low, high = np.nanquantile(draws[label], [0.025, 0.975])
            assert (got["low"], got["high"]) == pytest.approx((low, high))
        best = max(members, key=lambda k: fig["members"][k]["value"])
        assert fig["best_member"] == best
        assert fig["difference"]["value"] == pytest.approx(
            fig["panel"]["value"] - fig["members"][best]["value"]
        )
        diff = draws["panel"] - np.maximum(draws["sharp"], draws["blunt"])
        low, high = np.nanquantile(diff, [0.025, 0.975])
        assert (fig["difference"]["low"], fig["difference"]["high"]) == pytest.approx((low, high))
        # Beside them, the reviewers against each other on the same pairs.
        value, hh, n = _vertex_reviewers_by_hand(items, 9, 200, decisive)
        assert fig["reviewers"]["value"] == pytest.approx(value) and fig["reviewers"]["n"] == n
        low, high = np.nanquantile(hh, [0.025, 0.975])
        assert (fig["reviewers"]["low"], fig["reviewers"]["high"]) == pytest.approx((low, high))
    # Preferences sum the verdicts over both orders: a flip is a tie.
    assert pair_preferences([("d", 2, 1, "A"), ("d", 1, 2, "A")]) == {("d", 1, 2): "tie"}
    assert pair_preferences([("d", 2, 1, "A"), ("d", 1, 2, "B")]) == {("d", 1, 2): "y"}


# --- runs over HTTP ---------------------------------------------------------------------


def _member(study, server, name, **kw):
    defaults = dict(
        study=study, name=name, base_url=server.base_url, model=f"{name}-model",
        api_key_env="IDEAREVIEW_TEST_KEY", parameters={"temperature": 0},
        price_input_per_million="3.00", price_output_per_million="4.00", concurrency=4,
        timeout_seconds=5, max_attempts=2, backoff_seconds=0.001,
    )  # fmt: skip
    defaults.update(kw)
    return JudgeConfig.objects.create(**defaults)


@pytest.fixture
def second():
    """A second endpoint that answers as the neutral behaviour profile's judge."""
    with TestServer(Rules(profile="neutral")) as server:
        yield server


@pytest.mark.django_db
def test_a_panel_run_asks_every_member_and_scores_the_mean_of_their_parsed_scores(
    study, judge, scripted, second
):
    other = _member(study, second, "neutral")
    # The first judge cannot answer one idea: the panel's score of it is the other's alone.
    garbled = study.ideas.order_by("id")[2]
    scripted.rules.garbage_when = garbled.normalized_text[:40]
    r = judge_run_execute(
        run=judge_run_create(study=study, method="direct", config=judge, panel=[other])
    )
    assert r.status == Status.DONE, r.message
    assert r.total_calls == r.done_calls == 12 and r.http_calls == 12
    assert scripted.requests == 6 and second.requests == 6
    # Each member's judgments came from its own endpoint's calls.
    for seat, config in enumerate((judge, other)):
        rows = Judgment.objects.filter(run=r, member=seat).select_related("call")
        assert rows.count() == 6 * 5 and {j.call.config_id for j in rows} == {config.pk}
    for rating in IdeaRating.objects.filter(run=r):
        mine = Judgment.objects.filter(run=r, idea=rating.idea, metric=rating.dimension)
        parsed = {j.member: j.score for j in mine if j.score is not None}
        if rating.idea_id == garbled.pk:
            assert list(parsed) == [1]
        assert rating.score == pytest.approx(sum(parsed.values()) / len(parsed))
        assert rating.history[0]["members"] == [parsed.get(0), parsed.get(1)]
    # Cost and tokens add up all members' calls, at each member's own prices.
    calls = LLMCall.objects.filter(run=r)
    assert {c.config_id for c in calls} == {judge.pk, other.pk}
    assert r.cost == sum(c.cost for c in calls)
    by_member = [sum(c.cost for c in calls if c.config_id == k) for k in (judge.pk, other.pk)]
    assert all(v > 0 for v in by_member)
    assert PanelMember.objects.get(run=r).config == other
    # The audit trail names the panel beside the run's own judge.
    event = AuditEvent.objects.get(study=study, verb="judge_run_created")
    assert event.detail["judge"] == "scripted" and event.detail["panel"] == ["neutral"]


@pytest.mark.django_db
def test_the_budget_stops_the_whole_panel_and_a_resume_finishes_it(study, judge, scripted, second):
    other = _member(study, second, "neutral", concurrency=1)
    r = judge_run_execute(
        run=judge_run_create(
            study=study, method="direct", config=judge, panel=[other], budget_calls=5
        )
    )
    assert r.status == Status.BUDGET
    # One budget for both: five calls in all, not five each.
    assert scripted.requests + second.requests == 5 == r.http_calls
    assert LLMCall.objects.filter(run=r).count() == 5
    r = judge_run_execute(run=judge_run_resume(run=r, budget=RunBudget(budget_calls=100)))
    assert r.status == Status.DONE and r.http_calls == 12
    assert scripted.requests + second.requests == 12 and r.done_calls == r.total_calls == 12


@pytest.mark.django_db
def test_panel_members_are_refused_with_a_reason(study, judge, second):
    from studies.services.study import study_create

    elsewhere = study_create(owner=study.owner, slug="elsewhere", title="Elsewhere")
    theirs = _member(elsewhere, second, "theirs")
    ours = _member(study, second, "ours")
    off = _member(study, second, "off", disabled_reason="the key was revoked")
    cases = [
        (dict(method="direct", panel=[theirs]), "choose one of this study's judges"),
        # Named twice or asking as ours does, another team's judge is still not named.
        (dict(method="direct", panel=[theirs, theirs]), "choose one of this study's judges"),
        (
            dict(
                method="direct",
                panel=[ours, _member(elsewhere, second, "same", model="ours-model")],
            ),
            "choose one of this study's judges",
        ),
        (dict(method="direct", panel=[ours, ours]), "'ours' is named twice"),
        (dict(method="direct", panel=[judge]), "'scripted' is named twice"),
        (dict(method="direct", panel=[off]), "'off' is disabled: the key was revoked"),
        (
            dict(method="direct", panel=[ours, _member(study, second, "twin", model="ours-model")]),
            "'ours' and 'twin' ask the same model at the same endpoint",
        ),
        (dict(method="swiss", panel=[ours]), "swiss runs cannot have panel members"),
        (
            dict(method="direct", panel=[ours], params={"repeat_share": 0.5}),
            "does not take repeat_share",
        ),
        (dict(method="direct", panel=[ours], params={"batch": True}), "does not take batch"),
    ]
    for kw, message in cases:
        with pytest.raises(JudgeRunRefused, match=message):
            judge_run_create(study=study, config=judge, **kw)
    assert not JudgeRun.objects.exists()


@pytest.mark.django_db
def test_the_new_run_form_offers_the_teams_judges_as_panel_members(study, judge, second):
    from studies.services.study import study_create

    ours = _member(study, second, "ours")
    elsewhere = study_create(owner=study.owner, slug="elsewhere", title="Elsewhere")
    theirs = _member(elsewhere, second, "not-our-judge")
    c = Client()
    c.force_login(study.owner)
    url = reverse("judging:run_create", args=[study.slug])
    page = c.get(url).content.decode()
    assert 'id="panel-members"' in page and "ours" in page and "not-our-judge" not in page
    form = {"method": "direct", "config": judge.pk, "panel": [ours.pk], "params": ""}
    response = c.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    run = JudgeRun.objects.get()
    assert [m.config for m in run.panel_members.all()] == [ours] and run.total_calls == 12
    # Another team's judge is not a choice, and the run's own judge named again is refused.
    assert c.post(url, {**form, "panel": [theirs.pk]}).status_code == 400
    again = c.post(url, {**form, "panel": [judge.pk]})
    assert again.status_code == 400 and "named twice" in again.content.decode()
    assert JudgeRun.objects.count() == 1


# --- agreement: the panel beside its members --------------------------------------------

IDEAS = 30
WORDS = ["model", "data", "prompt", "answer", "claim", "source", "verify", "rank", "train"]


def _world(owner):
    """`IDEAS` ideas whose quality the test servers read from their text (the behaviour
    profiles' `traits_from_text`), and three reviewers per idea who score it by that
    quality with noise of their own."""
    from studies.services.study import study_create

    rng = random.Random(5)
    study = study_create(owner=owner, slug="panel", title="Panel")
    human, _ = Condition.objects.get_or_create(study=study, key="Human", defaults={"kind": "human"})
    topic = Topic.objects.create(study=study, name="All")
    metrics = study.form_definition().metric_keys
    reviewers = [
        Reviewer.objects.create(study=study, pseudonym=f"R{k}", email=f"r{k}@example.org")
        for k in range(3)
    ]
    for k in range(IDEAS):
        text = " ".join(rng.choice(WORDS) for _ in range(60 + rng.randrange(60)))
        idea = Idea.objects.create(
            study=study, topic=topic, title=f"Idea {k}", raw_text=text, normalized_text=text,
            normalization_status=Idea.NormalizationStatus.APPROVED,
        )  # fmt: skip
        IdeaCondition.objects.create(idea=idea, condition=human, study=study, external_id=f"p{k}")
        quality = jp.normal("quality", text)
        for reviewer in reviewers:
            review = Review.objects.create(study=study, idea=idea, reviewer=reviewer)
            ReviewScore.objects.bulk_create(
                ReviewScore(
                    review=review,
                    metric=m,
                    rationale="fine",
                    score=float(min(10, max(1, round(5.5 + 1.2 * quality + rng.gauss(0, 1))))),
                )  # fmt: skip
                for m in metrics
            )
    return study


@pytest.mark.django_db
def test_the_panel_beats_its_noisy_member_and_every_page_shows_the_figures(owner):
    with (
        TestServer(Rules(profile="neutral")) as steady_server,
        TestServer(Rules(profile="noisy")) as noisy_server,
    ):
        study = _world(owner)
        steady = _member(study, steady_server, "steady")
        noisy = _member(study, noisy_server, "noisy")
        r = judge_run_execute(
            run=judge_run_create(study=study, method="direct", config=noisy, panel=[steady])
        )
    assert r.status == Status.DONE, r.message
    panel = run_reliability(r)["judge_panel"]
    assert panel["members"] == ["noisy", "steady"]
    overall = next(b for b in panel["metrics"] if b["metric"] == "overall")
    assert overall["n_ideas"] == IDEAS
    for measure in ("spearman", "pearson"):
        fig = overall["measures"][measure]
        mine, theirs = fig["panel"], fig["members"]["noisy"]
        assert mine["value"] > theirs["value"], (measure, mine, theirs)
        assert mine["low"] <= mine["value"] <= mine["high"]
    # Computed again from the rows by hand: the panel's score is the members' mean.
    human = {
        i: np.mean(list(v))
        for i, v in _by_idea(
            ReviewScore.objects.filter(review__study=study, metric="overall").values_list(
                "review__idea_id", "score"
            )
        ).items()
    }
    seats = {
        seat: dict(
            Judgment.objects.filter(run=r, metric="overall", member=seat).values_list(
                "idea_id", "score"
            )
        )
        for seat in (0, 1)
    }
    ideas = sorted(human)
    y = [human[i] for i in ideas]
    combined = [(seats[0][i] + seats[1][i]) / 2 for i in ideas]
    spearman = overall["measures"]["spearman"]
    assert spearman["panel"]["value"] == pytest.approx(stats.spearmanr(combined, y).statistic)
    assert spearman["members"]["noisy"]["value"] == pytest.approx(
        stats.spearmanr([seats[0][i] for i in ideas], y).statistic
    )

    # The run page, its CSV, and the report's inputs and document show every figure.
    c = Client()
    c.force_login(owner)
    page = c.get(reverse("judging:run_detail", args=[study.slug, r.pk])).content.decode()
    assert 'id="panel-overall"' in page and "Panel agreement with the reviewers" in page
    assert "panel − best member" in page and 'id="panel-members"' in page
    value = f"{spearman['panel']['value']:.3f}"
    low, high = f"{spearman['panel']['low']:.3f}", f"{spearman['panel']['high']:.3f}"
    assert value in page and f"{low} to {high}" in page
    assert "—–—" not in page  # an interval not computed is one dash
    csv = c.get(reverse("judging:run_reliability_csv", args=[study.slug, r.pk])).content.decode()
    assert csv.count("panel_spearman,overall,") == 4  # two members, the panel, the difference
    assert "panel_pearson,overall,panel − " in csv
    assert reliability_csv(run_reliability(r)) == csv
    (info,) = [
        j
        for j in RUN_RATINGS.judge_inputs(study, ["overall"], panel_bootstrap=PANEL_BOOT)
        if j.info["run_id"] == r.pk
    ]
    assert info.label.startswith("panel of noisy, steady")
    assert info.info["panel"]["metrics"] == panel["metrics"]
    # The report's agreement input is the panel's combined score, one row per idea.
    scores = info.judge_scores
    by_idea = dict(zip(scores[scores.metric == "overall"].idea_id, scores[scores.metric == "overall"].score, strict=True))  # fmt: skip
    assert len(by_idea) == IDEAS and sorted(by_idea.values()) == pytest.approx(sorted(combined))
    judges = [
        {"key": j.key, "label": j.label, "method": j.method, "available": True, "info": j.info}
        for j in RUN_RATINGS.judge_inputs(study, ["overall"], panel_bootstrap=PANEL_BOOT)
    ]
    report = render_to_string(
        "studies/report_document.html", {"r": {"agreement": {"judges": judges}}, "fig": {}}
    )
    assert f'id="judge-panel-run{r.pk}-overall"' in report
    assert value in report and f"{low} to {high}" in report and "panel − best member" in report
    assert "–––" not in report  # an interval not computed is one dash


def _by_idea(rows):
    out: dict[int, list[float]] = {}
    for idea_id, score in rows:
        out.setdefault(idea_id, []).append(score)
    return out


@pytest.mark.django_db
def test_the_command_line_runs_a_panel_and_a_member_used_by_one_stays(study, judge, second):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from judging.services import JudgeConfigRefused, judge_config_delete

    ours = _member(study, second, "ours")
    out = io.StringIO()
    call_command("judge_run", study=study.slug, method="direct", config=judge.name,
                 panel=["ours"], stdout=out)  # fmt: skip
    run = JudgeRun.objects.get()
    assert run.status == Status.DONE and run.http_calls == 12, out.getvalue()
    assert Judgment.objects.filter(run=run, member=1).count() == 6 * 5
    # A panel member is a judge the run used: removing it is refused with the reason.
    with pytest.raises(JudgeConfigRefused, match="'ours' stays"):
        judge_config_delete(config=ours)
    with pytest.raises(CommandError, match="does not exist"):
        call_command("judge_run", study=study.slug, method="direct", config=judge.name,
                     panel=["nobody"], stdout=io.StringIO())  # fmt: skip


@pytest.mark.django_db
def test_a_pairwise_panel_takes_its_members_majority_and_rates_the_ideas_from_it(
    study, judge, scripted
):
    """Three judges: the scripted one prefers the longer text, the other two (one
    endpoint, two models) the higher hash; where they disagree the two outvote it."""
    from judging.methods.pairwise import PairCall, summarise_pairwise
    from judging.models import PairwiseOutcome

    with TestServer(Rules(pairwise_rule="hash")) as hashing:
        one = _member(study, hashing, "hash-a")
        two = _member(study, hashing, "hash-b")
        r = judge_run_execute(
            run=judge_run_create(study=study, method="pairwise", config=judge, panel=[one, two])
        )
        assert hashing.requests == 24
    assert r.status == Status.DONE, r.message
    assert r.total_calls == r.done_calls == r.http_calls == 36 and scripted.requests == 12
    rows = PairwiseOutcome.objects.filter(run=r)
    by_key: dict[tuple, dict[int, str]] = {}
    for o in rows:
        by_key.setdefault((o.idea_a_id, o.idea_b_id, o.first_shown_id), {})[o.member] = o.verdict
    assert len(by_key) == 12 and all(len(v) == 3 for v in by_key.values())
    disagree = [k for k, v in by_key.items() if v[0] != v[1]]
    assert disagree, "the two rules should differ on some pair"
    # By hand: two of three decide; the hash members always agree with each other.
    assert all(v[1] == v[2] for v in by_key.values())
    calls = []
    for (a, b, first), v in by_key.items():
        verdict = v[1]
        second = b if first == a else a
        shown = verdict if verdict == "tie" or first == a else {"A": "B", "B": "A"}[verdict]
        calls.append(PairCall(first, second, shown))
    expected = summarise_pairwise(calls).scores
    ratings = dict(
        IdeaRating.objects.filter(run=r, dimension="pairwise").values_list("idea_id", "score")
    )
    assert ratings == pytest.approx(expected)
    # Its agreement: each member's and the panel's 1–5 pairwise scores against the
    # reviewers' mean on the metric pairwise ratings stand for (overall).
    from judging.panel_agreement import run_panel_agreement

    reviewer = Reviewer.objects.create(study=study, pseudonym="R1", email="r1@example.org")
    human = {}
    for k, idea in enumerate(study.ideas.order_by("id")):
        review = Review.objects.create(study=study, idea=idea, reviewer=reviewer)
        human[idea.pk] = float(k % 4 + 1)
        ReviewScore.objects.create(review=review, metric="overall", score=human[idea.pk])
    (block,) = run_panel_agreement(r, n_boot=50)["metrics"]
    ideas = sorted(human)
    assert block["metric"] == "overall" and block["n_ideas"] == 6
    assert block["members"] == ["scripted", "hash-a", "hash-b"]
    assert block["measures"]["spearman"]["panel"]["value"] == pytest.approx(
        stats.spearmanr([expected[i] for i in ideas], [human[i] for i in ideas]).statistic
    )
    # A panel of two that disagree calls it a tie.
    with TestServer(Rules(pairwise_rule="hash")) as hashing:
        one = _member(study, hashing, "hash-c")
        pair = judge_run_execute(
            run=judge_run_create(study=study, method="pairwise", config=judge, panel=[one])
        )
    from judging.services.base import panel_outcomes

    combined = {
        (o.idea_a_id, o.idea_b_id, o.first_shown_id): o.verdict for o in panel_outcomes(pair)
    }
    assert all(combined[k] == "tie" for k in disagree)
    assert all(combined[k] == v[0] for k, v in by_key.items() if k not in disagree)


@pytest.mark.django_db
def test_a_pairwise_panels_accuracy_on_the_reviewers_pair_ratings_is_shown_with_intervals(
    study, judge, scripted
):
    """The scripted judge prefers the longer text, the two hash judges the higher hash;
    reviewers rate every pair the run compared (two of them by length, one by a coin).
    Each judge's and the panel's accuracy on those ratings is computed again here from the
    outcome rows, with a vertex bootstrap written out with numpy."""
    from judging.models import PairwiseOutcome
    from judging.panel_agreement import run_panel_agreement

    with TestServer(Rules(pairwise_rule="hash")) as hashing:
        one, two = _member(study, hashing, "hash-a"), _member(study, hashing, "hash-b")
        r = judge_run_execute(
            run=judge_run_create(study=study, method="pairwise", config=judge, panel=[one, two])
        )
    assert r.status == Status.DONE, r.message
    ideas = {i.pk: i for i in study.ideas.all()}
    compared = sorted({tuple(sorted((o.idea_a_id, o.idea_b_id))) for o in PairwiseOutcome.objects.filter(run=r)})  # fmt: skip
    coin = random.Random(2)
    ratings = []
    for x, y in compared:
        longer = "a" if len(ideas[x].normalized_text) > len(ideas[y].normalized_text) else "b"
        ratings += [(x, y, longer), (y, x, {"a": "b", "b": "a"}[longer])]
        ratings.append((x, y, coin.choice(["a", "b", "tie"])))
    pair_ratings_add(study, ratings)

    (block,) = run_panel_agreement(r, n_boot=60)["pair_accuracy"]
    # By hand: each seat's margin per pair over both orders, and the panel's from the
    # majority of each order's three verdicts.
    margins: dict[object, dict[tuple, int]] = {0: {}, 1: {}, 2: {}, "panel": {}}
    by_order: dict[tuple, list[str]] = {}
    for o in PairwiseOutcome.objects.filter(run=r):
        x, y = sorted((o.idea_a_id, o.idea_b_id))
        sign = {"A": 1, "B": -1}.get(o.verdict, 0) * (1 if o.idea_a_id == x else -1)
        margins[o.member][(x, y)] = margins[o.member].get((x, y), 0) + sign
        by_order.setdefault((o.idea_a_id, o.idea_b_id, o.first_shown_id), []).append(o.verdict)
    for (a, b, _first), verdicts in by_order.items():
        x, y = sorted((a, b))
        n_a, n_b = verdicts.count("A"), verdicts.count("B")
        sign = (1 if n_a > n_b else -1 if n_b > n_a else 0) * (1 if a == x else -1)
        margins["panel"][(x, y)] = margins["panel"].get((x, y), 0) + sign
    items = []
    for a, b, winner in ratings:
        x, y = sorted((a, b))
        side = "tie" if winner == "tie" else "x" if (winner == "a") == (a == x) else "y"
        items.append(("overall", x, y, side))
    prefs = {
        k: {("overall", *p): "x" if m > 0 else "y" if m < 0 else "tie" for p, m in v.items()}
        for k, v in margins.items()
    }
    assert block["dimension"] == "overall" and block["n_ratings"] == len(items) == 18
    labels = {0: "scripted", 1: "hash-a", 2: "hash-b", "panel": "panel"}
    for measure, decisive in (("with_ties", False), ("without_ties", True)):
        fig = block["measures"][measure]
        for k, label in labels.items():
            value, draws = _vertex_accuracy_by_hand(items, prefs[k], r.pk, 60, decisive)
            got = fig["panel"] if k == "panel" else fig["members"][label]
            assert got["value"] == pytest.approx(value), (measure, label)
            assert (got["low"], got["high"]) == pytest.approx(tuple(np.nanquantile(draws, [0.025, 0.975])))  # fmt: skip
    # The scripted judge agrees with the length-minded reviewers on every pair it did not
    # tie: two of each pair's three ratings.
    assert block["measures"]["with_ties"]["members"]["scripted"]["value"] >= 0.6

    c = Client()
    c.force_login(study.owner)
    page = c.get(reverse("judging:run_detail", args=[study.slug, r.pk])).content.decode()
    assert 'id="panel-pairs-overall"' in page and "accuracy on the reviewers" in page
    panel_fig = run_reliability(r)["judge_panel"]["pair_accuracy"][0]["measures"]["with_ties"]
    assert f"{panel_fig['panel']['value']:.3f}" in page
    csv = c.get(reverse("judging:run_reliability_csv", args=[study.slug, r.pk])).content.decode()
    # three members, the panel, the difference and the reviewers, per measure
    assert csv.count("panel_pair_accuracy_with_ties,overall,") == 6
    assert csv.count("panel_pair_accuracy_without_ties,overall,") == 6
    assert "panel_pair_accuracy_with_ties,overall,reviewers, one against another" in csv.replace(
        '"', ""
    )
    # Beside them, the reviewers against each other on the same pairs (two of each pair's
    # three ratings are the length order, one a coin).
    value, hh, n = _vertex_reviewers_by_hand(items, r.pk, 60, False)
    got = block["measures"]["with_ties"]["reviewers"]
    assert got["value"] == pytest.approx(value) and got["n"] == n == 18
    assert (got["low"], got["high"]) == pytest.approx(tuple(np.nanquantile(hh, [0.025, 0.975])))


@pytest.mark.django_db
def test_a_panel_run_travels_in_the_study_file_and_goes_with_its_study(
    study, judge, second, tmp_path
):
    """Exported, deleted (its judges with it, a member held by RESTRICT included) and
    imported back: the run has its members again."""
    from django.core.management import call_command

    from studies.services.study import study_delete

    ours = _member(study, second, "ours")
    run = judge_run_execute(
        run=judge_run_create(study=study, method="direct", config=judge, panel=[ours])
    )
    assert run.status == Status.DONE
    path = tmp_path / "study.json"
    call_command("study_export", study.slug, str(path), stdout=io.StringIO())
    study_delete(study=study, confirm=study.slug, actor=study.owner)
    assert not PanelMember.objects.exists() and not JudgeConfig.objects.filter(name="ours")
    call_command("study_import", str(path), stdout=io.StringIO())
    (back,) = JudgeRun.objects.all()
    assert [c.name for c in back.panel_configs()] == ["scripted", "ours"]
    assert Judgment.objects.filter(run=back, member=1).count() == 6 * 5


@pytest.mark.django_db
def test_the_admin_shows_a_runs_panel_by_seat(study, judge, second):
    from django.contrib.auth import get_user_model

    ours = _member(study, second, "ours")
    run = judge_run_create(study=study, method="direct", config=judge, panel=[ours])
    admin = get_user_model().objects.create(username="root", is_staff=True, is_superuser=True)
    c = Client()
    c.force_login(admin)
    page = c.get(reverse("admin:judging_judgerun_change", args=[run.pk]))
    assert page.status_code == 200 and "ours" in page.content.decode()
