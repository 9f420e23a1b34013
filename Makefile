# One command runner for people and CI: the README and .ci/run call these targets.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint typecheck unit integration e2e bench evidence eval chaos clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,llm,compare]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/pressroom demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check orchestrator sagas outbox telemetry evaluation

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest tests/unit tests/contracts

integration: $(STAMP)
	$(BIN)/pytest tests/integration

e2e: $(STAMP)
	$(BIN)/pytest tests/e2e

# The suite on PYTEST_WORKERS processes (0: serial), each test file on one worker
# in its usual order; then the `serial` tests (relays, workers, killed servers:
# see tests/conftest.py) one at a time. Bytecode is compiled first: every test
# starts `pressroom` processes, and with PYTHONDONTWRITEBYTECODE set each would
# compile the project's modules again.
# Three on two cores: much of the suite waits (on timeouts, polls, other processes),
# and a third worker fills that time.
PYTEST_WORKERS ?= 3
test: lint typecheck
	$(BIN)/python -m compileall -q -j 0 orchestrator sagas outbox telemetry roles evaluation
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile -m "not serial"
	$(BIN)/pytest -m serial

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

evidence: $(STAMP)
	$(BIN)/pressroom evidence harness

eval: $(STAMP)
	$(BIN)/pressroom eval

# The chaos suite (not part of `make test`): its own PostgreSQL and Redis, a nemesis, a checker.
# UPGRADE_FROM=REF: instead, a rolling upgrade from REF's release to this tree under load
# (chaos/upgrade.py; docs/deploy.md, "Rolling upgrades"). SOAK=1 passes --soak-minutes
# SOAK_MINUTES (default 60): a soak sampled by chaos/soak.py.
CHAOS_ARGS ?=
UPGRADE_FROM ?=
SOAK ?=
SOAK_MINUTES ?= 60
chaos: $(STAMP)
	$(BIN)/python -m chaos $(if $(UPGRADE_FROM),upgrade --from $(UPGRADE_FROM),$(if $(SOAK),--soak-minutes $(SOAK_MINUTES))) $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
