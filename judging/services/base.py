"""What every driver shares: the unit of work, the driver interface, and the small
helpers that store parsed answers as outcome rows."""

from __future__ import annotations

import dataclasses
import random
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from studies.models import Idea, Study
from studies.selectors import idea_text

from ..llm.models import LLMCall
from ..methods.pairwise import PairCall
from ..methods.parsing import Unparseable, parse_reasoned_verdicts
from ..models import IdeaRating, JudgeRun, PairwiseOutcome, ReferenceComparison, ReferenceCorpus

Verdict = PairwiseOutcome.Verdict


class JudgeRunRefused(ValueError):
    """The run cannot be created or executed as asked; the message says why."""


@dataclass
class Unit:
    """One thing to decide: an LLM call (messages set) or a rule-decided outcome (None)."""

    key: tuple[Any, ...]
    messages: list[dict[str, str]] | None
    prompt_version: str = ""
    salt: str = ""
    seed_offset: int = 0


class Driver:
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


def as_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def elo_rating_row(run: JudgeRun, idea_id: int, dim: str, chain: Any, **final: Any) -> IdeaRating:
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


def store_reference_verdicts(
    run: JudgeRun,
    call: LLMCall,
    dimensions: Iterable[str],
    target_first: bool,
    **ids: Any,
) -> bool:
    """Store one per-dimension comparison answer (against a reference paper); True when
    the answer was unparseable. `ids` names the two sides (and the retrieval rank)."""
    verdicts = parse_reasoned_verdicts(call.response_text, list(dimensions))
    mark_parsed(call, verdicts)
    ReferenceComparison.objects.bulk_create(
        [
            ReferenceComparison(
                run=run,
                target_first=target_first,
                dimension=dim,
                verdict=stored_verdict(
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


def mark_parsed(call: LLMCall | None, parsed: Any) -> None:
    if call is None or call.parsed is not None or call.parse_error:
        return
    if isinstance(parsed, Unparseable):
        call.parse_error = parsed.reason
        LLMCall.objects.filter(pk=call.pk).update(parse_error=parsed.reason)
    else:
        call.parsed = as_json(parsed)
        LLMCall.objects.filter(pk=call.pk).update(parsed=call.parsed)


def pair_call(o: PairwiseOutcome) -> PairCall:
    return PairCall(o.first_shown_id, o.second_shown_id, o.shown_winner())  # type: ignore[arg-type]


def stored_verdict(shown: str | None, first_is_a: bool) -> str:
    """Turn a verdict as shown ("A" = shown first) into one about idea_a/idea_b."""
    if shown is None:
        return Verdict.UNPARSEABLE
    if shown == "tie" or first_is_a:
        return shown
    return {"A": "B", "B": "A"}[shown]


def coin(*key: Any) -> bool:
    """A fair, reproducible coin per key: which side an item is shown on."""
    return random.Random(":".join(str(k) for k in key)).random() < 0.5


def corpus_for(params: dict[str, Any], dimensions: Iterable[str]) -> tuple[ReferenceCorpus, Any]:
    from ..corpus import eligible_references

    corpus = ReferenceCorpus.objects.filter(pk=params["corpus"]).first()
    if corpus is None:
        raise JudgeRunRefused(f"reference corpus {params['corpus']} no longer exists")
    return corpus, eligible_references(corpus, list(dimensions))
