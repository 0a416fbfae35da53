# The two commands a developer needs: `make run` and `make test`. Both set everything up.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint typecheck unit bench bench-cluster bench-scale soak chaos sim fuzz compat-cluster compose-test clean system-deps

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,bench,pipeline]'
	touch $(STAMP)

install: $(STAMP)

# kcat (compat tests) and a Java runtime (PySpark pipeline tests) are Debian packages.
# The chaos suite (tests/chaos) puts brokers in network namespaces: iproute2 and iptables.
APT_PKGS := $(if $(shell command -v kcat),,kcat) $(if $(shell command -v java),,openjdk-17-jre-headless) \
  $(if $(shell command -v ip),,iproute2) $(if $(shell command -v iptables),,iptables)
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
system-deps:
	@if [ -n "$(strip $(APT_PKGS))" ]; then \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(APT_PKGS) >/dev/null; fi

run: install
	$(BIN)/ketch broker --listen 0.0.0.0:9092 --metrics-listen 127.0.0.1:9464 --data-dir ./data

lint: install
	$(BIN)/ruff check protocol storage broker client pipeline tests bench
	$(BIN)/mypy

# The suite mostly waits (brokers starting, elections, timeouts), so TEST_WORKERS pytest-xdist
# workers share the cores. Each module runs whole on one worker (--dist loadfile: a module's
# shared broker or cluster starts once), modules handed out in the order tests/conftest.py sorts
# them in (--no-loadscope-reorder). TEST_WORKERS=0 runs it in one process. Timings: docs/testing.md.
TEST_WORKERS ?= 4
# PYTHONHASHSEED=0: a simulation seed that fails here is the same run as on the command line
# (python -m tests.helpers.dst --seed N, docs/simulation.md).
test: install system-deps lint
	PYTHONHASHSEED=0 $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not slow and not chaos_selftest" tests

unit: install
	$(BIN)/pytest -q tests/unit

# Benchmarks write their figures to bench/*.json (git-ignored); see docs/bench.md.
bench: install system-deps
	$(BIN)/python -m bench.throughput --out bench/results.json
	$(BIN)/python -m bench.transactions --targets mock,ketch,ketch-3 --out bench/results-transactions.json
	$(BIN)/python -m bench.client --out bench/client-results.json
	$(BIN)/python -m bench.pipeline --orders 400000 --targets ketch,ketch-3 --out bench/results-pipeline.json
	$(BIN)/python -m bench.compaction --out bench/results-compaction.json
	$(BIN)/python -m bench.stalls --out bench/results-stalls.json
	$(BIN)/python -m bench.summary --json bench/summary.json

# Produce, idempotent and transactions on 3 brokers (RF 3, acks=all) beside 1 broker and the mock,
# all in one run per module; see docs/bench.md "3 brokers". About 2 minutes, mostly cluster starts.
bench-cluster: install
	$(BIN)/python -m bench.throughput --targets mock,ketch,ketch-3 --only produce --only idempotent \
	  --messages 500000 --out bench/results-cluster.json
	$(BIN)/python -m bench.transactions --targets mock,ketch,ketch-3 \
	  --messages 200000 --out bench/results-cluster-transactions.json

# How the figures grow (issue 24): partitions, idle connections, restart after SIGKILL per log size,
# partitions on 3 brokers; see docs/bench.md "Scale". Long (5-15 minutes with the load; ~4.5 GB of temp disk).
bench-scale: install
	$(BIN)/python -m bench.scale --out bench/results-scale.json

soak: install system-deps
	$(BIN)/pytest -q -m slow tests

# A long chaos campaign (docs/chaos.md): first the broken-build self-tests (the checker must catch each
# broken guarantee), then CHAOS_SECONDS of faults (default an hour) from CHAOS_SEED (default random), report in
# chaos-runs/seed-N/report.md. Needs root.
CHAOS_SECONDS ?= 3600
CHAOS_SEED ?=
chaos: install system-deps
	$(BIN)/pytest -q -m chaos_selftest tests/chaos
	$(BIN)/python -m tests.chaos.campaign --seconds $(CHAOS_SECONDS) $(if $(CHAOS_SEED),--seed $(CHAOS_SEED))

# The deterministic simulation (docs/simulation.md): SEEDS runs (a count, or ranges such as 1-100,200),
# each SECONDS of virtual faults, JOBS processes; SIZE brokers, seed N taking the (N mod 4)th of
# 3,3,3,5 (five brokers keep a quorum with two away); prints the failing seeds, each replayable
# with `$(BIN)/python -m tests.helpers.dst --seed N --size $(SIZE) --trace`.
SEEDS ?= 1000
SECONDS ?= 30
SIZE ?= 3,3,3,5
JOBS ?= $(shell nproc)
sim: install
	$(BIN)/python -m tests.helpers.dst --seeds $(SEEDS) --seconds $(SECONDS) --size $(SIZE) --jobs $(JOBS)

# The fuzzing campaign (docs/security.md "Front-door limits and fuzzing"): FRAMES seeded malformed
# frames of every API and version against a real broker (client and inter-broker listeners), SEED to
# replay one (default random, printed); fails on a crash, a hang, a handler that raised, or a log
# not read back after SIGKILL. The report (JSON) goes to fuzz-report.json. A short run is in `make test`.
FRAMES ?= 1000000
SEED ?=
fuzz: install
	$(BIN)/python -m tests.helpers.fuzz --frames $(FRAMES) $(if $(SEED),--seed $(SEED)) --out fuzz-report.json

compat-cluster: install system-deps
	KETCH_COMPAT_CLUSTER=1 $(BIN)/pytest -q -m "not slow" tests/compat

# docker-compose.yml's three brokers built and run for real, a broker container SIGKILLed; installs
# Docker and starts a daemon when missing (docs/testing.md "Containers"). Not part of `make test`.
# SECURE=1: the same on the secured cluster (docker-compose.secure.yml; docs/containers.md).
compose-test: install
	COMPOSE_TEST_SECURE=$(SECURE) sh tests/compose/compose-test.sh $(BIN)/python

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
