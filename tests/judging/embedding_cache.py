"""Real MiniLM embeddings, computed once per test session per text.

The corpus tests embed the same few dozen texts again and again; on a busy 2-core
machine each batch costs seconds. The vectors are the model's own, only remembered.
"""

from __future__ import annotations

import numpy as np
import pytest

import studies.embeddings

_real = studies.embeddings.embed
_cache: dict[str, np.ndarray] = {}


def _cached(texts, **kw):
    items = [str(t) for t in texts]
    missing = list(dict.fromkeys(t for t in items if t not in _cache))
    if missing:
        for text, vector in zip(missing, _real(missing, **kw), strict=True):
            _cache[text] = vector
    out = np.zeros((len(items), studies.embeddings.DIMENSION), dtype=np.float32)
    for i, t in enumerate(items):
        out[i] = _cache[t]
    return out


@pytest.fixture(autouse=True)
def remembered_embeddings(monkeypatch):
    monkeypatch.setattr(studies.embeddings, "embed", _cached)
