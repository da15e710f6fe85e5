# Everything a fresh machine needs: `make run` (set up, index corpus/, search) and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export ANONYMIZED_TELEMETRY := False
export GRADIO_ANALYTICS_ENABLED := False
export HF_HUB_OFFLINE := 1

.PHONY: setup ingest run test lint typecheck clean

setup: $(STAMP)

# Re-installs only when pyproject.toml changes. torch goes first and pinned: pip then takes the
# CPU wheel from local disk instead of resolving a multi-GB CUDA build for a dependency.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

ingest: setup
	$(BIN)/python -m rag.ingest

run: ingest
	$(BIN)/python -m rag.search "which papers use sparse autoencoders?"

lint: setup
	$(BIN)/ruff check rag ui evals tests
	$(BIN)/ruff format --check rag ui evals tests

typecheck: setup
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/python -m pytest

clean:
	rm -rf .rag .pytest_cache .mypy_cache .ruff_cache
