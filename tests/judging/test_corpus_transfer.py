"""Reference corpora in study files: two researchers may name their corpora alike, and a
study file finds its own owner's corpus wherever it is imported (the same database after
the study was deleted, or an empty one), with its runs pointing at that corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from judging.corpus import reference_corpus_import
from judging.models import JudgeRun, ReferenceComparison, ReferenceCorpus
from judging.services import judge_run_create, judge_run_execute
from studies.models import Study
from studies.services.study import study_delete, study_export, study_import
from studies.services.transfer import TransferError
from tests.judging.conftest import make_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CORPUS = Path(__file__).parent / "data" / "references.json"


def _study_with_a_validation_run(username, slug, judge):
    user = get_user_model().objects.create(username=username)
    corpus = reference_corpus_import(
        data=CORPUS.read_bytes(), name="refs", description=f"{username}'s", actor=user
    )
    study = make_study(user, slug=slug)
    run = judge_run_execute(
        run=judge_run_create(study=study, method="validation", config=judge, params={"pairs": 2})
    )
    assert run.status == JudgeRun.Status.DONE, run.message
    assert run.params["corpus"] == run.summary["corpus"] == corpus.pk
    return study


def _uses_its_owners_corpus(slug):
    """The study's run, its summary and every paper it compared are its owner's "refs"."""
    study = Study.objects.get(slug=slug)
    run = JudgeRun.objects.get(study=study)
    corpus = ReferenceCorpus.objects.get(pk=run.params["corpus"])
    assert corpus.name == "refs" and corpus.created_by == study.owner
    assert corpus.description == f"{study.owner.username}'s"
    assert run.summary["corpus"] == corpus.pk
    compared = ReferenceComparison.objects.filter(run=run)
    assert compared.exists()
    for c in compared.select_related("reference", "target_reference"):
        assert c.reference.corpus_id == c.target_reference.corpus_id == corpus.pk
    return corpus


def test_two_owners_corpora_of_one_name_travel_with_their_own_studies(judge, scripted):
    _study_with_a_validation_run("ann", "ann-study", judge)
    _study_with_a_validation_run("bob", "bob-study", judge)
    files = {s: study_export(study=Study.objects.get(slug=s)) for s in ("ann-study", "bob-study")}
    shared = json.loads(files["ann-study"])["shared"]["judging.referencecorpus"]
    assert [(c["created_by"], c["name"]) for c in shared] == [(["ann"], "refs")]

    # The same database: a deleted study's export comes back to its owner's corpus, whose
    # papers it compared are still there (the same rows, not written again).
    kept = _uses_its_owners_corpus("ann-study")
    study_delete(study=Study.objects.get(slug="ann-study"), confirm="ann-study", actor=None)
    study_import(text=files["ann-study"])
    assert _uses_its_owners_corpus("ann-study") == kept
    assert ReferenceCorpus.objects.count() == 2 and kept.papers.count() == 18
    assert study_export(study=Study.objects.get(slug="ann-study")) == files["ann-study"]

    # An empty database, the studies in the other order: Bob's corpus now gets the id
    # Ann's had, and each run must still find its own owner's.
    call_command("flush", interactive=False, verbosity=0)
    for slug in ("bob-study", "ann-study"):
        study_import(text=files[slug])
    assert ReferenceCorpus.objects.filter(name="refs").count() == 2
    assert _uses_its_owners_corpus("ann-study") != _uses_its_owners_corpus("bob-study")
    for slug, text in files.items():
        assert study_export(study=Study.objects.get(slug=slug)) == text


def test_a_file_that_names_its_corpus_the_earlier_way_still_reads(judge, scripted):
    """Files written before names were per owner: a corpus by name alone, a run's corpus
    by the id it had where the file was written."""
    study = _study_with_a_validation_run("ann", "ann-study", judge)
    new = json.loads(study_export(study=study))
    old = json.loads(json.dumps(new))
    corpus_pk = JudgeRun.objects.get(study=study).params["corpus"]
    for row in old["sections"]["judging.referencepaper"]:
        row["fields"]["corpus"] = ["refs"]
    for row in old["sections"]["judging.judgerun"]:
        row["fields"]["params"]["corpus"] = row["fields"]["summary"]["corpus"] = corpus_pk + 7
    call_command("flush", interactive=False, verbosity=0)
    study_import(text=json.dumps(old))
    _uses_its_owners_corpus("ann-study")
    assert json.loads(study_export(study=Study.objects.get(slug="ann-study"))) == new

    # An id is only trusted when the file carries one corpus it can mean.
    call_command("flush", interactive=False, verbosity=0)
    old["shared"]["judging.referencecorpus"].append(
        dict(old["shared"]["judging.referencecorpus"][0], name="other")
    )
    with pytest.raises(TransferError, match="by an id of its own database"):
        study_import(text=json.dumps(old))
    assert not Study.objects.exists()
