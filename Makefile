# One entry point for people and CI. Every target creates .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-real lint fmt bench install binary clean

$(BIN)/interlock: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

install: $(BIN)/interlock

# The README's first command: interlock with no cluster (embedded API server, a demo edge, traces on).
demo: install
	$(BIN)/interlock demo

# The README's second command: the whole test suite.
test: install
	$(BIN)/python -m pytest -q

# The same e2e, kube and reliability tests against a real kube-apiserver and etcd on loopback
# (hack/real-cluster.sh, one cluster per session). Needs Go to build the binaries the first time
# (hack/build-real-binaries.sh caches them under ~/.cache/interlock; later runs reuse them).
test-real: install
	hack/build-real-binaries.sh >/dev/null
	INTERLOCK_TEST_CLUSTER=real $(BIN)/python -m pytest -q tests/e2e tests/kube tests/reliability

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict interlock

fmt: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: install
	$(BIN)/python benchmarks/runtime.py

# One self-contained executable (a shiv zipapp with every dependency inside) for a machine
# with Python 3.11 and nothing else. It unpacks its native wheels under $$SHIV_ROOT (default
# ~/.shiv; set SHIV_ROOT=/tmp on a read-only root filesystem).
binary: install
	rm -rf build/binary && mkdir -p dist
	$(BIN)/pip wheel -q --wheel-dir build/binary .
	$(BIN)/shiv --compressed --reproducible -c interlock -o dist/interlock \
		--python '/usr/bin/env python3' --no-index --find-links build/binary interlock
	@echo "built dist/interlock"

clean:
	rm -rf $(VENV) build dist *.egg-info

# Issue 8: the convergence harness with many more generated histories than CI runs, then the
# bad-input corpus, security and load tests (see docs/reliability.md for the figures).
.PHONY: reliability
reliability: install
	INTERLOCK_RELIABILITY_EXAMPLES=200 $(BIN)/python -m pytest -q --timeout=1800 tests/reliability
