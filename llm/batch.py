"""Calls through an endpoint's Batch API: upload the requests as a JSONL file, create a
batch, poll it, read the answers from its output file.

Each line's `custom_id` is the request's method key (what `METHOD_HEADER` carries for a
single call: a batch line has no headers of its own), a dot and the line's number; the
`LLMBatch` row maps it to the call's cache key, so whoever reads the results (the worker
that sent the batch, or the one that took the run over after it died) can tell which
answer is which. Calls are stored by `client.record` as single calls are, with the
prices the caller put on the `Prepared` (the batch price: `batch_priced`).

The same pinned, origin-bound HTTP client as single calls is used, so a batch's key goes
only where its calls would go.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Final

from django.conf import settings
from django.utils import timezone

from .client import Attempt, Prepared, _client, _openai, _short, _success
from .models import LLMBatch

__all__ = [
    "FINISHED",
    "batch_cancel",
    "batch_custom_id",
    "batch_poll",
    "batch_priced",
    "batch_results",
    "batch_submit",
]

ENDPOINT: Final = "/v1/chat/completions"
FINISHED = frozenset({"completed", "failed", "expired", "cancelled"})
"""Remote statuses after which a batch changes no more."""


def batch_priced(prepared: Prepared) -> Prepared:
    """The call at the batch price (settings.LLM_BATCH_PRICE_FACTOR of the judge's)."""
    factor = Decimal(str(settings.LLM_BATCH_PRICE_FACTOR))
    return dataclasses.replace(
        prepared, price_in=prepared.price_in * factor, price_out=prepared.price_out * factor
    )


def batch_custom_id(prepared: Prepared, number: int) -> str:
    return f"{prepared.method_key}.{number}"


def batch_submit(
    items: Sequence[tuple[str, Prepared]], *, run: Any = None, config_id: int | None = None
) -> LLMBatch:
    """Upload the requests and create the batch; the row is saved (and should be
    committed by the caller) before anything else happens."""
    if not items:
        raise ValueError("a batch needs at least one request")
    first = items[0][1]
    client = _client(first)
    lines = [
        json.dumps(
            {"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": prepared.request},
            ensure_ascii=False,
        )
        for cid, prepared in items
    ]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    uploaded = client.files.create(file=("requests.jsonl", data), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint=ENDPOINT, completion_window="24h"
    )
    return LLMBatch.objects.create(
        batch_id=batch.id,
        input_file_id=uploaded.id,
        base_url=first.base_url,
        config_id=config_id,
        run=run,
        requests={cid: prepared.cache_key for cid, prepared in items},
        remote_status=batch.status,
    )


def batch_poll(row: LLMBatch, prepared: Prepared) -> str:
    """Ask the endpoint how the batch stands; the row keeps its status and output file."""
    batch = _client(prepared).batches.retrieve(row.batch_id)
    row.remote_status = batch.status
    row.output_file_id = batch.output_file_id or ""
    if batch.status in FINISHED and batch.status != "completed" and batch.errors:
        row.error = _short("; ".join(e.message or "" for e in batch.errors.data or []))
    LLMBatch.objects.filter(pk=row.pk).update(
        remote_status=row.remote_status, output_file_id=row.output_file_id, error=row.error
    )
    return batch.status


def batch_results(row: LLMBatch, prepared: Prepared) -> dict[str, Attempt]:
    """Each answered line of the batch's output file as an Attempt, by custom id (a line
    the endpoint did not answer is missing)."""
    if not row.output_file_id:
        return {}
    content = _client(prepared).files.content(row.output_file_id)
    out: dict[str, Attempt] = {}
    for line in content.text.splitlines():
        if line.strip():
            entry = json.loads(line)
            out[str(entry.get("custom_id"))] = _attempt(entry)
    return out


def _attempt(entry: dict[str, Any]) -> Attempt:
    result = Attempt(attempts=1)
    response = entry.get("response") or {}
    status, body = response.get("status_code"), response.get("body") or {}
    if entry.get("error") or status != 200:
        error = entry.get("error") or body.get("error") or {}
        message = error.get("message") if isinstance(error, dict) else str(error)
        result.status_code = status if isinstance(status, int) else None
        result.error = f"HTTP {status}: {_short(str(message))}" if status else _short(str(message))
        return result
    try:
        from openai.types.chat import ChatCompletion  # the SDK loads when a call is made

        completion = ChatCompletion.model_validate(body)
    except ValueError as exc:
        result.error = f"malformed completion in the batch output: {_short(str(exc))}"
        return result
    return _success(result, completion)


def batch_finish(row: LLMBatch, status: str) -> None:
    row.status = status
    row.finished_at = timezone.now()
    LLMBatch.objects.filter(pk=row.pk).update(status=status, finished_at=row.finished_at)


def batch_cancel(row: LLMBatch, prepared: Prepared) -> None:
    """Ask the endpoint to stop the batch (what it has answered is still paid for)."""
    try:
        _client(prepared).batches.cancel(row.batch_id)
    except _openai().OpenAIError as exc:
        row.error = _short(f"cancel refused: {exc}")
    batch_finish(row, LLMBatch.Status.CANCELLED)
