"""The pair-task generator gives each reviewer a balanced mix of condition pairs."""

from __future__ import annotations

from collections import Counter

import pytest

from studies.models import PairTask
from studies.protocol.pairs import condition_pairs
from studies.services.reviews import pair_tasks_create
from tests.factories import make_review_study


def conditions(idea) -> set[str]:
    return {m.condition.key for m in idea.memberships.all()}


@pytest.mark.django_db
def test_each_reviewer_gets_every_condition_pair_their_topics_offer(owner):
    s = make_review_study(owner, slug="pairs", commit=False)
    n, problems = pair_tasks_create(study=s.study, per_reviewer=3, seed=4)
    assert n == 3 * len(s.reviewers) and problems == []
    tasks = PairTask.objects.filter(study=s.study).select_related("reviewer", "idea_a", "idea_b")
    by_reviewer: dict[str, Counter] = {}
    a_first = Counter()
    for t in tasks:
        ca, cb = conditions(t.idea_a), conditions(t.idea_b)
        cps = condition_pairs(ca, cb)
        assert cps, "two ideas of the same conditions compare nothing"
        assert t.idea_a.topic_id == t.idea_b.topic_id
        assert t.idea_a.topic.name in t.reviewer.topic_preferences
        by_reviewer.setdefault(t.reviewer.pseudonym, Counter()).update(cps)
        a_first["Human_Experts" in ca] += 1
        assert t.source == "balanced"
    # Each topic offers Human–AI, Human–AI_Rerank and AI–AI_Rerank: three pairs, one each.
    expected = {
        ("AI_Ideas", "Human_Experts"),
        ("AI_Rerank", "Human_Experts"),
        ("AI_Ideas", "AI_Rerank"),
    }
    for name, counts in by_reviewer.items():
        assert set(counts) == expected, name
        assert max(counts.values()) - min(counts.values()) <= 1, (name, counts)
    # Which idea is "A" is drawn, so the A side does not always hold the human idea.
    assert a_first[True] and a_first[False]


@pytest.mark.django_db
def test_gold_ideas_are_never_paired(owner):
    s = make_review_study(owner, slug="pairs-gold", commit=False)
    gold = [i for i in s.ideas if i.topic.name == s.ideas[0].topic.name][:2]
    for idea in gold:
        idea.gold_ranges = {"overall": [2, 4]}
        idea.save(update_fields=["gold_ranges"])
    n, _ = pair_tasks_create(study=s.study, per_reviewer=3, seed=4)
    assert n > 0
    paired = set(PairTask.objects.filter(study=s.study).values_list("idea_a", "idea_b"))
    assert not {i.pk for i in gold} & {pk for pair in paired for pk in pair}
