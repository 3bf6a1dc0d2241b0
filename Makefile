# One entry point for people and CI. Every target creates .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-real lint fmt bench install dev binary clean compiled pure

# What running needs, and nothing more: `make demo` works without the test and lint tools.
$(BIN)/interlock: pyproject.toml
	@echo "make: creating $(VENV) and installing interlock with what it needs to run (first run only; a minute or two)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	@touch $@
	@echo "make: installed $(BIN)/interlock (not on your PATH: run it as $(BIN)/interlock, or source $(BIN)/activate)"

install: $(BIN)/interlock

# The development tools (pytest, mypy, ruff, shiv, ...), for the targets below that need them.
$(VENV)/.dev: $(BIN)/interlock
	@echo "make: installing the development tools into $(VENV) (first run only)"
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

dev: $(VENV)/.dev

# The README's first command: interlock with no cluster (embedded API server, a demo edge, traces on).
demo: install
	@echo "make: starting $(BIN)/interlock demo (Ctrl-C stops it)"
	@$(BIN)/interlock demo

# The README's second command: the whole test suite. With Go installed it first builds (once,
# cached) the test OpenID provider the identity tests run against, and helm and promtool (the
# chart's and the alerts' checks, tests/charts); without Go those tests skip.
test: dev
	@if command -v go >/dev/null 2>&1; then hack/build-idp.sh >/dev/null; fi
	@if command -v go >/dev/null 2>&1; then hack/build-helm.sh >/dev/null && hack/build-promtool.sh >/dev/null; fi
	$(BIN)/python -m pytest -q

# The same e2e, kube and reliability tests against a real kube-apiserver and etcd on loopback
# (hack/real-cluster.sh, one cluster per session). Needs Go to build the binaries the first time
# (hack/build-real-binaries.sh caches them under ~/.cache/interlock; later runs reuse them).
test-real: dev
	hack/build-real-binaries.sh >/dev/null
	hack/build-helm.sh >/dev/null
	hack/fetch-monitoring-crds.sh >/dev/null
	INTERLOCK_TEST_CLUSTER=real $(BIN)/python -m pytest -q tests/e2e tests/kube tests/reliability \
		tests/charts/test_chart_real.py tests/manifests/test_server_side_validation.py

# The compiled build (setup.py): the edge's hot modules compiled by mypyc into C extensions
# beside their sources (an editable install; needs a C compiler and Python's headers), about
# two fifths fewer instructions per proxied request (docs/benchmarks.md). `make pure` removes them.
compiled: dev
	$(BIN)/pip install -q 'setuptools>=77' wheel
	INTERLOCK_MYPYC=1 $(BIN)/pip install -q --no-build-isolation -e .
	@echo "make: compiled $$(ls interlock/*/*.so interlock/*/*/*.so 2>/dev/null | wc -l) modules in place (make pure removes them)"

pure:
	rm -f interlock/*.so interlock/*/*.so interlock/*/*/*.so interlock_compiled__mypyc*.so

lint: dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict --explicit-package-bases interlock tests/kit

fmt: dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: dev
	$(BIN)/python benchmarks/runtime.py

# One self-contained executable (a shiv zipapp with every dependency inside) for a machine
# with Python 3.11 and nothing else. It unpacks its native wheels under $$SHIV_ROOT (default
# ~/.shiv; set SHIV_ROOT=/tmp on a read-only root filesystem).
# Needs shiv (a dev tool), installed only when missing: a venv that already has it (the test
# suite's, given with -o) must not be reinstalled from another source tree.
binary: install
	@[ -x $(BIN)/shiv ] || $(MAKE) dev
	rm -rf build/binary && mkdir -p dist
	$(BIN)/pip wheel -q --wheel-dir build/binary .
	$(BIN)/shiv --compressed --reproducible -c interlock -o dist/interlock \
		--python '/usr/bin/env python3' --no-index --find-links build/binary interlock
	@echo "built dist/interlock"

clean: pure
	rm -rf $(VENV) build dist *.egg-info

# The convergence harness with many more generated histories than CI runs (200 new ones per lane),
# then the bad-input corpus, security and load tests, on the embedded lane and then on a real
# kube-apiserver and etcd (the real lane takes far longer: see docs/reliability.md, "Convergence
# harness" and "The convergence harness on the real server", for the figures and times).
RELIABILITY_EXAMPLES ?= 200
# The real lane's histories run in this many processes at once, each with its own cluster.
RELIABILITY_SHARDS ?= 4
.PHONY: reliability
reliability: dev
	INTERLOCK_RELIABILITY_EXAMPLES=$(RELIABILITY_EXAMPLES) $(BIN)/python -m pytest -q --timeout=7200 tests/reliability
	hack/build-real-binaries.sh >/dev/null
	INTERLOCK_TEST_CLUSTER=real PYTHON=$(BIN)/python hack/reliability-shards.sh $(RELIABILITY_SHARDS) $(RELIABILITY_EXAMPLES) build/reliability-real
	INTERLOCK_TEST_CLUSTER=real $(BIN)/python -m pytest -q --timeout=7200 tests/reliability \
		--deselect tests/reliability/test_reliability_convergence.py::test_every_output_equals_what_the_final_state_gives

# Soak (docs/reliability.md, "Soak"): the controller for SOAK_MINUTES (default an hour) under steady
# churn, 1,000 open policy watches and steady edge traffic with ModuleSet changes; reports RSS over
# time (MiB/hour after warm-up), actors, watches, fds and tasks at start and end, and the
# differences from a fresh controller (benchmarks/soak.py; niced: it shares the machine). Figures:
# build/soak.json.
SOAK_MINUTES ?= 60
.PHONY: soak
soak: dev
	@mkdir -p build
	nice -n 10 $(BIN)/python benchmarks/soak.py --minutes $(SOAK_MINUTES) --out build/soak.json

# Stress test (docs/reliability.md, "Stress test"): the whole suite STRESS_RUNS times in a row
# (default 5) while a CPU hog loads both cores (stress-ng --cpu 2 when installed, else two
# busy-looping Pythons of our own), so a test that depends on the machine's speed fails here rather
# than by chance in CI. The hog is stopped on every exit (failure and Ctrl-C too). Each run's
# summary and the load average go to build/stress-test.log; the target fails if any run failed.
# Results: docs/reliability.md.
STRESS_RUNS ?= 5
.PHONY: stress-test
stress-test: dev
	@mkdir -p build; log=build/stress-test.log; : > $$log; hogs=""; suite=""; \
	trap 'kill $$hogs $$suite 2>/dev/null; wait $$hogs $$suite 2>/dev/null' EXIT; trap 'exit 130' INT TERM; \
	if command -v stress-ng >/dev/null 2>&1; then \
		stress-ng --cpu 2 --quiet & hogs="$$!"; hog="stress-ng --cpu 2"; \
	else \
		for core in 1 2; do $(PYTHON) -c 'while True: pass' & hogs="$$hogs $$!"; done; \
		hog="2 busy-looping python3"; \
	fi; \
	failed=0; \
	for run in $$(seq 1 $(STRESS_RUNS)); do \
		echo "make: stress run $$run/$(STRESS_RUNS) under $$hog (load $$(cut -d' ' -f1-3 /proc/loadavg))" | tee -a $$log; \
		$(BIN)/python -m pytest -q -p no:cacheprovider > build/stress-run-$$run.log 2>&1 & suite=$$!; \
		if wait $$suite; then result=passed; else result=FAILED; failed=$$((failed + 1)); fi; suite=""; \
		echo "run $$run: $$result: $$(tail -n 1 build/stress-run-$$run.log) (load after $$(cut -d' ' -f1-3 /proc/loadavg))" | tee -a $$log; \
		grep -E '^(FAILED|ERROR) ' build/stress-run-$$run.log | tee -a $$log || true; \
	done; \
	echo "make: $$failed of $(STRESS_RUNS) runs failed (details: build/stress-run-N.log)" | tee -a $$log; \
	[ $$failed -eq 0 ]

# The official Gateway API conformance suite (v1.6.1, profiles GATEWAY-HTTP and GATEWAY-TLS) against
# interlock on a real kube-apiserver, with Pods played by processes in network namespaces of their
# own, all in one network namespace the run creates and deletes (needs root). Builds the suite once
# (cached under ~/.cache/interlock); writes docs/conformance/interlock-v1.6.1-report.yaml and
# docs/conformance/summary.md. How it works: docs/conformance/README.md.
.PHONY: conformance
conformance: dev
	PYTHON=$(BIN)/python hack/conformance/run.sh full
