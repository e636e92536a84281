# Every target CI uses lives here; `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-16s %s\n", $$1, $$2}'

$(BIN)/graph-ingest: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

.PHONY: install
install: $(BIN)/graph-ingest ## Create .venv and install graph-ingest with its dev tools

.PHONY: demo
demo: install ## Start the local stack (first run fetches jars) and run the pipeline demo
	$(BIN)/graph-ingest demo

.PHONY: lint
lint: install ## ruff (lint + format check) and mypy --strict on src/, tests/ and benchmarks/
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy src tests benchmarks

.PHONY: test
test: lint ## Lint, then every test: unit, integration and crash (starts and stops its own stack)
	$(BIN)/pytest $(PYTEST_ARGS)

.PHONY: test-unit
test-unit: install ## Unit tests only (no services)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

.PHONY: test-integration
test-integration: install ## Integration tests against the real local services
	$(BIN)/pytest tests/integration $(PYTEST_ARGS)

.PHONY: test-crash
test-crash: install ## Slow chaos tests: SIGKILL real worker processes
	$(BIN)/pytest -m crash $(PYTEST_ARGS)

.PHONY: stack-up
stack-up: install ## Start Kafka, Neo4j and PostgreSQL locally (no Docker)
	$(BIN)/graph-ingest stack up

.PHONY: stack-down
stack-down: install ## Stop the local stack (data kept; `graph-ingest stack down --purge` drops it)
	$(BIN)/graph-ingest stack down

$(VENV)/.bench-extra: $(BIN)/graph-ingest
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	@touch $@

.PHONY: bench-read
bench-read: install $(VENV)/.bench-extra ## Read side: projector beside the pipeline with a fold ceiling, API latency, rebuild time
	$(BIN)/python benchmarks/projection.py && $(BIN)/python benchmarks/api_latency.py && $(BIN)/python benchmarks/rebuild.py

.PHONY: bench-scrape
bench-scrape: install $(VENV)/.bench-extra ## Metrics: scrape duration, size and CPU per scrape of each process
	$(BIN)/python benchmarks/scrape_cost.py

.PHONY: bench
bench: install $(VENV)/.bench-extra ## Throughput, every workload: ceiling vs seed-style vs pipeline (starts the dev stack if needed)
	$(BIN)/python benchmarks/throughput.py --workload all
