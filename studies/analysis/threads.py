"""How many threads the BLAS libraries (OpenBLAS, MKL) may use while analysis code runs.

Dense factorisations in the mixed models are small (hundreds to a few thousand rows), and
on a machine whose cores are busy with other work, BLAS threads spin and wait for each
other: one thread is then several times faster than the default of one per core.  The
report and the worker wrap each job in :func:`blas_threads`, with the number from the
``ANALYSIS_BLAS_THREADS`` setting (env ``IDEAREVIEW_BLAS_THREADS``; docs/threads.md).

Pure module: no Django imports.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from threadpoolctl import threadpool_info, threadpool_limits

__all__ = ["blas_thread_counts", "blas_threads"]


@contextmanager
def blas_threads(limit: int | None) -> Iterator[None]:
    """Limit BLAS threads to ``limit`` inside the block (``None`` or 0: leave as is)."""
    if not limit:
        yield
        return
    with threadpool_limits(limits=int(limit), user_api="blas"):
        yield


def blas_thread_counts() -> list[int]:
    """The current thread count of every BLAS library loaded in this process."""
    return [int(i["num_threads"]) for i in threadpool_info() if i.get("user_api") == "blas"]
