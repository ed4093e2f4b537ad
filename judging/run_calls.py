"""What a run's calls say about the endpoint: the tokens it paid for (reasoning tokens
among them) and which models, with which system fingerprints, answered. Shown on the run
page and in the report's judge section, so a reader can tell whether one model version
produced every verdict."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.db.models import Q

from llm.models import LLMCall
from llm.spend import answering_models, token_totals

from .models import JudgeRun, Judgment, PairwiseOutcome


def run_calls(run: JudgeRun) -> dict[str, Any]:
    """`tokens`: totals over the calls the run paid for; `models`: the answering models
    and fingerprints of every call its results cite (cache hits from earlier runs
    included); `structured_outputs`: the summary's note, when the judge asked with
    schemas."""
    paid = LLMCall.objects.filter(run=run)
    cited = LLMCall.objects.filter(
        Q(run=run)
        | Q(pk__in=Judgment.objects.filter(run=run).values("call_id"))
        | Q(pk__in=PairwiseOutcome.objects.filter(run=run).values("call_id"))
    )
    return {
        "tokens": asdict(token_totals(paid)),
        "models": [asdict(m) for m in answering_models(cited)],
        "structured_outputs": (run.summary or {}).get("structured_outputs"),
    }
