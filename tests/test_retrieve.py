from __future__ import annotations

import json
import shutil

import pytest

from rag.index import PaperIndex
from rag.retrieve import Retriever
from rag.settings import Settings

from .conftest import CORPUS, FAKE_ENV, call_cli


@pytest.fixture
def retriever(fake_seed: Settings) -> Retriever:
    """Metadata, names and filters: the hashing embedder is enough."""
    return Retriever(PaperIndex(fake_seed))


@pytest.fixture
def real_retriever(seed_readonly: Settings) -> Retriever:
    """What depends on the real model's sense of meaning."""
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
    assert len(ids) == len(set(ids)) == 10
    assert all(h.passage for h in r.hits)


def test_author_questions_list_every_paper(retriever: Retriever) -> None:
    r = retriever.retrieve("What has Quentin Bouniot worked on here?")
    assert r.mode == "author" and len(r.hits) == 4
    assert all("Quentin Bouniot" in h.paper.authors for h in r.hits)
    assert all(h.matched == ("metadata",) for h in r.hits)
    accentless = retriever.retrieve("papers by scholkopf")
    assert [h.paper.first_author for h in accentless.hits] == ["Ruta Binkyte"]
    assert accentless.authors == ["Bernhard Schölkopf"]
    surname = retriever.retrieve("Which papers have an author with the surname Kim?")
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
    assert none.abstained and none.reason == "no indexed track matches 'quantum chemistry'"
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


def test_question_outside_the_collection_abstains(real_retriever: Retriever) -> None:
    r = real_retriever.retrieve("trajectory prediction for autonomous driving")
    assert r.abstained and r.hits == [] and "relevance" in r.reason


def test_a_capitalised_word_a_paper_happens_to_write_does_not_make_it_the_subject(
    real_retriever: Retriever,
) -> None:
    # One abstract writes "Gaussian conditional surrogate"; none is about Gaussian processes.
    r = real_retriever.retrieve("Which papers use Gaussian processes?")
    assert r.abstained and "relevance" in r.signals
    # A particular name (a coined shape) still names the paper that writes it.
    r = real_retriever.retrieve("Which papers test on ImageNet?")
    assert not r.abstained and "name" in r.hits[0].matched


def test_a_topic_a_close_paper_writes_word_for_word_is_answered(
    real_retriever: Retriever,
) -> None:
    # Casual wording scores low on relevance alone; the topic, written in a row, decides.
    r = real_retriever.retrieve("got anything about privacy?")
    assert not r.abstained and r.signals.get("topic_written") == 1.0
    assert any("privacy" in h.paper.abstract.lower() for h in r.hits)
    # A topic no close paper writes is still turned away.
    assert real_retriever.retrieve("got anything about crop yield forecasting?").abstained
    # A known topic is written as its papers usually write it (rag/topic_names.txt): papers
    # on "unlearning" write "machine unlearning".
    r = real_retriever.retrieve("Show me papers on machine unlearning.")
    assert not r.abstained and r.signals.get("topic_written") == 1.0
    assert {"SAEmnesia", "DRAGON"} <= set(names(r)[:3])
    # "in here" frames the question as "which papers" does: "tackle" is no topic word.
    r = real_retriever.retrieve("Which papers in here tackle unlearning?")
    assert not r.abstained and {"SAEmnesia", "DRAGON"} <= set(names(r)[:3])
    # Generic words are no part of the run ("uses distillation" is written as "distillation").
    r = real_retriever.retrieve("is there anything that uses distillation?")
    assert not r.abstained and "distill" in r.hits[0].paper.abstract.lower()


def test_reading_advice_is_judged_on_the_field_it_names(real_retriever: Retriever) -> None:
    # A field a close paper writes answers the request, however low the framing scores it.
    r = real_retriever.retrieve(
        "My focus lately: world models in model-based control. Worth reading here?"
    )
    assert not r.abstained and r.signals.get("field_written") == 1.0
    assert any("world model" in h.paper.abstract.lower() for h in r.hits)
    # Each field it spells that no close paper writes, even apart, is what it lacks.
    r = real_retriever.retrieve(
        "Photogrammetry person: 3D scene reconstruction and neural radiance fields. "
        "Which of these should I read?"
    )
    assert r.abstained and r.signals.get("unmentioned_topic") == 1.0


def test_what_the_named_papers_do_not_state_is_not_answered(retriever: Retriever) -> None:
    # A detail only full papers give, which the named paper's abstract does not mention.
    r = retriever.retrieve("What batch size was TimeSAE trained with?")
    assert r.abstained and r.unstated == "batch size" and names(r)[0] == "TimeSAE"
    r = retriever.retrieve("Which LoRA rank do MoLoRA's adapters use?")
    assert r.abstained and r.unstated == "LoRA rank"
    # A name neither the named paper nor the papers found with it contain.
    r = retriever.retrieve("What score does UniAR report on the ZorbEval benchmark?")
    assert r.abstained and r.unstated == "ZorbEval" and "UniAR" in names(r)
    # A word it writes as a name, though not shaped like one.
    r = retriever.retrieve("How does UniAR fare on Zorbland images?")
    assert r.abstained and r.unstated == "Zorbland"
    # So too where the paper is named by such a word, which is no evidence itself.
    r = retriever.retrieve("Is the game Zorbcraft among those Orak covers?")
    assert r.abstained and r.unstated == "Zorbcraft" and names(r)[0] == "Orak"
    # Not where a word the paper capitalises picked it out: that is no sign of its subject.
    assert not retriever.retrieve("Why do guardrails fail for Hausa and Zulu speakers?").unstated
    # A compound written apart in the source ("an LLM rewrites existing text") is there.
    r = retriever.retrieve(
        "How does DistSeal compare with watermarking by LLM-rewriting of existing text?"
    )
    assert not r.abstained and not r.unstated
    # What the abstract does state is answered.
    orak = retriever.retrieve("How many video games does Orak cover?")
    assert not orak.abstained
    # A result whose figure the named paper's abstract does not give.
    r = retriever.retrieve("What perplexity does TimeSAE reach on long series?")
    assert r.abstained and r.unstated == "perplexity"
    # A ratio beside a metric is a speedup's figure, not the metric's ("competitive
    # PSNR/SSIM/LPIPS with up to 19.5x speedup").
    r = retriever.retrieve("What SSIM does FAST-DIPS get on deblurring?")
    assert r.abstained and r.unstated == "SSIM"
    assert not retriever.retrieve("What speedup does FAST-DIPS report?").abstained
    # A benchmark the abstract labels as one is where the result is, not what it measures.
    q = "How much better than prior work is SAEmnesia on UnlearnCanvas?"
    assert not retriever.retrieve(q).abstained
    # A count the named paper's abstract does not give (of a part it need not name: "heads"
    # would bring up attention, which it never says, a false premise first).
    r = retriever.retrieve("How many layers does TimeSAE's encoder have?")
    assert r.abstained and r.unstated == "the number of layers"
    r = retriever.retrieve("What was the parameter count UniAR trained at?")
    assert r.abstained and r.unstated == "the number of parameters"
    assert not retriever.retrieve("What is the number of video games in Orak?").abstained
    # How large a result is, asked of a paper whose abstract gives no figure at all.
    r = retriever.retrieve("By how much does LEON raise the patients' outcomes?")
    assert r.abstained and r.unstated == "a figure" and names(r)[0] == "LEON"
    assert retriever.retrieve("By how many times does FS-DFM cut its cost?").unstated == ""
    # Which one of a kind, asked of a paper whose abstract writes no name but its own.
    r = retriever.retrieve("Which tokenizer does LEON rely on?")
    assert r.abstained and r.unstated == "which tokenizer" and names(r)[0] == "LEON"
    # Papers picked out by their authors are asked just as surely.
    r = retriever.retrieve("Which LLM did Osbert Bastani's team use for treatment plans?")
    assert r.abstained and r.unstated == "which LLM" and "Osbert Bastani" in r.reason
    r = retriever.retrieve("Did Shrey Shah beat Mistral models?")
    assert r.abstained and r.unstated == "Mistral"
    assert not retriever.retrieve("Did Shrey Shah beat Qwen3-8B?").abstained
    # Unnamed, a question for that many of a kind is about the close paper that writes that
    # many of them; one that writes none of their names cannot say which they are.
    r = retriever.retrieve("Which five games did the exploitability comparison of PPO use?")
    assert r.abstained and r.unstated == "which games" and "describes" in r.reason
    assert r.about == r.hits[0].paper.id
    r = retriever.retrieve("List the 12 games that Orak covers, by name.")
    assert r.abstained and r.unstated == "which games" and names(r)[0] == "Orak"
    # One that writes names (Qwen3) may say: the answer stage reads which.
    assert not retriever.retrieve("Which checkpoints does MoLoRA start from?").unstated
    # Not names it labels as another kind: "Diffusion Language Models (DLMs)" are models.
    r = retriever.retrieve("Which text corpora did SPA-Cache learn from?")
    assert r.abstained and r.unstated == "which corpora"
    assert not retriever.retrieve("Which VQA benchmarks does Robust-U1 report?").unstated
    q = "Which checkpoints does MoLoRA start from, and by how much does it win?"
    assert not retriever.retrieve(q).unstated  # its abstract gives figures
    # A question for papers: its detail words are its topic, not a fact asked of them.
    assert not retriever.retrieve("Which papers release their source code?").unstated
    # A follow-up about earlier papers asks them alone.
    within = {h.paper.id for h in orak.hits}
    r = retriever.retrieve("Which of those report their GPUs?", within=within)
    assert r.abstained and r.unstated == "GPUs" and r.mode == "filtered"


def test_a_kind_of_data_no_close_paper_works_on_is_not_covered(
    real_retriever: Retriever,
) -> None:
    # The collection watermarks images and text, not speech.
    r = real_retriever.retrieve("Is there work on watermarking synthetic speech?")
    assert r.abstained and "'speech'" in r.reason and r.data == "speech"
    assert "watermark" in r.hits[0].paper.abstract.lower()  # shown: it may still serve
    assert not real_retriever.retrieve("Which papers watermark AI-generated images?").abstained
    # Of the paper the question names, a false premise: that paper is shown first.
    r = real_retriever.retrieve("How does Motion-R1 take speech audio as its input?")
    assert r.abstained and r.premise == "speech" and names(r)[0] == "Motion-R1"


def test_a_topic_the_named_paper_never_says_is_a_false_premise(
    real_retriever: Retriever,
) -> None:
    r = real_retriever.retrieve("How does TimeSAE handle image watermarking?")
    assert r.abstained and r.premise == "watermarking" and names(r)[0] == "TimeSAE"
    assert not r.denied
    # What the paper writes only to deny it ("without fine-tuning") is no more its premise;
    # asked with the denial, it is.
    r = real_retriever.retrieve("Which fine-tuning recipe does SteerMoE follow?")
    assert r.abstained and r.premise == "fine-tuning" and r.denied
    assert not real_retriever.retrieve(
        "How does SteerMoE steer behaviour without fine-tuning?"
    ).abstained
    # Where it speaks of its own work: DRAGON writes that other methods need retain data.
    r = real_retriever.retrieve("Where does DRAGON draw on retain data when it forgets?")
    assert r.abstained and r.premise == "retain" and r.denied
    q = "DRAGON forgets without retain data or weight edits: how?"
    assert not real_retriever.retrieve(q).abstained
    # The paper named by its own name is the subject, whatever a chance capital picks out.
    r = real_retriever.retrieve("How does TimeSAE handle image watermarking on ImageNet?")
    assert r.abstained and r.premise == "watermarking" and names(r)[0] == "TimeSAE"
    # So is the one paper a question describes, where the whole question agrees on it.
    r = real_retriever.retrieve(
        "In the time series sparse autoencoder paper, how do the reward models rank features?"
    )
    assert r.abstained and "describes" in r.reason and names(r)[0] == "TimeSAE"
    # A description fits a paper that writes each of its words, compounds whole or apart.
    timesae = names(real_retriever.retrieve("What is TimeSAE?"))[0]
    pid = next(p.id for p in real_retriever.papers.values() if p.display_name == timesae)
    assert real_retriever._writes_all(pid, "time-series auto-encoders")
    assert not real_retriever._writes_all(pid, "time series watermarking")
    ok = "In the sparse autoencoder time series paper, what are the concepts explained?"
    assert not real_retriever.retrieve(ok).abstained
    # A figure asked of the paper that its abstract never gives of the same thing (FS-DFM
    # is 128x faster with 8 steps); the figures it gives are no premise.
    r = real_retriever.retrieve("Why is FS-DFM 40x faster than its discrete-flow baseline?")
    assert r.abstained and r.premise == "40x faster" and names(r)[0] == "FS-DFM"
    r = real_retriever.retrieve("How does FS-DFM get by with 16 sampling steps?")
    assert r.abstained and r.premise == "16 sampling"
    assert not real_retriever.retrieve("How does FS-DFM sample 128x faster?").abstained
    assert not real_retriever.retrieve("How does FS-DFM get by with eight steps?").abstained
    # A claim the paper it is about makes only the other way round, whether it names the
    # paper, picks it out by its authors or describes it.
    r = real_retriever.retrieve("Why do Rudolph et al. find that CFR-based methods beat PPO?")
    assert r.abstained and r.premise == "beat" and "fail to outperform" in r.contrary
    assert names(r)[0].startswith("Rudolph")
    r = real_retriever.retrieve(
        "In the n-gram novelty study, why does higher novelty come with higher pragmaticality?"
    )
    assert r.abstained and r.premise == "higher pragmaticality"
    assert "lower pragmaticality" in r.contrary
    ok = "In the n-gram novelty study, why does higher novelty come with lower pragmaticality?"
    assert not real_retriever.retrieve(ok).abstained
    # Nearer the topic than half the collection, but not among the papers that say it.
    r = real_retriever.retrieve("How does TimeSAE use reinforcement learning?")
    assert r.abstained and r.premise == "reinforcement learning"
    # A field the paper is in without saying so is what it is about, not a false premise;
    # a comparison brings other topics up to set against it.
    for fine in (
        "What makes FS-DFM speed up LLM generation?",
        "How is TimeSAE used to explain deep learning models?",
        "How does TimeSAE compare with image watermarking?",
    ):
        assert not real_retriever.retrieve(fine).abstained, fine
    real_retriever.index.settings.search.topic_check = False
    assert not real_retriever.retrieve("How does TimeSAE handle image watermarking?").abstained


def test_an_authors_papers_must_mention_the_topic_asked_of_them(
    real_retriever: Retriever,
) -> None:
    r = real_retriever.retrieve("Did Zeynep Akata write anything on graph neural networks?")
    assert r.abstained and "graph neural network" in r.reason and "Akata" in r.reason
    r = real_retriever.retrieve("Which of Zeynep Akata's papers use sparse autoencoders?")
    assert not r.abstained and "TimeSAE" in names(r)
    # A topic the question only spells, in its asker's words, is no evidence.
    paraphrase = "Has Luke Thompson modelled time series sampled at irregular times?"
    r = real_retriever.retrieve(paraphrase)
    assert not r.abstained and r.hits and r.authors == ["Luke Thompson"]
    # A topic the background list lacks, none of whose words her papers use.
    r = real_retriever.retrieve("What did Zeynep Akata propose for crop irrigation?")
    assert r.abstained and "crop irrigation" in r.reason
    # One leftover word may only frame the question.
    r = real_retriever.retrieve("Which paper landed under the Social Aspects · Fairness track?")
    assert not r.abstained and r.hits
    # A name none of her papers contains.
    r = real_retriever.retrieve("Which of Zeynep Akata's papers train ZorbNet?")
    assert r.abstained and "ZorbNet" in r.reason
    # Either side of an "or" may be what her papers mention.
    r = real_retriever.retrieve(
        "Did Zeynep Akata write on graph neural networks or on sparse autoencoders?"
    )
    assert not r.abstained and "TimeSAE" in names(r)
    # Her papers may write a topic's words apart: "safety" and "alignment" in one abstract.
    r = real_retriever.retrieve(
        "What do Lucas et al. say about safety alignment in low-resource languages?"
    )
    assert not r.abstained and any("Lucas" in a for a in r.hits[0].paper.authors)


def test_bm25_is_persisted_in_step_with_chroma(fake_seed_copy: Settings, tmp_path) -> None:
    index = PaperIndex(fake_seed_copy)
    state = json.loads((index.bm25_dir / "state.json").read_text())
    assert state["count"] == index.count_chunks() >= 60
    # A missing BM25 folder is rebuilt by the next ingest, which embeds nothing.
    shutil.rmtree(index.bm25_dir)
    summary = index.ingest([CORPUS], progress=False)
    assert summary.chunks_embedded == 0 and (index.bm25_dir / "state.json").exists()
    # Without its files, search still works: the index is rebuilt in memory.
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
    nothing = call_cli("rag.search", "weather forecasting with deep learning", env=env)
    assert nothing.returncode == 0 and "No answer in the indexed papers" in nothing.stdout


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
    assert not cfg.signals.get("named") and "x-guidance" not in {h.paper.id for h in cfg.hits}
    asked = r.retrieve("What is Guidance?")  # spelled as its title spells it
    assert asked.hits[0].paper.id == "x-guidance" and "name" in asked.hits[0].matched
    games = r.retrieve("Which papers involve AI agents playing games?")
    assert games.mode == "hybrid" and not games.authors
    by = r.retrieve("papers by Ai")
    assert by.mode == "author" and [h.paper.title for h in by.hits] == [paper["title"]]

    # "model" is everywhere; only "MODEL", as the paper spells it, names the paper.
    walks = r.retrieve("How can one model random processes on curved spaces from few samples?")
    assert not walks.signals.get("named") and "x-model" not in {h.paper.id for h in walks.hits}
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


def test_papers_that_name_the_topic_come_first(real_retriever: Retriever) -> None:
    r = real_retriever.retrieve("Which papers use sparse autoencoders?", k=8)
    says = ["sparse autoencoder" in h.paper.abstract.lower() for h in r.hits]
    assert sum(says) == 5 and says == sorted(says, reverse=True)


def test_a_phrase_the_collection_writes_is_a_topic_the_background_lacks(
    real_retriever: Retriever,
) -> None:
    # "single-location regression" is on no background list; one abstract writes it.
    q = "Which papers study single-location regression?"
    vector = real_retriever.index.query_model.get_query_embedding(q)
    assert real_retriever.topics.named(q, vector, True) == []
    r = real_retriever.retrieve(q)
    assert "single-location regression" in r.hits[0].paper.abstract
    assert r.topics == ["single-location regression"] and r.total == 1
    # What the papers do with it ("lean on") frames the question; the topic is written.
    r = real_retriever.retrieve("Which papers lean on statistical physics?")
    assert not r.abstained and "statistical physics" in r.hits[0].paper.abstract


def test_a_topic_named_only_in_a_gloss_is_not_required(real_retriever: Retriever) -> None:
    # The papers write the topic the gloss explains: its instances need not be theirs.
    for q in (
        "Which papers train sparse autoencoders (for example on weather forecasting data)?",
        "Which papers train sparse autoencoders, e.g. for weather forecasting?",
    ):
        assert not real_retriever.retrieve(q).abstained, q
    # Where they lack the subject itself, it is lacking whatever the gloss says.
    r = real_retriever.retrieve("Which papers study weather forecasting (sparse autoencoders)?")
    assert r.abstained and "forecasting" in r.reason
