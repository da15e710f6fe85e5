"""The shared text utilities: one place for folding, words, stems, sentences and names."""

from __future__ import annotations

from rag.text import (
    GENERIC_WORDS,
    QUESTION_WORDS,
    STOPWORDS,
    coined_tokens,
    fold,
    looks_coined,
    split_sentences,
    stem,
    stems,
    tokens,
)


def test_word_lists_are_data_and_do_not_overlap_in_meaning() -> None:
    assert {"the", "of", "which"} <= STOPWORDS
    assert {"model", "method", "propose"} <= GENERIC_WORDS
    assert {"papers", "author", "track"} <= QUESTION_WORDS
    # A function word is not also a topic-bearing generic word, and no list is empty.
    assert not STOPWORDS & {"model", "method", "author", "track"}
    assert all(w == w.strip().lower() for w in STOPWORDS | GENERIC_WORDS | QUESTION_WORDS)


def test_fold_and_tokens() -> None:
    assert fold("  Ãlvaro  MÜLLER ") == "alvaro muller"
    assert tokens("Bouniot's papers on FS-DFM, by O'Brien?") == [
        "bouniot",
        "papers",
        "on",
        "fs-dfm",
        "by",
        "o'brien",
    ]


def test_one_stemmer_merges_forms_of_a_word_only() -> None:
    assert stem("robustness") == stem("robust")
    assert stem("watermarking") == stem("watermark")
    assert stem("exploration") != stem("exploit")
    assert stems("Watermarking of the images") == [stem("watermarking"), stem("images")]


def test_sentences_keep_abbreviations_whole() -> None:
    text = "We use e.g. the Adam optimizer. It is 3.2x faster! Results (Table 1) hold."
    assert split_sentences(text) == [
        "We use e.g. the Adam optimizer.",
        "It is 3.2x faster!",
        "Results (Table 1) hold.",
    ]


def test_coined_name_shapes() -> None:
    assert all(looks_coined(t) for t in ("TimeSAE", "BLEU", "GPT-2", "ResNet-50", "xLSTM"))
    assert not any(looks_coined(t) for t in ("Transformer", "model", "2024", "-"))
    text = "GPT-2 beats BLEU on ResNet-50 in 2024"
    assert coined_tokens(text) == ["GPT-2", "BLEU", "ResNet-50"]
    assert coined_tokens(text, acronyms=False) == ["GPT-2", "ResNet-50"]
