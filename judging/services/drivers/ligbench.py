"""LigBench: formalise, retrieve references, compare, Elo per dimension, fused novelty."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, cast

from ...methods import prompts
from ...methods.elo import run_elo_dimensions
from ...methods.novelty import (
    BM25,
    novelty_score,
    similarity_to_novelty,
    tokenize,
    top_k,
    weighted_similarity,
)
from ...methods.parsing import (
    FORMALISATION_KEYS,
    AbsoluteScore,
    Unparseable,
    parse_absolute_score,
    parse_dimension_verdicts,
    parse_formalisation,
)
from ...methods.registry import AUTO
from ...models import (
    Formalisation,
    IdeaRating,
    JudgeRun,
    Judgment,
    LLMCall,
    PairwiseOutcome,
    ReferenceComparison,
    ReferencePaper,
)
from ..base import (
    Driver,
    JudgeRunRefused,
    Unit,
    coin,
    corpus_for,
    elo_rating_row,
    mark_parsed,
    store_reference_verdicts,
    stored_verdict,
)

Method = JudgeRun.Method
Verdict = PairwiseOutcome.Verdict


class LigBenchDriver(Driver):
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
        verdicts = parse_dimension_verdicts(call.response_text, list(self.dimensions))
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


LIGBENCH_NOVELTY = "ligbench_novelty"
"""IdeaRating dimension of LigBench's fused novelty (not the review form's "novelty")."""
NOVELTY_LLM = "novelty_llm"
"""Judgment metric of the judge's own 0–5 novelty estimate (s_LLM in LigBench's fusion)."""
_VALUE = {"A": 1.0, "B": 0.0, "tie": 0.5}


def _formal_text(parts: dict[str, str]) -> str:
    return "\n".join(parts[k] for k in FORMALISATION_KEYS)


def _store_formalisation(run: JudgeRun, idea_id: int, call: LLMCall) -> dict[str, str] | None:
    parsed = parse_formalisation(call.response_text)
    mark_parsed(call, parsed)
    parts = parsed.as_dict() if not isinstance(parsed, Unparseable) else None
    Formalisation.objects.create(
        run=run,
        idea_id=idea_id,
        parts=parts,
        call=call,
        parse_error=parsed.reason if isinstance(parsed, Unparseable) else "",
    )
    return parts


class LigBenchCorpusDriver(Driver):
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
        self.corpus, self.eligible = corpus_for(p, self.dimensions)
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
        from ...corpus import reference_corpus_embed, reference_corpus_retrieve

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
                target_first = coin("ligbench-ref", seed, target, hit.id)
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
            mark_parsed(call, parsed)
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
        return store_reference_verdicts(
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
                    elo_rating_row(
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


def build(**kw: Any) -> Driver:
    """With a reference corpus the corpus driver, else the study-ideas fallback."""
    if kw["params"].get("corpus"):
        return LigBenchCorpusDriver(**kw)
    return LigBenchDriver(**kw)
