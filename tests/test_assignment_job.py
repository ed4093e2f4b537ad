"""The assignment preview as the owner runs it: the study's settings reach the solver,
the preview runs as a background job, its tables and plots, and its commit."""

from __future__ import annotations

import pytest

from studies.models import TopicChoiceUse
from studies.recruitment import assignment_plan
from tests.test_recruitment import _fast_and_clean, make_review_study  # noqa: F401


@pytest.mark.django_db
def test_the_studys_topic_choice_use_reaches_the_solver_and_its_fingerprint(owner):
    s = make_review_study(owner, commit=False)
    first = assignment_plan(study=s.study, seed=3)
    assert first.inputs.params.topic_choice == "first"
    s.study.topic_choice_use = TopicChoiceUse.EQUAL
    s.study.save()
    equal = assignment_plan(study=s.study, seed=3)
    assert equal.inputs.params.topic_choice == "equal"
    # A preview made under the other rule must not be committed as if nothing changed.
    assert equal.fingerprint != first.fingerprint
