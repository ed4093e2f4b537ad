"""The send pool that judge runs and normalization share: up to `width` requests on the
wire at once, HTTP only in the worker threads, and every database write left to the
calling thread, which hands in prepared calls and takes back what they returned.

    with SendPool(width, name="judge") as pool:
        while ...:
            while work and pool.has_room():
                pool.submit(prepared, tag)
            for tag, prepared, attempt in pool.returned(pool.wait(timeout=...)):
                record(prepared, attempt)

A caller's own futures (e.g. checks run beside the calls) can be waited on with the
calls (`wait(also=...)`). On failure `settle` records what is in flight, so nothing paid
for is lost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Generic, TypeVar

from .client import Attempt, Prepared, send

T = TypeVar("T")


class SendPool(Generic[T]):
    def __init__(self, width: int, *, name: str) -> None:
        self.width = max(1, int(width))
        self.name = name
        self.in_flight: dict[Future[Attempt], tuple[T, Prepared]] = {}
        self._executor: ThreadPoolExecutor | None = None

    def __enter__(self) -> SendPool[T]:
        self._executor = ThreadPoolExecutor(max_workers=self.width, thread_name_prefix=self.name)
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._executor is not None
        self._executor.shutdown(wait=True)
        self._executor = None

    def __len__(self) -> int:
        return len(self.in_flight)

    def has_room(self) -> bool:
        return len(self.in_flight) < self.width

    def submit(self, prepared: Prepared, tag: T) -> None:
        """Send `prepared` on a worker thread (retries inside); `tag` comes back with it."""
        assert self._executor is not None, "use the pool as a context manager"
        self.in_flight[self._executor.submit(send, prepared)] = (tag, prepared)

    def wait(
        self, *, also: Iterable[Future[Any]] = (), timeout: float | None = None
    ) -> set[Future[Any]]:
        """Block until one call (or one of `also`) finishes, or `timeout` passes."""
        waiting: list[Future[Any]] = [*self.in_flight, *also]
        if not waiting:
            return set()
        finished, _ = wait(waiting, timeout=timeout, return_when=FIRST_COMPLETED)
        return finished

    def returned(self, finished: Iterable[Future[Any]]) -> list[tuple[T, Prepared, Attempt]]:
        """The calls among `finished`, taken out of the pool, in the order given."""
        out = []
        for future in finished:
            if future in self.in_flight:
                tag, prepared = self.in_flight.pop(future)
                out.append((tag, prepared, future.result()))
        return out

    def settle(self, record: Callable[[Prepared, Attempt], Any]) -> None:
        """While failing: wait for the calls in flight and record each (best effort)."""
        for future, (_tag, prepared) in list(self.in_flight.items()):
            with contextlib.suppress(Exception):
                record(prepared, future.result(timeout=prepared.timeout))
        self.in_flight.clear()
