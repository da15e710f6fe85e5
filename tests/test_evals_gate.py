"""The evals gate: the quick suite (3 questions of each type) with no LLM and with the small
local model, failing below the thresholds in evals/suite.py. Run as tests, in this process and
on a copy of the seed index the slow tier has built already; `make evals-check` runs the same
commands on their own."""

from __future__ import annotations

import pytest

from rag.settings import Settings

from .conftest import call_cli

pytestmark = pytest.mark.slow

GATES = {
    "extractive": ["--quick", "--llm", "extractive", "--check"],
    "local-0.5b": ["--quick", "--llm", "local", "--check", "--no-baseline"],
}


@pytest.mark.parametrize(
    "gate", [pytest.param(g, marks=[pytest.mark.llm] if "local" in g else []) for g in GATES]
)
def test_quick_suite_holds_its_thresholds(gate: str, seed_settings: Settings) -> None:
    home = str(seed_settings.home)
    env = {"RAG_LLM_LOCAL_MODEL": "qwen2.5-coder-0.5b", "RAG_EMBED_MODEL": None}
    done = call_cli("evals", *GATES[gate], "--home", home, env=env)
    print(done.stdout)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "REGRESSION" not in done.stderr
