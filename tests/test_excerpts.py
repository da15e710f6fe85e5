"""Which sentences of a source go in front of the writer."""

from __future__ import annotations

from rag.corpus import Paper
from rag.excerpts import Excerpter
from rag.query import Asks

from .fake_embed import HashEmbedding

ABSTRACT = (
    "Checking the validity of reasoning with spectral attention diagnostics is cheap. "
    "Spectral attention diagnostics separate valid reasoning from hallucinated reasoning in "
    "4 model families. The spectral attention diagnostics of valid reasoning rely on 2 graph "
    "statistics. Spectral attention signals of valid reasoning track induction heads. "
    "A single threshold reaches 91% classification accuracy."
)


def test_a_details_value_sentence_is_the_one_sharing_the_words_that_ask_for_it() -> None:
    # The question's words for the paper itself are in most of its sentences, and make the
    # sentences about it the closest; the words asking for the quantity are in one.
    question = (
        "What classification accuracy do the spectral attention diagnostics of valid "
        "reasoning reach?"
    )
    paper = Paper(id="p-1", abstract=ABSTRACT, track="Interpretability")
    [excerpt] = Excerpter(HashEmbedding()).pick(question, [paper], per=2, asks=Asks.DETAIL)
    assert "91%" in excerpt.best and excerpt.sentences[0] == excerpt.best
    # Asked for no detail, the sentence most like the question leads, as before.
    [plain] = Excerpter(HashEmbedding()).pick(question, [paper], per=2, asks=Asks.EXPLAIN)
    assert "91%" not in plain.best
