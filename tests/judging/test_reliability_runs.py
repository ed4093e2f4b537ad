"""Repetition and self-preference measured by real runs: a run parameter asks a share of
its prompts again (really again: past the cache, inside the budget), and the run page's
panel reads the repeats and the conditions' generating models. The recovery tests send
whole runs over HTTP to the local test server's behaviour profile and check that the
panel's estimates find the effect the profile injects, within their intervals' precision,
and that the intervals are no wider than stated bounds (docs/judge-reliability.md)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from judging.methods import judge_profiles as jp
from judging.models import JudgeRun, PairwiseOutcome
from judging.reliability_panel import reliability_csv, run_reliability
from judging.services import JudgeRunRefused, judge_run_create, judge_run_execute
from judging.services.runs import judge_run_resume
from judging.testserver import Rules, TestServer
from llm.models import JudgeConfig, LLMCall
from studies.models import (
    Condition,
    Idea,
    IdeaCondition,
    PairJudgment,
    PairTask,
    Reviewer,
    Topic,
)

# Judge runs on the test server and the panel's bootstrap: computation on rows SQLite and
# PostgreSQL return alike, so CI runs them once, on PostgreSQL (docs/testing.md, `once`).
pytestmark = pytest.mark.django_db
Status = JudgeRun.Status


def run(study, method, judge, **kw):
    return judge_run_execute(run=judge_run_create(study=study, method=method, config=judge, **kw))


def test_a_repeat_share_asks_prompts_again_past_the_cache(study, judge, scripted):
    r = run(study, "pairwise", judge, params={"repeat_share": 1.0})
    assert r.status == Status.DONE, r.message
    # 12 ordered pairs, each asked twice; one outcome each (repeats never count twice).
    assert r.total_calls == r.done_calls == 24 and scripted.requests == 24
    assert PairwiseOutcome.objects.filter(run=r).count() == 12
    calls = LLMCall.objects.filter(run=r)
    assert calls.count() == 24 and len(set(calls.values_list("cache_key", flat=True))) == 24
    assert len(set(calls.values_list("prompt_hash", flat=True))) == 12
    # The same run again is answered from the cache, repeats included: no new request.
    again = run(study, "pairwise", judge, params={"repeat_share": 1.0})
    assert again.status == Status.DONE and scripted.requests == 24
    panel = run_reliability(r, n_boot=50)
    (row,) = panel["repetition"]
    # The scripted judge is deterministic: every repeat gives the first verdict again.
    assert row["prompts"] == 12 and row["judge"]["value"] == 1.0
    assert not any(n.startswith("repetition") for n in panel["not_measured"])
    assert "repetition_judge" in reliability_csv(panel)
    c = Client()
    c.force_login(study.owner)
    page = c.get(reverse("judging:run_detail", args=[study.slug, r.pk])).content.decode()
    assert 'id="repetition"' in page and "identical verdicts" in page


def test_repeats_are_inside_the_budget_and_a_resume_finishes_them(study, judge, scripted):
    judge.concurrency = 1
    judge.save()
    # Every prompt asked again: which ones a share below 1 picks depends on the ideas'
    # ids, which differ between databases (the recovery tests below repeat a share).
    r = run(study, "direct", judge, params={"repeat_share": 1.0}, budget_calls=4)
    total = r.total_calls
    assert total == 12  # 6 ideas, each asked twice
    assert r.status == Status.BUDGET and scripted.requests == 4
    JudgeRun.objects.filter(pk=r.pk).update(budget_calls=100)
    r = judge_run_execute(run=judge_run_resume(run=r))
    assert r.status == Status.DONE and r.done_calls == total == scripted.requests
    panel = run_reliability(r, n_boot=50)
    figures = {(row["figure"], row["metric"]) for row in panel["repetition"]}
    assert ("score SD", "overall") in figures and ("identical scores", "overall") in figures
    sd = next(x for x in panel["repetition"] if x["figure"] == "score SD")
    assert sd["prompts"] == total - 6 and sd["judge"]["value"] == 0.0


@pytest.mark.parametrize(
    "method,params,message",
    [
        ("pairwise", {"repeat_share": 1.5}, "from 0 to 1"),
        ("pairwise", {"repeat_share": "lots"}, "from 0 to 1"),
        ("swiss", {"repeat_share": 0.2}, "swiss cannot ask prompts again"),
    ],
)
def test_a_bad_repeat_share_is_refused_with_a_reason(study, judge, method, params, message):
    with pytest.raises(JudgeRunRefused, match=message):
        judge_run_create(study=study, method=method, config=judge, params=params)


def test_without_a_named_model_the_panel_says_why_self_preference_is_missing(
    study, judge, scripted
):
    r = run(study, "pairwise", judge)
    panel = run_reliability(r, n_boot=50)
    assert panel["self_preference"]["judge_family"] == "scripted-1"
    assert any("no condition names a generating model" in n for n in panel["not_measured"])
    assert any(n.startswith("repetition stability: this run asked") for n in panel["not_measured"])


def test_the_run_page_shows_self_preference_beside_the_reviewers(study, scripted):
    """A judge of the family a condition names: its mixed pairs give the figure, and the
    page shows it (the scripted judge always picks the first shown: ½ over both orders)."""
    judge = JudgeConfig.objects.create(
        name="gpt", base_url=scripted.base_url, model="gpt-4o-mini", parameters={},
        api_key_env="IDEAREVIEW_TEST_KEY", timeout_seconds=5, backoff_seconds=0.001,
    )  # fmt: skip
    Condition.objects.filter(study=study, key="AI").update(generating_model="gpt-4o")
    r = run(study, "pairwise", judge)
    panel = run_reliability(r, n_boot=50)
    (row,) = panel["self_preference"]["rows"]
    assert panel["self_preference"]["judge_family"] == "openai"
    # Per topic 3 ideas, AI the even ones: 2 mixed pairs a topic, 4 in all.
    assert row["pairs"] == 4 and row["judge"]["value"] == pytest.approx(0.5)
    assert row["human"]["n"] == 0 and row["human"]["value"] is None
    assert not any(n.startswith("self-preference") for n in panel["not_measured"])
    c = Client()
    c.force_login(study.owner)
    page = c.get(reverse("judging:run_detail", args=[study.slug, r.pk])).content.decode()
    assert 'id="self-preference"' in page and "judge family: openai" in page


# --- recovery over HTTP ------------------------------------------------------------------

PROFILE = jp.PROFILES["all"]
OWN = "[style:openai]"
SEEDS = (0, 1, 2)
IDEAS, PAIRS, RATED = 40, 200, 100
BOUNDS = {"self_preference": 0.5, "difference": 0.5, "identical_share": 0.15}
"""Widest acceptable 95 % interval per figure on these runs (40 ideas, 200 pairs in both
orders, half of the 400 prompts asked again, reviewers' ratings on 100 mixed pairs),
about 1.25 times the widest seen: which ideas are repeated and paired follows the
database's ids, so the widths move between runs (docs/judge-reliability.md)."""
WORDS = ["model", "data", "prompt", "answer", "claim", "source", "verify", "rank", "train"]


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _p_first(a: str, b: str, own_a: bool, own_b: bool) -> float:
    """P(the first-shown wins) by the profile's definition (quality hashed from the text)."""
    la, lb = len(a.split()), len(b.split())
    return _sigmoid(
        PROFILE.discrimination * (jp.normal("quality", a) - jp.normal("quality", b))
        + PROFILE.position
        + PROFILE.length_preference * (la - lb) / (la + lb)
        + PROFILE.self_preference * (int(own_a) - int(own_b))
    )


def _world(owner, seed: int, base_url: str):
    """`IDEAS` ideas, half written by gpt-4o (their condition says so, their text carries the
    family's marker), the other half by people, and a gpt-4o-mini judge."""
    from studies.services.study import study_create

    rng = random.Random(seed)
    study = study_create(owner=owner, slug=f"selfpref{seed}", title="Self-preference")
    human, _ = Condition.objects.get_or_create(
        study=study, key="Human", defaults={"kind": Condition.Kind.HUMAN}
    )
    ai, _ = Condition.objects.get_or_create(study=study, key="AI", defaults={"kind": "ai"})
    Condition.objects.filter(pk=ai.pk).update(generating_model="gpt-4o")
    topic = Topic.objects.create(study=study, name="Everything")
    texts: dict[int, str] = {}
    own: dict[int, bool] = {}
    for k in range(IDEAS):
        words = round(200 * math.exp(0.4 * rng.gauss(0, 1)))
        body = " ".join(rng.choice(WORDS) for _ in range(words))
        mine = k % 2 == 0
        text = f"{OWN} {body}" if mine else body
        idea = Idea.objects.create(
            study=study,
            topic=topic,
            title=f"Idea {k}",
            raw_text=text,
            normalized_text=text,
            normalization_status=Idea.NormalizationStatus.APPROVED,
        )
        IdeaCondition.objects.create(
            idea=idea, condition=ai if mine else human, study=study, external_id=f"i{k}"
        )
        texts[idea.pk], own[idea.pk] = text, mine
    judge = JudgeConfig.objects.create(
        name="gpt judge",
        base_url=base_url,
        model="gpt-4o-mini",
        api_key_env="IDEAREVIEW_TEST_KEY",
        parameters={"temperature": 1},
        concurrency=4,
        timeout_seconds=5,
        max_attempts=2,
        backoff_seconds=0.001,
    )
    return study, judge, texts, own


def _rate(study, pairs, texts, seed):
    """Two reviewers per pair prefer by quality alone (as `judge_profiles.simulate`)."""
    rng = np.random.default_rng(seed)
    reviewers = [
        Reviewer.objects.create(study=study, pseudonym=f"R{k}", email=f"r{k}@example.org")
        for k in range(2)
    ]
    expected_human = {}
    for a, b in pairs:
        p = _sigmoid(1.5 * (jp.normal("quality", texts[a]) - jp.normal("quality", texts[b])))
        expected_human[(a, b)] = p
        for reviewer in reviewers:
            task = PairTask.objects.create(
                study=study, reviewer=reviewer, idea_a_id=a, idea_b_id=b, a_on_left=True,
                status=PairTask.Status.SUBMITTED, dimensions=["overall"],
            )  # fmt: skip
            winner = "a" if rng.random() < p else "b"
            PairJudgment.objects.create(
                task=task, dimension="overall", winner=winner,
                choice="first" if winner == "a" else "second",
            )  # fmt: skip
    return expected_human


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_self_preference_and_repetition_noise_are_recovered_over_http(owner, seed):
    cache.clear()
    with TestServer(Rules(profile="all")) as server:
        study, judge, texts, own = _world(owner, seed, server.base_url)
        r = run(
            study,
            "pairwise",
            judge,
            params={"group_by": "all", "sample_pairs": PAIRS, "seed": seed, "repeat_share": 0.5},
        )
        assert r.status == Status.DONE, r.message
        outcomes = list(PairwiseOutcome.objects.filter(run=r))
        mixed = sorted(
            {(o.idea_a_id, o.idea_b_id) for o in outcomes if own[o.idea_a_id] != own[o.idea_b_id]}
        )
        rated = [(a, b) if own[a] else (b, a) for a, b in mixed[:RATED]]
        human_p = _rate(study, rated, texts, seed)
        cache.clear()
        panel = run_reliability(r, n_boot=300)

    # Expected values from the profile's definition, on the pairs this run judged.
    judge_p = {
        (o, x): 0.5 * (_p_first(texts[o], texts[x], True, False)
                       + 1.0 - _p_first(texts[x], texts[o], False, True))
        for o, x in ((a, b) if own[a] else (b, a) for a, b in mixed)
    }  # fmt: skip
    (sp,) = panel["self_preference"]["rows"]
    assert panel["self_preference"]["judge_family"] == "openai"
    expected = float(np.mean(list(judge_p.values())))
    gap = float(np.mean([judge_p[ox] - human_p[ox] for ox in rated]))
    checks = {
        "self_preference": (sp["judge"], expected),
        "difference": (sp["difference"], gap),
    }
    # Repetition: the k-th repeat answers afresh with probability r, else repeats itself.
    first_calls = {o.call.prompt_hash: o for o in outcomes}
    repeated = set(
        LLMCall.objects.filter(run=r).exclude(pk__in=[o.call_id for o in outcomes])
        .values_list("prompt_hash", flat=True)
    )  # fmt: skip
    noise = PROFILE.repetition_noise
    shares = []
    for digest in repeated:
        o = first_calls[digest]
        first, second = o.first_shown_id, o.second_shown_id
        p = _p_first(texts[first], texts[second], own[first], own[second])
        shares.append((1 - noise) + noise * (p**2 + (1 - p) ** 2))
    (rep,) = panel["repetition"]
    checks["identical_share"] = (rep["judge"], float(np.mean(shares)))
    assert rep["prompts"] == len(repeated) > 100
    for figure, (estimate, value) in checks.items():
        # A 95 % interval misses its target one time in twenty, and this test checks nine
        # (three figures on three seeds): it would fail one run in three. Doubled around its
        # estimate (about four standard errors), it misses only an estimate that is off.
        half = (estimate["high"] - estimate["low"]) / 2
        assert abs(estimate["value"] - value) <= 2 * half, (figure, estimate, value)
        assert estimate["high"] - estimate["low"] <= BOUNDS[figure], (figure, estimate)
    # The human figure sits beside the judge's, on the same pairs.
    assert sp["human"]["n"] == len(rated)


def test_naming_a_generating_model_after_the_run_updates_its_panel(study, scripted):
    judge = JudgeConfig.objects.create(
        name="gpt", base_url=scripted.base_url, model="gpt-4o", parameters={},
        api_key_env="IDEAREVIEW_TEST_KEY", timeout_seconds=5, backoff_seconds=0.001,
    )  # fmt: skip
    r = run(study, "pairwise", judge)
    assert "rows" not in run_reliability(r, n_boot=20)["self_preference"]
    Condition.objects.filter(study=study, key="AI").update(generating_model="o3-mini")
    assert run_reliability(r, n_boot=20)["self_preference"]["rows"][0]["pairs"] == 4
