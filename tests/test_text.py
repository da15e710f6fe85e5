"""The shared text utilities: one place for folding, words, stems, sentences and names."""

from __future__ import annotations

from rag.text import (
    GENERIC_WORDS,
    QUESTION_WORDS,
    STOPWORDS,
    coined_tokens,
    contradicted,
    denied_only,
    fold,
    looks_coined,
    mentions_name,
    modality_words,
    one_edit,
    split_sentences,
    stated_figures,
    states_count,
    states_figure,
    states_figure_of,
    states_value,
    stem,
    stems,
    tokens,
    unwritten_modality,
    without_glosses,
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


def test_a_count_stands_before_what_it_counts() -> None:
    assert states_count("We collect 3,200 expert annotations.", ("annotations",))
    # A compound, whole or apart, on either side.
    assert states_count("We collect 3,200 crowd worker labels.", ("crowd-worker", "labels"))
    assert states_count("We collect 3,200 crowd-worker labels.", ("crowd", "worker", "labels"))
    assert states_count("a 13B-parameter model", ("parameters",))
    assert states_count("across twelve large board games", ("games",))
    assert not states_count("games of 2024 are harder", ("games",))
    assert not states_count("We annotate many games.", ("games",))
    # What the number counts is what follows it: robot arms, not robot labs.
    assert not states_count("12 robot arms in all major labs", ("robot", "labs"))
    # A percentage is a share, not a count.
    assert not states_count("harm rises to 35% of answers in those languages", ("languages",))
    # That many of them, in figures or words.
    assert states_count("exact exploitability for five large games", ("games",), 5)
    assert states_count("across 12 popular video games", ("games",), 12)
    assert not states_count("across 12 popular video games", ("games",), 5)


def test_a_result_is_stated_where_a_sentence_gives_its_figure() -> None:
    # Beside what it measures, not at the other end of a list of results.
    listed = "A 3.5% gain in recall on FooSet and gains in precision and FID on BarSet."
    assert states_value(listed, ("recall",)) and not states_value(listed, ("FID",))
    abstract = "We reach a FID of 2.1 on faces. Our model is also fast on CIFAR."
    assert states_value(abstract, ("FID",))
    assert not states_value(abstract, ("speed-up",))
    assert states_value("Top-1 accuracy reaches 81.2%.", ("top-1", "accuracy"))
    assert not states_value("Accuracy improves markedly on all tasks.", ("accuracy",))
    # A digit in the name of what is measured is no figure of it.
    assert not states_value("It improves F1 on FooBench.", ("F1",))
    assert states_value("It reaches an F1 of 0.8.", ("F1",))
    # The same kind of result in other words (rag/words/results.txt).
    assert states_value("Sampling is 40× faster than before.", ("speedup",))
    # A ratio is the figure of a comparison, not of a metric written beside it.
    ratio = r"It keeps competitive SSIM/LPIPS with up to 12.5$\times$ speedup and 3x fewer steps."
    assert not states_value(ratio, ("SSIM",)) and not states_value(ratio, ("LPIPS", "dB"))
    assert states_value(ratio, ("speedup",)) and states_value(ratio, ("reduction",))
    # Nothing particular asked ("what results ..."): nothing to hold against the text.
    assert states_value("No figures here.", ("results",))


def test_a_name_is_mentioned_however_its_number_is_grouped() -> None:
    text = r"it beats 1\,024-step samplers with 2,048-token contexts at 4096 tokens."
    assert mentions_name(text, "1024-step") and mentions_name(text, "1,024-step")
    assert mentions_name(text, "2048-token") and mentions_name(text, "4,096")
    assert not mentions_name(text, "8192-step")


def test_an_acronym_spelled_out_in_content_words_is_mentioned() -> None:
    text = "we generate directed acyclic graphs with flow matching, proven in theory."
    assert mentions_name(text, "DAGs") and mentions_name(text, "DAG")
    assert not mentions_name(text, "GNN")
    # Its letters come from content words: "proven in theory" does not spell "PIT".
    assert not mentions_name(text, "PIT")
    assert mentions_name("a pit in theory", "PIT")  # written as it is
    assert mentions_name("we prompt large language models.", "LLMs")


def test_a_two_letter_word_is_a_name_only_as_a_word() -> None:
    assert not mentions_name("a good game, well worth it.", "Go")
    assert mentions_name("agents play go and chess.", "Go")
    assert mentions_name("the go-2 engine", "Go")
    # A two-letter short form stands for ordinary words, found or not: no evidence of absence.
    assert mentions_name("a price prediction model.", "PR")


def test_one_slip_of_the_keyboard() -> None:
    assert one_edit("sheep", "shep") and one_edit("sheep", "sheeps") and one_edit("sheep", "sleep")
    assert one_edit("sheep", "shepe")  # neighbours swapped
    assert not one_edit("sheep", "sehpe") and not one_edit("sheep", "sheep")


def test_a_described_compound_is_found_written_apart_a_coined_one_is_not() -> None:
    text = "we accelerate sampling on a gpu and guard english-only models."
    said = set(stems(text))
    assert mentions_name(text, "GPU-accelerated", said)
    assert mentions_name(text, "non-English", said) is False  # "non" is never written
    assert mentions_name("non english text.", "non-English", set(stems("non english text.")))
    # Each part capitalised: a coined name, which a text writing its words does not name.
    assert not mentions_name(text, "Gpu-Guard", said)
    # Words after a name describe it: the name written as a word is enough.
    assert mentions_name(text, "GPU-style", said)
    assert mentions_name("fine-tuned on llama-2 with adapters.", "Llama-2-based")
    assert not mentions_name("answers of gpus.", "SWE-bench", set(stems("answers of gpus.")))


def test_any_figure_at_all() -> None:
    assert states_figure("a 3x speedup.") and states_figure("in twelve games.")
    assert not states_figure("it outperforms every baseline by a wide margin.")


def test_the_figures_a_question_states_and_whether_a_text_gives_them() -> None:
    # Not a year, nor the digits of a name ("Llama-3-8B"); each with what it is a figure of.
    q = "Why does it reach roughly 72% recall on 3 benchmarks in 2023 with Llama-3-8B?"
    recall, benchmarks = stated_figures(q)
    assert (recall.written, recall.of) == ("72% recall", {stem("recall")})
    assert (benchmarks.written, benchmarks.low) == ("3 benchmarks", 3)
    assert states_figure_of("Recall rises to 71.8\\% on every dataset.", recall)  # rounded
    far = "Recall is 40% while the accuracy of the final classifier on every benchmark is 72%."
    assert not states_figure_of(far, recall)  # 72%, but of another thing
    assert states_figure_of("We evaluate on three benchmarks.", benchmarks)  # spelled out
    assert states_figure_of("We evaluate on 3 public benchmarks.", benchmarks)
    # A magnitude in words is a range; a scale after a number multiplies it.
    (many,) = stated_figures("how can it read millions of tokens?")
    assert many.written == "millions of tokens"
    assert states_figure_of("It reads 2M tokens at once.", many)
    assert not states_figure_of("It reads 128K tokens at once.", many)
    assert stated_figures("a 1\\,024-step run")[0].low == 1024


def test_glosses_are_what_restates_or_exemplifies() -> None:
    assert without_glosses("papers on X (Y, Z)?").split() == ["papers", "on", "X", "?"]
    assert without_glosses("papers on X, e.g. Y and Z; and W").split() == [
        "papers",
        "on",
        "X,",
        ";",
        "and",
        "W",
    ]
    assert without_glosses("papers on X, i.e. Y?").split() == ["papers", "on", "X,", "?"]


def test_a_word_written_only_to_deny_it() -> None:
    steer = "We steer experts at inference, without fine-tuning. It is cheap."
    assert denied_only(steer, ["experts", "fine-tune"]) == "fine-tune"
    # Not where the question denies it too: it asserts nothing of the kind.
    assert denied_only(steer, ["fine-tune"], "How does it steer without fine-tuning?") == ""
    assert (
        denied_only("We fine-tune briefly. Others work without fine-tuning.", ["fine-tune"]) == ""
    )
    # A denial governs the few words after it.
    assert denied_only("It forgets without any retain data.", ["retain"]) == "retain"
    assert denied_only("No gains. Then we use a small retain set.", ["retain"]) == ""
    assert denied_only(steer, ["watermark"]) == ""  # never written: another test's business
    # A compound is one word; a contraction denies too.
    leon = "LLMs as optimizers without any task-specific fine-tuning, for patients."
    assert denied_only(leon, ["fine-tuned"]) == "fine-tuned"
    welfare = "There is no independent, intervention-based test of welfare."
    assert denied_only(welfare, ["test"]) == "test"
    assert denied_only(welfare, ["test"], "It says you can't test welfare?") == ""
    # The question's own denial reaches over a list: "without X or using Y" denies Y.
    asked = "It forgets with no edits or retain data?"
    assert denied_only("It forgets without any retain data.", ["retain"], asked) == ""


def test_a_claim_the_text_makes_only_the_other_way_round() -> None:
    found = (
        "Unlike in human-written text, higher novelty in LLMs correlates with lower pragmaticality."
    )
    c = contradicted(found, "Why does higher novelty come with higher pragmaticality?")
    assert c is not None and (c.asked, c.written) == (
        "higher pragmaticality",
        "lower pragmaticality",
    )
    assert c.sentence == found
    # Said the same way, or the opposite only of another thing, is no contradiction; nor is
    # a sentence that writes the question's word before the thing, further off.
    assert contradicted(found, "Why does higher novelty come with lower pragmaticality?") is None
    assert contradicted(found, "Why is pragmaticality lower for longer texts?") is None
    cfg = "Stronger guidance improves alignment but reduces diversity. Weaker modes, reducing it."
    assert contradicted(cfg, "Why does stronger guidance reduce diversity?") is None
    # A result the text states only denied.
    runs = "We find that CFR-based approaches fail to outperform policy gradient methods."
    c = contradicted(runs, "Why do CFR-based approaches beat PPO?")
    assert c is not None and (c.asked, c.written) == ("beat", "fail to outperform")
    assert contradicted(runs, "Why do CFR-based approaches fail to beat PPO?") is None
    assert contradicted(runs + " Ours outperforms them.", "Why does CFR beat PPO?") is None
    # A claim of how a thing fares is weighed against the text's claims, not against a
    # sentence that only tries it.
    tried = (
        "We study compute, through larger rephrasing models and beam search. "
        "We find that smaller models outperform larger ones."
    )
    c = contradicted(tried, "Why do larger rephrasing models give better watermarks?")
    assert c is not None and c.written == "smaller models" and c.sentence.startswith("We find")
    assert contradicted(tried, "How do larger rephrasing models change the trade-off?") is None
    both = tried + " Larger models also outperform on books."
    assert contradicted(both, "Why do larger models give better watermarks?") is None


def test_the_kind_of_data_a_question_asks_about() -> None:
    # Words of one kind of data, whole or inside a hyphenated word, plural or not.
    assert modality_words("jailbreaks of audio-language models") == {0: "audio"}
    assert set(modality_words("Speech and images")) == {0, 1}
    # Not words with a second sense: sound proofs, speakers of a language.
    assert modality_words("a sound proof for speakers of Hausa") == {}
    image_paper = "We watermark generated images in pixel space."
    assert unwritten_modality("watermarking speech", [image_paper]) == "speech"
    assert unwritten_modality("watermarking photos", [image_paper]) == ""
    # Either kind it names will do; naming none asks of no kind.
    assert unwritten_modality("watermarking audio or images", [image_paper]) == ""
    assert unwritten_modality("watermarking speech or voice", [image_paper]) == "speech"
    assert unwritten_modality("graph networks or watermarking", [image_paper]) == ""
    # One word after "or", then a function word, shares the rest of the phrase.
    assert unwritten_modality("detection or removal of speech clones", [image_paper]) == "speech"
    assert unwritten_modality("watermarking", [image_paper]) == ""
