"""Judge runs end to end: every method over HTTP against the scripted server."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import Count

import judging.services.engine as engine
from judging.models import Formalisation, IdeaRating, JudgeRun, Judgment, PairwiseOutcome
from judging.services import (
    JudgeRunRefused,
    judge_run_cancel,
    judge_run_create,
    judge_run_execute,
    judge_run_plan,
    judge_run_resume,
    judge_run_textless_problem,
)
from judging.tasks import execute_judge_run, judge_run_enqueue
from llm.models import LLMCall
from studies.models import Idea

pytestmark = pytest.mark.embedded  # judge runs through the configured broker

Status = JudgeRun.Status


class SimulatedCrash(BaseException):
    """Like a killed worker: not an Exception, so nothing in the run catches it."""


def run(study, method, judge=None, **kw):
    r = judge_run_create(study=study, method=method, config=judge, **kw)
    return judge_run_execute(run=r)


def ideas_by_length(study):
    return sorted(study.ideas.all(), key=lambda i: len(i.normalized_text))


def test_direct_scoring_scores_every_metric_of_the_form_for_every_idea(study, judge, scripted):
    r = run(study, "direct", judge, params={"samples": 2})
    metrics = study.form_definition().metric_keys
    assert r.status == Status.DONE, r.message
    assert r.total_calls == r.done_calls == 12 and r.http_calls == 12
    assert scripted.requests == 12
    assert Judgment.objects.filter(run=r, score__isnull=False).count() == 12 * len(metrics)
    rating = IdeaRating.objects.filter(run=r, dimension=metrics[0]).first()
    assert rating.score is not None and len(rating.history[0]["samples"]) == 2
    assert r.cost > 0
    assert LLMCall.objects.filter(run=r).exclude(parsed=None).count() == 12


def test_absolute_mode_gives_one_score_from_1_to_5(study, judge, scripted):
    r = run(study, "absolute", judge)
    assert r.status == Status.DONE
    scores = list(Judgment.objects.filter(run=r).values_list("score", flat=True))
    assert len(scores) == 6 and all(1 <= s <= 5 for s in scores)


def test_pairwise_judges_every_pair_within_a_topic_in_both_orders(study, judge, scripted):
    savepoints = list(connection.savepoint_ids)
    r = run(study, "pairwise", judge)
    assert connection.savepoint_ids == savepoints  # no transaction left open behind the run
    assert r.status == Status.DONE, r.message
    # 2 topics × 3 pairs × 2 orders
    assert r.total_calls == r.done_calls == scripted.requests == 12
    pairs = PairwiseOutcome.objects.filter(run=r).values("idea_a", "idea_b").annotate(n=Count("id"))
    assert {p["n"] for p in pairs} == {2}
    assert r.summary["position_consistency"] == 1.0
    # The scripted judge prefers longer texts: the 1–5 scores follow length within topic.
    for topic in study.topics.all():
        ordered = sorted(topic.ideas.all(), key=lambda i: len(i.normalized_text))
        scores = [
            IdeaRating.objects.get(run=r, idea=i, dimension="pairwise").score for i in ordered
        ]
        assert scores == [1.0, 3.0, 5.0]
    bt = IdeaRating.objects.filter(run=r, dimension="bradley_terry")
    assert bt.count() == 6
    assert all(x.ci_low <= x.score <= x.ci_high for x in bt)


def test_a_rerun_answers_from_the_cache_and_makes_zero_calls(study, judge, scripted):
    run(study, "pairwise", judge)
    scripted.reset_counts()
    again = run(study, "pairwise", judge)
    assert again.status == Status.DONE
    assert scripted.requests == 0
    assert again.http_calls == 0 and again.cache_hits == 12 and again.cost == 0


def test_unparseable_answers_are_counted_stored_raw_and_never_wins(study, judge, scripted):
    marked = ideas_by_length(study)[-1]  # the longest: would win every comparison
    marked.normalized_text += " UNPARSEABLE"
    marked.save()
    scripted.rules.garbage_when = "UNPARSEABLE"
    r = run(study, "pairwise", judge)
    assert r.status == Status.DONE
    bad = PairwiseOutcome.objects.filter(run=r, verdict="unparseable")
    assert r.unparseable == bad.count() == 4  # its 2 opponents × 2 orders
    assert all(o.call.response_text.startswith("Both ideas") for o in bad)
    assert all(o.parse_error and o.call.parse_error for o in bad)
    rating = IdeaRating.objects.get(run=r, idea=marked, dimension="pairwise")
    assert rating.score is None and rating.history[0]["wins"] == 0
    assert r.summary["unparseable"] == 4


def test_swiss_plays_rounds_with_byes_and_scores_wins(study, judge, scripted):
    r = run(study, "swiss", judge, params={"rounds": 3})
    assert r.status == Status.DONE, r.message
    # 3 ideas per topic: one game and one bye per round.
    assert r.total_calls == r.done_calls == scripted.requests == 2 * 3
    assert set(PairwiseOutcome.objects.filter(run=r).values_list("round", flat=True)) == {1, 2, 3}
    swiss = IdeaRating.objects.filter(run=r, dimension="swiss")
    assert sum(x.score for x in swiss) == 2 * 3 * 2  # each round: 1 game point + 1 bye point
    assert all(len(x.history) == 3 for x in swiss)


def test_swiss_in_both_orders_judges_each_game_twice(study, judge, scripted):
    r = run(study, "swiss", judge, params={"rounds": 2, "both_orders": True})
    assert r.status == Status.DONE
    assert r.done_calls == scripted.requests == 2 * 2 * 2


def test_ligbench_stores_formalisations_and_elo_histories(study, judge, scripted):
    r = run(study, "ligbench", judge, params={"peers": 3})
    assert r.status == Status.DONE, r.message
    assert Formalisation.objects.filter(run=r, parts__isnull=False).count() == 6
    assert r.done_calls == r.total_calls == 6 + 6 * 3
    elo = IdeaRating.objects.filter(run=r, dimension="elo_rating")
    assert elo.count() == 6 and all(0 < x.score < 5 for x in elo)
    assert all(x.history[-1]["stopped"] for x in elo)
    assert r.summary["references"].startswith("study ideas")


def test_baselines_make_no_calls_and_are_labelled(study, scripted):
    r = run(study, "baseline_random")
    assert r.status == Status.DONE and r.method_is_baseline and r.summary["baseline"]
    assert r.done_calls == 12 and scripted.requests == 0 and not LLMCall.objects.exists()
    longer = run(study, "baseline_longer")
    assert longer.summary["rule"] == "longer"
    top = ideas_by_length(study)[-1]
    assert IdeaRating.objects.get(run=longer, idea=top, dimension="pairwise").score == 5.0


def test_longer_text_says_it_cannot_run_without_idea_texts(study):
    Idea.objects.filter(pk=study.ideas.first().pk).update(normalized_text="")
    with pytest.raises(JudgeRunRefused, match="cannot run: 1 of 6 ideas have no") as refused:
        judge_run_create(study=study, method="baseline_longer")
    assert "Approve their normalization" in str(refused.value)
    assert judge_run_plan(study=study, method="baseline_random")["total"] == 12
    # An idea that came with imported reviews has no text at all: nothing to approve yet.
    Idea.objects.filter(pk=study.ideas.first().pk).update(raw_text="", sections={})
    with pytest.raises(JudgeRunRefused, match="Enter their text") as refused:
        judge_run_create(study=study, method="baseline_longer")
    assert "Approve their normalization" not in str(refused.value)
    # Named as the form and the ideas page name them, not by method key or database id.
    first = study.ideas.order_by("pk").first()
    label = first.memberships.first().external_id
    assert str(refused.value).startswith("Baseline: longer text wins cannot run: 1 of 6")
    assert f"({label})" in str(refused.value)
    assert judge_run_textless_problem(study) == ""  # the other ideas have a text
    with pytest.raises(JudgeRunRefused, match=r"Enter their text \(Fix sections"):
        judge_run_create(study=study, method="baseline_longer", params={"text": "raw"})


def test_no_run_starts_when_no_selected_idea_has_a_text(study):
    """Ideas that came with imported reviews have no text: a run over them is refused
    whatever the method, the random baseline (which reads no text) included."""
    Idea.objects.filter(study=study).update(raw_text="", normalized_text="", sections={})
    first, *rest = study.ideas.order_by("pk")
    for method in ("baseline_random", "baseline_longer", "pairwise"):
        with pytest.raises(JudgeRunRefused, match="none of the 6 selected ideas has a text") as no:
            judge_run_create(study=study, method=method)
        assert f"({first.memberships.first().external_id}, " in str(no.value)
        assert "Enter their text first (Fix sections on the ideas page)" in str(no.value)
    assert not JudgeRun.objects.exists()
    # One idea given a text: the baseline can compare it with the others.
    Idea.objects.filter(pk=first.pk).update(sections={"title": "A text"})
    assert judge_run_plan(study=study, method="baseline_random")["total"] == 12
    # Naming only ideas without text is still refused.
    named = {"idea_ids": [i.pk for i in rest[:2]]}
    with pytest.raises(JudgeRunRefused, match="none of the 2 selected ideas has a text"):
        judge_run_create(study=study, method="baseline_random", params=named)


def test_llm_methods_need_a_configured_judge(study):
    with pytest.raises(JudgeRunRefused, match="needs a judge config"):
        judge_run_create(study=study, method="pairwise")


def test_a_run_survives_injected_faults(study, judge, scripted):
    scripted.rules.script = [429, 500, 429]
    scripted.rules.error_rate = 0.3
    scripted.rules.seed = 7
    judge.max_attempts = 8
    judge.save()
    r = run(study, "pairwise", judge)
    assert r.status == Status.DONE, r.message
    assert r.done_calls == 12 and r.errors == 0
    assert scripted.answered == 12 and scripted.requests > 12


def test_calls_that_keep_failing_leave_the_run_resumable(study, judge, scripted):
    scripted.rules.fail_first = 10_000
    scripted.rules.fail_status = 500
    judge.max_attempts = 2
    judge.save()
    r = run(study, "absolute", judge)
    assert r.status == Status.FAILED and r.errors == 6 and r.done_calls == 0
    assert "resume to retry" in r.message and "HTTP 500" in r.error
    scripted.rules.fail_first = 0
    r = judge_run_execute(run=judge_run_resume(run=r))
    assert r.status == Status.DONE and r.done_calls == 6


def test_the_budget_stops_the_run_cleanly_and_resume_finishes_it(study, judge, scripted):
    judge.concurrency = 1
    judge.save()
    r = run(study, "pairwise", judge, budget_calls=5)
    assert r.status == Status.BUDGET
    assert "budget reached: 5 of 5 calls" in r.message and "resume" in r.message
    assert r.http_calls == 5 == scripted.requests == r.done_calls
    JudgeRun.objects.filter(pk=r.pk).update(budget_calls=100)
    r = judge_run_execute(run=judge_run_resume(run=r))
    assert r.status == Status.DONE and r.done_calls == 12
    assert scripted.requests == 12 and PairwiseOutcome.objects.filter(run=r).count() == 12


@pytest.mark.parametrize("method,width", [("pairwise", 1), ("swiss", 1), ("pairwise", 4)])
def test_resume_after_a_crash_repeats_no_finished_call_and_counts_once(
    study, judge, scripted, monkeypatch, method, width
):
    params = {"rounds": 3, "both_orders": True} if method == "swiss" else {}
    r = judge_run_create(study=study, method=method, config=judge, params=params)
    judge.concurrency = width
    judge.save()
    real_record, seen = engine.record, []

    def crashing_record(*args, **kwargs):
        call = real_record(*args, **kwargs)  # the call is stored, its outcome is not yet
        seen.append(call.pk)
        if len(seen) == 5:
            raise SimulatedCrash
        return call

    monkeypatch.setattr(engine, "record", crashing_record)
    with pytest.raises(SimulatedCrash):
        judge_run_execute(run=r)
    monkeypatch.setattr(engine, "record", real_record)
    r.refresh_from_db()
    assert r.status == Status.RUNNING  # as a killed worker leaves it
    assert judge_run_execute(run=r).status == Status.RUNNING  # a fresh lease is not stolen
    with pytest.raises(JudgeRunRefused, match="is running"):
        judge_run_resume(run=r)
    # Calls already on the wire (the pool is refilled before bookkeeping) are stored even
    # by a crash that Python sees, so the resume below gets them from the cache.
    assert scripted.requests == LLMCall.objects.filter(run=r).count()
    if width == 1:
        assert scripted.requests == 6

    r = judge_run_execute(run=judge_run_resume(run=r, force=True))
    assert r.status == Status.DONE, r.message
    assert scripted.requests == r.total_calls  # the 5th and 6th calls came from the cache
    assert r.done_calls == r.total_calls == PairwiseOutcome.objects.filter(run=r).count()
    per_call = PairwiseOutcome.objects.filter(run=r).values("call").annotate(n=Count("id"))
    assert {p["n"] for p in per_call} == {1}
    assert r.http_calls == r.total_calls
    assert r.cost == sum(c.cost for c in LLMCall.objects.filter(run=r))


def _on_third_record(monkeypatch, action):
    """Run `action` while the engine books its third call (a call is then in flight);
    returns the real `record` so a test can put it back."""
    real_record, seen = engine.record, []

    def record(*args, **kwargs):
        seen.append(1)
        if len(seen) == 3:
            action()
        return real_record(*args, **kwargs)

    monkeypatch.setattr(engine, "record", record)
    return real_record


def test_cancel_stops_between_calls_and_resume_finishes(study, judge, scripted, monkeypatch):
    judge.concurrency = 1
    judge.save()
    r = judge_run_create(study=study, method="pairwise", config=judge)
    real_record = _on_third_record(monkeypatch, lambda: judge_run_cancel(run=r))
    r = judge_run_execute(run=r)
    # The call already in flight when the flag was raised is finished and kept.
    assert r.status == Status.CANCELLED and r.done_calls == 4 == scripted.requests
    monkeypatch.setattr(engine, "record", real_record)
    r = judge_run_execute(run=judge_run_resume(run=r))
    assert r.status == Status.DONE and scripted.requests == 12


def test_a_queued_run_is_cancelled_at_once(study, judge):
    r = judge_run_create(study=study, method="pairwise", config=judge)
    assert judge_run_cancel(run=r).status == Status.CANCELLED
    assert judge_run_execute(run=r).status == Status.CANCELLED


def test_the_task_is_enqueued_on_commit_and_runs_the_service(
    study, judge, scripted, django_capture_on_commit_callbacks
):
    r = judge_run_create(study=study, method="absolute", config=judge)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        judge_run_enqueue(run=r)
    assert len(callbacks) == 1
    execute_judge_run.apply(args=[r.pk])
    r.refresh_from_db()
    assert r.status == Status.DONE and r.done_calls == 6


def test_a_redelivered_task_takes_over_a_run_whose_worker_went_silent(
    study, judge, scripted, settings
):
    from datetime import timedelta

    from django.utils import timezone

    r = judge_run_create(study=study, method="absolute", config=judge)
    silent = timezone.now() - timedelta(seconds=2 * settings.JOB_LOST_AFTER_SECONDS)
    JudgeRun.objects.filter(pk=r.pk).update(
        status=Status.RUNNING, heartbeat_at=silent, lease="old", attempts=1
    )
    execute_judge_run.apply(args=[r.pk])
    r.refresh_from_db()
    assert r.status == Status.DONE and r.done_calls == 6
    assert r.attempts == 2 and r.lease not in ("", "old")


def test_a_delivery_that_finds_a_fresh_heartbeat_looks_again_once_it_would_be_stale(
    study, judge, scripted, settings, monkeypatch
):
    # The broker's second delivery can come before a killed worker's lease runs out (its
    # visibility timeout counts from the first delivery): the run must not be left behind.
    from datetime import timedelta

    from django.utils import timezone

    r = judge_run_create(study=study, method="absolute", config=judge)
    beat = timezone.now() - timedelta(seconds=1)
    JudgeRun.objects.filter(pk=r.pk).update(
        status=Status.RUNNING, heartbeat_at=beat, lease="old", worker="gone:1", attempts=1
    )
    sent = []
    monkeypatch.setattr(
        execute_judge_run, "apply_async", lambda args, countdown: sent.append((args, countdown))
    )
    execute_judge_run.apply(args=[r.pk])
    r.refresh_from_db()
    assert r.status == Status.RUNNING and r.lease == "old" and scripted.requests == 0
    ((args, countdown),) = sent
    expected = settings.JOB_LOST_AFTER_SECONDS - 1 + settings.JOB_HEARTBEAT_SECONDS
    assert args == (r.pk,) and expected - 2 <= countdown <= expected
    # by then the heartbeat is stale: that delivery takes the run over and finishes it
    stale = timezone.now() - timedelta(seconds=settings.JOB_LOST_AFTER_SECONDS + 1)
    JudgeRun.objects.filter(pk=r.pk).update(heartbeat_at=stale)
    execute_judge_run.apply(args=[r.pk])
    r.refresh_from_db()
    assert r.status == Status.DONE and r.done_calls == 6 and len(sent) == 1


@pytest.mark.parametrize(
    "change", [{"lease": "another-worker"}, {"status": "lost"}], ids=["taken-over", "lost"]
)
def test_a_run_taken_over_or_marked_lost_stops_at_its_next_unit_and_writes_nothing_more(
    study, judge, scripted, monkeypatch, change
):
    judge.concurrency = 1
    judge.save()
    r = judge_run_create(study=study, method="pairwise", config=judge)
    _on_third_record(monkeypatch, lambda: JudgeRun.objects.filter(pk=r.pk).update(**change))
    r = judge_run_execute(run=r)
    # the call in flight was booked; no further call was made and the row was left alone
    assert scripted.requests == 4 and PairwiseOutcome.objects.filter(run=r).count() == 4
    assert r.status == change.get("status", Status.RUNNING) and r.finished_at is None
    assert r.done_calls < 4 and r.summary == {}


def test_the_soft_time_limit_hands_the_run_to_a_fresh_task_that_resumes_it(
    study, judge, scripted, monkeypatch
):
    from celery.exceptions import SoftTimeLimitExceeded

    r = judge_run_create(study=study, method="absolute", config=judge)
    real_execute, starts = engine.Engine.execute, []

    def time_limit_once(self):
        starts.append(1)
        if len(starts) == 1:
            raise SoftTimeLimitExceeded()
        return real_execute(self)

    monkeypatch.setattr(engine.Engine, "execute", time_limit_once)
    execute_judge_run.apply(args=[r.pk])  # eager: the retry runs at once
    r.refresh_from_db()
    assert r.status == Status.DONE and r.done_calls == 6 and r.attempts == 2


def test_a_dead_run_is_not_counted_as_running_on_the_step_list(study, judge, settings):
    from datetime import timedelta

    from django.utils import timezone

    from judging.run_counts import study_judge_run_counts

    r = judge_run_create(study=study, method="absolute", config=judge)
    JudgeRun.objects.filter(pk=r.pk).update(status=Status.RUNNING, heartbeat_at=timezone.now())
    assert study_judge_run_counts(study).active == 1
    quiet = timezone.now() - timedelta(seconds=settings.JOB_LOST_AFTER_SECONDS + 1)
    JudgeRun.objects.filter(pk=r.pk).update(heartbeat_at=quiet)
    assert study_judge_run_counts(study).active == 0
    r.refresh_from_db()
    assert r.status == Status.LOST


# Transactional, so the send happens at once on commit, as from a shell.
@pytest.mark.django_db(transaction=True)
def test_queueing_from_the_command_line_while_the_broker_is_down_says_so(study, judge, monkeypatch):
    from django.core.management import CommandError, call_command
    from kombu.exceptions import OperationalError

    def refuse(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6399. Connection refused.")

    monkeypatch.setattr(execute_judge_run, "apply_async", refuse)
    r = judge_run_create(study=study, method="absolute", config=judge)
    JudgeRun.objects.filter(pk=r.pk).update(status=Status.CANCELLED)
    with pytest.raises(CommandError, match="could not be sent to the task queue"):
        call_command("judge_run", resume=r.pk, queue=True)
    r.refresh_from_db()
    assert r.status == Status.FAILED and "CELERY_BROKER_URL" in r.error


def test_a_run_over_ideas_none_of_which_has_text_names_the_method_and_ideas_by_label(si2024_study):
    with pytest.raises(JudgeRunRefused) as refused:
        judge_run_plan(study=si2024_study, method="baseline_random")
    message = str(refused.value)
    n = si2024_study.ideas.filter(exclusion__isnull=True).count()
    first = si2024_study.ideas.order_by("pk").first()
    assert message.startswith(f"Baseline: random cannot run: none of the {n} selected ideas")
    assert f"({first.memberships.first().external_id}, " in message
    assert "baseline_random" not in message and "(ideas 1," not in message
    assert "No idea of this study has a text" in judge_run_textless_problem(si2024_study)
