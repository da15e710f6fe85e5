"""The topic check: a question naming a known topic that the closest papers never mention."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rag.index import PaperIndex
from rag.retrieve import Retriever
from rag.settings import Settings
from rag.topics import TOPICS_FILE, Topics

from .conftest import CORPUS

TEXT_WATERMARKING = "Post-hoc watermarking of text: an LLM rewrites it with a statistical signal."
PHRASES = [line for line in TOPICS_FILE.read_text().splitlines() if line and "#" not in line[:1]]


def topics_near(*near: str) -> tuple[Topics, np.ndarray]:
    """The real topic list with vectors that put a question next to `near` and nothing else."""
    vectors = np.eye(len(PHRASES), dtype=np.float32)
    question = sum(vectors[PHRASES.index(p)] for p in near)
    return Topics(PHRASES, vectors, near=0.6), np.asarray(question)


def test_topic_named_by_the_question_and_absent_from_the_papers() -> None:
    topics, q = topics_near("federated learning")
    papers = ["We train diffusion models on images.", "A benchmark for code agents."]
    assert topics.unmentioned("federated learning across hospitals", q, papers) == (
        "federated learning"
    )
    assert topics.unmentioned("Federated learning?", q, [*papers, "Federated averaging"]) is None


def test_either_side_of_an_or_may_answer() -> None:
    topics, q = topics_near("concept erasure")
    unlearning = "We make language models forget facts: machine unlearning without retraining."
    either = "Which papers address machine unlearning or concept erasure?"
    assert topics.unmentioned(either, q, [unlearning]) is None
    # Both sides name topics the papers lack: still abstained.
    topics, q = topics_near("concept erasure", "federated learning")
    both = "papers on federated learning or concept erasure"
    assert topics.unmentioned(both, q, [unlearning]) in ("concept erasure", "federated learning")
    # A topic named across the "or" is not split by it.
    assert topics.unmentioned("concept erasure, or not?", q, [unlearning]) == "concept erasure"


def test_a_slash_set_apart_is_an_or() -> None:
    topics, q = topics_near("concept erasure", "federated learning")
    unlearning = "We make language models forget facts: machine unlearning without retraining."
    assert topics.unmentioned("federated learning / machine unlearning", q, [unlearning]) is None
    assert topics.unmentioned("federated learning and machine unlearning", q, [unlearning]) == (
        "federated learning"
    )


def test_a_text_says_a_word_in_any_form() -> None:
    topics = Topics(PHRASES, np.eye(len(PHRASES), dtype=np.float32))
    said = topics.said("Large language models, mixture-of-experts layers and GNNs.")
    # Acronyms the topic list spells out, both ways, and a compound's closed form.
    assert {"llm", "moe", "mixtureofexpert", "gnn", "graph", "neural", "network"} <= said
    aligned = "We align LLMs with human feedback."
    assert topics.unsaid("How does it use reinforcement learning?", aligned) == (
        "reinforcement learning"
    )
    # One word of a topic said anywhere is enough: the asker arranges the words their way.
    assert topics.unsaid("How does it help LLM safety?", "On the safety of language models.")
    assert topics.unsaid("How does it help LLM safety?", "The safety of LLMs.") is None
    assert topics.unsaid("How does it make language models safer?", aligned) is None
    assert topics.unsaid("How does it solve math problems?", "Mathematical reasoning.") is None


def test_an_acronyms_words_mention_it() -> None:
    topics, q = topics_near("multimodal llm")
    spelled = ["Multimodal large language models fail on corrupted images."]
    assert topics.unmentioned("Which papers make multimodal LLMs robust?", q, spelled) is None
    assert topics.unmentioned("Which papers make multimodal LLMs robust?", q, [TEXT_WATERMARKING])


def test_an_or_shares_a_phrase_only_between_single_words() -> None:
    topics, q = topics_near("image watermark")
    papers = [
        "We generate synthetic images with a diffusion model.",
        TEXT_WATERMARKING,
    ]
    # "image or text watermarking" asks for image watermarking, which neither paper does.
    either = "Which papers study image or text watermarking?"
    assert topics.unmentioned(either, q, papers) == "image watermark"
    # Between two phrases, the words of one topic taken from both name nothing.
    apart = "Which papers generate a synthetic image or with watermarking of text?"
    assert topics.unmentioned(apart, q, papers) is None


def test_a_topic_with_a_word_too_short_to_test_is_named_only_with_it() -> None:
    # "ai for research" would be named by "research" alone, which the question uses in passing.
    topics, q = topics_near("ai for research")
    question = "My research is on graph colouring; what should I read?"
    assert topics.unmentioned(question, q, ["Colouring graphs with few colours."]) is None
    # Named with it, the topic is checked on the words the test can read.
    topics, q = topics_near("ai agents")
    asked = "Which papers build AI agents?"
    assert topics.unmentioned(asked, q, ["Agents that browse the web."], spelled=True) is None
    assert topics.unmentioned(asked, q, ["Graph colouring."], spelled=True) == "ai agents"


def test_reading_advice_lacks_a_field_it_spells_whose_words_no_close_paper_writes() -> None:
    # Nothing is near this question as a whole: only the field it spells can be checked.
    topics, q = topics_near("ai agents")
    asked = "Speculative decoding is my thing; what to read?"
    parallel = ["We decode text in parallel with a diffusion model."]
    assert topics.unmentioned(asked, q, parallel) is None
    assert topics.unmentioned(asked, q, parallel, advice=True) == "speculative decoding"
    # Advice describes a field in its own words: its words apart, in any form, answer it.
    apart = ["Speculative execution of drafts makes the decoding of text faster."]
    assert topics.unmentioned(asked, q, apart, advice=True) is None
    maths = ["We probe the mathematical reasoning of language models."]
    asked = "I build tools for math reasoning, anything to read here?"
    assert topics.unmentioned(asked, q, maths, advice=True) is None
    assert topics.unmentioned(asked, q, parallel, advice=True) == "math reasoning"
    # So is a topic the question is near: "LLM inference" of a paper that aligns large
    # language models at inference, which the papers write apart; elsewhere words together.
    topics, q = topics_near("llm inference")
    asked = "what to read on aligning LLMs at inference time?"
    aad = ["Alignment of large language models. We align models directly at inference."]
    assert topics.unmentioned(asked, q, aad, advice=True) is None
    assert topics.unmentioned(asked, q, aad) == "llm inference"
    assert topics.unmentioned(asked, q, parallel, advice=True) == "llm inference"


def test_reading_advice_names_a_field_a_close_paper_writes() -> None:
    topics, q = topics_near("world models")
    asked = "World models for planning are my focus; a reading list?"
    feng = ["Agents learn world models with task-specific representations."]
    assert topics.field_written(asked, q, feng) == "world models"
    assert topics.field_written(asked, q, ["Watermarks for generated images."]) is None
    # Spelled out but not what the question is about: a phrase in passing.
    topics, q = topics_near("speculative decoding")
    assert topics.field_written(asked, q, feng) is None


def test_topic_words_must_stand_together_in_a_paper() -> None:
    topics, q = topics_near("neural architecture search")
    scattered = "A neural model whose architecture we tune by random search over widths."
    assert topics.unmentioned("neural architecture search on phones", q, [scattered]) == (
        "neural architecture search"
    )
    close = "We revisit search spaces for neural architecture design."
    assert topics.unmentioned("neural architecture search on phones", q, [close]) is None


def test_topics_asked_for_together_must_be_mentioned_together() -> None:
    topics, q = topics_near("graph neural networks", "federated learning")
    apart = ["Graph neural networks for molecules.", "Federated learning on phones."]
    both = "graph neural networks trained by federated learning"
    assert topics.unmentioned(both, q, apart, joined=True) == (
        "graph neural networks and federated learning"
    )
    # Without `joined` (reading advice, comparisons) a paper on each is enough.
    assert topics.unmentioned(both, q, apart) is None
    one = [*apart, "Federated learning of graph neural networks across banks."]
    assert topics.unmentioned(both, q, one, joined=True) is None
    # Either side of an "or" may answer alone.
    either = "graph neural networks or federated learning"
    assert topics.unmentioned(either, q, apart, joined=True) is None


def test_topics_sharing_a_word_are_one_subject() -> None:
    # Topics sharing a word are one subject, found by a paper on either.
    topics, q = topics_near("federated learning", "federated fine-tuning")
    papers = ["Federated learning of adapters: we fine-tune on devices."]
    question = "federated fine-tuning of adapters, federated learning style"
    assert topics.unmentioned(question, q, papers, joined=True) is None
    # Topics sharing none are two.
    topics, q = topics_near("time series", "forecasting")
    papers = ["Forecasting demand with transformers.", "A time series benchmark."]
    assert topics.unmentioned("forecasting a time series", q, papers, joined=True) == (
        "forecasting and time series"
    )


def test_a_misspelt_topic_word_is_put_right_only_when_the_fix_is_certain() -> None:
    topics = Topics(PHRASES, np.eye(len(PHRASES), dtype=np.float32))
    assert topics.mend("any federated lerning here?", lambda w: 0) == (
        "any federated learning here?"
    )
    assert topics.mend("graph neural netwrks for proteins", lambda w: 0) == (
        "graph neural networks for proteins"
    )
    # A word the collection uses is a word of its own.
    assert topics.mend("any federated lerning here?", lambda w: 1) == "any federated lerning here?"
    # A fix that spells no topic is no fix: "lerning" alone might be anything.
    assert topics.mend("lerning curves of sheep", lambda w: 0) == "lerning curves of sheep"
    # A word that frames a question is put right too, when it is long enough that one letter
    # off names no other word; a short one stays as written.
    assert topics.mend("anythng on sheep?", lambda w: 0) == "anything on sheep?"
    assert topics.mend("sheep recomendations?", lambda w: 0) == "sheep recommendations?"
    assert topics.mend("any topix here?", lambda w: 0) == "any topix here?"


def test_generic_and_filler_words_need_not_be_repeated() -> None:
    # "based" need not be repeated; "large" is a content word ("LLMs" spells it), so it is.
    topics, q = topics_near("diffusion-based large language models")
    paper = "Diffusion large language models decode tokens in any order."
    question = "diffusion-based large language models that decode faster"
    assert topics.unmentioned(question, q, [paper]) is None


def test_a_topic_only_near_the_question_is_not_held_against_the_papers() -> None:
    # "oriented object detection" is close to a question on open-world detection, which the
    # papers do answer; the question does not name it, so it proves nothing.
    topics, q = topics_near("oriented object detection")
    paper = "Open-world object detection must find unknown objects."
    question = "open-world object detectors that spot never-seen things"
    assert topics.unmentioned(question, q, [paper]) is None


def test_far_topics_are_ignored() -> None:
    topics, _ = topics_near("federated learning")
    far = np.zeros(len(PHRASES), dtype=np.float32)
    # Cosine 0.5 with each of four topics: below the near-topic cutoff (0.6 here).
    for phrase in ("federated learning", "reinforcement learning", "watermarking", "fmri"):
        far[PHRASES.index(phrase)] = 0.5
    assert topics.unmentioned("federated learning", far, ["nothing related"]) is None


def test_questions_asking_for_papers_name_the_topics_they_spell() -> None:
    topics, q = topics_near("diffusion guidance", "diffusion models")
    question = "papers about classifier-free guidance in diffusion models"
    # Near the question: both, but "diffusion models" is inside "diffusion guidance".
    assert topics.named(question, q) == [("diffus", "guidanc")]
    # Spelled out: classifier-free guidance, though the question is not near it.
    spelled = topics.named(question, q, verbatim=True)
    assert ("classifi", "free", "guidanc") in spelled and ("diffus",) not in spelled
    cfg = "We improve classifier-free guidance for diffusion sampling."
    other = "Guidance of diffusion models with a reward; no classifier needed."
    assert topics.mentioned(spelled, cfg) == 2 and topics.mentioned(spelled, other) == 1
    # Without asking for papers, a topic used in passing is not named.
    topics, q = topics_near("reinforcement learning")
    passing = "How can step-by-step thinking plus reward-based fine-tuning help animation?"
    assert topics.named(passing, q) == []
    assert topics.named(passing, q, verbatim=True) == [("fine", "tune")]


def test_topics_a_question_for_papers_spells_out_must_be_mentioned() -> None:
    topics, q = topics_near("watermarking")
    images = [
        "We watermark images from diffusion models in their latent space.",
        TEXT_WATERMARKING,
    ]
    question = "Which papers study watermarking of audio or speech?"
    assert topics.unmentioned(question, q, images) is None  # only "watermarking" is near
    assert topics.unmentioned(question, q, images, spelled=True) in ("audio", "speech")
    # Either side may answer: a paper on speech watermarking does.
    speech = [*images, "Robust watermarks for speech synthesis."]
    assert topics.unmentioned(question, q, speech, spelled=True) is None
    # Whole words, not stems: "exploit" does not spell "exploration".
    equivariant = ["Equivariant networks that respect the symmetry of molecules."]
    asked = "Which papers exploit symmetry or equivariance?"
    assert topics.unmentioned(asked, q, equivariant, spelled=True) is None


@pytest.fixture
def retriever(seed_readonly: Settings) -> Retriever:
    return Retriever(PaperIndex(seed_readonly))


@pytest.mark.slow
def test_seed_questions_on_uncovered_topics_abstain(retriever: Retriever) -> None:
    # Close enough to a quantization-free LLM paper that relevance alone answers it.
    question = "large language models compressed by post-training quantization of their weights"
    r = retriever.retrieve(question)
    assert r.abstained and r.hits == []
    assert "post-training quantization" in r.reason
    for covered in ("Which papers use conformal prediction?", "papers on sparse autoencoders"):
        assert not retriever.retrieve(covered).abstained
    retriever.index.settings.search.topic_check = False
    r = retriever.retrieve(question)
    assert not r.abstained and r.hits


@pytest.mark.slow
def test_a_misspelt_topic_finds_its_papers(retriever: Retriever) -> None:
    right = retriever.retrieve("papers built on sparse autoencoders")
    wrong = retriever.retrieve("papers built on sparse autoencodrs")
    assert not wrong.abstained and wrong.parsed is not None
    assert wrong.parsed.text == "papers built on sparse autoencoders"
    assert [h.paper.id for h in wrong.hits] == [h.paper.id for h in right.hits]


@pytest.mark.slow
def test_questions_about_names_no_paper_mentions_abstain(retriever: Retriever) -> None:
    r = retriever.retrieve("How does AlphaFold 3 predict protein complex structures?")
    assert r.abstained and r.hits == [] and "'AlphaFold'" in r.reason
    # Paper names are answered; a name the papers use is no evidence against a question
    # (the fitted model may still find a short one too far from every paper).
    for known in ("How do MLLMs handle corrupted images?", "What does Motion-R1 generate?"):
        assert not retriever.retrieve(known).abstained, known
    # A name with a word no paper writes is decided before any search.
    unseen = retriever.retrieve("How does Zorblax-KV prune attention heads?")
    assert unseen.abstained and unseen.reason == "no indexed paper mentions 'Zorblax-KV'"
    sae = retriever.retrieve("Which papers train SAEs on vision models?")
    assert sae.signals["unknown_name"] == 0.0 and "SAEs" not in sae.reason
    retriever.index.settings.search.topic_check = False
    off = retriever.retrieve("How does AlphaFold 3 predict protein complexes?")
    assert off.signals["unknown_name"] == 0.0 and "AlphaFold" not in off.reason


def test_topic_vectors_are_cached_by_ingest(fake_seed_copy: Settings, tmp_path: Path) -> None:
    seed_settings = fake_seed_copy
    seed_settings.search.topics_cache = tmp_path / "topics"
    index = PaperIndex(seed_settings)
    index.ingest([CORPUS], progress=False)  # nothing to embed but the topics, once
    cached = list(index.topics_dir.glob("topics-*.npy"))
    assert len(cached) == 1

    def must_not_embed(texts: list[str]) -> list[list[float]]:
        raise AssertionError("the cache should have been used")

    topics = Topics.load(must_not_embed, index.topics_dir, index.model_key)
    assert len(topics.phrases) == len(PHRASES) > 1000
    # A damaged cache is not trusted: the vectors are made again and the file rewritten.
    cached[0].write_bytes(b"\x93NUMPY garbage")
    calls: list[int] = []

    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(len(texts))
        return index.query_model.get_text_embedding_batch(texts)

    again = Topics.load(embed, index.topics_dir, index.model_key)
    assert calls == [len(PHRASES)]
    assert np.allclose(again.vectors, topics.vectors, atol=1e-3)
    assert Topics.load(must_not_embed, index.topics_dir, index.model_key).phrases == PHRASES
    # Shared by every index on the machine that uses the same model.
    other = seed_settings.model_copy(update={"home": tmp_path / "other"})
    PaperIndex(other).ingest([CORPUS / "000_ca26f2752b4dd6e2.txt"], progress=False)
    assert list(index.topics_dir.glob("topics-*.npy")) == cached


def test_topic_cache_is_inside_rag_home_by_default(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    settings.search.topics_cache = None
    assert PaperIndex(settings).topics_dir == tmp_path / "home" / "topics"


def test_unwritable_cache_still_answers(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    vectors = np.eye(len(PHRASES), dtype=np.float32)
    topics = Topics.load(lambda texts: vectors, blocked / "topics", "m")
    assert topics.vectors.shape == (len(PHRASES), len(PHRASES))


def test_data_of_a_kind_is_written_by_writing_the_kind() -> None:
    topics, q = topics_near("tabular data")
    arb = ["Trees made differentiable reach the state of the art on tabular benchmarks."]
    assert topics.field_written("Reading list on deep nets for tabular data?", q, arb) == (
        "tabular data"
    )
    assert topics.unmentioned("tabular data", q, [TEXT_WATERMARKING]) == "tabular data"


def test_a_usual_name_is_mentioned_by_its_shorter_topic_but_a_kind_is_not() -> None:
    # "machine unlearning" is the usual name of unlearning (rag/topic_names.txt, from the
    # corpora); "LLM watermarking" is one kind of watermarking among others.
    topics, q = topics_near("machine unlearning")
    forget = ["Our method makes a diffusion model forget a concept: concept unlearning, fast."]
    assert topics.unmentioned("reading list on machine unlearning", q, forget) is None
    assert topics.unmentioned("machine unlearning", q, [TEXT_WATERMARKING]) == (
        "machine unlearning"
    )
    topics, q = topics_near("llm watermarking")
    images = ["A watermarking scheme for photographs that survives cropping."]
    assert topics.unmentioned("llm watermarking", q, images) == "llm watermarking"


def test_make_topics_finds_usual_names_by_share_of_papers(tmp_path: Path) -> None:
    from evals.make_topics import usual_names

    rows = [{"abstract": "We study machine unlearning of facts."} for _ in range(6)]
    rows += [{"abstract": "Unlearning for LLMs and image watermarking."} for _ in range(5)]
    rows += [{"abstract": "Text watermarking of LLM outputs."} for _ in range(10)]
    source = tmp_path / "c.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    topics = ["unlearning", "machine unlearning", "watermarking", "image watermarking"]
    assert usual_names(topics, [source]) == [("machine unlearning", "unlearning", 0.55)]


def test_loose_reads_a_topics_words_anywhere_in_one_text() -> None:
    # For papers an author or track picked out: "safety" and "alignment" apart still
    # mention safety alignment; both words in different papers, or one missing, do not.
    topics, q = topics_near("safety alignment")
    apart = ["Alignment breaks down in low-resource languages, and with it model safety."]
    question = "why does safety alignment fail in low-resource languages?"
    assert topics.unmentioned(question, q, apart) == "safety alignment"
    assert topics.unmentioned(question, q, apart, loose=True) is None
    split = ["Alignment of language models.", "Safety of robots."]
    assert topics.unmentioned(question, q, split, loose=True) == "safety alignment"
    assert topics.unmentioned(question, q, ["Safety of robots."], loose=True) == (
        "safety alignment"
    )
