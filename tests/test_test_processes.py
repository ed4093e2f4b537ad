"""The test processes themselves: one BLAS thread in each (tests/conftest.py, docs/threads.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from studies.analysis.threads import blas_thread_counts

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def test_processes_the_tests_start_load_blas_with_one_thread() -> None:
    # What a Celery worker process or Rscript a test starts inherits.
    assert {v: os.environ.get(v) for v in THREAD_VARIABLES} == dict.fromkeys(THREAD_VARIABLES, "1")
    code = (
        "import json, numpy, scipy.linalg; from threadpoolctl import threadpool_info; "
        "print(json.dumps([i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    counts = json.loads(out.stdout)
    assert counts and set(counts) == {1}


def test_an_xdist_worker_runs_one_blas_thread() -> None:
    # The workers start after the conftest set the environment, so their numpy loads with
    # one thread; a one-process run (-n 0) had numpy loaded before and keeps the default.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        assert set(blas_thread_counts()) == {1}
    else:
        assert blas_thread_counts()  # numpy's BLAS is there for the statistics tests
