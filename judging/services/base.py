"""What every driver shares: the unit of work, the driver interface, and the small
helpers that store parsed answers as outcome rows."""

from __future__ import annotations

import dataclasses
import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from llm.models import LLMCall
from studies.models import Idea, Study
from studies.selectors import idea_text

from ..methods.pairwise import PairCall
from ..methods.panel import combine_verdicts
from ..methods.parsing import (
    PairwiseVerdict,
    Unparseable,
    Winner,
    parse_pairwise,
    parse_reasoned_verdicts,
)
from ..methods.schemas import schema_for_prompt
from ..models import IdeaRating, JudgeRun, PairwiseOutcome, ReferenceComparison, ReferenceCorpus

Verdict = PairwiseOutcome.Verdict
REPEAT = "repeat"
"""The first element of a repeated unit's key."""


class JudgeRunRefused(ValueError):
    """The run cannot be created or executed as asked; the message says why.

    `unnamed` is the same reason without the ideas it names (the owner's pages show
    their external ids; a report, which is shared, may not)."""

    def __init__(self, message: str, *, unnamed: str | None = None):
        super().__init__(message)
        self.unnamed = unnamed if unnamed is not None else message


@dataclass
class Unit:
    """One thing to decide: an LLM call (messages set) or a rule-decided outcome (None)."""

    key: tuple[Any, ...]
    messages: list[dict[str, str]] | None
    prompt_version: str = ""
    salt: str = ""
    seed_offset: int = 0
    member: int = 0
    """The panel seat of the judge that answers it (0: the run's own config)."""


class Driver:
    """A method: which units to run, how to store a unit's answer, what to rate at the end."""

    def __init__(
        self,
        *,
        run: JudgeRun | None,
        ideas: Sequence[Idea],
        params: dict[str, Any],
        study: Study,
        members: int = 1,
    ):
        # A driver built only to plan (run None) never writes, so rows may assume a run.
        self.run = cast(JudgeRun, run)
        self.panel_size = members
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

    # --- repetition: a seeded share of prompts asked a second time -------------------

    def repeated_among(self, items: list[Any], key: Callable[[Any], tuple[Any, ...]]) -> list[Any]:
        """The items whose prompts are asked again: `repeat_share` of them, rounded, and at
        least one when the share is above 0, so a run on a few ideas still measures its
        repetition. Which ones is a shuffle seeded by the run's seed and each item's key, so a
        resumed run chooses the same; the chosen keep their order in `items`."""
        share = float(self.params.get("repeat_share") or 0.0)
        if share <= 0.0 or not items:
            return []
        seed = self.params.get("seed", 0)
        count = min(len(items), max(1, round(share * len(items))))
        rank = sorted(
            range(len(items)),
            key=lambda i: random.Random(f"repeat:{seed}:{key(items[i])!r}").random(),
        )
        chosen = set(rank[:count])
        return [item for i, item in enumerate(items) if i in chosen]

    def repeat_unit(self, unit: Unit) -> Unit:
        """The same request once more. Only the salt differs, so the cache key differs and
        the call is really made (and paid for, inside the run's budget); the prompt, the
        parameters and the temperature are the run's."""
        salt = f"{unit.salt}|repeat=1" if unit.salt else "repeat=1"
        return dataclasses.replace(unit, key=(REPEAT, *unit.key), salt=salt)

    def store_repeat(self, unit: Unit, call: LLMCall | None) -> bool:
        """A repeat's answer writes no outcome row (it must not count twice in ratings):
        its call, tied to this run and parsed, is what the reliability panel reads."""
        parsed = self.parse_repeat(call.response_text if call else "")
        mark_parsed(call, parsed)
        return isinstance(parsed, Unparseable)

    def parse_repeat(self, text: str) -> Any:
        raise NotImplementedError

    def after(self, unit: Unit) -> list[Unit]:
        """Units that became possible once `unit` was stored."""
        return []

    def answer_schema(self, unit: Unit) -> dict[str, Any] | None:
        """The JSON schema of the unit's expected answer, for judges with structured
        outputs (None: ask without one). By the unit's prompt by default."""
        return schema_for_prompt(unit.prompt_version.partition("@")[0])

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


def store_pair_verdict(
    run: JudgeRun,
    call: LLMCall | None,
    a: int,
    b: int,
    first: int,
    number: int = 0,
    *,
    member: int = 0,
    rule: Winner | None = None,
) -> Winner | None:
    """Parse a pairwise call's answer, mark the call, and store the game (ideas a < b,
    `first` shown first, in round or batch `number`, by panel seat `member`, 0 the run's own judge); the winner
    shown (None when unparseable). Without a call (a rule-based baseline) the game
    stores `rule`, the rule's verdict."""
    shown, error = rule, ""
    if call is not None:
        parsed = parse_pairwise(call.response_text)
        mark_parsed(call, parsed)
        shown = parsed.winner if isinstance(parsed, PairwiseVerdict) else None
        error = parsed.reason if isinstance(parsed, Unparseable) else ""
    PairwiseOutcome.objects.create(
        run=run,
        member=member,
        idea_a_id=a,
        idea_b_id=b,
        first_shown_id=first,
        verdict=stored_verdict(shown, first == a),
        round=number,
        call=call,
        parse_error=error,
    )
    return shown


def panel_outcomes(run: JudgeRun) -> list[PairwiseOutcome]:
    """The run's pairwise outcomes as one judge's: its rows, or for a panel run (outcomes
    from several seats) one unsaved outcome per comparison carrying the majority of the
    members' verdicts (`judging.methods.panel.combine_verdicts`), without a call."""
    rows = list(PairwiseOutcome.objects.filter(run=run).order_by("round", "id"))
    if len({o.member for o in rows}) < 2:
        return rows
    first: dict[Hashable, PairwiseOutcome] = {}
    keyed = []
    for o in rows:
        key = (o.round, o.dimension, o.idea_a_id, o.idea_b_id, o.first_shown_id)
        first.setdefault(key, o)
        keyed.append((key, o.verdict))
    return [
        PairwiseOutcome(
            run=run,
            idea_a_id=first[key].idea_a_id,
            idea_b_id=first[key].idea_b_id,
            first_shown_id=first[key].first_shown_id,
            dimension=first[key].dimension,
            round=first[key].round,
            verdict=verdict,
        )
        for key, verdict in combine_verdicts(keyed).items()
    ]


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
