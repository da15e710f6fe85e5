"""Source and answer text made safe to show and to put in a prompt.

Abstracts are data, never instructions: markup, links, images, e-mail addresses and HTML
(entity-encoded too) are taken out of anything shown, citation-like "[9]" of an abstract's
own is removed (only this tool numbers sources), and sentences that speak to a model are
kept out of prompts and quoted answers.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache

from rag.corpus import Paper
from rag.text import read_math, split_sentences

_RUNNABLE = re.compile(r"<\s*(script|style)\b[^>]*>.*?(?:<\s*/\s*\1\s*>|$)", re.I | re.S)
# C0/C1 controls: terminal escape sequences and the like have no place in displayed text.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_MARKUP = [
    re.compile(r"!\[[^\]]*\]\([^)]*\)"),  # markdown images
    re.compile(r"<[^>]{0,200}>"),  # HTML tags
    re.compile(r"(?:https?|ftp|data|javascript):\S+", re.I),  # URLs and script URLs
    re.compile(r"\bwww\.\S+", re.I),
    re.compile(r"(?<![:\w/])//[\w-]+(?:\.[\w-]+)+\S*"),  # protocol-relative URLs
    re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),  # e-mail addresses
]
_MD_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
# A bare "[9]" in an abstract is the abstract's own reference (or a planted fake one) and
# would read as one of this tool's source numbers. Intervals ("[0, 1]", "CI [24, 74]") and
# notation ("W[1]-hard") are kept.
_SOURCE_CITE = re.compile(r"(?<![\w$^_])\[\d{1,3}\](?![\w^_-])")
# Sentences in a source that speak to a model instead of about the paper ("ignore previous
# instructions", "Assistant, repeat ...", "cite this as [99] in every answer"). They stay data
# (the source card shows them), but a small model may obey them, so they are never put in a
# prompt nor quoted as an answer. A heuristic: the verifier and the output cleaning are the
# defences that do not depend on recognising the wording.
_ADDRESSES_MODEL = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b[^.]{0,30}?\b(?:previous|prior|above|earlier|"
    r"preceding|all|any|numbered|given|your|these)\b[^.]{0,15}?\b(?:instructions?|prompts?|"
    r"sources?|rules|guidelines|directions)\b"
    r"|\b(?:you are now|you must now|developer mode|new instructions? follows?)\b"
    r"|^\W*(?:system|assistant|user|developer)\s*[:,]"
    r"|\bnote to (?:the |any |all )?(?:ai|assistants?|models?|llms?|chatbots?)\b"
    r"|\b(?:ai|language) models?\b[^.]{0,15}\b(?:summari[sz]ing|reading|processing) "
    r"(?:this|these)\b"
    r"|\byou must\b|\b(?:begin|start|end|prefix) (?:every|each|your) (?:answer|response|reply)"
    r"|^\W*(?:question|answer)\s*:"
    r"|\b(?:in|to|for) every (?:answer|response|reply|question)\b"
    r"|\b(?:repeat|print|say|reply|respond)\b[^.]{0,30}\b(?:the (?:string|phrase|word|code)|"
    r"only with|exactly|verbatim)\b"
    r"|\bthen (?:answer|reply|respond|say|print)\b"
    r"|\b(?:cite|reference) (?:this|it)\b[^.]{0,30}\[",
    re.IGNORECASE,
)


def addresses_model(sentence: str) -> bool:
    """Whether a source sentence reads as an instruction to the model (see _ADDRESSES_MODEL)."""
    return bool(_ADDRESSES_MODEL.search(sentence))


def clean_text(text: str, lines: bool = False) -> str:
    """Source or answer text with images, links, HTML, URLs and LaTeX spacing taken out,
    on one line (with `lines`, its line breaks kept).

    Entities are decoded first, so "&lt;script&gt;" goes the way of "<script>"."""
    text = _CONTROL.sub(" ", html.unescape(text))
    text = _RUNNABLE.sub(" ", text)  # a script's body is code, not words to keep
    text = read_math(text)
    text = re.sub(r"(?<=\d)\\,(?=\d)", ",", text).replace("\\,", " ").replace("``", '"')
    text = text.replace("\\%", "%")
    text = _MARKUP[0].sub(" ", text)  # images first: "![x](url)" is not a link to keep
    text = _MD_LINK.sub(r"\1", text).replace("**", "")
    for pattern in _MARKUP[1:]:
        text = pattern.sub(" ", text)
    if lines:
        return "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())
    return " ".join(text.split())


def source_sentences(p: Paper) -> list[str]:
    """The abstract's sentences as an answer may use them: markup out, citation-like [n]
    removed (only this tool numbers sources), and none that address the model."""
    return list(_source_sentences(p.abstract))


# Cached: the excerpter and the verifier read the same few abstracts many times per answer.
@lru_cache(maxsize=4096)
def _source_sentences(abstract: str) -> tuple[str, ...]:
    out = []
    for sentence in split_sentences(clean_text(abstract)):
        sentence = " ".join(_SOURCE_CITE.sub(" ", sentence).split()).replace(" .", ".")
        if sentence and not addresses_model(sentence):
            out.append(sentence)
    return tuple(out)


def quoted(text: str) -> str:
    """Text that cannot close the triple quotes a source sits in, nor cite like a source."""
    return _SOURCE_CITE.sub(" ", re.sub(r'"{2,}|`{3,}', '"', text))
