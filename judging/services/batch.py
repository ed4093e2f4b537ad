"""Batch mode: a judge run's calls sent through the endpoint's Batch API instead of one
by one (a run made with the parameter `"batch": true`).

The engine takes every unit that can be asked now (cache hits and rule-decided units are
answered at once, as in the ordinary engine), sends the ones that need a call as one
batch (`llm/batch.py`), polls it every settings.LLM_BATCH_POLL_SECONDS, and books the
answers when it completes; units that become possible only then (a Swiss round after
the last) go in the next batch. Calls are priced at the batch price
(settings.LLM_BATCH_PRICE_FACTOR of the judge's prices).

A worker restart: the batch's row (`LLMBatch`) is committed as soon as the endpoint has
accepted it. A run resumed after its worker died finds its pending batch and goes on
polling it, instead of sending (and paying for) the same calls again. A cancelled run
asks the endpoint to cancel its batch.

Budgets: a batch is at most the calls the run's call budget has left and, once the run
has a cost per call, what its cost budget has left at that rate; the first batch of a
run with only a cost budget can exceed it, since every call of a batch is paid.
"""

from __future__ import annotations

import math
import time
from typing import Any

from django.conf import settings

from llm.batch import (
    FINISHED,
    batch_cancel,
    batch_custom_id,
    batch_finish,
    batch_poll,
    batch_priced,
    batch_results,
    batch_submit,
)
from llm.client import Attempt, Prepared, lookup, provider_cap_problem
from llm.models import LLMBatch

from .base import Unit
from .engine import Engine

sleep = time.sleep
"""How the engine waits between polls (tests replace it)."""


class BatchEngine(Engine):
    def _prepare(self, unit: Unit) -> Prepared:
        return batch_priced(super()._prepare(unit))

    def extra_summary(self) -> dict[str, Any]:
        rows = LLMBatch.objects.filter(run=self.run).order_by("pk")
        return {
            **super().extra_summary(),
            "batches": [
                {
                    "batch": b.batch_id,
                    "calls": len(b.requests),
                    "status": b.status,
                    "remote_status": b.remote_status,
                }
                for b in rows
            ],
        }

    def execute(self) -> None:
        from collections import deque

        self.pending = deque(self.driver.load())
        self.returned = []
        self.flush(force=True)
        failure: BaseException | None = None
        try:
            while self.pending and self.stop is None:
                self.stop = self.stopped()
                if self.stop is not None:
                    break
                row, wave = self._wave()
                if wave:
                    self._run_wave(row, wave)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            self.batch.close(failure)

    def _room(self) -> int | None:
        """How many calls the next batch may hold (None: no limit); 0 stops the run."""
        problem = self.budget(0)
        if problem:
            self.stop = ("budget", problem)
            return 0
        room: float = math.inf
        if self.run.budget_calls is not None:
            room = self.run.budget_calls - self.calls
        if self.run.budget_cost is not None and self.calls and self.cost > 0:
            room = min(
                room, math.floor((self.run.budget_cost - self.cost) / (self.cost / self.calls))
            )
        if room <= 0:
            self.stop = ("budget", "budget reached: no call of the next batch fits")
            return 0
        return None if room == math.inf else int(room)

    def _wave(self) -> tuple[LLMBatch | None, list[tuple[Unit, Prepared]]]:
        """The pending batch of the run and its units, or the units for a new batch."""
        row = LLMBatch.objects.filter(run=self.run, status=LLMBatch.Status.PENDING).first()
        keys = set(row.requests.values()) if row is not None else None
        room = None if row is not None else self._room()
        if room == 0:
            return None, []
        wave: list[tuple[Unit, Prepared]] = []
        later: list[Unit] = []
        while self.pending:
            unit = self.pending.popleft()
            if unit.messages is None:
                self.complete(unit, None)
                continue
            prepared = self._prepare(unit)
            hit = lookup(prepared)
            if hit is not None:
                self.cache_hits += 1
                self.complete(unit, hit)
                continue
            full = room is not None and len(wave) >= room
            if (keys is not None and prepared.cache_key not in keys) or full:
                later.append(unit)
            else:
                wave.append((unit, prepared))
        self.pending.extend(later)
        self.flush(force=True)
        if row is not None and not wave:
            # Every call of the pending batch was booked before a restart: it is done.
            batch_finish(row, LLMBatch.Status.DONE)
            return None, []
        if row is None and wave:
            capped = provider_cap_problem(wave[0][1])
            if capped:
                self.stop = ("budget", capped)
                self.pending.extendleft(u for u, _ in reversed(wave))
                return None, []
        return row, wave

    def _run_wave(self, row: LLMBatch | None, wave: list[tuple[Unit, Prepared]]) -> None:
        by_key = {prepared.cache_key: (unit, prepared) for unit, prepared in wave}
        first = wave[0][1]
        if row is None:
            items = [(batch_custom_id(p, n), p) for n, (_, p) in enumerate(wave)]
            self.batch.commit()  # the row below is committed on its own, at once
            row = batch_submit(items, run=self.run, config_id=first.config_id)
        status = self._wait(row, first)
        if status is None:
            self.pending.extendleft(u for u, _ in reversed(list(by_key.values())))
            return
        answers = batch_results(row, first)
        for custom_id, key in row.requests.items():
            if key not in by_key:
                continue  # booked before a restart
            unit, prepared = by_key.pop(key)
            attempt = answers.get(custom_id) or Attempt(
                attempts=1, error=f"batch {row.batch_id} ended {status} without answering it"
            )
            self._record(unit, prepared, attempt)
            self.flush()
            self.batch.maybe_commit()
        self.pending.extend(unit for unit, _ in by_key.values())
        batch_finish(row, LLMBatch.Status.DONE if status == "completed" else LLMBatch.Status.FAILED)
        self.flush(force=True)
        self.batch.commit()

    def _wait(self, row: LLMBatch, prepared: Prepared) -> str | None:
        """Poll until the batch is finished (its remote status), or None when the run
        stops first (cancelled: the batch is cancelled too; taken over: it is left for
        the worker that took the run)."""
        while True:
            status = batch_poll(row, prepared)
            if status in FINISHED:
                return status
            self.flush(
                force=True, message=f"batch {row.batch_id} {status}: {len(row.requests)} calls"
            )
            self.batch.commit()
            self.stop = self.stopped()
            if self.stop is not None:
                if self.stop[0] == "cancelled":
                    batch_cancel(row, prepared)
                return None
            sleep(settings.LLM_BATCH_POLL_SECONDS)
