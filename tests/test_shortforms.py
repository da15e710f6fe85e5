"""The fitted split between the field's short forms and the names papers coin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.corpus import coined_names
from rag.shortforms import ShortForms, key, shipped

from .conftest import ICML


def test_plurals_count_as_their_singular_but_a_final_capital_s_stays() -> None:
    assert key("LLMs") == key("LLM") == "llm"
    assert key("DMs") == "dm"
    assert key("APS") == "aps"  # Adaptive Prediction Sets, not the plural of AP


def test_a_form_most_of_its_writers_do_not_coin_is_common() -> None:
    papers: list[tuple[set[str], list[str]]] = [({"LLM", "GRPO"}, []) for _ in range(20)]
    papers += [({"TACO", "LLM"}, ["TACO"]) for _ in range(2)] + [({"TACO"}, [])]
    papers += [({"Rare"}, []) for _ in range(2)]  # seen twice, coined by neither
    fit = ShortForms.fit(papers, below=0.2)
    assert fit.is_common("LLMs") and fit.is_common("GRPO")
    assert not fit.is_common("TACO")  # coined by two of its three writers
    assert not fit.is_common("Rare")  # too few writers to call it the field's
    assert fit.papers == 25
    assert ShortForms.from_json(fit.to_json()) == fit


def test_a_common_form_is_no_papers_name_while_its_own_coinage_is() -> None:
    none = ShortForms(frozenset(), below=0.2, papers=1)
    grpo = ShortForms(frozenset({"grpo"}), below=0.2, papers=1)
    uses = (
        "Pluralistic inpainting fills a hole many ways. We introduce GRPO training with "
        "preference rewards for inpainting, and study how GRPO behaves on diverse masks."
    )
    assert coined_names(uses, none) == ["GRPO"]
    assert coined_names(uses, grpo) == []  # it uses GRPO; GRPO is not its name
    coins = (
        "Building on GRPO, we propose Tempered Group Optimisation (TGO), which anneals the "
        "group's advantages."
    )
    assert coined_names(coins, grpo) == ["TGO"]


def test_the_shipped_fit_holds_the_fields_forms_and_not_the_seeds_names() -> None:
    fit = shipped()
    assert fit.papers > 10_000
    assert all(fit.is_common(f) for f in ("LLMs", "RL", "LoRA", "GRPO", "PINN"))
    assert not any(fit.is_common(f) for f in ("FS-DFM", "TimeSAE", "SAEmnesia", "DistSeal"))


@pytest.mark.skipif(not ICML.exists(), reason="../shared/corpora is not beside the project")
def test_the_shipped_fit_is_what_the_command_fits(tmp_path: Path) -> None:
    from evals.shortforms import main

    out = tmp_path / "shortforms.json"
    assert main(["--out", str(out)]) == 0
    assert ShortForms.from_json(json.loads(out.read_text(encoding="utf-8"))) == shipped()
