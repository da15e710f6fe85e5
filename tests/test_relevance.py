"""The relevance model: features, fitting, thresholds, files, and the fallback without one."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest

from rag import relevance
from rag.relevance import (
    CANDIDATE_FEATURES,
    QUESTION_FEATURES,
    Candidate,
    Evidence,
    RelevanceModel,
    Sample,
    TermWeights,
    TopicSample,
    candidate_features,
    choose_abstain,
    choose_cut,
    choose_topic,
    observations,
    out_of_fold,
    question_features,
)

TOPIC_WORDS = [f"topic{i}" for i in range(40)]
FRAMING = ["which", "paper", "anyon", "recommend"]


def evidence(
    answerable: bool, rng: random.Random, papers: int = 60, intent: str = "explain"
) -> tuple[Evidence, frozenset[str]]:
    """A question of two framing words and three topic words, with ten candidates. An
    answerable one has a gold paper that writes its topic words and stands out by cosine;
    for the others, the closest papers write one topic word at most."""
    terms = (*rng.sample(FRAMING, 2), *rng.sample(TOPIC_WORDS, 3))
    candidates = []
    for n in range(10):
        gold = answerable and n == 0
        cos = rng.uniform(0.55, 0.75) if gold else rng.uniform(0.2, 0.45)
        written = [False, False, *(gold or (n == 1 and k == 0) for k in range(3))]
        candidates.append(
            Candidate(
                id=f"p{n}",
                cos=cos,
                dense_rank=n,
                bm25=5.0 * sum(written),
                bm25_rank=n,
                has=tuple(written),
                exact=tuple(written),
                in_title=tuple(w and gold for w in written),
                pairs=tuple(a and b for a, b in itertools.pairwise(written)),
                named=False,
            )
        )
    ev = Evidence(
        question=" ".join(terms),
        intent=intent,
        terms=terms,
        words=terms,
        df=tuple(papers // 2 if t in FRAMING else papers // 20 for t in terms),
        passages=papers,
        papers=papers,
        cos_mean=0.2,
        cos_std=0.1,
        bm25_max=15.0,
        candidates=tuple(candidates),
    )
    return ev, frozenset({"p0"} if answerable else ())


def samples(n: int = 160, seed: int = 0) -> list[Sample]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        answerable = i % 3 != 0
        ev, gold = evidence(answerable, rng)
        out.append(Sample(ev, gold, answerable, f"set{i % 4}"))
    return out


def topic_samples() -> list[TopicSample]:
    return [
        TopicSample(("paper",), (30,), 60, False),
        TopicSample(("work",), (40,), 60, False),
        TopicSample(("topic1", "paper"), (3, 30), 60, True),
        TopicSample(("topic2",), (2,), 60, True),
    ]


def test_term_weights_learn_which_words_the_gold_paper_writes() -> None:
    weights = TermWeights.fit(observations(samples()))
    assert all(weights(t) < 0.3 for t in FRAMING if t in weights.rates)
    assert all(weights(t) > 0.7 for t in TOPIC_WORDS if t in weights.rates)
    assert 0 < weights("never-asked") == weights.default < 1


def test_the_words_asking_for_an_authors_list_are_fitted_as_framing() -> None:
    # "What did Smith publish?": the listed papers do not write "publish", so it is no topic.
    listing = [TopicSample(("publish",), (2,), 60, False, f"set{i}", (False,)) for i in range(6)]
    alone = TermWeights.fit(observations(samples()))
    both = TermWeights.fit(observations(samples(), listing))
    assert alone("publish") == alone.default
    assert both("publish") < 0.3 < min(both(t) for t in TOPIC_WORDS if t in both.rates)


def test_features_have_their_names_and_do_not_depend_on_the_collections_size() -> None:
    weights = TermWeights({t: 0.9 for t in TOPIC_WORDS}, 0.1)
    small, _ = evidence(True, random.Random(3), papers=60)
    large, _ = evidence(True, random.Random(3), papers=6000)
    f_small, f_large = candidate_features(small, weights), candidate_features(large, weights)
    assert f_small.shape == (10, len(CANDIDATE_FEATURES))
    # Term rarity is a share of the collection: the same share of papers, the same feature.
    assert np.allclose(f_small, f_large, atol=0.03)
    q = question_features(small, weights, 0.0)
    assert q.shape == (len(QUESTION_FEATURES),)


def test_the_fitted_models_rank_the_gold_paper_first_and_decline_the_rest() -> None:
    train, test = samples(), samples(60, seed=1)
    model = RelevanceModel.fit("key", train, topic_samples())
    ranked_first = [
        s.evidence.candidates[int(np.argmax(model.relevance(s.evidence)))].id in s.gold
        for s in test
        if s.answerable
    ]
    assert np.mean(ranked_first) == 1.0
    declined = [model.answerability(s.evidence) < model.abstain_below for s in test]
    assert np.mean([d for d, s in zip(declined, test, strict=True) if not s.answerable]) > 0.9
    assert np.mean([d for d, s in zip(declined, test, strict=True) if s.answerable]) < 0.05
    # Every intent has a cut, each a probability.
    assert set(model.keep_from) == set(relevance.INTENTS)
    assert all(0 < v < 1 for v in model.keep_from.values())


def test_out_of_fold_predictions_never_see_their_own_set() -> None:
    data = samples()
    # Flip every label of one set: a model that saw it would learn the flipped pattern.
    flipped = [
        Sample(s.evidence, s.gold, not s.answerable, s.group) if s.group == "set0" else s
        for s in data
    ]
    oof = out_of_fold(flipped)
    held = [n for n, s in enumerate(flipped) if s.group == "set0"]
    # Predicted as the other sets taught: the flipped labels come out wrong.
    agree = [(oof.answerable[n] >= 0.5) == flipped[n].answerable for n in held]
    assert np.mean(agree) < 0.2


def test_the_threshold_turns_away_at_most_the_allowed_share_of_answerable_questions() -> None:
    data = [Sample(evidence(True, random.Random(i))[0], frozenset(), True, "a") for i in range(100)]
    p = np.linspace(0.01, 0.99, 100)
    cut = choose_abstain(data, p, 0.03)
    assert (p < cut).sum() == 3


def test_an_answers_papers_keep_the_precision_asked_for() -> None:
    data = samples()
    p = [np.array([0.9, 0.6, *[0.1] * 8]) for _ in data]
    cut = choose_cut(data, p, [True] * len(data), 0.85)
    # p1 (0.6) is never gold: only a cut above it keeps all answers precise.
    assert 0.6 < cut <= 0.9
    assert choose_cut(data, p, [True] * len(data), 0.4) <= 0.6


def test_a_topic_word_weighs_more_than_the_words_that_frame_a_list() -> None:
    weights = TermWeights({"paper": 0.05, "work": 0.1, "topic1": 0.9, "topic2": 0.9}, 0.5)
    cut = choose_topic(weights, topic_samples())
    assert weights.weigh("paper", 30, 60) < cut <= weights.weigh("topic2", 2, 60)


def test_model_files_round_trip_and_are_found_home_first(tmp_path: Path) -> None:
    model = RelevanceModel.fit("key", samples(), topic_samples(), {"note": "kept"})
    shipped = tmp_path / "package"
    home = tmp_path / "home"
    model.save(shipped / "key.relevance.json")
    original = relevance.PACKAGE_DIR
    relevance.PACKAGE_DIR = shipped
    try:
        found, warning = relevance.load([home], "key")
        assert found is not None and warning == ""
        assert found.source == shipped / "key.relevance.json"
        ev = samples(1, seed=5)[0].evidence
        assert found.answerability(ev) == pytest.approx(model.answerability(ev))
        assert np.allclose(found.relevance(ev), model.relevance(ev))
        p, answerable = found.judge(ev)
        assert np.allclose(p, model.relevance(ev))
        assert answerable == pytest.approx(model.answerability(ev))
        assert found.info["note"] == "kept"
        # A home's own fit comes first; one for another model is skipped, with the reason.
        model.save(home / "calibration" / "key.relevance.json")
        assert (
            relevance.load([home], "key")[0].source == home / "calibration" / "key.relevance.json"
        )  # type: ignore[union-attr]
        other, warning = relevance.load([home], "other-key")
        assert other is None and "python -m evals.calibrate" in warning
    finally:
        relevance.PACKAGE_DIR = original


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.update(format=99),
        lambda d: d.update(model_key="someone-else"),
        lambda d: d["candidates"].update(coef=[1.0]),
        lambda d: d.update(abstain_below=1.5),
        lambda d: d.pop("keep_from"),
    ],
)
def test_a_damaged_model_file_is_skipped_with_a_warning(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    model = RelevanceModel.fit("key", samples(), topic_samples())
    data = model.to_json()
    damage(data)
    path = tmp_path / "calibration" / "key.relevance.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    found, warning = relevance.load([tmp_path], "key")
    if found is not None:  # the shipped file for this key, if any, is next
        assert found.source != path
    assert str(path) in warning
