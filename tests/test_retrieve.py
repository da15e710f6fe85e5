"""Retrieval: candidates by hybrid search, weighed by the fitted relevance model; author and
track lists from the metadata; the plain legs as baselines."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from rag.index import VECTORS_FILE, PaperIndex
from rag.retrieve import Retriever
from rag.settings import Settings

from .conftest import CORPUS, FAKE_ENV, call_cli
from .stand_ins import Judged


@pytest.fixture
def retriever(fake_seed: Settings) -> Retriever:
    """Metadata, names and filters: the hashing embedder is enough."""
    return Retriever(PaperIndex(fake_seed))


@pytest.fixture
def real_retriever(seed_readonly: Settings) -> Retriever:
    """What depends on the real model's sense of meaning, and the shipped relevance model."""
    return Retriever(PaperIndex(seed_readonly))


def names(result) -> list[str]:
    return [h.paper.display_name for h in result.hits]


def test_paraphrase_finds_the_paper(real_retriever: Retriever) -> None:
    r = real_retriever.retrieve(
        "How can black-box predictors of temporal signals be explained "
        "beyond the data they were trained on?"
    )
    assert not r.abstained and "TimeSAE" in names(r)[:3]
    assert {"dense"} <= set(r.hits[0].matched)


def test_method_name_comes_first(retriever: Retriever) -> None:
    r = retriever.retrieve("What is SOTAlign?")
    assert names(r)[0] == "SOTAlign" and "name" in r.hits[0].matched


def test_results_are_papers_not_chunks(real_retriever: Retriever) -> None:
    r = real_retriever.retrieve("sparse autoencoders", k=10)
    ids = [h.paper.id for h in r.hits]
    assert ids and len(ids) == len(set(ids))
    assert all(h.passage for h in r.hits)


def test_author_questions_list_every_paper(retriever: Retriever) -> None:
    r = retriever.retrieve("What has Quentin Bouniot worked on here?")
    assert r.mode == "author" and len(r.hits) == 4
    assert all("Quentin Bouniot" in h.paper.authors for h in r.hits)
    assert all(h.matched == ("metadata",) for h in r.hits)
    accentless = retriever.retrieve("papers by scholkopf")
    assert [h.paper.first_author for h in accentless.hits] == ["Ruta Binkyte"]
    assert accentless.authors == ["Bernhard Schölkopf"]
    surname = retriever.retrieve("Which papers list Kim as an author?")
    assert len(surname.hits) == 7
    possessive = retriever.retrieve("What are Bouniot's papers?")
    assert possessive.mode == "author" and len(possessive.hits) == 4


def test_a_comparison_may_name_one_side_by_authors_and_the_other_by_name(
    retriever: Retriever,
) -> None:
    r = retriever.retrieve("Compare the work of Oublal et al. with Orak: what does each explain?")
    assert not r.abstained and {"TimeSAE", "Orak"} <= set(names(r))


def test_unknown_author_abstains(retriever: Retriever) -> None:
    r = retriever.retrieve("papers by Geoffrey Hinton")
    assert r.abstained and r.hits == [] and "Geoffrey Hinton" in r.reason


def test_track_questions_list_every_paper(retriever: Retriever) -> None:
    r = retriever.retrieve("papers in Social Aspects · Safety")
    assert r.mode == "track" and r.tracks == ["Social Aspects · Safety"] and len(r.hits) == 4
    theory = retriever.retrieve("theory papers")
    assert len(theory.hits) == 4
    assert {h.paper.track for h in theory.hits} == {
        "Theory · Everything Else",
        "Deep Learning · Theory",
    }
    fuzzy = retriever.retrieve("the safety track")
    assert fuzzy.tracks == ["Social Aspects · Safety"]
    # A track no paper is filed under is said to be missing, not searched for as a topic.
    none = retriever.retrieve("anything in the Quantum Chemistry track?")
    assert none.abstained and none.reason == "no indexed track is called 'quantum chemistry'"
    position = retriever.retrieve("Which of these are position papers?")
    assert position.mode == "track" and len(position.hits) == 6
    assert all("position paper" in h.paper.abstract.lower() for h in position.hits)
    about = retriever.retrieve("position papers about the welfare of AI models")
    assert {h.paper.id for h in about.hits} <= {h.paper.id for h in position.hits}
    contracted = retriever.retrieve("What's in the Language, Speech and Dialog track?")
    assert contracted.mode == "track" and len(contracted.hits) == 2


def test_explicit_filters(retriever: Retriever) -> None:
    r = retriever.retrieve("sparse autoencoders", author="Akata", k=10)
    assert r.hits and all(any("Akata" in a for a in h.paper.authors) for h in r.hits)
    assert names(r)[0] == "TimeSAE"
    listed = retriever.retrieve("", track="Deep Learning · Large Language Models")
    assert len(listed.hits) == 9
    none = retriever.retrieve("anything", author="Nobody Atall")
    assert none.abstained


def test_a_question_nothing_answers_is_declined_with_the_closest_papers(
    real_retriever: Retriever,
) -> None:
    r = real_retriever.retrieve("trajectory prediction for autonomous driving")
    assert r.abstained and 0 < len(r.hits) <= 3
    # In plain words, no numbers: what the closest papers never mention.
    assert r.reason.startswith("none of the indexed papers answers this")
    assert not any(c.isdigit() for c in r.reason)
    assert r.signals["relevance"] < r.signals["abstain_below"]


def test_every_decision_reads_the_fitted_model(real_retriever: Retriever) -> None:
    model = real_retriever.relevance
    assert model is not None and model.source is not None
    r = real_retriever.retrieve("How much faster is FS-DFM?")
    assert not r.abstained and names(r)[0] == "FS-DFM"
    assert r.signals["relevance"] >= model.abstain_below
    # What the answer reads is what the model judges relevant, most relevant first.
    assert [h.score for h in r.hits] == sorted((h.score for h in r.hits), reverse=True)
    assert all(h.score >= model.keeps("detail") for h in r.hits[1:])


def test_a_list_holds_every_paper_judged_relevant_with_the_count(
    real_retriever: Retriever,
) -> None:
    r = real_retriever.retrieve("Which papers use sparse autoencoders?")
    assert r.total == len(r.hits) >= 3
    says = {
        p.id
        for p in real_retriever.papers.values()
        if "sparse autoencoder" in f"{p.title} {p.abstract}".lower()
    }
    # Every paper about the topic in the topic's words is listed; what else is listed is
    # judged relevant too.
    assert says <= {h.paper.id for h in r.hits}
    assert all("relevant" in h.matched for h in r.hits)
    assert r.topics == ["sparse autoencoders"]


def test_an_authors_papers_are_weighed_against_the_topic_asked_of_them(
    real_retriever: Retriever,
) -> None:
    r = real_retriever.retrieve("Did Zeynep Akata write anything on graph neural networks?")
    assert r.abstained and "Zeynep Akata's papers" in r.reason
    assert r.missing and not {"zeynep", "akata"} & set(r.missing)
    assert all(any("Akata" in a for a in h.paper.authors) for h in r.hits)
    r = real_retriever.retrieve("Which of Xiaojun Quan's papers merges models?")
    assert not r.abstained and names(r)[0] == "HARC"
    r = real_retriever.retrieve("Which of Zeynep Akata's papers use sparse autoencoders?")
    assert not r.abstained and "TimeSAE" in names(r)
    # The list itself, with no topic, comes from the metadata.
    r = real_retriever.retrieve("What has Zeynep Akata worked on?")
    assert r.mode == "author" and len(r.hits) == 4
    r = real_retriever.retrieve("What has Tom Sander published?")  # "published" is no topic
    assert r.mode == "author" and len(r.hits) == 2


def test_an_authors_names_are_not_part_of_the_topic_asked_of_their_papers(
    retriever: Retriever,
) -> None:
    # None of Smith's abstracts writes "Smith": among their papers the name tells none apart,
    # and a question declined there is not for want of it.
    ev = retriever.evidence(
        "Which of Zeynep Akata's papers use graph neural networks?", topical=True
    )
    assert ev is not None and ev.papers == 4
    assert {"graph", "neural", "networks"} <= set(ev.words)
    assert not {"zeynep", "akata", "akata's"} & set(ev.words)
    track = retriever.evidence("Safety track papers on watermarking", topical=True)
    assert track is not None and "safety" not in track.words and "watermarking" in track.words
    # A question of nothing but names asks for the list: no word is left to weigh as a topic.
    assert retriever.topic_terms(retriever.parse("computer vision track")) == []
    assert retriever.topic_terms(retriever.parse("Zeynep Akata")) == []


def test_a_stand_in_model_decides_what_is_declined_and_listed(retriever: Retriever) -> None:
    retriever.relevance = Judged({"spars", "autoencod"})
    listed = retriever.retrieve("Which papers use sparse autoencoders?")
    assert not listed.abstained and listed.total == len(listed.hits) >= 3
    assert all(
        "sparse" in h.paper.abstract.lower() and "autoencoder" in h.paper.abstract.lower()
        for h in listed.hits
    )
    declined = retriever.retrieve("Which papers forecast the weather?")
    assert declined.abstained and declined.hits and "weather" in declined.missing
    # A collection smaller than any the model was fitted on is not declined from.
    retriever.relevance.info = {"fitted_on": {"papers": {"lab": 100, "conference": 6000}}}
    assert not retriever.retrieve("Which papers forecast the weather?").abstained
    retriever.relevance.info = {"fitted_on": {"papers": {"seed": 60}}}
    assert retriever.retrieve("Which papers forecast the weather?").abstained
    # Turned off in the settings, nothing is declined.
    retriever.index.settings.search.decline = False
    assert not retriever.retrieve("Which papers forecast the weather?").abstained


def test_without_a_fitted_model_search_ranks_and_says_so(fake_seed: Settings) -> None:
    r = Retriever(PaperIndex(fake_seed))
    assert r.relevance is None and "python -m evals.calibrate" in r.warning
    found = r.retrieve("weather forecasting with deep learning")
    assert not found.abstained and found.signals["calibrated"] == 0.0
    env = {"RAG_HOME": str(fake_seed.home), **FAKE_ENV}
    done = call_cli("rag.search", "weather forecasting with deep learning", env=env)
    assert done.returncode == 0 and "no relevance model" in done.stderr


def test_the_collections_vectors_are_saved_with_bm25_in_step_with_chroma(
    fake_seed_copy: Settings,
) -> None:
    index = PaperIndex(fake_seed_copy)
    state = json.loads((index.bm25_dir / "state.json").read_text())
    assert state["count"] == index.count_chunks() >= 60 and VECTORS_FILE in state["files"]
    snapshot = index.snapshot()
    assert snapshot.vectors.shape[0] == len(snapshot.vector_ids) == index.count_chunks()
    assert np.allclose(np.linalg.norm(snapshot.vectors, axis=1), 1.0, atol=1e-5)
    # A missing BM25 folder is rebuilt by the next ingest, which embeds nothing.
    shutil.rmtree(index.bm25_dir)
    summary = index.ingest([CORPUS], progress=False)
    assert summary.chunks_embedded == 0 and (index.bm25_dir / VECTORS_FILE).exists()
    # Without its files, search still works: everything is read from the store again.
    shutil.rmtree(index.bm25_dir)
    r = Retriever(index).retrieve("What is SOTAlign?")
    assert names(r)[0] == "SOTAlign" and "bm25" in r.hits[0].matched


def test_search_cli_json(fake_seed: Settings) -> None:
    env = {"RAG_HOME": str(fake_seed.home), **FAKE_ENV}
    done = call_cli("rag.search", "how much faster is FS-DFM?", "--json", env=env)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    first = out["results"][0]
    for key in ("id", "display_name", "title", "authors", "track", "score", "passage", "matched"):
        assert key in first
    listed = call_cli("rag.search", "--author", "Bouniot", env=env)
    assert listed.returncode == 0 and listed.stdout.startswith("4 papers")


def test_ordinary_words_are_not_names(fake_seed_copy: Settings, tmp_path) -> None:
    # A paper titled "Guidance: ..." by Wei Ai: "classifier-free guidance" is not asking about
    # it (16 seed sentences use the word), and "AI agents" is not asking about its author.
    # Found at ICML scale, where they pushed the right papers out of the first five.
    extra = tmp_path / "extra.jsonl"
    paper = {
        "id": "x-guidance",
        "title": "Guidance: Sentence-Level Citation Enforcement during LLM Decoding",
        "authors": ["Wei Ai", "Mara Lindqvist"],
        "track": "Deep Learning · Large Language Models",
        "abstract": "Language models that answer from documents often cite sources that do not "
        "support the sentence they are attached to. We constrain decoding so that every "
        "sentence ends with a citation whose source entails it, and show on three question "
        "answering benchmarks that citation precision rises from 61% to 88%.",
    }
    # A model coined in capitals ("MODEL") by authors whose surnames are English words.
    coined = {
        "id": "x-model",
        "title": "Scaling Laws and Architectural Frontiers in Metagenomic Foundation Models",
        "authors": ["Zinaida Good", "Andreas Bigger", "Ozan Can", "Weinan E"],
        "track": "Applications · Genomics",
        "abstract": "We present the methodology behind MODEL, a family of metagenomic "
        "foundation models scaled up to 28 billion parameters and trained on 9.7 trillion "
        "nucleotide tokens, and compare autoregressive Transformers with state-space models.",
    }
    extra.write_text(json.dumps(paper) + "\n" + json.dumps(coined) + "\n")
    PaperIndex(fake_seed_copy).ingest([CORPUS, extra], progress=False)
    r = Retriever(PaperIndex(fake_seed_copy))
    cfg = r.retrieve("papers about classifier-free guidance in diffusion models")
    assert all("name" not in h.matched for h in cfg.hits)
    asked = r.retrieve("What is Guidance?")  # spelled as its title spells it
    assert asked.hits[0].paper.id == "x-guidance" and "name" in asked.hits[0].matched
    games = r.retrieve("Which papers involve AI agents playing games?")
    assert games.mode == "hybrid" and not games.authors
    by = r.retrieve("papers by Ai")
    assert by.mode == "author" and [h.paper.title for h in by.hits] == [paper["title"]]

    # "model" is everywhere; only "MODEL", as the paper spells it, names the paper.
    walks = r.retrieve("How can one model random processes on curved spaces from few samples?")
    assert all("name" not in h.matched for h in walks.hits)
    named = r.retrieve("What is MODEL?")
    assert named.hits[0].paper.id == "x-model" and "name" in named.hits[0].matched
    # Good, Bigger, Can and E are surnames here, but these questions are not about them.
    for topical in (
        "Can a small model beat a bigger one by switching between several lightweight "
        "fine-tuned add-ons word by word?",
        "Is overlap with training data a good proxy for literary inventiveness, according to "
        "professional authors?",
        "Can you surgically fix what a programming-assistant model knows, e.g. for converting "
        "programs between languages, by touching only a handful of units?",
    ):
        found = r.retrieve(topical)
        assert found.mode == "hybrid" and not found.authors, topical
    for about in (
        "papers by bigger",
        "Which papers list bigger as an author?",
        "Bigger's papers?",
        "Has Good written anything here?",
        "What has Ozan Can worked on?",
    ):
        found = r.retrieve(about)
        assert found.mode == "author" and [h.paper.id for h in found.hits] == ["x-model"], about
