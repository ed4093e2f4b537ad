"""Judge validation on reference-corpus pairs (LigBench's judge check)."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any, cast

import numpy as np

from llm.models import LLMCall
from studies.analysis.rounding import counted

from ...methods import prompts
from ...methods.validation import Trial, pairwise_accuracy
from ...models import JudgeRun, PairwiseOutcome, ReferenceComparison, ReferencePaper
from ..base import (
    Driver,
    JudgeRunRefused,
    Unit,
    coin,
    corpus_for,
    store_reference_verdicts,
)

Method = JudgeRun.Method
Verdict = PairwiseOutcome.Verdict


class ValidationDriver(Driver):
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
        self.corpus, self.eligible = corpus_for(p, self.dimensions)
        n = self.eligible.count()
        if n < 2:
            raise JudgeRunRefused(
                f"corpus {self.corpus.name!r} has {counted(n, 'paper')} with all four parts and scores; "
                "validation needs at least two"
            )
        self.orders = 2 if p["both_orders"] else 1
        self.wanted = max(1, min(int(p["pairs"]), n * (n - 1) // 2))
        self.total = self.wanted * self.orders
        self.pairs: list[tuple[int, int]] = []
        self.papers: dict[int, ReferencePaper] = {}

    def _sample(self) -> None:
        from ...corpus import reference_corpus_embed, reference_corpus_retrieve, reference_vector

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
            firsts = [True, False] if self.orders == 2 else [coin("validation", seed, a, b)]
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
        return store_reference_verdicts(
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
