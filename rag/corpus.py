"""Reads paper listings and JSON Lines files into `Paper` records.

Two formats:
- listings (`.txt`): the conference "论文检索" export, one paragraph per field
  (optional track "Area · Subarea", comma-separated authors, the abstract);
- JSON Lines (`.jsonl`, `.jsonl.gz`): one object per line with at least an `abstract`.

Reading never aborts: every block that cannot be used becomes a `Problem` with file:line and
the reason, and everything else is returned.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rag.shortforms import ShortForms, shipped
from rag.text import looks_coined, short_phrase

LISTING_SUFFIXES = (".txt",)
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz")
SUPPORTED_SUFFIXES = LISTING_SUFFIXES + JSONL_SUFFIXES
LISTING_HEADER = "论文检索"
TRUNCATION_MARK = "等"
TRACK_SEPARATOR = " · "

DEFAULT_MAX_ABSTRACT_CHARS = 20_000
DEFAULT_MAX_FILE_BYTES = 512 * 1024 * 1024
READ_CHUNK = 1024 * 1024
MAX_PROBLEMS_PER_FILE = 1000
MIN_ABSTRACT_WORDS = 12
# A listing's fields are told apart by their look; a "paragraph" of fewer words after an
# author line is debris (a stray comma, a page number), not an abstract.
MIN_LISTING_ABSTRACT_WORDS = 3


@dataclass(frozen=True, slots=True)
class Problem:
    """A block or file that was skipped, and why."""

    source: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Paper:
    """One paper. Records read from a single source and merged papers share this shape."""

    id: str
    abstract: str
    title: str = ""
    authors: tuple[str, ...] = ()
    authors_truncated: bool = False
    track: str = ""
    venue: str = ""
    url: str = ""
    year: int | None = None
    keywords: tuple[str, ...] = ()
    source: str = ""
    sources: tuple[str, ...] = ()
    own_id: str = ""
    aliases: tuple[str, ...] = ()
    display_name: str = ""
    names: tuple[str, ...] = ()  # names the abstract coins ("TimeSAE", "TimeSAE-Lib")

    @property
    def area(self) -> str:
        return split_track(self.track)[0]

    @property
    def subarea(self) -> str:
        return split_track(self.track)[1]

    @property
    def first_author(self) -> str:
        return self.authors[0] if self.authors else ""

    @property
    def key(self) -> str:
        """Identity of the text: equal for the same abstract up to whitespace and markup."""
        return abstract_key(self.abstract)

    @property
    def authors_text(self) -> str:
        text = ", ".join(self.authors)
        return f"{text} et al." if self.authors_truncated else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "display_name": self.display_name,
            "title": self.title,
            "authors": list(self.authors),
            "authors_truncated": self.authors_truncated,
            "track": self.track,
            "area": self.area,
            "subarea": self.subarea,
            "venue": self.venue,
            "url": self.url,
            "year": self.year,
            "keywords": list(self.keywords),
            "abstract": self.abstract,
            "source": self.source,
            "sources": list(self.sources),
            "aliases": list(self.aliases),
            "names": list(self.names),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Paper:
        return cls(
            id=data["id"],
            abstract=data["abstract"],
            title=data.get("title", ""),
            authors=tuple(data.get("authors", ())),
            authors_truncated=bool(data.get("authors_truncated", False)),
            track=data.get("track", ""),
            venue=data.get("venue", ""),
            url=data.get("url", ""),
            year=data.get("year"),
            keywords=tuple(data.get("keywords", ())),
            source=data.get("source", ""),
            sources=tuple(data.get("sources", ())),
            own_id=data.get("own_id", ""),
            aliases=tuple(data.get("aliases", ())),
            display_name=data.get("display_name", ""),
            names=tuple(data.get("names", ())),
        )


@dataclass
class ReadResult:
    papers: list[Paper] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


# ---------------------------------------------------------------------------- normalisation

_LATEX_WRAPPERS = re.compile(
    r"\\(?:emph|textit|textbf|texttt|textsc|textrm|textsf|text|mathrm|mathbf|mathit|mathcal"
    r"|mathbb|mathsf|operatorname|underline|url|href)\s*\{([^{}]*)\}"
)
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def abstract_key(text: str) -> str:
    """Hash of an abstract with whitespace, case, LaTeX and Markdown markup removed."""
    t = unicodedata.normalize("NFKC", text)
    for _ in range(3):  # nested wrappers such as \textbf{\emph{x}}
        t = _LATEX_WRAPPERS.sub(r"\1", t)
    t = _LATEX_COMMAND.sub(" ", t)
    t = _NON_WORD.sub(" ", t.casefold()).strip()
    return hashlib.sha256(t.encode()).hexdigest()


def derived_id(text: str) -> str:
    """The id of a paper whose source gives none: stable across runs and file orders."""
    return "p-" + abstract_key(text)[:16]


def split_track(track: str) -> tuple[str, str]:
    """("Deep Learning", "Attention Mechanisms") from "Deep Learning · Attention Mechanisms"."""
    for sep in (TRACK_SEPARATOR, "·", "->", " > "):
        if sep in track:
            area, _, sub = track.partition(sep)
            return area.strip(), sub.strip()
    return track.strip(), ""


# ---------------------------------------------------------------------------- authors


def parse_authors(value: str | Iterable[Any]) -> tuple[tuple[str, ...], bool]:
    """Author names and whether the list was truncated ("等", "et al.", "...")."""
    if isinstance(value, str):
        parts = re.split(r"[,，;；、]", value)
    else:
        parts = [str(v) for v in value if v is not None]
    names: list[str] = []
    truncated = False
    for raw in parts:
        name = " ".join(raw.split())
        for mark in (TRUNCATION_MARK, "et al.", "et al", "…", "..."):
            if name.endswith(mark):
                truncated = True
                name = name[: -len(mark)].strip()
        if name:
            names.append(name)
    return tuple(names), truncated


_AUTHOR_NAME = re.compile(r"^[^\d!?:;=<>{}\[\]$\\\x00-\x1f\x7f]{1,60}$")
_ENDS_WITH_INITIAL = re.compile(r"(?:^|\s)\w\.$")


def looks_like_authors(line: str) -> bool:
    names, truncated = parse_authors(line)
    if not names:
        return False
    if len(line) > 3000:
        return False
    ending = line.rstrip()
    if ending.endswith(("!", "?", ":")) or (
        ending.endswith(".") and not truncated and not _ENDS_WITH_INITIAL.search(ending)
    ):
        return False
    return all(_AUTHOR_NAME.match(n) and len(n.split()) <= 7 for n in names)


def looks_like_track(line: str) -> bool:
    if "·" not in line or len(line) > 200 or line.rstrip().endswith("."):
        return False
    if any(c < " " or c == "\x7f" for c in line):
        return False  # control characters: debris, not a track name
    area, sub = split_track(line)
    return bool(area) and bool(sub) and len(area.split()) <= 6


def looks_like_abstract(line: str) -> bool:
    return len(line.split()) >= MIN_ABSTRACT_WORDS


# ---------------------------------------------------------------------------- display names

_GENERIC_SUFFIXES = ("-based", "-like", "-free", "-aware", "-level", "-wise", "-style", "-scale")
_NAME_TOKEN = r"[A-Za-z][A-Za-z0-9]*(?:[-‑][A-Za-z0-9]+)*"
_INTRODUCE = re.compile(
    r"\b(?:(?:we|this paper|this work|paper|and)\s+(?:\w+ly\s+|first\s+|further\s+|then\s+)?"
    r"(?:propose|proposes|introduce|introduces|present|presents|develop|develops|design|"
    r"designs|build|builds|release|releases|construct|constructs|curate|curates|formulate)"
    r"|by\s+(?:proposing|introducing|presenting|developing|designing)"
    r"|our\s+(?:\w+\s+)?contribution\s+is)\s+"
    r"([^.;:]{0,160})",
    re.IGNORECASE,
)
_NAMED = re.compile(
    r"\b(?:called|named|dubbed|termed|coined)\s+\W{0,3}(" + _NAME_TOKEN + r")", re.IGNORECASE
)
_APPOSITIVE = re.compile(
    r"\b(" + _NAME_TOKEN + r"),\s+(?:a|an|the)\s+(?:[\w\-]+\s+){0,4}?(?:framework|method|approach|"
    r"benchmark|model|algorithm|variant|system|dataset|technique|strategy|library|toolkit|"
    r"pipeline|architecture|metric|family|suite|solver|agent|protocol|procedure|loss|objective)s?\b"
)
_PAREN = re.compile(r"\((" + _NAME_TOKEN + r")\)")
_BOLD = re.compile(r"\*\*(" + _NAME_TOKEN + r")\*\*|\\textbf\{(" + _NAME_TOKEN + r")\}")
_TOKEN = re.compile(_NAME_TOKEN)


_INTRODUCED_WORD = re.compile(r"^(?:a\s+|an\s+|the\s+)?(" + _NAME_TOKEN + r")\s*[,:(]")


def name_shaped(token: str) -> bool:
    """Whether a token could be a coined name (TimeSAE, NAtS-L, FS-DFM, I2P), whoever coins it."""
    parts = token.split("-")
    if token.casefold().endswith(_GENERIC_SUFFIXES) or (
        len(parts) > 1 and all(p.islower() for p in parts[1:])
    ):
        return False  # "LLM-based", "LLM-in-the-loop": a description, not a name
    if len(parts) > 1 and all(re.fullmatch(r"[A-Z]?[a-z]{2,}|of|and|to", p) for p in parts):
        return False  # "Concept-Guided", "Mixture-of-Experts": words, not a coined name
    if len(token) < 2 or len(token) > 30:
        return False
    # Shaped like a coined name and spelled with a capital.
    return looks_coined(token) and any(c.isupper() for c in token)


def method_name(abstract: str) -> str:
    """The name the abstract coins for its contribution ("NAtS-L", "TimeSAE"), or ""."""
    names = coined_names(abstract)
    return names[0] if names else ""


def coined_names(abstract: str, forms: ShortForms | None = None) -> list[str]:
    """Every name the abstract coins (method, benchmark, system), the main one first; a form
    the field shares (`forms`, the shipped fit by default: "LLM", "GRPO") is none."""
    common = (shipped() if forms is None else forms).is_common

    def _is_method_name(token: str) -> bool:
        return name_shaped(token) and not common(token)

    text = re.sub(r"https?://\S+", " ", abstract).replace("**", "")
    counts = Counter(t for t in _TOKEN.findall(text) if _is_method_name(t))
    scores: Counter[str] = Counter()
    for m in _NAMED.finditer(text):
        if _is_method_name(m.group(1)):
            scores[m.group(1)] += 6
    for m in _INTRODUCE.finditer(text):
        span = m.group(1)
        lead = _INTRODUCED_WORD.match(span)
        if lead and lead.group(1)[0].isupper() and not common(lead.group(1)):
            scores[lead.group(1)] += 7  # "we present Orak, a benchmark ..."
        for paren in _PAREN.findall(span):
            if _is_method_name(paren):
                scores[paren] += 8
        for tok in _TOKEN.findall(span)[:6]:
            if _is_method_name(tok):
                scores[tok] += 5
                break
    for m in _APPOSITIVE.finditer(text):
        if _is_method_name(m.group(1)):
            scores[m.group(1)] += 6  # "... yield iSAE, a variant of the standard TopK SAE"
    for m in _BOLD.finditer(text):
        tok = m.group(1) or m.group(2)
        if _is_method_name(tok):
            scores[tok] += 3
    if not scores:
        return []  # a name merely used (in parentheses, repeated) is not one the paper coins
    for paren in _PAREN.findall(text):
        if paren in scores:
            scores[paren] += 2
    for tok in scores:
        scores[tok] += min(counts[tok], 5)
    ranked = sorted(scores, key=lambda tok: (-scores[tok], text.find(tok)))
    # Secondary names need a strong signal of their own; a passing capitalised word does not.
    return [ranked[0]] + [t for t in ranked[1:] if scores[t] >= 8]


def _surname(name: str) -> str:
    parts = name.replace("(", " ").replace(")", " ").split()
    return parts[-1].title() if parts and parts[-1].isupper() else (parts[-1] if parts else "")


def fallback_name(paper: Paper) -> str:
    """A paper with neither title nor coined name: its first author and track, or, with no
    authors, a few words of what its abstract says it does (never "Anonymous")."""
    topic = paper.subarea or paper.area
    if paper.authors:
        return f"{_surname(paper.first_author)} et al. ({topic or short_phrase(paper.abstract, 6)})"
    what = short_phrase(paper.abstract.replace("**", ""))
    return f"{what} ({topic})" if topic else what


def assign_display_names(papers: list[Paper]) -> list[Paper]:
    """Title where known, else the coined method name, else first author and track; unique."""
    names: list[str] = []
    coined: list[tuple[str, ...]] = []
    for p in papers:
        coined.append(tuple(coined_names(p.abstract)))
        if p.title:
            names.append(" ".join(p.title.split()))
        else:
            names.append(coined[-1][0] if coined[-1] else fallback_name(p))
    seen = Counter(names)
    out = []
    taken: set[str] = set()
    for p, name, own in zip(papers, names, coined, strict=True):
        if seen[name] > 1 and not p.title:
            if name.startswith(f"{_surname(p.first_author)} et al.") and p.first_author:
                name = f"{p.first_author} et al." + name.split(" et al.", 1)[1]
            else:
                name = f"{name} — {p.first_author or p.id}"
        if name in taken:
            name = f"{name} [{p.id}]"
        taken.add(name)
        out.append(replace(p, display_name=name, names=own))
    return out


# ---------------------------------------------------------------------------- readers


def _check_abstract(text: str, max_chars: int) -> str | None:
    if not text.strip():
        return "no abstract"
    if len(text) > max_chars:
        return f"abstract of {len(text):,} characters exceeds the limit of {max_chars:,}"
    return None


class FileTooLarge(Exception):
    """A file, or what a compressed file expands to, is over the byte limit."""


def max_line_bytes(max_abstract_chars: int) -> int:
    """The longest line a usable record can take: the abstract at 4 bytes a character, plus
    room for title, authors and the other fields. A longer line is never held in memory."""
    return 4 * max_abstract_chars + 64 * 1024


def open_chunks(path: Path, max_bytes: int) -> Iterator[bytes]:
    """The bytes of a file, decompressed if it is .gz, in chunks; raises FileTooLarge as
    soon as more than `max_bytes` come out, so a gzip bomb costs one chunk of memory."""
    total = 0
    opener: Any = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as stream:
        while chunk := stream.read(READ_CHUNK):
            total += len(chunk)
            if total > max_bytes:
                what = "decompresses to" if opener is gzip.open else "has"
                raise FileTooLarge(f"file {what} more than {max_bytes:,} bytes")
            yield chunk


_LINE_END = re.compile(rb"\r\n?|\n")


def split_lines(chunks: Iterable[bytes], max_line: int) -> Iterator[tuple[bytes | None, int]]:
    """(line, length) for each line ended by "\r\n", "\n" or a lone "\r" (as any editor
    counts them); a line over `max_line` bytes comes as (None, length) and is not kept."""
    buf = bytearray()
    over = 0  # length so far of a line already known to be too long
    skip_lf = False  # the last chunk ended in "\r": a "\n" opening this one belongs to it
    for chunk in chunks:
        view = memoryview(chunk)
        start = 1 if skip_lf and chunk[:1] == b"\n" else 0
        skip_lf = False
        while True:
            end = _LINE_END.search(chunk, start)
            piece = view[start : end.start() if end else len(chunk)]
            if over:
                over += len(piece)
            elif len(buf) + len(piece) > max_line:
                over = len(buf) + len(piece)
                buf.clear()
            else:
                buf += piece
            if end is None:
                break
            yield (None, over) if over else (bytes(buf), len(buf))
            buf.clear()
            over, start = 0, end.end()
            skip_lf = end.group() == b"\r" and start == len(chunk)
    yield (None, over) if over else (bytes(buf), len(buf))


class TooManyProblems(Exception):
    """A file that is mostly not records; reading it on would only pile up problems."""


class _Lines:
    """The decoded lines of a file, read lazily; an undecodable, NUL-bearing or overlong line
    comes as None (and is reported). Reading stops once the file has had too many problems,
    so no input, however repetitive, makes an unbounded list of them."""

    def __init__(
        self, raw: bytes | Iterable[bytes], source: str, problems: list[Problem], max_line: int
    ) -> None:
        self.chunks = [raw] if isinstance(raw, bytes) else raw
        self.source, self.problems, self.max_line = source, problems, max_line
        self.content = False  # a non-blank line was seen

    def report(self, n: int, reason: str) -> None:
        self.problems.append(Problem(self.source, n, reason))

    def __iter__(self) -> Iterator[str | None]:
        for n, (chunk, length) in enumerate(split_lines(self.chunks, self.max_line), start=1):
            if len(self.problems) >= MAX_PROBLEMS_PER_FILE:
                raise TooManyProblems(
                    f"file skipped at line {n}: more than {MAX_PROBLEMS_PER_FILE:,} problems"
                )
            if chunk is None:
                self.report(
                    n,
                    f"line of {length:,} bytes exceeds the limit of "
                    f"{self.max_line:,} for one record",
                )
            elif b"\x00" in chunk:
                self.report(n, "NUL byte in line")
            else:
                try:
                    text = chunk.decode("utf-8").removeprefix("\ufeff")
                except UnicodeDecodeError as err:
                    self.report(n, f"invalid UTF-8 at byte {err.start}")
                else:
                    self.content = self.content or bool(text.strip())
                    yield text
                    continue
            self.content = True
            yield None


def read_listing(
    raw: bytes | Iterable[bytes],
    source: str,
    max_abstract_chars: int = DEFAULT_MAX_ABSTRACT_CHARS,
) -> tuple[list[Paper], list[Problem]]:
    problems: list[Problem] = []
    lines = _Lines(raw, source, problems, max_line_bytes(max_abstract_chars))
    try:
        return _listing_papers(lines, source, max_abstract_chars, problems), problems
    except TooManyProblems as err:
        return [], [*problems, Problem(source, 0, str(err))]


def _paragraphs(lines: Iterable[str | None]) -> Iterator[tuple[int, str | None]]:
    """(first line, text) of each run of non-blank lines; None for a run with a bad line."""
    start, buf, bad = 0, [], False
    for n, line in enumerate(itertools.chain(lines, [""]), start=1):
        if line is None:
            bad = True
            start = start or n
            continue
        if line.strip():
            start = start or n
            buf.append(" ".join(line.split()))
            continue
        if buf or bad:
            yield start, None if bad else " ".join(buf)
        start, buf, bad = 0, [], False


def _listing_papers(
    lines: Iterable[str | None], source: str, max_abstract_chars: int, problems: list[Problem]
) -> list[Paper]:
    paragraphs = _paragraphs(lines)
    papers: list[Paper] = []
    track: tuple[int, str] | None = None
    authors: tuple[int, str] | None = None
    poisoned = False  # the current block had an unreadable paragraph

    def block_start() -> int:
        return track[0] if track else authors[0] if authors else 0

    def drop(line: int, reason: str) -> None:
        nonlocal track, authors, poisoned
        if poisoned:  # the missing part is most likely the line that could not be read
            reason = "block skipped: it has an unreadable line"
        problems.append(Problem(source, line, reason))
        track, authors, poisoned = None, None, False

    for n, text in paragraphs:
        if text is None:
            # Between blocks an unreadable line is reported on its own; inside a block it
            # takes the block with it, since that block is missing a part.
            poisoned = poisoned or track is not None or authors is not None
            continue
        if text == LISTING_HEADER and track is None and authors is None:
            continue
        if authors is not None:
            if looks_like_abstract(text) or not (
                looks_like_track(text) or looks_like_authors(text)
            ):
                block_line = block_start()
                if poisoned:
                    drop(block_line, "block skipped: it has an unreadable line")
                    continue
                reason = _check_abstract(text, max_abstract_chars)
                words = len(re.findall(r"\w+", text))
                if not reason and words < MIN_LISTING_ABSTRACT_WORDS:
                    reason = f"abstract of {words} word(s) is too short"
                if reason:
                    drop(block_line, f"{reason} (abstract at line {n})")
                    continue
                names, truncated = parse_authors(authors[1])
                papers.append(
                    Paper(
                        id=derived_id(text),
                        abstract=text,
                        authors=names,
                        authors_truncated=truncated,
                        track=track[1] if track else "",
                        source=f"{source}:{block_line}",
                        sources=(f"{source}:{block_line}",),
                    )
                )
                track, authors, poisoned = None, None, False
                continue
            drop(block_start(), "block has authors but no abstract")
        if looks_like_track(text):
            if track is not None:
                drop(track[0], "block has a track but no authors or abstract")
            track = (n, text)
        elif looks_like_authors(text):
            authors = (n, text)
        else:
            if track is not None:
                drop(track[0], "block has a track but no authors or abstract")
            drop(n, "text without an author line before it")
    if authors is not None:
        drop(block_start(), "block has authors but no abstract")
    elif track is not None:
        drop(track[0], "block has a track but no authors or abstract")
    return papers


_TEXT_FIELDS = ("id", "title", "authors", "track", "venue", "url", "openreview", "keywords")


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float)


def _field_problem(obj: dict[str, Any]) -> str | None:
    """Why a JSON record cannot be used as is, or None."""
    if not isinstance(obj.get("abstract"), str):
        return "no abstract"
    for name in _TEXT_FIELDS:
        value = obj.get(name)
        if not (_is_scalar(value) or (isinstance(value, list) and all(map(_is_scalar, value)))):
            return f"field {name!r} is a {type(value).__name__}, not text or a list of text"
    authors = obj.get("authors")
    if isinstance(authors, bool | int | float) and authors:
        return f"field 'authors' is a number ({str(authors)[:20]}), not names"
    try:  # json.loads lets "\ud800" through as a lone surrogate, which nothing can store
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "lone UTF-16 surrogate escape (\\ud800-\\udfff) in a string"
    return None


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return " ".join(str(value).split())


def _jsonl_papers(
    lines: Iterable[str | None], source: str, max_abstract_chars: int, problems: list[Problem]
) -> list[Paper]:
    papers: list[Paper] = []
    for n, line in enumerate(lines, start=1):
        if line is None or not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            problems.append(Problem(source, n, f"invalid JSON: {err.msg}"))
            continue
        except (ValueError, RecursionError) as err:  # 5,000-digit numbers, deep nesting
            problems.append(Problem(source, n, f"unusable JSON: {str(err)[:80]}"))
            continue
        if not isinstance(obj, dict):
            problems.append(Problem(source, n, "line is not a JSON object"))
            continue
        reason = _field_problem(obj)
        if reason:
            problems.append(Problem(source, n, reason))
            continue
        abstract = " ".join(obj["abstract"].split())
        reason = _check_abstract(abstract, max_abstract_chars)
        if reason:
            problems.append(Problem(source, n, reason))
            continue
        names, truncated = parse_authors(obj.get("authors") or ())
        own = _as_text(obj.get("id"))
        year_raw = obj.get("year")
        year = None
        if isinstance(year_raw, str) and year_raw.strip().isdecimal():
            year_raw = int(year_raw)
        if isinstance(year_raw, int) and not isinstance(year_raw, bool) and 0 < year_raw < 10_000:
            year = year_raw
        keywords_raw = obj.get("keywords") or ()
        if isinstance(keywords_raw, str):
            keywords = tuple(k.strip() for k in re.split(r"[,;]", keywords_raw) if k.strip())
        elif not isinstance(keywords_raw, list):  # a lone number: one keyword, not a crash
            keywords = (str(keywords_raw),)
        else:
            keywords = tuple(str(k) for k in keywords_raw)
        papers.append(
            Paper(
                id=own or derived_id(abstract),
                own_id=own,
                abstract=abstract,
                title=_as_text(obj.get("title")),
                authors=names,
                authors_truncated=truncated,
                track=_as_text(obj.get("track")),
                venue=_as_text(obj.get("venue")),
                url=_as_text(obj.get("url") or obj.get("openreview")),
                year=year,
                keywords=keywords,
                source=f"{source}:{n}",
                sources=(f"{source}:{n}",),
            )
        )
    return papers


def source_name(path: Path, root: Path | None = None) -> str:
    """How a file is named in sources and problems: relative to `root` when inside it."""
    resolved = path.resolve()
    if root is not None:
        try:
            return str(resolved.relative_to(root.resolve()))
        except ValueError:
            pass
    return str(resolved)


def read_file(
    path: Path,
    root: Path | None = None,
    max_abstract_chars: int = DEFAULT_MAX_ABSTRACT_CHARS,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> tuple[list[Paper], list[Problem]]:
    source = source_name(path, root)
    name = path.name.lower()
    if not name.endswith(SUPPORTED_SUFFIXES):
        return [], [Problem(source, 0, "unsupported file type (want .txt, .jsonl, .jsonl.gz)")]
    problems: list[Problem] = []
    reader = _jsonl_papers if name.endswith(JSONL_SUFFIXES) else _listing_papers
    try:
        size = path.stat().st_size
        if size > max_file_bytes:
            return [], [Problem(source, 0, f"file of {size:,} bytes exceeds {max_file_bytes:,}")]
        lines = _Lines(
            open_chunks(path, max_file_bytes), source, problems, max_line_bytes(max_abstract_chars)
        )
        papers = reader(lines, source, max_abstract_chars, problems)
    except (FileTooLarge, TooManyProblems) as err:
        return [], [*problems[:MAX_PROBLEMS_PER_FILE], Problem(source, 0, str(err))]
    except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
        return [], [Problem(source, 0, f"unreadable: {err}")]
    if not lines.content:
        return [], [Problem(source, 0, "empty file")]
    if not papers and not problems:
        problems.append(Problem(source, 0, "no papers found"))
    return papers, problems


ARCHIVE_MAGIC = {b"\x1f\x8b": "gzip", b"PK\x03\x04": "zip", b"7z\xbc\xaf": "7z", b"BZh": "bzip2"}


def _next_eol(data: bytes, start: int) -> int:
    hits = [i for i in (data.find(b"\n", start), data.find(b"\r", start)) if i >= 0]
    return min(hits) if hits else -1


def _last_eol(data: bytes, end: int) -> int:
    return max(data.rfind(b"\n", 0, end), data.rfind(b"\r", 0, end))


def first_long_line(chunks: Iterable[bytes], max_line: int) -> int:
    """The number of the first line over `max_line` bytes (lines as `split_lines` counts
    them), or 0. Probes every max_line/2 bytes with memchr instead of walking lines, so a
    flood of short lines costs no more than one long one."""
    step = max(max_line // 2, 1)  # a run longer than max_line covers at least one probe

    def ends(chunk: bytes, end: int) -> int:
        crlf = chunk.count(b"\r\n", 0, end)
        return chunk.count(b"\n", 0, end) + chunk.count(b"\r", 0, end) - crlf

    run, lines, after_cr = 0, 1, False  # bytes of the current line so far; its number
    for chunk in chunks:
        if after_cr and chunk[:1] == b"\n":
            lines -= 1  # "\r" | "\n" split across chunks is one line end, counted below again
        if chunk:
            after_cr = chunk.endswith(b"\r")
        first = _next_eol(chunk, 0)
        if first < 0:
            run += len(chunk)
            if run > max_line:
                return lines
            continue
        if run + first > max_line:
            return lines
        for probe in range(first, len(chunk), step):
            if chunk[probe] in b"\r\n":
                continue
            right = _next_eol(chunk, probe)
            if right < 0:
                break  # the last run goes on into the next chunk
            left = _last_eol(chunk, probe)
            if right - left - 1 > max_line:
                return lines + ends(chunk, left + 1)
        lines += ends(chunk, len(chunk))
        run = len(chunk) - 1 - _last_eol(chunk, len(chunk))
        if run > max_line:
            return lines
    return 0


def check_file(
    path: Path,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_abstract_chars: int = DEFAULT_MAX_ABSTRACT_CHARS,
) -> str | None:
    """Why a file could not be read within the limits, or None. Streams through it with a
    byte cap, so a gzip bomb or one endless line is measured in chunks, never held."""
    name = path.name.lower()
    if not name.endswith(SUPPORTED_SUFFIXES):
        return "not a .txt, .jsonl or .jsonl.gz file"
    max_line = max_line_bytes(max_abstract_chars)
    try:
        if not name.endswith(".gz"):
            with path.open("rb") as f:
                head = f.read(4)
            kind = next((k for magic, k in ARCHIVE_MAGIC.items() if head.startswith(magic)), "")
            if kind:
                return f"a {kind} archive named like a text file"
        long_line = first_long_line(open_chunks(path, max_file_bytes), max_line)
        if long_line:
            return f"line {long_line} is longer than any record can be ({max_line:,} bytes)"
    except FileTooLarge as err:
        return str(err)
    except (OSError, EOFError, zlib.error) as err:
        return f"unreadable: {err}"
    return None


def iter_files(paths: Iterable[Path], problems: list[Problem]) -> Iterator[Path]:
    """Files named, and files below folders named, in a stable order; hidden ones skipped."""
    for path in paths:
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                rel = child.relative_to(path).parts
                if any(p.startswith(".") for p in rel) or child.is_dir():
                    continue
                if child.is_file():
                    yield child
                else:
                    problems.append(Problem(str(child), 0, "not a regular file (broken link?)"))
        elif path.is_file():
            yield path
        else:
            problems.append(Problem(str(path), 0, "no such file or folder"))


def merge_records(records: Iterable[Paper]) -> list[Paper]:
    """One paper per distinct abstract (and per own id), fields merged, sorted by id.

    The merged id is the smallest own id among the records, else the abstract-derived one,
    so it does not depend on file order; every other id a record had becomes an alias.
    """
    groups: dict[str, list[Paper]] = {}
    by_own: dict[str, str] = {}
    for rec in records:
        key = rec.key
        if rec.own_id and rec.own_id in by_own and by_own[rec.own_id] != key:
            key = by_own[rec.own_id]  # same id, edited abstract: the later record wins
            groups[key] = [r for r in groups[key] if r.own_id != rec.own_id]
        groups.setdefault(key, []).append(rec)
        if rec.own_id:
            by_own[rec.own_id] = key
    merged = [_merge_group(group) for group in groups.values()]
    merged.sort(key=lambda p: p.id)
    return assign_display_names(merged)


def _first(values: Iterable[str]) -> str:
    return next((v for v in values if v), "")


def _merge_group(group: list[Paper]) -> Paper:
    group = sorted(group, key=lambda r: (not r.own_id, r.own_id, r.source))
    own_ids = sorted({r.own_id for r in group if r.own_id})
    pid = own_ids[0] if own_ids else derived_id(group[0].abstract)
    ids = {pid, derived_id(group[0].abstract), *own_ids}
    # Complete author lists beat truncated ones; then the longest.
    best_authors = max(group, key=lambda r: (not r.authors_truncated, len(r.authors)))
    years = [r.year for r in group if r.year]
    sources = sorted({s for r in group for s in r.sources})
    return Paper(
        id=pid,
        own_id=own_ids[0] if own_ids else "",
        abstract=group[0].abstract,
        title=_first(r.title for r in group),
        authors=best_authors.authors,
        authors_truncated=best_authors.authors_truncated,
        track=_first(r.track for r in group),
        venue=_first(r.venue for r in group),
        url=_first(r.url for r in group),
        year=years[0] if years else None,
        keywords=tuple(dict.fromkeys(k for r in group for k in r.keywords)),
        source=group[0].source,
        sources=tuple(sources),
        aliases=tuple(sorted(ids - {pid})),
    )


def read_records(
    paths: Iterable[Path],
    root: Path | None = None,
    max_abstract_chars: int = DEFAULT_MAX_ABSTRACT_CHARS,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> ReadResult:
    """Every record of every file, unmerged, with the problems met on the way."""
    result = ReadResult()
    for path in iter_files(paths, result.problems):
        papers, problems = read_file(path, root, max_abstract_chars, max_file_bytes)
        result.papers.extend(papers)
        result.problems.extend(problems)
        result.files.append(path)
    return result


def read_papers(paths: Iterable[Path], root: Path | None = None, **limits: int) -> ReadResult:
    """Papers from files and folders, merged across sources, with display names."""
    result = read_records(paths, root, **limits)
    result.papers = merge_records(result.papers)
    return result
