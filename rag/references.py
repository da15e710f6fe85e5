"""An answer's cited papers as references: a plain-text list, and BibTeX entries.

Fields come from listings, so they are cleaned like any shown text (rag.sanitize) and, in
BibTeX, escaped: a title with "&" or "{" must not break the reader's .bib file.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from urllib.parse import quote, urlsplit

from rag.answer import Answer, Source
from rag.corpus import Paper
from rag.sanitize import clean_text

_YEAR = re.compile(r"(?<!\d)(?:19|20)\d{2}(?!\d)")
# Words a key skips to reach the first word that tells papers apart.
_MINOR = frozenset(
    {"a", "an", "the", "on", "of", "for", "in", "to", "and", "with", "towards", "toward"}
    | {"via", "by", "from", "is", "are"}
)
# LaTeX's special characters as text; braces by name, since BibTeX counts "\{" as a brace.
_BIBTEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "{": r"\textbraceleft{}",
    "}": r"\textbraceright{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "^": r"\^{}",
    "~": r"\~{}",
}
_BIBTEX_SPECIAL = re.compile("[" + re.escape("".join(_BIBTEX_ESCAPES)) + "]")


def cited(answer: Answer | None) -> list[Source]:
    """The sources an answer cites, in [n] order: its sentences' citations and a list
    answer's papers. An answer that abstained cites nothing."""
    if answer is None or answer.abstained:
        return []
    used = {n for s in answer.sentences for n in s.citations} | {i.n for i in answer.items}
    return [s for s in answer.sources if s.n in used]


def web_url(paper: Paper) -> str:
    """The paper's page, if its listing gave an http(s) address; anything else ("javascript:",
    a bare path, an address with spaces) is no link."""
    url = paper.url.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return ""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return ""
    return url


def year(paper: Paper) -> int | None:
    """The listing's year, else the one its venue names ("ICML 2026")."""
    if paper.year:
        return paper.year
    found = _YEAR.search(paper.venue)
    return int(found.group()) if found else None


# A listing without titles (the .txt listings) leaves the index's own name for a paper.
UNTITLED = "Names in [brackets] are this index's names for papers listed without a title."
UNTITLED_NOTE = "The listing gives no title; the title is the name this index gives the paper"


def title(paper: Paper) -> str:
    """The title, else the name the index gave the paper (see `titled`)."""
    return clean_text(paper.title) or clean_text(paper.display_name) or paper.id


def titled(paper: Paper) -> bool:
    return bool(clean_text(paper.title))


def plain(papers: Sequence[Paper], numbers: Sequence[int] | None = None) -> str:
    """One line per paper, "[n] Authors. Title. Venue Year. URL"; `numbers` keeps the
    answer's own [n] (default 1, 2, ...). A paper listed without a title has its name in
    the index in brackets, and a last line says so."""
    lines = []
    for i, paper in enumerate(papers):
        n = numbers[i] if numbers is not None else i + 1
        venue = clean_text(paper.venue)
        when = year(paper)
        if when and str(when) not in venue:
            venue = f"{venue} {when}".strip()
        name = title(paper) if titled(paper) else f"[{title(paper)}]"
        parts = [clean_text(paper.authors_text), name, venue]
        text = " ".join(_sentence(p) for p in parts if p)
        if url := web_url(paper):
            text = f"{text} {url}"
        lines.append(f"[{n}] {text}")
    if not all(titled(p) for p in papers):
        lines += ["", UNTITLED]
    return "\n".join(lines)


def _sentence(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


def bibtex(papers: Sequence[Paper]) -> str:
    """One entry per paper (a paper listed twice, once): @inproceedings where the venue is
    known, else @misc. Keys are unique within the list and the same on every call."""
    entries = []
    taken: set[str] = set()
    seen: set[str] = set()
    for paper in papers:
        if paper.id in seen:
            continue
        seen.add(paper.id)
        key = _unique(bibtex_key(paper), paper, taken)
        taken.add(key)
        entries.append(_entry(paper, key))
    return "\n\n".join(entries)


def bibtex_key(paper: Paper) -> str:
    """First author's surname, year and the title's first telling word: "oublal2026timesae"."""
    surname = _ascii(paper.authors[0].split()[-1]) if paper.authors else ""
    words = [_ascii(w) for w in title(paper).split()]
    word = next((w for w in words if w and w not in _MINOR), "")
    when = year(paper)
    key = f"{surname or 'anon'}{when or ''}{word}"
    return key if (surname or word) else f"paper{_digest(paper.id)}"


def _unique(key: str, paper: Paper, taken: set[str]) -> str:
    # The suffix comes from the paper's id, so a paper keeps its key whatever else is listed
    # before it; a clash of suffixes (two ids, one digest prefix) takes a longer one.
    width = 4
    candidate = key
    while candidate in taken:
        candidate = f"{key}-{_digest(paper.id)[:width]}"
        width += 2
    return candidate


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _ascii(text: str) -> str:
    """Lower-case ASCII letters and digits: "Clémençon" -> "clemencon"."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]", "", folded.lower())


def _entry(paper: Paper, key: str) -> str:
    fields: list[tuple[str, str]] = []
    if paper.authors:
        names = [_name(a) for a in paper.authors]
        if paper.authors_truncated:
            names.append("others")  # BibTeX's own word for "et al."
        fields.append(("author", " and ".join(names)))
    # Double braces keep the title's capitals ("TimeSAE"), which styles would lower.
    fields.append(("title", "{" + escape(title(paper)) + "}"))
    venue = clean_text(paper.venue)
    if venue:
        fields.append(("booktitle", escape(venue)))
    if when := year(paper):
        fields.append(("year", str(when)))
    if url := web_url(paper):
        fields.append(("url", _bib_url(url)))
    if not titled(paper):
        fields.append(("note", UNTITLED_NOTE))
    kind = "inproceedings" if venue else "misc"
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@{kind}{{{key},\n{body}\n}}"


def _name(author: str) -> str:
    """An author as BibTeX reads names; one containing the word "and" is kept whole."""
    text = escape(clean_text(author))
    return "{" + text + "}" if re.search(r"\band\b", text, re.IGNORECASE) else text


def escape(text: str) -> str:
    """Text as a BibTeX field value: LaTeX's special characters written out, braces balanced."""
    text = " ".join(text.split())
    return _BIBTEX_SPECIAL.sub(lambda m: _BIBTEX_ESCAPES[m.group()], text)


def _bib_url(url: str) -> str:
    # The url field is read verbatim (the url package, biblatex): only characters that would
    # unbalance the field or end it are percent-encoded.
    return quote(url, safe="".join(chr(c) for c in range(33, 127) if chr(c) not in '{}\\"'))
