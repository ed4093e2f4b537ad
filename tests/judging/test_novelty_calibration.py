"""Novelty's similarity part calibrated to the embedding in use (MiniLM here).

The bands come from the paper's own calibration (LigBench appendix F: k = 12, μ = 0.72 on
PAIR-IQ, whose similarities have mean 0.68 and sd 0.12, Table 13). An idea at PAIR-IQ's
95th percentile of similarity or above (0.68 + 1.645 · 0.12 ≈ 0.877) has s_sim at most
5(1 − σ(12 · 0.157)) ≈ 0.66; at the 5th percentile or below (≈ 0.483) at least ≈ 4.72.
Fused with a neutral judge estimate s_LLM = 2.5 (β = 0.7): a near-duplicate of a known
paper must score at most ≈ 1.21, an idea unrelated to the corpus at least ≈ 4.05.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from judging.corpus import (
    eligible_references,
    reference_corpus_embed,
    reference_corpus_import,
    reference_corpus_retrieve,
    reference_vector,
)
from judging.methods.novelty import (
    MU,
    PAIR_IQ_QUARTILES,
    K,
    calibrate_similarity,
    novelty_score,
    similarity_to_novelty,
)
from judging.methods.registry import method_spec
from judging.services.drivers.ligbench import novelty_calibration

CORPUS = Path(__file__).parent / "data" / "references.json"
P95, P05 = 0.68 + 1.645 * 0.12, 0.68 - 1.645 * 0.12
NEAR_DUPLICATE_MAX = 0.7 * similarity_to_novelty(P95, K, MU) + 0.3 * 2.5
UNRELATED_MIN = 0.7 * similarity_to_novelty(P05, K, MU) + 0.3 * 2.5


def test_the_bands_are_the_papers_calibration_written_down():
    assert abs(NEAR_DUPLICATE_MAX - 1.21) < 0.01
    assert abs(UNRELATED_MIN - 4.05) < 0.01


def test_a_distribution_like_pair_iqs_calibrates_to_the_papers_values():
    # Piecewise-linear quantiles through PAIR-IQ's quartiles: the paper's k and μ come back.
    p25, p50, p75 = PAIR_IQ_QUARTILES
    levels = np.linspace(0, 100, 4001)
    values = np.interp(levels, [0, 25, 50, 75, 100], [0.41, p25, p50, p75, 0.99])
    cal = calibrate_similarity(values)
    assert cal.k == pytest.approx(K, rel=1e-3) and cal.mu == pytest.approx(MU, abs=1e-3)


def test_a_narrower_or_lower_distribution_moves_mu_down_and_steepens_k():
    rng = np.random.default_rng(0)
    cal = calibrate_similarity(rng.normal(0.4, 0.06, 500))  # MiniLM-like related abstracts
    assert cal.mu < 0.5 and cal.k > 2 * K


@pytest.fixture
def calibrated(db):
    corpus = reference_corpus_import(data=CORPUS.read_bytes(), name="ex", filename="refs.json")
    reference_corpus_embed(corpus=corpus)
    papers = list(eligible_references(corpus, ["rating", "contribution", "soundness"]))
    params = method_spec("ligbench").params()
    params.update(seed=0)
    return papers, params, novelty_calibration(papers, params, reference_vector)


def _fused(papers, params, cal, text, s_llm=2.5):
    (hits,) = reference_corpus_retrieve(
        papers=papers,
        queries=[text],
        k=int(params["novelty_references"]),
        weight=float(params["retrieval_weight"]),
    )
    return novelty_score([h.cosine for h in hits], s_llm, k=cal["k"], mu=cal["mu"])


def test_a_near_duplicate_of_a_corpus_paper_lands_in_the_papers_band(calibrated):
    papers, params, cal = calibrated
    assert cal["how"].startswith("quantile matching") and cal["n"] == len(papers)
    for paper in papers[:5]:
        result = _fused(papers, params, cal, paper.formal_text())
        assert 0.0 <= result.novelty <= NEAR_DUPLICATE_MAX, paper.title


def test_an_idea_unrelated_to_the_corpus_lands_in_the_papers_band(calibrated):
    papers, params, cal = calibrated
    unrelated = (
        "Slow-cook a tomato sauce for six hours in a cast-iron pot.\n"
        "Browning the onions first deepens the flavour of the sauce.\n"
        "Garlic, basil and a pinch of sugar balance the acidity.\n"
        "A blind tasting panel compares it with a sauce cooked for one hour."
    )
    result = _fused(papers, params, cal, unrelated)
    assert UNRELATED_MIN <= result.novelty <= 5.0


def test_a_typical_corpus_paper_gets_the_similarity_score_the_paper_gives_its_median(
    calibrated,
):
    papers, params, cal = calibrated
    # The calibration puts a typical related paper near where PAIR-IQ's median paper sits
    # (s_sim ≈ 2.65; the two distributions differ in shape between their quartiles, hence
    # the tolerance), whatever the embedding's own scale.
    q50 = cal["quartiles"][1]
    assert similarity_to_novelty(q50, cal["k"], cal["mu"]) == pytest.approx(
        similarity_to_novelty(PAIR_IQ_QUARTILES[1], K, MU), abs=0.2
    )
