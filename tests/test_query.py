"""Understanding a question once (rag.query): names resolved against the collection."""

from __future__ import annotations

import pytest

from rag.corpus import Paper
from rag.query import Asks, Vocabulary, follow_up, looks_like_follow_up, parse, replace_it
from rag.retrieve import Retriever
from rag.settings import Settings

PAPERS = [
    Paper(
        "p1",
        "We propose TimeSAE, sparse autoencoders for time series. Sparse autoencoders help.",
        title="TimeSAE: Sparse Autoencoders for Time Series",
        authors=("Khalid Oublal", "Quentin Bouniot"),
        track="Social Aspects · Safety",
        names=("TimeSAE",),
    ),
    Paper(
        "p2",
        "A good model is a bigger model, we argue, for good reasons and good results.",
        title="Scaling",
        authors=("Andreas Bigger", "Zinaida Good"),
        track="Deep Learning · Theory",
    ),
    Paper(
        "p3",
        "Position: benchmarks should report variance. We show why it matters.",
        title="Position: Report Variance",
        authors=("Ana Müller",),
        track="Deep Learning · Theory",
    ),
]


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.build(PAPERS)


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("Which papers use sparse autoencoders?", Asks.PAPERS),
        ("anything on conformal prediction?", Asks.PAPERS),
        ("How many papers study unlearning?", Asks.PAPERS),
        ("How much faster is FS-DFM?", Asks.DETAIL),
        ("How does TimeSAE compare to plain SAEs?", Asks.COMPARE),
        ("What do TimeSAE and the SAE probe study each find about features?", Asks.COMPARE),
        ("Why does TimeSAE use sparsity?", Asks.EXPLAIN),
        ("I study machine unlearning; which papers are worth reading?", Asks.RECOMMEND),
        ("our group builds touch sensors for robot hands. relevant papers?", Asks.RECOMMEND),
        ("I study grasping. Any benchmark I should look at?", Asks.RECOMMEND),
        ("Which papers are relevant to touch sensing?", Asks.PAPERS),
        ("Looking for the paper that sorts socks with a robot arm.", Asks.PAPERS),
        # Whether the collection holds such work: its papers answer, not a yes or a no.
        ("Is there a faster way to sort socks with a robot arm?", Asks.PAPERS),
        ("has anyone here tried touch sensors on robot hands?", Asks.PAPERS),
        ("Is TimeSAE faster than plain SAEs?", Asks.YESNO),
        ("sparse autoencoders for time series", Asks.TOPIC),
        ("recommender systems with graph models", Asks.TOPIC),
    ],
)
def test_what_a_question_asks_for(vocab: Vocabulary, question: str, asks: Asks) -> None:
    q = parse(question, vocab)
    assert q.asks is asks
    assert q.wants_all is (asks is Asks.PAPERS)


def test_authors_by_full_name_surname_and_the_collections_own_frequencies(
    vocab: Vocabulary,
) -> None:
    full = parse("papers by quentin bouniot", vocab)
    assert full.authors == ("quentin bouniot",) and full.metadata_only
    # A surname the abstracts never use, next to words that frame a question about papers.
    assert parse("which papers list bouniot as an author", vocab).authors == ("quentin bouniot",)
    assert parse("Bouniot's papers?", vocab).authors == ("quentin bouniot",)
    assert parse("bouniot", vocab).authors == ("quentin bouniot",)  # nothing but the name
    # One letter of the surname wrong or missing, after the first name.
    assert parse("papers by quentin bounot", vocab).authors == ("quentin bouniot",)
    assert parse("papers by quentin bouniots", vocab).authors == ("quentin bouniot",)
    # Surnames that are words the papers use are words, unless the question marks them.
    assert parse("is a bigger model a good model?", vocab).authors == ()
    assert parse("What did Bigger write?", vocab).authors == ("andreas bigger",)
    assert parse("papers by good", vocab).authors == ("zinaida good",)
    with_topic = parse("Bouniot's papers on time series", vocab)
    assert with_topic.authors and set(with_topic.topical) == {"time", "series"}
    assert parse("papers by Jane Nobody", vocab).unknown_author == "Jane Nobody"
    # A surname written with another given name is another person, in either order.
    other = parse("show me the work of Marta Bouniot", vocab)
    assert other.authors == () and other.unknown_author == "Marta Bouniot"
    assert parse("Is Bouniot Marta an author here?", vocab).unknown_author == "Bouniot Marta"
    assert parse("What did Bouniot Quentin write?", vocab).authors == ("quentin bouniot",)
    # Surnames in a list are several people, not one; each names their papers.
    assert parse("What does the paper by Oublal, Marta and Bouniot show?", vocab).authors
    both = parse("Compare Müller et al. with Bigger et al.", vocab).authors
    assert both == ("ana muller", "andreas bigger")
    # A surname stays an author's beside words a track's subarea shares but does not take.
    assert parse("Did Bigger et al. find theory beats practice?", vocab).authors
    assert parse("papers by ana muller", vocab).authors == ("ana muller",)  # accents folded
    # A one-letter surname is a name only with the rest of it.
    with_e = Vocabulary.build([*PAPERS, Paper("p4", "Flows.", authors=("Weinan E",))])
    assert parse("Is the E step of EM needed here?", with_e).authors == ()
    assert parse("papers by Weinan E", with_e).authors == ("weinan e",)


def test_tracks_need_a_cue_unless_nothing_else_is_asked(vocab: Vocabulary) -> None:
    assert parse("papers in the theory track", vocab).tracks == ("Deep Learning · Theory",)
    assert parse("theory", vocab).tracks == ("Deep Learning · Theory",)
    assert parse("Show what got in under Deep Learning · Theory", vocab).tracks == (
        "Deep Learning · Theory",
    )
    topical = parse("theory of sparse autoencoders", vocab)
    assert topical.tracks == () and "theory" in topical.topical
    # A subarea is cued as its track is, and an area named apart from one of its subareas
    # picks out that track alone.
    assert parse("the Theory sub-track", vocab).tracks == ("Deep Learning · Theory",)
    fair = Vocabulary.build(
        [*PAPERS, Paper("p4", "Fair ranking.", track="Social Aspects · Fairness")]
    )
    assert len(parse("the Social Aspects track", fair).tracks) == 2
    both = parse("the Social Aspects papers in Safety", fair)
    assert both.tracks == ("Social Aspects · Safety",) and both.topical == ()
    # "&" is "and"; a track asked for by a name no track has is an unknown track.
    assert parse("papers in social aspects & safety", vocab).tracks == ("Social Aspects · Safety",)
    missing = parse("list the Quantum Chemistry track", vocab)
    assert missing.unknown_track == "quantum chemistry" and missing.tracks == ()
    assert parse("which track is TimeSAE in?", vocab).unknown_track == ""
    assert parse("how does TimeSAE keep track of time?", vocab).unknown_track == ""
    assert parse("papers in the theory track", vocab).unknown_track == ""
    # "my area is ..." describes the asker: no track cue.
    assert parse("the Safety area", vocab).tracks == ("Social Aspects · Safety",)
    mine = parse("my area is safety of sparse autoencoders, what should I read?", vocab)
    assert mine.tracks == () and "safety" in mine.topical
    # A track's whole name is that track, though another has the same halves swapped.
    swapped = Vocabulary.build([*PAPERS, Paper("p5", "Bounds.", track="Theory · Deep Learning")])
    assert parse("Deep Learning · Theory, please", swapped).tracks == ("Deep Learning · Theory",)


def test_each_name_a_subarea_lists_names_its_track_where_a_track_is_meant() -> None:
    listed = "Social Aspects · Privacy, Robustness, and Fairness"
    vocab = Vocabulary.build([*PAPERS, Paper("p4", "Private training.", track=listed)])
    assert parse("the fairness track", vocab).tracks == (listed,)
    assert parse("papers filed under robustness", vocab).tracks == (listed,)
    # Without a cue the word is the question's topic.
    assert parse("robustness of sparse autoencoders", vocab).tracks == ()


def test_explicit_filters_are_not_searched_for_in_the_wording(vocab: Vocabulary) -> None:
    q = parse("time series", vocab, author="Bouniot", track="nowhere")
    assert q.explicit and q.authors == ("quentin bouniot",) and q.unknown_track == "nowhere"


def test_names_papers_and_unknown_names(vocab: Vocabulary) -> None:
    q = parse("What is TimeSAE?", vocab)
    assert q.named == ("p1",) and q.unknown_name == ""
    assert parse("Does any paper use AlphaFold?", vocab).unknown_name == "AlphaFold"
    # A short form the question spells out itself is known by its words.
    assert parse("Anything on TDA tools?", vocab).unknown_name == "TDA"
    q = parse("I do topological data analysis; anything on TDA tools?", vocab)
    assert q.unknown_name == q.unseen_name == ""
    # The field's common short forms name nothing in particular: no paper need write them.
    q = parse("As a PhD student on GANs, what should I read?", vocab)
    assert q.names == ("PhD", "GANs") and q.unknown_name == q.unseen_name == ""
    # A name is the same name with its accents or without.
    accented = Vocabulary.build([*PAPERS, Paper("p4", "Under Itô noise, Zorbé-Net holds.")])
    assert parse("Does Zorbe-Net hold under Ito noise?", accented).unknown_name == ""
    # Capitalised words in a row inside a sentence are a name, found as a phrase or not.
    q = parse("What does the Sparse Variance Forest do?", vocab)
    assert q.names == ("Sparse Variance Forest",) and q.unknown_name == "Sparse Variance Forest"
    assert parse("Which papers use Sparse Autoencoders?", vocab).unknown_name == ""
    # Not where a sentence opens with them, nor with a coined word, named in its own right.
    assert parse("Sparse Autoencoders for time series?", vocab).names == ()
    assert parse("Is a Zorb-Net Forest used?", vocab).names == ("Zorb-Net",)
    # A described compound whose parts papers write apart is known; a coined one is not.
    langs = Vocabulary.build([*PAPERS, Paper("p4", "Safety beyond English: non native text.")])
    assert parse("Anything on non-English safety?", langs).unknown_name == ""
    assert parse("What does Safety-Text do?", langs).unknown_name == "Safety-Text"


def test_a_track_or_author_in_quotes_is_the_filter_not_a_name(vocab: Vocabulary) -> None:
    q = parse("everything in the 'Deep Learning · Theory' track", vocab)
    assert q.tracks == ("Deep Learning · Theory",)
    assert q.names == () and q.unknown_name == "" and q.proper == ()
    q = parse('what has "Quentin Bouniot" written on "ZorbNet"?', vocab)
    assert q.authors == ("quentin bouniot",) and q.names == ("ZorbNet",)
    assert q.unknown_name == "ZorbNet"


def test_a_name_with_a_word_no_paper_writes_is_unseen(vocab: Vocabulary) -> None:
    spelled = Vocabulary.build([*PAPERS, Paper("p4", "We sample directed acyclic graphs.")])
    assert parse("Which papers generate DAGs?", spelled).unseen_name == ""
    assert parse("Which papers generate DAGs?", vocab).unseen_name == "DAGs"
    q = parse("How does Zorblax-SAE encode time series?", vocab)
    assert q.unknown_name == q.unseen_name == "Zorblax-SAE"
    # Every word of it is written somewhere, in some form: unknown, yet not unseen.
    q = parse("How does Sparse-Variance encode time series?", vocab)
    assert q.unknown_name == "Sparse-Variance" and q.unseen_name == ""
    assert parse("What is TimeSAE?", vocab).unseen_name == ""


def test_a_request_for_reading_advice_does_not_require_each_topic_it_spells(
    vocab: Vocabulary,
) -> None:
    assert parse("Which papers study graph colouring?", vocab).spells_topics
    advice = parse("I work on graph colouring; which papers should I read?", vocab)
    assert advice.asks is Asks.RECOMMEND and not advice.spells_topics


def test_the_words_an_asker_describes_themselves_by_are_not_the_topic(
    vocab: Vocabulary,
) -> None:
    assert parse("my research is on graph colouring, anything for me?", vocab).topical == (
        "graph",
        "colouring",
    )
    assert parse("I build SAT solvers; what should I read?", vocab).topical == ("sat", "solvers")
    assert parse("I'm new to graph colouring", vocab).topical == ("graph", "colouring")
    # Asking about a doing is not describing oneself.
    assert parse("can we build SAT solvers?", vocab).topical == ("build", "sat", "solvers")
    assert parse("which papers deal with graph colouring?", vocab).topical == ("graph", "colouring")
    # Elsewhere such words are the topic's own ("papers that build ..." frames it: what the
    # papers do, test_the_verb_after_papers_frames_the_question).
    assert parse("solvers that build SAT models", vocab).topical == (
        "solvers",
        "build",
        "sat",
        "models",
    )


def test_topics_join_except_in_reading_advice_and_comparisons(vocab: Vocabulary) -> None:
    assert parse("graph colouring with quantum annealers", vocab).joins_topics
    assert parse("Which papers study graph colouring on GPUs?", vocab).joins_topics
    assert not parse("I do graph colouring and SAT; what should I read?", vocab).joins_topics
    assert not parse("How does graph colouring compare with SAT solving?", vocab).joins_topics


def test_reading_advice_lists_the_parts_of_a_field_as_alternatives(vocab: Vocabulary) -> None:
    advice = parse("I do graph colouring and SAT; what should I read?", vocab)
    assert advice.topic_text == "I do graph colouring or SAT; what should I read?"
    topic = parse("Which papers study graph colouring and SAT?", vocab)
    assert topic.topic_text == topic.text


def test_a_model_family_names_the_papers_that_write_its_versions() -> None:
    versions = Paper("p6", "We fine-tune Falcon2-11B and FalconMamba-7b on legal text.")
    plain = Paper("p7", "A Falcon model compresses its cache.")
    vocab = Vocabulary.build([*PAPERS, versions, plain])
    assert set(parse("Which papers run Falcon models?", vocab).named) == {"p6", "p7"}
    family = parse("Any results on Falcon-family models?", vocab)
    assert set(family.named) == {"p6", "p7"} and family.proper == ("Falcon",)
    # A version is its own name: it does not name the family's other papers.
    assert parse("Does any paper use Falcon2-11B?", vocab).named == ("p6",)
    # Nor does a compound that papers write whole.
    tuned = Paper("p8", "Our Falcon-tuned adapters transfer across tasks.")
    vocab = Vocabulary.build([*PAPERS, versions, plain, tuned])
    assert parse("Do Falcon-tuned adapters transfer?", vocab).named == ("p8",)


def test_a_word_written_as_a_name_names_the_few_papers_that_write_it_so() -> None:
    llama = Paper("p5", "We fine-tune Llama checkpoints on grade-school math.")
    vocab = Vocabulary.build([*PAPERS, llama])
    assert parse("Do any papers evaluate Llama checkpoints?", vocab).named == ("p5",)
    # Not written as a name, or opening the sentence: a word.
    assert parse("do any papers evaluate llama checkpoints?", vocab).named == ()
    common = [Paper(f"t{i}", f"A Transformer for task {i}.") for i in range(5)]
    vocab = Vocabulary.build([*PAPERS, *common])
    assert parse("Which papers train a Transformer?", vocab).named == ()


def test_words_written_as_names_inside_a_sentence(vocab: Vocabulary) -> None:
    q = parse("Does TimeSAE beat Baseline models on Atari?", vocab)
    assert q.proper == ("Baseline", "Atari") and q.names == ("TimeSAE",)


def test_a_paper_is_named_by_its_own_name_or_by_a_word_it_capitalises() -> None:
    nordic = Paper("p4", "We study Nordic dialects in speech recognition.")
    vocab = Vocabulary.build([*PAPERS, nordic])
    q = parse("How do speech models handle Nordic and Baltic dialects?", vocab)
    assert q.named == ("p4",) and q.proper == ("Nordic", "Baltic")
    assert vocab.naming(q.proper, q.named) == {"Nordic"}
    assert vocab.naming(q.proper, q.named, own=True) == set()
    assert vocab.naming(["TimeSAE", "Nordic"], ["p1", "p4"], own=True) == {"TimeSAE"}
    assert q.own_named == ()
    both = parse("Does TimeSAE handle Nordic dialects?", vocab)
    assert set(both.named) == {"p1", "p4"} and both.own_named == ("p1",)
    # The words a paper's short name stands for name it as its own name does, and only it.
    rai = Paper("p6", "We propose Risk Nordic Injection (RNI), a defence.", names=("RNI",))
    vocab = Vocabulary.build([*PAPERS, nordic, rai])
    q = parse("Which models is Risk Nordic Injection tested on?", vocab)
    assert q.named == ("p6",) and q.own_named == ("p6",)


def test_only_a_particular_name_surely_names_a_paper() -> None:
    papers = [
        *PAPERS,
        Paper("m1", "Sparse Mixture-of-Experts layers route tokens to a mixture of experts."),
        Paper("m2", "We tune Qwen2.5-7B on Swahili questions from VoxBank."),
        Paper("m3", "Tagging Swahili and Yoruba text, mixture weights learned by experts."),
    ]
    vocab = Vocabulary.build(papers)
    # Capitalised words other texts write too (in lowercase, or as ordinary names) name the
    # papers that write them, but not surely.
    q = parse("Which paper prunes a Mixture-of-Experts model?", vocab)
    assert q.named == ("m1",) and q.surely_named == ()
    q = parse("Which papers translate Swahili poetry?", vocab)
    assert set(q.named) == {"m2", "m3"} and q.surely_named == ()
    # A coined shape with a part of its own, a model family a coined name carries, a quote.
    assert parse("Which papers evaluate on VoxBank?", vocab).surely_named == ("m2",)
    assert parse("Which papers fine-tune Qwen models?", vocab).surely_named == ("m2",)
    assert parse('What is "mixture weights"?', vocab).surely_named == ("m3",)
    assert parse("What does TimeSAE explain?", vocab).surely_named == ("p1",)


def test_the_sentences_in_which_a_paper_speaks_of_its_own_work() -> None:
    zorp = Paper(
        "z1",
        "Most methods fine-tune on retain data. We propose Zorp. Zorp needs no retain data. "
        "This paper also ships code.",
        names=("Zorp",),
    )
    plain = Paper("z2", "Methods fine-tune. Retain data helps.")
    vocab = Vocabulary.build([zorp, plain])
    assert vocab.about_itself("z1") == (
        "We propose Zorp. Zorp needs no retain data. This paper also ships code."
    )
    assert vocab.about_itself("z2") == "Methods fine-tune. Retain data helps."


def test_a_paper_described_instead_of_named(vocab: Vocabulary) -> None:
    assert parse("In the clock series paper, what is X?", vocab).described == "clock series"
    # Its subject comes before "paper"; one word fits too many papers.
    assert parse("What did the study on clocks find?", vocab).described == ""
    assert parse("In the theory paper, what is X?", vocab).described == ""
    assert parse("Which papers study clocks?", vocab).described == ""


def test_the_verb_after_papers_frames_the_question(vocab: Vocabulary) -> None:
    assert parse("Which papers lean on time series?", vocab).topical == ("time", "series")
    assert parse("papers that lean on time series", vocab).topical == ("time", "series")
    # Not a word after a bare "papers", which may start the topic.
    assert parse("papers on time series", vocab).topical == ("time", "series")
    assert parse("papers time series?", vocab).topical == ("time", "series")


def test_what_result_a_question_asks_the_value_of(vocab: Vocabulary) -> None:
    assert parse("What error rate does TimeSAE reach?", vocab).measured == ("error", "rate")
    assert parse("What does TimeSAE do?", vocab).measured == ()
    # Whatever stands between: a figure ("the 4.5x faster one") is no end of the clause.
    q = parse("What SSIM does the sampler with the 4.5x speedup report?", vocab)
    assert q.measured == ("SSIM",)
    assert parse("What purpose does sparsity serve in TimeSAE?", vocab).measured == ()
    assert parse("What is TimeSAE?", vocab).measured == ()
    # Asked with a relative clause.
    q = parse("What's the exact recall that TimeSAE reaches on FooBench?", vocab)
    assert q.measured == ("exact", "recall")
    # "How much ...": the words after it, but the paper's own name.
    q = parse("How much does TimeSAE raise the AUROC on clocks?", vocab)
    assert q.measured == ("AUROC",)
    assert parse("By how many times does TimeSAE cut its cost?", vocab).measured == ()
    # Not a method's hyphenated name or a common short form.
    assert parse("How much faster is Zorp-X than LLMs?", vocab).measured == ()
    assert parse("How much of it is NOT noise?", vocab).measured == ()
    assert parse("How much does Zorp cut the FID?", vocab).measured == ("FID",)
    assert parse("How fast is TimeSAE?", vocab).measured == ()


def test_a_quoted_phrase_names_the_papers_that_use_it(vocab: Vocabulary) -> None:
    q = parse("What is meant by 'good reasons' there?", vocab)
    assert q.named == ("p2",) and q.unknown_name == ""
    assert parse('Who coined "Silent Drift"?', vocab).unknown_name == "Silent Drift"
    # An apostrophe is no quote.
    assert parse("What is Bouniot's 'sparse' view?", vocab).names == ("sparse",)
    # Plain words in quotes may be the asker's own, set apart or recalled loosely: no sign
    # that nothing indexed is about the question; the search and topic check judge them.
    q = parse("the paper saying scores are 'quietly wrong' somehow?", vocab)
    assert q.names == ("quietly wrong",) and q.unknown_name == q.unseen_name == ""
    assert parse('Who coined "Zorblax drift"?', vocab).unseen_name == "Zorblax drift"


def test_full_text_details_and_why_questions(vocab: Vocabulary) -> None:
    assert parse("What batch size did TimeSAE use?", vocab).full_text_detail == "batch size"
    assert parse("Why does the batch size matter?", vocab).full_text_detail == ""
    # Architecture hyperparameters too.
    q = parse("How many attention heads, and what hidden dimension, does TimeSAE have?", vocab)
    assert q.full_text_detail == "hidden dimension"
    # Where its authors work and how it was presented: on the paper, not in its listing.
    q = parse("Which university are the TimeSAE authors affiliated with?", vocab)
    assert q.full_text_detail == "university"
    assert parse("Was TimeSAE a spotlight?", vocab).full_text_detail == "spotlight"


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Which LLM does Zorp call?", "LLM"),
        ("what are the three reasoning benchmarks Zorp was run on", "benchmarks"),
        ("Which open-source libraries does it build on?", "libraries"),
        ("What is the ZorpBench benchmark?", ""),  # what it is, not which one
        ("What does Zorp do for LLM safety?", ""),
        ("Which papers study models of language?", ""),
        # "which ones" asks for the kind named before it.
        ("Zorp ran on four LLMs - which ones?", "LLMs"),
        ("Zorp helps - which ones?", ""),
        ("What are the names of the four games Zorp plays?", "games"),
        ("What's the tokenizer behind Zorp?", "tokenizer"),
        # Things of any kind, asked for by their names; a kind written with a possessive.
        ("What were the names of the two forgetting tasks Zorp covers?", "tasks"),
        ("The Zorp paper: which model's activations did they use?", "model's"),
        # A short form for a plain thing modifies the kind; a coined name is asked about.
        ("Zorp trains with which RL algorithm?", "algorithm"),
        ("What is the ZorpRL algorithm?", ""),
        ("What is the Decomposed Data Engine in Zorp?", ""),  # a name, capitalised
        ("Which base LLM is Zorp built on?", "LLM"),
        # A kind before another modifies it.
        ("Which language model backbone is Zorp built on?", "backbone"),
        ("Which LLM benchmarks does Zorp report?", "benchmarks"),
        # A request to list them asks the same.
        ("List the 12 games Zorp ships with.", "games"),
        ("Name all the benchmarks Zorp reports.", "benchmarks"),
        ("List the papers on Zorp.", ""),
    ],
)
def test_which_kind_of_named_thing_a_question_asks_for(
    vocab: Vocabulary, question: str, kind: str
) -> None:
    assert parse(question, vocab).which == kind


def test_how_many_of_a_kind_a_which_question_asks_for(vocab: Vocabulary) -> None:
    assert parse("Which five games does Zorp play?", vocab).which_number == 5
    assert parse("List the 12 video games in Zorp.", vocab).which_number == 12
    assert parse("Which games does Zorp play?", vocab).which_number is None


def test_the_names_an_abstract_writes_for_things_other_than_itself() -> None:
    plain = Paper(
        "z1",
        "We introduce Zorp (Zero-order Routing Policy), which guides large language models "
        "(LLMs) with chain-of-thought (CoT) hints. Zorp-based agents beat LLM-like baselines "
        "by 3x on 7B-parameter models. See https://github.com/Acme/Zorp and **Z**orp.",
        title="Zorp: Routing Hints",
        names=("Zorp",),
    )
    named = Paper(
        "z2",
        # "Hints": capitalised, but the collection writes it in lowercase too.
        "We evaluate with Qwen3-8B on the FooBench benchmark, in English and Klingon, where "
        "Hints help.",
        title="Tools",
    )
    generic = Paper(
        "z3",
        # Short forms the field uses for plain things (rag/words/generic_acronyms.txt), and a
        # paper's own name with a possessive, name nothing else.
        "Its feed-forward networks (FFN) read AI-generated text, tuned with DPO; Zorq’s layers.",
        title="Zorq",
        names=("Zorq",),
    )
    vocab = Vocabulary.build([plain, named, generic])
    assert vocab.names_written("z3") == []
    assert vocab.names_written("z1") == []
    assert vocab.names_written("z2") == ["Qwen3-8B", "FooBench", "English", "Klingon"]
    # Asked for one kind of thing, a name the abstract labels as another kind is no answer.
    assert vocab.names_written("z2", "LLM") == ["Qwen3-8B", "English", "Klingon"]
    # A plural short form names a class of things, not one of them.
    classes = Paper(
        "z9",
        "Diffusion Language Models (DLMs) are fast; so diffusion language DLMs help.",
        title="Q",
    )
    assert Vocabulary.build([classes]).names_written("z9") == []
    # A name carrying a parameter count is a model's, not a benchmark's.
    assert vocab.names_written("z2", "benchmarks") == ["FooBench", "English", "Klingon"]
    eponym = Paper(
        "z6",
        "Our Zorm (Mixture of ZoRA) reaches the Bayes risk, is Bayes-optimal, lets Qwen3-1.5B "
        "beat Qwen3-8B and composes ZoRAs.",
        title="E",
        names=("Zorm",),
    )
    vocab = Vocabulary.build([eponym])
    # An eponym modifying a word names no thing; the words a paper's name stands for, in
    # the plural too, are its own.
    assert vocab.names_written("z6") == ["Qwen3-1.5B", "Qwen3-8B"]
    assert vocab.names_written("z6", "benchmark") == []
    # A well-known name (rag/words/well_known.txt) answers "which algorithm"; a short form
    # for a plain thing ("CoT") does not.
    ppo = Paper("z7", "Plain methods like PPO beat CoT prompting with DPO.", title="G")
    vocab = Vocabulary.build([ppo])
    assert vocab.names_written("z7", "algorithm") == ["PPO"]
    listed = Paper(
        "z4", "Robust on VQA benchmarks (MMFoo, MMBar and RealBar) by Zorb-7.", title="R"
    )
    vocab = Vocabulary.build([listed])
    assert vocab.names_written("z4", "MLLM") == ["Zorb-7"]
    assert vocab.names_written("z4", "datasets") == ["MMFoo", "MMBar", "RealBar", "Zorb-7"]
    pile = Paper("z5", "Trained on the Zorpile corpus, tested with the Zorbot model.", title="P")
    vocab = Vocabulary.build([pile])
    assert vocab.names_written("z5", "corpus") == ["Zorpile"]
    assert vocab.names_written("z5", "LLM") == ["Zorbot"]
    # A name nothing next to it labels takes the kinds its sentence writes unattached; a
    # kind capitalised in a phrase ("Data Engine") names nothing.
    motion = Paper(
        "z8",
        "We build the Decomposed Data Engine for our data. Tests across benchmark datasets "
        "show gains on HumanML3D and KIT-ML.",
        title="M",
    )
    vocab = Vocabulary.build([motion])
    assert vocab.names_written("z8") == ["Decomposed", "HumanML3D", "KIT-ML"]
    assert vocab.names_written("z8", "backbone") == []
    assert vocab.names_written("z8", "engine") == ["Decomposed"]
    assert vocab.names_written("z8", "benchmark") == ["HumanML3D", "KIT-ML"]


def test_what_a_how_many_question_counts(vocab: Vocabulary) -> None:
    assert parse("How many rollout workers did it use?", vocab).counted == ("rollout", "workers")
    assert parse("How many times faster is it?", vocab).counted == ()
    assert parse("how many of the runs failed?", vocab).counted == ()
    # What is counted is plural: its first plural word ends the phrase.
    assert parse("How many rollouts went into it?", vocab).counted == ("rollouts",)
    assert parse("How many analysis passes ran?", vocab).counted == ("analysis", "passes")
    # Asked as "the number of" or as a count.
    assert parse("What is the largest number of nodes it builds?", vocab).counted == ("nodes",)
    assert parse("number of training runs in Zorp?", vocab).counted == ("training", "runs")
    assert parse("What's the parameter count of Zorp?", vocab).counted == ("parameters",)
    # Not a number a description speaks of in passing, nor the verb.
    q = "a model that is consistent whatever number of steps you allow"
    assert parse(q, vocab).counted == ()
    assert parse("Do rare phrases count as creative?", vocab).counted == ()


def test_follow_ups() -> None:
    f = follow_up("and which of those use diffusion?")
    assert f.of_those and f.rest == "use diffusion"
    assert follow_up("how fast is it?").about_it
    assert looks_like_follow_up("and the second one?")
    assert not looks_like_follow_up("Which papers use diffusion?")
    assert replace_it("and how fast is it?", "FS-DFM") == "how fast is FS-DFM?"


def test_the_retriever_hands_its_reading_to_later_stages(fake_seed: Settings) -> None:
    from rag.index import PaperIndex

    r = Retriever(PaperIndex(fake_seed))
    result = r.retrieve("Which papers use sparse autoencoders?", k=2)
    assert result.parsed is not None and result.parsed.asks is Asks.PAPERS
    # Asked for all of them: every paper that says "sparse autoencoder", not a top-2 sample.
    saying = {
        p.id for p in r.papers.values() if "sparse autoencoder" in f"{p.title} {p.abstract}".lower()
    }
    got = {h.paper.id for h in result.hits}
    assert saying and saying <= got and result.total == len(saying)
    assert result.to_dict()["total"] == len(saying)


def test_the_page_says_how_many_papers_match_a_question_for_all_of_them() -> None:
    from rag.answer import Answer, Source
    from ui.app import sources_html

    answer = Answer(question="Which papers use sparse autoencoders?", asks=Asks.PAPERS)
    answer.sources = [Source(1, PAPERS[0], 1.0, "")]
    assert "sources-count" not in sources_html(answer)
    answer.total = 46
    assert "46 indexed papers mention the topic" in sources_html(answer)
