"""The plan's ``phases`` object: parsed, checked against the study, round-tripped, and
the direction it gives the phase comparison's tests."""

from __future__ import annotations

import json

import pytest

from studies.analysis.plan import AnalysisPlan, PlanError, parse_plan, plan_document, plan_hash

PHASES = {"metrics": ["novelty", "overall"], "direction": "AI < Human", "leave_out": ["X_1"]}


def test_the_phases_object_parses_and_round_trips() -> None:
    plan = parse_plan({"phases": PHASES})
    assert plan.phase_metrics == ("novelty", "overall")
    assert plan.phase_direction == "AI < Human"
    assert plan.phase_leave_out == ("X_1",)
    doc = plan_document(plan)
    assert doc["phases"] == PHASES
    assert parse_plan(json.dumps(doc)) == plan
    assert plan_hash(parse_plan(doc)) == plan_hash(plan)


def test_a_plan_without_phases_keeps_its_document_and_hash() -> None:
    """Plans frozen before the key existed must keep their hash."""
    doc = plan_document(AnalysisPlan())
    assert "phases" not in doc
    old = {"hypotheses": [{"direction": "AI < Human"}], "multiple_testing": {"method": "bh"}}
    assert "phases" not in plan_document(parse_plan(old))


def test_the_phase_direction_decides_only_the_phase_comparison() -> None:
    plan = parse_plan({"phases": {"direction": "AI < Human"}})
    kw = {"metric": "overall", "condition": "AI", "baseline": "Human"}
    assert plan.alternative(test="phases", **kw) == "less"
    assert plan.alternative(test="by_idea", **kw) == "two-sided"
    # It wins over a hypothesis that would say otherwise for the phases.
    both = parse_plan(
        {"hypotheses": [{"direction": "AI > Human"}], "phases": {"direction": "AI < Human"}}
    )
    assert both.alternative(test="phases", **kw) == "less"
    assert both.alternative(test="by_review", **kw) == "greater"
    # A hypothesis may name the phase comparison as its test.
    named = parse_plan({"hypotheses": [{"direction": "Human > AI", "test": "phases"}]})
    assert named.alternative(test="phases", **kw) == "less"
    assert named.alternative(test="mixed", **kw) == "two-sided"


@pytest.mark.parametrize(
    ("phases", "message"),
    [
        ("all", "phases: must be an object"),
        ({"metric": ["x"]}, "phases: unknown field(s) metric"),
        ({"metrics": "overall"}, "phases.metrics: must be a list of names"),
        ({"direction": "AI << Human"}, "phases.direction: 'AI << Human' is neither"),
        ({"leave_out": ["a", 3]}, "phases.leave_out: must be a list of idea ids"),
        ({"leave_out": ["a", " a"]}, "phases.leave_out: an idea id is listed twice"),
    ],
)
def test_a_bad_phases_object_is_refused_naming_the_field(phases, message) -> None:
    with pytest.raises(PlanError) as exc:
        parse_plan({"phases": phases})
    assert message in str(exc.value)


def test_phase_metrics_and_direction_are_checked_against_the_study() -> None:
    plan = parse_plan({"phases": {"metrics": ["overall", "vibes"], "direction": "Bot < Human"}})
    with pytest.raises(PlanError) as exc:
        plan.check(metrics=["novelty", "overall"], conditions=["AI", "Human"], baseline="Human")
    text = str(exc.value)
    assert "phases.metrics: 'vibes' is not a metric" in text
    assert "phases.direction: 'Bot' is not a condition" in text
