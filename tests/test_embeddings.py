"""all-MiniLM-L6-v2 embeddings from the bundled weights, and near-duplicate pairs."""

from __future__ import annotations

import numpy as np
import pytest
from django.test import override_settings

import studies.embeddings
from studies.embeddings import (
    DIMENSION,
    NearDuplicate,
    cosine,
    embed,
    forget_embeddings,
    near_duplicates,
)

CAT = "A cat sits on the mat."
FACTS = "Large language models often state false facts with confidence."
FACTS_PARAPHRASE = "LLMs frequently produce confident but incorrect factual claims."
RECIPE = "The recipe calls for two cups of flour and a pinch of salt."
LONG = " ".join(
    f"Step {i}: the model checks claim number {i} against a retrieved passage." for i in range(60)
)

# The first six dimensions sentence-transformers 6.2 (torch 2.13, CPU) gives for these
# texts with the same weights: they pin our numpy forward pass to the reference one.
REFERENCE = {
    CAT: [0.12654, -0.03285, -0.02906, 0.04441, -0.04345, 0.0321],
    FACTS: [0.04074, -0.03645, 0.03816, 0.05793, 0.01013, 0.03726],
    LONG: [-0.08322, 0.02722, 0.02361, 0.00935, 0.08464, 0.02945],
}


@pytest.fixture(autouse=True)
def _through_the_model(settings):
    """The model's own tests run every text through it: none is answered from the cache
    of vectors (its tests below turn it on)."""
    settings.EMBEDDING_CACHE_SIZE = 0


@pytest.fixture(scope="session")
def vectors() -> dict[str, np.ndarray]:
    texts = [CAT, FACTS, FACTS_PARAPHRASE, RECIPE, LONG]
    with override_settings(EMBEDDING_CACHE_SIZE=0):
        return dict(zip(texts, embed(texts), strict=True))


@pytest.fixture
def encoded(monkeypatch, settings) -> list[str]:
    """The texts the model is asked to encode from here on, with an empty cache of 3."""
    settings.EMBEDDING_CACHE_SIZE = 3
    forget_embeddings()
    model = studies.embeddings._model()
    seen: list[str] = []
    real = type(model).encode

    def spy(self, texts):
        seen.extend(texts)
        return real(self, texts)

    monkeypatch.setattr(type(model), "encode", spy)
    yield seen
    forget_embeddings()


def test_a_text_embedded_again_is_not_encoded_again_and_gets_the_same_vector(encoded, vectors):
    first = embed([CAT, FACTS])
    assert sorted(encoded) == sorted([CAT, FACTS])
    again = embed([FACTS, CAT])
    assert sorted(encoded) == sorted([CAT, FACTS])  # nothing new went through the model
    assert np.array_equal(again, first[::-1])
    assert np.allclose(first, [vectors[CAT], vectors[FACTS]], atol=1e-5)


def test_a_text_repeated_in_one_call_is_encoded_once(encoded):
    rows = embed([RECIPE, CAT, RECIPE, RECIPE])
    assert sorted(encoded) == sorted([RECIPE, CAT])
    assert np.array_equal(rows[0], rows[2]) and np.array_equal(rows[0], rows[3])


def test_an_edited_text_is_encoded_anew(encoded):
    embed([FACTS])
    edited = embed([FACTS + " Often."])
    assert encoded == [FACTS, FACTS + " Often."]
    assert cosine(edited[0], embed([FACTS])[0]) < 1 - 1e-4


def test_the_cache_keeps_the_most_recently_used_texts_up_to_its_size(encoded):
    embed([CAT, FACTS, RECIPE])  # full: 3 of 3
    embed([CAT])  # CAT used last, FACTS now the oldest
    embed([FACTS_PARAPHRASE])  # FACTS leaves
    del encoded[:]
    embed([CAT, RECIPE, FACTS_PARAPHRASE])
    assert encoded == []
    embed([FACTS])
    assert encoded == [FACTS]


def test_changing_a_returned_matrix_does_not_change_what_the_cache_gives(encoded):
    rows = embed([CAT])
    kept = rows.copy()
    rows[:] = 0
    assert np.array_equal(embed([CAT]), kept)


def test_a_cache_of_size_zero_encodes_every_call(encoded, settings):
    settings.EMBEDDING_CACHE_SIZE = 0
    embed([CAT])
    embed([CAT, CAT])
    assert encoded == [CAT, CAT, CAT]


def test_embeddings_match_the_sentence_transformers_reference(vectors):
    for text, expected in REFERENCE.items():
        assert np.allclose(vectors[text][:6], expected, atol=1e-3), text


def test_embeddings_are_unit_length_float32_rows(vectors):
    matrix = np.stack(list(vectors.values()))
    assert matrix.shape == (5, DIMENSION) and matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)


def test_identical_texts_have_cosine_one():
    a, b = embed([FACTS, FACTS])
    assert cosine(a, b) == pytest.approx(1.0, abs=1e-5)


def test_a_paraphrase_scores_higher_than_an_unrelated_text(vectors):
    paraphrase = cosine(vectors[FACTS], vectors[FACTS_PARAPHRASE])
    unrelated = cosine(vectors[FACTS], vectors[RECIPE])
    assert paraphrase > 0.4 > 0.1 > unrelated


def test_batching_and_padding_do_not_change_a_text_embedding(vectors):
    alone = embed([CAT], batch_size=1)[0]
    assert np.allclose(alone, vectors[CAT], atol=1e-5)


def test_text_past_256_word_pieces_is_cut_like_the_reference_model(vectors):
    longer = embed([LONG + " Completely different closing words about astronomy."])[0]
    assert cosine(longer, vectors[LONG]) == pytest.approx(1.0, abs=1e-5)


def test_no_texts_give_an_empty_matrix():
    assert embed([]).shape == (0, DIMENSION)


def test_near_duplicates_finds_a_planted_pair_among_real_ideas():
    ideas = {
        "h1": "Use retrieval to check each factual claim a language model makes.",
        "h2": "Teach models to translate low-resource languages through pivot languages.",
        "a1": "Verify every factual claim of a language model with retrieved documents.",
        "a2": "Generate unit tests to find bugs in code written by language models.",
    }
    vecs = embed(list(ideas.values()))
    pairs = near_duplicates(list(ideas), vecs, threshold=0.8, groups=["Human", "Human", "AI", "AI"])
    assert [(p.id_a, p.id_b, p.scope) for p in pairs] == [("h1", "a1", "across")]
    assert pairs[0].cosine > 0.8


def brute_force(vecs: np.ndarray, threshold: float) -> set[tuple[int, int]]:
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    sims = unit @ unit.T
    n = len(vecs)
    return {(i, j) for i in range(n) for j in range(i + 1, n) if sims[i, j] > threshold}


def test_blockwise_search_finds_the_same_pairs_as_the_full_matrix():
    rng = np.random.default_rng(4)
    base = rng.normal(size=(12, 16))
    vecs = np.vstack([base, base[:5] + rng.normal(scale=0.2, size=(5, 16))])
    pairs = near_duplicates(list(range(len(vecs))), vecs, threshold=0.8, block=4)
    assert {(p.id_a, p.id_b) for p in pairs} == brute_force(vecs, 0.8)
    assert len(pairs) >= 5
    assert [p.cosine for p in pairs] == sorted((p.cosine for p in pairs), reverse=True)


def test_pairs_are_labelled_within_or_across_conditions_and_can_be_filtered():
    v = np.array([[1.0, 0.0], [1.0, 0.01], [1.0, 0.02], [0.0, 1.0]])
    groups = ["Human", "Human", {"AI", "AI_Rerank"}, "AI"]
    pairs = near_duplicates(["a", "b", "c", "d"], v, groups=groups)
    assert {(p.id_a, p.id_b): p.scope for p in pairs} == {
        ("a", "b"): "within",
        ("a", "c"): "across",
        ("b", "c"): "across",
    }
    within = near_duplicates(["a", "b", "c", "d"], v, groups=groups, scope="within")
    assert [(p.id_a, p.id_b) for p in within] == [("a", "b")]
    shared = near_duplicates(["c", "d"], np.array([[1.0, 0], [1.0, 0]]), groups=groups[2:])
    assert shared == [NearDuplicate("c", "d", pytest.approx(1.0), "within")]


def test_the_threshold_is_strict_as_in_si_et_al():
    v = np.array([[1.0, 0.0], [0.8, 0.6]])  # cosine exactly 0.8
    assert near_duplicates(["a", "b"], v, threshold=0.8) == []
    assert len(near_duplicates(["a", "b"], v, threshold=0.79)) == 1


def test_near_duplicates_rejects_mismatched_input():
    with pytest.raises(ValueError, match="expected 3 vectors"):
        near_duplicates(["a", "b", "c"], np.zeros((2, 4)))
    with pytest.raises(ValueError, match="groups has 1 entries"):
        near_duplicates(["a", "b"], np.ones((2, 4)), groups=["x"])
    with pytest.raises(ValueError, match="scope needs groups"):
        near_duplicates(["a", "b"], np.ones((2, 4)), scope="within")
