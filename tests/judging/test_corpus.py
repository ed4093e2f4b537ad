"""The LigBench reference corpus: import (all or nothing), venue debiasing, retrieval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from judging.corpus import (
    CorpusImportError,
    reference_corpus_embed,
    reference_corpus_import,
    reference_corpus_parse,
    reference_corpus_retrieve,
)
from judging.models import ReferenceCorpus, ReferencePaper

CORPUS = Path(__file__).parent / "data" / "references.json"


def paper(**over):
    row = {
        "title": "A paper",
        "conference": "ICLR",
        "year": 2024,
        "label": "accept-poster",
        "abstract": "We do a thing.",
        "rating": 3.0,
        "contribute": 2.5,
        "soundness": 2.0,
        "analysis": {
            "main_target": "Do a thing.",
            "core_breakthrough": "A new way.",
            "innovative_methods": ["One.", "Two."],
            "experimental_design": "Test it.",
        },
    }
    row.update(over)
    return row


def test_the_example_corpus_imports_with_venue_debiased_scores(db):
    corpus = reference_corpus_import(data=CORPUS.read_bytes(), name="ours", filename="refs.json")
    papers = list(corpus.papers.all())
    assert len(papers) == 18 and all(p.is_formalised() for p in papers)
    # Each venue holds the same qualities shifted by its own leniency; the mean shift
    # removes the shift exactly, so equal-quality papers get equal debiased scores.
    by_title = {}
    for p in papers:
        by_title.setdefault(round(p.rating_debiased, 6), set()).add(p.venue_key)
    assert all(len(v) == 3 for v in by_title.values()) and len(by_title) == 6
    means = corpus.debias["rating"]["venue_means"]
    assert means["NeurIPS 2024"] - means["ICLR 2024"] == pytest.approx(0.6)
    overall = corpus.debias["rating"]["overall_mean"]
    assert sum(p.rating_debiased for p in papers) / 18 == pytest.approx(overall)
    first = corpus.papers.get(row=1)
    assert first.rating_debiased == pytest.approx(first.rating - means["ICLR 2024"] + overall)
    assert first.innovative_methods.startswith("1. ")


def test_json_lines_and_pair_iq_top_level_parts_are_accepted():
    rows = [paper(title="One"), paper(title="Two", conference="NeurIPS", rating=4.0)]
    flat = paper(title="Three", main_target="T", core_breakthrough="B")
    flat.pop("analysis")
    flat.update(innovative_methods="M", experimental_design="E")
    text = "\n".join(json.dumps(r) for r in [*rows, flat])
    parsed = reference_corpus_parse(data=text, filename="x.jsonl")
    assert [p["title"] for p in parsed.papers] == ["One", "Two", "Three"]
    assert parsed.papers[2]["main_target"] == "T"
    assert parsed.debias["rating"]["counts"] == {"ICLR 2024": 2, "NeurIPS 2024": 1}


def test_bad_rows_are_reported_by_file_row_and_field_and_nothing_is_written(db):
    rows = [
        paper(),
        paper(title=""),
        paper(rating=7.5),
        paper(year="last year"),
        paper(analysis={"main_target": 3}),
        paper(embedding=[0.1, "x"]),
        paper(rating=None, contribute=None, soundness=None),
        "not an object",
    ]
    with pytest.raises(CorpusImportError) as err:
        reference_corpus_import(data=json.dumps(rows), name="bad", filename="bad.json")
    errors = err.value.errors
    assert "bad.json: row 2: title: missing or empty" in errors
    assert any(e.startswith("bad.json: row 3: rating: 7.5 is outside 0–5") for e in errors)
    assert "bad.json: row 4: year: 'last year' is not a year" in errors
    assert "bad.json: row 5: main_target: must be text or a list of strings" in errors
    assert "bad.json: row 6: embedding: must be a non-empty list of numbers" in errors
    assert any(e.startswith("bad.json: row 7: rating: no review score") for e in errors)
    assert "bad.json: row 8: expected an object, got str" in errors
    assert not ReferenceCorpus.objects.exists() and not ReferencePaper.objects.exists()


@pytest.mark.parametrize(
    "data,message",
    [
        (b"", "the file is empty"),
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b'{"papers": 3}', "expected a JSON list"),
    ],
)
def test_unreadable_files_say_why(db, data, message):
    with pytest.raises(CorpusImportError, match=message):
        reference_corpus_import(data=data, name="x", filename="f.json")
    assert not ReferenceCorpus.objects.exists()


def test_embeddings_of_different_lengths_and_repeated_ids_are_refused():
    rows = [paper(embedding=[1.0, 0.0], url="u1"), paper(embedding=[1.0], url="u1")]
    with pytest.raises(CorpusImportError) as err:
        reference_corpus_parse(data=json.dumps(rows), filename="e.json")
    assert "e.json: embedding: rows have different lengths [1, 2]" in err.value.errors
    assert "e.json: row 2: id: 'u1' repeats row 1" in err.value.errors


@pytest.mark.slow
def test_the_import_command_imports_and_reports_errors(db, tmp_path, capsys):
    call_command("import_references", str(CORPUS), "--name", "cmd", "--embed")
    corpus = ReferenceCorpus.objects.get(name="cmd")
    assert corpus.papers.count() == 18 and not corpus.papers.filter(minilm=None).exists()
    assert "18 papers" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([paper(), paper(soundness="high")]))
    with pytest.raises(CommandError, match="bad.json: row 2: soundness: 'high' is not a number"):
        call_command("import_references", str(bad), "--name", "bad")
    assert not ReferenceCorpus.objects.filter(name="bad").exists()


def test_hybrid_retrieval_finds_papers_on_the_same_topic(db):
    corpus = reference_corpus_import(data=CORPUS.read_bytes(), name="ours")
    reference_corpus_embed(corpus=corpus)
    papers = list(corpus.papers.all())
    queries = [
        "Retrieve evidence for each claim a model generates and drop claims without support.",
        "Sample several reasoning chains and keep the answer most of them agree on.",
    ]
    factual, reasoning = reference_corpus_retrieve(papers=papers, queries=queries, k=3)
    titles = {p.pk: p.title for p in papers}
    assert titles[factual[0].id].startswith("Claim-level retrieval")
    assert titles[reasoning[0].id].startswith("Self-consistency")
    assert all("factuality" in titles[h.id] for h in factual[:2])
    assert all("reasoning" in titles[h.id] for h in reasoning[:2])
    assert [h.score for h in factual] == sorted((h.score for h in factual), reverse=True)
    assert all(0 < h.cosine <= 1 and h.score > 0 for h in factual + reasoning)


def test_corpus_names_are_unique_per_owner_and_among_the_shared_ones(db, owner, other_researcher):
    from django.db import IntegrityError, transaction

    data = json.dumps([paper()])
    mine = reference_corpus_import(data=data, name="ICLR", actor=owner)
    # Another researcher's corpus of that name is not looked at: hers is made, silently.
    hers = reference_corpus_import(data=data, name=" ICLR ", actor=other_researcher)
    assert hers.name == "ICLR" and hers.created_by == other_researcher and hers != mine
    with pytest.raises(CorpusImportError) as err:
        reference_corpus_import(data=data, name="ICLR", actor=owner, filename="again.json")
    assert err.value.errors == [
        "again.json: the owner's and the shared corpora include one named 'ICLR' already; "
        "choose another name"
    ]
    shared = reference_corpus_import(data=data, name="ICLR", owner=None)
    assert shared.created_by is None
    with pytest.raises(CorpusImportError, match="a shared corpus named 'ICLR' exists already"):
        reference_corpus_import(data=data, name="ICLR", owner=None)
    # A name the owner's studies list as a shared corpus is taken for the owner too.
    reference_corpus_import(data=data, name="PAIR-IQ", owner=None)
    with pytest.raises(CorpusImportError, match="include one named 'PAIR-IQ' already"):
        reference_corpus_import(data=data, name="PAIR-IQ", actor=other_researcher)
    assert ReferenceCorpus.objects.filter(name="ICLR").count() == 3
    # The database holds the same rule for rows written any other way.
    for created_by in (owner, None):
        with pytest.raises(IntegrityError), transaction.atomic():
            ReferenceCorpus.objects.create(name="ICLR", created_by=created_by)


def test_a_researcher_with_corpora_is_not_deleted_into_sharing_them(db, other_researcher):
    from django.db.models import ProtectedError

    reference_corpus_import(data=json.dumps([paper()]), name="private", actor=other_researcher)
    with pytest.raises(ProtectedError):
        other_researcher.delete()
    assert ReferenceCorpus.objects.get(name="private").created_by == other_researcher
