"""LigBench novelty from similarity to retrieved work, and the hybrid retrieval behind it.

Novelty (LigBench appendix F), with similarities s_1…s_N of the idea to N retrieved papers:

    s_w     = α·max(s_i) + (1 − α)·mean(s_i)            α = 0.6
    s_sim   = 5·(1 − 1/(1 + e^(−k(s_w − μ))))           k = 12, μ = 0.72
    novelty = β·s_sim + (1 − β)·s_LLM                   β = 0.7

s_sim falls from 5 to 0 as similarity grows and is 2.5 at s_w = μ. s_LLM is the judge's own
0–5 novelty estimate.

Retrieval (the "keyword + embedding" search LigBench describes without formulas; ours):
a small Okapi BM25 over tokenised texts and the cosine similarity of given embedding
vectors, combined as `w·cos⁺ + (1 − w)·bm25/max(bm25)`. BM25 is divided by its best score
among the candidates so the best keyword match counts 1; cosine keeps its absolute value
(clipped below at 0), because "0.9 similar" means the same thing whatever the other
candidates are. A dozen lines of BM25 are easier to audit than a dependency.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "ALPHA",
    "BETA",
    "K",
    "MU",
    "BM25",
    "PAIR_IQ_QUARTILES",
    "Calibration",
    "Hit",
    "NoveltyScore",
    "cosine_similarities",
    "calibrate_similarity",
    "fuse_novelty",
    "hybrid_retrieve",
    "hybrid_scores",
    "novelty_score",
    "similarity_to_novelty",
    "tokenize",
    "top_k",
    "weighted_similarity",
]

ALPHA = 0.6
K = 12.0
MU = 0.72
BETA = 0.7


PAIR_IQ_QUARTILES = (0.61, 0.71, 0.79)
"""25th, 50th and 75th percentile of the similarities in PAIR-IQ (LigBench Table 13), the
distribution k = 12 and μ = 0.72 were chosen for."""


@dataclass(frozen=True)
class Calibration:
    """k and μ of s_sim for one embedding model and corpus, and what they came from."""

    k: float
    mu: float
    n: int
    quartiles: tuple[float, float, float]
    """Our 25th, 50th, 75th percentile of s_w over the corpus sample."""

    def as_dict(self) -> dict[str, object]:
        return {
            "k": self.k,
            "mu": self.mu,
            "n": self.n,
            "quartiles": list(self.quartiles),
            "paper_quartiles": list(PAIR_IQ_QUARTILES),
            "how": "quantile matching to PAIR-IQ (LigBench Table 13)",
        }


def calibrate_similarity(s_weighted: Sequence[float], k: float = K, mu: float = MU) -> Calibration:
    """k and μ for another embedding, by matching its s_w distribution to PAIR-IQ's.

    `s_weighted` are s_w values of corpus papers against their own most related papers
    (leave-one-out), computed exactly as for an idea. μ moves to the quantile of ours that
    sits where the paper's μ sits in its distribution (between its median and upper
    quartile, by linear interpolation); k is scaled by the ratio of the interquartile
    ranges. An idea as related to the corpus as a typical paper then gets the s_sim it
    would have had under the paper's model and retrieval.
    """
    values = np.asarray([float(v) for v in s_weighted], dtype=float)
    if len(values) < 4:
        raise ValueError("calibration needs at least four papers with related papers")
    q25, q50, q75 = (float(q) for q in np.percentile(values, [25, 50, 75]))
    if q75 <= q25:
        raise ValueError("the corpus similarities have no spread to calibrate on")
    p25, p50, p75 = PAIR_IQ_QUARTILES
    if mu <= p50:
        level = 0.25 + 0.25 * (mu - p25) / (p50 - p25)
    else:
        level = 0.5 + 0.25 * (mu - p50) / (p75 - p50)
    level = min(1.0, max(0.0, level))
    return Calibration(
        k=k * (p75 - p25) / (q75 - q25),
        mu=float(np.percentile(values, 100 * level)),
        n=len(values),
        quartiles=(q25, q50, q75),
    )


def weighted_similarity(similarities: Sequence[float], alpha: float = ALPHA) -> float:
    """s_w = α·max + (1 − α)·mean."""
    sims = [float(s) for s in similarities]
    if not sims:
        raise ValueError("novelty needs at least one retrieved reference")
    return alpha * max(sims) + (1 - alpha) * math.fsum(sims) / len(sims)


def similarity_to_novelty(s_weighted: float, k: float = K, mu: float = MU) -> float:
    """s_sim = 5·(1 − σ(k(s_w − μ))) = 5·σ(−k(s_w − μ)), written to avoid overflow."""
    z = -k * (s_weighted - mu)
    if z >= 0:
        return 5.0 / (1.0 + math.exp(-z))
    ez = math.exp(z)
    return 5.0 * ez / (1.0 + ez)


def fuse_novelty(s_sim: float, s_llm: float, beta: float = BETA) -> float:
    """β·s_sim + (1 − β)·s_LLM."""
    return beta * s_sim + (1 - beta) * s_llm


@dataclass(frozen=True)
class NoveltyScore:
    s_weighted: float
    s_sim: float
    s_llm: float
    novelty: float


def novelty_score(
    similarities: Sequence[float],
    s_llm: float,
    *,
    alpha: float = ALPHA,
    k: float = K,
    mu: float = MU,
    beta: float = BETA,
) -> NoveltyScore:
    if not 0.0 <= s_llm <= 5.0:
        raise ValueError(f"the LLM novelty estimate must be on 0–5, got {s_llm}")
    s_w = weighted_similarity(similarities, alpha)
    s_sim = similarity_to_novelty(s_w, k, mu)
    return NoveltyScore(s_w, s_sim, float(s_llm), fuse_novelty(s_sim, s_llm, beta))


_TOKEN = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")
# fmt: off
_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "for", "from", "has", "have", "in",
    "into", "is", "it", "its", "of", "on", "or", "our", "such", "than", "that", "the", "their",
    "then", "these", "this", "those", "to", "using", "via", "was", "we", "were", "which",
    "will", "with",
})
# fmt: on


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens without common English function words; no stemming."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


class BM25:
    """Okapi BM25 with the non-negative idf ln(1 + (N − n + ½)/(n + ½)).

    Scored through an inverted index (per term: the documents holding it and its counts),
    so a query costs its terms' postings, not a pass over every document; each document's
    sum runs over the query's terms in the same order as a per-document loop would.
    """

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75):
        self.k1, self.b = k1, b
        self.tf = [Counter(doc) for doc in documents]
        self.lengths = [len(doc) for doc in documents]
        n_docs = len(documents)
        self.avgdl = (sum(self.lengths) / n_docs) if n_docs else 0.0
        df: Counter[str] = Counter()
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for i, tf in enumerate(self.tf):
            df.update(tf.keys())
            for term, count in tf.items():
                docs, counts = postings.setdefault(term, ([], []))
                docs.append(i)
                counts.append(count)
        self.idf = {t: math.log(1 + (n_docs - n + 0.5) / (n + 0.5)) for t, n in df.items()}
        self.postings = {
            t: (np.asarray(d, dtype=np.int64), np.asarray(c, dtype=float))
            for t, (d, c) in postings.items()
        }
        lengths = np.asarray(self.lengths, dtype=float)
        self.norm = k1 * (1 - b + b * lengths / self.avgdl) if self.avgdl else np.zeros(n_docs)

    def scores(self, query: Sequence[str]) -> np.ndarray:
        out = np.zeros(len(self.tf))
        if not self.avgdl:
            return out
        for t in [t for t in set(query) if t in self.idf]:
            docs, tf = self.postings[t]
            out[docs] += self.idf[t] * tf * (self.k1 + 1) / (tf + self.norm[docs])
        return out


def cosine_similarities(
    query: ArrayLike, matrix: ArrayLike, row_norms: np.ndarray | None = None
) -> np.ndarray:
    """Cosine of `query` with each row of `matrix`; a zero vector has similarity 0.

    `row_norms` (np.linalg.norm(matrix as float, axis=1)) saves recomputing them when
    many queries meet the same matrix."""
    q = np.asarray(query, dtype=float)
    m = np.asarray(matrix, dtype=float)
    if m.size == 0:
        return np.zeros(0)
    if m.ndim != 2 or m.shape[1] != q.shape[0]:
        raise ValueError(f"shape mismatch: query {q.shape}, matrix {m.shape}")
    if row_norms is None:
        row_norms = np.linalg.norm(m, axis=1)
    norms = row_norms * np.linalg.norm(q)
    dots = m @ q
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def hybrid_scores(bm25_scores: ArrayLike, cosines: ArrayLike, weight: float = 0.5) -> np.ndarray:
    """`weight·max(cos, 0) + (1 − weight)·bm25/max(bm25)` per candidate."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError("weight must lie in [0, 1]")
    kw = np.asarray(bm25_scores, dtype=float)
    cos = np.asarray(cosines, dtype=float)
    if kw.shape != cos.shape:
        raise ValueError("one BM25 score and one cosine per candidate")
    top = kw.max() if kw.size else 0.0
    kw_norm = kw / top if top > 0 else np.zeros_like(kw)
    return weight * np.clip(cos, 0.0, None) + (1 - weight) * kw_norm


def top_k(scores: ArrayLike, k: int, ids: Sequence[Hashable] | None = None) -> list:
    """Indices (or ids) of the k best scores, best first; ties keep the input order."""
    values = np.asarray(scores, dtype=float)
    order = sorted(range(len(values)), key=lambda i: -values[i])[: max(k, 0)]
    return order if ids is None else [ids[i] for i in order]


@dataclass(frozen=True)
class Hit:
    id: Hashable
    score: float
    bm25: float
    cosine: float


def hybrid_retrieve(
    query_text: str,
    query_vector: Sequence[float],
    documents: Sequence[str],
    vectors: Sequence[Sequence[float]],
    ids: Sequence[Hashable],
    *,
    k: int = 10,
    weight: float = 0.5,
) -> list[Hit]:
    """Top-k reference papers for an idea by the hybrid score; all inputs aligned by position."""
    if not len(documents) == len(vectors) == len(ids):
        raise ValueError("documents, vectors and ids must have the same length")
    kw = BM25([tokenize(d) for d in documents]).scores(tokenize(query_text))
    cos = cosine_similarities(query_vector, vectors)
    combined = hybrid_scores(kw, cos, weight)
    return [
        Hit(ids[i], float(combined[i]), float(kw[i]), float(cos[i])) for i in top_k(combined, k)
    ]
