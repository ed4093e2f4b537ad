"""Judge runs: create, execute (resumably), cancel, resume.

Public API (keyword-only, DESIGN.md style 3):

- `judge_config_create(name=..., base_url=..., model=..., ...)` → JudgeConfig
- `judge_run_create(study=, method=, config=None, params=None, budget_calls=None,
  budget_cost=None, actor=None)` → JudgeRun (queued; `tasks.judge_run_enqueue` sends it)
- `judge_run_execute(run=)` → JudgeRun: does the work in the calling process
- `judge_run_cancel(run=)`, `judge_run_resume(run=, enqueue=True, force=False)`
- `judge_run_plan(study=, method=, params=)` → total units and the ideas a run would use
- `judge_run_results(run=)` → plain dict of ratings for views and the agreement report

How a run executes. A method is a *driver* that turns the study into *units* (one LLM
call each, or one rule-decided outcome for the baselines), each with a stable key, and
stores each unit's result in an outcome row (`Judgment`, `PairwiseOutcome`,
`Formalisation`). Before doing anything the driver reads the rows the run already has, so:

- a unit whose outcome row exists is never redone and never counted twice;
- a unit whose call was made and stored but whose outcome was not (a crash in between)
  is answered by the call cache without an HTTP request;
- every counter on the run (done, cost, calls, unparseable) is recomputed from the rows
  when execution starts, never carried over.

Units are sent through a thread pool of `config.concurrency` threads; the threads only
do HTTP (`client.send`) and the calling thread does every database write, which keeps
SQLite happy and the run's bookkeeping single-threaded. Between units the engine checks
the cancel flag and the budget; when either stops the run it lets the calls in flight
finish and records them, so nothing paid for is lost.

Failed calls (after the client's retries) are recorded and counted in `errors`; their
units stay undone, the run ends as "failed" with a message saying how many units are
missing, and `judge_run_resume` retries exactly those.

Writes are grouped into one transaction per COMMIT_EVERY (0.25 s): a commit on an
fsynced SQLite file costs more than a unit's bookkeeping. A crash Python sees (an
exception, a soft time limit) still records the calls in flight and commits; a hard kill
loses at most the last 0.25 s of rows, and resuming then re-asks (and re-pays) only those
calls. The pool is refilled before a finished call is booked, so the endpoint stays busy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
import time
from collections import defaultdict, deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any, cast

import numpy as np
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from studies.models import Idea, Study

from .client import (
    Attempt,
    BudgetExhausted,
    JudgeNotConfigured,
    Prepared,
    budget_problem,
    lookup,
    prepare,
    record,
    run_spend,
    send,
)
from .methods import prompts
from .methods.bradley_terry import (
    bootstrap_intervals,
    comparisons_from_calls,
    fit_bradley_terry,
)
from .methods.elo import EPSILON, GAMMA, K_MAX, MAX_STEPS, D, run_elo_dimensions
from .methods.novelty import (
    ALPHA,
    BETA,
    BM25,
    MU,
    K,
    novelty_score,
    similarity_to_novelty,
    tokenize,
    top_k,
    weighted_similarity,
)
from .methods.pairwise import PairCall, schedule_round_robin, summarise_pairwise
from .methods.parsing import (
    FORMALISATION_KEYS,
    AbsoluteScore,
    FormScores,
    PairwiseVerdict,
    Unparseable,
    parse_absolute_score,
    parse_dimension_verdicts,
    parse_form_scores,
    parse_formalisation,
    parse_pairwise,
)
from .methods.swiss import (
    DEFAULT_ROUNDS,
    SwissRound,
    SwissState,
    apply_round,
    calls_for_round,
    pair_round,
    resolve_game,
    total_calls,
)
from .methods.validation import Trial, pairwise_accuracy
from .models import (
    Formalisation,
    IdeaRating,
    JudgeConfig,
    JudgeRun,
    Judgment,
    LLMCall,
    PairwiseOutcome,
    ReferenceComparison,
    ReferenceCorpus,
    ReferencePaper,
)

log = logging.getLogger(__name__)

Method = JudgeRun.Method
Status = JudgeRun.Status
Verdict = PairwiseOutcome.Verdict

STALE_AFTER = timedelta(seconds=90)
"""A running run whose heartbeat is older than this is taken to have lost its worker."""
PROGRESS_EVERY = 0.5
"""Seconds between progress writes to the run row (and heartbeats)."""
COMMIT_EVERY = 0.25
"""Seconds of work grouped into one transaction. A commit costs ~20 ms on an SQLite file
that is fsynced, more than a whole call's bookkeeping; a hard kill loses at most this
much work (calls included, which resuming then makes again)."""

LLM_METHODS = frozenset(
    {
        Method.DIRECT,
        Method.ABSOLUTE,
        Method.PAIRWISE,
        Method.SWISS,
        Method.LIGBENCH,
        Method.VALIDATION,
    }
)
CORPUS_METHODS = frozenset({Method.LIGBENCH, Method.VALIDATION})
AUTO = "auto"

DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    Method.DIRECT: {"samples": 1},
    Method.ABSOLUTE: {
        "samples": 1,
        "metric": "overall",
        "criterion": "overall quality",
        "description": "",
        "low": 1,
        "high": 5,
    },
    Method.PAIRWISE: {
        "group_by": "topic",
        "sample_pairs": None,
        "both_orders": True,
        "seed": 0,
        "criterion": "overall quality",
        "description": "",
        "bt_bootstrap": 200,
    },
    Method.SWISS: {
        "group_by": "topic",
        "rounds": DEFAULT_ROUNDS,
        "both_orders": False,
        "seed": 0,
        "bt_bootstrap": 200,
    },
    Method.LIGBENCH: {
        "references": 8,
        "group_by": "all",
        "dimensions": list(prompts.LIGBENCH_DIMENSIONS),
        "seed": 0,
        # "auto": the newest reference corpus the study's owner may use, else the study's
        # own ideas (the labelled fallback); None forces the fallback; or a corpus id.
        "corpus": AUTO,
        # "auto": with a corpus, the mean debiased score of the `calibration` most related
        # references (no call); without one, 2.5. Or a number for every dimension.
        "initial": AUTO,
        "calibration": 3,
        "retrieval_weight": 0.5,
        "novelty": True,
        "alpha": ALPHA,
        "k": K,
        "mu": MU,
        "beta": BETA,
        "passes": 3,
        "d": D,
        "k_max": K_MAX,
        "gamma": GAMMA,
        "epsilon": EPSILON,
        "max_steps": MAX_STEPS,
    },
    Method.VALIDATION: {
        "corpus": AUTO,
        "pairs": 50,
        "both_orders": False,
        "dimensions": list(prompts.LIGBENCH_DIMENSIONS),
        "seed": 0,
        "retrieval_weight": 0.5,
    },
    Method.BASELINE_RANDOM: {
        "group_by": "topic",
        "sample_pairs": None,
        "seed": 0,
        "bt_bootstrap": 200,
    },
    Method.BASELINE_LONGER: {
        "group_by": "topic",
        "sample_pairs": None,
        "seed": 0,
        "bt_bootstrap": 200,
    },
}
COMMON_PARAMS = {"text": "normalized", "idea_ids": None, "topic_ids": None}


class JudgeRunRefused(ValueError):
    """The run cannot be created or executed as asked; the message says why."""


# --- Creating runs -------------------------------------------------------------------


def judge_config_create(*, name: str, actor: Any = None, **fields: Any) -> JudgeConfig:
    """A judge config; `api_key_env` names an environment variable, never a key."""
    if "api_key" in fields:
        raise ValueError("store the name of the environment variable (api_key_env), not a key")
    return JudgeConfig.objects.create(
        name=name, created_by=actor if getattr(actor, "pk", None) else None, **fields
    )


def judge_configs_for(user: Any) -> Any:
    """Judges a researcher may run: their own and shared ones (created by nobody, e.g. from
    the command line). Rows hold no keys, but endpoints can be private."""
    uid = getattr(user, "pk", None) or 0
    return JudgeConfig.objects.filter(Q(created_by_id=uid) | Q(created_by__isnull=True))


def _params(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    merged = {**COMMON_PARAMS, **DEFAULT_PARAMS[method]}
    unknown = sorted(set(params or {}) - set(merged))
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


def idea_text(idea: Idea, source: str = "normalized") -> str:
    """What a judge sees: the signed-off text reviewers see, or the raw text if asked."""
    return idea.reviewable_text() if source == "normalized" else idea.raw_text


def _ideas(study: Study, params: dict[str, Any]) -> list[Idea]:
    # Ideas left out by topic matching are not judged either, unless named explicitly.
    qs = study.ideas.select_related("topic").order_by("id")
    if not params.get("idea_ids"):
        qs = qs.filter(exclusion__isnull=True)
    if params.get("idea_ids"):
        qs = qs.filter(id__in=params["idea_ids"])
    if params.get("topic_ids"):
        qs = qs.filter(topic_id__in=params["topic_ids"])
    return list(qs)


def _check_texts(method: str, ideas: Sequence[Idea], source: str) -> None:
    if method in (Method.BASELINE_RANDOM, Method.VALIDATION):
        return
    missing = [i for i in ideas if not idea_text(i, source).strip()]
    if missing:
        what = "approved normalized text" if source == "normalized" else "raw text"
        names = ", ".join(str(i.pk) for i in missing[:5]) + ("…" if len(missing) > 5 else "")
        rule = "longer-text-wins" if method == Method.BASELINE_LONGER else method
        raise JudgeRunRefused(
            f"{rule} cannot run: {len(missing)} of {len(ideas)} ideas have no {what} "
            f"(ideas {names}). Approve their normalization or leave them out (idea_ids)."
        )


def judge_run_plan(
    *, study: Study, method: str, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What a run would do: its parameters, ideas and number of units (calls)."""
    if method not in Method.values:
        raise JudgeRunRefused(f"unknown method {method!r}")
    merged = _params(method, params)
    if method in CORPUS_METHODS:
        merged["corpus"] = _resolve_corpus(study, method, merged["corpus"])
    ideas = [] if method == Method.VALIDATION else _ideas(study, merged)
    needed: int = {"direct": 1, "absolute": 1, "validation": 0}.get(method, 2)
    if method == Method.LIGBENCH and merged["corpus"] is not None:
        needed = 1
    if len(ideas) < needed:
        raise JudgeRunRefused(f"{method} needs more ideas than the {len(ideas)} selected")
    _check_texts(method, ideas, merged["text"])
    driver = _DRIVERS[method](run=None, ideas=ideas, params=merged, study=study)
    return {"params": merged, "ideas": [i.pk for i in ideas], "total": driver.total}


def _resolve_corpus(study: Study, method: str, value: Any) -> int | None:
    """The corpus id a run will use (stored in its params, so a resume uses the same one)."""
    from .corpus import reference_corpora_for

    usable = reference_corpora_for(study.owner)
    if value == AUTO:
        corpus = usable.first()
        if corpus is None and method == Method.VALIDATION:
            raise JudgeRunRefused("judge validation needs a reference corpus; import one first")
        return corpus.pk if corpus else None
    if value in (None, "", "none"):
        if method == Method.VALIDATION:
            raise JudgeRunRefused("judge validation needs a reference corpus")
        return None
    corpus = None
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        corpus = usable.filter(pk=int(value)).first()
    elif isinstance(value, str):
        corpus = usable.filter(name=value).first()
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
) -> JudgeRun:
    plan = judge_run_plan(study=study, method=method, params=params)
    if method in LLM_METHODS:
        if config is None:
            raise JudgeRunRefused(f"{method} needs a judge config")
        if config.is_baseline:
            raise JudgeRunRefused(f"{config.name} is a baseline judge; it cannot run {method}")
        if not config.is_configured():
            raise JudgeRunRefused(
                f"judge {config.name!r} has no endpoint or model (LLM judges are off until "
                "an OpenAI-compatible endpoint is configured)"
            )
    elif config is not None and not config.is_baseline:
        config = None  # baselines make no calls; a stray LLM config would mislead the reader
    return JudgeRun.objects.create(
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


def judge_run_cancel(*, run: JudgeRun) -> JudgeRun:
    """A queued run is cancelled now; a running one stops after the calls in flight."""
    now = timezone.now()
    if JudgeRun.objects.filter(pk=run.pk, status=Status.QUEUED).update(
        status=Status.CANCELLED, cancel_requested=True, finished_at=now, message="cancelled"
    ):
        pass
    else:
        JudgeRun.objects.filter(pk=run.pk, status=Status.RUNNING).update(cancel_requested=True)
    run.refresh_from_db()
    return run


def judge_run_resume(*, run: JudgeRun, enqueue: bool = True, force: bool = False) -> JudgeRun:
    """Queue a stopped, failed or orphaned run again; finished units are not redone.

    A run still marked running is taken over only once its heartbeat is older than
    STALE_AFTER (its worker is gone), or with `force` when the caller knows it is.
    """
    run.refresh_from_db()
    if not run.can_resume:
        raise JudgeRunRefused(f"run {run.pk} is {run.status}; nothing to resume")
    if (
        run.status == Status.RUNNING
        and not force
        and run.heartbeat_at is not None
        and run.heartbeat_at > timezone.now() - STALE_AFTER
    ):
        raise JudgeRunRefused(
            f"run {run.pk} is running (last heartbeat {run.heartbeat_at:%H:%M:%S}); cancel it "
            "or wait until its worker is known to be gone"
        )
    JudgeRun.objects.filter(pk=run.pk).update(
        status=Status.QUEUED,
        cancel_requested=False,
        heartbeat_at=None,
        finished_at=None,
        error="",
        message="queued to resume",
    )
    run.refresh_from_db()
    if enqueue:
        from .tasks import judge_run_enqueue

        judge_run_enqueue(run=run)
    return run


# --- Units and drivers ---------------------------------------------------------------


@dataclass
class Unit:
    """One thing to decide: an LLM call (messages set) or a rule-decided outcome (None)."""

    key: tuple[Any, ...]
    messages: list[dict[str, str]] | None
    prompt_version: str = ""
    salt: str = ""
    seed_offset: int = 0


class _Driver:
    """A method: which units to run, how to store a unit's answer, what to rate at the end."""

    def __init__(
        self, *, run: JudgeRun | None, ideas: Sequence[Idea], params: dict[str, Any], study: Study
    ):
        # A driver built only to plan (run None) never writes, so rows may assume a run.
        self.run = cast(JudgeRun, run)
        self.params, self.study = params, study
        self.ideas = list(ideas)
        self.by_id = {i.pk: i for i in self.ideas}
        self.text = {i.pk: idea_text(i, params["text"]) for i in self.ideas}
        self.total = 0
        self.done = 0
        self.unparseable = 0

    def groups(self) -> dict[Hashable, list[int]]:
        out: dict[Hashable, list[int]] = defaultdict(list)
        for i in self.ideas:
            out[i.topic_id if self.params.get("group_by") == "topic" else "all"].append(i.pk)
        return dict(out)

    def load(self) -> list[Unit]:
        """Read existing rows, set done/unparseable/total, return the units still to do."""
        raise NotImplementedError

    def store(self, unit: Unit, call: LLMCall | None) -> bool:
        """Write the unit's outcome rows; True when the answer was unparseable."""
        raise NotImplementedError

    def after(self, unit: Unit) -> list[Unit]:
        """Units that became possible once `unit` was stored."""
        return []

    def finish(self) -> dict[str, Any]:
        """Ratings from all outcomes; returns the run summary."""
        return {}


def _as_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _elo_rating(run: JudgeRun, idea_id: int, dim: str, chain: Any, **final: Any) -> IdeaRating:
    """An Elo chain as a rating row: every step in the history, then how it ended."""
    return IdeaRating(
        run=run,
        idea_id=idea_id,
        dimension=f"elo_{dim}",
        score=chain.score,
        history=[
            {
                "t": s.t,
                "reference": s.reference,
                "reference_score": s.reference_score,
                "outcome": s.outcome,
                "expected": s.expected,
                "k": s.k,
                "score": s.score_after,
            }
            for s in chain.steps
        ]
        + [{"stopped": chain.stopped, "skipped": chain.skipped, **final}],
    )


def _store_reference_verdicts(
    run: JudgeRun,
    call: LLMCall,
    dimensions: Iterable[str],
    target_first: bool,
    **ids: Any,
) -> bool:
    """Store one per-dimension comparison answer (against a reference paper); True when
    the answer was unparseable. `ids` names the two sides (and the retrieval rank)."""
    verdicts = parse_dimension_verdicts(call.response_text, list(dimensions))
    _mark_parsed(call, verdicts)
    ReferenceComparison.objects.bulk_create(
        [
            ReferenceComparison(
                run=run,
                target_first=target_first,
                dimension=dim,
                verdict=_stored_verdict(
                    None if isinstance(verdicts, Unparseable) else verdicts.winners[dim],
                    target_first,
                ),
                call=call,
                parse_error=verdicts.reason if isinstance(verdicts, Unparseable) else "",
                **ids,
            )
            for dim in dimensions
        ]
    )
    return isinstance(verdicts, Unparseable)


def _mark_parsed(call: LLMCall | None, parsed: Any) -> None:
    if call is None or call.parsed is not None or call.parse_error:
        return
    if isinstance(parsed, Unparseable):
        call.parse_error = parsed.reason
        LLMCall.objects.filter(pk=call.pk).update(parse_error=parsed.reason)
    else:
        call.parsed = _as_json(parsed)
        LLMCall.objects.filter(pk=call.pk).update(parsed=call.parsed)


class _ScoreDriver(_Driver):
    """Direct scoring on the study's form, or one absolute score (seed 002's 1–5 mode)."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.samples = int(self.params["samples"])
        self.absolute = "metric" in self.params
        if self.absolute:
            p = self.params
            self.ranges = {p["metric"]: (int(p["low"]), int(p["high"]))}
        else:
            form = self.study.form_definition()
            self.specs = [
                prompts.MetricSpec(
                    key=m.key,
                    low=m.minimum,
                    high=m.maximum,
                    label=m.label,
                    description=m.question,
                    anchors=m.anchors,
                )
                for m in form.metrics
            ]
            self.ranges = prompts.form_ranges(self.specs)
        self.total = len(self.ideas) * self.samples

    def messages(self, idea_id: int) -> tuple[list[dict[str, str]], str]:
        text = self.text[idea_id]
        if self.absolute:
            p = self.params
            msgs = prompts.absolute_messages(
                text, p["criterion"], p["description"], int(p["low"]), int(p["high"])
            )
            return msgs, prompts.ABSOLUTE.id
        return prompts.direct_scoring_messages(text, self.specs), prompts.DIRECT_SCORING.id

    def load(self) -> list[Unit]:
        rows = Judgment.objects.filter(run=self.run).values_list("idea_id", "sample", "score")
        done: set[tuple[int, int]] = set()
        bad: set[tuple[int, int]] = set()
        for idea_id, sample, score in rows:
            done.add((idea_id, sample))
            if score is None:
                bad.add((idea_id, sample))
        self.done, self.unparseable = len(done), len(bad)
        units = []
        for idea in self.ideas:
            msgs, version = self.messages(idea.pk)
            for s in range(self.samples):
                if (idea.pk, s) not in done:
                    units.append(
                        Unit(
                            ("score", idea.pk, s),
                            msgs,
                            version,
                            salt=f"sample={s}" if s else "",
                            seed_offset=s,
                        )
                    )
        return units

    def store(self, unit: Unit, call: LLMCall | None) -> bool:
        _, idea_id, sample = unit.key
        raw = call.response_text if call else ""
        scores: dict[str, tuple[float | None, str, str]]
        parsed: AbsoluteScore | FormScores | Unparseable
        if self.absolute:
            (metric,) = self.ranges
            low, high = self.ranges[metric]
            parsed = parse_absolute_score(raw, low, high)
            if isinstance(parsed, AbsoluteScore):
                scores = {metric: (float(parsed.score), parsed.rationale, "")}
        else:
            parsed = parse_form_scores(raw, self.ranges)
            if isinstance(parsed, FormScores):
                scores = {m: (float(v.score), v.rationale, "") for m, v in parsed.scores.items()}
        if isinstance(parsed, Unparseable):
            scores = {m: (None, "", parsed.reason) for m in self.ranges}
        _mark_parsed(call, parsed)
        Judgment.objects.bulk_create(
            [
                Judgment(
                    run=self.run,
                    idea_id=idea_id,
                    metric=m,
                    score=score,
                    rationale=rationale,
                    parse_error=err,
                    call=call,
                    sample=sample,
                )
                for m, (score, rationale, err) in scores.items()
            ]
        )
        return isinstance(parsed, Unparseable)

    def finish(self) -> dict[str, Any]:
        per: dict[tuple[int, str], list[float | None]] = defaultdict(list)
        for idea_id, metric, score in Judgment.objects.filter(run=self.run).values_list(
            "idea_id", "metric", "score"
        ):
            per[(idea_id, metric)].append(score)
        IdeaRating.objects.filter(run=self.run).delete()
        ratings = []
        for (idea_id, metric), values in per.items():
            parsed = [v for v in values if v is not None]
            ratings.append(
                IdeaRating(
                    run=self.run,
                    idea_id=idea_id,
                    dimension=metric,
                    score=sum(parsed) / len(parsed) if parsed else None,
                    history=[{"samples": values, "parsed": len(parsed)}],
                )
            )
        IdeaRating.objects.bulk_create(ratings)
        return {"metrics": list(self.ranges), "samples": self.samples}


def _pair_call(o: PairwiseOutcome) -> PairCall:
    return PairCall(o.first_shown_id, o.second_shown_id, o.shown_winner())  # type: ignore[arg-type]


def _stored_verdict(shown: str | None, first_is_a: bool) -> str:
    """Turn a verdict as shown ("A" = shown first) into one about idea_a/idea_b."""
    if shown is None:
        return Verdict.UNPARSEABLE
    if shown == "tie" or first_is_a:
        return shown
    return {"A": "B", "B": "A"}[shown]


class _PairDriver(_Driver):
    """Both-order round robin within each group; LLM or a no-LLM baseline rule."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        p = self.params
        rules: dict[str, str] = {
            Method.BASELINE_RANDOM: "random",
            Method.BASELINE_LONGER: "longer",
        }
        self.rule = rules.get(self._method, "")
        self.schedule = schedule_round_robin(
            self.groups(),
            sample=p.get("sample_pairs"),
            seed=int(p.get("seed", 0)),
            both_orders=bool(p.get("both_orders", True)),
        )
        self.total = len(self.schedule)

    _method: str = Method.PAIRWISE

    def load(self) -> list[Unit]:
        existing = {
            (a, b, f): v
            for a, b, f, v in PairwiseOutcome.objects.filter(run=self.run).values_list(
                "idea_a_id", "idea_b_id", "first_shown_id", "verdict"
            )
        }
        self.done = len(existing)
        self.unparseable = sum(v == Verdict.UNPARSEABLE for v in existing.values())
        units = []
        for sc in self.schedule:
            first, second = cast(int, sc.first), cast(int, sc.second)
            a, b = sorted((first, second))
            if (a, b, first) in existing:
                continue
            if self.rule:
                units.append(Unit(("pair", a, b, first), None))
            else:
                msgs = prompts.pairwise_messages(
                    self.text[first],
                    self.text[second],
                    self.params["criterion"],
                    self.params["description"],
                )
                units.append(Unit(("pair", a, b, first), msgs, prompts.PAIRWISE.id))
        return units

    def _rule_verdict(self, first: int, second: int) -> str:
        if self.rule == "longer":
            la, lb = len(self.text[first]), len(self.text[second])
            return "A" if la > lb else "B" if lb > la else "tie"
        rng = random.Random(f"baseline:{self.params.get('seed', 0)}:{first}:{second}")
        return "A" if rng.random() < 0.5 else "B"

    def store(self, unit: Unit, call: LLMCall | None) -> bool:
        _, a, b, first = unit.key
        second = b if first == a else a
        error = ""
        if call is None:
            shown: str | None = self._rule_verdict(first, second)
        else:
            parsed = parse_pairwise(call.response_text)
            _mark_parsed(call, parsed)
            shown = parsed.winner if isinstance(parsed, PairwiseVerdict) else None
            error = parsed.reason if isinstance(parsed, Unparseable) else ""
        PairwiseOutcome.objects.create(
            run=self.run,
            idea_a_id=a,
            idea_b_id=b,
            first_shown_id=first,
            verdict=_stored_verdict(shown, first == a),
            call=call,
            parse_error=error,
        )
        return shown is None

    def finish(self) -> dict[str, Any]:
        outcomes = list(PairwiseOutcome.objects.filter(run=self.run))
        calls = [_pair_call(o) for o in outcomes]
        summary = summarise_pairwise(calls, [i.pk for i in self.ideas])
        IdeaRating.objects.filter(run=self.run).delete()
        ratings = [
            IdeaRating(
                run=self.run,
                idea_id=cast(int, i),
                dimension="pairwise",
                score=summary.scores[i],
                history=[
                    {
                        "sum": summary.sums[i],
                        "parsed_calls": summary.parsed_calls[i],
                        "unparseable": summary.unparseable_by_idea[i],
                        "wins": summary.wins[i],
                    }
                ],
            )
            for i in summary.scores
        ]
        ratings += _bt_ratings(self.run, calls, self.groups(), self.params)
        IdeaRating.objects.bulk_create(ratings)
        return {
            "baseline": bool(self.rule),
            "rule": self.rule or None,
            "n_calls": summary.n_calls,
            "n_unparseable": summary.n_unparseable,
            "position_consistency": summary.position_consistency,
            "n_consistency_pairs": summary.n_consistency_pairs,
            "first_position_win_rate": summary.first_position_win_rate,
            "tie_rate": summary.tie_rate,
        }


class _RandomDriver(_PairDriver):
    _method = Method.BASELINE_RANDOM


class _LongerDriver(_PairDriver):
    _method = Method.BASELINE_LONGER


def _bt_ratings(
    run: JudgeRun,
    calls: Iterable[PairCall],
    groups: dict[Hashable, list[int]],
    params: dict[str, Any],
) -> list[IdeaRating]:
    """Bradley–Terry over every parsed call (ties as half), centred θ with bootstrap CIs.

    Fitted per group: ideas in different groups never meet, and with the ridge prior the
    penalised likelihood separates over disconnected groups, so this is the same fit as
    one over everything, at a fraction of the cost (the bootstrap refits it many times).
    Only contrasts within a group mean anything.
    """
    n_boot = int(params.get("bt_bootstrap", 200))
    by_group: dict[Hashable, list[PairCall]] = defaultdict(list)
    group_of: dict[Hashable, Hashable] = {i: g for g, members in groups.items() for i in members}
    for c in calls:
        by_group[group_of[c.first]].append(c)
    out = []
    for g, members in groups.items():
        comparisons = comparisons_from_calls(by_group.get(g, []))
        if not comparisons:
            continue
        fit = fit_bradley_terry(comparisons, members)
        intervals = bootstrap_intervals(comparisons, fit.ideas, n_boot=n_boot, seed=0)
        centre = float(fit.theta.mean())
        se = fit.se
        for k, (idea, theta) in enumerate(fit.strengths.items()):
            low, high = intervals.get(idea, (None, None))
            idea = cast(int, idea)
            out.append(
                IdeaRating(
                    run=run,
                    idea_id=idea,
                    dimension="bradley_terry",
                    score=theta - centre,
                    ci_low=low,
                    ci_high=high,
                    history=[
                        {
                            "games": float(fit.games[k]),
                            "ridge": fit.ridge,
                            "se": se[idea],
                            "bootstrap": n_boot,
                        }
                    ],
                )
            )
    return out


class _SwissDriver(_Driver):
    """Swiss rounds per group; each round's pairing is rebuilt from the stored outcomes."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        p = self.params
        self.both = bool(p["both_orders"])
        self.seed = int(p["seed"])
        self.rounds: dict[Hashable, int] = {}
        for g, members in self.groups().items():
            if len(members) < 2:
                continue
            n = int(p["rounds"])
            # An odd field allows at most K rounds before someone needs a second bye.
            self.rounds[g] = min(n, len(members)) if len(members) % 2 else n
        self.members = {g: m for g, m in self.groups().items() if g in self.rounds}
        self.total = sum(
            total_calls(len(self.members[g]), r, self.both) for g, r in self.rounds.items()
        )
        self.calls: dict[tuple[int, Hashable, Hashable], PairCall] = {}
        self.state: dict[Hashable, SwissState] = {}
        self.current: dict[Hashable, SwissRound | None] = {}
        self.history: dict[Hashable, list[dict[str, Any]]] = defaultdict(list)
        self.group_of: dict[int, Hashable] = {}

    def load(self) -> list[Unit]:
        self.calls = {}
        for o in PairwiseOutcome.objects.filter(run=self.run):
            self.calls[(o.round, o.first_shown_id, o.second_shown_id)] = _pair_call(o)
        self.done = len(self.calls)
        self.unparseable = sum(c.winner is None for c in self.calls.values())
        units: list[Unit] = []
        for g, members in self.members.items():
            self.state[g] = SwissState.start(members)
            for i in members:
                self.group_of[i] = g
            units += self._advance(g)
        return units

    def _advance(self, g: Hashable) -> list[Unit]:
        """Play every round whose calls are all stored; return the next round's missing calls."""
        while True:
            state = self.state[g]
            if state.rounds_played >= self.rounds[g]:
                self.current[g] = None
                return []
            rnd = pair_round(state, seed=self.seed)
            self.current[g] = rnd
            wanted = calls_for_round(rnd, self.both)
            missing = [(a, b) for a, b in wanted if (rnd.number, a, b) not in self.calls]
            if missing:
                return [self._unit(rnd, cast(int, a), cast(int, b)) for a, b in missing]
            per = 2 if self.both else 1
            games = [
                resolve_game(
                    pair,
                    [self.calls[(rnd.number, a, b)] for a, b in wanted[k * per : (k + 1) * per]],
                )
                for k, pair in enumerate(rnd.pairs)
            ]
            self.state[g] = apply_round(state, rnd, games)
            self.history[g].append(
                {
                    "round": rnd.number,
                    "bye": rnd.bye,
                    "rematches": rnd.rematches,
                    "points": {str(k): v for k, v in self.state[g].points.items()},
                }
            )

    def _unit(self, rnd: SwissRound, first: int, second: int) -> Unit:
        pair = next(p for p in rnd.pairs if set(p) == {first, second})
        msgs = prompts.swiss_messages(self.text[first], self.text[second])
        return Unit(("swiss", rnd.number, pair[0], pair[1], first), msgs, prompts.SWISS.id)

    def store(self, unit: Unit, call: LLMCall | None) -> bool:
        _, number, a, b, first = unit.key
        second = b if first == a else a
        assert call is not None
        parsed = parse_pairwise(call.response_text)
        _mark_parsed(call, parsed)
        shown = parsed.winner if isinstance(parsed, PairwiseVerdict) else None
        PairwiseOutcome.objects.create(
            run=self.run,
            idea_a_id=a,
            idea_b_id=b,
            first_shown_id=first,
            verdict=_stored_verdict(shown, first == a),
            round=number,
            call=call,
            parse_error=parsed.reason if isinstance(parsed, Unparseable) else "",
        )
        self.calls[(number, first, second)] = PairCall(first, second, shown)  # type: ignore[arg-type]
        return shown is None

    def after(self, unit: Unit) -> list[Unit]:
        _, number, a, _b, _first = unit.key
        g = self.group_of[a]
        rnd = self.current.get(g)
        if rnd is None or rnd.number != number:
            return []
        if all((number, x, y) in self.calls for x, y in calls_for_round(rnd, self.both)):
            return self._advance(g)
        return []

    def finish(self) -> dict[str, Any]:
        IdeaRating.objects.filter(run=self.run).delete()
        ratings = []
        void = rematches = 0
        for g, state in self.state.items():
            void += state.void_games
            rematches += sum(h["rematches"] for h in self.history[g])
            complete = state.rounds_played >= self.rounds[g]
            for idea in self.members[g]:
                ratings.append(
                    IdeaRating(
                        run=self.run,
                        idea_id=idea,
                        dimension="swiss",
                        score=state.points[idea] if complete else None,
                        history=[
                            {
                                "round": h["round"],
                                "points": h["points"][str(idea)],
                                "bye": h["bye"] == idea,
                            }
                            for h in self.history[g]
                        ],
                    )
                )
        ratings += _bt_ratings(self.run, self.calls.values(), self.members, self.params)
        IdeaRating.objects.bulk_create(ratings)
        return {
            "rounds": dict((str(g), r) for g, r in self.rounds.items()),
            "both_orders": self.both,
            "void_games": void,
            "rematches": rematches,
            "groups_skipped": len(self.groups()) - len(self.members),
        }


class _LigBenchDriver(_Driver):
    """Formalise every idea, then compare each with its most similar peers, then Elo.

    Without a reference corpus the references are the study's other ideas, retrieved by
    BM25 over their formalisations; their scores are unknown, so Elo is run in passes:
    pass 1 holds every reference at the initial score, each later pass uses the
    references' scores from the pass before. The calls do not depend on the scores, so
    they are made once and the passes are pure arithmetic over stored outcomes.
    """

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        p = self.params
        self.dimensions = {d: prompts.LIGBENCH_DIMENSIONS[d] for d in p["dimensions"]}
        self.k = max(1, int(p["references"]))
        members = self.groups()
        self.total = len(self.ideas) + sum(
            len(m) * min(self.k, len(m) - 1) for m in members.values()
        )
        self.forms: dict[int, dict[str, str] | None] = {}
        self.refs: dict[int, list[int]] = {}
        self.stage2_started = False

    def load(self) -> list[Unit]:
        self.forms = {f.idea_id: f.parts for f in Formalisation.objects.filter(run=self.run)}
        pairs = set(
            PairwiseOutcome.objects.filter(run=self.run).values_list("idea_a_id", "idea_b_id")
        )
        bad_pairs = set(
            PairwiseOutcome.objects.filter(run=self.run, verdict=Verdict.UNPARSEABLE)
            .values_list("idea_a_id", "idea_b_id")
            .distinct()
        )
        self.done = len(self.forms) + len(pairs)
        self.unparseable = sum(v is None for v in self.forms.values()) + len(bad_pairs)
        units = [
            Unit(
                ("form", i.pk),
                prompts.formalisation_messages(self.text[i.pk]),
                prompts.LIGBENCH_FORMALISATION.id,
            )
            for i in self.ideas
            if i.pk not in self.forms
        ]
        if units:
            return units
        return self._comparisons(done=pairs)

    def _comparisons(self, done: set[tuple[int, int]]) -> list[Unit]:
        self.stage2_started = True
        self._retrieve()
        units = []
        for target, refs in self.refs.items():
            for ref in refs:
                if (target, ref) in done:
                    continue
                first_is_target = (
                    random.Random(f"ligbench:{self.params['seed']}:{target}:{ref}").random() < 0.5
                )
                fa, fb = (target, ref) if first_is_target else (ref, target)
                msgs = prompts.ligbench_comparison_messages(
                    cast(dict, self.forms[fa]),
                    cast(dict, self.forms[fb]),
                    self.dimensions,  # type: ignore[arg-type]
                )
                units.append(Unit(("cmp", target, ref, fa), msgs, prompts.LIGBENCH_COMPARISON.id))
        return units

    def _retrieve(self) -> None:
        ok = {i: f for i, f in self.forms.items() if f}
        self.refs = {}
        groups = self.groups()
        planned = len(self.ideas)
        for members in groups.values():
            usable = [i for i in members if i in ok]
            docs = [tokenize(" ".join(ok[i][k] for k in FORMALISATION_KEYS)) for i in usable]
            bm25 = BM25(docs)
            for n, target in enumerate(usable):
                scores = bm25.scores(docs[n])
                scores[n] = float("-inf")  # never its own reference
                others = [usable[j] for j in top_k(scores, min(self.k, len(usable) - 1))]
                self.refs[target] = others
                planned += len(others)
        self.total = planned

    def store(self, unit: Unit, call: LLMCall | None) -> bool:
        assert call is not None
        if unit.key[0] == "form":
            idea_id = unit.key[1]
            parsed = parse_formalisation(call.response_text)
            _mark_parsed(call, parsed)
            parts = parsed.as_dict() if not isinstance(parsed, Unparseable) else None
            Formalisation.objects.create(
                run=self.run,
                idea_id=idea_id,
                parts=parts,
                call=call,
                parse_error=parsed.reason if isinstance(parsed, Unparseable) else "",
            )
            self.forms[idea_id] = parts
            return parts is None
        _, target, ref, first = unit.key
        verdicts = parse_dimension_verdicts(call.response_text, list(self.dimensions))
        _mark_parsed(call, verdicts)
        PairwiseOutcome.objects.bulk_create(
            [
                PairwiseOutcome(
                    run=self.run,
                    idea_a_id=target,
                    idea_b_id=ref,
                    first_shown_id=first,
                    dimension=dim,
                    verdict=_stored_verdict(
                        None if isinstance(verdicts, Unparseable) else verdicts.winners[dim],
                        first == target,
                    ),
                    call=call,
                    parse_error=verdicts.reason if isinstance(verdicts, Unparseable) else "",
                )
                for dim in self.dimensions
            ]
        )
        return isinstance(verdicts, Unparseable)

    def after(self, unit: Unit) -> list[Unit]:
        if (
            unit.key[0] == "form"
            and not self.stage2_started
            and all(i.pk in self.forms for i in self.ideas)
        ):
            return self._comparisons(done=set())
        return []

    def finish(self) -> dict[str, Any]:
        p = self.params
        IdeaRating.objects.filter(run=self.run).delete()
        if not self.stage2_started:
            return {"formalised": sum(1 for f in self.forms.values() if f), "elo": "not started"}
        outcome: dict[tuple[int, int], dict[str, float | None]] = defaultdict(dict)
        value = {"A": 1.0, "B": 0.0, "tie": 0.5}
        for o in PairwiseOutcome.objects.filter(run=self.run):
            outcome[(o.idea_a_id, o.idea_b_id)][o.dimension] = value.get(o.verdict)
        initial = 2.5 if p["initial"] == AUTO else float(p["initial"])
        scores = {i: dict.fromkeys(self.dimensions, initial) for i in self.refs}
        chains: dict[int, dict[str, Any]] = {}
        for _ in range(max(1, int(p["passes"]))):
            chains = {}
            for target, refs in self.refs.items():
                comparisons = [
                    (ref, scores[ref], outcome[(target, ref)])
                    for ref in refs
                    if (target, ref) in outcome
                ]
                chains[target] = run_elo_dimensions(
                    comparisons,
                    dict.fromkeys(self.dimensions, initial),
                    epsilon=float(p["epsilon"]),
                    max_steps=int(p["max_steps"]),
                    d=float(p["d"]),
                    k_max=float(p["k_max"]),
                    gamma=float(p["gamma"]),
                )
            scores = {i: {d: c.score for d, c in ch.items()} for i, ch in chains.items()}
        ratings = []
        for target, per_dim in chains.items():
            for dim, chain in per_dim.items():
                ratings.append(_elo_rating(self.run, target, dim, chain))
        IdeaRating.objects.bulk_create(ratings)
        return {
            "formalised": sum(1 for f in self.forms.values() if f),
            "references": "study ideas (fallback: no reference corpus; scores are relative "
            "to the study's own ideas)",
            "corpus": None,
            "dimensions": list(self.dimensions),
            "passes": int(p["passes"]),
        }


LIGBENCH_NOVELTY = "ligbench_novelty"
"""IdeaRating dimension of LigBench's fused novelty (not the review form's "novelty")."""
NOVELTY_LLM = "novelty_llm"
"""Judgment metric of the judge's own 0–5 novelty estimate (s_LLM in LigBench's fusion)."""
_VALUE = {"A": 1.0, "B": 0.0, "tie": 0.5}


def _coin(*key: Any) -> bool:
    """A fair, reproducible coin per key: which side an item is shown on."""
    return random.Random(":".join(str(k) for k in key)).random() < 0.5


def _formal_text(parts: dict[str, str]) -> str:
    return "\n".join(parts[k] for k in FORMALISATION_KEYS)


def _corpus_for(params: dict[str, Any], dimensions: Iterable[str]) -> tuple[ReferenceCorpus, Any]:
    from .corpus import eligible_references

    corpus = ReferenceCorpus.objects.filter(pk=params["corpus"]).first()
    if corpus is None:
        raise JudgeRunRefused(f"reference corpus {params['corpus']} no longer exists")
    return corpus, eligible_references(corpus, list(dimensions))


def _store_formalisation(run: JudgeRun, idea_id: int, call: LLMCall) -> dict[str, str] | None:
    parsed = parse_formalisation(call.response_text)
    _mark_parsed(call, parsed)
    parts = parsed.as_dict() if not isinstance(parsed, Unparseable) else None
    Formalisation.objects.create(
        run=run,
        idea_id=idea_id,
        parts=parts,
        call=call,
        parse_error=parsed.reason if isinstance(parsed, Unparseable) else "",
    )
    return parts


class _LigBenchCorpusDriver(_Driver):
    """LigBench against a reference corpus: formalise, retrieve, compare, Elo, novelty.

    Stage 1 formalises every idea. Stage 2 starts once every formalisation is stored: for
    each formalised idea it retrieves the `references` most related papers (BM25 and
    MiniLM cosine over the four parts), compares the idea with each of them on every
    dimension in one call, and asks for the judge's own 0–5 novelty estimate.

    Elo then runs per dimension over the references in retrieval order (most related
    first) against their venue-debiased scores, so a single pass suffices. The initial
    score is taken from calibration examples: the mean debiased score of the
    `calibration` most related references. LigBench instead shows three scored examples
    to the model and asks it for a starting score; taking the examples' scores directly
    costs no call, cannot be unparseable, and is the prior that prompt aims at. A number
    in `initial` overrides it. Novelty fuses the judge's estimate with the MiniLM
    similarity of the idea to the retrieved papers (α, k, μ, β per run).
    """

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        p = self.params
        self.dimensions = {d: prompts.LIGBENCH_DIMENSIONS[d] for d in p["dimensions"]}
        self.corpus, self.eligible = _corpus_for(p, self.dimensions)
        n_refs = self.eligible.count()
        if n_refs == 0:
            raise JudgeRunRefused(
                f"corpus {self.corpus.name!r} has no paper with all four parts and a score on "
                + ", ".join(self.dimensions)
            )
        self.k = min(max(1, int(p["references"])), n_refs)
        self.novelty = bool(p["novelty"])
        self.total = len(self.ideas) * (1 + self.k + int(self.novelty))
        self.forms: dict[int, dict[str, str] | None] = {}
        self.hits: dict[int, list[Any]] = {}
        self.papers: dict[int, ReferencePaper] = {}
        self.stage2_started = False

    def load(self) -> list[Unit]:
        self.forms = {f.idea_id: f.parts for f in Formalisation.objects.filter(run=self.run)}
        pairs: set[tuple[int, int]] = set()
        bad: set[tuple[int, int]] = set()
        for idea_id, ref_id, verdict in ReferenceComparison.objects.filter(
            run=self.run
        ).values_list("idea_id", "reference_id", "verdict"):
            pairs.add((idea_id, ref_id))
            if verdict == Verdict.UNPARSEABLE:
                bad.add((idea_id, ref_id))
        novelty = dict(
            Judgment.objects.filter(run=self.run, metric=NOVELTY_LLM).values_list(
                "idea_id", "score"
            )
        )
        self.done = len(self.forms) + len(pairs) + len(novelty)
        self.unparseable = (
            sum(v is None for v in self.forms.values())
            + len(bad)
            + sum(v is None for v in novelty.values())
        )
        units = [
            Unit(
                ("form", i.pk),
                prompts.formalisation_messages(self.text[i.pk]),
                prompts.LIGBENCH_FORMALISATION.id,
            )
            for i in self.ideas
            if i.pk not in self.forms
        ]
        if units:
            return units
        return self._stage2(pairs, set(novelty))

    def _retrieve(self) -> list[int]:
        from .corpus import reference_corpus_embed, reference_corpus_retrieve

        reference_corpus_embed(corpus=self.corpus)
        papers = list(self.eligible.all())
        self.papers = {p.pk: p for p in papers}
        usable = [i.pk for i in self.ideas if self.forms.get(i.pk)]
        hits = reference_corpus_retrieve(
            papers=papers,
            queries=[_formal_text(cast(dict, self.forms[i])) for i in usable],
            k=self.k,
            weight=float(self.params["retrieval_weight"]),
        )
        self.hits = dict(zip(usable, hits, strict=True))
        return usable

    def _stage2(self, done_pairs: set[tuple[int, int]], done_novelty: set[int]) -> list[Unit]:
        self.stage2_started = True
        usable = self._retrieve()
        self.total = (
            len(self.ideas)
            + sum(len(h) for h in self.hits.values())
            + (len(usable) if self.novelty else 0)
        )
        seed = self.params["seed"]
        units = []
        for target in usable:
            form = cast(dict, self.forms[target])
            if self.novelty and target not in done_novelty:
                units.append(
                    Unit(
                        ("nov", target),
                        prompts.ligbench_novelty_messages(form),
                        prompts.ABSOLUTE.id,
                    )
                )
            for rank, hit in enumerate(self.hits[target], 1):
                if (target, hit.id) in done_pairs:
                    continue
                ref = self.papers[hit.id].parts()
                target_first = _coin("ligbench-ref", seed, target, hit.id)
                a, b = (form, ref) if target_first else (ref, form)
                units.append(
                    Unit(
                        ("ref", target, hit.id, target_first, rank),
                        prompts.ligbench_comparison_messages(a, b, self.dimensions),  # type: ignore[arg-type]
                        prompts.LIGBENCH_COMPARISON.id,
                    )
                )
        return units

    def store(self, unit: Unit, call: LLMCall | None) -> bool:
        assert call is not None
        kind = unit.key[0]
        if kind == "form":
            parts = _store_formalisation(self.run, unit.key[1], call)
            self.forms[unit.key[1]] = parts
            return parts is None
        if kind == "nov":
            parsed = parse_absolute_score(call.response_text, 0, 5)
            _mark_parsed(call, parsed)
            Judgment.objects.create(
                run=self.run,
                idea_id=unit.key[1],
                metric=NOVELTY_LLM,
                score=float(parsed.score) if isinstance(parsed, AbsoluteScore) else None,
                rationale=parsed.rationale if isinstance(parsed, AbsoluteScore) else "",
                parse_error=parsed.reason if isinstance(parsed, Unparseable) else "",
                call=call,
            )
            return isinstance(parsed, Unparseable)
        _, target, ref, target_first, rank = unit.key
        return _store_reference_verdicts(
            self.run,
            call,
            self.dimensions,
            target_first,
            idea_id=target,
            reference_id=ref,
            rank=rank,
        )

    def after(self, unit: Unit) -> list[Unit]:
        if (
            unit.key[0] == "form"
            and not self.stage2_started
            and all(i.pk in self.forms for i in self.ideas)
        ):
            return self._stage2(set(), set())
        return []

    def _initial(self, refs: Sequence[ReferencePaper]) -> tuple[dict[str, float], list[int]]:
        p = self.params
        if p["initial"] != AUTO:
            return dict.fromkeys(self.dimensions, float(p["initial"])), []
        examples = list(refs[: max(1, int(p["calibration"]))])
        return {
            d: sum(cast(float, r.debiased(d)) for r in examples) / len(examples)
            for d in self.dimensions
        }, [r.pk for r in examples]

    def finish(self) -> dict[str, Any]:
        p = self.params
        IdeaRating.objects.filter(run=self.run).delete()
        summary: dict[str, Any] = {
            "references": f"reference corpus {self.corpus.name!r} (venue-debiased scores)",
            "corpus": self.corpus.pk,
            "corpus_name": self.corpus.name,
            "formalised": sum(1 for f in self.forms.values() if f),
            "dimensions": list(self.dimensions),
            "initial": (
                f"mean debiased score of the {int(p['calibration'])} most related references"
                if p["initial"] == AUTO
                else float(p["initial"])
            ),
            "novelty": self.novelty,
        }
        if not self.stage2_started:
            return {**summary, "elo": "not started"}
        outcome: dict[tuple[int, int], dict[str, float | None]] = defaultdict(dict)
        for idea_id, ref_id, dim, verdict in ReferenceComparison.objects.filter(
            run=self.run
        ).values_list("idea_id", "reference_id", "dimension", "verdict"):
            outcome[(idea_id, ref_id)][dim] = _VALUE.get(verdict)
        llm = dict(
            Judgment.objects.filter(run=self.run, metric=NOVELTY_LLM).values_list(
                "idea_id", "score"
            )
        )
        ratings = []
        for target, hits in self.hits.items():
            refs = [self.papers[h.id] for h in hits]
            initial, examples = self._initial(refs)
            comparisons = [
                (r.pk, {d: cast(float, r.debiased(d)) for d in self.dimensions}, outcome[key])
                for r in refs
                if (key := (target, r.pk)) in outcome
            ]
            chains = run_elo_dimensions(
                comparisons,
                initial,
                epsilon=float(p["epsilon"]),
                max_steps=int(p["max_steps"]),
                d=float(p["d"]),
                k_max=float(p["k_max"]),
                gamma=float(p["gamma"]),
            )
            for dim, chain in chains.items():
                ratings.append(
                    _elo_rating(
                        self.run,
                        target,
                        dim,
                        chain,
                        initial=initial[dim],
                        calibration_examples=examples,
                    )
                )
            if self.novelty and hits:
                ratings.append(self._novelty(target, hits, llm.get(target)))
        IdeaRating.objects.bulk_create(ratings)
        return summary

    def _novelty(self, target: int, hits: Sequence[Any], s_llm: float | None) -> IdeaRating:
        p = self.params
        sims = [h.cosine for h in hits]
        knobs = {"alpha": float(p["alpha"]), "k": float(p["k"]), "mu": float(p["mu"])}
        history: dict[str, Any] = {
            "similarities": [
                {"reference": h.id, "cosine": h.cosine, "bm25": h.bm25, "hybrid": h.score}
                for h in hits
            ],
            "beta": float(p["beta"]),
            **knobs,
        }
        if s_llm is None:
            # No estimate to fuse: the similarity part is shown, the score stays empty.
            s_w = weighted_similarity(sims, knobs["alpha"])
            history.update(
                s_weighted=s_w,
                s_sim=similarity_to_novelty(s_w, knobs["k"], knobs["mu"]),
                s_llm=None,
                missing="the judge's novelty estimate was unparseable",
            )
            score = None
        else:
            result = novelty_score(sims, s_llm, beta=float(p["beta"]), **knobs)
            history.update(s_weighted=result.s_weighted, s_sim=result.s_sim, s_llm=result.s_llm)
            score = result.novelty
        return IdeaRating(
            run=self.run, idea_id=target, dimension=LIGBENCH_NOVELTY, score=score, history=[history]
        )


class _ValidationDriver(_Driver):
    """Judge validation on reference pairs (LigBench §4.2, Table 2).

    Pairs of related papers from the corpus: papers are shuffled by `seed`, each of the
    first 2 × `pairs` is a query for its nearest neighbours (the same hybrid retrieval
    LigBench uses), and pairs are taken breadth-first (everyone's nearest neighbour, then
    everyone's second) until `pairs` distinct pairs are found. Each pair is judged on
    every dimension in one call, once in a random order or in both orders; the truth is
    the order of the papers' venue-debiased scores. Accuracy against the raw scores is
    reported beside it, which shows what the debiasing changes.
    """

    NEIGHBOURS = 3

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        p = self.params
        self.dimensions = {d: prompts.LIGBENCH_DIMENSIONS[d] for d in p["dimensions"]}
        self.corpus, self.eligible = _corpus_for(p, self.dimensions)
        n = self.eligible.count()
        if n < 2:
            raise JudgeRunRefused(
                f"corpus {self.corpus.name!r} has {n} paper(s) with all four parts and scores; "
                "validation needs at least two"
            )
        self.orders = 2 if p["both_orders"] else 1
        self.wanted = max(1, min(int(p["pairs"]), n * (n - 1) // 2))
        self.total = self.wanted * self.orders
        self.pairs: list[tuple[int, int]] = []
        self.papers: dict[int, ReferencePaper] = {}

    def _sample(self) -> None:
        from .corpus import reference_corpus_embed, reference_corpus_retrieve, reference_vector

        reference_corpus_embed(corpus=self.corpus)
        papers = list(self.eligible.all())
        self.papers = {p.pk: p for p in papers}
        rng = random.Random(f"validation:{self.params['seed']}")
        order = papers[:]
        rng.shuffle(order)
        anchors = order[: 2 * self.wanted]
        hits = reference_corpus_retrieve(
            papers=papers,
            queries=[a.formal_text() for a in anchors],
            k=self.NEIGHBOURS,
            weight=float(self.params["retrieval_weight"]),
            exclude=[a.pk for a in anchors],
            query_vectors=np.vstack([reference_vector(a) for a in anchors]),
        )
        seen: set[frozenset[int]] = set()
        pairs: list[tuple[int, int]] = []
        for depth in range(self.NEIGHBOURS):
            for anchor, found in zip(anchors, hits, strict=True):
                if len(pairs) >= self.wanted:
                    break
                if depth < len(found):
                    key = frozenset((anchor.pk, found[depth].id))
                    if len(key) == 2 and key not in seen:
                        seen.add(key)
                        pairs.append((anchor.pk, cast(int, found[depth].id)))
        self.pairs = pairs
        self.total = len(pairs) * self.orders

    def load(self) -> list[Unit]:
        done: set[tuple[int, int, bool]] = set()
        bad: set[tuple[int, int, bool]] = set()
        for a, b, first, verdict in ReferenceComparison.objects.filter(run=self.run).values_list(
            "target_reference_id", "reference_id", "target_first", "verdict"
        ):
            done.add((a, b, first))
            if verdict == Verdict.UNPARSEABLE:
                bad.add((a, b, first))
        self.done, self.unparseable = len(done), len(bad)
        self._sample()
        seed = self.params["seed"]
        units = []
        for a, b in self.pairs:
            firsts = [True, False] if self.orders == 2 else [_coin("validation", seed, a, b)]
            pa, pb = self.papers[a].parts(), self.papers[b].parts()
            for first in firsts:
                if (a, b, first) in done:
                    continue
                shown = (pa, pb) if first else (pb, pa)
                units.append(
                    Unit(
                        ("val", a, b, first),
                        prompts.ligbench_comparison_messages(*shown, self.dimensions),  # type: ignore[arg-type]
                        prompts.LIGBENCH_COMPARISON.id,
                    )
                )
        return units

    def store(self, unit: Unit, call: LLMCall | None) -> bool:
        assert call is not None
        _, a, b, first = unit.key
        return _store_reference_verdicts(
            self.run, call, self.dimensions, first, target_reference_id=a, reference_id=b
        )

    def finish(self) -> dict[str, Any]:
        rows = list(
            ReferenceComparison.objects.filter(run=self.run).values_list(
                "target_reference_id", "reference_id", "target_first", "dimension", "verdict"
            )
        )
        papers = self.papers or {p.pk: p for p in self.eligible.all()}
        debiased, raw = [], []
        shown_first: dict[tuple[int, int, str], dict[bool, str]] = defaultdict(dict)
        for a, b, first, dim, verdict in rows:
            pa, pb = papers[a], papers[b]
            v = None if verdict == Verdict.UNPARSEABLE else verdict
            da, db = pa.debiased(dim), pb.debiased(dim)
            ra, rb = getattr(pa, dim), getattr(pb, dim)
            debiased.append(
                Trial(dim, None if da is None or db is None else da - db, v)  # type: ignore[arg-type]
            )
            raw.append(Trial(dim, None if ra is None or rb is None else ra - rb, v))
            if v is not None:
                shown_first[(a, b, dim)][first] = v
        acc = pairwise_accuracy(debiased)
        acc_raw = pairwise_accuracy(raw)
        both = [v for v in shown_first.values() if len(v) == 2]
        return {
            "corpus": self.corpus.pk,
            "corpus_name": self.corpus.name,
            "pairs": len(self.pairs),
            "both_orders": self.orders == 2,
            "dimensions": list(self.dimensions),
            "validation": {d: a.as_dict() for d, a in acc.items()},
            "raw_accuracy": {d: a.accuracy for d, a in acc_raw.items()},
            "position_consistency": (
                sum(v[True] == v[False] for v in both) / len(both) if both else None
            ),
        }


_DRIVERS: dict[str, Callable[..., _Driver]] = {
    Method.DIRECT: _ScoreDriver,
    Method.ABSOLUTE: _ScoreDriver,
    Method.PAIRWISE: _PairDriver,
    Method.SWISS: _SwissDriver,
    Method.LIGBENCH: lambda **kw: (
        _LigBenchCorpusDriver(**kw) if kw["params"].get("corpus") else _LigBenchDriver(**kw)
    ),
    Method.VALIDATION: lambda **kw: _ValidationDriver(**kw),
    Method.BASELINE_RANDOM: _RandomDriver,
    Method.BASELINE_LONGER: _LongerDriver,
}


# --- Execution -----------------------------------------------------------------------


def _claim(run: JudgeRun) -> bool:
    """Take the run for this process; False if another live worker has it or it is over."""
    now = timezone.now()
    claimable = Q(status=Status.QUEUED) | Q(
        Q(status=Status.RUNNING),
        Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=now - STALE_AFTER),
    )
    updated = (
        JudgeRun.objects.filter(pk=run.pk)
        .filter(claimable)
        .update(status=Status.RUNNING, heartbeat_at=now, message="starting")
    )
    run.refresh_from_db()
    if updated and run.started_at is None:
        run.started_at = now
        run.save(update_fields=["started_at"])
    return bool(updated)


class _Batch:
    """One open transaction at a time, committed every COMMIT_EVERY seconds."""

    def __init__(self) -> None:
        self.atomic: Any = None
        self.opened = 0.0

    def ensure(self) -> None:
        if self.atomic is None:
            self.atomic = transaction.atomic()
            self.atomic.__enter__()
            self.opened = time.monotonic()

    def age(self) -> float:
        return time.monotonic() - self.opened if self.atomic is not None else 0.0

    def commit(self) -> None:
        atomic, self.atomic = self.atomic, None
        if atomic is not None:
            atomic.__exit__(None, None, None)

    def maybe_commit(self) -> None:
        if self.age() >= COMMIT_EVERY:
            self.commit()

    def close(self, exc: BaseException | None) -> None:
        """Commit what was done; roll back only if the database itself is in trouble."""
        try:
            self.commit()
        except Exception:
            atomic, self.atomic = self.atomic, None
            if atomic is not None and exc is not None:
                atomic.__exit__(type(exc), exc, exc.__traceback__)
            raise


class _Engine:
    def __init__(self, run: JudgeRun, driver: _Driver):
        self.run, self.driver = run, driver
        self.config = run.config
        self.calls, self.cost = run_spend(run)
        self.cache_hits = 0
        self.errors = run.errors
        self.last_error = ""
        self.last_flush = 0.0
        self.stop: tuple[str, str] | None = None
        self.batch = _Batch()
        self.idle = 0.0  # seconds spent waiting for HTTP, to tell our own overhead apart
        self.units = 0

    def flush(self, force: bool = False, message: str = "") -> None:
        now = time.monotonic()
        if not force and now - self.last_flush < PROGRESS_EVERY:
            return
        self.last_flush = now
        self.batch.ensure()
        d = self.driver
        fields: dict[str, Any] = {
            "done_calls": d.done,
            "total_calls": d.total,
            "unparseable": d.unparseable,
            "http_calls": self.calls,
            "cache_hits": self.run.cache_hits + self.cache_hits,
            "errors": self.errors,
            "cost": self.cost,
            "heartbeat_at": timezone.now(),
            "message": (message or f"{d.done} of {d.total} done")[:500],
        }
        JudgeRun.objects.filter(pk=self.run.pk).update(**fields)
        for k, v in fields.items():
            setattr(self.run, k, v)
        self.run.cache_hits = fields["cache_hits"]
        self.cache_hits = 0
        self.batch.maybe_commit()

    def cancelled(self) -> bool:
        # Asked before every unit, so kept to one bare indexed read.
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT cancel_requested FROM {JudgeRun._meta.db_table} WHERE id = %s",
                [self.run.pk],
            )
            row = cursor.fetchone()
        return bool(row and row[0])

    def complete(self, unit: Unit, call: LLMCall | None) -> None:
        self.batch.ensure()
        try:
            with transaction.atomic():
                bad = self.driver.store(unit, call)
        except IntegrityError:
            # Another worker stored this unit first (a run resumed while its old worker was
            # still alive); its row counts, ours would double it.
            log.warning("run %s: unit %s already stored", self.run.pk, unit.key)
            return
        self.driver.done += 1
        self.units += 1
        self.driver.unparseable += bool(bad)
        self.pending.extend(self.driver.after(unit))

    def budget(self, in_flight: int) -> str | None:
        per_call = (self.cost / self.calls) if self.calls else None
        return budget_problem(
            self.run, calls=self.calls, cost=self.cost, in_flight=in_flight, cost_per_call=per_call
        )

    def execute(self) -> None:
        self.pending: deque[Unit] = deque(self.driver.load())
        self.in_flight: dict[Future[Attempt], tuple[Unit, Prepared]] = {}
        self.returned: list[tuple[Unit, Prepared, Attempt]] = []
        self.width = max(1, self.config.concurrency if self.config else 1)
        self.flush(force=True)
        failure: BaseException | None = None
        with ThreadPoolExecutor(max_workers=self.width, thread_name_prefix="judge") as pool:
            self.pool = pool
            try:
                while self.pending or self.in_flight:
                    self._fill()
                    if not self.in_flight:
                        if self.stop is not None or not self.pending:
                            break
                        continue
                    # Wake up in time to commit, so the write lock is not held while idle.
                    timeout = (
                        max(0.0, COMMIT_EVERY - self.batch.age()) if self.batch.atomic else 1.0
                    )
                    idle = time.perf_counter()
                    finished, _ = wait(
                        list(self.in_flight), timeout=timeout, return_when=FIRST_COMPLETED
                    )
                    self.idle += time.perf_counter() - idle
                    for future in finished:
                        unit, prepared = self.in_flight.pop(future)
                        self.returned.append((unit, prepared, future.result()))
                    # Keep the endpoint busy first; our bookkeeping can wait a moment.
                    self._fill()
                    while self.returned:
                        self._record(*self.returned.pop(0))
                    self.flush()
                    self.batch.maybe_commit()
                    if self.stop is not None and not self.in_flight:
                        break
            except BaseException as exc:
                failure = exc
                # Keep what was paid for: record the calls that returned or are in flight.
                for _unit, prepared, attempt in self.returned:
                    with contextlib.suppress(Exception):  # best effort while failing
                        record(prepared, attempt, run=self.run)
                for future, (_unit, prepared) in list(self.in_flight.items()):
                    with contextlib.suppress(Exception):
                        record(prepared, future.result(timeout=prepared.timeout), run=self.run)
                raise
            finally:
                self.batch.close(failure)

    def _fill(self) -> None:
        """Start units until the pool is full, answering cache hits and baselines inline."""
        while self.pending and len(self.in_flight) < self.width and self.stop is None:
            if self.cancelled():
                self.stop = ("cancelled", "cancelled by the owner")
                return
            unit = self.pending.popleft()
            if unit.messages is None:
                self.complete(unit, None)
                self.flush()
                continue
            prepared = self._prepare(unit)
            hit = lookup(prepared)
            if hit is not None:
                self.cache_hits += 1
                self.complete(unit, hit)
                self.flush()
                continue
            problem = self.budget(len(self.in_flight) + len(self.returned))
            if problem:
                self.stop = ("budget", problem)
                self.pending.appendleft(unit)
                return
            self.in_flight[self.pool.submit(send, prepared)] = (unit, prepared)

    def _prepare(self, unit: Unit) -> Prepared:
        assert self.config is not None
        params = self.config.parameters or {}
        override = None
        if unit.seed_offset and "seed" in params:
            # k samples of one prompt: vary the seed so a seeded server does not repeat
            # itself; the salt keeps the cache keys apart either way.
            override = {"seed": int(params["seed"]) + unit.seed_offset}
        return prepare(
            self.config,
            unit.messages or [],
            prompt_version=unit.prompt_version,
            salt=unit.salt,
            parameters=override,
        )

    def _record(self, unit: Unit, prepared: Prepared, attempt: Attempt) -> None:
        self.batch.ensure()
        call = record(prepared, attempt, run=self.run)
        if call.run_id == self.run.pk:
            self.calls += 1
            self.cost += call.cost
        if call.error:
            self.errors += 1
            self.last_error = call.error
            return
        self.complete(unit, call)


def judge_run_execute(*, run: JudgeRun) -> JudgeRun:
    """Run (or resume) a judge run in this process until it is done or stopped.

    Returns the refreshed run. A run another live worker holds is left alone.
    """
    if not _claim(run):
        log.info("run %s not claimable (status %s)", run.pk, run.status)
        return run
    ideas = _ideas(run.study, run.params)
    try:
        _check_texts(run.method, ideas, run.params.get("text", "normalized"))
        if run.method in LLM_METHODS and (run.config is None or not run.config.is_configured()):
            raise JudgeNotConfigured("the run's judge has no endpoint or model")
        driver = _DRIVERS[run.method](run=run, ideas=ideas, params=run.params, study=run.study)
        engine = _Engine(run, driver)
        started = time.perf_counter()
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
    missing = driver.total - driver.done
    summary.update(
        {
            "unparseable": driver.unparseable,
            "errors": engine.errors,
            "last_error": engine.last_error,
            "done": driver.done,
            "total": driver.total,
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
    JudgeRun.objects.filter(pk=run.pk).update(summary=summary)
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
    return _end(run, Status.DONE, f"done: {driver.done} units, {driver.unparseable} unparseable")


def _end(run: JudgeRun, status: str, message: str, error: str = "") -> JudgeRun:
    JudgeRun.objects.filter(pk=run.pk).update(
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
        "baseline": run.is_baseline,
        "status": run.status,
        "summary": run.summary,
        "ratings": dict(out),
    }
