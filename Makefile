# One entry point for setup, services and tests. Every target installs what it needs first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

.PHONY: install venv test test-unit lint run example bench crash-matrix soak kafka-start kafka-stop chroma-start chroma-stop redis-start redis-stop flink-start flink-stop services-stop clean image cluster-up cluster-down e2e-containers bench-containers flink-line pipelines waits-rescale memory-rescale budget-failover

venv: $(PY)
$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# apache-flink and everything else in ONE pip command: a separate later install can pull a
# protobuf that Beam (under apache-flink) forbids.
install: $(STAMP)
$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install -q -e ".[test,providers,gemini,bedrock,mcp,retrieval,ledger,otel,console]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# The whole suite against a real Kafka broker, the PyFlink mini-cluster and a standalone cluster;
# services already running are reused, the ones started here are stopped afterwards.
test: install
	scripts/with-services.sh $(PY) -m pytest $(PYTEST_ARGS)

# Unit tests only: no JVM, no broker; seconds.
test-unit: install
	$(PY) -m pytest -m "not kafka and not flink and not cluster" $(PYTEST_ARGS)

# Style, formatting, types (mypy, configured in pyproject.toml) and the layer rules
# (tests/test_architecture.py); no services needed.
LINT_PATHS := flink_agents tests e2e bench examples scripts
lint: install
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy
	$(PY) -m pytest -q tests/test_architecture.py

# The example job end to end on the mini-cluster with a real Kafka store and one injected failure.
run example: install
	scripts/with-services.sh --kafka-only $(PY) -m examples.demo

# The mini-cluster suite and the standalone failover e2e on another Flink line than the pinned
# one (its own virtualenv under .cache/flink-lines/, a cluster from the line's bin/ on
# FLINK_REST_PORT/FLINK_RPC_PORT): make flink-line FLINK_LINE=1.20.5 (or 2.2.1). Not in `make test`.
FLINK_LINE ?= 1.20.5
flink-line:
	scripts/flink-line.sh $(FLINK_LINE) $(PYTEST_ARGS)

kafka-start:
	scripts/kafka.sh start
kafka-stop:
	scripts/kafka.sh stop
chroma-start: install
	scripts/chroma.sh start
chroma-stop:
	scripts/chroma.sh stop
redis-start:
	scripts/redis.sh start
redis-stop:
	scripts/redis.sh stop
flink-start: install
	scripts/flink-cluster.sh start
flink-stop:
	scripts/flink-cluster.sh stop
services-stop: kafka-stop chroma-stop redis-stop flink-stop

clean: services-stop
	rm -rf $(VENV) .cache .pytest_cache

# The benchmark suite on the mini-cluster (bench/README.md); results and plots in bench/results/.
# BENCH_ARGS=--quick for a smoke run. matplotlib is a bench-only dependency, installed here.
bench: install
	scripts/with-services.sh --kafka-only $(PY) -m bench.suite $(BENCH_ARGS)


# The crash matrix (docs/reliability.md): the support-desk job crashed at every kill point, 5
# times each, on the mini-cluster with the Kafka store; about 20 min on 2 cores. The test suite
# runs one run per kill point (tests/flink/test_crash_matrix.py). Then the refunds job crashed at
# every wait kill point, 5 times each (bench/crash_waits.py; about 40 min more).
crash-matrix: install
	scripts/with-services.sh --kafka-only $(PY) -m bench.crash_matrix --runs 5 --doc docs/reliability.md
	scripts/with-services.sh --kafka-only $(PY) -m bench.crash_waits --runs 5 --doc docs/reliability.md

# Per-key budgets on the standalone cluster (e2e/test_standalone_budgets.py, docs/budgets.md):
# without a fault, a TaskManager killed at each of five seeded moments, and a budget lowered
# between a savepoint and its restore; about 20 min. `make test` runs the first seed's kill.
budget-failover: install
	FLINK_AGENTS_BUDGET_FAILOVER=1 scripts/with-services.sh $(PY) -m pytest e2e/test_standalone_budgets.py $(PYTEST_ARGS)

# The soak (bench/soak.py, docs/reliability.md "Soak"): the support desk at a steady rate for
# DURATION on its own broker (9192) and cluster (REST 8181, two TaskManagers), with seeded faults
# (SEED), then the whole-history checker and the growth bounds; never the shared 9092 or 8081.
# Not in `make test`. SOAK_ARGS for more (--rate, --mean-gap, --record FILE, --schedule FILE).
# MIXED=1: the mixed workload, a second job beside it (the refund desk: retrieval, an approval
# wait; bench/soak_refunds.py) on two slots per TaskManager.
DURATION ?= 5m
SEED ?= 37
soak: install
	$(PY) -m bench.soak --duration $(DURATION) --seed $(SEED) $(if $(MIXED),--mixed) $(SOAK_ARGS)

# Typed outputs and chained agents (docs/pipelines.md): every sink of a job spec, a crash in the
# second of two agents and in the aggregating middle stage of the three-stage example, with the
# Kafka store; a few minutes. `make test` runs one of each kind.
pipelines: install
	FLINK_AGENTS_SLOW_PIPELINES=1 scripts/with-services.sh --kafka-only $(PY) -m pytest tests/flink/test_pipelines.py tests/flink/test_pipeline_job.py tests/flink/test_product_suggestions.py tests/flink/test_sql_kafka.py $(PYTEST_ARGS)

# Runs paused for approval through a savepoint and a rescale (docs/waits.md): 20 paused runs
# stopped with a savepoint at parallelism 1, restored at 2 and decided; two to three minutes.
waits-rescale: install
	FLINK_AGENTS_SLOW_WAITS=1 scripts/with-services.sh --kafka-only $(PY) -m pytest tests/flink/test_paused_runs_rescale.py $(PYTEST_ARGS)

# A key's memory through a savepoint restored at another parallelism: split (1 -> 2), merged and
# split again (2 -> 1 -> 2) (tests/flink/test_memory_rescale.py), and compacted once per crossing
# across a failure (tests/flink/test_memory_compaction_job.py). Not in `make test`: ~9 min.
memory-rescale: install
	FLINK_AGENTS_SLOW_MEMORY=1 scripts/with-services.sh --kafka-only $(PY) -m pytest tests/flink/test_memory_rescale.py tests/flink/test_memory_compaction_job.py $(PYTEST_ARGS)

# The container image (docker/Dockerfile) with podman, or docker where podman is missing; here on a
# local Debian base made first if missing (debootstrap): docs/deployment.md. BASE_IMAGE=... to
# build on another base (the official debian:bookworm-slim where a registry is reachable).
image:
	scripts/image.sh

# A cluster of containers of that image on the host network: a Kafka broker (19092), a JobManager
# (REST 18081) and two TaskManagers of one slot each; cluster-down removes every one of them.
cluster-up:
	scripts/containers.sh up
cluster-down:
	scripts/containers.sh down

# The support-desk job on that cluster with a TaskManager container killed (minutes; not in
# `make test`): brings the cluster up and down unless it is up already.
e2e-containers: install image
	FLINK_AGENTS_CONTAINERS=1 $(PY) -m pytest e2e/test_containers_failover.py --timeout 900 $(PYTEST_ARGS)

# Throughput of the one-call job on that cluster at 1 and 2 TaskManagers, side by side, 5 rounds
# (bench/container_throughput.py; bench/results/container-throughput.md); about 15 min, not in
# `make test`. Brings the cluster up and down unless it is up already. CONTAINER_BENCH_ARGS for more.
bench-containers: install image
	$(PY) -m bench.container_throughput $(CONTAINER_BENCH_ARGS)
