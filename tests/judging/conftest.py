"""Fixtures for judge tests: a scripted endpoint over real HTTP and a small study."""

from __future__ import annotations

import pytest

from judging.testserver import Rules, TestServer
from llm.models import JudgeConfig
from studies.models import Condition, Idea, IdeaCondition, Topic

# Lengths differ so "longer text wins" gives a strict order; the rest is filler.
TEXTS = {
    "Prompting": [
        "Ask the model to explain its answer twice and compare. " * 2,
        "Ask the model to list its assumptions before answering, then check each. " * 3,
        "Sample several answers and keep the one most others agree with. " * 4,
    ],
    "Factuality": [
        "Retrieve sources for every claim and drop unsupported ones. " * 2,
        "Let a second model challenge each claim and revise until stable. " * 3,
        "Train a verifier on synthetic contradictions and rerank outputs. " * 5,
    ],
}


@pytest.fixture
def scripted():
    """A fresh scripted server per test; change `scripted.rules` to inject faults."""
    with TestServer(Rules()) as server:
        yield server


@pytest.fixture
def judge(db, scripted):
    return JudgeConfig.objects.create(
        name="scripted",
        base_url=scripted.base_url,
        model="scripted-1",
        api_key_env="IDEAREVIEW_TEST_KEY",
        parameters={"temperature": 0},
        price_input_per_million="1.00",
        price_output_per_million="2.00",
        concurrency=4,
        timeout_seconds=5,
        max_attempts=4,
        backoff_seconds=0.001,
    )


def make_study(owner, texts=TEXTS, slug="judged"):
    from studies.services.study import study_create

    return ideas_add(study_create(owner=owner, slug=slug, title="Judged study"), texts)


def ideas_add(study, texts=TEXTS):
    """Two conditions, a topic per key of `texts` and an approved idea per text."""
    # A study made on the new-study page has these two conditions already.
    human, _ = Condition.objects.get_or_create(
        study=study, key="Human", defaults={"kind": Condition.Kind.HUMAN}
    )
    ai, _ = Condition.objects.get_or_create(
        study=study, key="AI", defaults={"kind": Condition.Kind.AI}
    )
    n = 0
    for topic_name, bodies in texts.items():
        topic, _ = Topic.objects.get_or_create(study=study, name=topic_name)
        for body in bodies:
            n += 1
            idea = Idea.objects.create(
                study=study,
                topic=topic,
                title=f"Idea {n}",
                raw_text=body,
                normalized_text=body,
                normalization_status=Idea.NormalizationStatus.APPROVED,
            )
            IdeaCondition.objects.create(
                idea=idea, condition=human if n % 2 else ai, study=study, external_id=f"x{n}"
            )
    return study


@pytest.fixture
def study(db):
    from django.contrib.auth import get_user_model

    # No password: hashing one costs more than a whole judge run here.
    owner = get_user_model().objects.create(username="judge-owner")
    return make_study(owner)
