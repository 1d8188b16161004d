# Two entry points for a fresh machine: `make demo` and `make test` (what CI runs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --quiet --disable-pip-version-check
# Everything the test suite exercises; `local` compiles llama.cpp (about 10 minutes the
# first time; pip caches the wheel).
TEST_EXTRAS ?= offline,test,openai,gemini,local,vec,tokens,watch,langchain,secrets,graph,postgres

.PHONY: demo test lint clean system-deps pg pg-stop pg-status

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

$(VENV)/.demo-deps: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[offline]'
	touch $@

$(VENV)/.test-deps: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[$(TEST_EXTRAS)]'
	touch $@

## demo: set up .venv, index the sample workspace and search it on the embedded default
demo: $(VENV)/.demo-deps
	$(BIN)/memmw --workspace examples/workspace --state-dir .memmw-demo index
	$(BIN)/memmw --workspace examples/workspace --state-dir .memmw-demo search "which machine runs the gateway?"
	@echo
	@echo "memmw is installed in $(VENV). To run it:"
	@echo "  . $(VENV)/bin/activate    # then: memmw --help, memmw -w examples/workspace status"
	@echo "  $(BIN)/memmw --help  # or call it by its path, without activating"
	@echo "To install it for your own projects, see 'Install' in README.md."

## system-deps: Debian packages the tests need (chromium for the graph page test)
system-deps:
	sh scripts/install-test-deps.sh

## test: set up .venv with every extra and the system packages, then lint, type-check and test
## against a local PostgreSQL + pgvector server, started before pytest and stopped after it
test: $(VENV)/.test-deps system-deps lint
	$(BIN)/python scripts/pgserver.py run -- $(BIN)/python -m pytest

## pg: start the local PostgreSQL + pgvector server (PyPI wheel, 127.0.0.1) and print its DSN;
## pytest finds it through .cache/pgserver/dsn
pg: | $(BIN)/python
	$(BIN)/python scripts/pgserver.py start

## pg-stop: stop the local server (its data stays in .cache/pgserver)
pg-stop:
	$(PYTHON) scripts/pgserver.py stop

pg-status:
	$(PYTHON) scripts/pgserver.py status || true

lint: $(VENV)/.test-deps
	$(BIN)/ruff check memmw tests benchmarks examples
	$(BIN)/mypy

clean:
	$(PYTHON) scripts/pgserver.py wipe
	rm -rf $(VENV) .memmw-demo .mypy_cache .ruff_cache .pytest_cache
