"""LigBench novelty from similarities, BM25, cosine and the hybrid retrieval score."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judging.methods.novelty import (
    BM25,
    cosine_similarities,
    fuse_novelty,
    hybrid_retrieve,
    hybrid_scores,
    novelty_score,
    similarity_to_novelty,
    tokenize,
    top_k,
    weighted_similarity,
)


def test_weighted_similarity_mixes_the_maximum_and_the_mean():
    # 0.6·0.9 + 0.4·(0.9 + 0.5 + 0.4)/3 = 0.54 + 0.24 = 0.78
    assert weighted_similarity([0.9, 0.5, 0.4]) == pytest.approx(0.78)


def test_weighted_similarity_needs_at_least_one_reference():
    with pytest.raises(ValueError):
        weighted_similarity([])


def test_similarity_at_the_inflection_point_gives_a_neutral_two_and_a_half():
    assert similarity_to_novelty(0.72) == pytest.approx(2.5)


def test_the_similarity_map_matches_the_hand_computation():
    # s_w = 0.78: 5·(1 − 1/(1 + e^(−12·0.06))) = 5·(1 − 1/(1 + e^(−0.72)))
    expected = 5 * (1 - 1 / (1 + math.exp(-0.72)))
    assert similarity_to_novelty(0.78) == pytest.approx(expected)
    assert similarity_to_novelty(0.78) == pytest.approx(1.6370, abs=1e-4)


def test_the_similarity_map_falls_from_five_to_zero_and_never_overflows():
    values = [similarity_to_novelty(s) for s in np.linspace(-1, 1, 41)]
    assert all(a > b for a, b in zip(values, values[1:], strict=False))
    assert 4.9 < similarity_to_novelty(0.0) < 5.0
    assert 0.16 < similarity_to_novelty(1.0) < 0.17  # 5·σ(−3.36)
    assert similarity_to_novelty(1e6) == 0.0
    assert similarity_to_novelty(-1e6) == 5.0


def test_fusion_weights_the_similarity_score_seventy_percent():
    assert fuse_novelty(2.0, 4.0) == pytest.approx(0.7 * 2.0 + 0.3 * 4.0)


def test_the_full_novelty_score_chains_the_three_stages():
    result = novelty_score([0.9, 0.5, 0.4], s_llm=4)
    assert result.s_weighted == pytest.approx(0.78)
    assert result.s_sim == pytest.approx(1.6370, abs=1e-4)
    assert result.novelty == pytest.approx(0.7 * result.s_sim + 0.3 * 4)


def test_an_llm_novelty_outside_zero_to_five_is_refused():
    with pytest.raises(ValueError):
        novelty_score([0.5], s_llm=7)


def test_tokenize_lowercases_and_drops_function_words():
    assert tokenize("The Chain-of-Thought prompting of LLMs!") == [
        "chain-of-thought",
        "prompting",
        "llms",
    ]


def test_bm25_matches_a_hand_computed_score():
    docs = [["cat", "sat"], ["dog", "sat", "down"], ["cat", "cat", "cat", "ran"]]
    bm25 = BM25(docs, k1=1.5, b=0.75)
    # "cat" is in 2 of 3 documents: idf = ln(1 + (3 − 2 + 0.5)/(2 + 0.5)) = ln 1.6.
    # Document 0: tf 1, length 2, avgdl 3: 1·2.5/(1 + 1.5·(0.25 + 0.75·2/3)).
    idf = math.log(1.6)
    expected = idf * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 2 / 3))
    scores = bm25.scores(["cat"])
    assert scores[0] == pytest.approx(expected)
    assert scores[1] == 0.0
    assert scores[2] > scores[0]  # more occurrences win despite the longer document


def test_bm25_on_an_empty_corpus_or_unknown_terms_scores_zero():
    assert BM25([]).scores(["x"]).size == 0
    assert BM25([["a"]]).scores(["zzz"]).tolist() == [0.0]


def test_cosine_similarity_handles_zero_vectors_and_checks_shapes():
    sims = cosine_similarities([1, 0], [[2, 0], [0, 3], [1, 1], [0, 0]])
    assert sims.tolist() == pytest.approx([1.0, 0.0, math.sqrt(0.5), 0.0])
    with pytest.raises(ValueError):
        cosine_similarities([1, 0, 0], [[1, 0]])


def test_the_hybrid_score_weights_cosine_against_bm25_scaled_to_its_best():
    combined = hybrid_scores([4.0, 2.0, 0.0], [0.2, 0.9, -0.5], weight=0.25)
    assert combined.tolist() == pytest.approx(
        [0.25 * 0.2 + 0.75 * 1.0, 0.25 * 0.9 + 0.75 * 0.5, 0.0]
    )
    assert hybrid_scores([0, 0], [0.5, 0.1], weight=0.5).tolist() == [0.25, 0.05]


def test_top_k_returns_the_best_first_and_keeps_input_order_on_ties():
    assert top_k([0.1, 0.9, 0.5, 0.9], 3) == [1, 3, 2]
    assert top_k([0.1, 0.9], 5, ids=["a", "b"]) == ["b", "a"]


def test_hybrid_retrieval_finds_a_paper_by_keywords_or_by_embedding():
    docs = [
        "Retrieval augmented generation for question answering",
        "Protein folding with diffusion models",
        "Tokenizer-free language models",
    ]
    vectors = [[1, 0, 0], [0, 1, 0], [0.1, 0, 1]]
    ids = ["rag", "protein", "tokfree"]
    by_keyword = hybrid_retrieve("protein folding", [0, 0, 1], docs, vectors, ids, k=1, weight=0.2)
    assert by_keyword[0].id == "protein"
    by_vector = hybrid_retrieve("protein folding", [0, 0, 1], docs, vectors, ids, k=1, weight=0.9)
    assert by_vector[0].id == "tokfree"
    assert len(hybrid_retrieve("x", [1, 0, 0], docs, vectors, ids, k=10)) == 3
