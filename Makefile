# Sparkpoint developer entry points. Everything a fresh machine needs is installed by these targets.
SHELL := /bin/bash
include versions.env

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
CACHE ?= $(HOME)/.cache/sparkpoint
export SPARKPOINT_CACHE := $(CACHE)

.PHONY: help venv minio java prometheus lint test test-full test-unit crd demo bench bench-operator soak cluster-up cluster-down e2e e2e-full operator clean

help:
	@echo "make demo    run a checkpointed streaming job end to end (no cluster needed)"
	@echo "make test    set up everything and run the tests (what CI runs: slow scenarios in sample)"
	@echo "make test-full   the same with every slow scenario (store outages, all operator e2e scenarios)"
	@echo "make bench   run the benchmarks, write docs/benchmarks.md (make bench-operator: only the operator load one)"
	@echo "make soak    long fault-injection run, write docs/reliability.md"
	@echo "make cluster-up / cluster-down / e2e   local Kubernetes cluster and the e2e suite"

# --- setup ---------------------------------------------------------------------------------------
$(VENV)/.installed: pyproject.toml setup.py
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (Python 3.11)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

minio:
	@scripts/ensure-minio.sh >/dev/null

java:
	@scripts/ensure-java.sh

# promtool (alert rule tests) and prometheus (the alerting e2e test): Debian's prometheus package.
prometheus:
	@scripts/ensure-prometheus.sh

# --- checks --------------------------------------------------------------------------------------
# Test tiers: @pytest.mark.slow scenarios (minutes each: real Spark jobs through outages and restarts)
# run in `make test-full` / `make e2e-full`; CI (`make test`) runs the rest plus the slow tests also
# marked @pytest.mark.ci_sample. TIER selects: `make test TIER=full` == `make test-full`.
TIER ?= ci
MARKS_ci := -m "not slow or ci_sample"
MARKS_full :=
MARKS := $(MARKS_$(TIER))

lint: venv
	$(VENV)/bin/ruff check .

test-unit: venv minio java prometheus
	$(PY) -m pytest -q $(MARKS) tests

# The cluster binaries build in the background while the unit and integration tests run (a cold
# build takes about 9 minutes on 2 cores; later runs find them cached), then the e2e suite runs on
# the local cluster, which is stopped again whatever the outcome.
test: venv minio java prometheus lint
	@mkdir -p e2e/local/.state
	@e2e/local/build.sh >e2e/local/.state/build.log 2>&1 & build=$$!; \
	  $(PY) -m pytest -q --durations=15 $(MARKS) tests; unit=$$?; \
	  if ! wait $$build; then echo "cluster build failed:"; tail -50 e2e/local/.state/build.log; exit 1; fi; \
	  [ $$unit -eq 0 ] || exit $$unit; \
	  $(MAKE) --no-print-directory e2e TIER=$(TIER); e2e=$$?; \
	  $(MAKE) --no-print-directory cluster-down; exit $$e2e

# The CRD is generated from the spec model (runtime/config.py); the chart ships a copy.
crd: venv
	$(PY) -m sparkpoint.operator.crd > crds/streamingjob.yaml
	cp crds/streamingjob.yaml charts/sparkpoint/crds/streamingjob.yaml
	$(PY) -m sparkpoint.operator.crd_savepoint > crds/streamingjobsavepoint.yaml && cp crds/streamingjobsavepoint.yaml charts/sparkpoint/crds/

# --- user-facing ---------------------------------------------------------------------------------
demo: venv java
	$(PY) -m sparkpoint.runtime.demo

bench: venv minio java
	$(PY) bench/run_all.py

# Only the operator load benchmark (also part of `make bench`): 100, 300 and 1,000 StreamingJobs
# on the local cluster against stand-in runtimes; writes its section of docs/benchmarks.md.
bench-operator: venv minio
	$(PY) bench/operator_bench.py

soak: venv minio java
	$(PY) -m pytest -q tests/runtime/test_fault_injection.py --soak

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

# --- local Kubernetes cluster and the e2e suite (see e2e/README.md) ------------------------------
# cluster-up is idempotent and prints `export KUBECONFIG=...` as its last line (a contract).
cluster-up: venv minio
	@e2e/local/build.sh >/dev/null
	@$(PY) e2e/local/cluster.py up

cluster-down:
	@$(PY) e2e/local/cluster.py down

e2e: venv minio prometheus
	@e2e/local/build.sh >/dev/null
	$(PY) -m pytest -q -p no:cacheprovider e2e/local/tests
	@line=$$($(PY) e2e/local/cluster.py up | tail -1); \
	  case "$$line" in "export KUBECONFIG="*) ;; *) echo "make e2e: the local cluster did not come up" >&2; exit 1;; esac; \
	  export "$${line#export }"; $(PY) -m pytest -q -p no:cacheprovider --durations=10 $(MARKS) e2e --ignore=e2e/local/tests

test-full:
	@$(MAKE) --no-print-directory test TIER=full

# Every e2e test including the slow operator scenarios (@pytest.mark.slow: each runs a real Spark
# job through restarts, minutes each on two cores).
e2e-full:
	@$(MAKE) --no-print-directory e2e TIER=full

# Run the operator against $$KUBECONFIG (after `kubectl apply -f crds/`), watching every namespace.
operator: venv
	$(VENV)/bin/sparkpoint-operator --all-namespaces
