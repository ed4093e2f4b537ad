"""LigBench without a reference corpus: the study's own ideas as each other's references
(the labelled fallback; the scores are relative to the study's ideas)."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any, cast

from llm.models import LLMCall

from ...methods import prompts
from ...methods.elo import run_elo_dimensions
from ...methods.novelty import (
    BM25,
    tokenize,
    top_k,
)
from ...methods.parsing import (
    FORMALISATION_KEYS,
    Unparseable,
    parse_formalisation,
    parse_reasoned_verdicts,
)
from ...methods.registry import AUTO
from ...models import Formalisation, IdeaRating, JudgeRun, PairwiseOutcome
from ..base import (
    Driver,
    Unit,
    elo_rating_row,
    mark_parsed,
    stored_verdict,
)
from .ligbench import _VALUE, LigBenchCorpusDriver, schedule_from

Method = JudgeRun.Method
Verdict = PairwiseOutcome.Verdict


class LigBenchDriver(Driver):
    """Formalise every idea, then compare each with its `peers` most similar ideas, then Elo.

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
        self.k = max(1, int(p["peers"]))
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
            mark_parsed(call, parsed)
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
        verdicts = parse_reasoned_verdicts(call.response_text, list(self.dimensions))
        mark_parsed(call, verdicts)
        PairwiseOutcome.objects.bulk_create(
            [
                PairwiseOutcome(
                    run=self.run,
                    idea_a_id=target,
                    idea_b_id=ref,
                    first_shown_id=first,
                    dimension=dim,
                    verdict=stored_verdict(
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
        for o in PairwiseOutcome.objects.filter(run=self.run):
            outcome[(o.idea_a_id, o.idea_b_id)][o.dimension] = _VALUE.get(o.verdict)
        initial = 2.5 if p["initial"] == AUTO else float(p["initial"])
        scores = {i: dict.fromkeys(self.dimensions, initial) for i in self.refs}
        schedule = schedule_from(p)
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
                    epsilon=schedule.epsilon,
                    max_steps=schedule.max_steps,
                    d=schedule.d,
                    k_max=schedule.k_max,
                    gamma=schedule.gamma,
                )
            scores = {i: {d: c.score for d, c in ch.items()} for i, ch in chains.items()}
        ratings = []
        for target, per_dim in chains.items():
            for dim, chain in per_dim.items():
                ratings.append(elo_rating_row(self.run, target, dim, chain))
        IdeaRating.objects.bulk_create(ratings)
        return {
            "formalised": sum(1 for f in self.forms.values() if f),
            "references": "study ideas (fallback: no reference corpus; scores are relative "
            "to the study's own ideas)",
            "corpus": None,
            "dimensions": list(self.dimensions),
            "passes": int(p["passes"]),
        }


def build(**kw: Any) -> Driver:
    """The LigBench driver for a run: with a reference corpus the corpus driver
    (`ligbench.py`), else this module's study-ideas fallback."""
    if kw["params"].get("corpus"):
        return LigBenchCorpusDriver(**kw)
    return LigBenchDriver(**kw)
