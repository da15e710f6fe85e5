"""Reading a question once (rag.query): names resolved against the collection, and what it
asks for from the fitted intent classifier (rag.intent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag import intent
from rag.corpus import Paper
from rag.intent import IntentModel
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


INTENTS = [
    ("Which papers here use graph neural networks?", Asks.PAPERS),
    ("anything on reward hacking?", Asks.PAPERS),
    ("Is there work on watermarking generated images?", Asks.PAPERS),
    ("I work on tactile sensing for robot hands; what should I read?", Asks.RECOMMEND),
    ("How many GPUs did they train on?", Asks.DETAIL),
    ("By how much does the new sampler cut the number of steps?", Asks.DETAIL),
    ("Does the proposed probe need labelled data?", Asks.YESNO),
    ("How do the two merging methods differ in what they average?", Asks.COMPARE),
    ("Why does the attention sink appear in the first token?", Asks.EXPLAIN),
    ("What is the main idea behind the router?", Asks.EXPLAIN),
]


@pytest.mark.parametrize(("question", "asks"), INTENTS)
def test_what_a_question_asks_for_comes_from_the_fitted_classifier(
    vocab: Vocabulary, question: str, asks: Asks
) -> None:
    q = parse(question, vocab)
    assert q.asks is asks
    assert q.wants_all is (asks is Asks.PAPERS)


def test_the_shipped_intent_classifier_is_fitted_on_every_intent_and_says_how_well() -> None:
    model = intent.model()
    assert set(model.classes) == {a.value for a in Asks}
    # Its leave-one-set-out accuracy on the development questions, recorded by the fit.
    assert model.info["metrics"]["leave_one_set_out_accuracy"] >= 0.9
    p = model.proba("Which papers use diffusion models?")
    assert abs(sum(p.values()) - 1) < 1e-9


def test_an_intent_classifier_fits_round_trips_and_reads_unseen_words(tmp_path: Path) -> None:
    questions = [
        *(f"which papers study {t}?" for t in ("graphs", "bandits", "proteins", "audio")),
        *(f"how many {t} does it use?" for t in ("layers", "heads", "steps", "tokens")),
    ]
    labels = ["papers"] * 4 + ["detail"] * 4
    fitted = IntentModel.fit(questions, labels)
    fitted.save(tmp_path / "intent.json")
    again = IntentModel.from_json(json.loads((tmp_path / "intent.json").read_text()))
    for q in ("which papers study robots?", "how many experts does it use?"):
        assert again.predict_label(q) == fitted.predict_label(q)
    assert again.predict_label("which papers study robots?") == "papers"
    assert again.predict_label("how many experts does it use?") == "detail"


def test_authors_by_full_name_surname_and_the_collections_own_frequencies(
    vocab: Vocabulary,
) -> None:
    full = parse("papers by quentin bouniot", vocab)
    # The name's words and the cue that made it a name are not what the question is about.
    assert full.authors == ("quentin bouniot",)
    assert full.meta_words == ("quentin", "bouniot", "papers")
    # A surname the abstracts never use.
    assert parse("which papers list bouniot as an author", vocab).authors == ("quentin bouniot",)
    assert parse("Bouniot's papers?", vocab).authors == ("quentin bouniot",)
    assert parse("bouniot", vocab).authors == ("quentin bouniot",)
    # One letter of the surname wrong or missing, after the first name.
    assert parse("papers by quentin bounot", vocab).authors == ("quentin bouniot",)
    assert parse("papers by quentin bouniots", vocab).authors == ("quentin bouniot",)
    # Surnames that are words the papers use are words, unless the question marks them.
    assert parse("is a bigger model a good model?", vocab).authors == ()
    assert parse("What did Bigger write?", vocab).authors == ("andreas bigger",)
    assert parse("papers by good", vocab).authors == ("zinaida good",)
    with_topic = parse("Bouniot's papers on time series", vocab)
    assert with_topic.authors and "time" not in with_topic.meta_words
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
    # A surname that is a function word is a name where the question capitalises it.
    with_he = Vocabulary.build([*PAPERS, Paper("p5", "Graphs.", authors=("Tao He",))])
    assert parse("Which papers did He et al. write?", with_he).authors == ("tao he",)
    assert parse("what did he write about graphs?", with_he).authors == ()
    assert parse("Which Papers Did He Write On Graphs?", with_he).authors == ()  # title case
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
    assert parse("theory of sparse autoencoders", vocab).tracks == ()
    # A subarea is cued as its track is, and an area named apart from one of its subareas
    # picks out that track alone.
    assert parse("the Theory sub-track", vocab).tracks == ("Deep Learning · Theory",)
    fair = Vocabulary.build(
        [*PAPERS, Paper("p4", "Fair ranking.", track="Social Aspects · Fairness")]
    )
    assert len(parse("the Social Aspects track", fair).tracks) == 2
    both = parse("the Social Aspects papers in Safety", fair)
    assert both.tracks == ("Social Aspects · Safety",)
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
    assert mine.tracks == ()
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


def test_a_paper_is_named_by_its_own_name_a_title_head_or_a_quoted_phrase(
    vocab: Vocabulary,
) -> None:
    assert parse("What is TimeSAE?", vocab).named == ("p1",)
    assert parse("How does TimeSAE's encoder work?", vocab).named == ("p1",)  # "X's" is X
    assert parse("What is meant by 'good reasons' there?", vocab).named == ("p2",)
    assert parse("Does any paper use AlphaFold?", vocab).named == ()
    # A name that is an ordinary word names its paper only as the paper spells it.
    guidance = Paper(
        "g1", "Guidance: steer models. Guidance helps; guidance works.", title="Guidance: Steering"
    )
    plain = [Paper(f"w{i}", f"Our guidance method {i} uses guidance.") for i in range(3)]
    vocab2 = Vocabulary.build([*PAPERS, guidance, *plain])
    assert parse("What does Guidance do?", vocab2).named == ("g1",)
    assert parse("which papers give guidance to models?", vocab2).named == ()
    # A phrase that many papers write names none of them.
    common = [Paper(f"t{i}", f"A sparse autoencoder for task {i}.") for i in range(5)]
    assert parse("what is 'sparse autoencoder'?", Vocabulary.build(common)).named == ()


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
    assert result.to_dict()["asks"] == "papers"


def test_the_page_says_how_many_papers_answer_a_question_for_all_of_them() -> None:
    from rag.answer import Answer, Source
    from ui.app import sources_html

    answer = Answer(question="Which papers use sparse autoencoders?", asks=Asks.PAPERS)
    answer.sources = [Source(1, PAPERS[0], 1.0, "")]
    assert "sources-count" not in sources_html(answer)
    answer.total = 46
    assert "46 indexed papers" in sources_html(answer)
