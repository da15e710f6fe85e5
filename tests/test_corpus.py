from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from rag.corpus import (
    Paper,
    abstract_key,
    derived_id,
    method_name,
    parse_authors,
    read_papers,
    split_track,
)
from rag.settings import PROJECT_ROOT

from .conftest import CORPUS, ICML

ABSTRACT = (
    "We study a carefully constructed problem in machine learning and show that the proposed "
    "method improves results on several benchmarks by a wide margin."
)


@pytest.fixture(scope="module")
def seeds() -> list[Paper]:
    result = read_papers([CORPUS])
    assert result.problems == []
    return result.papers


def by_author(papers: list[Paper], name: str) -> list[Paper]:
    return [p for p in papers if name in p.authors]


def test_seed_listing_has_sixty_papers_with_authors_and_tracks(seeds: list[Paper]) -> None:
    assert len(seeds) == 60
    assert len({p.id for p in seeds}) == 60
    assert all(p.abstract and p.authors for p in seeds)
    deng = by_author(seeds, "Difan Deng")[0]
    assert deng.authors == ("Difan Deng", "Andreas B. Winje", "Lukas Fehring", "Marius Lindauer")
    assert (deng.area, deng.subarea) == ("Deep Learning", "Attention Mechanisms")
    assert deng.display_name == "NAtS-L"
    assert deng.source.endswith("000_ca26f2752b4dd6e2.txt:3")


def test_five_papers_lack_a_track(seeds: list[Paper]) -> None:
    assert len([p for p in seeds if not p.track]) == 5


def test_author_quirks_are_kept(seeds: list[Paper]) -> None:
    names = {a for p in seeds for a in p.authors}
    for name in (
        "Paul KRZAKALA",
        "Valentin NOËL",
        "di xu",
        "Nanyun (Violet) Peng",
        "Alexandre M Bayen",
        "Bernhard Schölkopf",
        "yan wubin",
    ):
        assert name in names, name
    assert len(by_author(seeds, "Quentin Bouniot")) == 4


def test_truncated_author_lists_are_marked(seeds: list[Paper]) -> None:
    truncated = [p for p in seeds if p.authors_truncated]
    assert len(truncated) == 2
    assert {p.authors[-1] for p in truncated} == {"JAEWOO AHN", "Joel Lehman"}
    assert all("等" not in a for p in seeds for a in p.authors)
    assert truncated[0].authors_text.endswith("et al.")


def test_subareas_with_commas(seeds: list[Paper]) -> None:
    tracks = {p.track for p in seeds}
    assert "Social Aspects · Accountability, Transparency, and Interpretability" in tracks
    oublal = by_author(seeds, "Khalid Oublal")[0]
    assert oublal.subarea == "Accountability, Transparency, and Interpretability"
    assert oublal.display_name == "TimeSAE"


def test_latex_markdown_and_unicode_are_kept(seeds: list[Paper]) -> None:
    text = " ".join(p.abstract for p in seeds)
    for fragment in (r"$\ell_2$", r"\textit{lightweight}", "**", "https://", "Itô", "×"):
        assert fragment in text, fragment


def test_display_names_are_unique_and_recognisable(seeds: list[Paper]) -> None:
    names = [p.display_name for p in seeds]
    assert len(set(names)) == 60
    for expected in ("SOTAlign", "FS-DFM", "TimeSAE", "NAtS-L", "DRAGON", "Orak", "MoE-CP"):
        assert expected in names
    fallback = [n for n in names if " et al." in n]
    assert fallback and all("(" in n for n in fallback)


def test_ids_are_stable_across_runs_and_file_orders(tmp_path: Path, seeds: list[Paper]) -> None:
    files = sorted(CORPUS.glob("*.txt"))
    reordered = tmp_path / "r"
    reordered.mkdir()
    for i, f in enumerate(reversed(files)):  # other names, other order
        shutil.copy(f, reordered / f"{i}_{f.name}")
    again = read_papers([reordered]).papers
    assert {p.id: p.display_name for p in again} == {p.id: p.display_name for p in seeds}
    assert all(p.id == derived_id(p.abstract) for p in seeds)


def test_markup_and_whitespace_do_not_change_identity() -> None:
    a = r"We propose \emph{FastThing}, reaching $\ell_2$ error of 0.1 with **no** tuning."
    b = r"We  propose \textit{FastThing},  reaching $\ell_{2}$ error of 0.1 with *no* tuning. "
    assert abstract_key(a) == abstract_key(b)
    assert abstract_key(a) != abstract_key(a.replace("0.1", "0.2"))


@pytest.mark.skipif(not ICML.exists(), reason="../shared/corpora is not beside the project")
def test_seed_papers_merge_with_icml_and_get_titles(seeds: list[Paper]) -> None:
    result = read_papers([CORPUS, ICML], root=PROJECT_ROOT)
    assert len(result.problems) == 0
    merged = [p for p in result.papers if any(s.startswith("corpus/") for s in p.sources)]
    assert len(merged) == 60
    with_icml = [p for p in merged if len(p.sources) == 2]
    assert len(with_icml) == 37
    assert all(p.title and p.id.startswith("icml2026-") for p in with_icml)
    assert all(derived_id(p.abstract) in p.aliases for p in with_icml)
    assert len(result.papers) == 60 + 5863 - 37
    assert all(p.display_name == p.title for p in with_icml)


def test_parse_authors_variants() -> None:
    assert parse_authors("A B, C D 等") == (("A B", "C D"), True)
    assert parse_authors(["A", "B"]) == (("A", "B"), False)
    assert parse_authors("A, B et al.") == (("A", "B"), True)
    assert split_track("Theory · Everything Else") == ("Theory", "Everything Else")
    assert split_track("foundation or frontier models") == ("foundation or frontier models", "")


def test_method_name_ignores_generic_acronyms() -> None:
    assert method_name("We use large language models (LLMs) to study SAEs. " * 2) == ""
    assert (
        method_name("In this paper we propose FooNet, a fast network for (GNN) graphs.") == "FooNet"
    )
    # A name brought in by a gerund, or as the paper's contribution.
    assert method_name("We close this gap by introducing Foo Bar Net (FBN), for graphs.") == "FBN"
    assert method_name("Our key contribution is FooLoRA (Mixture of LoRA), which routes.") == (
        "FooLoRA"
    )


# ---------------------------------------------------------------------------- bad input


def listing(*blocks: str) -> str:
    return "论文检索\n\n" + "\n\n".join(blocks) + "\n"


@pytest.fixture
def bad_dir(tmp_path: Path) -> Path:
    d = tmp_path / "mixed"
    d.mkdir()
    good = listing("Theory · Learning Theory", "Ann Lee, Bo Chen", ABSTRACT)
    (d / "good.txt").write_text(good, encoding="utf-8")
    (d / "empty.txt").write_text("", encoding="utf-8")
    # Invalid UTF-8 inside the first block; the second block must survive.
    raw = listing("Ann Lee", ABSTRACT + " First.", "Bo Chen", ABSTRACT + " Second.").encode()
    raw = raw.replace(b"First.", b"First \xff\xfe.")
    (d / "badutf8.txt").write_bytes(raw)
    nul = listing("Ann Lee", ABSTRACT + " Nul.", "Bo Chen", ABSTRACT + " Kept.").encode()
    (d / "nul.txt").write_bytes(nul.replace(b"Nul.", b"N\x00ul."))
    (d / "noabstract.txt").write_text(
        listing("Theory · X", "Ann Lee, Bo Chen", "Theory · Y", "Cy Dee", ABSTRACT + " Last."),
        encoding="utf-8",
    )
    (d / "huge.txt").write_text(listing("Ann Lee", "word " * 250_000), encoding="utf-8")
    (d / "notes.pdf").write_bytes(b"%PDF-1.4")
    lines = [
        json.dumps({"id": "x1", "title": "T", "authors": "A, B", "abstract": ABSTRACT + " J."}),
        "{not json",
        json.dumps({"id": "x2", "title": "no abstract"}),
        json.dumps(["a", "list"]),
        json.dumps({"authors": ["C"], "abstract": ABSTRACT + " K.", "keywords": "a, b"}),
    ]
    (d / "mixed.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (d / "broken.jsonl.gz").write_bytes(b"this is not gzip")
    with gzip.open(d / "ok.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(json.dumps({"id": "g1", "abstract": ABSTRACT + " G."}) + "\n")
    (d / "dangling.txt").symlink_to(d / "does-not-exist.txt")
    return d


def test_every_bad_input_is_reported_and_the_rest_read(bad_dir: Path) -> None:
    result = read_papers([bad_dir, bad_dir / "missing.txt"], root=bad_dir)
    reasons = {(p.source.split("/")[-1], p.line): p.reason for p in result.problems}
    texts = {p.abstract.rsplit(" ", 1)[-1] for p in result.papers}
    assert texts == {"margin.", "Second.", "Kept.", "Last.", "J.", "K.", "G."}, texts
    assert reasons[("empty.txt", 0)] == "empty file"
    assert "invalid UTF-8" in reasons[("badutf8.txt", 5)]
    assert "NUL" in reasons[("nul.txt", 5)]
    assert reasons[("noabstract.txt", 3)] == "block has authors but no abstract"
    assert "exceeds the limit" in reasons[("huge.txt", 5)]
    assert "unsupported file type" in reasons[("notes.pdf", 0)]
    assert "invalid JSON" in reasons[("mixed.jsonl", 2)]
    assert reasons[("mixed.jsonl", 3)] == "no abstract"
    assert reasons[("mixed.jsonl", 4)] == "line is not a JSON object"
    assert "unreadable" in reasons[("broken.jsonl.gz", 0)]
    assert "not a regular file" in reasons[("dangling.txt", 0)]
    assert "no such file" in reasons[("missing.txt", 0)]
    # Problems carry file:line in their text form.
    assert any(
        str(p).endswith(
            "mixed.jsonl:2: invalid JSON: Expecting property name enclosed in double quotes"
        )
        for p in result.problems
    )


def test_jsonl_fields(bad_dir: Path) -> None:
    papers = {p.own_id or p.id: p for p in read_papers([bad_dir / "mixed.jsonl"]).papers}
    assert papers["x1"].authors == ("A", "B") and papers["x1"].title == "T"
    keyed = next(p for p in papers.values() if not p.own_id)
    assert keyed.keywords == ("a", "b") and keyed.id.startswith("p-")
