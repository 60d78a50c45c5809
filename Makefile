# Sparkpoint developer entry points. Everything a fresh machine needs is installed by these targets.
SHELL := /bin/bash
include versions.env

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
CACHE ?= $(HOME)/.cache/sparkpoint
export SPARKPOINT_CACHE := $(CACHE)
# Recipes call sub-makes through SUBMAKE, not $(MAKE) directly: make runs every line that names
# $(MAKE) even under `make -n`, so a dry run of `test` would run the whole test suite.
SUBMAKE = $(MAKE) --no-print-directory

.PHONY: help venv minio java kafka helm prometheus lint test test-full test-unit crd demo demo-kafka bench bench-operator bench-peers bench-rescale bench-executors soak cluster-up cluster-down e2e e2e-full e2e-kind e2e-kind-down chaos monitor operator clean image test-image release own-job-image

help:
	@echo "make demo    run a checkpointed streaming job end to end (no cluster needed)"
	@echo "make demo-kafka   the same for the Kafka example against a local broker"
	@echo "make test    set up everything and run the tests (what CI runs: slow scenarios in sample)"
	@echo "make test-unit   the pure tests only (no MinIO, Java or cluster): the edit-test loop"
	@echo "make test-full   the same with every slow scenario (store outages, all operator e2e scenarios)"
	@echo "make bench   run the benchmarks, write docs/benchmarks.md (make bench-operator, bench-rescale, bench-executors: only that one)"
	@echo "make soak    long fault-injection run, write docs/reliability.md"
	@echo "make cluster-up / cluster-down / e2e   local Kubernetes cluster (a real node: kubelet + containerd) and the e2e suite; NODE=agent: the node agent; KAFKA=1: a Kafka broker too; NODES=2: a second real node (in its own network namespace; kept until NODES=1)"
	@echo "make e2e-kind / e2e-kind-down   the same suite on kind with podman (e2e/kind/README.md)"
	@echo "make image   build sparkpoint/operator:dev and sparkpoint/runtime:dev with buildah (make test-image tests them)"
	@echo "make own-job-image   build examples/own-job (a job with its own dependency) FROM the runtime image"
	@echo "make release   wheel, sdist, the packaged chart, the CRDs in one file and checksums into dist/ (IMAGES=1: image archives too)"

# --- setup ---------------------------------------------------------------------------------------
# pyproject.toml gives compatible ranges (library metadata); the venv gets the images' exact versions
# (image/constraints.txt), so tests run what the images run.
$(VENV)/.installed: pyproject.toml setup.py image/constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (Python 3.11)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c image/constraints.txt -e '.[dev]'
	@# The checkout root on the venv's path: the test and benchmark harness (harness/) imports from
	@# scripts run by path too (bench/*.py, e2e/chaos.py). The wheel does not ship it.
	$(PY) -c 'import pathlib, sys, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "sparkpoint-checkout.pth").write_text(sys.argv[1] + "\n")' "$(CURDIR)"
	touch $@

venv: $(VENV)/.installed

minio:
	@scripts/ensure-minio.sh >/dev/null

java:
	@scripts/ensure-java.sh

# The Kafka broker's and Spark's Kafka connector's pinned jars (jars.lock), fetched once into the cache.
kafka:
	@python3 scripts/fetch_jars.py kafka >/dev/null && python3 scripts/fetch_jars.py spark-kafka >/dev/null

helm:
	@scripts/ensure-helm.sh

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

# ruff; mypy over runtime/, operator/ and plugin/; the import layers (import-linter). Both configured in
# pyproject.toml and explained in docs/architecture.md.
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/hadolint Dockerfile examples/own-job/Dockerfile

# The pure tier for the edit-test loop (under a minute on two idle cores): no MinIO, no Java, no
# cluster, no built tool. Java and MinIO are made unreachable, so a test that needs them without its
# marker fails here. Made fast by: one xdist worker per core (worksteal: the long hypothesis and
# interleaving tests do not hold up a worker's queue; not in `make test`, whose MinIO, Spark sessions
# and cluster are one per session); temp dirs on tmpfs when it has room (the store tests' many small
# files took three times as long on ext4), kept only for failed tests; bytecode caches written even if
# the shell turns them off (else each worker and CLI subprocess compiles the sources and tests again).
UNIT_MARKS := not spark and not minio and not tools and not slow
UNIT_TMP := $(shell df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 && $$4 > 1048576 {print "TMPDIR=/dev/shm"}')
test-unit: venv
	$(UNIT_TMP) PYTHONDONTWRITEBYTECODE= JAVA_HOME=/nonexistent SPARKPOINT_MINIO_BIN=/nonexistent $(PY) -m pytest -q \
	  -n auto --dist worksteal -o tmp_path_retention_policy=failed -m "$(UNIT_MARKS)" tests --ignore=tests/image

# The helm CLI, the cluster binaries, the Prometheus server (alerting e2e test) and the two images
# build in the background while the unit and integration tests run (cold: about 9 minutes for the
# cluster, see docs/image.md for the images, Prometheus's cold build not measured; later runs find
# all of them cached; the chart tests, which need helm, wait for it on its lock), then the image
# tests run, then the e2e suite on the local cluster, which is stopped again whatever the outcome.
# SPARKPOINT_REQUIRE_IMAGES=1: a missing image fails the image tests instead of skipping them.
test: venv minio java kafka prometheus lint
	@mkdir -p e2e/local/.state
	@{ scripts/ensure-helm.sh && e2e/local/build.sh && scripts/ensure-prometheus-server.sh; } >e2e/local/.state/build.log 2>&1 & build=$$!; \
	  scripts/build-image.sh >e2e/local/.state/image.log 2>&1 & image=$$!; \
	  $(PY) -m pytest -q --durations=15 $(MARKS) tests --ignore=tests/image; unit=$$?; \
	  if ! wait $$build; then echo "helm, cluster or prometheus build failed:"; tail -50 e2e/local/.state/build.log; exit 1; fi; \
	  if ! wait $$image; then echo "image build failed:"; tail -50 e2e/local/.state/image.log; exit 1; fi; \
	  [ $$unit -eq 0 ] || exit $$unit; \
	  export SPARKPOINT_REQUIRE_IMAGES=1; \
	  $(PY) -m pytest -q --durations=5 $(MARKS) tests/image || exit $$?; \
	  $(SUBMAKE) e2e TIER=$(TIER); e2e=$$?; \
	  $(SUBMAKE) cluster-down; exit $$e2e

# The CRD is generated from the spec model (runtime/spec/job.py); the chart ships a copy.
crd: venv
	$(PY) -m sparkpoint.operator.crd > crds/streamingjob.yaml
	$(PY) -m sparkpoint.operator.savepoint.crd > crds/streamingjobsavepoint.yaml
	cp crds/*.yaml charts/sparkpoint/crds/

# Both Dockerfile targets, built with buildah on a debootstrapped Debian base and tagged
# sparkpoint/operator:dev and sparkpoint/runtime:dev in buildah's store (docs/image.md).
image:
	@scripts/build-image.sh

test-image: venv minio java image
	SPARKPOINT_REQUIRE_IMAGES=1 $(PY) -m pytest -q tests/image

# Your own job's image FROM the runtime image (examples/own-job; README.md, "Your own job on a cluster"):
# OWN_JOB_DIR, OWN_JOB_IMAGE and RUNTIME_IMAGE choose another (scripts/build-own-job-image.sh).
own-job-image:
	@scripts/build-own-job-image.sh

# Everything a release publishes, into dist/ (scripts/release.sh says what and how each is pushed):
# one version, pyproject.toml's. IMAGES=1 adds the two images as OCI archives (after `make image`).
release: venv
	@scripts/release.sh $(PY) "$$(scripts/ensure-helm.sh)" $(CURDIR)/dist

# --- user-facing ---------------------------------------------------------------------------------
demo: venv java
	$(PY) -m harness.demo

# The Kafka example killed and restored against a failure-free run (a local broker, no cluster).
demo-kafka: venv java kafka
	$(PY) -m harness.kafka_demo

bench: venv minio java kafka
	$(PY) bench/run_all.py

# Only the peer benchmark (also part of `make bench`): Sparkpoint vs vanilla Spark on s3a, Flink, the
# floor. Its peers (hadoop-aws, toxiproxy, PyFlink) are fetched into ~/.cache/sparkpoint on first use.
bench-peers: venv minio java
	$(PY) bench/peer_bench.py $(ARGS)

# Only the operator load benchmark (also part of `make bench`): 100, 300 and 1,000 StreamingJobs
# on the local cluster against stand-in runtimes; writes its section of docs/benchmarks.md.
bench-operator: venv minio
	$(PY) bench/operator_bench.py

# Only the rescale benchmark (also part of `make bench`): Spark's state repartition beside Flink's
# stop-with-savepoint + restore at a new parallelism, at ~100 MiB and ~1 GiB of state rows (KEYS=60000 for one size).
RESCALE_KEYS = 60000,1000000
bench-rescale: venv minio java
	$(PY) bench/rescale_bench.py --flink --keys $(if $(KEYS),$(KEYS),$(RESCALE_KEYS))

# Only the executors benchmark (also part of `make bench`): one stateful job at local[2], 1 executor x 2
# cores and 2 executors x 1 core on the local cluster (brought up if down; NODE=agent: a smoke run).
bench-executors: venv minio java
	$(PY) bench/executor_bench.py $(ARGS)

soak: venv minio java
	$(PY) -m pytest -q tests/runtime/test_fault_injection.py --soak

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .import_linter_cache .grimp_cache

# --- local Kubernetes cluster and the e2e suite (see e2e/README.md) ------------------------------
# cluster-up is idempotent and prints `export KUBECONFIG=...` as its last line (a contract). Its node
# is real (kubelet, containerd, runc), whose pods run the project's images: `make image` runs first
# (0.7 s when they are up to date; its progress goes to stderr). NODE=agent runs the node agent
# instead (pods as host processes, no images needed; e2e/README.md says what still needs it).
# KAFKA=1 also starts a Kafka broker beside MinIO (e2e/local/kafka_broker.py; off by default: a JVM every
# cluster would carry, and the Kafka e2e test starts it on demand).
IMAGES_FOR_NODE = [ "$$NODE" = agent ] || scripts/build-image.sh >&2
KAFKA ?= 0
# NODES=2: a second real node (e2e/local/extra_node.py); unset keeps the count the cluster last had (1 at first).
NODES ?=
cluster-up: venv minio
	@e2e/local/build.sh >/dev/null
	@$(IMAGES_FOR_NODE)
	@KAFKA=$(KAFKA) NODES=$(NODES) $(PY) e2e/local/cluster.py up

cluster-down:
	@$(PY) e2e/local/cluster.py down

e2e: venv minio prometheus
	@scripts/ensure-helm.sh >/dev/null
	@e2e/local/build.sh >/dev/null
	@# The images are (re)built from this tree: the e2e suite must test this tree's operator and
	@# runtime, not the last `make image`'s (a no-op when they are up to date). With NODE=agent only
	@# images built before are refreshed (the agent runs pods from the venv unless they name one).
	@if [ "$$NODE" != agent ] || { command -v buildah >/dev/null 2>&1 && buildah inspect --type image sparkpoint/operator:dev >/dev/null 2>&1; }; then \
	  mkdir -p e2e/local/.state; scripts/build-image.sh >e2e/local/.state/image-refresh.log 2>&1 \
	  || { echo "image build failed:"; tail -30 e2e/local/.state/image-refresh.log; exit 1; }; fi
	$(PY) -m pytest -q -p no:cacheprovider e2e/local/tests
	@line=$$($(PY) e2e/local/cluster.py up | tail -1); \
	  case "$$line" in "export KUBECONFIG="*) ;; *) echo "make e2e: the local cluster did not come up" >&2; exit 1;; esac; \
	  export "$${line#export }"; $(PY) -m pytest -q -p no:cacheprovider --durations=10 $(MARKS) e2e --ignore=e2e/local/tests

# The same suite on kind (e2e/kind/README.md): podman from Debian as kind's provider, kind from the Go
# module proxy, the node image built here (e2e/kind/build-node-image.sh); `make e2e-kind-down` deletes it.
e2e-kind: venv prometheus
	@scripts/ensure-helm.sh >/dev/null
	@scripts/build-image.sh >/dev/null
	@line=$$(e2e/kind/local.sh up | tail -1); \
	  case "$$line" in "export KUBECONFIG="*) ;; *) echo "make e2e-kind: the kind cluster did not come up" >&2; exit 1;; esac; \
	  export "$${line#export }"; SPARKPOINT_E2E_CLUSTER=kind SPARKPOINT_E2E_MINIO=$(CURDIR)/e2e/kind/.state/minio.json \
	  SPARKPOINT_E2E_STATE=$(CURDIR)/e2e/kind/.state SPARKPOINT_E2E_MINIO_UP="e2e/kind/local.sh minio" \
	  $(PY) -m pytest -q -p no:cacheprovider --durations=10 $(MARKS) e2e --ignore=e2e/local $(ARGS)

e2e-kind-down:
	@e2e/kind/local.sh down

# Chaos (not in CI): kill job pods, runtime containers and the operator at random for CHAOS_MINUTES
# (default 20; CHAOS_SEED to replay), then committed output must equal a failure-free run's
# (0 missing, 0 duplicates); the tally goes into docs/reliability.md ("Chaos run").
chaos: venv minio
	@e2e/local/build.sh >/dev/null
	@$(IMAGES_FOR_NODE)
	@line=$$($(PY) e2e/local/cluster.py up | tail -1); \
	  case "$$line" in "export KUBECONFIG="*) ;; *) echo "make chaos: the local cluster did not come up" >&2; exit 1;; esac; \
	  export "$${line#export }"; $(PY) e2e/chaos.py

test-full:
	@SPARKPOINT_MODEL_STEPS=100000 SPARKPOINT_KAFKA_OUTAGE_SECONDS=60 $(SUBMAKE) test TIER=full

# Every e2e test including the slow operator scenarios (@pytest.mark.slow: each runs a real Spark
# job through restarts, minutes each on two cores).
e2e-full:
	@$(SUBMAKE) e2e TIER=full

# A real Prometheus for the local cluster with the chart's alert rules (e2e/local/monitor.py):
# http://127.0.0.1:9095 until Ctrl-C. `python e2e/local/cluster.py stop-minio` is a storage outage.
monitor: venv
	@$(PY) e2e/local/monitor.py

# Run the operator against $$KUBECONFIG (after `kubectl apply --server-side -f crds/`), watching every namespace.
operator: venv
	$(VENV)/bin/sparkpoint-operator --all-namespaces
