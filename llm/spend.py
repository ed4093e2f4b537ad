"""What a study's LLM calls cost, per provider and model, read from the call ledger.

Every call is stored with the study it was made for (`LLMCall.study`), so a study's spend
is a sum over its rows: judge runs, normalization and the leakage check alike. A call the
cache answered was paid once, by the run that made it, and is counted once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from django.db.models import Count, Q, QuerySet, Sum

from .endpoints import providers
from .models import LLMCall


@dataclass(frozen=True)
class SpendRow:
    """One provider (or brought endpoint) and model: its calls and their cost."""

    endpoint: str
    model: str
    calls: int
    failed: int
    input_tokens: int
    output_tokens: int
    cost: Decimal


def endpoint_label(base_url: str, provider: str) -> str:
    """The provider's name for a call made through a provider (researchers never see its
    URL), else the host of the endpoint the judge's creator brought: one brought at a
    provider's very URL is still theirs, so it is not named after the provider."""
    if provider:
        return f"provider {provider}"
    url = base_url.rstrip("/")
    return f"own endpoint {urlsplit(url).hostname or url}"


def _provider_recorded_before(row: Mapping[str, Any]) -> str:
    """Whose endpoint a call recorded before calls named their provider went to: its
    judge's, as the judge is now, or (the judge gone) the provider at its URL, since a
    provider's address must not be shown as an own endpoint's host."""
    if row["config"] is not None:
        if row["config__provider"]:
            return str(row["config__provider"])
        brought = row["config__base_url"] or row["config__is_baseline"]
        return "" if brought else "default"
    url = row["base_url"].rstrip("/")
    return next((p.name for p in providers() if p.base_url == url), "")


def provider_calls(name: str, base_url: str) -> QuerySet[LLMCall]:
    """Every call that counts against provider `name` (at `base_url`), across studies and
    researchers: the calls recorded as going to it, and of those recorded before calls
    named their provider, the ones `_provider_recorded_before` credits to it. A
    researcher's own endpoint at the provider's very URL is theirs, and not counted."""
    named_by_judge = Q(config__provider=name)
    if name == "default":
        # A judge that names no endpoint at all used the default provider.
        named_by_judge |= Q(
            config__isnull=False,
            config__provider="",
            config__base_url="",
            config__is_baseline=False,
        )
    judge_gone = Q(config__isnull=True, base_url=base_url.rstrip("/"))
    return LLMCall.objects.filter(
        Q(provider=name) | Q(provider__isnull=True) & (named_by_judge | judge_gone)
    )


def study_spend(*, study_id: int) -> list[SpendRow]:
    """The study's calls per endpoint and model, the dearest first."""
    rows = (
        LLMCall.objects.filter(study_id=study_id)
        .values(
            "base_url",
            "model",
            "provider",
            "config",
            "config__provider",
            "config__base_url",
            "config__is_baseline",
        )
        .annotate(
            calls=Count("id"),
            failed=Count("id", filter=~Q(error="")),
            input_tokens=Sum("input_tokens"),
            output_tokens=Sum("output_tokens"),
            cost=Sum("cost"),
        )
        .order_by()
    )
    merged: dict[tuple[str, str], SpendRow] = {}
    for row in rows:
        provider = row["provider"]
        if provider is None:
            provider = _provider_recorded_before(row)
        key = (endpoint_label(row["base_url"], provider), row["model"])
        before = merged.get(key)
        merged[key] = SpendRow(
            endpoint=key[0],
            model=key[1],
            calls=row["calls"] + (before.calls if before else 0),
            failed=row["failed"] + (before.failed if before else 0),
            input_tokens=(row["input_tokens"] or 0) + (before.input_tokens if before else 0),
            output_tokens=(row["output_tokens"] or 0) + (before.output_tokens if before else 0),
            cost=Decimal(row["cost"] or 0) + (before.cost if before else Decimal(0)),
        )
    return sorted(merged.values(), key=lambda r: (-r.cost, r.endpoint, r.model))


@dataclass(frozen=True)
class TokenTotals:
    """Calls and their tokens; `reasoning_tokens` are part of `output_tokens`."""

    calls: int
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cost: Decimal


def token_totals(calls: QuerySet[LLMCall]) -> TokenTotals:
    agg = calls.aggregate(
        n=Count("id"),
        i=Sum("input_tokens"),
        o=Sum("output_tokens"),
        r=Sum("reasoning_tokens"),
        c=Sum("cost"),
    )
    return TokenTotals(
        calls=agg["n"] or 0,
        input_tokens=agg["i"] or 0,
        output_tokens=agg["o"] or 0,
        reasoning_tokens=agg["r"] or 0,
        cost=Decimal(agg["c"] or 0),
    )


@dataclass(frozen=True)
class AnsweringModel:
    """A model as the endpoint named it in its answers, with the fingerprint it gave."""

    requested: str
    answered: str
    fingerprint: str
    calls: int


def answering_models(calls: QuerySet[LLMCall]) -> list[AnsweringModel]:
    """The distinct (requested model, answering model, system fingerprint) of the
    successful calls, the most frequent first. Two fingerprints for one model mean the
    provider changed its serving set-up while the calls were made."""
    rows = (
        calls.filter(error="")
        .values("model", "response_model", "system_fingerprint")
        .annotate(n=Count("id"))
    )
    found = [
        AnsweringModel(r["model"], r["response_model"], r["system_fingerprint"], r["n"])
        for r in rows
    ]
    return sorted(found, key=lambda m: (-m.calls, m.requested, m.answered, m.fingerprint))
