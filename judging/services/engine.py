"""The engine that executes a driver's units: a thread pool for HTTP, every database
write on the calling thread, grouped commits, cancel and budget checks between units.

Units are sent through the LLM layer's send pool (`llm/pool.py`, shared with
normalization), `config.concurrency` calls at a time; the threads only
do HTTP (`client.send`) and the calling thread does every database write, which keeps
SQLite happy and the run's bookkeeping single-threaded. Between units the engine checks
the cancel flag, its lease (a run marked lost or taken over by another worker is no
longer its to run) and the budget; when any of them stops the run it lets the calls in
flight finish and records them, so nothing paid for is lost.

Writes are grouped into one transaction per COMMIT_EVERY (0.25 s): a commit on an
fsynced SQLite file costs more than a unit's bookkeeping. A crash Python sees (an
exception, a soft time limit) still records the calls in flight and commits; a hard kill
loses at most the last 0.25 s of rows, and resuming then re-asks (and re-pays) only those
calls. The pool is refilled before a finished call is booked, so the endpoint stays busy.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from llm.client import (
    Attempt,
    Prepared,
    budget_problem,
    lookup,
    prepare,
    provider_cap_problem,
    record,
    run_spend,
)
from llm.models import LLMCall
from llm.pool import SendPool

from ..methods.schemas import response_format
from ..models import JudgeRun
from .base import Driver, Unit

log = logging.getLogger("judging.services")

PROGRESS_EVERY = 0.5
"""Seconds between progress writes to the run row (and heartbeats)."""
COMMIT_EVERY = 0.25
"""Seconds of work grouped into one transaction. A commit on an fsynced SQLite file costs
more than a whole call's bookkeeping; a hard kill loses at most this
much work (calls included, which resuming then makes again)."""


class _Batch:
    """One open transaction at a time, committed every COMMIT_EVERY seconds."""

    def __init__(self) -> None:
        self.atomic: Any = None
        self.opened = 0.0

    def ensure(self) -> None:
        if self.atomic is None:
            self.atomic = transaction.atomic()
            self.atomic.__enter__()
            self.opened = time.monotonic()

    def age(self) -> float:
        return time.monotonic() - self.opened if self.atomic is not None else 0.0

    def commit(self) -> None:
        atomic, self.atomic = self.atomic, None
        if atomic is not None:
            atomic.__exit__(None, None, None)

    def maybe_commit(self) -> None:
        if self.age() >= COMMIT_EVERY:
            self.commit()

    def close(self, exc: BaseException | None) -> None:
        """Commit what was done; roll back only if the database itself is in trouble."""
        try:
            self.commit()
        except Exception:
            atomic, self.atomic = self.atomic, None
            if atomic is not None and exc is not None:
                atomic.__exit__(type(exc), exc, exc.__traceback__)
            raise


class Engine:
    def __init__(self, run: JudgeRun, driver: Driver):
        self.run, self.driver = run, driver
        self.config = run.config
        # A panel's judges by seat (0: the run's config); each unit names its seat.
        self.configs = run.panel_configs()
        self.calls, self.cost = run_spend(run)
        self.cache_hits = 0
        self.errors = run.errors
        self.last_error = ""
        self.last_flush = 0.0
        self.stop: tuple[str, str] | None = None
        self.batch = _Batch()
        self.idle = 0.0  # seconds spent waiting for HTTP, to tell our own overhead apart
        self.units = 0
        self.structured_seats = {k for k, c in enumerate(self.configs) if c.structured_outputs}
        """The seats whose judges ask with the method's JSON schema: until their endpoint
        refuses one."""
        self.schema_refused = ""

    def structured_outputs(self) -> dict[str, Any] | None:
        """For the run's summary: whether the judge asked with JSON schemas, and whether
        the endpoint refused them (None: the judge does not use them)."""
        if not (self.config and self.config.structured_outputs):
            return None
        return {"used": self.structured, "refused": self.schema_refused}

    @property
    def structured(self) -> bool:
        """Whether the run's own judge still asks with JSON schemas."""
        return 0 in self.structured_seats

    def extra_summary(self) -> dict[str, Any]:
        """What the engine adds to the run's summary."""
        return {"structured_outputs": self.structured_outputs()}

    def flush(self, force: bool = False, message: str = "") -> None:
        now = time.monotonic()
        if not force and now - self.last_flush < PROGRESS_EVERY:
            return
        self.last_flush = now
        self.batch.ensure()
        d = self.driver
        fields: dict[str, Any] = {
            "done_calls": d.done,
            "total_calls": d.total,
            "unparseable": d.unparseable,
            "http_calls": self.calls,
            "cache_hits": self.run.cache_hits + self.cache_hits,
            "errors": self.errors,
            "cost": self.cost,
            "heartbeat_at": timezone.now(),
            "message": (message or f"{d.done} of {d.total} done")[:500],
        }
        held = JudgeRun.objects.filter(
            pk=self.run.pk,
            lease=self.run.lease,
            status__in=(JudgeRun.Status.RUNNING, JudgeRun.Status.CANCELLED),
        )
        if not held.update(**fields) and self.stop is None:
            # Marked lost, or taken over by another worker: stop sending, book what is
            # in flight (its outcome rows are unique, so nothing counts twice).
            self.stop = ("stopped", "the run is no longer this worker's")
        for k, v in fields.items():
            setattr(self.run, k, v)
        self.run.cache_hits = fields["cache_hits"]
        self.cache_hits = 0
        self.batch.maybe_commit()

    def stopped(self) -> tuple[str, str] | None:
        """Why the run must stop before its next unit: cancelled by the owner, or no
        longer this worker's (marked lost, taken over under another lease)."""
        # Asked before every unit, so kept to one bare indexed read.
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT cancel_requested, lease, status FROM {JudgeRun._meta.db_table} "
                "WHERE id = %s",
                [self.run.pk],
            )
            row = cursor.fetchone()
        if row is None or row[1] != self.run.lease or row[2] == JudgeRun.Status.LOST:
            return ("stopped", "the run is no longer this worker's")
        if row[0]:
            return ("cancelled", "cancelled by the owner")
        return None

    def complete(self, unit: Unit, call: LLMCall | None) -> None:
        self.batch.ensure()
        try:
            with transaction.atomic():
                bad = self.driver.store(unit, call)
        except IntegrityError:
            # Another worker stored this unit first (a run resumed while its old worker was
            # still alive); its row counts, ours would double it.
            log.warning("run %s: unit %s already stored", self.run.pk, unit.key)
            return
        self.driver.done += 1
        self.units += 1
        self.driver.unparseable += bool(bad)
        self.pending.extend(self.driver.after(unit))

    def budget(self, in_flight: int) -> str | None:
        per_call = (self.cost / self.calls) if self.calls else None
        return budget_problem(
            self.run, calls=self.calls, cost=self.cost, in_flight=in_flight, cost_per_call=per_call
        )

    def execute(self) -> None:
        self.pending: deque[Unit] = deque(self.driver.load())
        self.returned: list[tuple[Unit, Prepared, Attempt]] = []
        # A panel shares one pool, no wider than its narrowest member's endpoint allows.
        width = min((c.concurrency for c in self.configs), default=1)
        self.flush(force=True)
        failure: BaseException | None = None
        with SendPool[Unit](width, name="judge") as pool:
            self.pool = pool
            try:
                while self.pending or pool:
                    self._fill()
                    if not pool:
                        if self.stop is not None or not self.pending:
                            break
                        continue
                    # Wake up in time to commit, so the write lock is not held while idle.
                    timeout = (
                        max(0.0, COMMIT_EVERY - self.batch.age()) if self.batch.atomic else 1.0
                    )
                    idle = time.perf_counter()
                    finished = pool.wait(timeout=timeout)
                    self.idle += time.perf_counter() - idle
                    self.returned.extend(pool.returned(finished))
                    # Keep the endpoint busy first; our bookkeeping can wait a moment.
                    self._fill()
                    while self.returned:
                        self._record(*self.returned.pop(0))
                    self.flush()
                    self.batch.maybe_commit()
                    if self.stop is not None and not pool:
                        break
            except BaseException as exc:
                failure = exc
                # Keep what was paid for: record the calls that returned or are in flight.
                for _unit, prepared, attempt in self.returned:
                    with contextlib.suppress(Exception):  # best effort while failing
                        record(prepared, attempt, run=self.run)
                pool.settle(lambda prepared, attempt: record(prepared, attempt, run=self.run))
                raise
            finally:
                self.batch.close(failure)

    def _fill(self) -> None:
        """Start units until the pool is full, answering cache hits and baselines inline."""
        while self.pending and self.pool.has_room() and self.stop is None:
            self.stop = self.stopped()
            if self.stop is not None:
                return
            unit = self.pending.popleft()
            if unit.messages is None:
                self.complete(unit, None)
                self.flush()
                continue
            prepared = self._prepare(unit)
            hit = lookup(prepared)
            if hit is not None:
                self.cache_hits += 1
                self.complete(unit, hit)
                self.flush()
                continue
            problem = self.budget(len(self.pool) + len(self.returned))
            problem = problem or provider_cap_problem(prepared)
            if problem:
                self.stop = ("budget", problem)
                self.pending.appendleft(unit)
                return
            self.pool.submit(prepared, unit)

    def _prepare(self, unit: Unit) -> Prepared:
        config = self.configs[unit.member]
        params = config.parameters or {}
        override: dict[str, Any] = {}
        if unit.seed_offset and "seed" in params:
            # k samples of one prompt: vary the seed so a seeded server does not repeat
            # itself; the salt keeps the cache keys apart either way.
            override["seed"] = int(params["seed"]) + unit.seed_offset
        schema = self.driver.answer_schema(unit) if unit.member in self.structured_seats else None
        if schema is not None:
            name = unit.prompt_version.partition("@")[0] or "answer"
            override["response_format"] = response_format(name, schema)
        return prepare(
            config,
            unit.messages or [],
            prompt_version=unit.prompt_version,
            salt=unit.salt,
            parameters=override or None,
            study_id=self.run.study_id,
        )

    def _record(self, unit: Unit, prepared: Prepared, attempt: Attempt) -> None:
        self.batch.ensure()
        call = record(prepared, attempt, run=self.run)
        if attempt.schema_refused and not attempt.error and unit.member in self.structured_seats:
            # The endpoint answered once the schema was left out: leave it out from now on.
            self.structured_seats.discard(unit.member)
            self.schema_refused = attempt.schema_refused
            log.info("run %s: structured outputs refused (%s)", self.run.pk, self.schema_refused)
        if call.run_id == self.run.pk:
            self.calls += 1
            self.cost += call.cost
        if call.error:
            self.errors += 1
            self.last_error = call.error
            return
        self.complete(unit, call)
