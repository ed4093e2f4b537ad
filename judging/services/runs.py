"""A judge run's lifecycle: plan, create, execute (resumably), cancel, resume, results.

How a run executes. A method is a *driver* (one module per method under `drivers/`,
named by its entry in `judging.methods.registry`) that turns the study into *units* (one
LLM call each, or one rule-decided outcome for the baselines), each with a stable key,
and stores each unit's result in an outcome row (`Judgment`, `PairwiseOutcome`,
`Formalisation`). Before doing anything the driver reads the rows the run already has, so:

- a unit whose outcome row exists is never redone and never counted twice;
- a unit whose call was made and stored but whose outcome was not (a crash in between)
  is answered by the call cache without an HTTP request;
- every counter on the run (done, cost, calls, unparseable) is recomputed from the rows
  when execution starts, never carried over.

Failed calls (after the client's retries) are recorded and counted in `errors`; their
units stay undone, the run ends as "failed" with a message saying how many units are
missing, and `judge_run_resume` retries exactly those. The engine (`engine.py`) does the
sending and the bookkeeping.

A run is a background job like a study's (`studies.jobs`, docs/jobs.md): a worker takes
it under a fresh lease (`lease_take`) and writes its heartbeat from a thread of its own
(`lease_heartbeat`), whatever the engine is doing; every write the worker makes is
conditional on its lease, so a run that was cancelled, marked lost or taken over by
another worker stops at the engine's next check. A page that shows a run marks it lost
once its heartbeat is stale (`job_mark_if_lost`); cancel is a row update that needs no
worker; resume puts the same row back in the queue.
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from llm.client import BudgetExhausted, JudgeNotConfigured, budget_problem, run_spend
from llm.models import JudgeConfig
from llm.services import judge_config_usable
from studies.analysis.rounding import counted
from studies.jobs import (
    job_cancel,
    job_mark_if_lost,
    job_requeue,
    lease_heartbeat,
    lease_take,
)
from studies.models import Idea, Study
from studies.selectors import idea_labels, idea_text
from studies.services.audit import audit
from studies.status import idea_has_text

from ..methods.registry import AUTO, LLM_METHODS, METHODS, method_spec
from ..models import IdeaRating, JudgeRun, PanelMember
from .base import Driver, JudgeRunRefused
from .batch import BatchEngine
from .engine import Engine

log = logging.getLogger("judging.services")

Status = JudgeRun.Status

HELD = (Status.RUNNING, Status.CANCELLED)
"""The statuses in which the worker that holds a run's lease still writes to it: running,
and cancelled (it stops at its next check, and books the calls it has in flight)."""


def make_driver(
    method: str,
    *,
    run: JudgeRun | None,
    ideas: Sequence[Idea],
    params: dict[str, Any],
    study: Study,
    members: int = 1,
) -> Driver:
    """The method's driver, built by the factory its registry entry names; `members`
    judges ask every prompt (a panel run: PANEL_METHODS only)."""
    factory = import_string(method_spec(method).driver.replace(":", "."))
    if members > 1:
        return factory(run=run, ideas=ideas, params=params, study=study, members=members)
    return factory(run=run, ideas=ideas, params=params, study=study)


# --- Creating runs -------------------------------------------------------------------


def _params(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    merged = method_spec(method).params()
    params = dict(params or {})
    batch = params.pop("batch", False)
    if batch not in (True, False):
        raise JudgeRunRefused("batch must be true or false")
    if batch and method_spec(method).baseline:
        raise JudgeRunRefused(f"{method} makes no calls; it has no batch mode")
    if batch:
        merged["batch"] = True  # only then: other runs' parameters stay as they were
    share = params.pop("repeat_share", 0)
    if share:
        merged["repeat_share"] = _repeat_share(method, share)
    unknown = sorted(set(params) - set(merged))
    if unknown:
        raise JudgeRunRefused(f"unknown parameters for {method}: {', '.join(unknown)}")
    merged.update(params or {})
    if merged["text"] not in ("normalized", "raw"):
        raise JudgeRunRefused("text must be 'normalized' or 'raw'")
    if "samples" in merged and int(merged["samples"]) < 1:
        raise JudgeRunRefused("samples must be at least 1")
    if merged.get("group_by", "topic") not in ("topic", "all"):
        raise JudgeRunRefused("group_by must be 'topic' or 'all'")
    return merged


#: Methods whose drivers can ask a share of their prompts again (`repeat_share`).
REPEATABLE = frozenset({"direct", "absolute", "pairwise"})
#: Methods a panel of judges can run: every member is asked every prompt; the panel's
#: score is the members' mean, its pairwise verdict their majority (judging.methods.panel).
PANEL_METHODS = frozenset({"direct", "absolute", "pairwise"})


def _repeat_share(method: str, value: Any) -> float:
    """The share of prompts asked a second time, for repetition stability."""
    if method not in REPEATABLE:
        raise JudgeRunRefused(
            f"{method} cannot ask prompts again (repeat_share); "
            f"methods that can: {', '.join(sorted(REPEATABLE))}"
        )
    try:
        share = float(value)
    except (TypeError, ValueError):
        raise JudgeRunRefused(f"repeat_share must be a number from 0 to 1, not {value!r}") from None
    if not 0.0 < share <= 1.0 or isinstance(value, bool):
        raise JudgeRunRefused(f"repeat_share must be a number from 0 to 1, not {value!r}")
    return share


def _ideas(study: Study, params: dict[str, Any]) -> list[Idea]:
    # Gold ideas are quality-control items for reviewers (studies.protocol.gold): a judge
    # never scores or compares one, named or not. Ideas left out by topic matching are
    # not judged either, unless named explicitly.
    qs = study.ideas.select_related("topic").order_by("id").filter(gold_ranges__isnull=True)
    if not params.get("idea_ids"):
        qs = qs.filter(exclusion__isnull=True)
    if params.get("idea_ids"):
        qs = qs.filter(id__in=params["idea_ids"])
    if params.get("topic_ids"):
        qs = qs.filter(topic_id__in=params["topic_ids"])
    return list(qs)


def _refuse_gold(study: Study, params: dict[str, Any]) -> None:
    """A run that names gold ideas in `idea_ids` is refused rather than silently smaller."""
    named = params.get("idea_ids") or []
    gold = sorted(
        study.ideas.filter(id__in=named, gold_ranges__isnull=False).values_list("id", flat=True)
    )
    if gold:
        raise JudgeRunRefused(
            f"ideas {', '.join(map(str, gold))} are gold items (quality checks of the "
            "reviewers): judges never score or compare them"
        )


ENTER_TEXT = "Enter their text first (Fix sections on the ideas page)."


def _named(study: Study, ideas: Sequence[Idea]) -> str:
    """The first few ideas by the labels the owner's pages show (their external ids)."""
    labels = idea_labels(study)
    names = ", ".join(labels.get(i.pk, f"idea-{i.pk}") for i in ideas[:5])
    return names + ("…" if len(ideas) > 5 else "")


def judge_run_textless_problem(study: Study) -> str:
    """Why no method that judges the study's ideas can run, when none of them has a text
    (ideas that came with imported reviews); "" when some idea has one."""
    ideas = study.ideas.filter(exclusion__isnull=True, gold_ranges__isnull=True)
    ideas = ideas.only("raw_text", "normalized_text", "sections")
    if not ideas or any(idea_has_text(i) for i in ideas):
        return ""
    return (
        "No idea of this study has a text, so no judge can rate them: a review file names "
        f"its ideas but does not carry their texts. {ENTER_TEXT}"
    )


def _refuse_textless(study: Study, method: str, ideas: Sequence[Idea]) -> None:
    """Refuse a run on ideas of which none has any text (ideas that came with imported
    reviews, which name their ideas but do not carry them). Even a baseline that reads no
    text is refused: its outcomes would compare ideas no judge could read, and the study's
    "Judges run" step would have nothing to show for it."""
    if not ideas or any(idea_has_text(i) for i in ideas):
        return
    head = f"{method_spec(method).label} cannot run: none of the {len(ideas)} selected ideas has a text"
    tail = f"; a review file names its ideas but does not carry their texts. {ENTER_TEXT}"
    raise JudgeRunRefused(f"{head} ({_named(study, ideas)}){tail}", unnamed=f"{head}{tail}")


def _check_texts(study: Study, method: str, ideas: Sequence[Idea], source: str) -> None:
    spec = method_spec(method)
    if not spec.needs_text or not spec.judges_ideas:
        return
    missing = [i for i in ideas if not idea_text(i, source).strip()]
    if missing:
        what = "approved normalized text" if source == "normalized" else "raw text"
        # Ideas that came with imported reviews have no text at all: nothing to approve yet.
        enter = "Enter their text (Fix sections on the ideas page)"
        if source != "normalized":
            remedy = enter
        elif all(i.raw_text.strip() for i in missing):
            remedy = "Approve their normalization"
        else:
            remedy = f"{enter} and approve its normalization"
        head = f"{spec.label} cannot run: {len(missing)} of {len(ideas)} ideas have no {what}"
        tail = f". {remedy} or leave them out (idea_ids)."
        raise JudgeRunRefused(f"{head} ({_named(study, missing)}){tail}", unnamed=f"{head}{tail}")


def judge_run_plan(
    *, study: Study, method: str, params: dict[str, Any] | None = None, members: int = 1
) -> dict[str, Any]:
    """What a run would do: its parameters, ideas and number of units (calls), every
    prompt asked of each of `members` judges."""
    if method not in METHODS:
        raise JudgeRunRefused(f"unknown method {method!r}")
    spec = method_spec(method)
    merged = _params(method, params)
    if spec.corpus:
        merged["corpus"] = _resolve_corpus(study, method, merged["corpus"])
    ideas = _ideas(study, merged) if spec.judges_ideas else []
    _refuse_gold(study, merged)
    # A corpus method without a corpus compares the study's ideas with each other.
    needed = spec.min_ideas if not spec.corpus or merged["corpus"] is not None else 2
    if len(ideas) < needed:
        raise JudgeRunRefused(f"{method} needs more ideas than the {len(ideas)} selected")
    _refuse_textless(study, method, ideas)
    _check_texts(study, method, ideas, merged["text"])
    driver = make_driver(method, run=None, ideas=ideas, params=merged, study=study, members=members)
    return {"params": merged, "ideas": [i.pk for i in ideas], "total": driver.total}


def _resolve_corpus(study: Study, method: str, value: Any) -> int | None:
    """The corpus id a run will use (stored in its params, so a resume uses the same one)."""
    from ..corpus import reference_corpora_of

    usable = reference_corpora_of(study)
    if value == AUTO:
        corpus = usable.first()
        if corpus is None and not method_spec(method).judges_ideas:
            raise JudgeRunRefused("judge validation needs a reference corpus; import one first")
        return corpus.pk if corpus else None
    if value in (None, "", "none"):
        if not method_spec(method).judges_ideas:
            raise JudgeRunRefused("judge validation needs a reference corpus")
        return None
    corpus = None
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        corpus = usable.filter(pk=int(value)).first()
    elif isinstance(value, str):
        # A shared corpus imported later may carry the name of one of the owner's: the
        # owner's own is meant.
        named = usable.filter(name=value)
        corpus = named.filter(created_by__isnull=False).first() or named.first()
    if corpus is None:
        raise JudgeRunRefused(f"no reference corpus {value!r} that this study's owner may use")
    return corpus.pk


def judge_run_create(
    *,
    study: Study,
    method: str,
    config: JudgeConfig | None = None,
    params: dict[str, Any] | None = None,
    budget_calls: int | None = None,
    budget_cost: Decimal | float | str | None = None,
    actor: Any = None,
    panel: Sequence[JudgeConfig] = (),
) -> JudgeRun:
    """A queued run. `panel`: more judges of the study's team asked every prompt beside
    `config` (a panel run of a PANEL_METHODS method, under the run's one budget)."""
    panel = list(panel)
    for judge in (config, *panel):
        # First, so that no message below names another team's judge: it is named as a
        # missing one would be, nothing about it.
        if not judge_config_usable(judge, study):
            raise JudgeRunRefused("choose one of this study's judges")
    if panel:
        _check_panel(method, config, panel, params or {})
    plan = judge_run_plan(study=study, method=method, params=params, members=1 + len(panel))
    if method in LLM_METHODS:
        for judge in (config, *panel):
            _check_llm_config(judge, method)
    elif config is not None and not config.is_baseline:
        config = None  # baselines make no calls; a stray LLM config would mislead the reader
    with transaction.atomic():
        run = JudgeRun.objects.create(
            study=study,
            config=config,
            method=method,
            params=plan["params"],
            total_calls=plan["total"],
            budget_calls=budget_calls,
            budget_cost=Decimal(str(budget_cost)) if budget_cost is not None else None,
            created_by=actor if getattr(actor, "pk", None) else None,
            message="queued",
        )
        audit(
            study=study,
            actor=actor,
            verb="judge_run_created",
            run=run.pk,
            method=method,
            judge=config.name if config else None,
            provider=config.provider_name() or None if config else None,
            endpoint=config.resolved_base_url() if config and not config.is_baseline else None,
            model=config.resolved_model() if config and not config.is_baseline else None,
            key=config.key_source() if config and not config.is_baseline else None,
            calls=plan["total"],
            budget_calls=budget_calls,
            budget_cost=_text(run.budget_cost),
            panel=[judge.name for judge in panel] or None,
        )
        PanelMember.objects.bulk_create(
            [PanelMember(run=run, config=judge, seat=k) for k, judge in enumerate(panel, 1)]
        )
    return run


def _check_llm_config(config: JudgeConfig | None, method: str) -> None:
    """Refuse a judge that cannot make `method`'s calls, saying why."""
    if config is None:
        raise JudgeRunRefused(f"{method} needs a judge config")
    if config.is_baseline:
        raise JudgeRunRefused(f"{config.name} is a baseline judge; it cannot run {method}")
    if config.disabled_reason:
        raise JudgeRunRefused(f"judge {config.name!r} is disabled: {config.disabled_reason}")
    if not config.is_configured():
        raise JudgeRunRefused(
            f"judge {config.name!r} has no endpoint or model (LLM judges are off until "
            "an OpenAI-compatible endpoint is configured)"
        )


def _asks(config: JudgeConfig) -> str:
    """What a judge sends besides the prompt: endpoint, model and parameters."""
    return json.dumps(
        [config.resolved_base_url(), config.resolved_model(), config.parameters or {}],
        sort_keys=True,
    )


def _check_panel(
    method: str, config: JudgeConfig | None, panel: Sequence[JudgeConfig], params: dict[str, Any]
) -> None:
    """Refuse a panel the run cannot have: a method without panels, no first judge, a
    judge named twice, and the parameters a panel does not take."""
    if method not in PANEL_METHODS:
        raise JudgeRunRefused(
            f"{method} runs cannot have panel members; methods that can: "
            f"{', '.join(sorted(PANEL_METHODS))}"
        )
    if config is None:
        raise JudgeRunRefused("a panel needs its first judge (the run's judge) as well")
    seen = {config.pk}
    asks = {_asks(config): config}
    for judge in panel:
        if judge.pk in seen:
            raise JudgeRunRefused(f"judge {judge.name!r} is named twice in the panel")
        seen.add(judge.pk)
        # Two judges that send the same request share their answers (the call cache): the
        # panel would count one judge twice.
        twin = asks.setdefault(_asks(judge), judge)
        if twin.pk != judge.pk:
            raise JudgeRunRefused(
                f"judges {twin.name!r} and {judge.name!r} ask the same model at the same endpoint "
                "with the same parameters: they give the same answers, so the panel would "
                "count one judge twice"
            )
    for name, why in (
        ("batch", "a panel's calls go one by one"),
        ("repeat_share", "repetition stability is measured per judge, on runs of one judge"),
    ):
        if params.get(name):
            raise JudgeRunRefused(f"a panel run does not take {name}: {why}")


def judge_run_cancel(*, run: JudgeRun) -> JudgeRun:
    """Cancel a queued or running run now: a row update, so it works whether or not a
    worker still runs it. A live worker stops at its next unit, and the calls it has in
    flight finish and are kept."""
    if job_cancel(job=run, cancel_requested=True):
        audit(study=run.study, actor=None, verb="judge_run_cancelled", run=run.pk)
    run.refresh_from_db()
    return run


def judge_run_mark_if_lost(*, run: JudgeRun) -> bool:
    """Mark the run lost if its worker is gone (studies.jobs.job_mark_if_lost): running
    without a heartbeat for JOB_LOST_AFTER_SECONDS, or taken from the queue that long ago
    and never claimed. Pages call it before they show a run."""
    return job_mark_if_lost(job=run)


@dataclass(frozen=True)
class RunBudget:
    """A run's limits, named as on the run (None: no limit)."""

    budget_calls: int | None = None
    budget_cost: Decimal | None = None


def _budget_check(run: JudgeRun, budget: RunBudget) -> None:
    """Refuse a budget the run has spent already: resuming under it would stop again
    before the first call."""
    calls, cost = run_spend(run)
    problem = budget_problem(budget, calls=calls, cost=cost)
    if problem is not None:
        raise JudgeRunRefused(
            f"the run has made {counted(calls, 'paid call')} costing {cost:.4f}: {problem}. "
            "Raise the limit above that, or leave it empty for none."
        )


def judge_run_resume(
    *,
    run: JudgeRun,
    force: bool = False,
    budget: RunBudget | None = None,
    actor: Any = None,
) -> JudgeRun:
    """Queue a stopped, failed, lost or cancelled run again under the same row; finished
    units are not redone. With `budget` the run's limits are replaced first (a run
    stopped by its budget resumes only under one it has not spent yet). As after
    `judge_run_create`, the caller sends the run (`judging.tasks.judge_run_enqueue`).

    A run still marked running is taken over only once its heartbeat is stale (it is
    marked lost first), or with `force` when the caller knows its worker is gone.
    """
    run.refresh_from_db()
    judge_run_mark_if_lost(run=run)
    if not run.can_resume:
        raise JudgeRunRefused(f"run {run.pk} is {run.status}; nothing to resume")
    if run.status == Status.RUNNING and not force:
        beat = f"{run.heartbeat_at:%H:%M:%S}" if run.heartbeat_at else "none yet"
        raise JudgeRunRefused(
            f"run {run.pk} is running (last heartbeat {beat}); cancel it "
            "or wait until its worker is known to be gone"
        )
    if budget is not None:
        _budget_check(run, budget)
    with transaction.atomic():
        before = (run.budget_calls, run.budget_cost)
        if budget is not None and (budget.budget_calls, budget.budget_cost) != before:
            JudgeRun.objects.filter(pk=run.pk).update(
                budget_calls=budget.budget_calls, budget_cost=budget.budget_cost
            )
            run.budget_calls, run.budget_cost = budget.budget_calls, budget.budget_cost
            audit(
                study=run.study,
                actor=actor,
                verb="judge_run_budget_set",
                run=run.pk,
                calls=[before[0], budget.budget_calls],
                cost=[_text(before[1]), _text(budget.budget_cost)],
            )
        if not job_requeue(job=run, cancel_requested=False, message="queued to resume"):
            raise JudgeRunRefused(f"run {run.pk} changed meanwhile; reload the page")
    return run


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


# --- Units and drivers ---------------------------------------------------------------


def _claim(run: JudgeRun) -> bool:
    """Take the run for this process under a fresh lease; False if another live worker
    holds it or it is over (studies.jobs.lease_take)."""
    taken = lease_take(JudgeRun, run.pk, cancel_requested=False, message="starting")
    run.refresh_from_db()
    return taken


def _held(run: JudgeRun) -> Any:
    """The run's row while this process holds its lease (and nobody marked it lost)."""
    return JudgeRun.objects.filter(pk=run.pk, lease=run.lease, status__in=HELD)


def judge_run_execute(*, run: JudgeRun) -> JudgeRun:
    """Run (or resume) a judge run in this process until it is done or stopped.

    Returns the refreshed run. A run another live worker holds is left alone.
    """
    if not _claim(run):
        log.info("run %s not claimable (status %s)", run.pk, run.status)
        return run
    ideas = _ideas(run.study, run.params)
    try:
        _check_texts(run.study, run.method, ideas, run.params.get("text", "normalized"))
        judges = run.panel_configs()
        if run.method in LLM_METHODS and (
            run.config is None or not all(j.is_configured() for j in judges)
        ):
            raise JudgeNotConfigured("the run's judge has no endpoint or model")
        driver = make_driver(
            run.method,
            run=run,
            ideas=ideas,
            params=run.params,
            study=run.study,
            members=len(judges),
        )
        engine = (BatchEngine if run.params.get("batch") else Engine)(run, driver)
        started = time.perf_counter()
        with lease_heartbeat(run):
            engine.execute()
        wall = time.perf_counter() - started
        summary = driver.finish()
    except (JudgeRunRefused, JudgeNotConfigured) as exc:
        return _end(run, Status.FAILED, str(exc), error=str(exc))
    except BudgetExhausted as exc:
        return _end(run, Status.BUDGET, str(exc))
    except Exception as exc:
        log.exception("judge run %s failed", run.pk)
        _end(run, Status.FAILED, "failed; resume to continue", error=f"{type(exc).__name__}: {exc}")
        raise
    engine.flush(force=True)
    engine.batch.commit()  # never leave a transaction open behind us
    if engine.stop and engine.stop[0] == "stopped":
        # Marked lost, or taken over by another worker: the row is no longer ours.
        log.info("judge run %s stopped: %s", run.pk, engine.stop[1])
        run.refresh_from_db()
        return run
    missing = driver.total - driver.done
    summary.update(
        {
            "unparseable": driver.unparseable,
            "errors": engine.errors,
            "last_error": engine.last_error,
            "done": driver.done,
            "total": driver.total,
            **engine.extra_summary(),
            # Our own time per unit (the calling thread's time not spent waiting on HTTP).
            "engine": {
                "wall_s": round(wall, 3),
                "busy_s": round(wall - engine.idle, 3),
                "units": engine.units,
                "ms_per_unit": round(1000 * (wall - engine.idle) / engine.units, 3)
                if engine.units
                else None,
            },
        }
    )
    _held(run).update(summary=summary)
    run.summary = summary
    if engine.stop and engine.stop[0] == "cancelled":
        return _end(run, Status.CANCELLED, f"cancelled after {driver.done} of {driver.total}")
    if engine.stop and engine.stop[0] == "budget":
        return _end(
            run,
            Status.BUDGET,
            f"{engine.stop[1]}; {driver.done} of {driver.total} done. "
            "Raise the budget and resume to continue.",
        )
    if missing > 0:
        return _end(
            run,
            Status.FAILED,
            f"{missing} of {driver.total} units have no outcome after {engine.errors} failed "
            "calls; resume to retry them",
            error=engine.last_error,
        )
    return _end(run, Status.DONE, f"{driver.done} units judged, {driver.unparseable} unparseable")


def _end(run: JudgeRun, status: str, message: str, error: str = "") -> JudgeRun:
    """Record how the run ended, if this process still holds it."""
    _held(run).update(
        status=status,
        message=message[:500],
        error=error,
        finished_at=timezone.now(),
        cancel_requested=False,
    )
    run.refresh_from_db()
    return run


def judge_run_results(*, run: JudgeRun) -> dict[str, Any]:
    """Ratings per dimension: {dimension: [{idea, score, ci_low, ci_high}, …]} best first."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in IdeaRating.objects.filter(run=run).order_by("dimension", "-score", "idea_id"):
        out[r.dimension].append(
            {"idea": r.idea_id, "score": r.score, "ci_low": r.ci_low, "ci_high": r.ci_high}
        )
    return {
        "method": run.method,
        "baseline": run.method_is_baseline,
        "status": run.status,
        "summary": run.summary,
        "ratings": dict(out),
    }
