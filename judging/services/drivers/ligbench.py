"""LigBench against a reference corpus: formalise, retrieve, score initially, compare one
reference at a time until the Elo chains stop, fused novelty."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any, cast

import numpy as np

from llm.models import LLMCall

from ...methods import prompts
from ...methods.elo import MAX_STEPS
from ...methods.ligbench import (
    EXAMPLE_CHOICES,
    PROBE_SD,
    Schedule,
    calibration_examples,
    next_reference,
    posterior_of,
    replay,
)
from ...methods.ligbench import finish as finish_chains
from ...methods.ligbench_posterior import LAPSE, PRIOR_SD, SD_STOP, SLOPE, PosteriorChain
from ...methods.novelty import (
    MU,
    K,
    calibrate_similarity,
    novelty_score,
    similarity_to_novelty,
    weighted_similarity,
)
from ...methods.parsing import (
    FORMALISATION_KEYS,
    InitialScores,
    Unparseable,
    parse_formalisation,
    parse_initial_scores,
)
from ...methods.registry import ADAPTIVE_MAX_STEPS, AUTO, INFORMATION_MAX_STEPS
from ...models import (
    Formalisation,
    IdeaRating,
    JudgeRun,
    Judgment,
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
)

Method = JudgeRun.Method
Verdict = PairwiseOutcome.Verdict


LIGBENCH_NOVELTY = "ligbench_novelty"
"""IdeaRating dimension of LigBench's fused novelty (not the review form's "novelty")."""
NOVELTY_LLM = "novelty_llm"
"""Judgment metric of the judge's own 0–5 novelty estimate (s_LLM in LigBench's fusion)."""
INITIAL_PREFIX = "ligbench_initial_"
"""Judgment metric prefix of the judge's initial score per dimension (`…_rating`, …)."""
_VALUE = {"A": 1.0, "B": 0.0, "tie": 0.5}


def schedule_from(params: dict[str, Any]) -> Schedule:
    """The run's comparison schedule; `max_steps` "auto" is the selection rule's default.

    Runs created before the posterior options existed lack them and keep what they did
    then: the Elo chain's own final score (`estimate` "chain")."""
    selection = str(params.get("selection", "paper"))
    steps = params["max_steps"]
    if steps == AUTO:
        steps = {"information": INFORMATION_MAX_STEPS, "nearest": ADAPTIVE_MAX_STEPS}.get(
            selection, MAX_STEPS
        )
    try:
        return Schedule(
            selection=selection,
            epsilon=float(params["epsilon"]),
            max_steps=int(steps),
            d=float(params["d"]),
            k_max=float(params["k_max"]),
            gamma=float(params["gamma"]),
            seed=params.get("seed", 0),
            estimate=str(params.get("estimate", "chain")),
            prior_sd=float(params.get("prior_sd", PRIOR_SD)),
            slope=float(params.get("slope", SLOPE)),
            lapse=float(params.get("lapse", LAPSE)),
            sd_stop=float(params.get("sd_stop", SD_STOP)),
            probe_sd=float(params.get("probe_sd", PROBE_SD)),
        )
    except ValueError as exc:
        raise JudgeRunRefused(f"ligbench: {exc}") from exc


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
    """LigBench against a reference corpus, as the paper runs it.

    Stage 1 formalises every idea. Stage 2 starts once every formalisation is stored: each
    formalised idea gets its `references` most related papers (BM25 and MiniLM cosine
    over the four parts), and then, one call at a time:

    1. initial scoring: the judge reads `calibration` related papers (spread over their
       score range by default) with their venue-debiased scores and scores the idea on every dimension (and its own novelty
       estimate s_LLM), reasons first;
    2. comparisons: the schedule (`judging.methods.ligbench`) names the next reference
       (the paper's seeded random order, or the one nearest the current score), the judge
       compares, every dimension's Elo chain takes the step, and the next reference is
       asked for only while some chain still runs. No call is made after the chains stop.

    Every decision is a pure function of the stored rows, so a resumed run continues each
    chain where it stopped. Novelty fuses s_LLM with the similarity of the idea to its
    most related papers (α, k, μ, β per run).
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
        self.schedule = schedule_from(p)
        if p.get("calibration_choice", "related") not in EXAMPLE_CHOICES:
            raise JudgeRunRefused(
                f"ligbench: calibration_choice must be one of {', '.join(EXAMPLE_CHOICES)}"
            )
        self.novelty = bool(p["novelty"])
        self.asks_initial = p["initial"] == AUTO or self.novelty
        self.total = len(self.ideas) * (
            1 + int(self.asks_initial) + min(self.k, self.schedule.max_steps)
        )
        self.forms: dict[int, dict[str, str] | None] = {}
        self.hits: dict[int, list[Any]] = {}
        self.papers: dict[int, ReferencePaper] = {}
        self.initial: dict[int, dict[str, float | None]] = {}
        self.played: dict[int, list[tuple[int, dict[str, float | None]]]] = defaultdict(list)
        self.stage2_started = False
        self._calibration: dict[str, Any] | None = None
        self.left: dict[int, int] = {}

    # --- reading what is stored ---------------------------------------------------

    def load(self) -> list[Unit]:
        self.forms = {f.idea_id: f.parts for f in Formalisation.objects.filter(run=self.run)}
        self.played = defaultdict(list)
        bad = 0
        by_pair: dict[tuple[int, int], dict[str, float | None]] = {}
        for idea_id, ref_id, dim, verdict in (
            ReferenceComparison.objects.filter(run=self.run)
            .order_by("pk")
            .values_list("idea_id", "reference_id", "dimension", "verdict")
        ):
            if (idea_id, ref_id) not in by_pair:
                by_pair[(idea_id, ref_id)] = {}
                self.played[idea_id].append((ref_id, by_pair[(idea_id, ref_id)]))
            by_pair[(idea_id, ref_id)][dim] = _VALUE.get(verdict)
        bad += sum(all(v is None for v in o.values()) for o in by_pair.values())
        self.initial = defaultdict(dict)
        for idea_id, metric, score in Judgment.objects.filter(
            run=self.run, metric__startswith=INITIAL_PREFIX
        ).values_list("idea_id", "metric", "score"):
            self.initial[idea_id][metric.removeprefix(INITIAL_PREFIX)] = score
        bad += sum(all(v is None for v in s.values()) for s in self.initial.values())
        self.done = len(self.forms) + len(self.initial) + len(by_pair)
        self.unparseable = sum(v is None for v in self.forms.values()) + bad
        units = [
            Unit(
                ("form", i.pk),
                prompts.formalisation_messages(self.text[i.pk]),
                prompts.LIGBENCH_FORMALISATION.id,
            )
            for i in self.ideas
            if i.pk not in self.forms
        ]
        return units or self._stage2()

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

    def _stage2(self) -> list[Unit]:
        self.stage2_started = True
        units = [u for target in self._retrieve() if (u := self._next(target)) is not None]
        self._recount()
        return units

    # --- the schedule -------------------------------------------------------------

    def _pool(self, target: int) -> dict[Hashable, dict[str, float]]:
        return {
            h.id: {d: cast(float, self.papers[h.id].debiased(d)) for d in self.dimensions}
            for h in self.hits[target]
        }

    def _examples(self, target: int) -> list[ReferencePaper]:
        """The scored related references the initial-scoring call shows (spread over
        their mean debiased score on the run's dimensions, or the most related)."""
        pool = self._pool(target)
        mean = {ref: sum(s.values()) / len(s) for ref, s in pool.items()}
        chosen = calibration_examples(
            [h.id for h in self.hits[target]],
            mean,
            int(self.params["calibration"]),
            # Runs created before the choice existed showed the most related references.
            str(self.params.get("calibration_choice", "related")),
        )
        return [self.papers[cast(int, ref)] for ref in chosen]

    def _start(self, target: int) -> tuple[dict[str, float], str]:
        """The chains' initial scores and where they came from."""
        p = self.params
        if p["initial"] != AUTO:
            return dict.fromkeys(self.dimensions, float(p["initial"])), "fixed"
        asked = self.initial.get(target, {})
        if asked and all(asked.get(d) is not None for d in self.dimensions):
            return {d: cast(float, asked[d]) for d in self.dimensions}, "judge"
        examples = self._examples(target)
        means = {
            d: sum(cast(float, r.debiased(d)) for r in examples) / len(examples)
            for d in self.dimensions
        }
        return means, "examples' mean (the judge's initial scores were unparseable)"

    def _chains(self, target: int) -> dict[str, Any]:
        return replay(
            self._start(target)[0], self._pool(target), self.played[target], self.schedule
        )

    def _next(self, target: int) -> Unit | None:
        """The idea's next call: its initial scoring, then one comparison at a time."""
        if self.asks_initial and target not in self.initial:
            examples = [
                (r.parts(), {d: cast(float, r.debiased(d)) for d in self.dimensions})
                for r in self._examples(target)
            ]
            msgs = prompts.ligbench_initial_messages(
                cast(dict, self.forms[target]), examples, self.dimensions, novelty=self.novelty
            )
            return Unit(("init", target), msgs, prompts.LIGBENCH_INITIAL.id)
        chains = self._chains(target)
        played = [ref for ref, _ in self.played[target]]
        ref = next_reference(chains, self._pool(target), played, self.schedule, target)
        if ref is None:
            return None
        ref = cast(int, ref)
        rank = next(n for n, h in enumerate(self.hits[target], 1) if h.id == ref)
        target_first = coin("ligbench-ref", self.params["seed"], target, ref)
        form, paper = cast(dict, self.forms[target]), self.papers[ref].parts()
        a, b = (form, paper) if target_first else (paper, form)
        return Unit(
            ("ref", target, ref, target_first, rank),
            prompts.ligbench_comparison_messages(a, b, self.dimensions),  # type: ignore[arg-type]
            prompts.LIGBENCH_COMPARISON.id,
        )

    def _remaining(self, target: int) -> int:
        """Calls this idea may still need (an upper bound until its chains stop)."""
        if self.asks_initial and target not in self.initial:
            return 1 + min(self.k, self.schedule.max_steps)
        chains = self._chains(target)
        left = self.k - len(self.played[target])
        steps = [
            self.schedule.max_steps - len(c.steps) for c in chains.values() if c.stopped is None
        ]
        return min(left, max(steps)) if steps and left > 0 else 0

    def _recount(self, target: int | None = None) -> None:
        """Total = done + what each idea may still need; only `target` changed (all when
        None), so a unit costs one chain replay, not one per idea."""
        for t in self.hits if target is None else [target]:
            self.left[t] = self._remaining(t)
        self.total = self.done + sum(self.left.values())

    # --- storing answers ----------------------------------------------------------

    def store(self, unit: Unit, call: LLMCall | None) -> bool:
        assert call is not None
        kind = unit.key[0]
        if kind == "form":
            parts = _store_formalisation(self.run, unit.key[1], call)
            self.forms[unit.key[1]] = parts
            return parts is None
        if kind == "init":
            return self._store_initial(unit.key[1], call)
        _, target, ref, target_first, rank = unit.key
        bad = store_reference_verdicts(
            self.run,
            call,
            self.dimensions,
            target_first,
            idea_id=target,
            reference_id=ref,
            rank=rank,
        )
        outcomes = {
            dim: _VALUE.get(v)
            for dim, v in ReferenceComparison.objects.filter(
                run=self.run, idea_id=target, reference_id=ref
            ).values_list("dimension", "verdict")
        }
        self.played[target].append((ref, outcomes))
        return bad

    def _store_initial(self, target: int, call: LLMCall) -> bool:
        keys = list(self.dimensions)
        if self.novelty:
            keys.append(prompts.LIGBENCH_NOVELTY_DIMENSION)
        parsed = parse_initial_scores(call.response_text, keys)
        mark_parsed(call, parsed)
        scores: dict[str, float | None] = dict.fromkeys(keys)
        reasoning = error = ""
        if isinstance(parsed, InitialScores):
            scores.update(parsed.scores)
            reasoning = parsed.reasoning
        else:
            error = parsed.reason
        Judgment.objects.bulk_create(
            [
                Judgment(
                    run=self.run,
                    idea_id=target,
                    metric=NOVELTY_LLM
                    if key == prompts.LIGBENCH_NOVELTY_DIMENSION
                    else INITIAL_PREFIX + key,
                    score=scores[key],
                    rationale=reasoning,
                    parse_error=error,
                    call=call,
                )
                for key in keys
            ]
        )
        self.initial[target] = {d: scores[d] for d in self.dimensions}
        return bool(error)

    def after(self, unit: Unit) -> list[Unit]:
        if unit.key[0] == "form":
            if not self.stage2_started and all(i.pk in self.forms for i in self.ideas):
                return self._stage2()
            return []
        nxt = self._next(unit.key[1])
        self._recount(unit.key[1])
        return [nxt] if nxt is not None else []

    # --- ratings ------------------------------------------------------------------

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
                f"the judge's scores after {int(p['calibration'])} scored related references"
                if p["initial"] == AUTO
                else float(p["initial"])
            ),
            "selection": self.schedule.selection,
            "epsilon": self.schedule.epsilon,
            "max_steps": self.schedule.max_steps,
            "estimate": "posterior" if self.schedule.posterior else self.schedule.estimate,
            "novelty": self.novelty,
        }
        if not self.stage2_started:
            return {**summary, "elo": "not started"}
        llm = dict(
            Judgment.objects.filter(run=self.run, metric=NOVELTY_LLM).values_list(
                "idea_id", "score"
            )
        )
        ratings = []
        comparisons = []
        for target, hits in self.hits.items():
            ratings += self._elo_rows(target)
            comparisons.append(len(self.played[target]))
            if self.novelty and hits:
                near = hits[: max(1, int(p["novelty_references"]))]
                ratings.append(self._novelty(target, near, llm.get(target)))
        IdeaRating.objects.bulk_create(ratings)
        if comparisons:
            summary["comparisons_per_idea"] = sum(comparisons) / len(comparisons)
        if self.novelty and self.hits:
            summary["novelty_calibration"] = self.calibration()
        return summary

    def _elo_rows(self, target: int) -> list[IdeaRating]:
        initial, source = self._start(target)
        chains = finish_chains(self._chains(target))
        final = {
            "initial_source": source,
            "calibration_examples": [r.pk for r in self._examples(target)],
            "comparisons": len(self.played[target]),
        }
        return [
            self._rating_row(target, dim, chain, initial=initial[dim], **final)
            for dim, chain in chains.items()
        ]

    def _rating_row(self, target: int, dim: str, chain: Any, **final: Any) -> IdeaRating:
        """One dimension's rating: the Elo chain's steps (scored by the chain, or by the
        posterior given its verdicts), or the posterior's steps for "information"."""
        sch = self.schedule
        if not isinstance(chain, PosteriorChain):
            row = elo_rating_row(self.run, target, dim, chain, **final)
            if sch.estimate == "posterior":
                post = posterior_of(chain, sch)
                row.score = post.score
                row.history[-1].update(
                    estimate="posterior", chain_score=chain.score, posterior_sd=post.sd
                )
            return row
        steps = [
            {
                "t": s.t,
                "reference": s.reference,
                "reference_score": s.reference_score,
                "outcome": s.outcome,
                "expected": s.expected,
                "score": s.score_after,
                "sd": s.sd_after,
            }
            for s in chain.steps
        ]
        end = {"stopped": chain.stopped, "skipped": chain.skipped, "estimate": "posterior"}
        return IdeaRating(
            run=self.run,
            idea_id=target,
            dimension=f"elo_{dim}",
            score=chain.score,
            history=[*steps, {**end, "posterior_sd": chain.sd, **final}],
        )

    def _novelty(self, target: int, hits: Sequence[Any], s_llm: float | None) -> IdeaRating:
        p = self.params
        sims = [h.cosine for h in hits]
        calibration = self.calibration()
        knobs = {"alpha": float(p["alpha"]), "k": calibration["k"], "mu": calibration["mu"]}
        history: dict[str, Any] = {
            "calibration": calibration["how"],
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

    def calibration(self) -> dict[str, Any]:
        """k and μ of the similarity part: as given, or calibrated for the embedding in
        use on this corpus (computed once per run; the same corpus and seed give the same
        values, so a resumed run agrees with itself)."""
        if self._calibration is None:
            self._calibration = novelty_calibration(
                list(self.papers.values()), self.params, self.papers_vector
            )
        return self._calibration

    def papers_vector(self, paper: ReferencePaper) -> Any:
        from ...corpus import reference_vector

        return reference_vector(paper)


CALIBRATION_SAMPLE = 500
"""Corpus papers whose related papers the calibration reads (all, in a smaller corpus)."""


def novelty_calibration(
    papers: Sequence[ReferencePaper], params: dict[str, Any], vector: Any
) -> dict[str, Any]:
    """k and μ for the run: the given numbers, or a calibration on the corpus.

    Each sampled paper is a query for its `novelty_references` most related other papers
    (the retrieval a run uses, itself excluded); their s_w values are matched to
    PAIR-IQ's distribution (`calibrate_similarity`). A corpus too small or too uniform to
    calibrate on falls back to the paper's values and says so.
    """
    from studies.embeddings import MODEL_NAME

    from ...corpus import reference_corpus_retrieve

    given = {k: params[k] for k in ("k", "mu") if params[k] != AUTO}
    out: dict[str, Any] = {"embedding": MODEL_NAME}
    if len(given) == 2:
        return {**out, "k": float(given["k"]), "mu": float(given["mu"]), "how": "as given"}
    sample = list(papers)
    if len(sample) > CALIBRATION_SAMPLE:
        sample = random.Random(f"novelty-calibration:{params['seed']}").sample(
            sample, CALIBRATION_SAMPLE
        )
    hits = reference_corpus_retrieve(
        papers=papers,
        queries=[p.formal_text() for p in sample],
        k=max(1, int(params["novelty_references"])),
        weight=float(params["retrieval_weight"]),
        exclude=[p.pk for p in sample],
        query_vectors=np.vstack([vector(p) for p in sample]) if sample else None,
    )
    values = [
        weighted_similarity([h.cosine for h in h_], float(params["alpha"])) for h_ in hits if h_
    ]
    try:
        cal = calibrate_similarity(values)
    except ValueError as exc:
        return {**out, "k": K, "mu": MU, "how": f"the paper's values ({exc})"}
    found = {"k": cal.k, "mu": cal.mu, **{k: float(v) for k, v in given.items()}}
    return {**out, **cal.as_dict(), **found}
