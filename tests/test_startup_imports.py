"""What a process pays before it does anything: the libraries loaded at start-up.

Every web worker, Celery worker and management command loads Django's apps and, at its
first request or task, every view and task module. The OpenAI SDK and matplotlib's pyplot
are the costliest of those imports (docs/measurements.md), and most processes never call a
model or draw a figure; they are imported by the functions that use them. A module-level
import of one of them anywhere on the start-up path brings the cost back for every process,
which this test notices.

A Celery worker (through Celery's own start-up path, which runs Django's system checks
unless told not to) or a management command loads the apps and the task modules but no
view: it starts without the analysis libraries too (pandas, scipy, statsmodels), which the
apps' registrations and the services package import only when a report, an assignment or
a study file needs them.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LOADED_ON_USE = ("openai", "matplotlib", "matplotlib.pyplot")
ANALYSIS = ("pandas", "scipy", "statsmodels")

PROBE = """
import json, sys
import django
django.setup()
if {views}:
    from django.urls import get_resolver
    get_resolver().url_patterns  # every view module
from ideareview.celery import app
# What `celery worker` does before it takes a task: import the task modules, through the
# loader, whose signal runs Celery's Django fix-up (and with it whatever that runs).
app.loader.import_default_modules()
print(json.dumps(sorted(m for m in {names} if m in sys.modules)))
"""


def _loaded_at_start_up(
    names: tuple[str, ...], *, views: bool = True, env: dict[str, str] | None = None
) -> list[str]:
    env = {**(os.environ if env is None else env), "DJANGO_SETTINGS_MODULE": "ideareview.settings"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(names=repr(names), views=views)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_process_loads_no_model_client_or_plotting_until_it_uses_one():
    assert _loaded_at_start_up(LOADED_ON_USE) == []


def test_a_worker_or_command_loads_no_analysis_library_until_it_uses_one():
    assert _loaded_at_start_up(ANALYSIS + LOADED_ON_USE, views=False) == []


def test_the_probe_sees_a_library_the_start_up_path_does_load():
    # The same probe finds what is loaded eagerly, so the test above can fail.
    assert _loaded_at_start_up(("numpy", "celery")) == ["celery", "numpy"]
    # the web's views do use the analysis (the services they call import it)
    assert _loaded_at_start_up(("pandas",)) == ["pandas"]
    # and a worker that runs Django's checks at start-up loads them all
    checks = {**os.environ, "CELERY_SKIP_CHECKS": ""}
    assert _loaded_at_start_up(("pandas", "studies.views.reviewer"), views=False, env=checks) == [
        "pandas",
        "studies.views.reviewer",
    ]


def test_a_figure_loads_pyplot_with_the_figures_style():
    from studies.analysis.plots import histogram, pyplot

    svg = histogram([1.0, 2.0, 2.5], xlabel="x")
    assert svg.startswith("<svg") and "matplotlib.pyplot" in sys.modules
    # One style for every figure: the report's settings are in force once pyplot is loaded.
    assert pyplot().rcParams["svg.fonttype"] == "none"
    assert pyplot().rcParams["font.size"] == 9


def test_every_name_the_services_package_offers_is_there_when_first_used():
    # The package lists its names twice (for the type checker, and where each is defined
    # for the loader); a name in one list only would fail at its first use in a request.
    from studies import services

    eager = {"audit", "audit_chain_check"}
    assert set(services.__all__) == set(services._DEFINED_IN) | eager
    for name in services.__all__:
        module = services._DEFINED_IN.get(name, ".audit")
        defined = vars(importlib.import_module(module, "studies.services"))
        assert getattr(services, name) is defined[name], name
