"""The LigBench reference corpus: import, venue debiasing, embeddings and retrieval.

Public API (keyword-only `<entity>_<action>` functions):

- `reference_corpus_parse(data=, filename=)` → `ParsedCorpus`, or `CorpusImportError`
  listing every problem as "file: row N: field: message"
- `reference_corpus_import(data=, filename=, name=, actor=None, owner=actor, study=None,
  embed=False)` → ReferenceCorpus of `owner` (none: shared); all or nothing
- `reference_corpus_embed(corpus=)` → how many papers got a MiniLM vector
- `reference_corpus_retrieve(corpus=, queries=, k=, weight=)` → hybrid hits per query
- `reference_corpora_for(user)` → the corpora a researcher may use;
  `reference_corpora_of(study)` → the ones a study's team sees and its runs use (its
  owner's and the shared ones)

The file is PAIR-IQ-shaped: a JSON list (or `{"papers": [...]}`, or JSON Lines) of
objects with `title`, `abstract`, `conference` (or `venue`), `year`, `label` (or
`decision`), `rating`, `contribute` (or `contribution`), `soundness` on 0–5, the four
formal parts either under `analysis` or at the top level, and an optional `embedding`.
`innovative_methods` may be a string or a list of strings. Unknown keys are ignored
(PAIR-IQ carries `url`, `keywords`, `primary area`, a `novelty` placeholder).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet

from studies.protocol import jsonsafe
from studies.services.audit import audit

from .methods.elo import debias_by_venue
from .methods.novelty import BM25, Hit, cosine_similarities, hybrid_scores, tokenize, top_k
from .methods.parsing import FORMALISATION_KEYS
from .models import ReferenceCorpus, ReferencePaper

# `owner` not given: the corpus is the actor's.
_ACTOR: Any = object()

__all__ = [
    "CorpusImportError",
    "ParsedCorpus",
    "reference_corpora_for",
    "reference_corpora_of",
    "reference_corpus_embed",
    "reference_corpus_import",
    "reference_corpus_parse",
    "reference_corpus_retrieve",
]

DIMENSIONS = ReferencePaper.DIMENSIONS
_SCORE_KEYS = {
    "rating": ("rating",),
    "contribution": ("contribution", "contribute"),
    "soundness": ("soundness",),
}
MAX_ERRORS = 50


class CorpusImportError(ValueError):
    """The file cannot be imported; `errors` lists each problem with its row and field."""

    def __init__(self, errors: Sequence[str]):
        self.errors = list(errors)
        more = f" (and {len(self.errors) - 5} more)" if len(self.errors) > 5 else ""
        super().__init__("; ".join(self.errors[:5]) + more)


@dataclass
class ParsedCorpus:
    filename: str
    papers: list[dict[str, Any]] = field(default_factory=list)
    """Field values for ReferencePaper, debiased scores included."""
    debias: dict[str, Any] = field(default_factory=dict)


def _records(text: str, filename: str) -> list[tuple[int, Any]]:
    """(row number, object) pairs: a JSON list, {"papers": [...]}, or one object a line."""
    stripped = text.strip()
    if not stripped:
        raise CorpusImportError([f"{filename}: the file is empty"])
    try:
        data = jsonsafe.loads(stripped)
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise CorpusImportError(
                [f"{filename}: not JSON: {whole.msg} at line {whole.lineno}"]
            ) from None
        rows, errors = [], []
        for n, line in lines:
            try:
                rows.append((n, jsonsafe.loads(line)))
            except json.JSONDecodeError as exc:
                errors.append(f"{filename}: line {n}: not JSON: {exc.msg}")
        if errors:
            raise CorpusImportError(errors[:MAX_ERRORS]) from None
        return rows
    if isinstance(data, dict) and "papers" in data:
        data = data["papers"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise CorpusImportError([f"{filename}: expected a JSON list of papers"])
    return list(enumerate(data, 1))


def _text(value: Any) -> str | None:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(f"{n}. {v.strip()}" for n, v in enumerate(value, 1))
    return None


def _parse_row(row: int, obj: Any, where: str) -> tuple[dict[str, Any], list[str]]:
    if not isinstance(obj, dict):
        return {}, [f"{where}: row {row}: expected an object, got {type(obj).__name__}"]
    errors: list[str] = []

    def bad(name: str, message: str) -> None:
        errors.append(f"{where}: row {row}: {name}: {message}")

    out: dict[str, Any] = {"row": row}
    title = obj.get("title")
    if not isinstance(title, str) or not title.strip():
        bad("title", "missing or empty")
    else:
        out["title"] = title.strip()[:1000]
    abstract = _text(obj.get("abstract"))
    if abstract is None:
        bad("abstract", "must be text")
    out["abstract"] = abstract or ""
    venue = obj.get("conference", obj.get("venue"))
    if not isinstance(venue, str) or not venue.strip():
        bad("conference", "missing or empty (the venue is needed for debiasing)")
    else:
        out["venue"] = venue.strip()[:100]
    year = obj.get("year")
    if year is None or year == "":
        out["year"] = None
    elif isinstance(year, bool) or not (
        isinstance(year, int) or (isinstance(year, str) and year.strip().isdigit())
    ):
        bad("year", f"{year!r} is not a year")
    elif not 1900 <= int(year) <= 2100:
        bad("year", f"{year!r} is not a plausible year")
    else:
        out["year"] = int(year)
    decision = obj.get("label", obj.get("decision", ""))
    out["decision"] = str(decision or "")[:100]
    ident = obj.get("id", obj.get("url", ""))
    out["external_id"] = str(ident or "")[:500]
    present = scored_badly = 0
    for dim, keys in _SCORE_KEYS.items():
        key = next((k for k in keys if k in obj), keys[0])
        value = obj.get(key)
        if value is None or value == "":
            out[dim] = None
            continue
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            bad(key, f"{value!r} is not a number")
            scored_badly += 1
            continue
        try:
            number = float(value)
        except ValueError:
            bad(key, f"{value!r} is not a number")
            scored_badly += 1
            continue
        if math.isnan(number) or not 0.0 <= number <= 5.0:
            bad(key, f"{value!r} is outside 0–5 (project scores onto LigBench's 0–5 first)")
            scored_badly += 1
            continue
        out[dim] = number
        present += 1
    if present == 0 and not scored_badly:
        bad("rating", "no review score (rating, contribution or soundness) is given")
    analysis = obj.get("analysis")
    if analysis is not None and not isinstance(analysis, dict):
        bad("analysis", "must be an object with the four formal parts")
        analysis = None
    source = analysis if analysis is not None else obj
    for part in FORMALISATION_KEYS:
        value = _text(source.get(part))
        if value is None:
            bad(part, "must be text or a list of strings")
        out[part] = value or ""
    emb = obj.get("embedding")
    if emb is not None:
        if (
            not isinstance(emb, list)
            or not emb
            or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in emb)
        ):
            bad("embedding", "must be a non-empty list of numbers")
        else:
            out["embedding"] = [float(x) for x in emb]
    return out, errors


def reference_corpus_parse(*, data: bytes | str, filename: str = "corpus.json") -> ParsedCorpus:
    """Check every row and debias the scores; raises `CorpusImportError` with all problems."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise CorpusImportError([f"{filename}: not UTF-8 text ({exc.reason})"]) from None
    else:
        text = data
    records = _records(text, filename)
    if not records:
        raise CorpusImportError([f"{filename}: no papers in the file"])
    papers, errors = [], []
    for row, obj in records:
        paper, problems = _parse_row(row, obj, filename)
        errors += problems
        papers.append(paper)
        if len(errors) >= MAX_ERRORS:
            break
    dims = {len(p["embedding"]) for p in papers if "embedding" in p}
    if len(dims) > 1:
        errors.append(f"{filename}: embedding: rows have different lengths {sorted(dims)}")
    seen: dict[str, int] = {}
    for p in papers:
        ext = p.get("external_id")
        if ext:
            if ext in seen:
                errors.append(f"{filename}: row {p['row']}: id: {ext!r} repeats row {seen[ext]}")
            seen.setdefault(ext, p["row"])
    if errors:
        raise CorpusImportError(errors[:MAX_ERRORS])
    parsed = ParsedCorpus(filename=filename, papers=papers)
    for p in papers:
        p["venue_key"] = f"{p['venue']} {p['year']}" if p.get("year") else p["venue"]
    for dim in DIMENSIONS:
        scores = {p["row"]: p[dim] for p in papers}
        venues = {p["row"]: p["venue_key"] for p in papers}
        if all(v is None for v in scores.values()):
            for p in papers:
                p[f"{dim}_debiased"] = None
            continue
        result = debias_by_venue(scores, venues)
        for p in papers:
            p[f"{dim}_debiased"] = result.adjusted[p["row"]]
        parsed.debias[dim] = {
            "venue_means": result.venue_means,
            "overall_mean": result.overall_mean,
            "counts": result.counts,
        }
    return parsed


def reference_corpus_import(
    *,
    data: bytes | str,
    name: str,
    filename: str = "corpus.json",
    actor: Any = None,
    owner: Any = _ACTOR,
    study: Any = None,
    description: str = "",
    embed: bool = False,
) -> ReferenceCorpus:
    """Create a corpus from a PAIR-IQ-style file, all rows or none.

    The corpus is `owner`'s (by default the actor's; nobody's: shared with every
    researcher): imported on a study's page it is the study owner's, which is whose
    corpora the study's runs use, and the study's audit log names who imported it.

    A name must differ from the owner's other corpora and from the shared ones, the
    corpora the owner's studies list (study files match corpora by owner and name); a
    shared corpus's name only from the other shared ones. Another researcher's corpora
    are never looked at, so a name they use is accepted and nothing tells of it."""
    name = name.strip()
    if not name:
        raise CorpusImportError([f"{filename}: the corpus needs a name"])
    owner = actor if owner is _ACTOR else owner
    owner = owner if getattr(owner, "pk", None) else None
    taken = CorpusImportError(
        [
            f"{filename}: a shared corpus named {name!r} exists already"
            if owner is None
            else f"{filename}: the owner's and the shared corpora include one named {name!r} "
            "already; choose another name"
        ]
    )
    # Only what the owner's studies list anyway: the owner's corpora and the shared ones.
    listed = (
        reference_corpora_for(owner) if owner else ReferenceCorpus.objects.filter(created_by=None)
    )
    if listed.filter(name=name).exists():
        raise taken
    parsed = reference_corpus_parse(data=data, filename=filename)
    with transaction.atomic():
        try:
            with transaction.atomic():
                corpus = ReferenceCorpus.objects.create(
                    name=name,
                    source=filename[:500],
                    description=description,
                    debias=parsed.debias,
                    created_by=owner,
                )
        except IntegrityError:  # the same name, imported at the same moment
            raise taken from None
        if study is not None:
            audit(
                study=study,
                actor=actor,
                verb="reference_corpus_imported",
                corpus=corpus.pk,
                name=name,
                papers=len(parsed.papers),
            )
        ReferencePaper.objects.bulk_create(
            [
                ReferencePaper(corpus=corpus, **{k: v for k, v in p.items() if k != "venue_key"})
                for p in parsed.papers
            ],
            batch_size=500,
        )
    if embed:
        reference_corpus_embed(corpus=corpus)
    return corpus


def reference_corpus_embed(*, corpus: ReferenceCorpus, batch: int = 256) -> int:
    """Give every paper without one a MiniLM vector of its four parts; returns how many."""
    from studies.embeddings import embed

    missing = list(corpus.papers.filter(minilm__isnull=True).order_by("row"))
    for start in range(0, len(missing), batch):
        chunk = missing[start : start + batch]
        vectors = embed([p.formal_text() for p in chunk])
        for paper, vector in zip(chunk, vectors, strict=True):
            paper.minilm = np.asarray(vector, dtype=np.float32).tobytes()
        ReferencePaper.objects.bulk_update(chunk, ["minilm"])
    return len(missing)


def reference_vector(paper: ReferencePaper) -> np.ndarray:
    return np.frombuffer(bytes(paper.minilm or b""), dtype=np.float32)


def eligible_references(corpus: ReferenceCorpus, dimensions: Sequence[str]) -> QuerySet:
    """Papers a judge can compare against: all four parts and a debiased score per dimension."""
    qs = corpus.papers.all()
    for part in FORMALISATION_KEYS:
        qs = qs.exclude(**{part: ""})
    for dim in dimensions:
        qs = qs.filter(**{f"{dim}_debiased__isnull": False})
    return qs.order_by("row")


def reference_corpus_retrieve(
    *,
    papers: Sequence[ReferencePaper],
    queries: Sequence[str],
    k: int,
    weight: float = 0.5,
    exclude: Sequence[int | None] | None = None,
    query_vectors: np.ndarray | None = None,
) -> list[list[Hit]]:
    """The k most related papers for each query text: BM25 + MiniLM cosine (novelty module).

    Papers must have their MiniLM vectors (`reference_corpus_embed`). `exclude[i]` is a
    paper id never returned for query i (a paper is not its own neighbour).
    `query_vectors` saves embedding queries whose vectors are known (papers as queries).
    """
    from studies.embeddings import embed

    if not papers or not queries:
        return [[] for _ in queries]
    # The pieces of `hybrid_retrieve`, with the BM25 index built once for all queries.
    bm25 = BM25([tokenize(p.formal_text()) for p in papers])
    vectors = np.vstack([reference_vector(p) for p in papers]).astype(float)
    row_norms = np.linalg.norm(vectors, axis=1)
    ids = [p.pk for p in papers]
    if query_vectors is None:
        query_vectors = embed(list(queries))
    out = []
    for n, (text, vector) in enumerate(zip(queries, query_vectors, strict=True)):
        skip = exclude[n] if exclude else None
        kw = bm25.scores(tokenize(text))
        cos = cosine_similarities(vector, vectors, row_norms)
        combined = hybrid_scores(kw, cos, weight)
        if skip is not None:
            combined[ids.index(skip)] = -np.inf
        out.append(
            [
                Hit(ids[i], float(combined[i]), float(kw[i]), float(cos[i]))
                for i in top_k(combined, k)
                if ids[i] != skip
            ]
        )
    return out


def reference_corpora_for(user: Any) -> QuerySet[ReferenceCorpus]:
    """Corpora a researcher may use: their own and shared ones (imported by nobody)."""
    uid = getattr(user, "pk", None) or 0
    return ReferenceCorpus.objects.filter(Q(created_by_id=uid) | Q(created_by__isnull=True))


def reference_corpora_of(study: Any) -> QuerySet[ReferenceCorpus]:
    """The corpora a study's team sees and its runs use: its owner's and the shared ones,
    whoever of the team looks (never the looker's own other corpora)."""
    return reference_corpora_for(study.owner)
