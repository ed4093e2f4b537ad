"""Active Bradley–Terry runs end to end, over HTTP against the scripted server.

A run's batches are checked against `select_pairs` recomputed here from the stored
outcomes, batch by batch, with the prior `estimate_ridge` reads from them (as
`bench/active_pairs.py` drives the selector): the driver may not choose anything the
pure method would not.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from django.db.models import Count
from django.urls import reverse
from scipy.stats import kendalltau

import judging.services.engine as engine
from judging.methods.active_pairs import PAIRS_PER_IDEA, select_pairs, shown_order
from judging.methods.bradley_terry import comparisons_from_calls, estimate_ridge
from judging.methods.judge_profiles import traits_from_text
from judging.methods.pairwise import PairCall
from judging.models import IdeaRating, JudgeRun, PairwiseOutcome
from judging.reliability_panel import run_reliability
from judging.services import (
    JudgeRunRefused,
    judge_run_create,
    judge_run_execute,
    judge_run_plan,
    judge_run_resume,
)
from judging.services.ratings import RUN_RATINGS
from judging.services.runs import make_driver
from llm.models import LLMCall
from tests.judging.conftest import make_study

pytestmark = pytest.mark.embedded  # judge runs through the configured broker

Status = JudgeRun.Status

# One topic of ten ideas of different lengths and words (the scripted judge's "longer
# text wins" gives a strict order; a behaviour profile reads a quality from each text).
TEN = {
    "Reasoning": [
        f"Idea {k}: "
        + " ".join(f"step{k}x{w}" for w in range(6 + 3 * k))
        + " then check the answer against a held-out set."
        for k in range(10)
    ]
}


class SimulatedCrash(BaseException):
    """Like a killed worker: not an Exception, so nothing in the run catches it."""


@pytest.fixture
def ten(db, owner):
    return make_study(owner, texts=TEN, slug="active")


def _seed(run: JudgeRun) -> str:
    """The selector's seed for the run's one group (the run's seed and the topic)."""
    (topic,) = run.study.topics.all()
    return f"{run.params['seed']}:{topic.pk}"


def _batches(run: JudgeRun) -> dict[int, list[PairCall]]:
    out: dict[int, list[PairCall]] = defaultdict(list)
    for o in PairwiseOutcome.objects.filter(run=run).order_by("id"):
        out[o.round].append(PairCall(o.first_shown_id, o.second_shown_id, o.shown_winner()))
    return dict(out)


def _recomputed(run: JudgeRun, batches: dict[int, list[PairCall]], number: int):
    """Batch `number` as the pure selector chooses it from the batches before it."""
    ideas = sorted(i.pk for i in run.study.ideas.all())
    before = [c for r in sorted(batches) if r < number for c in batches[r]]
    games = comparisons_from_calls(before)
    left = run.total_calls - len(before)
    pairs = select_pairs(
        games,
        ideas,
        min(run.params["batch_size"], left),
        ridge=estimate_ridge(games, ideas),
        seed=_seed(run),
        criterion=run.params["selection"],
        asked=[(c.first, c.second) for c in before if c.winner is None],
    )
    asked = [(c.first, c.second) for c in before]
    for pair in pairs:  # a pair chosen twice in one batch is shown in both orders
        asked.append(shown_order(pair, asked, _seed(run)))
    return sorted(asked[len(before) :])


def _check_every_batch(run: JudgeRun) -> dict[int, list[PairCall]]:
    batches = _batches(run)
    assert sorted(batches) == list(range(1, len(batches) + 1))
    for number, calls in batches.items():
        assert sorted((c.first, c.second) for c in calls) == _recomputed(run, batches, number)
    return batches


def test_a_run_made_on_the_form_spends_its_budget_in_batches_the_selector_chooses(
    client, owner, ten, judge, scripted, monkeypatch
):
    client.force_login(owner)
    url = reverse("judging:run_create", args=[ten.slug])
    page = client.get(url).content.decode()
    assert 'value="active_bt"' in page and "Active Bradley–Terry pairs" in page
    assert "batch_size: 25" in page  # its defaults are listed, and overridden as JSON
    queued: list[JudgeRun] = []
    monkeypatch.setattr("judging.views.judge_run_enqueue", lambda *, run: queued.append(run))
    params = '{"pairs": 22, "batch_size": 6}'
    response = client.post(url, {"method": "active_bt", "config": judge.pk, "params": params})
    assert response.status_code == 302, response.content.decode()
    (r,) = queued
    assert r.total_calls == 22  # known up front: the budget
    assert client.get(reverse("judging:run_detail", args=[ten.slug, r.pk])).status_code == 200

    r = judge_run_execute(run=r)
    assert r.status == Status.DONE, r.message
    assert r.done_calls == r.total_calls == r.http_calls == scripted.requests == 22
    batches = _check_every_batch(r)
    assert [len(b) for b in batches.values()] == [6, 6, 6, 4]
    # Each ordered pair at most once, so each pair at most twice (both orders).
    ordered = Counter((c.first, c.second) for b in batches.values() for c in b)
    assert set(ordered.values()) == {1}
    assert r.summary["groups"][str(ten.topics.get().pk)]["asked"] == 22
    bt = IdeaRating.objects.filter(run=r, dimension="bradley_terry")
    assert bt.count() == 10 and all(x.ci_low <= x.score <= x.ci_high for x in bt)
    # The longer text always wins: the fit orders the longest above the shortest.
    by_length = sorted(ten.ideas.all(), key=lambda i: len(i.normalized_text))
    score = {x.idea_id: x.score for x in bt}
    assert score[by_length[-1].pk] > score[by_length[0].pk]
    assert bt.first().history[0]["ridge"] == pytest.approx(
        r.summary["groups"][str(ten.topics.get().pk)]["ridge"]
    )

    detail = client.get(reverse("judging:run_detail", args=[ten.slug, r.pk]))
    assert detail.status_code == 200 and "Active Bradley–Terry pairs" in detail.content.decode()
    panel = run_reliability(r, n_boot=20)
    assert panel is not None and panel["style"]
    # What the report's agreement reads: the strengths as the form's overall score.
    (inputs,) = RUN_RATINGS.judge_inputs(ten, ["overall"], panel_bootstrap=20)
    assert inputs.method == "active_bt" and not inputs.baseline
    assert inputs.judge_scores is not None and len(inputs.judge_scores) == 10
    assert set(inputs.judge_scores["metric"]) == {"overall"}
    assert inputs.judge_pairs is not None and len(inputs.judge_pairs) == 22


def test_the_default_budget_is_fifteen_games_per_idea_and_at_most_one_per_pair(study, ten):
    assert PAIRS_PER_IDEA == 15
    # Ten ideas: 45 pairs, fewer than 150 games; two topics of three ideas: 3 pairs each.
    assert judge_run_plan(study=ten, method="active_bt")["total"] == 45
    assert judge_run_plan(study=study, method="active_bt")["total"] == 2 * 3
    # A budget given is capped at both orders of every pair (6 ideas: 15 pairs).
    plan = judge_run_plan(study=study, method="active_bt", params={"group_by": "all", "pairs": 99})
    assert plan["total"] == 30


def test_a_budget_of_every_pair_asks_both_orders_of_each_once_unparseable_ones_included(
    study, judge, scripted, caplog
):
    marked = max(study.ideas.all(), key=lambda i: len(i.normalized_text))
    marked.normalized_text += " UNPARSEABLE"
    marked.save()
    scripted.rules.garbage_when = "UNPARSEABLE"
    r = judge_run_execute(
        run=judge_run_create(
            study=study, method="active_bt", config=judge, params={"pairs": 1000, "batch_size": 2}
        )
    )
    assert r.status == Status.DONE, r.message
    assert r.done_calls == r.total_calls == scripted.requests == 12
    # An unparseable answer counts against its pair's two games: nothing is asked a third time.
    pairs = PairwiseOutcome.objects.filter(run=r).values("idea_a", "idea_b").annotate(n=Count("id"))
    assert {p["n"] for p in pairs} == {2} and len(pairs) == 6
    assert (
        r.unparseable == PairwiseOutcome.objects.filter(run=r, verdict="unparseable").count() == 4
    )
    # Batches of two may hold one pair twice: shown in both orders, never one order twice.
    assert "already stored" not in caplog.text


def test_resume_after_a_crash_asks_the_same_next_batch_and_repeats_no_call(
    ten, judge, scripted, monkeypatch
):
    judge.concurrency = 1
    judge.save()
    params = {"pairs": 20, "batch_size": 5}
    r = judge_run_create(study=ten, method="active_bt", config=judge, params=params)
    real_record, seen = engine.record, []

    def crashing_record(*args, **kwargs):
        call = real_record(*args, **kwargs)  # the call is stored, its outcome is not yet
        seen.append(call.pk)
        if len(seen) == 8:  # the third call of the second batch
            raise SimulatedCrash
        return call

    monkeypatch.setattr(engine, "record", crashing_record)
    with pytest.raises(SimulatedCrash):
        judge_run_execute(run=r)
    monkeypatch.setattr(engine, "record", real_record)
    r.refresh_from_db()
    assert r.status == Status.RUNNING  # as a killed worker leaves it
    batches = _batches(r)
    assert [len(b) for b in batches.values()] == [5, 2]
    # What a restarted worker would ask: the rest of batch 2, as the selector chose it.
    driver = make_driver(
        r.method, run=r, ideas=list(ten.ideas.order_by("id")), params=r.params, study=ten
    )
    missing = sorted((u.key[2], u.key[3]) for u in driver.load())
    stored = {(c.first, c.second) for c in batches[2]}
    assert missing == [p for p in _recomputed(r, batches, 2) if p not in stored]
    assert {u.key[1] for u in driver.load()} == {2} and len(missing) == 3
    assert driver.done == 7

    r = judge_run_execute(run=judge_run_resume(run=r, force=True))
    assert r.status == Status.DONE, r.message
    assert r.done_calls == r.total_calls == 20
    # The 8th call was made before the crash: the resume got it from the cache.
    assert scripted.requests == r.http_calls == LLMCall.objects.filter(run=r).count() == 20
    per_call = PairwiseOutcome.objects.filter(run=r).values("call").annotate(n=Count("id"))
    assert {p["n"] for p in per_call} == {1}
    _check_every_batch(r)

    # An uninterrupted run of the same parameters chooses the same batches (from the cache).
    scripted.reset_counts()
    again = judge_run_execute(
        run=judge_run_create(study=ten, method="active_bt", config=judge, params=params)
    )
    assert again.status == Status.DONE and scripted.requests == 0

    def plan(run):
        return sorted(
            PairwiseOutcome.objects.filter(run=run).values_list("round", "first_shown", "idea_a")
        )

    assert plan(again) == plan(r)


def test_its_ratings_rank_the_ideas_a_quality_driven_judge_prefers_higher(ten, judge, scripted):
    scripted.rules.profile = "neutral"  # verdicts follow a quality fixed by each text
    r = judge_run_execute(
        run=judge_run_create(
            study=ten, method="active_bt", config=judge, params={"pairs": 60, "batch_size": 10}
        )
    )
    assert r.status == Status.DONE, r.message
    quality = {i.pk: traits_from_text(i.normalized_text).quality for i in ten.ideas.all()}
    score = dict(
        IdeaRating.objects.filter(run=r, dimension="bradley_terry").values_list("idea_id", "score")
    )
    ideas = sorted(quality)
    tau = kendalltau([quality[i] for i in ideas], [score[i] for i in ideas]).statistic
    assert tau > 0.6, tau
    best, worst = max(quality, key=quality.get), min(quality, key=quality.get)
    assert score[best] > score[worst]


@pytest.mark.parametrize(
    "params,message",
    [
        ({"batch_size": 0}, "batch_size must be a whole number"),
        ({"batch_size": 1.5}, "batch_size must be a whole number"),
        ({"pairs": 0}, "pairs must be a whole number"),
        ({"pairs": "many"}, "pairs must be a whole number"),
        ({"selection": "nearest"}, "selection must be one of width, discordant"),
        ({"repeat_share": 0.1}, "cannot ask prompts again"),
    ],
)
def test_parameters_it_cannot_use_are_refused_saying_why(ten, params, message):
    with pytest.raises(JudgeRunRefused, match=message):
        judge_run_plan(study=ten, method="active_bt", params=params)


def test_its_run_page_answers_in_every_state(client, owner, ten, judge):
    client.force_login(owner)
    r = judge_run_create(study=ten, method="active_bt", config=judge, params={"pairs": 4})
    url = reverse("judging:run_detail", args=[ten.slug, r.pk])
    for status in Status.values:
        JudgeRun.objects.filter(pk=r.pk).update(status=status, message=status)
        assert client.get(url).status_code == 200, status
        assert client.get(url, headers={"hx-request": "true"}).status_code == 200, status


def test_in_batch_mode_each_batch_of_pairs_is_one_batch_api_request(ten, judge, scripted, settings):
    settings.LLM_BATCH_POLL_SECONDS = 0.001
    params = {"pairs": 12, "batch_size": 5}
    batched = judge_run_execute(
        run=judge_run_create(
            study=ten, method="active_bt", config=judge, params={**params, "batch": True}
        )
    )
    assert batched.status == Status.DONE, batched.message
    assert [b["calls"] for b in batched.summary["batches"]] == [5, 5, 2]
    _check_every_batch(batched)
    # One call at a time (another model name: no cache hits), the same pairs are chosen.
    judge.pk, judge.name, judge.model = None, "one at a time", "scripted-2"
    judge.save()
    single = judge_run_execute(
        run=judge_run_create(study=ten, method="active_bt", config=judge, params=params)
    )

    def plan(run):
        rows = PairwiseOutcome.objects.filter(run=run)
        return sorted((o.round, o.first_shown_id, o.second_shown_id, o.verdict) for o in rows)

    assert plan(batched) == plan(single)


def test_a_batch_size_that_would_overflow_the_stored_batch_number_is_refused(study, monkeypatch):
    monkeypatch.setattr("judging.services.drivers.active.MAX_BATCHES", 2)
    with pytest.raises(JudgeRunRefused, match="more than 2 batches; choose a larger batch_size"):
        judge_run_plan(study=study, method="active_bt", params={"batch_size": 1})
    assert judge_run_plan(study=study, method="active_bt", params={"batch_size": 2})["total"] == 6
