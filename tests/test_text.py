"""The shared text utilities: one place for folding, words, terms, stems, sentences, names."""

from __future__ import annotations

from rag.text import (
    STOPWORDS,
    coined_tokens,
    fold,
    looks_coined,
    one_edit,
    split_sentences,
    stem,
    stems,
    terms,
    tokens,
)


def test_word_lists_are_data() -> None:
    assert {"the", "of", "which"} <= STOPWORDS
    assert all(w == w.strip().lower() for w in STOPWORDS)


def test_terms_are_what_the_bm25_index_reads() -> None:
    import bm25s
    import Stemmer

    text = "Which papers fine-tune LLMs, e.g. GPT-4, on the 12 ARC tasks?"
    reference = bm25s.tokenize(
        [text],
        stopwords="en",
        stemmer=Stemmer.Stemmer("english"),
        return_ids=False,
        show_progress=False,
    )[0]
    assert [t for t, _ in terms(text)] == reference
    assert ("tune", "tuning") in terms("fine-tuning")  # each stem with its word as written


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
    # LaTeX math reads as what it typesets: abstracts write the norm a question calls "l2".
    assert tokens(r"the $\ell_2$-norm and $\ell_{1}$ penalties") == [
        "the",
        "l2-norm",
        "and",
        "l1",
        "penalties",
    ]
    assert fold("From $5 to $10 a month") == "from $5 to $10 a month"  # money, not math


def test_one_stemmer_merges_forms_of_a_word_only() -> None:
    assert stem("robustness") == stem("robust")
    assert stem("watermarking") == stem("watermark")
    assert stem("exploration") != stem("exploit")
    assert stems("Watermarking of the images") == [stem("watermarking"), stem("images")]
    # An acronym's plural is its singular; a short word is left as it is.
    assert stem("llms") == stem("llm") and stem("gnns") == stem("gnn")
    assert stem("this") == "this" and stem("gas") == "gas"


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
    # A ratio is a number to every reader of names: the question parser and the verifier.
    assert coined_tokens("is it 128x faster, or 19.5× with GPT-4o on a 3x3 grid?") == [
        "GPT-4o",
        "3x3",
    ]


def test_a_gist_is_the_papers_own_clause_about_what_it_does() -> None:
    from rag.text import contribution_at, gist_clause

    assert gist_clause("In this work, we propose FooNet, a graph network for molecules.") == (
        "proposes FooNet, a graph network for molecules"
    )
    # "To address X, we present Y": the contribution starts at "we present".
    assert gist_clause("To fill these gaps, we present Orak, a benchmark of 12 games.") == (
        "presents Orak, a benchmark of 12 games"
    )
    assert (
        gist_clause("We therefore study X and release Y.") == "therefore studies X and releases Y"
    )
    assert gist_clause("The aim of this study was to determine whether A causes B.") == (
        "determines whether A causes B"
    )
    long = "We introduce " + " ".join(f"w{i}" for i in range(40)) + "."
    assert gist_clause(long).endswith("…") and len(gist_clause(long).split()) <= 25
    assert contribution_at("Large language models are deployed globally.") is None


def test_a_paper_without_authors_or_title_is_named_by_what_it_does() -> None:
    from rag.corpus import Paper, assign_display_names
    from rag.text import short_phrase

    abstract = (
        "Programmed cell death shapes leaves. The aim of this study was to determine the "
        "role of mitochondrial dynamics during leaf remodelling in the lace plant."
    )
    # What follows "was to determine", its article dropped, cut to eight words.
    assert short_phrase(abstract) == "Role of mitochondrial dynamics during leaf remodelling in…"
    [paper] = assign_display_names([Paper(id="pmid-1", abstract=abstract, track="Apoptosis")])
    assert (
        paper.display_name.startswith("Role of mitochondrial")
        and "(Apoptosis)" in paper.display_name
    )
    assert "anonymous" not in paper.display_name.lower()


def test_one_slip_of_the_keyboard() -> None:
    assert one_edit("sheep", "shep") and one_edit("sheep", "sheeps") and one_edit("sheep", "sleep")
    assert one_edit("sheep", "shepe")  # neighbours swapped
    assert not one_edit("sheep", "sehpe") and not one_edit("sheep", "sheep")
