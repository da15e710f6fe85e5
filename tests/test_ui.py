from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evals.load import client, last_text
from rag.settings import EmbedSettings, Settings, UISettings
from ui.app import launch

from .conftest import ARTIFACTS, CHROMIUM, FAKE_EMBED, chromium, free_port, gzip_bomb
from .fake_openai import FakeOpenAI

pytestmark = pytest.mark.slow  # a real Gradio server, driven over HTTP and in Chromium


def _page(seed: Path, folder: Path, embed: EmbedSettings, **llm: Any) -> tuple[str, Any]:
    import shutil

    home = folder / "home"
    shutil.copytree(seed, home)
    port = free_port()
    settings = Settings(
        home=home,
        embed=embed,
        ui=UISettings(port=port, concurrency=2, max_queue=8, max_upload_mb=1),
    )
    settings.llm = settings.llm.model_copy(update={"backend": "extractive", **llm})
    return f"http://127.0.0.1:{port}/", launch(settings, block=False)


@pytest.fixture(scope="module")
def page_url(fake_seed_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The page's own behaviour (queue, sessions, uploads): the hashing embedder is enough."""
    url, app = _page(fake_seed_home, tmp_path_factory.mktemp("ui"), FAKE_EMBED)
    yield url
    app.close()


@pytest.fixture(scope="module")
def real_page_url(seed_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The page as a user gets it: the real seed index."""
    url, app = _page(seed_home, tmp_path_factory.mktemp("ui-real"), EmbedSettings())
    yield url
    app.close()


def test_ask_streams_a_cited_answer_with_sources(page_url: str) -> None:
    c = client(page_url)
    job = c.submit(
        "Which papers use sparse autoencoders?", [], "All tracks", "", "extractive", api_name="/ask"
    )
    history, sources, cleared = job.result(timeout=120)
    assert len(job.outputs()) >= 2  # the question first, then the answer
    text = last_text(history)
    assert "[[1]](#src-1)" in text and "TimeSAE" in text
    assert "id='src-1'" in sources and "<mark>" in sources and cleared == ""


def test_follow_up_is_searched_within_the_previous_answer(real_page_url: str) -> None:
    # Which of the earlier papers match is the relevance model's call: the real index.
    c = client(real_page_url)
    c.predict(
        "Which papers use sparse autoencoders?", [], "All tracks", "", "extractive", api_name="/ask"
    )
    history, sources, _ = c.predict(
        "and which of those study diffusion models?",
        [],
        "All tracks",
        "",
        "extractive",
        api_name="/ask",
    )
    text = last_text(history)
    assert "searched:" in text and "SAEmnesia" in text
    assert "Orak" not in sources  # nothing outside the earlier answer's papers
    assert "TimeSAE" not in sources  # an earlier paper that is not about diffusion


def test_sessions_do_not_share_history(page_url: str) -> None:
    a, b = client(page_url), client(page_url)
    a.predict(
        "Which papers use sparse autoencoders?", [], "All tracks", "", "extractive", api_name="/ask"
    )
    history, _, _ = b.predict(
        "and which of those study diffusion models?",
        [],
        "All tracks",
        "",
        "extractive",
        api_name="/ask",
    )
    assert "searched:" not in last_text(history)


def test_upload_adds_papers_and_refuses_bad_files(page_url: str, tmp_path: Path) -> None:
    from gradio_client import handle_file

    good = tmp_path / "new.jsonl"
    good.write_text(
        json.dumps(
            {
                "id": "u1",
                "title": "Moth Flight Dynamics",
                "authors": ["Ada Moth"],
                "track": "Applications · Biology",
                "abstract": "We study how moths stabilise flight in turbulent "
                "air using a new wind tunnel and high-speed cameras.",
            }
        )
        + "\n"
    )
    bad = tmp_path / "notes.exe"
    bad.write_bytes(b"MZ")
    c = client(page_url)
    report, counter, *_ = c.predict(
        [handle_file(str(good)), handle_file(str(bad))], api_name="/upload"
    )
    assert "1 new" in report and "61" in counter
    assert "refused" in report and "notes.exe" in report
    history, _, _ = c.predict(
        "How do moths stabilise flight?", [], "All tracks", "", "extractive", api_name="/ask"
    )
    assert "Moth Flight Dynamics" in last_text(history)


def test_bombs_archives_and_endless_lines_are_refused_without_expanding(
    page_url: str, tmp_path: Path
) -> None:
    import gzip
    import tracemalloc
    import zipfile

    from gradio_client import handle_file

    # Under the page's 1 MB upload cap, over the 512 MB it lets a file expand to.
    bomb = gzip_bomb(tmp_path / "bomb.jsonl.gz", 900 * 1024**2, fill=b"{}\n")
    endless = gzip_bomb(tmp_path / "endless.jsonl.gz", 64 * 1024**2, fill=b"a")
    archive = tmp_path / "papers.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("papers.jsonl", json.dumps({"abstract": "hidden " * 20}) + "\n")
    disguised = tmp_path / "listing.txt"
    disguised.write_bytes(gzip.compress(b"\xe8\xae\xba" * 1000))
    assert max(f.stat().st_size for f in (bomb, endless, archive, disguised)) < 1024**2
    c = client(page_url)
    tracemalloc.start()  # the page runs in this process: its allocations are traced too
    try:
        report, *_ = c.predict(
            [handle_file(str(f)) for f in (bomb, endless, archive, disguised)],
            api_name="/upload",
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "Indexed" not in report, report
    for name, why in (
        ("bomb.jsonl.gz", "file decompresses to more than 536,870,912 bytes"),
        ("endless.jsonl.gz", "line 1 is longer than any record"),
        ("papers.zip", "not a .txt, .jsonl or .jsonl.gz file"),
        ("listing.txt", "a gzip archive named like a text file"),
    ):
        assert f"refused **{name}**: {why}" in report.replace("\\", ""), (name, report)
    assert peak < 64 * 1024**2, peak  # streamed in chunks: nothing near 512 MB was held


def test_oversize_upload_is_refused_by_the_server(page_url: str) -> None:
    import httpx

    reply = httpx.post(
        page_url + "gradio_api/upload",
        files={"files": ("big.jsonl", b"x" * (2 * 1024 * 1024))},
        timeout=30,
    )
    assert reply.status_code == 413


def test_files_outside_the_app_are_refused(page_url: str) -> None:
    for path in (
        "gradio_api/file=/etc/passwd",
        "gradio_api/file=../../../../etc/passwd",
        "file=/etc/passwd",
    ):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(page_url + path, timeout=10).read()
        assert err.value.code in (403, 404), path


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed")
def test_page_in_a_real_browser(real_page_url: str) -> None:
    page_url = real_page_url
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = chromium(p)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(page_url, wait_until="load")
        page.locator("#question textarea").wait_for(timeout=60_000)
        page.get_by_text("How much faster is FS-DFM?").first.click()
        page.wait_for_function(
            "document.querySelector('#question textarea').value.includes('FS-DFM')",
            timeout=20_000,
        )
        page.locator("#ask").click()
        link = page.locator("#chat a[href='#src-1']").first
        link.wait_for(timeout=60_000)
        assert "128" in page.locator("#chat").inner_text()
        link.click()
        card = page.locator("details#src-1")
        page.wait_for_function(
            "document.querySelector('details#src-1').open === true", timeout=10_000
        )
        assert "FS-DFM" in card.inner_text()
        page.screenshot(path=str(ARTIFACTS / "chat.png"), full_page=True)
        browser.close()
    assert (ARTIFACTS / "chat.png").stat().st_size > 10_000


@pytest.fixture(scope="module")
def slow_page_url(fake_seed_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The page answering through an endpoint that streams its answers slowly (about 2 s
    each), so a second question can be sent while the first is still being answered."""
    with FakeOpenAI("slow", token_delay=0.1) as fake:
        url, app = _page(
            fake_seed_home,
            tmp_path_factory.mktemp("ui-slow"),
            FAKE_EMBED,
            backend="openai",
            base_url=fake.url,
            retries=0,
        )
        yield url
        app.close()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed")
def test_a_question_sent_during_an_answer_waits_and_is_answered(slow_page_url: str) -> None:
    import time

    from playwright.sync_api import sync_playwright

    questions = ["What is FS-DFM?", "What is SOTAlign?"]
    with sync_playwright() as p:
        browser = chromium(p)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(slow_page_url, wait_until="load")
        box = page.locator("#question textarea")
        box.wait_for(timeout=60_000)
        box.fill(questions[0])
        box.press("Enter")
        first = time.monotonic()
        # Typed once the first has left the box for the chat, as a user sees it go.
        page.wait_for_function(
            "q => document.querySelector('#chat').innerText.includes(q)",
            arg=questions[0],
            timeout=10_000,
        )
        box.fill(questions[1])
        page.locator("#ask").click()
        second = time.monotonic() - first
        chat = page.locator("#chat")
        # Shown in the chat as waiting while the first is answered...
        page.get_by_text("Waiting: answered once the question above is").wait_for(timeout=20_000)
        assert chat.locator("a[href='#src-1']").count() == 0  # the first is not answered yet
        # ... then answered: each answer cites its paper as [1].
        page.wait_for_function(
            "document.querySelectorAll('#chat a[href=\"#src-1\"]').length === 2",
            timeout=120_000,
        )
        page.wait_for_function(
            "!document.querySelector('#chat').innerText.includes('Waiting')", timeout=10_000
        )
        text = chat.inner_text()
        page.screenshot(path=str(ARTIFACTS / "queued-question.png"), full_page=True)
        sources = page.locator("#sources").inner_text()
        browser.close()
    assert second < 1.5, second
    assert text.count(questions[0]) == 1 and text.count(questions[1]) == 1, text
    assert text.index(questions[0]) < text.index(questions[1]), text
    assert "▌" not in text and "⚠️" not in text, text
    assert "[1] SOTAlign" in sources  # the cards are the latest answer's


# Two of the seed papers as ICML's own listing gives them (title, venue, page), added to the
# fast seed index: the same abstracts, so each merges with its seed record.
LINKED = {
    "TimeSAE": {
        "id": "icml2026-66052",
        "venue": "ICML 2026",
        "title": "TimeSAE: Sparse Decoding for Faithful Explanations of Black-Box Time Series "
        "Models",
        "url": "https://icml.cc/virtual/2026/poster/66052",
    },
    "SAEmnesia": {
        "id": "icml2026-64245",
        "venue": "ICML 2026",
        "title": "SAEmnesia: Erasing Concepts in Diffusion Models with Supervised Sparse "
        "Autoencoders",
        "openreview": "https://openreview.net/forum?id=Pa6EoOViOq",
    },
}


@pytest.fixture(scope="module")
def linked_page_url(
    fake_seed_home: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    import shutil

    from rag.index import PaperIndex

    home = tmp_path_factory.mktemp("linked") / "home"
    shutil.copytree(fake_seed_home, home)
    settings = Settings(home=home, embed=FAKE_EMBED)
    index = PaperIndex(settings)
    seed = {p.display_name: p for p in index.papers()}
    listing = home.parent / "icml.jsonl"
    rows = [
        {**row, "authors": list(seed[name].authors), "abstract": seed[name].abstract}
        for name, row in LINKED.items()
    ]
    listing.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    summary = index.ingest([listing], progress=False)
    assert summary.total_papers == 60, summary  # merged with the seed records
    url, app = _page(home, tmp_path_factory.mktemp("ui-linked"), FAKE_EMBED)
    yield url
    app.close()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed")
def test_source_cards_link_to_papers_and_references_copy(linked_page_url: str) -> None:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = chromium(p)
        # The clipboard granted, as a user's click grants it; the test reads it back.
        context = browser.new_context(
            viewport={"width": 1280, "height": 1000},
            permissions=["clipboard-read", "clipboard-write"],
        )
        page = context.new_page()
        page.goto(linked_page_url, wait_until="load")
        box = page.locator("#question textarea")
        box.wait_for(timeout=60_000)
        copy = page.locator("#copy-refs")
        assert copy.is_disabled()  # nothing cited yet
        box.fill("Which papers use sparse autoencoders?")
        page.locator("#ask").click()
        page.locator("#chat a[href='#src-1']").first.wait_for(timeout=60_000)
        page.wait_for_function("!document.querySelector('#copy-refs').disabled", timeout=10_000)

        # The cards of the papers whose listing has a page link to it, in a new tab.
        links = page.locator("#sources a.paper-link")
        hrefs = {links.nth(i).get_attribute("href"): links.nth(i) for i in range(links.count())}
        assert set(hrefs) == {LINKED["TimeSAE"]["url"], LINKED["SAEmnesia"]["openreview"]}
        for link in hrefs.values():
            assert link.get_attribute("target") == "_blank"
            assert "noopener" in (link.get_attribute("rel") or "").split()

        copy.click()
        status = page.locator("#copy-status")
        page.wait_for_function(
            "document.querySelector('#copy-status').innerText.includes('Copied')",
            timeout=10_000,
        )
        references = page.locator("#references textarea")
        text = references.input_value()
        clipboard = page.evaluate("navigator.clipboard.readText()")
        assert clipboard == text, (clipboard, text)
        page.locator("#sources details:has(a.paper-link) summary").first.click()
        page.screenshot(path=str(ARTIFACTS / "copy-references.png"), full_page=True)
        shown = status.inner_text()

        page.locator("#copy-bibtex").click()
        page.wait_for_function(
            "document.querySelector('#references textarea').value.startsWith('@')",
            timeout=10_000,
        )
        bib = references.input_value()
        assert page.evaluate("navigator.clipboard.readText()") == bib

        # A browser that refuses the clipboard: the box's text is selected for Ctrl+C.
        page.evaluate(
            "() => { navigator.clipboard.writeText = () => Promise.reject(new Error('no')); }"
        )
        copy.click()
        page.wait_for_function(
            "document.querySelector('#copy-status').innerText.includes('Ctrl+C')",
            timeout=10_000,
        )
        selected = page.evaluate(
            "(() => { const t = document.querySelector('#references textarea');"
            " return t.value.slice(t.selectionStart, t.selectionEnd); })()"
        )
        assert selected == text
        browser.close()
    lines = text.split("\n\n")[0].splitlines()  # the list, before any note on names
    assert all(re.match(r"\[\d+\] ", line) for line in lines), text
    timesae = next(line for line in lines if "TimeSAE" in line)
    assert timesae.endswith(
        "TimeSAE: Sparse Decoding for Faithful Explanations of Black-Box Time Series Models. "
        "ICML 2026. https://icml.cc/virtual/2026/poster/66052"
    ), timesae
    assert "Copied" in shown
    assert "@inproceedings{oublal2026timesae," in bib and "  year = {2026}," in bib
    assert "url = {https://openreview.net/forum?id=Pa6EoOViOq}" in bib


@pytest.fixture(scope="module")
def model_page_url(seed_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The page as `make run` starts it: the real seed index and the default local model."""
    import shutil

    home = tmp_path_factory.mktemp("ui-model") / "home"
    shutil.copytree(seed_home, home)
    port = free_port()
    app = launch(Settings(home=home, ui=UISettings(port=port)), block=False)
    yield f"http://127.0.0.1:{port}/"
    app.close()


# Width of a line of capitals in the heading's font against the same line in the generic
# fallback: equal widths mean the page's font had no glyphs for them.
_FONT_PROBE = """([selector, weight]) => {
  const el = document.querySelector(selector);
  const family = getComputedStyle(el).fontFamily;
  const ctx = document.createElement('canvas').getContext('2d');
  const width = (f) => {
    ctx.font = `${weight} 40px ${f}`;
    return ctx.measureText('ASBFKQ').width;
  };
  return {family, page: width(family), fallback: width('sans-serif')};
}"""


@pytest.mark.llm
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed")
def test_examples_get_model_written_answers_and_the_page_stays_local(
    model_page_url: str,
) -> None:
    from urllib.parse import urlparse

    from playwright.sync_api import sync_playwright

    from ui.app import EXAMPLES

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    hosts: set[str] = set()
    fonts: list[str] = []
    with sync_playwright() as p:
        browser = chromium(p)
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        page.on("request", lambda r: hosts.add(urlparse(r.url).hostname or r.url))
        page.on("response", lambda r: fonts.append(r.url) if ".woff" in r.url else None)
        page.goto(model_page_url, wait_until="load")
        page.locator("#question textarea").wait_for(timeout=60_000)
        for i, example in enumerate(EXAMPLES, start=1):
            page.get_by_text(example).first.click()
            # The example reaches the box through the server: ask once it is there, as a
            # user who sees it does (asking sooner races the load and asks nothing).
            page.wait_for_function(
                "q => document.querySelector('#question textarea').value === q",
                arg=example,
                timeout=30_000,
            )
            page.locator("#ask").click()
            # The byline ("— Written by ...") closes each finished answer.
            page.wait_for_function(
                f"document.querySelector('#chat').innerText.split('— ').length > {i}",
                timeout=240_000,
            )
            page.screenshot(path=str(ARTIFACTS / f"example-{i}.png"), full_page=True)
        text = page.locator("#chat").inner_text()
        assert text.count("Written by qwen2.5-coder-1.5b") == len(EXAMPLES), text
        assert "128" in text and "Quoted from the abstracts" not in text
        page.locator("details#src-1").first.click()
        for selector, weight in (("h2", 700), ("details#src-1 summary", 600)):
            probe = page.evaluate(_FONT_PROBE, [selector, weight])
            assert "Source Sans Pro" in probe["family"], probe
            assert abs(probe["page"] - probe["fallback"]) > 1, probe  # its own glyphs
        page.screenshot(path=str(ARTIFACTS / "examples.png"), full_page=True)
        browser.close()
    assert hosts == {"127.0.0.1"}, hosts
    assert fonts and not any("SemiBold" in f for f in fonts), fonts
