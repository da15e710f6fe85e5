"""Property-based tests of the readers: hostile bytes never raise, and nothing is lost silently.

Every example is written to a real file and read through `read_file`/`read_papers`, the path
ingest takes. A "block" that does not become a paper must leave a Problem naming its file and
a line at or before it.
"""

from __future__ import annotations

import gzip
import itertools
import json
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rag.corpus import (
    DEFAULT_MAX_ABSTRACT_CHARS,
    DEFAULT_MAX_FILE_BYTES,
    LISTING_HEADER,
    MAX_PROBLEMS_PER_FILE,
    Paper,
    Problem,
    first_long_line,
    read_file,
    read_listing,
    read_papers,
    split_lines,
)

from .conftest import gzip_bomb

T = TypeVar("T")
FUZZ = settings(
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_names = itertools.count()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def write(folder: Path, suffix: str, data: bytes) -> Path:
    path = folder / f"f{next(_names)}{suffix}"
    if suffix.endswith(".gz"):
        data = gzip.compress(data, compresslevel=1)
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------------------- strategies

# Hostile but printable pieces: bidi controls, zero-width joiners, combining stacks, emoji
# ZWJ sequences, stray LaTeX and markup, look-alike separators.
NASTY = [
    "\u200f",
    "\u202e",
    "\u2066",
    "\u200d",
    "\u200b",
    "\u2060",
    "e" + "\u0301" * 40,
    "Z\u0351\u0352\u0357\u035b\u0363\u0364" * 3,
    "👩\u200d👩\u200d👧\u200d👦",
    "🏳️\u200d🌈",
    "\\begin{align}",
    "\\end{",
    "$$",
    "$x^{2",
    "}}}",
    "{{{",
    "\\frac{a}{",
    "\\emph{unclosed",
    "\\textbf{\\emph{x}}",
    "<b>",
    "&lt;",
    "·",
    "等",
    "et",
    "al.",
    "…",
    "\ufffd",
    "\U0010ffff",
]
WORD_CHARS = st.characters(
    blacklist_categories=["Cs", "Zs", "Zl", "Zp", "Cc"],
    blacklist_characters="\ufeff\x85",
)
word = st.one_of(
    st.from_regex(r"[a-z]{1,10}", fullmatch=True),
    st.sampled_from(NASTY),
    st.text(WORD_CHARS, min_size=1, max_size=8),
).filter(lambda w: w.split() == [w])  # one whitespace-free token, by Python's own rules

LETTERS = st.characters(
    categories=["Lu", "Ll", "Lo", "Mn"], exclude_characters="等·\ufeff", max_codepoint=0x2FFFF
)
TRUNCATION = ("等", "et al", "…", "...", ".")


@st.composite
def person(draw: st.DrawFn) -> str:
    first = draw(st.text(LETTERS, min_size=1, max_size=10).filter(lambda s: s[0].isalpha()))
    last = draw(st.text(LETTERS, min_size=1, max_size=12).filter(lambda s: s[0].isalpha()))
    name = f"{first} {last}"
    assume(not name.endswith(TRUNCATION) and name.split() == [first, last])
    return name


track_word = st.from_regex(r"[A-Z][a-z]{2,9}", fullmatch=True)


@dataclass
class Block:
    track: str
    authors: list[str]
    abstract: str

    def paragraphs(self, wrap: list[int]) -> list[list[str]]:
        words = self.abstract.split(" ")
        lines, at = [], 0
        for width in [*wrap, len(words)]:
            if at < len(words):
                lines.append(" ".join(words[at : at + width]))
                at += width
        return [[self.track], [", ".join(self.authors)], lines]


@st.composite
def block(draw: st.DrawFn) -> Block:
    area = " ".join(draw(st.lists(track_word, min_size=1, max_size=3)))
    sub = " ".join(draw(st.lists(track_word, min_size=1, max_size=3)))
    authors = draw(st.lists(person(), min_size=1, max_size=5))
    words = draw(st.lists(word, min_size=14, max_size=80))
    return Block(f"{area} · {sub}", authors, " ".join(words))


EOL = st.sampled_from(["\n", "\r\n", "\r"])

# Garbage between blocks: what a bad export, a merge conflict or a binary splice leaves.
# Only pieces that are no paper on their own count: two stray lines "Ann Lee" and "hello
# world again" are indistinguishable from a real short block.
GARBAGE_BYTES = st.one_of(
    st.binary(min_size=1, max_size=120).filter(lambda b: b"\n" not in b and b"\r" not in b),
    st.sampled_from(
        [
            b"\x00\x00\x00",
            b"\xff\xfe\xfd broken",
            b"\xed\xa0\x80 surrogate in UTF-8",
            b"<<<<<<< HEAD",
            b"Only Authors, No Abstract",
            b"Area \xc2\xb7 Subarea",
            b"$$ \\begin{theorem} unbalanced { braces",
            b"a sentence of text that has no author line before it at all, "
            b"long enough to pass for an abstract by word count",
            b"x" * 400_000,  # a line longer than any record
            ("word " * 30_000).encode(),  # an abstract-like paragraph over the length limit
        ]
    ),
    st.text(WORD_CHARS, min_size=1, max_size=60).map(str.encode),
)
GARBAGE = st.lists(GARBAGE_BYTES, min_size=1, max_size=3).filter(
    lambda group: (
        not read_listing(b"\n\n".join(group), "g")[0]
        and any(g.decode("utf-8", "replace").strip() not in ("", LISTING_HEADER) for g in group)
    )
)


def lines_of(data: bytes) -> int:
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").count(b"\n") + 1


# ---------------------------------------------------------------------------- listings


@FUZZ
@given(
    blocks=st.lists(block(), min_size=1, max_size=4),
    eol=EOL,
    bom=st.booleans(),
    wrap=st.lists(st.integers(1, 12), max_size=4),
)
def test_valid_listing_blocks_round_trip(
    folder: Path, blocks: list[Block], eol: str, bom: bool, wrap: list[int]
) -> None:
    paragraphs = [[LISTING_HEADER]] + [p for b in blocks for p in b.paragraphs(wrap)]
    text = (eol + eol).join(eol.join(p) for p in paragraphs) + eol
    path = write(folder, ".txt", ("\ufeff" if bom else "").encode() + text.encode())
    papers, problems = read_file(path)
    assert problems == []
    assert [(p.track, list(p.authors), p.abstract) for p in papers] == [
        (b.track, b.authors, b.abstract) for b in blocks
    ]


@st.composite
def blocks_and_garbage(draw: st.DrawFn) -> list[Block | list[bytes]]:
    """Valid blocks with a (possibly empty) garbage group before, between and after them."""
    blocks = draw(st.lists(block(), min_size=1, max_size=4))
    groups = draw(
        st.lists(st.just([]) | GARBAGE, min_size=len(blocks) + 1, max_size=len(blocks) + 1)
    )
    items: list[Block | list[bytes]] = [groups[0]]
    for b, g in zip(blocks, groups[1:], strict=True):
        items += [b, g]
    return items


@FUZZ
@given(items=blocks_and_garbage(), eol=EOL, suffix=st.sampled_from([".txt", ".TXT"]))
def test_valid_blocks_survive_garbage_and_garbage_is_reported(
    folder: Path, items: list[Block | list[bytes]], eol: str, suffix: str
) -> None:
    sep = eol.encode()
    chunks: list[bytes] = [LISTING_HEADER.encode()]
    garbage: list[tuple[int, int]] = []  # (first line after the previous block, garbage line)
    line, region = 1, 2
    for item in items:
        if isinstance(item, Block):
            for para in item.paragraphs([]):
                chunks.append(sep.join(x.encode() for x in para))
                line += 2
            region = line + 1
        else:
            for g in item:
                chunks.append(g)
                line += 1 + lines_of(g)
                if g.decode("utf-8", "replace").strip() not in ("", LISTING_HEADER):
                    garbage.append((region, line))
    path = write(folder, suffix, (sep + sep).join(chunks) + sep)
    papers, problems = read_file(path)
    valid = [b for b in items if isinstance(b, Block)]
    assert [(list(p.authors), p.abstract) for p in papers] == [
        (b.authors, b.abstract) for b in valid
    ]
    assert all(p.source == path.name or p.source.endswith(path.name) for p in problems)
    for first, last in garbage:
        assert any(first <= p.line <= last for p in problems), (first, last, problems)
    assert len(problems) <= len(garbage)  # nothing else was refused


@FUZZ
@given(data=st.binary(max_size=4000), suffix=st.sampled_from([".txt", ".jsonl", ".jsonl.gz"]))
def test_random_bytes_never_raise_and_nothing_vanishes(
    folder: Path, data: bytes, suffix: str
) -> None:
    path = write(folder, suffix, data)
    papers, problems = read_file(path)
    assert papers or problems  # an unreadable file is always reported
    assert all(isinstance(p, Problem) and 0 <= p.line <= lines_of(data) for p in problems)
    assert all(isinstance(p, Paper) and p.abstract.strip() for p in papers)


@FUZZ
@given(
    data=st.binary(max_size=3000),
    cut=st.integers(0, 200),
)
def test_corrupt_and_truncated_gzip_is_a_problem(folder: Path, data: bytes, cut: int) -> None:
    blob = gzip.compress(data)
    path = folder / f"f{next(_names)}.jsonl.gz"
    path.write_bytes(blob[: max(len(blob) - cut, 0)] if cut else blob + b"trailing junk")
    papers, problems = read_file(path)
    assert papers or problems
    assert all(p.line >= 0 for p in problems)


# ---------------------------------------------------------------------------- JSON Lines

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(NASTY),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)
# Raw JSON text a JSON encoder would never write: lone surrogate escapes, huge numbers,
# deep nesting, odd numbers; each must end as a Problem, not an exception.
RAW_JSON_VALUES = st.sampled_from(
    [
        '"\\ud800"',
        '"\\udfff tail"',
        '"ok \\ud83d\\ude00 pair"',
        '"\\u0000 nul escape"',
        "1" + "0" * 5000,
        "1e999999",
        "-0",
        "[" * 50_000 + "]" * 50_000,
        '"\u00b2"',
        '"１２"',
        '{"$ref": "#"}',
        "NaN",
    ]
)
FIELDS = ["id", "title", "authors", "track", "venue", "url", "year", "keywords", "abstract"]


@st.composite
def jsonl_line(draw: st.DrawFn) -> str:
    """One object with any mix of well- and ill-typed fields, some written as raw JSON."""
    parts = []
    for name in draw(st.lists(st.sampled_from(FIELDS), unique=True, max_size=len(FIELDS))):
        if draw(st.booleans()):
            value = draw(RAW_JSON_VALUES)
        else:
            value = json.dumps(draw(json_value), ensure_ascii=draw(st.booleans()))
        parts.append(f"{json.dumps(name)}: {value}")
    return "{" + ", ".join(parts) + "}"


@FUZZ
@given(
    lines=st.lists(st.one_of(jsonl_line(), st.text(WORD_CHARS, max_size=40)), max_size=8),
    eol=EOL,
    suffix=st.sampled_from([".jsonl", ".jsonl.gz"]),
)
def test_ill_typed_jsonl_never_raises_and_every_line_is_accounted_for(
    folder: Path, lines: list[str], eol: str, suffix: str
) -> None:
    data = eol.join(lines).encode("utf-8", "surrogatepass")
    path = write(folder, suffix, data)
    result = read_papers([path])
    papers, problems = read_file(path)
    kept = {int(p.source.rsplit(":", 1)[1]) for p in papers}
    reported = {p.line for p in problems}
    for n, line in enumerate(data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"), 1):
        if line.strip():
            assert (n in kept) != (n in reported), (n, line[:200], problems)
    for p in result.papers:  # what ingest stores must encode: no lone surrogates survive
        json.dumps(p.to_dict(), ensure_ascii=False).encode("utf-8")


@FUZZ
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {
                "id": st.text(WORD_CHARS, min_size=1, max_size=12),
                "authors": st.lists(person(), min_size=1, max_size=4),
                "abstract": st.lists(word, min_size=1, max_size=60).map(" ".join),
                "title": st.text(max_size=40),
            }
        ),
        min_size=1,
        max_size=5,
        unique_by=lambda r: r["id"].strip(),
    ),
    ascii_only=st.booleans(),
    eol=st.sampled_from(["\n", "\r\n"]),
)
def test_valid_jsonl_rows_round_trip(
    folder: Path, rows: list[dict[str, object]], ascii_only: bool, eol: str
) -> None:
    assume(all(str(r["id"]).split() == [r["id"]] for r in rows))
    data = eol.join(json.dumps(r, ensure_ascii=ascii_only) for r in rows) + eol
    papers, problems = read_file(write(folder, ".jsonl.gz", data.encode()))
    assert problems == []
    assert [(p.own_id, list(p.authors), p.abstract) for p in papers] == [
        (r["id"], r["authors"], r["abstract"]) for r in rows
    ]


def test_limits_hold_on_long_lines(folder: Path) -> None:
    """A huge line is measured, not parsed: one problem at its line, the next row kept."""
    good = json.dumps({"id": "ok", "abstract": "fine words " * 20})
    huge = '{"abstract": "' + "a" * (8 * DEFAULT_MAX_ABSTRACT_CHARS) + '"}'
    path = write(folder, ".jsonl", f"{huge}\n{good}\n".encode())
    papers, problems = read_file(path)
    assert [p.own_id for p in papers] == ["ok"]
    assert [(p.line, "exceeds the limit" in p.reason) for p in problems] == [(1, True)]


@FUZZ
@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=6))
def test_line_splitting_does_not_depend_on_chunk_boundaries(data: bytes, cuts: list[int]) -> None:
    bounds = sorted({0, len(data), *(min(c, len(data)) for c in cuts)})
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]
    expected = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    assert [line for line, _ in split_lines(chunks, 50)] == [
        line if len(line) <= 50 else None for line in expected
    ]


@FUZZ
@given(
    data=st.lists(st.sampled_from([b"\r", b"\n", b"\r\n", b"a", b"bb", b"c" * 7]), max_size=60).map(
        b"".join
    ),
    cuts=st.lists(st.integers(0, 200), max_size=6),
)
def test_upload_scan_finds_the_same_long_line_as_the_reader(data: bytes, cuts: list[int]) -> None:
    bounds = sorted({0, len(data), *(min(c, len(data)) for c in cuts)})
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]
    lines = [line for line, _ in split_lines([data], 6)]
    first = next((n for n, line in enumerate(lines, start=1) if line is None), 0)
    assert first_long_line(chunks, 6) == first


# ---------------------------------------------------------------------------- bombs


def peak_memory(call: Callable[[], T]) -> tuple[T, int]:
    tracemalloc.start()
    try:
        out = call()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_gzip_bomb_stops_at_the_byte_cap_in_bounded_memory(tmp_path: Path) -> None:
    bomb = gzip_bomb(tmp_path / "bomb.jsonl.gz", 2 * 1024**3)
    assert bomb.stat().st_size < 3 * 1024**2
    (papers, problems), peak = peak_memory(lambda: read_file(bomb))
    assert papers == []
    assert [(p.line, p.reason) for p in problems] == [
        (0, f"file decompresses to more than {DEFAULT_MAX_FILE_BYTES:,} bytes")
    ]
    assert peak < 16 * 1024**2, peak  # chunks, not the 512 MB it was allowed to expand to


def test_one_endless_line_in_a_tiny_gzip_is_counted_not_kept(tmp_path: Path) -> None:
    bomb = gzip_bomb(tmp_path / "line.jsonl.gz", 256 * 1024**2, fill=b"a")
    (papers, problems), peak = peak_memory(lambda: read_file(bomb))
    assert papers == [] and [p.line for p in problems] == [1]
    assert problems[0].reason.startswith(f"line of {256 * 1024**2:,} bytes exceeds the limit")
    assert peak < 16 * 1024**2, peak


def test_a_flood_of_junk_lines_stops_after_a_bounded_number_of_problems(tmp_path: Path) -> None:
    bomb = gzip_bomb(tmp_path / "junk.txt.gz", 64 * 1024**2, fill=b"junk\n\n")
    bomb = bomb.rename(tmp_path / "junk.jsonl.gz")
    (papers, problems), peak = peak_memory(lambda: read_file(bomb))
    assert papers == [] and len(problems) == MAX_PROBLEMS_PER_FILE + 1
    assert "more than 1,000 problems" in problems[-1].reason
    assert peak < 16 * 1024**2, peak


def test_numbers_where_names_belong(tmp_path: Path) -> None:
    """Found by the fuzzer in CI: `"authors": 1e999999` (a float) raised TypeError."""
    path = tmp_path / "numbers.jsonl"
    path.write_text(
        '{"authors": 1e999999, "abstract": "we study a thing in some depth here"}\n'
        '{"authors": 5, "abstract": "we study a thing in some depth again"}\n'
        '{"keywords": 1e999, "authors": "A B", "abstract": "we study one more thing in depth"}\n'
    )
    papers, problems = read_file(path)
    assert [p.line for p in problems] == [1, 2]
    assert all("is a number" in p.reason for p in problems)
    assert [(p.authors, p.keywords) for p in papers] == [(("A B",), ("inf",))]
