"""The chat page: streaming cited answers, source cards, follow-ups, filters, corpus, upload.

`build_app(settings)` makes the Blocks; `launch(settings)` serves it on 127.0.0.1 with no
share link, analytics off and no extra file paths exposed.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr

from rag.answer import Answer, clean_text
from rag.corpus import (
    DEFAULT_MAX_ABSTRACT_CHARS,
    DEFAULT_MAX_FILE_BYTES,
    SUPPORTED_SUFFIXES,
    check_file,
)
from rag.engine import Engine
from rag.index import IndexError_, IngestSummary
from rag.references import bibtex, cited, plain, web_url
from rag.settings import Settings  # sets GRADIO_ANALYTICS_ENABLED=False before gradio loads
from rag.text import split_sentences
from ui.turns import ChatSession, Turn

EXAMPLES = [
    "Which papers use sparse autoencoders?",
    "What has Quentin Bouniot worked on here?",
    "How much faster is FS-DFM?",
]
ALL_TRACKS = "All tracks"
# Gradio's own theme asks for Source Sans Pro at 400 and 600, and the 600 file it ships
# (SourceSansPro-SemiBold.woff2, 5 KB) holds a few glyphs only: bold text then mixed in
# capitals of a fallback font ("A" of "Ask the papers"). Regular and Bold are complete
# files of the same font, served by the page itself.
THEME = gr.themes.Default(
    font=[gr.themes.LocalFont("Source Sans Pro", weights=(400, 700)), "sans-serif"],
    font_mono=[gr.themes.LocalFont("IBM Plex Mono", weights=(400, 600)), "monospace"],
)
BROWSE_ROWS = 500

CSS = """
.source-card { border: 1px solid #ddd; border-radius: 6px; padding: 4px 10px; margin: 6px 0; }
.source-card summary { cursor: pointer; font-weight: 600; }
.source-card mark { background: #fff3a3; }
.source-meta { color: #555; font-size: 0.9em; }
.source-meta a { white-space: nowrap; }
#references textarea { font-family: var(--font-mono); font-size: 0.9em; line-height: 1.5; }
.abstained { color: #7a4b00; }
"""
# Clicking a citation [n] in an answer opens and shows source card n.
HEAD = """
<script>
document.addEventListener('click', function (event) {
  const link = event.target.closest('a[href^="#src-"]');
  if (!link) return;
  event.preventDefault();
  const card = document.getElementById(link.getAttribute('href').slice(1));
  if (card) { card.open = true; card.scrollIntoView({behavior: 'smooth', block: 'center'}); }
}, true);
</script>
"""
# "Copy references": the clipboard where the browser allows it (a secure context, a recent
# click), else the user copies from the box the text is also shown in.
COPY_JS = """
async (text, status) => {
  if (!text) return status;
  try {
    await navigator.clipboard.writeText(text);
    return '✓ Copied to the clipboard; the text is also below.';
  } catch (err) {
    const box = document.querySelector('#references textarea');
    if (box) { box.focus(); box.select(); }
    return 'The browser did not allow the clipboard: the text below is selected, ' +
      'press Ctrl+C (⌘C) to copy it.';
  }
}
"""


class ChatService:
    """What the page calls; one per app, shared by sessions (each has its Conversation)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = Engine(settings)
        self.index = self.engine.index
        self.retriever = self.engine.retriever
        self._lock = threading.Lock()
        self.uploads = settings.home / "uploads"
        # The embedding model's session loads behind the page, so the first question does
        # not wait for it.
        threading.Thread(target=self._warm, name="warm-embedding", daemon=True).start()
        self._stop = threading.Event()
        if settings.ui.refresh > 0:
            threading.Thread(target=self._follow, name="follow-index", daemon=True).start()

    def _warm(self) -> None:
        # A broken model folder is reported by the first question instead.
        with contextlib.suppress(Exception):
            self.index.embed_model.get_text_embedding_batch(["warm up"])

    def _follow(self) -> None:
        """Read the tables of a version another process wrote off the request path; a
        question still checks on its own, so it never answers from older tables."""
        while not self._stop.wait(self.settings.ui.refresh):
            with contextlib.suppress(Exception):  # an outage is reported to the questions
                self.retriever.refresh(background=True)

    def close(self) -> None:
        self._stop.set()

    # ---------------------------------------------------------------- uploads kept for later

    @property
    def _pending_file(self) -> Path:
        return self.uploads / "pending.json"

    def pending(self) -> list[Path]:
        """Uploads kept because their ingest failed (the store was down, or busy)."""
        try:
            names = json.loads(self._pending_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return [self.uploads / n for n in names if (self.uploads / str(n)).is_file()]

    def _set_pending(self, paths: list[Path]) -> None:
        names = sorted({p.name for p in paths})
        tmp = self._pending_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(names), encoding="utf-8")
        tmp.replace(self._pending_file)

    def index_uploads(
        self, accepted: list[Path], on_progress: Any = None
    ) -> tuple[IngestSummary | None, list[Path]]:
        """Ingest new uploads with those kept from a failed try; on failure they are kept.

        Returns the summary and the files indexed; raises the index error otherwise.
        """
        with self._lock:
            todo = sorted(set(self.pending()) | set(accepted))
            if not todo:
                return None, []
            self._set_pending(todo)  # written before the store is touched
        summary = self.index.ingest(todo, progress=False, on_progress=on_progress)
        with self._lock:
            self._set_pending([p for p in self.pending() if p not in todo])
        return summary, todo

    def engine_for(self, backend: str) -> Engine:
        """The page's engine, answered by the writer the user picked."""
        return self.engine.with_backend(backend)

    def paper_count(self, wait: bool = False) -> int:
        self.retriever.refresh(wait=wait)
        return len(self.retriever.papers)

    def backend_status(self, backend: str) -> str:
        # An embedding model without a fitted relevance model is said where the model is.
        warning = self.retriever.warning
        return self._backend_line(backend) + (f"\n\n⚠️ {warning}" if warning else "")

    def _backend_line(self, backend: str) -> str:
        llm = self.settings.llm
        if backend == "extractive":
            return "extractive: no LLM, answers are the sources' own sentences."
        if backend == "openai":
            where = llm.base_url or "(RAG_LLM_BASE_URL is not set)"
            return f"openai-compatible endpoint {where}, model {llm.model or 'default'}"
        model = Path(llm.model_path).name if llm.model_path else llm.local_model
        loaded = self.engine_for(backend).writer.loaded
        return f"local llama.cpp: {model} ({'loaded' if loaded else 'loads on first question'})"


# ---------------------------------------------------------------------------- rendering


def byline(answer: Answer) -> str:
    """Who wrote the answer's words, so a reader knows what a citation vouches for."""
    if answer.written_by == "model":
        who = f"Written by {(answer.model or answer.backend).removesuffix('.gguf')}"
        return f"{who}; every sentence checked against the abstract it cites."
    if answer.written_by == "extractive" and answer.items:
        return "The papers' own words, from the index."
    if answer.written_by == "extractive":
        return "Quoted from the abstracts."
    return ""


def answer_markdown(answer: Answer) -> str:
    """The checked answer with clickable citations; unsupported sentences marked."""
    if answer.abstained:
        return f"ℹ️ **No answer in the indexed papers.** {_md(answer.text)}"
    note = f"\n\n*{_md(answer.note)}*" if answer.note else ""
    if by := byline(answer):
        note += f"\n\n*— {_md(by)}*"
    if answer.items:
        head = _md(answer.text.split("\n", 1)[0])
        lines = [f"- **{_md(i.name)}**: {_md(i.gist)} [[{i.n}]](#src-{i.n})" for i in answer.items]
        if answer.more:
            lines.append(f"- and {answer.more} more, listed with the sources.")
        return head + "\n\n" + "\n".join(lines) + note
    parts = []
    for s in answer.sentences:
        cites = "".join(f"[[{n}]](#src-{n})" for n in s.citations)
        text = _md(s.text)
        if s.kind == "verdict":
            text = f"**{text}**"
        elif not s.supported:
            text = f"⚠️ *{text}* (not supported by the cited abstract)"
        parts.append(f"{text} {cites}".strip())
    return " ".join(parts) + note


def _problem(err: Exception) -> str:
    """An index error as the page shows it: a sentence, safe as Markdown."""
    text = str(err)
    return _md(text[:1].upper() + text[1:])


def _md(text: str) -> str:
    """Plain text safe inside Markdown: no markup, links or HTML from sources survive."""
    text = clean_text(text)
    return re.sub(r"([\\`*_{}\[\]<>#|])", r"\\\1", text)


def sources_html(answer: Answer | None) -> str:
    if answer is None or not answer.sources:
        return "<p class='source-meta'>Sources of the latest answer appear here.</p>"
    support: dict[int, list[str]] = {}
    for s in answer.sentences:
        for n in s.citations:
            if s.evidence:
                support.setdefault(n, []).append(s.evidence)
    cards = []
    for src in answer.sources:
        p = src.paper
        abstract = _highlight(p.abstract, support.get(src.n, []))
        track = f" · {_html(p.track)}" if p.track else ""
        if url := web_url(p):  # the listing's page for the paper, outside this one
            track += (
                f" · <a class='paper-link' href='{html.escape(url, quote=True)}'"
                " target='_blank' rel='noopener noreferrer'>paper page ↗</a>"
            )
        title = (
            f"<div class='source-meta'>{_html(p.title)}</div>"
            if p.title and (p.title != p.display_name)
            else ""
        )
        cards.append(
            f"<details class='source-card' id='src-{src.n}'>"
            f"<summary>[{src.n}] {_html(p.display_name)}</summary>{title}"
            f"<div class='source-meta'>{_html(p.authors_text)}{track}</div>"
            f"<p>{abstract}</p></details>"
        )
    if answer.total:
        n = answer.total
        cards.insert(
            0,
            f"<p class='source-meta' id='sources-count'>{n} indexed paper{'s' if n != 1 else ''}"
            f" {'is' if n == 1 else 'are'} about this; the most relevant come first.</p>",
        )
    return "\n".join(cards)


def _html(text: str) -> str:
    """A field of a source as HTML text: its markup taken out, then what is left escaped."""
    return html.escape(clean_text(text))


def _highlight(abstract: str, evidence: list[str]) -> str:
    """The abstract, escaped, with the sentences that support the answer marked."""
    wanted = {" ".join(clean_text(e).split()) for e in evidence}
    out = []
    for sentence in split_sentences(abstract):
        text = html.escape(clean_text(sentence))
        if " ".join(clean_text(sentence).split()) in wanted or any(
            w and w in " ".join(clean_text(sentence).split()) for w in wanted
        ):
            text = f"<mark>{text}</mark>"
        out.append(text)
    return " ".join(out)


# ---------------------------------------------------------------------------- the app


def build_app(settings: Settings | None = None, service: ChatService | None = None) -> gr.Blocks:
    settings = settings or Settings()
    service = service or ChatService(settings)
    try:
        tracks = [ALL_TRACKS, *service.retriever.tracks]
        count = service.paper_count()
    except Exception as err:  # an unreachable store still gets a page that says so
        tracks, count = [ALL_TRACKS], 0
        startup_error = f"⚠️ The index could not be opened: {html.escape(str(err))}"
    else:
        startup_error = ""

    with gr.Blocks(title="Ask the papers") as app:
        # Gradio copies the empty session for each page session when first used. Not a
        # function: Gradio calls one from a load event that can replace the session a quick
        # first question has already joined.
        session = gr.State(ChatSession())
        last_answer = gr.State(None)
        gr.Markdown(
            "## Ask the papers\nAnswers cite the indexed abstracts; click [n] to see "
            "the source." + (f"\n\n{startup_error}" if startup_error else "")
        )
        with gr.Row():
            with gr.Column(scale=3):
                with gr.Tab("Chat"):
                    chatbot = gr.Chatbot(label="Answers", height=460, elem_id="chat")
                    with gr.Row():
                        question = gr.Textbox(
                            placeholder="Ask about the papers…",
                            show_label=False,
                            scale=5,
                            elem_id="question",
                            max_lines=4,
                        )
                        send = gr.Button("Ask", variant="primary", scale=1, elem_id="ask")
                    gr.Examples(EXAMPLES, inputs=question, label="Try")
                    with gr.Row():
                        clear = gr.Button("New conversation", size="sm")
                        copy_plain = gr.Button(
                            "Copy references", size="sm", interactive=False, elem_id="copy-refs"
                        )
                        copy_bib = gr.Button(
                            "Copy BibTeX", size="sm", interactive=False, elem_id="copy-bibtex"
                        )
                    copy_status = gr.Markdown(elem_id="copy-status")
                    references = gr.Textbox(
                        label="References",
                        lines=4,
                        max_lines=14,
                        visible=False,
                        buttons=["copy"],
                        elem_id="references",
                    )
                    sources = gr.HTML(sources_html(None), elem_id="sources")
                    # The API's one-call ask (`/ask`: gradio_client, evals); the page's own
                    # Ask queues the question first, then answers, as two steps.
                    ask_api = gr.Button(visible=False)
                with gr.Tab("Papers"):
                    browse_status = gr.Markdown(elem_id="papers-status")
                    browse_filter = gr.Textbox(
                        label=f"Filter (name, author, words; the first {BROWSE_ROWS} matches)"
                    )
                    browse_track = gr.Dropdown(tracks, value=ALL_TRACKS, label="Track")
                    table = gr.Dataframe(
                        headers=["id", "paper", "authors", "track"],
                        interactive=False,
                        wrap=True,
                        elem_id="papers",
                    )
                    similar_title = gr.Markdown("Select a paper to see similar papers.")
                    similar = gr.HTML()
                with gr.Tab("Add papers"):
                    gr.Markdown(
                        f"Upload listings (.txt) or JSON Lines (.jsonl, .jsonl.gz), up to "
                        f"{settings.ui.max_upload_mb:g} MB each. Papers already indexed stay."
                    )
                    # No file_types here: Gradio would reject the whole batch for one bad
                    # file; check_uploads refuses each bad file and indexes the rest.
                    files = gr.File(file_count="multiple", label="Files", elem_id="upload-files")
                    add = gr.Button("Index these files")
                    report = gr.Markdown()
            with gr.Column(scale=1):
                track = gr.Dropdown(tracks, value=ALL_TRACKS, label="Track filter")
                author = gr.Textbox(label="Author filter", placeholder="e.g. Bouniot")
                backend = gr.Radio(
                    ["local", "openai", "extractive"],
                    value=settings.llm.backend,
                    label="Answer with",
                )
                status = gr.Markdown(service.backend_status(settings.llm.backend))
                counter = gr.Markdown(f"**{count}** papers indexed")

        def answer_turns(chat: ChatSession) -> Iterator[tuple[list[dict[str, Any]], Any]]:
            """Answer the session's waiting questions in the order asked, yielding the chat
            and, as each finishes, its answer. Only one caller answers a session's questions
            (another returns at once: the one answering takes its question too)."""
            if not chat.start():
                return
            turn: Turn | None = None
            try:
                while (turn := chat.next()) is not None:
                    yield from answer_turn(chat, turn)
            except BaseException:  # the page closed mid-answer, or a bug: free the queue
                chat.stop()
                if turn is not None and not turn.answered:
                    chat.done(turn, None)
                raise

        def answer_turn(
            chat: ChatSession, turn: Turn
        ) -> Iterator[tuple[list[dict[str, Any]], Any]]:
            yield chat.render(), None  # its "waiting" mark becomes "…"
            conv = chat.conversation
            engine = service.engine_for(turn.backend)
            streamed: list[str] = []
            done = threading.Event()
            result: dict[str, Any] = {}

            def work() -> None:
                try:
                    result["answer"] = engine.ask(
                        turn.question,
                        conv,
                        track=turn.track,
                        author=turn.author,
                        on_token=streamed.append,
                    )
                except Exception as err:  # shown in the chat, never a dead page
                    result["error"] = err
                finally:
                    done.set()

            threading.Thread(target=work, daemon=True).start()
            shown = 0
            while not done.wait(0.15):
                if len(streamed) != shown:
                    shown = len(streamed)
                    chat.show(turn, _md("".join(streamed)) + " ▌")
                    yield chat.render(), None
            if "error" in result:
                error = result["error"]
                if isinstance(error, IndexError_):  # e.g. the Chroma server is down
                    text = f"⚠️ The index is unavailable, try again shortly: {_md(str(error))}"
                else:
                    text = f"⚠️ Something went wrong: {_md(str(error))}"
                chat.show(turn, text)
                chat.done(turn, None)
                yield chat.render(), None
                return
            answer = result["answer"]
            text = answer_markdown(answer)
            standalone = conv.turns[-1].standalone
            if standalone != turn.question:
                text = f"*(searched: {_md(standalone)})*\n\n" + text
            chat.show(turn, text)
            chat.done(turn, answer)
            # After "New conversation" the answer is not the latest one on the page.
            yield chat.render(), answer if chat.current(turn) else None

        def ask(
            chat: ChatSession,
            message: str,
            history: list[dict[str, Any]] | None,
            track_value: str,
            author_value: str,
            backend_value: str,
        ) -> Turn:
            return chat.ask(
                message,
                track=None if track_value in (None, "", ALL_TRACKS) else track_value,
                author=(author_value or "").strip() or None,
                backend=backend_value,
                history=history,
            )

        def enqueue(
            message: str,
            history: list[dict[str, Any]],
            chat: ChatSession,
            track_value: str,
            author_value: str,
            backend_value: str,
        ) -> tuple[Any, str]:
            """The page's Ask: the question joins the chat at once, waiting if another is
            being answered; `answer_waiting` then answers it."""
            message = (message or "").strip()
            if not message:
                return gr.skip(), gr.skip()
            ask(chat, message, history, track_value, author_value, backend_value)
            return chat.render(), ""

        def answer_waiting(chat: ChatSession) -> Iterator[tuple[Any, ...]]:
            unchanged = (gr.skip(),) * 7
            answered = False
            for history, answer in answer_turns(chat):
                answered = True
                if answer is None:
                    yield history, *unchanged[1:]
                else:  # the copy buttons now give this answer's papers; earlier ones go
                    can_copy = bool(cited(answer))
                    yield (
                        history,
                        answer,
                        sources_html(answer),
                        gr.update(interactive=can_copy),
                        gr.update(interactive=can_copy),
                        gr.update(visible=False, value=""),
                        "",
                    )
            if not answered:  # nothing waited: a generator that yields nothing empties outputs
                yield unchanged

        def respond(
            message: str,
            history: list[dict[str, Any]],
            chat: ChatSession,
            track_value: str,
            author_value: str,
            backend_value: str,
        ) -> Iterator[tuple[Any, ...]]:
            """One question asked and answered in one call (the `/ask` API)."""
            message = (message or "").strip()
            if not message:
                yield history, gr.skip(), gr.skip(), ""
                return
            turn = ask(chat, message, history, track_value, author_value, backend_value)
            yield chat.render(until=turn), gr.skip(), gr.skip(), ""
            while not turn.answered:
                for _ in answer_turns(chat):
                    yield chat.render(until=turn), gr.skip(), gr.skip(), gr.skip()
                if not turn.answered:  # another call of this session is answering it
                    time.sleep(0.15)
            answer = turn.answer
            if answer is None or not chat.current(turn):
                yield chat.render(until=turn), gr.skip(), gr.skip(), ""
            else:
                yield chat.render(until=turn), answer, sources_html(answer), ""

        asked = [question, chatbot, session, track, author, backend]
        # Ask and Enter never drop a question: each joins the queue at once, outside the
        # page's limit on questions answered at once; the answering after it runs one at a
        # time per session, and again after the running one if asked meanwhile.
        gr.on(
            [send.click, question.submit],
            enqueue,
            asked,
            [chatbot, question],
            trigger_mode="multiple",
            concurrency_limit=None,
            show_progress="hidden",
            api_visibility="private",
        ).then(
            answer_waiting,
            session,
            [chatbot, last_answer, sources, copy_plain, copy_bib, references, copy_status],
            trigger_mode="always_last",
            concurrency_id="answers",
            api_visibility="private",
        )
        # One limit for the page's answers and the API's (settings.ui.concurrency).
        ask_api.click(
            respond,
            asked,
            [chatbot, last_answer, sources, question],
            api_name="ask",
            concurrency_id="answers",
        )

        def new_conversation(chat: ChatSession) -> tuple[Any, ...]:
            chat.reset()
            off = gr.update(interactive=False)
            return [], None, sources_html(None), gr.update(visible=False, value=""), "", off, off

        clear.click(
            new_conversation,
            session,
            [chatbot, last_answer, sources, references, copy_status, copy_plain, copy_bib],
            api_visibility="private",
        )

        def show_references(answer: Answer | None, kind: str) -> tuple[Any, str]:
            """The latest answer's cited papers, as a reference list or BibTeX, in the box."""
            sources = cited(answer)
            if not sources:
                return gr.update(visible=False, value=""), "The latest answer cites no papers."
            papers = [s.paper for s in sources]
            if kind == "bibtex":
                text, label = bibtex(papers), "References (BibTeX)"
            else:
                text, label = plain(papers, [s.n for s in sources]), "References"
            return gr.update(visible=True, value=text, label=label), ""

        for button, kind in ((copy_plain, "plain"), (copy_bib, "bibtex")):
            button.click(
                lambda answer, kind=kind: show_references(answer, kind),
                last_answer,
                [references, copy_status],
                api_visibility="private",
            ).then(
                None,
                [references, copy_status],
                copy_status,
                js=COPY_JS,
                api_visibility="private",
            )
        backend.change(service.backend_status, backend, status, api_visibility="private")

        def browse(text: str, track_value: str) -> tuple[list[list[str]], str]:
            status = ""
            try:
                service.retriever.refresh()
            except IndexError_ as err:
                status = f"⚠️ {_problem(err)}"
                if not service.retriever.loaded:
                    return [], status
                status += "\n\nThe list below is as it was last read."
            want = (text or "").casefold().split()
            rows = []
            for p in sorted(
                service.retriever.papers.values(), key=lambda p: p.display_name.casefold()
            ):
                if track_value not in (None, "", ALL_TRACKS) and p.track != track_value:
                    continue
                hay = f"{p.display_name} {p.title} {' '.join(p.authors)} {p.abstract}".casefold()
                if all(w in hay for w in want):
                    rows.append(
                        [p.id, clean_text(p.display_name), clean_text(p.authors_text), p.track]
                    )
                    if len(rows) == BROWSE_ROWS:
                        break  # a conference's worth of rows would stall the page; filter
            return rows, status

        def show_similar(rows: Any, evt: gr.SelectData) -> tuple[str, str]:
            try:
                paper_id = rows.iloc[evt.index[0], 0]
            except Exception:
                return "Select a paper to see similar papers.", ""
            paper = service.retriever.papers.get(paper_id)
            if paper is None:
                return "That paper is no longer indexed.", ""
            try:
                hits = service.index.dense_search(paper.abstract, k=6)
            except IndexError_ as err:
                return f"⚠️ {_problem(err)}", ""
            items = "".join(
                f"<li><b>{_html(h.paper.display_name)}</b> — "
                f"{_html(h.paper.authors_text)} ({h.score:.2f})</li>"
                for h in hits
                if h.paper.id != paper.id
            )[:20000]
            return f"Papers similar to **{_md(paper.display_name)}**:", f"<ol>{items}</ol>"

        browsed = [table, browse_status]
        browse_filter.change(browse, [browse_filter, browse_track], browsed, api_name="browse")
        browse_track.change(
            browse, [browse_filter, browse_track], browsed, api_visibility="private"
        )
        table.select(show_similar, table, [similar_title, similar], api_visibility="private")
        app.load(browse, [browse_filter, browse_track], browsed, api_visibility="private")

        def upload(
            paths: list[str] | None,
            progress: gr.Progress = gr.Progress(),  # noqa: B008  (how Gradio injects progress)
        ) -> tuple[str, str, Any, Any]:
            accepted, refused = check_uploads(
                paths or [],
                settings.ui.max_upload_mb,
                service.uploads,
                settings.ingest.max_file_bytes,
                settings.ingest.max_abstract_chars,
            )
            lines = [f"- refused **{_md(name)}**: {_md(why)}" for name, why in refused]
            if not paths and not service.pending():
                return "Choose one or more files first.", gr.skip(), gr.skip(), gr.skip()
            try:
                progress(0, desc="embedding")
                summary, indexed = service.index_uploads(
                    accepted,
                    lambda done, total: progress(done / max(total, 1), desc="embedding"),
                )
                count = service.paper_count(wait=True)  # what this ingest wrote
                new_tracks = [ALL_TRACKS, *service.retriever.tracks]
            except IndexError_ as err:
                kept = ", ".join(_md(p.name.split("-", 1)[-1]) for p in service.pending())
                lines.insert(
                    0,
                    f"⚠️ Not indexed: {_md(str(err))}\n\n"
                    + (
                        f"Kept for later: {kept}. Press “Index these files” again once "
                        "the index is back; there is no need to upload them again."
                        if kept
                        else ""
                    ),
                )
                return "\n".join(lines), gr.skip(), gr.skip(), gr.skip()
            if summary is not None:
                earlier = len(indexed) - len(accepted)
                lines.insert(
                    0,
                    f"Indexed: {summary.new} new, {summary.changed} changed, "
                    f"{summary.unchanged} unchanged papers; "
                    f"{summary.total_papers} papers in the index."
                    + (f" ({earlier} kept from an earlier try included.)" if earlier > 0 else ""),
                )
                lines += [f"- skipped `{_md(p)}`" for p in summary.problems]
            return (
                "\n".join(lines),
                f"**{count}** papers indexed",
                gr.update(choices=new_tracks),
                gr.update(choices=new_tracks),
            )

        add.click(upload, files, [report, counter, track, browse_track], api_name="upload")
    app.queue(default_concurrency_limit=settings.ui.concurrency, max_size=settings.ui.max_queue)
    return app


def check_uploads(
    paths: list[str],
    max_mb: float,
    store: Path,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_abstract_chars: int = DEFAULT_MAX_ABSTRACT_CHARS,
) -> tuple[list[Path], list[tuple[str, str]]]:
    """Uploads that pass the allow-list, the size cap and a streamed read (so a gzip bomb or
    an endless line is refused before ingest holds it), copied under RAG_HOME/uploads."""
    accepted, refused = [], []
    store.mkdir(parents=True, exist_ok=True)
    for raw in paths:
        path = Path(raw)
        name = path.name
        if not name.lower().endswith(SUPPORTED_SUFFIXES):
            refused.append((name, "not a .txt, .jsonl or .jsonl.gz file"))
            continue
        size = path.stat().st_size
        if size > max_mb * 1024 * 1024:
            refused.append((name, f"{size / 1e6:.1f} MB is over the {max_mb:g} MB limit"))
            continue
        why = check_file(path, max_file_bytes, max_abstract_chars)
        if why:
            refused.append((name, why))
            continue
        with path.open("rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()[:16]
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[-80:]
        target = store / f"{digest}-{safe}"
        shutil.copyfile(path, target)
        accepted.append(target)
    return accepted, refused


def launch(settings: Settings | None = None, block: bool = True) -> gr.Blocks:
    """Serve the page: loopback only, never a share link, no extra readable paths."""
    settings = settings or Settings()
    service = ChatService(settings)
    app = build_app(settings, service)
    close = app.close

    def close_page(*args: Any, **kwargs: Any) -> None:
        service.close()  # its background check of the index stops with the page
        close(*args, **kwargs)

    app.close = close_page  # type: ignore[method-assign]
    print(
        f"Chat page on http://{settings.ui.host}:{settings.ui.port} (Ctrl-C stops it)", flush=True
    )
    app.launch(
        server_name=settings.ui.host,
        server_port=settings.ui.port,
        share=False,
        allowed_paths=[],
        max_file_size=f"{settings.ui.max_upload_mb:g}mb",
        show_error=False,
        css=CSS,
        head=HEAD,
        theme=THEME,
        footer_links=[],
        prevent_thread_lock=not block,
        quiet=True,  # Gradio's banner offers a public link; this page never opens one
    )
    return app
