"""The bundled GGUFs: joined from their part packages once, checked, and joined again when the
cached copy is not the one that was checked. On a machine whose cache is warm nothing else
runs this path, so it is tested here into an empty cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag.models import BUNDLED, ModelUnavailable, ensure_model

pytestmark = pytest.mark.slow  # writes the 0.5B's ~400 MB into a temporary cache

NAME = "qwen2.5-coder-0.5b"


def test_parts_are_joined_once_and_a_changed_copy_is_joined_again(tmp_path: Path) -> None:
    cache = tmp_path / "models"
    path = ensure_model(NAME, cache)
    marker = path.with_suffix(".sha256")
    assert path.parent == cache and marker.read_text().split() == [
        BUNDLED[NAME].sha256,
        str(path.stat().st_size),
    ]
    joined_at = path.stat().st_mtime_ns
    assert ensure_model(NAME, cache) == path and path.stat().st_mtime_ns == joined_at
    # A copy cut short (a full disk, an interrupted copy) no longer matches its marker.
    with path.open("r+b") as f:
        f.truncate(1000)
    assert ensure_model(NAME, cache) == path
    assert path.stat().st_size == int(marker.read_text().split()[1])
    assert not list(cache.glob("*.part"))


def test_an_unknown_model_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="unknown bundled model"):
        ensure_model("gpt-5", tmp_path)


def test_llama_cpp_is_built_without_amx_kernels() -> None:
    # `make setup` builds it so (see the Makefile): with them the first decode segfaults on a
    # CPU that has AMX. A build from elsewhere (pip's own cache, an older venv) fails here.
    import llama_cpp

    assert "AMX" not in llama_cpp.llama_print_system_info().decode()
