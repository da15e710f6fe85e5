"""ruff and mypy, as tests: `make test` runs them on a pytest-xdist worker beside the other
tests instead of before them (`make lint` and `make typecheck` run them on their own). Slow
tier, so `make check` stays the quick loop."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rag.settings import PROJECT_ROOT

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
TREES = ["rag", "ui", "evals", "tests"]


@pytest.mark.parametrize(
    "command",
    [
        [str(BIN / "ruff"), "check", *TREES],
        [str(BIN / "ruff"), "format", "--check", *TREES],
        [str(BIN / "mypy")],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_the_code_passes(command: list[str]) -> None:
    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
