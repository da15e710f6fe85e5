"""Text utilities every stage shares: folding, words, stems, stop words, sentences, names.

The word lists are data files in `rag/words/` (one word a line, `#` comments):
- `stopwords.txt`: function words, which carry no topic anywhere;
- `generic.txt`: words nearly every abstract uses whatever its topic;
- `question.txt`: words that frame a question about the collection ("which papers", "by",
  "track", "published") rather than say what it is about;
- `contribution.txt`: verbs with which an abstract states what its own work does;
- `numbers.txt`: numbers written as words;
- `results.txt`: words that report the same kind of result ("speedup", "faster");
- `kinds.txt`: kinds of thing known by proper names ("benchmark", "LLM");
- `generic_acronyms.txt`: short forms for plain things ("LLM", "RL");
- `well_known.txt`: names of particular things no abstract coins ("ImageNet", "PPO").
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import Stemmer

WORDS_DIR = Path(__file__).with_name("words")


def _data_lines(name: str) -> list[str]:
    """The lines of rag/words/<name>.txt, blank ones and "#" comments left out."""
    text = (WORDS_DIR / f"{name}.txt").read_text(encoding="utf-8")
    return [w.strip() for w in text.splitlines() if w.strip() and w[:1] != "#"]


def word_list(name: str) -> frozenset[str]:
    return frozenset(_data_lines(name))


STOPWORDS = word_list("stopwords")
GENERIC_WORDS = word_list("generic")
QUESTION_WORDS = word_list("question")
CONTRIBUTION_VERBS = word_list("contribution")
# Number words, and the value of each that names one number ("twelve" 12; "hundreds" none).
_NUMBER_LINES = [line.split() for line in _data_lines("numbers")]
NUMBER_VALUES = {row[0]: float(row[1]) for row in _NUMBER_LINES if len(row) > 1}
NUMBER_WORDS = frozenset(row[0] for row in _NUMBER_LINES)


# kind -> the line of kinds.txt (its family) it is on
KIND_FAMILY = {w: n for n, line in enumerate(_data_lines("kinds")) for w in line.split()}
KINDS = frozenset(KIND_FAMILY)
# Short forms so common in the field that they name no particular thing ("LLM", "FFN").
PLAIN_ACRONYMS = word_list("generic_acronyms")
# Those and the names of particular things as common ("ImageNet", "PPO"): no paper coins them.
GENERIC_ACRONYMS = PLAIN_ACRONYMS | word_list("well_known")


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


# A name this short is inside many words, and as a short form spells out many runs of words.
SHORT_NAME = 2


def mentions_name(text: str, name: str, text_stems: set[str] | None = None) -> bool:
    """Whether folded `text` (`fold`) has `name` (a substring test: errs towards known). So do an
    acronym's words ("DAGs" of "directed acyclic graphs"); and, given the text's word stems,
    the parts of a hyphenated compound with a lowercase part ("GPU-accelerated"), since such
    compounds are also written apart ("accelerated on a GPU")."""
    lowered = fold(name)
    if len(lowered) <= SHORT_NAME and not name.isupper():
        # A word of two letters is inside many others ("Go" in "good"): only as a word. (A
        # short form as short, "PR", stands for ordinary words: no evidence either way.)
        if re.search(rf"(?<![a-z0-9]){re.escape(lowered)}(?![a-z])", text):
            return True
    elif lowered in text:
        return True
    short = name.removesuffix("s")
    if is_acronym(name) and len(short) > SHORT_NAME and spells_out(text, short):
        return True
    if _LONG_NUMBER.search(lowered) and re.search(_number_pattern(lowered), text):
        return True  # "1024-step" and "1,024-step"
    parts = [p for p in name.split("-") if p]
    # Parts capitalised each ("MoE-Guard") coin a name, which is not written apart.
    described = len(parts) > 1 and any(p[:1].islower() for p in parts)
    if not described:
        return False
    # Lowercase words after a name describe it ("PPO-style", "GPT-4-based"): the name, as a
    # word of its own (a short one is inside other words by chance). A word before a name
    # changes it ("non-English"), and must be written too.
    head = "-".join(itertools.takewhile(lambda p: not p[:1].islower(), parts)).lower()
    if len(head) > SHORT_NAME and re.search(rf"(?<![a-z0-9]){re.escape(head)}s?(?![a-z])", text):
        return True
    return text_stems is not None and all(stem(p.lower()) in text_stems for p in parts)


_LONG_NUMBER = re.compile(r"\d[\d,]{3,}")
# A thousands separator as abstracts write it: "1,024", TeX's "1\,024", a thin space.
_THOUSANDS = r"(?:\\?,|[\u2009\u202f ])?"


def _number_pattern(name: str) -> str:
    """`name` as a pattern in which its numbers may be written with or without thousands
    separators (loosely: between any two digits)."""
    out = []
    for part in re.split(r"(\d[\d,]*\d|\d)", name):
        if part[:1].isdigit():
            digits = part.replace(",", "")
            out.append(_THOUSANDS.join(re.escape(c) for c in digits))
        else:
            out.append(re.escape(part))
    return "".join(out)


def spells_out(text: str, acronym: str) -> bool:
    """Whether `text` has a run of lowercase words with the acronym's letters as initials.
    An all-capital acronym takes its letters from content words ("bag of words" is "BoW"), so
    a run through a function word is chance."""
    words = r"[\s-]+".join(f"({c}[a-z]*)" for c in acronym.lower())
    return any(STOPWORDS.isdisjoint(m.groups()) for m in re.finditer(rf"\b{words}\b", text))


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


# A count as abstracts write it: "12", "1,024", "7b" (of "7B-parameter"), "1.3t", "100k".
_COUNT = re.compile(r"\d[\d,.]*[kmbt]?")
# A percentage is a share, not a count ("35% of the three languages").
_SHARE = re.compile(r"\d[\d.,]*(?:\s*-+\s*\d[\d.,]*)?\s*(?:\\?%|percent(?:age points?)?\b)")
# A count stands before what it counts, past at most two modifiers ("12 large video games").
COUNT_MODIFIERS = 2


def number_value(word: str) -> float | None:
    """The number a folded word writes ("twelve", "12", "7,000"), if it names one."""
    if _COUNT.fullmatch(word) and word[-1].isdigit():
        try:
            return float(word.replace(",", ""))
        except ValueError:  # "1.2.3"
            return None
    return NUMBER_VALUES.get(word)


def states_count(text: str, counted: tuple[str, ...], number: float | None = None) -> bool:
    """Whether `text` gives a number of what the words `counted` name: a number followed by
    all of them ("how many robot arms" -> "12 industrial robot arms", "twelve arms"; by
    stem). "12 robot arms in all major labs" gives no number of robot labs. With `number`,
    that number of them ("five games" for "which five games")."""
    # Compounds are read whole or apart, in the question as in the text ("expert-writer").
    want = {stem(p) for c in counted for w in tokens(c) for p in w.split("-") if p}
    parts = [p for t in tokens(_SHARE.sub(" ", text)) for p in t.split("-") if p]
    reach = len(want) + COUNT_MODIFIERS
    for i, part in enumerate(parts):
        if (
            (part in NUMBER_WORDS or _COUNT.fullmatch(part))
            and (number is None or number_value(part) == number)
            and want <= {stem(p) for p in parts[i + 1 : i + 1 + reach]}
        ):
            return True
    return False


# Words that deny what follows them ("without fine-tuning", "no retain data").
_DENIALS = frozenset(
    {"without", "no", "not", "never", "nor", "neither", "cannot", "fail", "fails", "failed"}
)
# A denial governs the few words after it: "without any retain data".
DENIAL_REACH = 3


def denied_only(text: str, words: Iterable[str], asked: str = "") -> str:
    """The first of `words` (a question's, in any form) that `text` writes, but only just
    after a denial ("we steer experts without fine-tuning" of "fine-tune"); else "". Words
    that `asked` (the question) writes after a denial anywhere before them are left out:
    "without changing X or using Y" denies both."""
    written, question = _denials(text), _denials(asked, reach=len(asked))
    for word in words:
        parts = [stem(p) for p in all_words(word)]
        if parts and written(parts) and not question(parts):
            return word
    return ""


def _is_denial(word: str) -> bool:
    return word in _DENIALS or bool(re.search(r"n['’]t$", word))  # "can't", "doesn't"


def _denials(text: str, reach: int = DENIAL_REACH) -> Callable[[list[str]], bool]:
    """Whether `text` writes a run of stems, and each time within `reach` words after a
    denial. A compound is one word ("without any task-specific fine-tuning")."""
    said: list[str] = []
    word_at: list[int] = []  # which written word each part is of
    denials: list[int] = []  # the written words that deny
    for n, word in enumerate(WORD.findall(fold(text))):
        if _is_denial(word):
            denials.append(n)
        for part in _ALNUM.findall(word):
            said.append(part)
            word_at.append(n)
    stems_said = [stem(w) for w in said]

    def after_denial(i: int) -> bool:
        return any(0 < word_at[i] - n <= reach for n in denials)

    def denied(parts: list[str]) -> bool:
        n = len(parts)
        at = [i for i in range(len(stems_said) - n + 1) if stems_said[i : i + n] == parts]
        return bool(at) and all(after_denial(i) for i in at)

    return denied


# Words of opposite sense (rag/words/opposites.txt), each to its opposites.
_OPPOSITES: dict[str, set[str]] = {}
for _a, _b in (line.split() for line in _data_lines("opposites")):
    _OPPOSITES.setdefault(_a, set()).add(_b)
    _OPPOSITES.setdefault(_b, set()).add(_a)
# A modifier qualifies the next few words: "larger rephrasing models".
OPPOSITE_REACH = 2


def _qualified(
    text: str, reach: int | None = OPPOSITE_REACH, claims: bool = False
) -> dict[tuple[str, str], tuple[str, str]]:
    """(modifier, stem of a word it qualifies) -> (the two as written, their sentence), for
    each word of rag/words/opposites.txt and the content words right after it; with `reach`
    None, every later word of its sentence up to an opposite one. With `claims`, only where
    a result word follows them in the sentence: what they are said to do ("larger models
    outperform"), not merely what is tried ("through larger models")."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    results = _result_words()
    for sentence in split_sentences(text):
        words = WORD.findall(fold(sentence))
        for i, word in enumerate(words):
            if word not in _OPPOSITES:
                continue
            for j, after in enumerate(words[i + 1 : None if reach is None else i + 1 + reach]):
                if after in _OPPOSITES[word]:
                    break  # what follows is qualified by the opposite ("higher X ... lower Y")
                if after in _OPPOSITES or after in STOPWORDS:
                    continue
                if claims and not any(stem(w) in results for w in words[i + j + 2 :]):
                    continue
                out.setdefault((word, stem(after)), (f"{word} {after}", sentence))
    return out


@dataclass(frozen=True)
class Contradiction:
    """A claim of a question that a text makes only the other way round."""

    asked: str  # as the question puts it ("larger models", "beat")
    written: str  # as the text puts it instead ("smaller models", "fail to outperform")
    sentence: str  # the text's sentence that says so


# word -> the kind of data (a line of rag/words/modalities.txt) it names
_MODALITY = {w: n for n, line in enumerate(_data_lines("modalities")) for w in line.split()}


def modality_words(text: str) -> dict[int, str]:
    """The kinds of data `text` writes a word of (rag/words/modalities.txt), each with the
    first such word as written there: hyphenated words are read whole and apart
    ("audio-language"), plurals as singulars."""
    out: dict[int, str] = {}
    for token in tokens(text):
        for word in dict.fromkeys([token, *token.split("-")]):
            kind = _MODALITY.get(word, _MODALITY.get(word.removesuffix("s")))
            if kind is not None:
                out.setdefault(kind, word)
    return out


_SHARED_OR = re.compile(rf"\bor\s+(?=[\w-]+\s+(?:{'|'.join(sorted(STOPWORDS))})\b)", re.IGNORECASE)


def unwritten_modality(asked: str, texts: Iterable[str]) -> str:
    """A word for the kind of data `asked` is about ("speech") where none of `texts` writes
    a word for any kind of data it names, else "": "audio or images" is answered by a
    paper on either, and "GNNs or SAEs" by one on SAEs, whatever data."""
    # One word after "or", then a function word, shares the rest of the phrase with the
    # word before the "or" ("detection or removal of X": X for both).
    joined = _SHARED_OR.sub(" ", asked)
    sides = [modality_words(side) for side in alternatives(joined)]
    if not all(sides):
        return ""
    wanted: dict[int, str] = {}
    for side in sides:
        for kind, word in side.items():
            wanted.setdefault(kind, word)
    written = set().union(*(modality_words(t) for t in texts))
    return "" if written & set(wanted) else next(iter(wanted.values()))


def contradicted(text: str, asked: str) -> Contradiction | None:
    """What the question `asked` says of a thing ("larger ... models") where `text` says
    only the opposite of it ("smaller models"); a sentence that writes the question's word
    anywhere before the thing says it too. Or a result the question asserts ("X beats Y")
    that `text` states only denied ("X fails to outperform Y")."""
    said, anywhere = _qualified(text), _qualified(text, None)
    # A claim of the question ("larger models do better") is weighed against the text's
    # claims: a text that only tries larger models says nothing of how they fare.
    claimed = _qualified(asked, claims=True)
    said_claims, claims_anywhere = _qualified(text, claims=True), _qualified(text, None, True)
    for (word, head), (written, _) in _qualified(asked).items():
        claim = (word, head) in claimed
        if (word, head) in (claims_anywhere if claim else anywhere):
            continue
        for opposite in sorted(_OPPOSITES[word]):
            if (opposite, head) in (said_claims if claim else said):
                instead, sentence = (said_claims if claim else said)[(opposite, head)]
                return Contradiction(written, instead, sentence)
    denied_in_text, denied_in_question = _denials(text), _denials(asked, reach=len(asked))
    result_words, text_stems = _result_words(), set(stems(text))
    for word in all_words(asked):
        group = result_words.get(stem(word), set())
        if not group or denied_in_question([stem(word)]):
            continue
        denied = {w for w in group if denied_in_text([w])}
        if denied and not any(w in text_stems and not denied_in_text([w]) for w in group):
            return _denied_result(text, word, denied)
    return None


def _denied_result(text: str, asked: str, group: set[str]) -> Contradiction:
    """The denial and the result word it denies, as `text` writes them, with the sentence."""
    for sentence in split_sentences(text):
        words = WORD.findall(fold(sentence))
        for i, w in enumerate(words):
            if stem(w) in group:
                start = max(
                    (j for j in range(max(0, i - DENIAL_REACH), i) if _is_denial(words[j])),
                    default=i,
                )
                return Contradiction(asked, " ".join(words[start : i + 1]), sentence)
    return Contradiction(asked, asked, "")


# What restates or exemplifies what comes before it: a parenthesis, or "e.g."/"i.e." up to
# the end of the clause.
_GLOSS = re.compile(r"\([^()]*\)|\b(?:e\.g|i\.e)\.?,?\s[^.;?!()]*", re.IGNORECASE)


def without_glosses(text: str) -> str:
    """`text` without its glosses: "papers on X (Y, Z)" asks for X; Y and Z say what X is,
    or give instances of it, in the asker's own words."""
    return _GLOSS.sub(" ", text)


def states_figure(text: str) -> bool:
    """Whether `text` gives any figure at all: a digit or a number written as a word."""
    return bool(_DIGIT.search(text)) or not NUMBER_WORDS.isdisjoint(tokens(text))


# A sentence ends at . ! or ? before a capital, digit, quote or bracket: abstracts'
# abbreviations ("e.g. the", "et al. show") are followed by lower case and stay whole.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"“(\[])")


def states_value(text: str, measured: tuple[str, ...]) -> bool:
    """Whether `text` names what `measured` names ("translation accuracy", or words of the
    same kind of result: "faster" for "speedup") with a number beside it, within
    VALUE_REACH words: where an abstract reports a result, it gives the figure there."""
    said = {stem(w) for m in measured for w in tokens(m) if w not in GENERIC_WORDS}
    kinds = _result_words()
    want = set().union(said, *(kinds.get(w, set()) for w in said))
    if not want:
        return True  # "what results ...": nothing particular to look for
    # A ratio ("19.5x") says how many times: the figure of a comparison (a speedup, a
    # reduction), never of a metric such as PSNR or accuracy.
    ratios = bool(want & kinds.keys())
    for sentence in split_sentences(text):
        if not ratios:
            sentence = _RATIO_FIGURE.sub(" ", fold(sentence))
        parts = [p for t in tokens(sentence) for p in t.split("-") if p]
        at = [i for i, p in enumerate(parts) if stem(p) in want]
        # A number, not a name with a digit in it ("F1", "HumanML3D").
        figures = [i for i, p in enumerate(parts) if p[0].isdigit()]
        if any(abs(i - j) <= VALUE_REACH for i in at for j in figures):
            return True
    return False


_RATIO_FIGURE = re.compile(r"\d+(?:[.,]\d+)?\s*[x×](?![a-z0-9])", re.IGNORECASE)
# How far a result's figure stands from what it measures: a clause ("a 3.5% gain in
# BLEU", "accuracy rises from 71% to 80%"), not the next result of a list.
VALUE_REACH = 6
_DIGIT = re.compile(r"\d")


@lru_cache(maxsize=1)
def _result_words() -> dict[str, set[str]]:
    """Each word of results.txt (stemmed) -> the stems of its group."""
    groups = [group.split() for group in word_list("results")]
    return {stem(w): {stem(v) for v in group} for group in groups for w in group}


def split_sentences(text: str) -> list[str]:
    parts = _SENTENCE_END.split(" ".join(text.split()))
    return [p.strip() for p in parts if p.strip()]


# "or", and a slash set apart from its words ("graph colouring / SAT solving").
_OR = re.compile(r"\bor\b|\s/\s?|\s?/\s", re.IGNORECASE)


def alternatives(text: str) -> list[str]:
    """The sides of an "A or B" question (one side when there is no "or")."""
    return [side.strip() for side in _OR.split(text) if side.strip()] or [text]


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


@dataclass(frozen=True)
class Figure:
    """A figure a sentence states: as written, the values it may stand for (a range for
    "millions"), and the words it is a figure of ("90% accuracy", "1,024-step")."""

    written: str
    low: float
    high: float
    of: frozenset[str] = frozenset()


# Scales written after a number: "128K", "2M"; as words ("2 million") from NUMBER_VALUES.
_SCALES = {"k": 1e3, "m": 1e6, "b": 1e9}
# A number, not the digits of a name ("Qwen3", "GPT-2", "Qwen3-8B", "E(3)"): no letter, digit
# or dot just before it, nor one with a hyphen or bracket. Then a scale ("128K", "2 million")
# or a share ("\%").
_FIGURE_OR_WORD = re.compile(
    r"(?<![a-z0-9.])(?<![a-z0-9][-‑(])"
    r"(?P<n>\d{1,3}(?:(?:\\?,|[\u2009\u202f])\d{3})+(?!\d)|\d+(?:\.\d+)?)"
    r"(?:\s*(?P<unit>\\?%|percent\b|[x×](?![a-z])|[kmb](?![a-z]))"
    r"|\s+(?P<scale>thousand|million|billion)s?\b)?"
    r"|\b(?P<many>hundreds|thousands|millions|billions)\b"
    r"|\ba\s+(?P<one>thousand|million|billion)\b"
    r"|(?P<w>[a-z]+)"
)
# "millions": a million or more, short of the next name ("billions").
_MANY = {
    "hundreds": (1e2, 1e3),
    "thousands": (1e3, 1e6),
    "millions": (1e6, 1e9),
    "billions": (1e9, 1e12),
}
# A figure's words are the next ones, past filler ("millions of tokens").
FIGURE_OF_WORDS = 2
# A figure a question gives is the paper's within rounding ("around 90%" of 89.7%).
FIGURE_ROUNDING = 0.05


def _figures_and_words(text: str, spelled: dict[str, float] | None = None) -> list[Figure | str]:
    """`text` read as figures and (folded) words, in order; `spelled` are number words read
    as figures too."""
    spelled = spelled or {}
    out: list[Figure | str] = []
    for m in _FIGURE_OR_WORD.finditer(fold(text)):
        if (word := m.group("w")) and word in spelled:
            out.append(Figure(word, spelled[word], spelled[word]))
        elif word:
            out.append(word)
        elif m.group("many"):
            low, high = _MANY[m.group("many")]
            out.append(Figure(m.group(0), low, high))
        elif m.group("one"):
            value = NUMBER_VALUES[m.group("one")]
            out.append(Figure(m.group(0), value, value))
        else:
            value = float(re.sub(r"\\?,|[\u2009\u202f]", "", m.group("n")))
            unit = (m.group("unit") or "").lower()
            scale = m.group("scale")
            value *= NUMBER_VALUES[scale] if scale else _SCALES.get(unit, 1.0)
            out.append(Figure(m.group(0).strip(), value, value))
    return out


def stated_figures(text: str) -> list[Figure]:
    """The figures a question states (not a year), each with the words it is a figure of."""
    parts = _figures_and_words(text)
    out = []
    for i, part in enumerate(parts):
        if not isinstance(part, Figure):
            continue
        if part.low == part.high and 1900 <= part.low <= 2100 and part.written.isdigit():
            continue  # a year: when, not how much
        of: list[str] = []
        first = 0  # where the first word it is a figure of stands after it
        for k, after in enumerate(parts[i + 1 :], start=1):
            if isinstance(after, Figure) or len(of) == FIGURE_OF_WORDS:
                break
            if after not in STOPWORDS and after not in GENERIC_WORDS:
                of.append(stem(after))
                first = first or k
        # As the question says it, up to that word: "90% accuracy", "millions of tokens".
        said = [part.written, *(str(w) for w in parts[i + 1 : i + 1 + first])]
        out.append(Figure(" ".join(said), part.low, part.high, frozenset(of)))
    return out


def states_figure_of(text: str, figure: Figure) -> bool:
    """Whether `text` gives `figure` (within rounding) within VALUE_REACH words of a word it
    is a figure of (anywhere, for a figure of nothing named)."""
    for sentence in split_sentences(text):
        # An abstract may spell a count out ("three benchmarks"); a question's digits, or
        # its magnitudes, are what it states ("the two tricks" only counts what it asks of).
        parts = _figures_and_words(sentence, NUMBER_VALUES)
        at = [i for i, p in enumerate(parts) if isinstance(p, str) and stem(p) in figure.of]
        for j, p in enumerate(parts):
            if not isinstance(p, Figure):
                continue
            fits = p.high >= figure.low * (1 - FIGURE_ROUNDING) and p.low <= figure.high * (
                1 + FIGURE_ROUNDING
            )
            if fits and (not figure.of or any(abs(i - j) <= VALUE_REACH for i in at)):
                return True
    return False
