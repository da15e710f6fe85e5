"""Text utilities every stage shares: folding, words, terms, stems, sentences, names.

The word lists are data files in `rag/words/` (one word a line, `#` comments):
- `stopwords.txt`: function words NLTK's English list lacks (with it, STOPWORDS);
- `contribution.txt`: verbs with which an abstract states what its own work does.
"""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import Stemmer

WORDS_DIR = Path(__file__).with_name("words")


def word_list(name: str) -> frozenset[str]:
    """The words of rag/words/<name>.txt, blank lines and "#" comments left out."""
    text = (WORDS_DIR / f"{name}.txt").read_text(encoding="utf-8")
    return frozenset(w.strip() for w in text.splitlines() if w.strip() and w[:1] != "#")


def _nltk_english() -> frozenset[str]:
    """NLTK's English stop words, from the copy llama-index ships (its globals_helper reads the
    same file but imports nltk to do so, 1.7 s of a one-off's start)."""
    spec = importlib.util.find_spec("llama_index.core")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llama-index-core is not installed: its stop-word list is missing")
    home = Path(next(iter(spec.submodule_search_locations)))
    path = home / "_static" / "nltk_cache" / "corpora" / "stopwords" / "english"
    return frozenset(path.read_text(encoding="utf-8").split())


STOPWORDS = _nltk_english() | word_list("stopwords")
CONTRIBUTION_VERBS = word_list("contribution")


def fold(text: str) -> str:
    """Case- and accent-insensitive form used for matching names, tracks and words."""
    if "$" in text:  # TeX math reads as what it typesets: "$\ell_2$" says "l2" (ℓ2)
        text = read_math(text)
    if text.isascii():  # most abstracts: nothing to decompose
        return " ".join(text.lower().split())
    decomposed = unicodedata.normalize("NFKD", text)
    if not _HAS_MARK.search(decomposed):
        return " ".join(decomposed.casefold().split())
    stripped = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(stripped.casefold().split())


_LATEX_TEXT = re.compile(r"\\(?:emph|textit|textbf|texttt|text|mathrm|mathbf)\{([^{}]*)\}")
# TeX math in abstracts ("up to 19.5$\times$ speedup", "$\ell_2$ norm") read as the symbols a
# reader sees: a model copies "19.5$\times$" and the verifier matches words, not markup.
_MATH = re.compile(r"\$(?=\S)([^$]{1,80})(?<=\S)\$(?!\d)")  # not "$5 and $10"
_TEX_SYMBOLS = {
    "times": "×",
    "cdot": "·",
    "ell": "ℓ",
    "rightarrow": "→",
    "to": "→",
    "leftarrow": "←",
    "leq": "≤",
    "le": "≤",
    "geq": "≥",
    "ge": "≥",
    "approx": "≈",
    "sim": "~",
    "neq": "≠",
    "pm": "±",
    "infty": "∞",
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "Delta": "Δ",
    "epsilon": "ε",
    "varepsilon": "ε",
    "theta": "θ",
    "lambda": "λ",
    "mu": "μ",
    "sigma": "σ",
    "tau": "τ",
    "phi": "φ",
    "pi": "π",
    "rho": "ρ",
    "omega": "ω",
    "%": "%",
}
_TEX_COMMAND = re.compile(r"\\([A-Za-z]+|%)")


def _math(m: re.Match[str]) -> str:
    body = _LATEX_TEXT.sub(r"\1", m.group(1))
    body = _TEX_COMMAND.sub(lambda c: _TEX_SYMBOLS.get(c.group(1), ""), body)
    body = re.sub(r"_\{?(\d+)\}?", r"\1", body)  # a numeric subscript joins: ℓ2, x1
    return re.sub(r"([_^])\{([^{}]*)\}", r"\1\2", body).replace("{", "").replace("}", "")


def read_math(text: str) -> str:
    """TeX math and text commands read as what a reader sees ("19.5$\\times$" -> "19.5×")."""
    return _MATH.sub(_math, _LATEX_TEXT.sub(r"\1", text))


# Any combining mark (accents of Latin, Greek, Cyrillic, and the other scripts' marks).
_HAS_MARK = re.compile(
    r"[\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a"
    r"\u064b-\u065f\u0900-\u0dff\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff"
    r"\u302a-\u302f\u3099\u309a\ufe20-\ufe2f]"
)


# A word as written: letters and digits, with inner apostrophes and hyphens.
WORD = re.compile(r"[\w][\w'’\-]*", re.UNICODE)
# "Bouniot's papers", "what's new on bandits": the clitic is not part of the word, so
# the name matches its author and "what" its stopword. "O'Brien" keeps its apostrophe.
_CLITIC = re.compile(r"['’](?:s|re|ve|ll|d|m)$")


def tokens(text: str) -> list[str]:
    """Folded words, hyphenated words kept whole ("fs-dfm", "o'brien")."""
    # "&" is "and": "Models & Autoencoders" names what "Models and Autoencoders" does.
    words = (
        _CLITIC.sub("", t).strip("'’-") for t in WORD.findall(fold(text).replace("&", " and "))
    )
    return [w for w in words if w]


def phrase(text: str) -> str:
    return " ".join(tokens(text))


def contains(haystack: list[str], needle: list[str]) -> int:
    """Start of `needle` as a contiguous run in `haystack`, or -1."""
    n = len(needle)
    for i in range(len(haystack) - n + 1):
        if haystack[i : i + n] == needle:
            return i
    return -1


def one_edit(a: str, b: str) -> bool:
    """Whether `b` is `a` with one slip of the keyboard: a letter changed, left out or added,
    or two neighbouring letters swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        if len(differ) == 2 and differ[1] == differ[0] + 1:
            i = differ[0]
            return a[i] == b[i + 1] and a[i + 1] == b[i]
        return len(differ) == 1
    short, long = sorted((a, b), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


_ALNUM = re.compile(r"[a-z0-9]+")


def plain_words(text: str, drop: frozenset[str] = STOPWORDS) -> list[str]:
    """Folded alphanumeric words of three letters or more, in order, `drop` left out
    (hyphenated words split: "diffusion-based" -> "diffusion")."""
    return [w for w in all_words(text) if len(w) > 2 and w not in drop]


def all_words(text: str) -> list[str]:
    """Every folded alphanumeric word, in order, however short."""
    return _ALNUM.findall(fold(text))


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """The Snowball (Porter 2) stem, from the stemmer BM25 uses too: "robustness" and
    "robust", "watermarking" and "watermark" meet, "exploit" and "exploration" do not."""
    # An acronym's plural ("LLMs", "GNNs") is its singular; Snowball strips no "s" from a
    # word without a vowel.
    if len(word) > 2 and word.endswith("s") and not _VOWEL.search(word[:-1]):
        word = word[:-1]
    return _snowball().stemWord(word)


_VOWEL = re.compile(r"[aeiouy]")


@lru_cache(maxsize=1)
def _snowball() -> Stemmer.Stemmer:
    import Stemmer  # PyStemmer: the BM25 retriever's own stemmer

    return Stemmer.Stemmer("english")


def stems(text: str, drop: frozenset[str] = STOPWORDS) -> list[str]:
    return [stem(w) for w in plain_words(text, drop)]


# A term as BM25 reads text (bm25s's tokenizer: two or more word characters, lower case,
# its English stop words out, Snowball stems), so that a question's terms meet BM25's.
_TERM = re.compile(r"(?u)\b\w\w+\b")


@lru_cache(maxsize=1)
def _bm25_stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def light(word: str) -> str:
    """Harman's S-stemmer: plurals only ("predictions" -> "prediction"), where Snowball also
    joins derivations ("conformal" and "conformation" both stem to "conform")."""
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def terms(text: str) -> list[tuple[str, str]]:
    """(stem, word) for each term of `text`, in order, as the BM25 index reads it."""
    words = [w for w in _TERM.findall(text.lower()) if w not in _bm25_stopwords()]
    return list(zip(_snowball().stemWords(words), words, strict=True))


# A sentence ends at . ! or ? before a capital, digit, quote or bracket: abstracts'
# abbreviations ("e.g. the", "et al. show") are followed by lower case and stay whole.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"“(\[])")


def split_sentences(text: str) -> list[str]:
    parts = _SENTENCE_END.split(" ".join(text.split()))
    return [p.strip() for p in parts if p.strip()]


_NAME_PART = re.compile(r"[A-Za-z0-9]+(?:[-‑][A-Za-z0-9]+)*")
_ACRONYM = re.compile(r"[A-Z]{2,5}s?")
_RATIO = re.compile(r"(\d)[x×](?![A-Za-z0-9])")


def looks_coined(token: str) -> bool:
    """Whether a token is shaped like a coined name rather than a word: capitals past its
    first letter (TimeSAE, BLEU, xLSTM) or digits among letters (GPT-2, ResNet-50, I2P)."""
    body = token.replace("-", "").replace("‑", "")
    has_alpha = any(c.isalpha() for c in body)
    return has_alpha and (any(c.isupper() for c in body[1:]) or any(c.isdigit() for c in body))


def is_acronym(token: str) -> bool:
    """An all-capital short form (VAE, LLMs): text may spell it out instead."""
    return bool(_ACRONYM.fullmatch(token))


def coined_tokens(text: str, acronyms: bool = True) -> list[str]:
    """Tokens of `text` shaped like coined names, in order, as written; without
    `acronyms`, all-capital short forms are left out. A ratio ("19.5x", "128×") is a number,
    not a name."""
    return [
        t
        for t in _NAME_PART.findall(_RATIO.sub(r"\1", text))
        if looks_coined(t) and (acronyms or not is_acronym(t)) and not t.isdigit()
    ]


# "We propose ...", "this study examines ...", "the aim was to ...", "to determine whether ...":
# where an abstract says what its own work does, after any background sentences.
_SELF = r"(?:we|this\s+(?:paper|work|study|article|position\s+paper)|our\s+(?:work|study|paper))"
_VERBS = "|".join(sorted(CONTRIBUTION_VERBS, key=len, reverse=True))
# In order of preference: a sentence that opens "To address this, we propose X" says what
# the paper does at "we propose", not at "To address".
_CONTRIBUTIONS = [
    re.compile(rf"\b{_SELF}\s+(?:\w+\s+){{0,2}}?(?:{_VERBS})(?:e?s|d|ed)?\b", re.IGNORECASE),
    re.compile(
        r"\b(?:aim|objective|purpose|goal)s?\s+(?:of\s+(?:this|the|our)\s+\w+\s+)?"
        r"(?:was|were|is|are)\s+to\b",
        re.IGNORECASE,
    ),
    re.compile(r"^\W*(?:here|in\s+this\s+(?:paper|work|study)),?\s+we\b", re.IGNORECASE),
    re.compile(rf"^\W*(?:to\s+(?:{_VERBS}))\b", re.IGNORECASE),
]


def contribution_at(sentence: str) -> re.Match[str] | None:
    """Where a sentence starts saying what the paper itself does, if it does."""
    for pattern in _CONTRIBUTIONS:
        if (m := pattern.search(sentence)) is not None:
            return m
    return None


_SUBJECT = re.compile(
    rf"^\W*(?:(?:here|in\s+this\s+\w+),?\s+)?(?:{_SELF}|(?:aim|objective|purpose|goal)s?\s+"
    rf"(?:of\s+(?:this|the|our)\s+\w+\s+)?(?:was|were|is|are)\s+to|to)\s+",
    re.IGNORECASE,
)
_LEAD_ADVERB = re.compile(
    r"^(?:also|then|further|first|here|additionally|finally|instead|now|therefore|thus|hence)$"
)


def _third_person(verb: str) -> str:
    low = verb.lower()
    if low.endswith(("ed", "s")) or not low.isalpha():
        return verb
    if low.endswith("y") and low[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    if low.endswith(("sh", "ch", "x", "z")):
        return verb + "es"
    return verb + "s"


def gist_clause(sentence: str, words: int = 24) -> str:
    """What a paper does, as a clause about it: "In this work, we propose X, a ..." ->
    "proposes X, a ...", cut to about `words` words at a clause boundary where one is near."""
    text = sentence.strip()
    m = contribution_at(text)
    if m is not None and (subject := _SUBJECT.match(text[m.start() :])) is not None:
        rest = text[m.start() + subject.end() :].split()
        if len(rest) > 2 and rest[0].lower() in ("was", "were", "is", "are") and rest[1] == "to":
            rest = rest[2:]  # "this study was to determine ..." -> "determine ..."
        for i, word in enumerate(rest[:3]):
            if _LEAD_ADVERB.match(word.lower()) or word.lower().endswith("ly"):
                continue
            rest[i] = _third_person(word)
            break
        text = " ".join(rest)
        # "... and release X": a second verb of the same subject.
        text = re.sub(
            rf"\b(and|then)\s+({_VERBS})\b",
            lambda v: f"{v.group(1)} {_third_person(v.group(2))}",
            text,
            flags=re.IGNORECASE,
        )
    parts = text.split()
    if len(parts) > words:
        head = " ".join(parts[:words])
        cut = max(head.rfind(","), head.rfind(";"), head.rfind(":"))
        text = head[:cut] if cut >= 0 and len(head[:cut].split()) >= 8 else head + " …"
    text = text.rstrip(" .,;:")
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


_ARTICLE = re.compile(r"^(?:a|an|the|that|whether|if|how)\s+", re.IGNORECASE)


def short_phrase(abstract: str, words: int = 8) -> str:
    """A few words from the abstract that say what the paper is about: what follows its
    statement of purpose ("we propose X ..." -> "X ..."), else its opening words."""
    sentences = split_sentences(abstract)
    rest = sentences[0] if sentences else abstract
    for sentence in sentences:
        m = contribution_at(sentence)
        after = sentence[m.end() :].split() if m is not None else []
        # "To address these challenges, we ..." points back: its words name nothing.
        if len(after) >= 3 and after[0].lower() not in ("this", "these", "those", "such", "it"):
            rest = " ".join(after)
            break
    rest = re.split(r"[,;:()\[\]]|\.\s", rest.strip())[0]
    rest = _ARTICLE.sub("", rest.strip(" .")).strip()
    cut = rest.split()
    text = " ".join(cut[:words]).rstrip(" .")
    text = text[:1].upper() + text[1:]
    return text + ("…" if len(cut) > words else "")
