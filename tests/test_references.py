"""The answer's cited papers as references (rag.references), the source cards' links to the
papers' pages, and the page's per-session question queue (ui.turns): no server, no model."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from pathlib import Path

from rag.answer import Answer, Item, Sentence, Source
from rag.corpus import Paper
from rag.index import PaperIndex
from rag.references import bibtex, bibtex_key, cited, escape, plain, web_url
from rag.settings import Settings
from ui.app import sources_html
from ui.turns import THINKING, WAITING, ChatSession

TIMESAE = Paper(
    id="icml2026-66052",
    abstract="We introduce TimeSAE, a framework for black-box model explanation.",
    title="TimeSAE: Sparse Decoding for Faithful Explanations of Black-Box Time Series Models",
    authors=("Khalid Oublal", "Quentin Bouniot", "Stephan Clémençon"),
    track="Social Aspects · Safety",
    venue="ICML 2026",
    url="https://icml.cc/virtual/2026/poster/66052",
    display_name="TimeSAE",
)
LISTED = Paper(  # a paper of a .txt listing: no title, venue, year nor page
    id="a1b2c3",
    abstract="We propose SOTAlign, a two-stage framework for semi-supervised alignment.",
    authors=("Simon Roschmann", "Zeynep Akata"),
    authors_truncated=True,
    display_name="SOTAlign",
)


def entries(text: str) -> dict[str, str]:
    """BibTeX entries by key."""
    return dict(re.findall(r"@\w+\{([^,]+),\n(.*?)\n\}", text, re.S))


def balanced(text: str) -> bool:
    depth = 0
    for c in text:
        depth += {"{": 1, "}": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0


def test_plain_list_keeps_the_answers_numbers_and_what_is_known() -> None:
    text = plain([TIMESAE, LISTED], [2, 5])
    assert text.splitlines() == [
        "[2] Khalid Oublal, Quentin Bouniot, Stephan Clémençon. TimeSAE: Sparse Decoding for "
        "Faithful Explanations of Black-Box Time Series Models. ICML 2026. "
        "https://icml.cc/virtual/2026/poster/66052",
        "[5] Simon Roschmann, Zeynep Akata et al. [SOTAlign].",
        "",
        "Names in [brackets] are this index's names for papers listed without a title.",
    ]
    assert plain([LISTED]).startswith("[1] ")
    assert "brackets" not in plain([TIMESAE])
    dated = Paper(id="x", abstract="a", title="Why?", venue="Workshop", year=2025)
    assert plain([dated]) == "[1] Why? Workshop 2025."


def test_bibtex_entry_has_authors_title_venue_year_and_page() -> None:
    text = bibtex([TIMESAE, LISTED])
    found = entries(text)
    assert list(found) == ["oublal2026timesae", "roschmannsotalign"]
    assert text.startswith("@inproceedings{oublal2026timesae,\n")
    first = found["oublal2026timesae"]
    assert "  author = {Khalid Oublal and Quentin Bouniot and Stephan Clémençon}," in first
    assert "  title = {{TimeSAE: Sparse Decoding for Faithful" in first
    assert "  booktitle = {ICML 2026}," in first and "  year = {2026}," in first
    assert "  url = {https://icml.cc/virtual/2026/poster/66052}" in first
    # A listing without venue, year or page: @misc, its known fields only, "and others".
    assert "@misc{roschmannsotalign," in text
    listed = found["roschmannsotalign"]
    assert "author = {Simon Roschmann and Zeynep Akata and others}" in listed
    assert "title = {{SOTAlign}}" in listed and "note = {The listing gives no title" in listed
    assert not re.search(r"booktitle|year|url", listed) and "note" not in first
    assert bibtex([TIMESAE, LISTED]) == text  # the same every time


def test_bibtex_keys_are_unique_and_do_not_depend_on_the_other_papers() -> None:
    twin = Paper(
        id="iclr2026-xyz",
        abstract="Another abstract.",
        title="TimeSAE revisited",
        authors=("Amal Oublal",),
        venue="ICLR 2026",
    )
    keys = list(entries(bibtex([TIMESAE, twin, TIMESAE])))
    assert len(keys) == 2 and len(set(keys)) == 2  # the repeated paper is listed once
    assert keys[0] == "oublal2026timesae" and keys[1].startswith("oublal2026timesae-")
    assert list(entries(bibtex([LISTED, TIMESAE, twin])))[2] == keys[1]
    assert all(re.fullmatch(r"[a-z0-9-]+", k) for k in keys)
    nameless = Paper(id="p9", abstract="x", title="The Of", display_name="")
    assert re.fullmatch(r"paper[0-9a-f]{64}", bibtex_key(nameless))


def test_bibtex_escapes_special_characters_and_keeps_braces_balanced() -> None:
    hostile = Paper(
        id="h1",
        abstract="x",
        title="50% of R&D_costs: $5 a ^ b ~ {a} \\cite #1",
        authors=("Research and Development Team", "Ana {Evil} Smith"),
        venue="Conf & Co",
        url="https://example.org/p?a={b}&c=%20d",
    )
    text = bibtex([hostile])
    assert balanced(text), text
    title = re.search(r"title = \{\{(.*)\}\},", text)
    assert title is not None
    for raw in ("%", "&", "_", "$", "#"):
        assert f"\\{raw}" in title.group(1)
    assert "\\^{}" in title.group(1) and "\\~{}" in title.group(1)
    assert "\\textbraceleft{}a\\textbraceright{}" in title.group(1)
    assert "\\textbackslash{}cite" in title.group(1)
    # A name with "and" in it stays one author; braces are written out.
    assert "{Research and Development Team} and Ana \\textbraceleft{}Evil" in text
    assert "booktitle = {Conf \\& Co}" in text
    assert "url = {https://example.org/p?a=%7Bb%7D&c=%20d}" in text
    assert escape("a\n  b") == "a b"


def test_only_web_addresses_are_pages() -> None:
    def page(url: str) -> str:
        return web_url(Paper(id="p", abstract="a", url=url))

    assert page("https://openreview.net/forum?id=7X5GcRLHhx") == (
        "https://openreview.net/forum?id=7X5GcRLHhx"
    )
    for bad in ("javascript:alert(1)", "data:text/html,x", "/local/path", "https://", "ftp://x"):
        assert page(bad) == "", bad
    assert page("https://a.example/x y") == "" and page("https://a.example/\x00") == ""
    assert "url" not in bibtex([Paper(id="p", abstract="a", url="javascript:alert(1)")])


def test_cited_is_what_the_answer_cites_in_order() -> None:
    sources = [Source(n, Paper(id=f"p{n}", abstract="a"), 1.0, "a") for n in (1, 2, 3, 4)]
    prose = Answer(
        question="q",
        sources=sources,
        sentences=[Sentence("b", [3], True, 1.0), Sentence("a", [1, 3], True, 1.0)],
    )
    assert [s.n for s in cited(prose)] == [1, 3]
    listing = Answer(question="q", sources=sources, items=[Item(4, "D", "d", False)])
    assert [s.n for s in cited(listing)] == [4]
    assert cited(Answer(question="q", sources=sources, abstained=True)) == []
    assert cited(None) == []


def test_source_card_links_to_the_papers_page_in_a_new_tab() -> None:
    tricky = TIMESAE.url + "?a=1&b='><script>alert(1)</script>"
    paper = replace(TIMESAE, url=tricky)
    hostile = Paper(id="h", abstract="x", display_name="Evil", url="javascript:alert(1)")
    answer = Answer(
        question="q",
        sources=[Source(1, paper, 1.0, "a"), Source(2, hostile, 0.5, "x")],
        sentences=[Sentence("a", [1], True, 1.0)],
    )
    cards = sources_html(answer)
    links = re.findall(r"<a [^>]*>", cards)
    assert len(links) == 1, cards  # none for the javascript: address
    assert "target='_blank'" in links[0] and "noopener" in links[0]
    assert (
        "href='https://icml.cc/virtual/2026/poster/66052?a=1&amp;b=&#x27;&gt;&lt;script"
        in (links[0])
    )
    assert "<script" not in cards


def test_paper_pages_survive_ingest(fake_settings: Settings, tmp_path: Path) -> None:
    """A JSONL listing's "url" (or, without one, its "openreview") reaches the index's
    papers, and the hits a question gets."""
    rows = [
        {"id": "u1", "title": "One", "url": "https://icml.cc/p/1", "abstract": "Moths fly. " * 9},
        {"id": "u2", "openreview": "https://openreview.net/forum?id=2", "abstract": "Bees. " * 9},
        {"id": "u3", "abstract": "Ants walk in long lines to their nest. " * 3},
    ]
    src = tmp_path / "papers.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    index = PaperIndex(fake_settings)
    index.ingest([src], progress=False)
    pages = {p.id: p.url for p in index.papers()}
    assert pages == {
        "u1": "https://icml.cc/p/1",
        "u2": "https://openreview.net/forum?id=2",
        "u3": "",
    }
    assert {h.paper.url for h in index.dense_search("moths fly", k=3)} >= {"https://icml.cc/p/1"}


def test_a_question_asked_while_another_is_answered_waits_its_turn() -> None:
    # The page's gr.State holds an empty session, which Gradio copies for each page session.
    chat = copy.deepcopy(ChatSession())
    first = chat.ask("first?")
    assert chat.start()
    assert chat.next() is first and first.reply["content"] == THINKING
    second = chat.ask("second?")
    assert [m["content"] for m in chat.render()] == ["first?", THINKING, "second?", WAITING]
    assert not chat.start()  # one answers at a time: the one answering takes it
    chat.done(first, None)
    assert chat.next() is second
    assert chat.next() is None  # the queue is empty: the answering ends with the check
    assert chat.start()
    chat.stop()
    assert [m["content"] for m in chat.render(until=first)] == ["first?", THINKING]


def test_a_new_conversation_drops_the_waiting_questions() -> None:
    chat = ChatSession()
    chat.ask("first?", history=[{"role": "user", "content": "earlier"}])
    assert chat.render()[0]["content"] == "earlier"  # an API caller's history is kept
    waiting = chat.ask("second?")
    assert chat.start()
    first = chat.next()
    assert first is not None
    chat.reset()
    assert chat.render() == [] and waiting.answered and not chat.current(first)
    assert chat.next() is None
