"""Style leakage: can an idea's source (human or AI) be told from its text alone?

Si et al. normalised every idea's style so that reviewers judge ideas, not write-ups, and
checked that human judges could no longer tell the sources apart. This module gives the
owner the mechanical version of that check, before and after normalization: a
cross-validated classifier that tries to predict the condition kind (AI = positive) from
the text, scored by the AUC of its out-of-fold probabilities.

- Features: simple stylistic measures (length, sentence length, punctuation, bullet,
  heading and capitalisation rates, type-token ratio, …) plus character n-gram TF-IDF
  (case kept, so capitalisation habits show up too).
- Model: L2 logistic regression with balanced class weights; stratified k-fold, seeded.
- AUC: out-of-fold probabilities; a 95 % CI from a stratified bootstrap of the ideas
  (seeded); a one-sided permutation p (labels shuffled, the whole cross-validation
  refitted each time) against "no better than chance".

The feature transforms (TF-IDF vocabulary and weights, the scaler of the stylistic
features) are fitted once on all texts. They never see a label, so no label information
reaches a test fold, and it makes the permutation test affordable: each permutation
refits only the classifiers.

`auc_with_ci` scores any fixed guesses the same way: people's, or an LLM's asked with
`source_guess_messages` and read with `parse_source_guess`.

Pure: numpy, scipy and scikit-learn; no Django.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import sparse
from scipy.stats import rankdata

from .rounding import counted, interval_text

if TYPE_CHECKING:
    from .frame import Progress

__all__ = [
    "STYLE_FEATURES",
    "AUCEstimate",
    "LeakageError",
    "LeakageResult",
    "SOURCE_GUESS_PROMPT",
    "SOURCE_GUESS_PROMPT_VERSION",
    "auc_score",
    "auc_with_ci",
    "check_sample",
    "encode_labels",
    "leakage_classifier",
    "max_folds",
    "parse_source_guess",
    "reading",
    "source_guess_messages",
    "style_features",
    "style_matrix",
    "verdict",
]


MIN_FOLDS = 2
DEFAULT_FOLDS = 5

STYLE_FEATURES: tuple[str, ...] = (
    "log words",
    "mean sentence length",
    "sentence length spread",
    "mean word length",
    "type-token ratio",
    "commas per word",
    "colons and semicolons per word",
    "parentheses per word",
    "dashes per word",
    "quotes per word",
    "digits per char",
    "bullet lines",
    "numbered lines",
    "heading lines",
    "bold markers per line",
    "capital letters",
    "capitalised words",
    "lines starting lowercase",
    "lines ending without punctuation",
    "blank lines",
    "words per line",
)

_WORD = re.compile(r"[A-Za-z\u00C0-\u024F0-9]+(?:['\u2019-][A-Za-z0-9]+)*")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_BULLET = re.compile(r"^\s*[-*+\u2022\u2023\u25e6]\s+")
_NUMBERED = re.compile(r"^\s*(?:\(?\d+[.)]|step\s+\d+\s*[:.])\s*", re.IGNORECASE)
_HEADING = re.compile(r"^\s{0,3}(?:#{1,6}\s|\*\*[^*]+\*\*\s*:?\s*$|__[^_]+__\s*:?\s*$)")


class LeakageError(ValueError):
    """The sample cannot support the analysis; the message says why, for the owner."""


def style_features(text: str) -> list[float]:
    """The measures of :data:`STYLE_FEATURES` for one text, in that order."""
    text = text.replace("\r\n", "\n")
    words = _WORD.findall(text)
    n_words = len(words)
    w = max(n_words, 1)
    chars = max(len(text), 1)
    lines = text.split("\n")
    content = [ln for ln in lines if ln.strip()]
    n_lines = max(len(content), 1)
    sentences = [s for s in _SENTENCE_SPLIT.split(text) if _WORD.search(s)]
    lengths = np.array([len(_WORD.findall(s)) for s in sentences] or [0], dtype=float)
    letters = [c for c in text if c.isalpha()]
    head = [wd.lower() for wd in words[:300]]
    starts = [ln.lstrip(" \t-*+#>0123456789.)(\u2022") for ln in content]
    return [
        math.log1p(n_words),
        float(lengths.mean()),
        float(lengths.std()),
        float(np.mean([len(wd) for wd in words])) if words else 0.0,
        len(set(head)) / max(len(head), 1),
        text.count(",") / w,
        (text.count(":") + text.count(";")) / w,
        (text.count("(") + text.count(")")) / w,
        (text.count(" - ") + text.count("\u2013") + text.count("\u2014") + text.count("--")) / w,
        sum(text.count(q) for q in "\"'\u201c\u201d\u2018\u2019") / w,
        sum(c.isdigit() for c in text) / chars,
        sum(bool(_BULLET.match(ln)) for ln in content) / n_lines,
        sum(bool(_NUMBERED.match(ln)) for ln in content) / n_lines,
        sum(bool(_HEADING.match(ln)) for ln in content) / n_lines,
        (text.count("**") + text.count("__")) / 2 / n_lines,
        sum(c.isupper() for c in letters) / max(len(letters), 1),
        sum(wd[0].isupper() for wd in words) / w,
        sum(s[:1].islower() for s in starts) / n_lines,
        sum(not ln.rstrip().endswith((".", "!", "?", ":")) for ln in content) / n_lines,
        sum(not ln.strip() for ln in lines) / max(len(lines), 1),
        n_words / n_lines,
    ]


def style_matrix(texts: Sequence[str]) -> np.ndarray:
    return np.array([style_features(t) for t in texts], dtype=float).reshape(
        len(texts), len(STYLE_FEATURES)
    )


def encode_labels(labels: Sequence[Any]) -> np.ndarray:
    """1 for AI, 0 for human: accepts "ai"/"human" (any case), booleans or 0/1."""
    out = []
    for label in labels:
        if isinstance(label, str):
            key = label.strip().lower()
            if key not in ("ai", "human"):
                raise LeakageError(f"a label is {label!r}: expected 'ai' or 'human'")
            out.append(int(key == "ai"))
        else:
            value = int(label)
            if value not in (0, 1):
                raise LeakageError(f"a label is {label!r}: expected 0 (human) or 1 (AI)")
            out.append(value)
    return np.asarray(out, dtype=int)


def max_folds(labels: Sequence[Any], *, limit: int = DEFAULT_FOLDS) -> int:
    """The most folds (up to `limit`) that leave ≥ 2 ideas of each class per test fold;
    0 when even two folds cannot."""
    y = encode_labels(labels)
    smaller = int(min((y == 1).sum(), (y == 0).sum())) if len(y) else 0
    k = min(limit, smaller // 2)
    return k if k >= MIN_FOLDS else 0


def check_sample(texts: Sequence[str], labels: Sequence[Any], folds: int) -> np.ndarray:
    """Raise `LeakageError` when the sample cannot support `folds`-fold CV; else the labels."""
    if len(texts) != len(labels):
        raise LeakageError(f"{len(texts)} texts but {len(labels)} labels")
    if folds < MIN_FOLDS:
        raise LeakageError(f"cross-validation needs at least {MIN_FOLDS} folds, not {folds}")
    y = encode_labels(labels)
    n_ai, n_human = int((y == 1).sum()), int((y == 0).sum())
    need = 2 * folds
    if n_ai < need or n_human < need:
        raise LeakageError(
            f"{folds}-fold cross-validation needs at least {need} ideas of each source "
            f"(2 × {folds}, so every test fold holds two of each); there are {n_human} "
            f"human and {counted(n_ai, 'AI idea')}"
        )
    empty = sum(1 for t in texts if not (t or "").strip())
    if empty:
        raise LeakageError(f"{counted(empty, 'idea')} {'has' if empty == 1 else 'have'} no text")
    return y


# --------------------------------------------------------------------------- AUC


def auc_score(y: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC by the rank-sum (ties count half); NaN with only one class."""
    y = np.asarray(y, dtype=int)
    n1, n0 = int(y.sum()), int(len(y) - y.sum())
    if not n1 or not n0:
        return float("nan")
    ranks = rankdata(np.asarray(scores, dtype=float))
    return float((ranks[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _bootstrap_ci(
    y: np.ndarray, scores: np.ndarray, *, n: int, seed: int, level: float
) -> tuple[float, float]:
    """Percentile CI from resampling ideas within each class (both classes always present)."""
    if n <= 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    n1, n0 = len(pos), len(neg)
    idx = np.hstack(
        [rng.choice(pos, size=(n, n1), replace=True), rng.choice(neg, size=(n, n0), replace=True)]
    )
    ranks = rankdata(scores[idx], axis=1)
    aucs = (ranks[:, :n1].sum(axis=1) - n1 * (n1 + 1) / 2) / (n1 * n0)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(aucs, [alpha, 1 - alpha])
    return float(lo), float(hi)


@dataclass(frozen=True)
class AUCEstimate:
    auc: float
    ci_low: float
    ci_high: float
    p_value: float
    n_ai: int
    n_human: int
    n_bootstrap: int
    n_permutations: int
    level: float = 0.95


def auc_with_ci(
    labels: Sequence[Any],
    scores: Sequence[float],
    *,
    n_bootstrap: int = 2000,
    n_permutations: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> AUCEstimate:
    """AUC of fixed scores or guesses (higher = more likely AI), with a bootstrap CI and a
    one-sided permutation p. For guesses from people or an LLM, where nothing is fitted."""
    y = encode_labels(labels)
    s = np.asarray(scores, dtype=float)
    if len(s) != len(y):
        raise LeakageError(f"{len(s)} scores but {len(y)} labels")
    if not (y == 1).any() or not (y == 0).any():
        raise LeakageError("the AUC needs ideas of both sources")
    auc = auc_score(y, s)
    lo, hi = _bootstrap_ci(y, s, n=n_bootstrap, seed=seed, level=level)
    rng = np.random.default_rng(seed + 1)
    ranks = rankdata(s)
    n1, n0 = int(y.sum()), int(len(y) - y.sum())
    hits = 0
    for _ in range(n_permutations):
        perm = rng.permutation(y)
        hits += (ranks[perm == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0) >= auc - 1e-12
    p = (1 + hits) / (1 + n_permutations) if n_permutations else float("nan")
    return AUCEstimate(auc, lo, hi, float(p), n1, n0, n_bootstrap, n_permutations, level)


# --------------------------------------------------------------------------- classifier


@dataclass
class LeakageResult:
    """One cross-validated leakage estimate; `to_dict` / `from_dict` round-trip via JSON."""

    name: str
    n: int
    n_ai: int
    n_human: int
    folds: int
    seed: int
    features: str
    auc: float
    ci_low: float
    ci_high: float
    p_value: float
    balanced_accuracy: float
    n_bootstrap: int
    n_permutations: int
    level: float = 0.95
    roc: list[tuple[float, float]] = field(default_factory=list)
    tells_ai: list[tuple[str, float]] = field(default_factory=list)
    tells_human: list[tuple[str, float]] = field(default_factory=list)
    verdict: str = ""

    def to_dict(self) -> dict[str, Any]:
        # JSON has no NaN: a p-value not computed (no permutations) is stored as None.
        return {
            k: None if isinstance(v, float) and math.isnan(v) else v
            for k, v in asdict(self).items()
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LeakageResult:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("auc", "ci_low", "ci_high", "p_value", "balanced_accuracy"):
            if known.get(key) is None:
                known[key] = float("nan")
        for key in ("roc", "tells_ai", "tells_human"):
            known[key] = [tuple(x) for x in known.get(key) or []]
        return cls(**known)


#: An AUC from which the source is easy to see; 0.5 is chance.
EASY_AUC = 0.8
OFTEN_AUC = 0.7
#: Fewer ideas than this in a source make a small sample, and the reading says so.
SMALL_SOURCE = 10


def reading(auc: float, ci_low: float, ci_high: float) -> str:
    """Where the estimate and its interval lie: ``not_computed``, ``below_chance``,
    ``too_few`` (the interval runs from chance to easy separation), ``chance`` (it holds
    chance but not easy separation), ``slight``, ``often`` or ``easy`` (it excludes
    chance and the estimate is at or above :data:`EASY_AUC`)."""
    if any(math.isnan(x) for x in (auc, ci_low, ci_high)):
        return "not_computed"
    if ci_high < 0.5:
        return "below_chance"
    if ci_low <= 0.5:
        return "too_few" if ci_high >= EASY_AUC else "chance"
    if auc >= EASY_AUC:
        return "easy"
    return "often" if auc >= OFTEN_AUC else "slight"


def verdict(
    auc: float,
    ci_low: float,
    ci_high: float,
    *,
    n_ai: int | None = None,
    n_human: int | None = None,
) -> str:
    """Plain words for the owner, following the interval and the sample size."""
    kind = reading(auc, ci_low, ci_high)
    smaller = min(n_ai, n_human) if n_ai is not None and n_human is not None else None
    per_source = (
        f"{smaller} idea{'s' if smaller != 1 else ''} in the smaller source"
        if smaller is not None
        else ""
    )
    small = smaller is not None and smaller < SMALL_SOURCE
    interval = interval_text(ci_low, ci_high, 2) if kind != "not_computed" else ""
    if kind == "not_computed":
        return "not computed"
    if kind == "below_chance" and small:
        # Cross-validation on a small balanced sample pulls the AUC below 0.5 by itself:
        # each held-out fold leaves the training folds tilted towards the other source.
        # Correct labels give such an AUC often, so it is no sign that they are wrong.
        return (
            f"below chance, with {per_source}: a known small-sample effect of "
            "cross-validation, not a sign that the labels are wrong; check them only if "
            "the AUC stays below chance with more ideas"
        )
    if kind == "below_chance":
        return "below chance: the classifier is systematically wrong (check the labels)"
    if kind == "too_few":
        return (
            f"too few ideas to tell: the interval ({interval}) runs from chance to easy "
            "separation"
            + (f", with {per_source}" if per_source else "")
            + "; more ideas, or people's guesses, would settle it"
        )
    if kind == "chance":
        return (
            "no better than chance: the classifier cannot tell the sources apart (the "
            f"interval, {interval}, stays below easy separation)"
            + (f"; a small sample ({per_source})" if small else "")
        )
    if kind == "easy":
        return (
            "easy to tell apart: the source shows in the style"
            + (f" (even with only {per_source})" if small else "")
            + "; normalization has not hidden it"
        )
    if kind == "often":
        return "the source can often be told from the style" + (
            f" (a small sample: {per_source})" if small else ""
        )
    return "the source can be told slightly better than chance" + (
        f" (a small sample: {per_source})" if small else ""
    )


def _features(texts: Sequence[str], kind: str) -> tuple[sparse.csr_matrix, list[str]]:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import StandardScaler

    blocks: list[sparse.csr_matrix] = []
    names: list[str] = []
    if kind in ("both", "style"):
        style = StandardScaler().fit_transform(style_matrix(texts))
        blocks.append(sparse.csr_matrix(np.nan_to_num(style)))
        names += [f"style: {n}" for n in STYLE_FEATURES]
    if kind in ("both", "ngrams"):
        vec = TfidfVectorizer(
            analyzer="char_wb",
            ngram_range=(2, 4),
            lowercase=False,
            min_df=2,
            max_features=20000,
            sublinear_tf=True,
        )
        try:
            blocks.append(vec.fit_transform(texts).tocsr())
        except ValueError:  # no n-gram occurs twice: nothing to learn from there
            pass
        else:
            names += [f"characters {g!r}" for g in vec.get_feature_names_out()]
    if not blocks:
        raise LeakageError(f"unknown feature set {kind!r}: use both, style or ngrams")
    return sparse.hstack(blocks, format="csr"), names


def _model() -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=1.0, solver="liblinear", class_weight="balanced", max_iter=2000)


def _oof(x: sparse.csr_matrix, y: np.ndarray, folds: int, seed: int) -> np.ndarray:
    from sklearn.model_selection import StratifiedKFold

    out = np.zeros(len(y), dtype=float)
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(x, y):
        model = _model().fit(x[train], y[train])
        out[test] = model.predict_proba(x[test])[:, 1]
    return out


def _roc_points(y: np.ndarray, scores: np.ndarray, limit: int = 80) -> list[tuple[float, float]]:
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(y, scores)
    if len(fpr) > limit:
        keep = np.unique(np.linspace(0, len(fpr) - 1, limit).round().astype(int))
        fpr, tpr = fpr[keep], tpr[keep]
    return [(round(float(a), 4), round(float(b), 4)) for a, b in zip(fpr, tpr, strict=True)]


def leakage_classifier(
    texts: Sequence[str],
    labels: Sequence[Any],
    *,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
    n_bootstrap: int = 2000,
    n_permutations: int = 200,
    features: str = "both",
    level: float = 0.95,
    name: str = "",
    progress: Progress | None = None,
    tells: int = 6,
) -> LeakageResult:
    """Cross-validated AUC of telling AI (positive) from human texts.

    `progress(done, total, message)` is called after the main fit and after every
    permutation. Raises `LeakageError` for samples too small for `folds` folds.
    """
    y = check_sample(texts, labels, folds)
    x, names = _features(list(texts), features)
    total = 1 + n_permutations
    scores = _oof(x, y, folds, seed)
    auc = auc_score(y, scores)
    lo, hi = _bootstrap_ci(y, scores, n=n_bootstrap, seed=seed, level=level)
    predicted = scores >= 0.5
    balanced = float((predicted[y == 1].mean() + (~predicted[y == 0]).mean()) / 2)
    if progress:
        progress(1, total, f"{name or 'texts'}: AUC {auc:.3f}; permutations")
    rng = np.random.default_rng(seed + 1)
    hits = 0
    for i in range(n_permutations):
        perm = rng.permutation(y)
        hits += auc_score(perm, _oof(x, perm, folds, seed + 1 + i)) >= auc - 1e-12
        if progress:
            progress(2 + i, total, f"{name or 'texts'}: permutation {i + 1} of {n_permutations}")
    p = (1 + hits) / (1 + n_permutations) if n_permutations else float("nan")

    coef = _model().fit(x, y).coef_.ravel()
    order = np.argsort(coef)
    top_ai = [(names[j], round(float(coef[j]), 3)) for j in order[::-1][:tells] if coef[j] > 0]
    top_human = [(names[j], round(float(coef[j]), 3)) for j in order[:tells] if coef[j] < 0]
    return LeakageResult(
        name=name,
        n=len(y),
        n_ai=int(y.sum()),
        n_human=int(len(y) - y.sum()),
        folds=folds,
        seed=seed,
        features=features,
        auc=round(auc, 4),
        ci_low=round(lo, 4),
        ci_high=round(hi, 4),
        p_value=float(p),
        balanced_accuracy=round(balanced, 4),
        n_bootstrap=n_bootstrap,
        n_permutations=n_permutations,
        level=level,
        roc=_roc_points(y, scores),
        tells_ai=top_ai,
        tells_human=top_human,
        verdict=verdict(auc, lo, hi, n_ai=int(y.sum()), n_human=int(len(y) - y.sum())),
    )


# --------------------------------------------------------------------------- an LLM's guess

SOURCE_GUESS_PROMPT_VERSION = "ideareview-source-guess-v1"
SOURCE_GUESS_PROMPT = """\
You are auditing a blind review study of research proposals. Each proposal was written \
either by a human researcher or by an AI system, and was then edited into a common \
format. Judge from the writing alone how likely it is that an AI system wrote the \
proposal you are given.

Reply with one line and nothing else: "AI probability: N", where N is a whole number \
from 0 (certainly a human) to 100 (certainly an AI system).
"""

_GUESS = re.compile(r"AI\s+probability\s*[:=]\s*(\d{1,3}(?:\.\d+)?)\s*%?", re.IGNORECASE)


def source_guess_messages(text: str) -> list[dict[str, str]]:
    """Chat messages asking an OpenAI-compatible model for P(AI) of one proposal.

    Parameters
    ----------
    text
        The proposal as the reviewers read it.

    Returns
    -------
    list of dict
        ``{"role", "content"}`` messages, the chat API's own format (sent as they are).
    """
    return [
        {"role": "system", "content": SOURCE_GUESS_PROMPT},
        {"role": "user", "content": f"Proposal:\n<<<\n{text.strip()}\n>>>"},
    ]


def parse_source_guess(answer: str) -> float | None:
    """The model's P(AI) in [0, 1], or None when the answer does not give one."""
    matches = _GUESS.findall(answer or "")
    if not matches:
        return None
    value = float(matches[-1])
    return value / 100 if 0 <= value <= 100 else None
