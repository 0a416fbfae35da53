# The two commands a developer needs: `make run` and `make test`. Both set everything up.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint typecheck unit bench soak clean system-deps

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,bench]'
	touch $(STAMP)

install: $(STAMP)

# kcat is a Debian package; the compat tests drive it.
system-deps:
	@command -v kcat >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq kcat >/dev/null; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq kcat >/dev/null; fi; }

run: install
	$(BIN)/ketch broker --listen 0.0.0.0:9092 --data-dir ./data

lint: install
	$(BIN)/ruff check protocol storage broker client pipeline tests bench
	$(BIN)/mypy

test: install system-deps lint
	$(BIN)/pytest -q -m "not slow" tests

unit: install
	$(BIN)/pytest -q tests/unit

bench: install
	$(BIN)/python -m bench.throughput --out bench/results.json

soak: install system-deps
	$(BIN)/pytest -q -m slow tests

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
