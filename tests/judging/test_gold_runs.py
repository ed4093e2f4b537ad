"""Gold ideas (the reviewers' quality-control items, studies.protocol.gold) stay out of
judge runs: no prompt carries one, no judgment or outcome names one, and a run that names
one is refused."""

from __future__ import annotations

import json

import pytest

from judging.models import JudgeRun, Judgment, PairwiseOutcome
from judging.services import JudgeRunRefused, judge_run_create, judge_run_execute
from llm.models import LLMCall


def _make_gold(study):
    gold = study.ideas.order_by("id").first()
    gold.gold_ranges = {"overall": [2, 4]}
    gold.save(update_fields=["gold_ranges"])
    return gold


@pytest.mark.django_db
@pytest.mark.parametrize(
    "method,expected_calls",
    # direct: one call per idea (6 ideas, one gold); pairwise: both orders of each pair
    # within a topic (3 + 3 ideas; without the gold one, 2 + 3: 2 + 6 ordered pairs).
    [("direct", 5), ("pairwise", 8)],
)
def test_a_judge_never_scores_or_compares_a_gold_idea(
    study, judge, scripted, method, expected_calls
):
    gold = _make_gold(study)
    run = judge_run_execute(run=judge_run_create(study=study, method=method, config=judge))
    assert run.status == JudgeRun.Status.DONE, run.message
    assert run.total_calls == expected_calls and scripted.requests == expected_calls
    assert not Judgment.objects.filter(run=run, idea=gold).exists()
    assert not PairwiseOutcome.objects.filter(run=run, idea_a=gold).exists()
    assert not PairwiseOutcome.objects.filter(run=run, idea_b=gold).exists()
    sent = [json.dumps(c.request) for c in LLMCall.objects.filter(run=run)]
    marker = gold.normalized_text[:40]
    assert sent and not any(marker in body for body in sent)


@pytest.mark.django_db
def test_a_run_naming_a_gold_idea_is_refused(study, judge):
    gold = _make_gold(study)
    others = list(study.ideas.exclude(pk=gold.pk).values_list("id", flat=True)[:2])
    with pytest.raises(JudgeRunRefused, match=f"ideas {gold.pk} are gold items"):
        judge_run_create(
            study=study, method="direct", config=judge, params={"idea_ids": [gold.pk, *others]}
        )
    assert not JudgeRun.objects.exists()
